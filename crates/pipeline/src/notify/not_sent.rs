//! Why a notification did not reach its webhook or command (logged, never fatal).

/// What went wrong, as the log line says it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotSent {
    #[error("variable {0} (its secret) is not set; not sent")]
    NoSecret(String),
    #[error("interrupted")]
    Interrupted,
    /// Every try of a webhook failed; the last one's HTTP status or error.
    #[error("{tries} tries, the last: {last}")]
    Tries { tries: u32, last: String },
    #[error("cannot run it: {0}")]
    CannotRun(agent_runner_core::Error),
    #[error("timed out after {0}s")]
    TimedOut(u64),
    /// The command failed: its exit code and its stderr's tail on one line.
    #[error("exit {code:?}: {stderr}")]
    Exit { code: Option<i32>, stderr: String },
}
