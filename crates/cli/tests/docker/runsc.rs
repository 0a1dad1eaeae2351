//! The boundary (SPEC §9) and egress (SPEC §17) tests again, each sandbox under
//! gVisor's runtime `runsc` (SPEC §28): the same files, the runtime set by
//! `TaskYaml::new` for a test of this module (`needs` runsc there). `make test`
//! leaves them out where runsc is not registered (testdata/test.sh), never under CI.

#[path = "boundary.rs"]
mod boundary;
#[path = "egress.rs"]
mod egress;
