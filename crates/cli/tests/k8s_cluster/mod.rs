//! Tests against the Kubernetes test cluster (`make test-cluster`, SPEC §25); each
//! starts with `needs!(Cluster)`. `make test` runs them when the cluster was asked
//! for (`K8S=1`) or is up here, and says so when not.

mod backend;
mod seccomp;
mod tasks;
