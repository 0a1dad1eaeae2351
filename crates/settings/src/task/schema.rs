//! What a Task Builder may write in a TaskConfig (SPEC §12): the fields of
//! `BUILDER_FIELDS`, checked on every builder's draft (`builder_may_write`), and the
//! JSON Schema of them given to a codex Task Builder (`codex exec --output-schema`).
//! The schema is generated from the key tables the parser uses (`raw.rs`), so a
//! builder is never asked for a key the parser would refuse, and it follows OpenAI's
//! structured outputs strict mode: every object lists all of its properties as
//! required and allows no others; optional values may be null.

use serde_json::{Map, Value, json};

use super::raw::{Key, Kind, TASK_CONFIG};
use super::{Shape, TASKCONFIG_WORKER_TYPE};

/// Whether the TaskConfig parser requires a value (within its section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Presence {
    Required,
    Optional,
}

use Presence::{Optional, Required};

/// What a Task Builder may write. Sections on the way to these are included; they
/// are required unless listed as optional. Everything else (models' endpoints,
/// keys, timeouts, images) comes from the workspace defaults, never from an LLM.
const BUILDER_FIELDS: &[(&str, Presence)] = &[
    ("task.id", Required),
    ("task.title", Required),
    ("task.instructions", Required),
    ("task.project.root_dir", Required),
    ("task.test", Optional),
    ("task.test.command", Required),
    ("task.test.cwd", Optional),
    ("task.test.timeout_sec", Optional),
    ("task.acceptance_criteria", Optional),
    ("runner.meta.model", Required),
    ("runner.meta.temperature", Optional),
    ("runner.worker.type", Required),
    ("runner.worker.model", Optional),
];

/// Whether a Task Builder may write the key at `path` (`runner.meta.model`): one of
/// its fields, or a section holding one.
pub fn builder_may_write(path: &str) -> bool {
    selected(path)
}

/// The fields a Task Builder may write, for messages.
pub fn builder_fields() -> impl Iterator<Item = &'static str> {
    BUILDER_FIELDS.iter().map(|(field, _)| *field)
}

/// The JSON Schema of a TaskConfig a Task Builder may write.
pub fn task_config_schema() -> Value {
    let mut schema = object(TASK_CONFIG, "");
    schema["description"] = json!(
        "An agent-runner TaskConfig (docs/configuration.md, \"Shape TaskConfig\"): one development task."
    );
    schema
}

fn object(keys: &'static [Key], prefix: &str) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for key in keys {
        let path = if prefix.is_empty() {
            key.name().to_string()
        } else {
            format!("{prefix}.{}", key.name())
        };
        if !key.allowed_in(Shape::TaskConfig) || !selected(&path) {
            continue;
        }
        let mut schema = match key.kind {
            Kind::Section(inner) => object(inner, &path),
            kind => leaf(kind),
        };
        let doc = key.doc.split_whitespace().collect::<Vec<_>>().join(" ");
        if !doc.is_empty() {
            schema["description"] = json!(doc);
        }
        if path == "runner.worker.type" {
            schema["enum"] = json!([TASKCONFIG_WORKER_TYPE]);
        }
        if presence(&path) == Optional {
            schema = nullable(schema);
        }
        properties.insert(key.name().to_string(), schema);
        required.push(key.name());
    }
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": required,
        "properties": properties,
    })
}

fn leaf(kind: Kind) -> Value {
    match kind {
        Kind::Text | Kind::Size => json!({"type": "string"}),
        Kind::Integer => json!({"type": "integer"}),
        Kind::Number => json!({"type": "number"}),
        Kind::Boolean => json!({"type": "boolean"}),
        Kind::TextList => json!({"type": "array", "items": {"type": "string"}}),
        Kind::TextMap => json!({"type": "object", "additionalProperties": {"type": "string"}}),
        Kind::Any | Kind::Section(_) | Kind::Map(_) => json!({}),
    }
}

/// Whether `path` is a builder field or a section holding one.
fn selected(path: &str) -> bool {
    BUILDER_FIELDS.iter().any(|(field, _)| {
        *field == path
            || field
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('.'))
    })
}

fn presence(path: &str) -> Presence {
    BUILDER_FIELDS
        .iter()
        .find(|(field, _)| *field == path)
        .map_or(Required, |(_, presence)| *presence)
}

/// `schema` or null: strict mode's way to say "optional".
fn nullable(mut schema: Value) -> Value {
    match schema["type"].as_str() {
        Some("object") => json!({"anyOf": [schema, {"type": "null"}]}),
        Some(t) => {
            schema["type"] = json!([t, "null"]);
            schema
        }
        None => schema,
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::path::Path;

    use super::*;
    use crate::task::{Category, Host, InputErrors, Task, parse};

    /// Every object: no other properties, all properties required (strict mode).
    fn assert_strict(schema: &Value, at: &str) {
        if let Some(any) = schema["anyOf"].as_array() {
            assert_eq!(any.len(), 2, "{at}");
            assert_eq!(any[1], json!({"type": "null"}), "{at}");
            return assert_strict(&any[0], at);
        }
        if schema["type"] == "object" {
            assert_eq!(schema["additionalProperties"], false, "{at}");
            let properties = schema["properties"].as_object().unwrap();
            let mut names: Vec<&str> = properties.keys().map(String::as_str).collect();
            let mut required: Vec<&str> = schema["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            names.sort_unstable();
            required.sort_unstable();
            assert_eq!(names, required, "{at}");
            for (name, inner) in properties {
                assert_strict(inner, &format!("{at}.{name}"));
            }
        }
    }

    /// (path, schema) of every leaf.
    fn leaves(schema: &Value, at: &str, out: &mut Vec<(String, Value)>) {
        let inner = schema["anyOf"].get(0).unwrap_or(schema);
        match inner["properties"].as_object() {
            Some(properties) => {
                for (name, value) in properties {
                    let path = if at.is_empty() {
                        name.clone()
                    } else {
                        format!("{at}.{name}")
                    };
                    leaves(value, &path, out);
                }
            }
            None => out.push((at.to_string(), schema.clone())),
        }
    }

    fn is_nullable(schema: &Value) -> bool {
        schema["anyOf"].is_array()
            || schema["type"]
                .as_array()
                .is_some_and(|t| t.contains(&json!("null")))
    }

    /// A document that fills every property: non-null values, or null for optional
    /// ones when `nulls` is set.
    fn sample(schema: &Value, nulls: bool) -> Value {
        if nulls && is_nullable(schema) {
            return Value::Null;
        }
        let schema = schema["anyOf"].get(0).unwrap_or(schema);
        if let Some(choices) = schema["enum"].as_array() {
            return choices[0].clone();
        }
        let ty = match &schema["type"] {
            Value::Array(types) => types[0].as_str().unwrap(),
            other => other.as_str().unwrap(),
        };
        match ty {
            "object" => Value::Object(
                schema["properties"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), sample(v, nulls)))
                    .collect(),
            ),
            "string" => json!("sample"),
            "integer" => json!(60),
            "number" => json!(0.5),
            "array" => json!(["sample"]),
            other => panic!("unexpected type {other}"),
        }
    }

    fn parse_json(document: &Value, cwd: &Path) -> Result<Task, InputErrors> {
        let lookup = |name: &str| (name == "OPENAI_API_KEY").then(|| OsString::from("sk-schema"));
        let yaml = serde_norway::to_string(document).unwrap();
        parse(
            &yaml,
            &Host {
                var: &lookup,
                cwd: Ok(cwd.to_path_buf()),
            },
        )
    }

    fn set(document: &mut Value, path: &str, value: Value) {
        let mut at = document;
        for part in path.split('.') {
            at = &mut at[part];
        }
        *at = value;
    }

    struct Dir(std::path::PathBuf);

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch() -> Dir {
        let dir =
            std::env::temp_dir().join(format!("agent-runner-schema-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("sample")).unwrap();
        Dir(dir)
    }

    #[test]
    fn schema_follows_strict_mode() {
        let schema = task_config_schema();
        assert_strict(&schema, "");
        let mut paths = Vec::new();
        leaves(&schema, "", &mut paths);
        let mut paths: Vec<String> = paths.into_iter().map(|(p, _)| p).collect();
        let mut expected: Vec<String> = BUILDER_FIELDS
            .iter()
            .filter(|(f, _)| *f != "task.test")
            .map(|(f, _)| f.to_string())
            .collect();
        paths.sort_unstable();
        expected.sort_unstable();
        assert_eq!(paths, expected);
        assert_eq!(
            schema["properties"]["runner"]["properties"]["worker"]["properties"]["type"]["enum"],
            json!(["docker_codex_cli"])
        );
    }

    #[test]
    fn samples_of_the_schema_parse_as_task_config() {
        let dir = scratch();
        let schema = task_config_schema();
        let full = sample(&schema, false);
        let task = parse_json(&full, &dir.0).unwrap_or_else(|e| panic!("{e}\n{full:#}"));
        assert_eq!(task.shape, Shape::TaskConfig);
        assert_eq!(task.acceptance_criteria, ["sample"]);
        assert_eq!(task.meta.temperature, Some(0.5));
        assert_eq!(task.worker.model.as_deref(), Some("sample"));
        assert_eq!(task.test.unwrap().timeout.as_secs(), 60);
        let minimal = sample(&schema, true);
        let task = parse_json(&minimal, &dir.0).unwrap_or_else(|e| panic!("{e}\n{minimal:#}"));
        assert!(task.test.is_none() && task.acceptance_criteria.is_empty());
    }

    #[test]
    fn required_in_the_schema_means_required_by_the_parser() {
        let dir = scratch();
        let schema = task_config_schema();
        let mut paths = Vec::new();
        leaves(&schema, "", &mut paths);
        for (path, leaf) in paths {
            let mut document = sample(&schema, false);
            set(&mut document, &path, Value::Null);
            let result = parse_json(&document, &dir.0);
            if is_nullable(&leaf) {
                assert!(
                    result.is_ok(),
                    "{path} is optional in the schema: {result:?}"
                );
            } else {
                let errors = result.expect_err(&path);
                let first = errors.iter().next().unwrap();
                assert_eq!(first.path, path);
                assert!(first.message.contains("required"), "{first}");
            }
        }
    }

    #[test]
    fn every_schema_path_is_a_typed_key_of_the_parser() {
        let dir = scratch();
        let schema = task_config_schema();
        let mut paths = Vec::new();
        leaves(&schema, "", &mut paths);
        for (path, _) in paths {
            // A mapping is the wrong type for every leaf: the parser must say so at
            // that path (an unknown key would be a different problem).
            let mut document = sample(&schema, false);
            set(&mut document, &path, json!({"x": 1}));
            let errors = parse_json(&document, &dir.0).expect_err(&path);
            let first = errors.iter().next().unwrap();
            assert_eq!(
                (first.path.as_str(), first.category),
                (path.as_str(), Category::Structure),
                "{first}"
            );
        }
    }
}
