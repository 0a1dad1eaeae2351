//! What can go wrong in the mechanism itself: the engine's CLI missing, the engine
//! not answering, an image missing or unable to run, a sandbox gone, a call that
//! failed. The sandbox turns each into the `SandboxError` that ends the task (the
//! same words: `worker::SandboxError`'s `From`).

/// A Docker daemon's image, in messages.
pub const DOCKER_IMAGE: &str = "docker image";
/// A cluster's, which is no Docker image to its users.
pub const CLUSTER_IMAGE: &str = "image";

/// The mechanism could not do its job; the messages name the engine (Docker).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackendError {
    #[error("docker CLI not found: {0}")]
    CliMissing(String),
    #[error("docker daemon not reachable: {0}")]
    EngineUnreachable(String),
    /// `what`: what the engine calls it (`DOCKER_IMAGE`, `CLUSTER_IMAGE`).
    #[error("{what} {image} is not available: {detail}")]
    ImageMissing {
        what: &'static str,
        image: String,
        detail: String,
    },
    #[error("docker image {image} cannot run the worker: {detail}")]
    ImageUnusable { image: String, detail: String },
    #[error("the sandbox container {name} is gone: {detail}")]
    Gone { name: String, detail: String },
    #[error("`{command}` failed: {detail}")]
    Failed { command: String, detail: String },
    /// Refused before anything ran, with the fix (a daemon that does not see our
    /// files, plain tcp:// beyond the loopback).
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
    #[error("interrupted")]
    Interrupted,
}
