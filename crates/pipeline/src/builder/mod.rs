//! The Task Builder (SPEC §12): turns a task's raw prompt into a TaskConfig. The
//! kinds `meta` and `scripted` are one Meta exchange of type `build_task_config`
//! through the runner's generic exchange (`meta::conversation::ask`: reply checks,
//! re-asks, a record); they differ only in the backend: the workspace's Meta (the
//! OpenAI Chat client, or codex in the sandbox with `runner.meta.kind: codex-cli`)
//! or a script of replies. `codex` is one `codex exec` in the sandbox (`codex.rs`). What
//! the builder writes is a draft: the orchestrator then sets what it owns and
//! validates the result (`orchestrator::task_config`).

pub(crate) mod codex;
pub(crate) mod meta;
pub(crate) mod overview;
pub(crate) mod reply;
pub(crate) mod request;
pub(crate) mod scripted;

use std::time::Duration;

use serde_norway::Mapping;

use super::store::defaults::{BuilderKind, Defaults};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_core::usage::Usage;
use agent_runner_meta::{ChatBackend, MetaError};
use agent_runner_settings::task::DEFAULT_META_MODEL;
use reply::BuiltConfig;
pub(crate) use request::{BuildRequest, DependencySummary};

/// Why the Task Builder gave no draft TaskConfig.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BuildError {
    /// The workspace's Meta could not be opened (`builder.kind: meta`).
    #[error(transparent)]
    Meta(#[from] meta::MetaOpenError),
    #[error(transparent)]
    Script(#[from] scripted::ScriptUnreadable),
    #[error("builder.script: required with `kind: scripted`")]
    NoScript,
    #[error("the codex builder is not a Meta exchange")]
    NotAnExchange,
    #[error("interrupted")]
    Interrupted,
    /// The exchange failed (Meta's words: `MetaError::Failed`).
    #[error("{0}")]
    Exchange(String),
    #[error(transparent)]
    Codex(#[from] codex::CodexError),
}

/// What building produced: the draft TaskConfig or why there is none, and the
/// text for `builder.log`.
pub(crate) struct Build {
    pub(crate) config: Result<Mapping, BuildError>,
    /// `meta (model)` or `scripted (path)`, for messages.
    pub(crate) builder: String,
    pub(crate) duration: Duration,
    /// The exchange, secrets masked, for `builder.log`.
    pub(crate) log: String,
    /// What the builder's one paid call used (SPEC §15); None when no call was made.
    pub(crate) usage: Option<Usage>,
}

/// Asks the workspace's Task Builder for a TaskConfig for `request`; `work` is the
/// job's log directory.
pub(crate) fn build(
    defaults: &Defaults,
    request: &BuildRequest,
    var: &dyn Fn(&str) -> Option<String>,
    interrupt: Interrupt,
    work: &std::path::Path,
) -> Build {
    let settings = defaults.builder();
    if settings.kind == BuilderKind::Codex {
        return codex::build(defaults, request, var, interrupt, work);
    }
    let scratch = work.join("codex-meta");
    let codex = meta::CodexPlace {
        dir: &scratch,
        remove_after: false,
        deadline: None,
    };
    let backend: Result<(Box<dyn ChatBackend>, String, String, Redactor), BuildError> =
        match settings.kind {
            BuilderKind::Meta => meta::backend(defaults, var, interrupt, &codex)
                .map(|chat| {
                    let label = format!("meta ({})", chat.model);
                    (chat.chat, label, chat.model, chat.redactor)
                })
                .map_err(BuildError::from),
            BuilderKind::Scripted => match &settings.script {
                Some(script) => scripted::backend(script)
                    .map_err(BuildError::from)
                    .map(|s| {
                        let model = defaults
                            .runner_meta("model")
                            .unwrap_or(DEFAULT_META_MODEL)
                            .to_string();
                        let label = format!("scripted ({})", script.display());
                        (
                            Box::new(s) as Box<dyn ChatBackend>,
                            label,
                            model,
                            Redactor::default(),
                        )
                    }),
                None => Err(BuildError::NoScript),
            },
            BuilderKind::Codex => Err(BuildError::NotAnExchange),
        };
    let (mut backend, label, model, redactor) = match backend {
        Ok(b) => b,
        Err(e) => {
            return Build {
                log: format!("builder: {}\nerror: {e}\n", settings.kind.as_str()),
                config: Err(e),
                builder: settings.kind.as_str().into(),
                duration: Duration::ZERO,
                usage: None,
            };
        }
    };
    let outcome = agent_runner_meta::conversation::ask::<BuiltConfig>(
        backend.as_mut(),
        request::system_prompt(request, &model),
        &request.to_yaml(),
        &redactor,
    );
    Build {
        log: outcome.call.transcript(&format!("builder: {label}")),
        config: outcome
            .reply
            .map(|BuiltConfig(map)| map)
            .map_err(|e| match e {
                MetaError::Interrupted => BuildError::Interrupted,
                MetaError::Failed(m) => BuildError::Exchange(m),
            }),
        builder: label,
        duration: outcome.call.duration,
        usage: Some(outcome.call.usage),
    }
}
