//! Who answers plan requests: the workspace's Task Builder settings
//! (`defaults.builder`, SPEC §13), so plans use the same model, endpoint, key,
//! retries and re-asks as the builder. `kind: meta` is the OpenAI Chat client;
//! `kind: scripted` takes, from `builder.script`, the replies of the type asked
//! (`decompose` or `plan_patch`; texts that are no mapping with another `type`
//! count too, to script invalid replies), from the first each time, so one script
//! serves the builder and plans alike.

use super::super::builder;
use super::super::defaults::{BuilderKind, Defaults};
use crate::interrupt::Interrupt;
use crate::meta::ChatBackend;
use crate::secret::Redactor;

/// A backend and what to say about it.
pub struct PlanBackend {
    pub chat: Box<dyn ChatBackend>,
    /// `meta (model)` or `scripted (path)`, for messages.
    pub label: String,
    /// Masks the key in everything sent, kept and shown.
    pub redactor: Redactor,
}

/// The backend for requests of type `kind` in a workspace with `defaults`.
pub fn open(
    defaults: &Defaults,
    kind: &'static str,
    var: &dyn Fn(&str) -> Option<String>,
    interrupt: Interrupt,
) -> Result<PlanBackend, String> {
    let settings = defaults.builder();
    // Written as comparisons, not a match: builder kinds that cannot hold a chat
    // (such as one running codex) fall through to the error.
    if settings.kind == BuilderKind::Meta {
        let (chat, model, key) = builder::meta::backend(defaults, var, interrupt)?;
        return Ok(PlanBackend {
            chat: Box::new(chat),
            label: format!("meta ({model})"),
            redactor: Redactor::new([&key]),
        });
    }
    if settings.kind == BuilderKind::Scripted {
        let script = settings
            .script
            .as_ref()
            .ok_or("builder.script: required with `kind: scripted`")?;
        let scripted = builder::scripted::backend(script)?.retain(|text| of_kind(text, kind));
        return Ok(PlanBackend {
            chat: Box::new(scripted),
            label: format!("scripted ({})", script.display()),
            redactor: Redactor::default(),
        });
    }
    Err(format!(
        "plans need builder.kind meta or scripted (this workspace has {})",
        settings.kind.as_str()
    ))
}

/// Whether a scripted reply text may answer a request of type `kind`.
fn of_kind(text: &str, kind: &str) -> bool {
    let body = crate::meta::reply::strip_fence(text);
    match crate::yaml::parse(body, crate::yaml::Rules::Reply) {
        Ok(serde_yaml::Value::Mapping(map)) => match map.get("type").and_then(|t| t.as_str()) {
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
