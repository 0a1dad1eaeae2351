//! What is wrong with one value of the workspace's files or a command's flags
//! (`defaults.yaml`, a job file, `--tries`), and where.

/// The field (`try_of.n`, `--tries`, `task.test.command`) and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct FieldError {
    pub field: String,
    pub problem: String,
}

impl FieldError {
    pub(crate) fn new(field: impl Into<String>, problem: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// Into a reply's re-ask, whose text is what the model is sent back.
impl From<FieldError> for String {
    fn from(error: FieldError) -> String {
        error.to_string()
    }
}
