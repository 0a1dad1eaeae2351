//! The runner's one error type: why a task did not start, with what its message
//! needs. Failures during a task are not errors: they end it FAILED, said in its
//! note and result.

use agent_runner_core::task_lock::LockError;
use agent_runner_sandbox::task::InputError;

/// Why a task did not start (nothing ran).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `.agent-runner/` could not be prepared (e.g. it is a symlink).
    #[error("cannot prepare agent-runner's directory: {0}")]
    PrivateDir(#[source] std::io::Error),
    /// Another run of the task holds its lock.
    #[error(transparent)]
    Locked(#[from] LockError),
    /// `--resume` cannot go on from the saved state.
    #[error("--resume: cannot resume task {task_id}: {why}")]
    CannotResume { task_id: String, why: String },
    /// Meta's settings make no backend (its script does not load): invalid input.
    #[error(transparent)]
    MetaSettings(InputError),
}
