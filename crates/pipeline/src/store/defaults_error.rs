//! What is wrong with a workspace's defaults (`Defaults::check`), and the refusal
//! of `--kinds` that the defaults would send with the wrong model or endpoint
//! (`Defaults::check_kind_settings`). Their texts are what `workspace set
//! --defaults` and `task run --kinds` print.

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

/// `--kinds` names a kind the defaults give no settings of, while they set the
/// workspace kind's model or endpoint, which that kind's tries would get (SPEC
/// §23). Its own type, not a `DefaultsError`: the defaults are fine, the run is not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--kinds: the {kind} tries would get {}, which the workspace defaults set for {own}; \
     give {kind} its own in the defaults (`kinds: {{{kind}: {{model: …, base_url: …}}}}`, \
     `{{}}` for the agent's own) with `agent-runner workspace set --defaults FILE.yaml`",
    named(.settings)
)]
pub struct KindWithoutSettings {
    /// The kind of `--kinds` without its own settings.
    pub kind: String,
    /// The workspace's kind, whose settings the defaults give.
    pub own: String,
    /// The `runner.worker` keys it would get (`model`, `base_url`), each with its
    /// value.
    pub settings: Vec<(&'static str, String)>,
}

/// The settings as the refusal names them: `runner.worker.model (gpt-5-codex) and
/// runner.worker.base_url (http://gw/v1)`.
fn named(settings: &[(&'static str, String)]) -> String {
    settings
        .iter()
        .map(|(key, value)| format!("runner.worker.{key} ({value})"))
        .collect::<Vec<_>>()
        .join(" and ")
}
