//! Errors that end the program before or outside a task, and the one place that maps
//! an outcome to an exit code. Failures during a task are not errors here: they end
//! the task FAILED and are reported in its note and result.

use crate::task::InputError;

/// Process exit codes (README "Exit codes").
pub mod exit {
    use crate::context::{TaskContext, TaskState};

    pub const COMPLETE: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const INTERRUPTED: i32 = crate::interrupt::EXIT_INTERRUPTED;

    /// The exit code of a task that ran.
    pub fn of_task(ctx: &TaskContext) -> i32 {
        match ctx.state {
            TaskState::Complete => COMPLETE,
            _ if ctx.interrupted => INTERRUPTED,
            _ => FAILED,
        }
    }

    /// The exit code for a command line clap rejected (or `--help`/`--version`).
    pub fn of_usage(error: &clap::Error) -> i32 {
        if error.use_stderr() { USAGE } else { COMPLETE }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Input(#[from] InputError),
    #[error("stdin: {0}")]
    Stdin(String),
    #[error("cannot write to stdout: {0}")]
    Stdout(std::io::Error),
    #[error("interrupted before the task started")]
    Interrupted,
    #[error("{0}")]
    Pipeline(#[from] crate::pipeline::PipelineError),
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Interrupted => exit::INTERRUPTED,
            _ => exit::FAILED,
        }
    }

    /// A line of advice to print after the error, if there is one.
    pub fn hint(&self) -> Option<&str> {
        match self {
            Error::Input(e) => e.hint.as_deref(),
            _ => None,
        }
    }
}
