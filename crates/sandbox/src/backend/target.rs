//! Where a host's sandboxes run, as a value: what `docker_cli` aims every call at and
//! `endpoint` reads back, or the cluster `open` gives the Kubernetes engine, with
//! nothing to call (its checks live in `host` and `cluster`).

use super::cluster::Cluster;

/// Where a host's sandboxes run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Docker daemon at `DOCKER_HOST=<url>`.
    Url(String),
    /// A Docker daemon by `DOCKER_CONTEXT=<name>`.
    Context(String),
    /// A Kubernetes cluster's namespace (`k8s://CONTEXT/NAMESPACE`, SPEC §25).
    Kubernetes(Cluster),
}
