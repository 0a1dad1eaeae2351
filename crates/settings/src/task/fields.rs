//! Rules for single values, shared by the `task` and `runner` sections: required and
//! non-empty text, one-line text, durations, choices, command arguments and base
//! URLs.

use std::time::Duration;

use super::input_error::InputError;
use super::suggest::closest;
use agent_runner_core::text::cut_chars;

/// Upper bound for every `*_sec` setting (one week): keeps deadlines representable.
pub const MAX_SECONDS: u64 = 7 * 24 * 3600;

/// How much of a user's value an error message repeats.
pub(crate) const SHOWN_CHARS: usize = 60;

/// The error for a required value that is missing or blank.
pub(crate) fn required(path: &str) -> InputError {
    InputError::new(path, "required (missing or empty)")
}

/// `value` unless it is missing or blank.
pub(crate) fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

/// Whether `value` is text shown as one line (the rule for titles, which the
/// pipeline applies too): no control characters, no line separators.
pub fn is_one_line(value: &str) -> bool {
    !value
        .chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
}

/// `value` if it `is_one_line`.
pub(crate) fn one_line(value: String, field: &str) -> Result<String, InputError> {
    if !is_one_line(&value) {
        return Err(InputError::new(
            field,
            format!(
                "must be one line without control characters (got {:?})",
                cut_chars(&value, SHOWN_CHARS)
            ),
        ));
    }
    Ok(value)
}

/// A number of seconds between 1 and `MAX_SECONDS`, `default` when absent.
pub(crate) fn seconds(
    value: Option<u64>,
    default: u64,
    field: &str,
) -> Result<Duration, InputError> {
    let secs = value.unwrap_or(default);
    if !(1..=MAX_SECONDS).contains(&secs) {
        return Err(InputError::new(
            field,
            format!("must be between 1 and {MAX_SECONDS} seconds (got {secs})"),
        ));
    }
    Ok(Duration::from_secs(secs))
}

/// `value`, if it is one of `choices`.
pub(crate) fn choice<'a>(
    value: &str,
    field: &str,
    choices: &[&'a str],
) -> Result<&'a str, InputError> {
    if let Some(found) = choices.iter().find(|c| **c == value) {
        return Ok(found);
    }
    let error = InputError::new(
        field,
        format!(
            "must be one of {} (got {:?})",
            choices.join(", "),
            cut_chars(value, SHOWN_CHARS)
        ),
    );
    Err(match closest(value, choices) {
        Some(best) => error.with_hint(format!("did you mean `{best}`?")),
        None => error,
    })
}

/// A value that ends up as one argument of a docker or codex command: a leading `-`
/// would turn it into an option.
pub(crate) fn argument(value: Option<String>, field: &str) -> Result<Option<String>, InputError> {
    match value {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Err(InputError::new(field, "must not be empty")),
        Some(v) if v.starts_with('-') || v.chars().any(|c| c.is_whitespace() || c.is_control()) => {
            Err(InputError::new(
                field,
                format!(
                    "must not start with `-` or contain spaces (got {:?})",
                    cut_chars(&v, SHOWN_CHARS)
                ),
            ))
        }
        Some(v) => Ok(Some(v)),
    }
}

/// A base URL: http:// or https://, without spaces, controls or quotes (it ends up
/// in a codex `-c key="value"` option too); without a trailing `/`.
pub(crate) fn url_value(url: &str, field: &str) -> Result<String, InputError> {
    let url = url.trim();
    if !(url.starts_with("http://") || url.starts_with("https://"))
        || url
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || matches!(c, '"' | '\\' | '\''))
    {
        return Err(InputError::new(
            field,
            format!(
                "must be an http:// or https:// URL without spaces or quotes (got {:?})",
                cut_chars(url, 80)
            ),
        ));
    }
    Ok(url.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_refuses_controls_and_line_separators() {
        assert_eq!(one_line("a b – ü".into(), "t"), Ok("a b – ü".into()));
        for bad in [
            "a\nb",
            "a\rb",
            "a\tb",
            "\u{1b}[31m",
            "a\u{2028}b",
            "a\u{85}b",
        ] {
            let e = one_line(bad.into(), "t").unwrap_err();
            assert_eq!(e.path, "t");
            assert!(e.message.contains("one line"), "{e}");
        }
    }

    #[test]
    fn choices_echo_at_most_a_bounded_value() {
        let long = "x".repeat(10_000);
        let e = choice(&long, "f", &["a", "b"]).unwrap_err();
        assert!(e.message.len() < 120, "{e}");
        assert_eq!(e.hint, None);
        let e = choice("bridged", "f", &["bridge", "none"]).unwrap_err();
        assert_eq!(e.hint.as_deref(), Some("did you mean `bridge`?"));
        assert_eq!(choice("none", "f", &["bridge", "none"]), Ok("none"));
    }
}
