//! The structure check: every key of the document against the keys its shape allows
//! (`raw.rs`), every value against the kind its key expects. It finds all unknown keys
//! and type errors at once (serde stops at the first), and returns the document
//! without the entries it found wrong, so deserializing that cannot fail and the value
//! and environment checks still run on the rest.

use std::fmt::Write;

use serde_norway::{Mapping, Value};

use super::Shape;
use super::input_error::{Category, InputError, InputErrors};
use super::locate::{Segment, Target, locate};
use super::raw::{Key, Kind, root_keys};
use super::suggest::closest;
use agent_runner_core::text::cut_chars;
use agent_runner_core::yaml::scalar_text;

/// How much of a key an error path shows: an 8 MB key must not be echoed whole.
pub(crate) const MAX_KEY_SHOWN: usize = 60;
/// Problems that get a line and column; each costs one more parse of the whole text
/// (serde_norway loads a document before deserializing it) ...
const MAX_LOCATED: usize = 10;
/// ... and all of those parses together read at most this much text (one parse of
/// the largest input accepted), so a large document with many problems is not parsed
/// ten more times.
const LOCATE_BUDGET_BYTES: usize = 16 << 20;

/// The outcome of the check.
pub(crate) struct Structure {
    /// The document without the entries found wrong; scalars where text is expected
    /// are text.
    pub(crate) value: Value,
    /// Whether any problem was found.
    pub(crate) clean: bool,
    /// The paths the problems explain (see `InputErrors::into_report`).
    pub(crate) covered: Vec<String>,
}

/// Checks the root mapping of a document of `shape`; `text` is its source, for
/// line and column. Unknown keys and type errors go to `problems`, in document order.
pub(crate) fn check(
    text: &str,
    root: &Mapping,
    shape: Shape,
    problems: &mut InputErrors,
) -> Structure {
    let keys = root_keys(shape);
    walked(text, shape, Vec::new(), root, keys, problems)
}

/// Checks a `runner:` section given on its own, as a document of `shape` has it
/// (no text: problems have no line and column).
pub(crate) fn check_runner(
    runner: &Mapping,
    shape: Shape,
    problems: &mut InputErrors,
) -> Structure {
    let path = vec![Segment::Key("runner".into())];
    walked("", shape, path, runner, super::raw::RUNNER, problems)
}

/// `map`, a section with `keys` found at `path` in a document of `shape` (`text`:
/// its source, for line and column), walked: clean when `problems` gained none.
fn walked(
    text: &str,
    shape: Shape,
    path: Vec<Segment>,
    map: &Mapping,
    keys: &'static [Key],
    problems: &mut InputErrors,
) -> Structure {
    let before = problems.found();
    let mut walk = Walk {
        text,
        shape,
        path,
        problems,
        located: 0,
        covered: Vec::new(),
    };
    let value = Value::Mapping(walk.section(map, keys));
    Structure {
        value,
        clean: walk.problems.found() == before,
        covered: walk.covered,
    }
}

struct Walk<'t, 'p> {
    text: &'t str,
    shape: Shape,
    path: Vec<Segment>,
    problems: &'p mut InputErrors,
    /// Problems given a line and column so far.
    located: usize,
    covered: Vec<String>,
}

impl Walk<'_, '_> {
    fn section(&mut self, map: &Mapping, keys: &'static [Key]) -> Mapping {
        let mut out = Mapping::new();
        for (key, value) in map {
            let name = scalar_text(key).unwrap_or_else(|| inline(key));
            let found = keys.iter().find(|k| k.name() == name);
            let suggestion = found.is_none().then(|| self.suggestion(&name, keys));
            self.path.push(Segment::Key(name));
            match (found, suggestion) {
                (Some(k), _) if k.allowed_in(self.shape) => {
                    if let Some(clean) = self.value(value, k.kind) {
                        out.insert(Value::String(k.name().into()), clean);
                    }
                }
                (Some(k), _) => {
                    let shape = match self.shape {
                        Shape::V1 => "shape v1",
                        Shape::TaskConfig => "the TaskConfig shape",
                    };
                    // This shape's own spelling of the key (`type` for `kind`) is
                    // then missing for the same reason.
                    let counterpart = keys
                        .iter()
                        .find(|other| other.only.is_some_and(|(only, _)| only == self.shape))
                        .map(Key::name);
                    let hint = k.only.map(|(_, hint)| hint.to_string());
                    self.unknown_key(format!("unknown key in {shape}"), hint, counterpart);
                }
                (None, suggestion) => {
                    let (hint, meant) = suggestion.unwrap_or_default();
                    // `max_loop` explains a missing `max_loops`, not a wrong one.
                    let meant = meant.filter(|m| !map.contains_key(*m));
                    self.unknown_key("unknown key".into(), Some(hint), meant);
                }
            }
            self.path.pop();
        }
        out
    }

    /// The hint for an unknown key `name` among `keys`, and the key it suggests.
    fn suggestion(&self, name: &str, keys: &'static [Key]) -> (String, Option<&'static str>) {
        let mut candidates: Vec<&'static str> = keys
            .iter()
            .filter(|k| k.allowed_in(self.shape))
            .map(Key::name)
            .collect();
        // A document without `version` is read as TaskConfig; `verison:` is still
        // most likely a misspelt `version`.
        if self.path.is_empty() && self.shape == Shape::TaskConfig {
            candidates.insert(0, "version");
        }
        match closest(name, &candidates) {
            Some(best) => (format!("did you mean `{best}`?"), Some(best)),
            None => (format!("valid keys here: {}", candidates.join(", ")), None),
        }
    }

    /// Records an unknown key; `meant` is the key meant, whose absence it explains.
    fn unknown_key(&mut self, message: String, hint: Option<String>, meant: Option<&str>) {
        let path = display(&self.path);
        if let (Some(meant), Some((_, parent))) = (meant, self.path.split_last()) {
            let mut sibling = display(parent);
            if !sibling.is_empty() {
                sibling.push('.');
            }
            sibling.push_str(meant);
            self.covered.push(sibling);
        }
        let mut error = InputError::new(path, message).in_category(Category::UnknownKey);
        error.hint = hint.filter(|h| !h.is_empty());
        self.record(error, Target::Key);
    }

    fn type_error(&mut self, expected: &str, got: &Value) {
        let error = InputError::new(
            display(&self.path),
            format!("expected {expected} (got {})", describe(got)),
        )
        .in_category(Category::Structure);
        self.record(error, Target::Value);
    }

    fn record(&mut self, mut error: InputError, target: Target) {
        let budget_left = (self.located + 1) * self.text.len() <= LOCATE_BUDGET_BYTES;
        if self.located < MAX_LOCATED && budget_left {
            self.located += 1;
            error.location = locate(self.text, &self.path, target);
        }
        if !self.problems.is_full() {
            self.covered.push(error.path.clone());
        }
        self.problems.push(error);
    }

    /// The value cleaned for deserializing, or `None` after recording why it is wrong.
    fn value(&mut self, value: &Value, kind: Kind) -> Option<Value> {
        if value.is_null() {
            return Some(Value::Null);
        }
        match kind {
            Kind::Any => Some(value.clone()),
            Kind::Text => self.text_value(value),
            Kind::Integer => match value.as_u64() {
                Some(_) => Some(value.clone()),
                None => {
                    self.type_error("a non-negative integer", value);
                    None
                }
            },
            Kind::Number => match value {
                Value::Number(_) => Some(value.clone()),
                _ => {
                    self.type_error("a number", value);
                    None
                }
            },
            Kind::Boolean => match value {
                Value::Bool(_) => Some(value.clone()),
                _ => {
                    self.type_error("true or false", value);
                    None
                }
            },
            Kind::Size => match value {
                Value::String(_) => Some(value.clone()),
                _ if value.as_u64().is_some() => Some(value.clone()),
                _ => {
                    self.type_error("a size: bytes, or a number with b, k, m or g", value);
                    None
                }
            },
            Kind::TextList => self.text_list(value),
            Kind::TextMap => self.text_map(value),
            Kind::Map(keys) => self.named_sections(value, keys),
            Kind::Section(keys) => match value {
                Value::Mapping(map) => Some(Value::Mapping(self.section(map, keys))),
                _ => {
                    self.type_error("a mapping", value);
                    None
                }
            },
        }
    }

    fn text_value(&mut self, value: &Value) -> Option<Value> {
        match scalar_text(value) {
            Some(text) => Some(Value::String(text)),
            None => {
                self.type_error("a string", value);
                None
            }
        }
    }

    fn text_list(&mut self, value: &Value) -> Option<Value> {
        let Value::Sequence(items) = value else {
            self.type_error("a list of strings", value);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for (n, item) in items.iter().enumerate() {
            self.path.push(Segment::Index(n));
            out.push(self.text_value(item));
            self.path.pop();
        }
        // One wrong item drops the list: half a list would mean something else.
        out.into_iter()
            .collect::<Option<Vec<Value>>>()
            .map(Value::Sequence)
    }

    fn text_map(&mut self, value: &Value) -> Option<Value> {
        self.by_name(value, "a mapping of names to strings", |walk, item| {
            if item.is_null() {
                walk.type_error("a string", item);
                return None;
            }
            walk.text_value(item)
        })
    }

    /// A mapping whose keys are names, each item made by `item` with its name on
    /// the path; an item that is wrong (`None`, its error recorded) is left out,
    /// as is a key that is no name. `expected` words the mapping for a type error.
    fn by_name(
        &mut self,
        value: &Value,
        expected: &str,
        mut item: impl FnMut(&mut Self, &Value) -> Option<Value>,
    ) -> Option<Value> {
        let Value::Mapping(map) = value else {
            self.type_error(expected, value);
            return None;
        };
        let mut out = Mapping::new();
        for (key, value) in map {
            let name = scalar_text(key);
            self.path
                .push(Segment::Key(name.clone().unwrap_or_else(|| inline(key))));
            match name {
                None => self.type_error("a name as the key", key),
                Some(name) => {
                    if let Some(made) = item(self, value) {
                        out.insert(Value::String(name), made);
                    }
                }
            }
            self.path.pop();
        }
        Some(Value::Mapping(out))
    }
}

impl Walk<'_, '_> {
    /// A mapping of names to sections with `keys` (`runner.pricing`).
    fn named_sections(&mut self, value: &Value, keys: &'static [Key]) -> Option<Value> {
        self.by_name(value, "a mapping of names to mappings", |walk, item| {
            let Value::Mapping(inner) = item else {
                walk.type_error("a mapping", item);
                return None;
            };
            Some(Value::Mapping(walk.section(inner, keys)))
        })
    }
}

/// `task.prd.path`, `runner.worker.extra_args[1]`; long keys cut.
fn display(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&cut_chars(key, MAX_KEY_SHOWN));
            }
            Segment::Index(n) => {
                let _ = write!(out, "[{n}]");
            }
        }
    }
    out
}

/// A value in a few words, for "got ..." (strings cut).
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {:?}", cut_chars(s, 40)),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(t) => format!("a value tagged {}", cut_chars(&t.tag.to_string(), 40)),
    }
}

/// A value as inline YAML, cut to a length fit for a message.
pub(crate) fn inline(value: &Value) -> String {
    serde_norway::to_string(value)
        .map(|s| cut_chars(s.trim_end(), MAX_KEY_SHOWN))
        .unwrap_or_else(|_| "?".into())
}
