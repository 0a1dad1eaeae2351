//! The refusal of `--kinds` that the workspace defaults would send with the wrong
//! model or endpoint (`Defaults::check_kind_settings`); its text is what `task run
//! --kinds` prints.

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
