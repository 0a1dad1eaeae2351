//! What went wrong in a Task YAML, said so a user can fix it: the field path, the
//! problem, what was found, where (line/column for syntax errors) and a hint.

use std::fmt;

/// An error in the task input. Displayed as `<path>: <message> (line L, column C)`.
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    /// Dotted field path (`runner.meta.max_loops`), or `stdin` for the document itself.
    pub path: String,
    pub message: String,
    pub location: Option<(usize, usize)>,
    pub hint: Option<String>,
}

impl InputError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        InputError {
            path: path.into(),
            message: message.into(),
            location: None,
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Translates a serde_yaml error into our wording. serde_yaml prefixes messages
    /// with the field path (`runner.meta: unknown field ...`); we split that off so
    /// unknown keys get their full path and a "did you mean" hint.
    pub fn from_yaml(err: &serde_yaml::Error) -> Self {
        let location = err.location().map(|l| (l.line(), l.column()));
        let mut text = err.to_string();
        // serde_yaml appends " at line L column C"; we print the location ourselves.
        if let Some((line, column)) = location {
            let suffix = format!(" at line {line} column {column}");
            if text.ends_with(&suffix) {
                text.truncate(text.len() - suffix.len());
            }
        }
        let (path, message) = split_path(&text);
        let mut error = if let Some(rest) = message.strip_prefix("unknown field `") {
            unknown_field(path, rest)
        } else if let Some(rest) = message.strip_prefix("invalid type: ") {
            InputError::new(or_stdin(path), type_mismatch(rest))
        } else if let Some(rest) = message.strip_prefix("invalid value: ") {
            InputError::new(or_stdin(path), type_mismatch(rest))
        } else if let Some(rest) = message.strip_prefix("duplicate field `") {
            let field = rest.split('`').next().unwrap_or(rest);
            InputError::new(join(path, field), "duplicate key")
        } else if let Some(rest) = message.strip_prefix("duplicate entry with key ") {
            let key = rest.trim_matches('"');
            InputError::new(join(path, key), "duplicate key")
        } else if message.contains("more than one document") {
            InputError::new("stdin", "several YAML documents; give exactly one task")
        } else if message.contains("repetition limit exceeded") {
            InputError::new(
                "stdin",
                "YAML aliases expand too much (alias bomb); write the values out",
            )
        } else if message.contains("recursion limit exceeded") {
            InputError::new("stdin", "YAML nesting is too deep")
        } else {
            InputError::new(or_stdin(path), format!("invalid YAML: {message}"))
        };
        error.location = location;
        error
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)?;
        // libyaml's syntax messages name their own positions.
        if let (Some((line, column)), false) = (self.location, self.message.contains(" line ")) {
            write!(f, " (line {line}, column {column})")?;
        }
        Ok(())
    }
}

impl std::error::Error for InputError {}

/// `runner.meta: unknown field ...` → (`runner.meta`, `unknown field ...`).
/// Messages at the root carry no path.
fn split_path(text: &str) -> (&str, &str) {
    match text.split_once(": ") {
        Some((path, rest)) if is_field_path(path) => (path, rest),
        _ => ("", text),
    }
}

fn is_field_path(s: &str) -> bool {
    !s.is_empty()
        && !s.contains(' ')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '-'))
}

fn or_stdin(path: &str) -> String {
    if path.is_empty() {
        "stdin".into()
    } else {
        path.into()
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.into()
    } else {
        format!("{path}.{field}")
    }
}

/// `max_loop`, expected `max_loops` or ...` → unknown key error with a suggestion.
fn unknown_field(path: &str, rest: &str) -> InputError {
    let (field, expected) = rest.split_once('`').unwrap_or((rest, ""));
    let candidates: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let error = InputError::new(join(path, field), "unknown key");
    match closest(field, &candidates) {
        Some(best) => error.with_hint(format!("did you mean `{best}`?")),
        None if candidates.is_empty() => error,
        None => error.with_hint(format!("valid keys here: {}", candidates.join(", "))),
    }
}

/// `integer `-1`, expected u32` → `expected a non-negative integer (got -1)`.
fn type_mismatch(rest: &str) -> String {
    let (got, expected) = rest.split_once(", expected ").unwrap_or((rest, "?"));
    let expected = match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a non-negative integer",
        "i8" | "i16" | "i32" | "i64" | "isize" => "an integer",
        "f32" | "f64" => "a number",
        "a boolean" => "true or false",
        "a string" | "a borrowed string" => "a string",
        other if other.starts_with("struct ") || other.starts_with("a map") => "a mapping",
        other => other,
    };
    let got = got.replace('`', "");
    let got = match got.as_str() {
        "unit value" => "null".to_string(),
        _ => got,
    };
    format!("expected {expected} (got {got})")
}

/// The candidate nearest to `word`, if near enough to be a plausible typo: a few
/// edits away (a swap of neighbours counts as one), or a prefix (`openai` → `openai-chat`).
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    if word.len() >= 3 {
        if let Some(c) = candidates.iter().find(|c| c.starts_with(word)) {
            return Some(c);
        }
    }
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= c.len().max(word.len()).div_ceil(3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Optimal string alignment distance: insertions, deletions, substitutions and
/// swaps of adjacent characters each cost one.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    d[0] = (0..=b.len()).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_keys_only() {
        let keys = ["max_loops", "model", "kind"];
        assert_eq!(closest("max_loop", &keys), Some("max_loops"));
        assert_eq!(closest("modle", &keys), Some("model"));
        assert_eq!(closest("colour", &keys), None);
    }

    #[test]
    fn edit_distance_counts_operations() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
        assert_eq!(edit_distance("modle", "model"), 1);
    }

    #[test]
    fn type_mismatch_is_plain_words() {
        assert_eq!(
            type_mismatch("integer `-1`, expected u32"),
            "expected a non-negative integer (got integer -1)"
        );
        assert_eq!(
            type_mismatch("sequence, expected a string"),
            "expected a string (got sequence)"
        );
    }
}
