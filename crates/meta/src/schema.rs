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

/// Whether `schema` keeps strict mode's rules, everywhere in it; the first place
/// that does not, otherwise.
pub fn check_strict(schema: &Value, at: &str) -> Result<(), String> {
    match schema {
        Value::Object(map) => {
            if map.get("type") == Some(&json!("object")) {
                let properties = map
                    .get("properties")
                    .and_then(Value::as_object)
                    .ok_or(format!("{at}: an object without properties"))?;
                if map.get("additionalProperties") != Some(&json!(false)) {
                    return Err(format!("{at}: additionalProperties is not false"));
                }
                let required: Vec<&str> = map
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                for name in properties.keys() {
                    if !required.contains(&name.as_str()) {
                        return Err(format!("{at}.{name}: not required"));
                    }
                }
            }
            for (key, value) in map {
                check_strict(value, &format!("{at}/{key}"))?;
            }
            Ok(())
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(n, item)| check_strict(item, &format!("{at}[{n}]"))),
        _ => Ok(()),
    }
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
        assert_eq!(check_strict(&loose, "x"), Err("x.a: not required".into()));
        let open = json!({"type": "object", "properties": {}, "required": []});
        assert!(check_strict(&list(open), "").is_err());
    }
}
