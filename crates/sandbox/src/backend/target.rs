//! Where a host's daemon is, as a value: what `docker_cli` aims every call at and
//! `endpoint` reads back, with nothing to call (its checks live in `host`).

/// Where a host's daemon is: what its docker calls get in their environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `DOCKER_HOST=<url>`.
    Url(String),
    /// `DOCKER_CONTEXT=<name>`.
    Context(String),
}
