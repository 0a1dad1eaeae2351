//! What can go wrong in an evaluation before or around its runs (SPEC §26). A run's
//! own failure is no error here: it is an outcome (`outcome.rs`).

use std::path::PathBuf;

/// A suite rule broken: the field's path, what is wrong, and where in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `cases[0].grader.files`; empty for the whole document.
    pub path: String,
    pub message: String,
    /// 1-based line and column.
    pub at: Option<(usize, usize)>,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{}", self.message)?;
        if let Some((line, column)) = self.at {
            write!(f, " (line {line}, column {column})")?;
        }
        Ok(())
    }
}

/// An evaluation that cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read the suite {}: {detail}", path.display())]
    Unreadable { path: PathBuf, detail: String },
    #[error("the suite {} is invalid; nothing was run:\n{}", path.display(), list(problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<Problem>,
    },
    /// Configs whose runs could not run as they are (`preflight.rs`): each problem
    /// names the config and the field.
    #[error("the suite {} cannot run as it is; nothing was run:\n{}", path.display(), lines(problems))]
    CannotRun {
        path: PathBuf,
        problems: Vec<String>,
    },
    /// A case's repository or base could not be brought into the eval's repository.
    #[error("case {case}: {detail}")]
    Case { case: String, detail: String },
    #[error("{} is not an evaluation workspace of ours: {detail}", path.display())]
    NotEvalRoot { path: PathBuf, detail: String },
    #[error("--config {0}: the suite has no config of that name")]
    UnknownConfig(String),
    #[error(transparent)]
    Pipeline(#[from] crate::PipelineError),
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("git: {0}")]
    Git(String),
    /// The container engine failed (not the grader).
    #[error("{0}")]
    Engine(String),
    #[error("interrupted")]
    Interrupted,
}

fn lines(problems: &[String]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn list(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl EvalError {
    /// The error as lines to print one by one: a heading, then each problem.
    pub fn lines(&self) -> Vec<String> {
        let (heading, problems): (String, Vec<String>) = match self {
            EvalError::Invalid { path, problems } => (
                format!("the suite {} is invalid; nothing was run:", path.display()),
                problems.iter().map(ToString::to_string).collect(),
            ),
            EvalError::CannotRun { path, problems } => (
                format!(
                    "the suite {} cannot run as it is; nothing was run:",
                    path.display()
                ),
                problems.clone(),
            ),
            other => return vec![other.to_string()],
        };
        std::iter::once(heading).chain(problems).collect()
    }

    /// `Io` for `action` on `path`, as a `map_err` argument.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> EvalError {
        let path = path.into();
        move |source| EvalError::Io {
            action,
            path,
            source,
        }
    }
}
