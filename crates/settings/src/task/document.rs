//! From text to raw structs: YAML syntax, which of the two shapes the document is
//! written in, and the structure check against that shape's keys.

use serde_norway::Value;

use super::Shape;
use super::input_error::{Category, InputError, InputErrors};
use super::raw::{RawTaskConfig, RawTaskV1};
use super::structure::{self, describe};
use super::suggest::closest;

/// The document, deserialized in its shape.
pub(crate) enum RawDocument {
    V1(RawTaskV1),
    TaskConfig(RawTaskConfig),
}

/// What reading found.
pub(crate) struct Read {
    /// `None` when the document could not be deserialized at all.
    pub(crate) raw: Option<RawDocument>,
    /// Paths explained by structure problems (see `InputErrors::into_report`).
    pub(crate) covered: Vec<String>,
}

/// Reads `text`. A syntax error, or a document that is not a mapping, is the only
/// problem reported (`Err`); otherwise structure problems go to `problems`.
pub(crate) fn read(text: &str, problems: &mut InputErrors) -> Result<Read, InputError> {
    agent_runner_core::yaml::check(text, agent_runner_core::yaml::Rules::Document).map_err(
        |refusal| {
            let mut error = InputError::new("stdin", refusal.message);
            error.location = Some((refusal.line, refusal.column));
            error.in_category(Category::Syntax)
        },
    )?;
    let value: Value = serde_norway::from_str(text).map_err(|e| InputError::from_yaml(&e))?;
    let Value::Mapping(root) = &value else {
        let got = match &value {
            Value::Null => "an empty document".to_string(),
            other => describe(other),
        };
        return Err(InputError::new(
            "stdin",
            format!("expected a YAML mapping with `task:` and `runner:` (got {got})"),
        )
        .with_hint("see docs/configuration.md, \"Task YAML\", for both accepted shapes")
        .in_category(Category::Syntax));
    };
    let mut covered = Vec::new();
    let shape = if root.contains_key("version") {
        Shape::V1
    } else if root
        .get("task")
        .and_then(Value::as_mapping)
        .is_some_and(|t| t.contains_key("prd") || t.contains_key("repo"))
    {
        // Written for v1 but without its version: check it as v1, so the other
        // problems are about what the user meant. A misspelt `version` is reported
        // as an unknown key with a suggestion; that says it all.
        let misspelt = root
            .keys()
            .filter_map(Value::as_str)
            .any(|key| closest(key, &["version"]).is_some());
        if !misspelt {
            problems.push(
                InputError::new("version", "missing (shape v1 needs `version: 1`)")
                    .with_hint(
                        "add `version: 1` at the top; only the TaskConfig shape has no version",
                    )
                    .in_category(Category::Shape),
            );
        }
        covered.push("version".to_string());
        Shape::V1
    } else {
        Shape::TaskConfig
    };
    let checked = structure::check(text, root, shape, problems);
    covered.extend(checked.covered);
    let clean = checked.clean;
    // Without problems the text itself is deserialized, so scalars keep their exact
    // spelling (`id: 0x1F` stays "0x1F"); otherwise the cleaned value is.
    let raw = match shape {
        Shape::V1 => deserialize(text, clean, checked.value).map(RawDocument::V1),
        Shape::TaskConfig => deserialize(text, clean, checked.value).map(RawDocument::TaskConfig),
    };
    let raw = match raw {
        Ok(raw) => Some(raw),
        // The structure check should have caught it; report serde's words then.
        Err(e) => {
            problems.push(InputError::from_yaml(&e).in_category(Category::Structure));
            None
        }
    };
    Ok(Read { raw, covered })
}

fn deserialize<T: serde::de::DeserializeOwned>(
    text: &str,
    clean: bool,
    value: Value,
) -> Result<T, serde_norway::Error> {
    if clean {
        serde_norway::from_str(text)
    } else {
        serde_norway::from_value(value)
    }
}
