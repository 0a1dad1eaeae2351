//! The boundary (SPEC §9) and egress (SPEC §17) tests again, each sandbox under
//! gVisor's runtime `runsc` (SPEC §28): the same files, the runtime set by
//! `TaskYaml::new` for a test of this module (`needs` runsc there). `make test`
//! leaves them out where runsc is not registered (testdata/test.sh), never under CI.

// The same files as `docker::boundary` and `docker::egress`, on purpose: the tests
// are the same, only their module (and so their runtime) differs.
#[allow(clippy::duplicate_mod)]
#[path = "boundary.rs"]
mod boundary;
#[allow(clippy::duplicate_mod)]
#[path = "egress.rs"]
mod egress;
