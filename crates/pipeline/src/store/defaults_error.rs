//! What is wrong with a workspace's defaults (`Defaults::check`); its texts are
//! what `workspace set --defaults` prints.

use agent_runner_sandbox::backend::host::HostError;
use agent_runner_settings::task::InputErrors;

use super::field_error::FieldError;

/// Why a defaults file is refused.
#[derive(Debug, thiserror::Error)]
pub enum DefaultsError {
    #[error(transparent)]
    Field(#[from] FieldError),
    /// `hosts:`, with the entry's field path.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The runner's own Task YAML parser refused `runner:` or `task.setup` in the
    /// task the check puts them in; the hints are shown on the same line, as there
    /// is no separate hint line where this is printed.
    #[error("{}", .0.with_hints())]
    Task(InputErrors),
    /// The task the check builds could not be written as YAML.
    #[error(transparent)]
    Yaml(#[from] serde_norway::Error),
}
