//! Errors of the pipeline commands: what was wrong and where (the file, the id).
//! Failures *inside* an attempt are not errors here: they end the attempt failed and
//! are recorded in the TaskStore and the result file.

use std::path::PathBuf;

/// A pipeline command's failure, with the file or id it concerns.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A file operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// Something the user gave (an id, a defaults file, a prompt) is not valid.
    #[error("{0}")]
    Invalid(String),
    /// No task file for the id.
    #[error("task {id} not found in workspace {workspace} ({})", path.display())]
    TaskNotFound {
        id: String,
        workspace: String,
        path: PathBuf,
    },
    /// `task new --id` with an id already taken.
    #[error("task {0} already exists; choose another --id")]
    TaskExists(String),
}

impl PipelineError {
    /// An `Io` error for `action` on `path`.
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| PipelineError::Io {
            action,
            path,
            source,
        }
    }
}
