//! The `build_task_config` reply: a TaskConfig document (SPEC §3.2) with `type:
//! build_task_config` on top. Checked here for its shape, so a malformed reply is
//! asked again, as is one that sets what a builder may not (`check_builder_keys`,
//! used again on the draft by `orchestrator::task_config`); its content is checked
//! after the orchestrator has set what it owns, by the runner's own parser.

use serde_norway::{Mapping, Value};

use agent_runner_meta::reply::Reask;
use agent_runner_meta::reply::Reply;

/// A TaskConfig as the builder wrote it, `type` removed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BuiltConfig(pub(crate) Mapping);

impl Reply for BuiltConfig {
    const KIND: &'static str = "build_task_config";

    /// The TaskConfig a builder may write, with the reply's `type`.
    fn schema() -> serde_json::Value {
        let mut schema = agent_runner_settings::task::task_config_schema();
        schema["properties"]["type"] = agent_runner_meta::schema::kind(Self::KIND);
        if let Some(required) = schema["required"].as_array_mut() {
            required.insert(0, "type".into());
        }
        schema
    }

    fn from_value(value: Value) -> Result<Self, Reask> {
        let Value::Mapping(mut map) = value else {
            return Err("expected a mapping".into());
        };
        map.shift_remove("type");
        for key in map.keys() {
            match key.as_str() {
                Some("task") | Some("runner") => {}
                _ => {
                    return Err(format!(
                        "unknown top-level key {}; a TaskConfig has only `task` and `runner`",
                        serde_norway::to_string(key).unwrap_or_default().trim()
                    ));
                }
            }
        }
        let task = map.get("task").ok_or("`task` is missing")?;
        let Value::Mapping(task) = task else {
            return Err("`task` must be a mapping".into());
        };
        match task.get("instructions") {
            Some(Value::String(s)) if !s.trim().is_empty() => {}
            Some(Value::String(_)) | None => {
                return Err("task.instructions is missing or empty".into());
            }
            Some(_) => return Err("task.instructions must be a string".into()),
        }
        if !matches!(map.get("runner"), Some(Value::Mapping(_))) {
            return Err("`runner` must be a mapping with `meta` and `worker`".into());
        }
        // Refused here too, so the builder is asked again rather than the attempt failed.
        check_builder_keys(&map)?;
        Ok(BuiltConfig(map))
    }
}

/// Refuses a draft that sets a key a Task Builder may not write, naming every such
/// key and what it may write (the message goes back to the builder in a re-ask).
/// `null` counts as absent, as the TaskConfig parser reads it.
pub(crate) fn check_builder_keys(draft: &Mapping) -> Result<(), Reask> {
    let mut refused = Vec::new();
    refused_keys(draft, "", &mut refused);
    if refused.is_empty() {
        return Ok(());
    }
    let allowed: Vec<&str> = agent_runner_settings::task::builder_fields().collect();
    Err(format!(
        "{}: not for the Task Builder to set (the workspace defaults decide endpoints, keys, worker env, image, network and its allow list, codex flags and limits); write only {}",
        refused.join(", "),
        allowed.join(", ")
    ))
}

/// Of a TaskConfig, only what a Task Builder may write (`check_builder_keys`): the
/// draft a resumed attempt (SPEC §19) completes again with today's defaults.
pub(crate) fn builder_part(map: &Mapping) -> Mapping {
    fn keep(map: &Mapping, prefix: &str) -> Mapping {
        let mut kept = Mapping::new();
        for (key, value) in map {
            let Some(name) = key.as_str() else { continue };
            let path = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}.{name}")
            };
            if !agent_runner_settings::task::builder_may_write(&path) {
                continue;
            }
            let value = match value {
                Value::Mapping(inner) => Value::Mapping(keep(inner, &path)),
                other => other.clone(),
            };
            kept.insert(key.clone(), value);
        }
        kept
    }
    keep(map, "")
}

fn refused_keys(map: &Mapping, prefix: &str, refused: &mut Vec<String>) {
    for (key, value) in map {
        if value.is_null() {
            continue;
        }
        let name = match key.as_str() {
            Some(name) => name.to_string(),
            None => serde_norway::to_string(key)
                .unwrap_or_default()
                .trim()
                .to_string(),
        };
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}.{name}")
        };
        if key.as_str().is_none() || !agent_runner_settings::task::builder_may_write(&path) {
            refused.push(agent_runner_core::text::cut_chars(
                &agent_runner_core::text::escape_controls(&path),
                80,
            ));
        } else if let Value::Mapping(inner) = value {
            refused_keys(inner, &path, refused);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_meta::reply::parse_reply;

    #[test]
    fn the_schema_keeps_strict_modes_rules() {
        assert_eq!(
            agent_runner_meta::schema::check_strict(&BuiltConfig::schema(), ""),
            Ok(())
        );
    }

    #[test]
    fn a_taskconfig_with_type_is_accepted_and_type_dropped() {
        let BuiltConfig(map) = parse_reply::<BuiltConfig>(
            "```yaml\ntype: build_task_config\ntask:\n  id: x\n  instructions: do it\nrunner:\n  meta: {model: m}\n```",
        )
        .unwrap();
        assert!(map.get("type").is_none());
        assert_eq!(map["task"]["instructions"], "do it");
    }

    #[test]
    fn a_tag_cannot_hide_forbidden_keys() {
        // A tagged value is no mapping: the key check would not look inside it.
        let err = parse_reply::<BuiltConfig>(
            "type: build_task_config\ntask: {instructions: x}\nrunner:\n  worker: !x {env: {OPENAI_API_KEY: env:OPENAI_API_KEY}, network: host}\n",
        )
        .unwrap_err();
        assert_eq!(
            err,
            "not valid YAML: YAML tag !x refused: write plain values at line 4 column 11"
        );
        assert!(
            parse_reply::<BuiltConfig>(
                "type: build_task_config\ntask: {instructions: !!str x}\nrunner: {}\n"
            )
            .unwrap_err()
            .contains("YAML tag tag:yaml.org,2002:str refused")
        );
    }

    #[test]
    fn malformed_replies_say_what_is_wrong() {
        let err = |text: &str| parse_reply::<BuiltConfig>(text).unwrap_err();
        assert_eq!(err("task: {}\n"), "`type: build_task_config` is missing");
        assert_eq!(
            err("type: build_task_config\nrunner: {}\n"),
            "`task` is missing"
        );
        assert_eq!(
            err("type: build_task_config\ntask: {}\nrunner: {}\n"),
            "task.instructions is missing or empty"
        );
        assert_eq!(
            err("type: build_task_config\ntask: {instructions: [1]}\nrunner: {}\n"),
            "task.instructions must be a string"
        );
        assert_eq!(
            err("type: build_task_config\ntask: {instructions: x}\n"),
            "`runner` must be a mapping with `meta` and `worker`"
        );
        assert!(
            err("type: build_task_config\nversion: 1\ntask: {instructions: x}\nrunner: {}\n")
                .contains("unknown top-level key version")
        );
    }
}
