//! Reading the fields of a plan reply (a YAML mapping) with their paths, so that an
//! invalid reply is sent back saying exactly what is wrong where
//! (`phases[1].tasks[0].title: missing`). Lenient where the meaning is plain (`null`
//! is absent, a number is fine as text), strict otherwise.

use serde_norway::{Mapping, Sequence, Value};

use crate::store::pinned_test::PinnedTest;
use crate::store::plan_fields::{PlanFields, plan_fields_table};
use agent_runner_core::text::one_line;
use agent_runner_core::yaml::scalar_text;
use agent_runner_meta::reply::Reask;
use agent_runner_settings::task::MAX_ACCEPTANCE_CRITERIA;

/// Values of `estimated_effort` (meta-protocol.md §9.4).
pub(crate) const EFFORTS: [&str; 3] = ["small", "medium", "large"];

/// A mapping of a reply and its path.
pub(crate) struct Fields<'a> {
    map: &'a Mapping,
    pub(crate) path: String,
}

impl<'a> Fields<'a> {
    /// `value` at `path`, which must be a mapping.
    pub(crate) fn of(value: &'a Value, path: impl Into<String>) -> Result<Fields<'a>, Reask> {
        let path = path.into();
        match value {
            Value::Mapping(map) => Ok(Fields { map, path }),
            _ => Err(format!("{path}: expected a mapping")),
        }
    }

    /// `path.key`, for messages.
    pub(crate) fn at(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The value of `key`; `null` is absent.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// The keys of the mapping that are strings.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &'a str> {
        self.map.keys().filter_map(Value::as_str)
    }

    /// A text field, if present (numbers and booleans as written).
    pub(crate) fn text(&self, key: &str) -> Result<Option<String>, Reask> {
        self.get(key)
            .map(|v| scalar_text(v).ok_or_else(|| format!("{}: expected text", self.at(key))))
            .transpose()
    }

    /// A text field that must be present and not blank; trimmed.
    pub(crate) fn required_text(&self, key: &str) -> Result<String, Reask> {
        match self.text(key)? {
            Some(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
            Some(_) => Err(format!("{}: empty", self.at(key))),
            None => Err(format!("{}: missing", self.at(key))),
        }
    }

    /// A text field that, when present, must not be blank; trimmed.
    pub(crate) fn nonblank_text(&self, key: &str) -> Result<Option<String>, Reask> {
        match self.text(key)? {
            Some(t) if t.trim().is_empty() => Err(format!("{}: empty", self.at(key))),
            other => Ok(other.map(|t| t.trim().to_string())),
        }
    }

    /// A list field, if present.
    pub(crate) fn list(&self, key: &str) -> Result<Option<&'a Sequence>, Reask> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Sequence(items)) => Ok(Some(items)),
            Some(_) => Err(format!("{}: expected a list", self.at(key))),
        }
    }

    /// A list of texts, if present.
    pub(crate) fn texts(&self, key: &str) -> Result<Option<Vec<String>>, Reask> {
        let Some(items) = self.list(key)? else {
            return Ok(None);
        };
        items
            .iter()
            .enumerate()
            .map(|(n, v)| {
                scalar_text(v).ok_or_else(|| format!("{}[{n}]: expected text", self.at(key)))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// A non-negative integer, if present.
    pub(crate) fn count(&self, key: &str) -> Result<Option<u32>, Reask> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| format!("{}: expected a whole number ≥ 0", self.at(key))),
        }
    }

    /// A boolean, if present.
    pub(crate) fn flag(&self, key: &str) -> Result<Option<bool>, Reask> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(format!("{}: expected true or false", self.at(key))),
        }
    }

    /// A mapping field as JSON, if present.
    pub(crate) fn mapping_json(&self, key: &str) -> Result<Option<serde_json::Value>, Reask> {
        match self.get(key) {
            None => Ok(None),
            Some(v @ Value::Mapping(_)) => serde_json::to_value(v)
                .map(Some)
                .map_err(|e| format!("{}: {e}", self.at(key))),
            Some(_) => Err(format!("{}: expected a mapping", self.at(key))),
        }
    }

    /// `acceptance_criteria`: non-blank texts, at most as many as a TaskConfig takes.
    pub(crate) fn criteria(&self, key: &str) -> Result<Option<Vec<String>>, Reask> {
        let Some(criteria) = self.texts(key)? else {
            return Ok(None);
        };
        if criteria.len() > MAX_ACCEPTANCE_CRITERIA {
            return Err(format!(
                "{}: {} criteria; give at most {MAX_ACCEPTANCE_CRITERIA}",
                self.at(key),
                criteria.len()
            ));
        }
        if let Some(n) = criteria.iter().position(|c| c.trim().is_empty()) {
            return Err(format!("{}[{n}]: empty", self.at(key)));
        }
        Ok(Some(
            criteria.iter().map(|c| c.trim().to_string()).collect(),
        ))
    }

    /// `estimated_effort`: one of `EFFORTS` (any case), lowercased.
    pub(crate) fn effort(&self, key: &str) -> Result<Option<String>, Reask> {
        let Some(effort) = self.text(key)? else {
            return Ok(None);
        };
        let lower = effort.trim().to_lowercase();
        if EFFORTS.contains(&lower.as_str()) {
            Ok(Some(lower))
        } else {
            Err(format!(
                "{}: {effort:?}; expected one of {}",
                self.at(key),
                EFFORTS.join(", ")
            ))
        }
    }

    /// `test`: `{command, timeout_sec}` (or the command alone), checked as a pinned
    /// test is.
    pub(crate) fn pinned_test(&self, key: &str) -> Result<Option<PinnedTest>, Reask> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let at = self.at(key);
        let test = match value {
            Value::Mapping(_) => {
                let f = Fields::of(value, at.clone())?;
                if let Some(other) = f.keys().find(|k| !["command", "timeout_sec"].contains(k)) {
                    return Err(format!(
                        "{}: unknown key (a test has command and timeout_sec)",
                        f.at(other)
                    ));
                }
                PinnedTest {
                    command: f.required_text("command")?,
                    timeout_sec: f.count("timeout_sec")?.map(u64::from),
                }
            }
            other => PinnedTest {
                command: scalar_text(other)
                    .ok_or_else(|| format!("{at}: expected {{command, timeout_sec}}"))?
                    .trim()
                    .to_string(),
                timeout_sec: None,
            },
        };
        test.check(&at)?;
        Ok(Some(test))
    }

    /// `phase_name`: a name, on one line.
    pub(crate) fn phase_name(&self, key: &str) -> Result<Option<String>, Reask> {
        Ok(self.nonblank_text(key)?.map(|p| one_line(&p)))
    }
}

/// `Fields::plan_fields`, one reader call per row of the plan fields' table.
macro_rules! read_plan_fields {
    ($($(#[$doc:meta])* $name:ident: $ty:ty, $reader:ident, $key:literal, $in_requests:literal;)*) => {
        impl Fields<'_> {
            /// A task's plan fields as a reply gives them, each read by its reader.
            pub(crate) fn plan_fields(&self) -> Result<PlanFields, Reask> {
                Ok(PlanFields {
                    $($name: self.$reader($key)?,)*
                })
            }
        }
    };
}
plan_fields_table!(read_plan_fields);

/// `potential_conflicts` as JSON: a list of anything (the seed's `{file, tasks,
/// warning}` mappings, or plain texts), absent meaning none.
pub(crate) fn conflicts(fields: &Fields) -> Result<Vec<serde_json::Value>, Reask> {
    let Some(items) = fields.list("potential_conflicts")? else {
        return Ok(Vec::new());
    };
    items
        .iter()
        .enumerate()
        .map(|(n, item)| {
            serde_json::to_value(item)
                .map_err(|e| format!("{}[{n}]: {e}", fields.at("potential_conflicts")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_with_their_paths() {
        let value: Value = serde_norway::from_str(
            "title: '  T  '\nn: 3\nneg: -1\nlist: [a, 2, true]\nbad: [[1]]\nnothing: null\nblank: ' '\neffort: Medium\nimpl: {language: rust}\n",
        )
        .unwrap();
        let f = Fields::of(&value, "phases[0]").unwrap();
        assert_eq!(f.required_text("title").unwrap(), "T");
        assert_eq!(
            f.required_text("nothing").unwrap_err(),
            "phases[0].nothing: missing"
        );
        assert_eq!(
            f.required_text("blank").unwrap_err(),
            "phases[0].blank: empty"
        );
        assert_eq!(f.text("n").unwrap().as_deref(), Some("3"));
        assert_eq!(f.count("n").unwrap(), Some(3));
        assert!(f.count("neg").unwrap_err().contains("phases[0].neg"));
        assert_eq!(
            f.texts("list").unwrap().unwrap(),
            ["a", "2", "true"].map(String::from)
        );
        assert_eq!(
            f.texts("bad").unwrap_err(),
            "phases[0].bad[0]: expected text"
        );
        assert_eq!(f.effort("effort").unwrap().as_deref(), Some("medium"));
        assert!(
            f.effort("title")
                .unwrap_err()
                .contains("expected one of small, medium, large")
        );
        assert_eq!(
            f.mapping_json("impl").unwrap(),
            Some(serde_json::json!({"language": "rust"}))
        );
        assert!(f.list("title").unwrap_err().ends_with("expected a list"));
        assert!(Fields::of(&Value::Null, "x").is_err());
    }

    #[test]
    fn a_pinned_test_is_a_command_with_an_optional_timeout() {
        let value: Value = serde_norway::from_str(
            "a: {command: ' cargo test ', timeout_sec: 90}\nb: make check\nc: {command: x, cwd: y}\nd: {timeout_sec: 3}\ne: [x]\nf: {command: x, timeout_sec: 0}\n",
        )
        .unwrap();
        let f = Fields::of(&value, "t").unwrap();
        let test = |c: &str, t| {
            Some(PinnedTest {
                command: c.into(),
                timeout_sec: t,
            })
        };
        assert_eq!(f.pinned_test("a").unwrap(), test("cargo test", Some(90)));
        assert_eq!(f.pinned_test("b").unwrap(), test("make check", None));
        assert_eq!(f.pinned_test("none").unwrap(), None);
        assert_eq!(
            f.pinned_test("c").unwrap_err(),
            "t.c.cwd: unknown key (a test has command and timeout_sec)"
        );
        assert_eq!(f.pinned_test("d").unwrap_err(), "t.d.command: missing");
        assert!(
            f.pinned_test("e")
                .unwrap_err()
                .contains("expected {command")
        );
        assert!(
            f.pinned_test("f")
                .unwrap_err()
                .starts_with("t.f.timeout_sec")
        );
    }

    #[test]
    fn criteria_are_bounded_and_not_blank() {
        let many = format!("c: [{}]", vec!["x"; MAX_ACCEPTANCE_CRITERIA + 1].join(", "));
        let value: Value = serde_norway::from_str(&many).unwrap();
        assert!(
            Fields::of(&value, "")
                .unwrap()
                .criteria("c")
                .unwrap_err()
                .contains("at most")
        );
        let value: Value = serde_norway::from_str("c: [a, '']").unwrap();
        assert_eq!(
            Fields::of(&value, "t").unwrap().criteria("c").unwrap_err(),
            "t.c[1]: empty"
        );
    }
}
