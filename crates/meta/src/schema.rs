//! JSON Schemas of Meta's replies, for a provider that can hold a model to one
//! (`codex exec --output-schema`, SPEC §18). They follow OpenAI's structured outputs
//! strict mode, as codex sends them: every object lists all of its properties as
//! required and allows no others; what a reply may leave out is nullable. Replies are
//! still checked by their own parsers: a schema guides, it proves nothing.

use serde_json::{Map, Value, json};

/// An object with exactly these properties, all required.
pub fn object(properties: &[(&str, Value)]) -> Value {
    let mut map = Map::new();
    for (name, schema) in properties {
        map.insert((*name).to_string(), schema.clone());
    }
    let required: Vec<&str> = properties.iter().map(|(name, _)| *name).collect();
    json!({"type": "object", "additionalProperties": false, "required": required, "properties": map})
}

/// The reply's `type`: exactly `kind`.
pub fn kind(kind: &str) -> Value {
    json!({"type": "string", "enum": [kind]})
}

pub fn text() -> Value {
    json!({"type": "string"})
}

pub fn integer() -> Value {
    json!({"type": "integer"})
}

pub fn boolean() -> Value {
    json!({"type": "boolean"})
}

/// One of `values`.
pub fn one_of(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}

pub fn list(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

/// `schema`, or null.
pub fn nullable(schema: Value) -> Value {
    json!({"anyOf": [schema, {"type": "null"}]})
}

/// The keywords strict mode accepts (OpenAI's structured outputs; Anthropic
/// takes any JSON Schema).
const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "description",
    "title",
    "$defs",
    "$ref",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];
/// Strict mode's deepest nesting of objects.
const MAX_DEPTH: usize = 10;

/// Where a schema breaks strict mode's rules, and which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {problem}")]
pub struct NotStrict {
    /// The path in the schema (`.a.b[]`, `|0` for an `anyOf` option).
    pub at: String,
    pub problem: String,
}

impl NotStrict {
    fn at(at: String, problem: impl Into<String>) -> NotStrict {
        NotStrict {
            at,
            problem: problem.into(),
        }
    }
}

/// Whether `schema` keeps strict mode's rules, everywhere in it: the root an
/// object; every object lists all its properties as required and allows no
/// others; only the keywords strict mode knows; objects nested at most 10 deep.
/// The first place that does not, otherwise.
pub fn check_strict(schema: &Value, at: &str) -> Result<(), NotStrict> {
    if schema.get("type") != Some(&json!("object")) {
        return Err(NotStrict::at(at.to_string(), "the root is not an object"));
    }
    check_node(schema, at, 0)
}

fn check_node(schema: &Value, at: &str, depth: usize) -> Result<(), NotStrict> {
    let Value::Object(map) = schema else {
        return Err(NotStrict::at(at.to_string(), "not a schema"));
    };
    if let Some(key) = map.keys().find(|k| !STRICT_KEYWORDS.contains(&k.as_str())) {
        return Err(NotStrict::at(
            at.to_string(),
            format!("`{key}` is no keyword of strict mode"),
        ));
    }
    let mut depth = depth;
    if map.get("type") == Some(&json!("object")) {
        depth += 1;
        if depth > MAX_DEPTH {
            return Err(NotStrict::at(
                at.to_string(),
                format!("objects nested deeper than {MAX_DEPTH}"),
            ));
        }
        let properties = map
            .get("properties")
            .and_then(Value::as_object)
            .ok_or_else(|| NotStrict::at(at.to_string(), "an object without properties"))?;
        if map.get("additionalProperties") != Some(&json!(false)) {
            return Err(NotStrict::at(
                at.to_string(),
                "additionalProperties is not false",
            ));
        }
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (name, property) in properties {
            if !required.contains(&name.as_str()) {
                return Err(NotStrict::at(format!("{at}.{name}"), "not required"));
            }
            check_node(property, &format!("{at}.{name}"), depth)?;
        }
    }
    if let Some(items) = map.get("items") {
        check_node(items, &format!("{at}[]"), depth)?;
    }
    if let Some(options) = map.get("anyOf") {
        let options = options
            .as_array()
            .ok_or_else(|| NotStrict::at(at.to_string(), "anyOf is not a list"))?;
        for (n, option) in options.iter().enumerate() {
            check_node(option, &format!("{at}|{n}"), depth)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_require_everything_and_allow_nothing_else() {
        let schema = object(&[("a", text()), ("b", nullable(list(integer())))]);
        assert_eq!(check_strict(&schema, ""), Ok(()));
        assert_eq!(schema["required"], json!(["a", "b"]));
        let loose = json!({"type": "object", "properties": {"a": {}}, "required": [], "additionalProperties": false});
        assert_eq!(
            check_strict(&loose, "x").unwrap_err().to_string(),
            "x.a: not required"
        );
        let open = json!({"type": "object", "properties": {}, "required": []});
        assert!(check_strict(&object(&[("a", list(open))]), "").is_err());
        assert_eq!(
            check_strict(&list(text()), "r").unwrap_err().to_string(),
            "r: the root is not an object"
        );
        let loose_string = json!({"type": "string", "minLength": 1});
        assert_eq!(
            check_strict(&object(&[("s", loose_string)]), "")
                .unwrap_err()
                .to_string(),
            ".s: `minLength` is no keyword of strict mode"
        );
        let mut deep = object(&[("leaf", text())]);
        for _ in 0..10 {
            deep = object(&[("x", nullable(deep))]);
        }
        assert!(
            check_strict(&deep, "")
                .unwrap_err()
                .to_string()
                .contains("deeper than 10")
        );
    }
}
