//! The `build_task_config` reply: a TaskConfig document (SPEC §3.2) with `type:
//! build_task_config` on top. Checked here for its shape, so a malformed reply is
//! asked again, as is one that sets what a builder may not (`task_config`); its
//! content is checked after the orchestrator has set what it owns, by the runner's
//! own parser.

use serde_yaml::{Mapping, Value};

use crate::meta::reply::Reply;

/// A TaskConfig as the builder wrote it, `type` removed.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltConfig(pub Mapping);

impl Reply for BuiltConfig {
    const KIND: &'static str = "build_task_config";

    fn from_value(value: Value) -> Result<Self, String> {
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
                        serde_yaml::to_string(key).unwrap_or_default().trim()
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
        super::super::task_config::check_builder_keys(&map)?;
        Ok(BuiltConfig(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::reply::parse_reply;

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
