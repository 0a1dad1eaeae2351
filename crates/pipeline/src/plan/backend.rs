//! Who answers plan requests: the workspace's Task Builder settings
//! (`defaults.builder`, SPEC §13), so plans use the same model, endpoint, key,
//! retries and re-asks as the builder. `kind: meta` is the workspace's Meta (the
//! OpenAI Chat client, or codex with `runner.meta.kind: codex-cli`); `kind: codex`
//! is codex in the sandbox image (SPEC §18), 15 min at most for a whole request;
//! `kind: scripted` takes, from `builder.script`, the replies of the type asked
//! (`decompose` or `plan_patch`; texts that are no mapping with another `type`
//! count too, to script invalid replies), from the first each time, so one script
//! serves the builder and plans alike.

use std::path::Path;

use super::super::builder;
use crate::store::defaults::{BuilderKind, Defaults};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_meta::ChatBackend;
use agent_runner_meta::codex_cli::PLAN_DEADLINE;

/// Why no backend answers plan requests.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanBackendError {
    #[error(transparent)]
    Meta(#[from] builder::meta::MetaOpenError),
    #[error("builder.script: required with `kind: scripted`")]
    NoScript,
    /// `builder.script` unreadable, in the scripted builder's words.
    #[error(transparent)]
    Scripted(crate::builder::scripted::ScriptUnreadable),
    #[error("plans need builder.kind meta, codex or scripted (this workspace has {0})")]
    Kind(&'static str),
}

/// A backend and what to say about it.
pub(crate) struct PlanBackend {
    pub(crate) chat: Box<dyn ChatBackend>,
    /// `meta (model)` or `scripted (path)`, for messages.
    pub(crate) label: String,
    /// Masks the key in everything sent, kept and shown.
    pub(crate) redactor: Redactor,
}

/// The backend for requests of type `kind` in a workspace with `defaults`; a codex
/// Meta works in `scratch` (removed afterwards).
pub(crate) fn open(
    defaults: &Defaults,
    kind: &'static str,
    var: &dyn Fn(&str) -> Option<String>,
    interrupt: Interrupt,
    scratch: &Path,
) -> Result<PlanBackend, PlanBackendError> {
    let settings = defaults.builder();
    let codex = builder::meta::CodexPlace {
        dir: scratch,
        remove_after: true,
        deadline: Some(PLAN_DEADLINE),
    };
    if settings.kind == BuilderKind::Meta {
        let chat = builder::meta::backend(defaults, var, interrupt, &codex)?;
        return Ok(PlanBackend {
            chat: chat.chat,
            label: format!("meta ({})", chat.model),
            redactor: chat.redactor,
        });
    }
    if settings.kind == BuilderKind::Codex {
        let chat = builder::meta::codex_chat(defaults, var, interrupt, settings.model, &codex)?;
        return Ok(PlanBackend {
            chat: chat.chat,
            label: format!("codex ({})", chat.model),
            redactor: chat.redactor,
        });
    }
    if settings.kind == BuilderKind::Scripted {
        let script = settings.script.as_ref().ok_or(PlanBackendError::NoScript)?;
        let scripted = builder::scripted::backend(script)
            .map_err(PlanBackendError::Scripted)?
            .retain(|text| of_kind(text, kind));
        return Ok(PlanBackend {
            chat: Box::new(scripted),
            label: format!("scripted ({})", script.display()),
            redactor: Redactor::default(),
        });
    }
    Err(PlanBackendError::Kind(settings.kind.as_str()))
}

/// Whether a scripted reply text may answer a request of type `kind`.
fn of_kind(text: &str, kind: &str) -> bool {
    let body = agent_runner_meta::reply::strip_fence(text);
    match agent_runner_core::yaml::parse(body, agent_runner_core::yaml::Rules::Reply) {
        Ok(serde_norway::Value::Mapping(map)) => match map.get("type").and_then(|t| t.as_str()) {
            Some(t) => t == kind,
            None => true,
        },
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_answers_with_the_replies_of_the_type_asked() {
        assert!(of_kind("type: decompose\nphases: []\n", "decompose"));
        assert!(!of_kind("type: build_task_config\ntask: {}\n", "decompose"));
        assert!(of_kind("not yaml: [", "plan_patch"));
        assert!(of_kind("understanding: no type\n", "plan_patch"));
    }
}
