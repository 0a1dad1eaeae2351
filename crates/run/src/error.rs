//! The runner's one error type, each variant with what its message needs: why a
//! task did not start, why its saved state cannot be read, why a replan is not
//! offered. Failures during a task are not errors: they end it FAILED, said in its
//! note and result.

use agent_runner_settings::task::{InputError, TaskState};

/// What went wrong in the runner.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `.agent-runner/` could not be prepared (e.g. it is a symlink).
    #[error("cannot prepare agent-runner's directory: {0}")]
    PrivateDir(#[source] std::io::Error),
    /// A leaf failed: another run of the task holds its lock, say.
    #[error(transparent)]
    Core(#[from] agent_runner_core::Error),
    /// `--resume` cannot go on from the saved state.
    #[error("--resume: cannot resume task {task_id}: {why}")]
    CannotResume { task_id: String, why: String },
    /// Meta's settings make no backend (its script does not load): invalid input.
    #[error(transparent)]
    MetaSettings(InputError),
    /// The state file's directory cannot be opened.
    #[error("{path}: {source}")]
    StateDir {
        path: String,
        source: std::io::Error,
    },
    /// The state file cannot be read.
    #[error("{0}")]
    StateRead(std::io::Error),
    #[error("{path}: larger than {max} bytes")]
    StateTooLarge { path: String, max: u64 },
    #[error("{path}: not a state file: {source}")]
    NotAStateFile {
        path: String,
        source: serde_json::Error,
    },
    #[error("{path}: version {version} (this agent-runner reads version {reads})")]
    StateVersion {
        path: String,
        version: u32,
        reads: u32,
    },
    /// No replan (SPEC §16): the task gives its own criteria.
    #[error("the task fixes its acceptance criteria (task.acceptance_criteria)")]
    CriteriaFixed,
    /// No replan: `runner.meta.max_replans` are used.
    #[error("runner.meta.max_replans ({0}) replans are used")]
    ReplansUsed(u32),
    /// No replan: it would be the last loop, leaving none to meet new criteria.
    #[error("no loop would be left after it (loop {at} of {max})")]
    NoLoopLeft { at: u32, max: u32 },
    /// A transition the state machine does not have; a bug if it ever happens.
    #[error("invalid state transition {from} → {to}")]
    InvalidTransition { from: TaskState, to: TaskState },
    /// A `replan` answer when none is offered (asked again).
    #[error("decision.action replan is not available: {0}; answer run_worker or mark_complete")]
    ReplanNotOffered(Box<Error>),
}
