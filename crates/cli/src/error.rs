//! Errors that end the program before or outside a task, and the one place that maps
//! an outcome to an exit code. Failures during a task are not errors here: they end
//! the task FAILED and are reported in its note and result.

use agent_runner_settings::task::{InputError, InputErrors};

/// Process exit codes (docs/command-line.md, the exit codes).
pub(crate) mod exit {
    use agent_runner_run::context::{TaskContext, TaskState};

    pub(crate) const COMPLETE: i32 = 0;
    pub(crate) const FAILED: i32 = 1;
    pub(crate) const USAGE: i32 = 2;
    /// Planned, awaiting approval (`runner.meta.approve_plan`, SPEC §23).
    pub(crate) const AWAITING_APPROVAL: i32 = 3;
    pub(crate) const INTERRUPTED: i32 = agent_runner_core::interrupt::EXIT_INTERRUPTED;

    /// The exit code of a task that ran.
    pub(crate) fn of_task(ctx: &TaskContext) -> i32 {
        match ctx.state {
            TaskState::Complete => COMPLETE,
            TaskState::AwaitingApproval => AWAITING_APPROVAL,
            _ if ctx.interrupted => INTERRUPTED,
            _ => FAILED,
        }
    }

    /// The exit code for a command line clap rejected (or `--help`/`--version`).
    pub(crate) fn of_usage(error: &clap::Error) -> i32 {
        if error.use_stderr() { USAGE } else { COMPLETE }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// Every problem of the task input.
    #[error("{0}")]
    Input(#[from] InputErrors),
    #[error("stdin: {0}")]
    Stdin(String),
    #[error("cannot write to stdout: {0}")]
    Stdout(std::io::Error),
    #[error("interrupted before the task started")]
    Interrupted,
    /// The task did not start.
    #[error(transparent)]
    Run(agent_runner_run::Error),
    #[error("{0}")]
    Pipeline(#[from] agent_runner_pipeline::PipelineError),
    /// An evaluation that could not go on (SPEC §26).
    #[error("{0}")]
    Eval(#[from] agent_runner_pipeline::eval::EvalError),
}

impl Error {
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            Error::Interrupted
            | Error::Eval(agent_runner_pipeline::eval::EvalError::Interrupted) => exit::INTERRUPTED,
            _ => exit::FAILED,
        }
    }

    /// Each problem with its hint: one for most errors, every problem of invalid input.
    pub(crate) fn problems(&self) -> Vec<(String, Option<&str>)> {
        match self {
            Error::Input(errors) => {
                let mut out: Vec<(String, Option<&str>)> = errors
                    .iter()
                    .map(|e| (e.to_string(), e.hint.as_deref()))
                    .collect();
                if errors.omitted() > 0 {
                    out.push((errors.omitted_note(), None));
                }
                out
            }
            // A suite's problems each on a line of their own (a newline is escaped).
            Error::Eval(e) => e.lines().into_iter().map(|l| (l, None)).collect(),
            other => vec![(other.to_string(), None)],
        }
    }
}

impl From<agent_runner_run::Error> for Error {
    fn from(error: agent_runner_run::Error) -> Self {
        match error {
            agent_runner_run::Error::MetaSettings(problem) => problem.into(),
            other => Error::Run(other),
        }
    }
}

impl From<InputError> for Error {
    fn from(error: InputError) -> Self {
        Error::Input(error.into())
    }
}
