//! What went wrong in a Task YAML, said so a user can fix it: the field path, the
//! problem, what was found, where (line/column) and a hint. A document may have many
//! problems; `InputErrors` holds all of them, in the order they are reported.

use std::fmt;

use agent_runner_core::text::escape_controls;

/// Which check found a problem. Problems are reported in this order (SPEC §10:
/// schema problems before environment problems).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    /// The text is not one YAML mapping; nothing else can be checked.
    Syntax,
    /// The document's shape is unclear (v1 keys without `version`).
    Shape,
    /// A key the shape does not have.
    UnknownKey,
    /// A value of the wrong type.
    Structure,
    /// A value of the right type that breaks a rule (range, format, required key).
    Value,
    /// The host: environment variables, files, directories.
    Environment,
}

/// One problem in the task input. Displayed as `<path>: <message> (line L, column C)`.
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    /// Dotted field path (`runner.meta.max_loops`), `stdin` for the document itself,
    /// or the environment variable or file the problem is in.
    pub(crate) path: String,
    pub message: String,
    pub(crate) location: Option<(usize, usize)>,
    pub hint: Option<String>,
    pub(crate) category: Category,
}

impl InputError {
    /// A value problem (see `Category::Value`).
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        InputError {
            path: path.into(),
            message: message.into(),
            location: None,
            hint: None,
            category: Category::Value,
        }
    }

    /// Its field path (or the variable or file it is about).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What kind of problem it is.
    pub fn category(&self) -> Category {
        self.category
    }

    pub(crate) fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub(crate) fn in_category(mut self, category: Category) -> Self {
        self.category = category;
        self
    }

    /// A problem with the host rather than the YAML.
    pub(crate) fn environment(self) -> Self {
        self.in_category(Category::Environment)
    }

    /// Translates a serde_norway error (syntax, duplicate keys, several documents, alias
    /// bombs) into our wording. serde_norway prefixes messages with the field path
    /// (`runner.worker.env: duplicate entry ...`); we split that off.
    pub(crate) fn from_yaml(err: &serde_norway::Error) -> Self {
        let location = err.location().map(|l| (l.line(), l.column()));
        let mut text = err.to_string();
        // serde_norway appends " at line L column C"; we print the location ourselves.
        if let Some((line, column)) = location {
            let suffix = format!(" at line {line} column {column}");
            if text.ends_with(&suffix) {
                text.truncate(text.len() - suffix.len());
            }
        }
        let (path, message) = split_path(&text);
        let mut error = if let Some(rest) = message.strip_prefix("duplicate field `") {
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
        error.in_category(Category::Syntax)
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

/// Most problems kept: a document of 16 MiB could hold millions, and nobody reads
/// past the first screens; the rest are counted.
pub(crate) const MAX_PROBLEMS: usize = 100;

/// Every problem found in the task input (the first `MAX_PROBLEMS`, the rest
/// counted), in report order once `into_report` ran. Displayed on one line (control
/// characters escaped), problems separated by `; `, so a one-line result can carry
/// all of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InputErrors {
    list: Vec<InputError>,
    /// Problems found beyond `MAX_PROBLEMS`.
    omitted: usize,
}

impl InputErrors {
    /// Records a problem: kept, or only counted once `MAX_PROBLEMS` are kept.
    pub(crate) fn push(&mut self, error: InputError) {
        if self.is_full() {
            self.omitted += 1;
        } else {
            self.list.push(error);
        }
    }

    /// Whether further problems are only counted.
    pub(crate) fn is_full(&self) -> bool {
        self.list.len() >= MAX_PROBLEMS
    }

    /// Problems found but not kept.
    pub fn omitted(&self) -> usize {
        self.omitted
    }

    /// Every problem found, kept or not.
    pub(crate) fn found(&self) -> usize {
        self.list.len() + self.omitted
    }

    /// Records the error of `result`, if any; the value otherwise.
    pub(crate) fn take<T>(&mut self, result: Result<T, InputError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                self.push(error);
                None
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.found() == 0
    }

    /// The problems kept.
    pub fn iter(&self) -> std::slice::Iter<'_, InputError> {
        self.list.iter()
    }

    /// In report order (by category, stable), without the problems that a structure
    /// problem already explains: a value removed for its wrong type, or a section
    /// whose key was misspelt, must not also be reported as missing. `covered` are
    /// the paths of structure problems (and of the keys their hints suggest).
    pub(crate) fn into_report(mut self, covered: &[String]) -> Self {
        self.list.retain(|e| {
            e.category < Category::Value || !covered.iter().any(|c| related(&e.path, c))
        });
        self.list.sort_by_key(|e| e.category);
        self
    }
}

impl InputErrors {
    /// Every problem on one line, each with its hint in brackets: for records where
    /// there is no separate hint line (an attempt's error).
    pub fn with_hints(&self) -> String {
        let mut parts: Vec<String> = self
            .list
            .iter()
            .map(|e| match &e.hint {
                Some(hint) => format!("{e} ({})", agent_runner_core::text::one_line(hint)),
                None => e.to_string(),
            })
            .collect();
        if self.omitted > 0 {
            parts.push(self.omitted_note());
        }
        escape_controls(&parts.join("; "))
    }

    /// What to say about the problems not kept.
    pub fn omitted_note(&self) -> String {
        format!(
            "… and {} more problems (only the first {MAX_PROBLEMS} are listed)",
            self.omitted
        )
    }
}

/// Whether one dotted path is the other or lies inside it.
fn related(a: &str, b: &str) -> bool {
    let inside = |inner: &str, outer: &str| {
        inner == outer
            || inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with(['.', '[']))
    };
    inside(a, b) || inside(b, a)
}

impl From<InputError> for InputErrors {
    fn from(error: InputError) -> Self {
        InputErrors {
            list: vec![error],
            omitted: 0,
        }
    }
}

impl<'a> IntoIterator for &'a InputErrors {
    type Item = &'a InputError;
    type IntoIter = std::slice::Iter<'a, InputError>;

    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}

impl fmt::Display for InputErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, error) in self.list.iter().enumerate() {
            if n > 0 {
                f.write_str("; ")?;
            }
            f.write_str(&escape_controls(&error.to_string()))?;
        }
        if self.omitted > 0 {
            write!(f, "; {}", self.omitted_note())?;
        }
        Ok(())
    }
}

impl std::error::Error for InputErrors {}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_order_is_by_category_then_as_found() {
        let mut errors = InputErrors::default();
        errors.push(InputError::new("b", "x").environment());
        errors.push(InputError::new("a", "x"));
        errors.push(InputError::new("u", "x").in_category(Category::UnknownKey));
        errors.push(InputError::new("c", "x"));
        let report = errors.into_report(&[]);
        let paths: Vec<&str> = report.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["u", "a", "c", "b"]);
    }

    #[test]
    fn structure_problems_cover_their_own_paths_only() {
        let mut errors = InputErrors::default();
        errors.push(
            InputError::new("task.prd.path", "unknown key").in_category(Category::UnknownKey),
        );
        errors.push(InputError::new("task.prd", "got neither"));
        errors.push(InputError::new("task.prd.path.x", "inner"));
        errors.push(InputError::new("task.prdx", "sibling"));
        errors.push(InputError::new("runner.worker.extra_args", "derived"));
        let covered = [
            "task.prd.path".to_string(),
            "runner.worker.extra_args[1]".to_string(),
        ];
        let report = errors.into_report(&covered);
        let paths: Vec<&str> = report.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["task.prd.path", "task.prdx"]);
    }

    #[test]
    fn problems_beyond_the_limit_are_counted_not_kept() {
        let mut errors = InputErrors::default();
        for n in 0..MAX_PROBLEMS + 5 {
            errors.push(InputError::new(format!("p{n}"), "x"));
        }
        assert_eq!(errors.iter().count(), MAX_PROBLEMS);
        assert_eq!((errors.omitted(), errors.found()), (5, MAX_PROBLEMS + 5));
        assert!(
            errors
                .to_string()
                .ends_with("; … and 5 more problems (only the first 100 are listed)")
        );
    }

    #[test]
    fn display_is_one_line_per_list() {
        let mut errors = InputErrors::from(InputError::new("a", "bad"));
        let mut located = InputError::new("b", "worse");
        located.location = Some((2, 3));
        errors.push(located);
        errors.push(InputError::new("c", "two\nlines"));
        assert_eq!(
            errors.to_string(),
            "a: bad; b: worse (line 2, column 3); c: two\\nlines"
        );
    }
}
