//! `env:NAME` values: taken from the host environment when the task is read, and
//! secret from then on. Reading the spelling (a YAML problem) and resolving it (a host
//! problem) are separate steps, so they are reported in their own groups.

use super::host::{Host, Var};
use super::input_error::InputError;
use agent_runner_core::secret::Secret;
use agent_runner_core::text::cut_chars;

const PREFIX: &str = "env:";

/// The variable named by an `env:NAME` value; `None` for a literal.
pub(crate) fn variable(value: &str, field: &str) -> Result<Option<String>, InputError> {
    let Some(var) = value.strip_prefix(PREFIX) else {
        return Ok(None);
    };
    let var = var.trim();
    if !is_env_name(var) {
        return Err(InputError::new(
            field,
            format!(
                "`env:` must be followed by a variable name (got {:?})",
                cut_chars(value, 60)
            ),
        ));
    }
    Ok(Some(var.to_string()))
}

/// The value of `var` on the host, which must be set, non-empty text.
pub fn resolve(var: &str, field: &str, host: &Host) -> Result<Secret, InputError> {
    let problem = match host.var(var) {
        Var::Set(value) if !value.is_empty() => return Ok(Secret::new(value)),
        Var::Set(_) => "is empty",
        Var::Unset => "is not set",
        Var::NotUtf8 => "is not valid UTF-8",
    };
    Err(InputError::new(
        field,
        format!("environment variable {var} {problem} (from \"env:{var}\")"),
    )
    .with_hint(format!(
        "export {var}=... (UTF-8 text) before running agent-runner"
    ))
    .environment())
}

/// Letters, digits and `_`, not starting with a digit.
pub(crate) fn is_env_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    use super::*;
    use crate::task::input_error::Category;

    #[test]
    fn literals_and_references() {
        assert_eq!(variable("plain", "f"), Ok(None));
        assert_eq!(variable("env: KEY ", "f"), Ok(Some("KEY".into())));
        let e = variable("env:", "f").unwrap_err();
        assert_eq!((e.path.as_str(), e.category), ("f", Category::Value));
        assert!(e.message.contains("variable name"), "{e}");
        assert!(variable("env:1X", "f").is_err());
    }

    #[test]
    fn unset_empty_and_binary_values_are_told_apart() {
        let lookup = |name: &str| match name {
            "SET" => Some(OsString::from("value")),
            "EMPTY" => Some(OsString::new()),
            "BINARY" => Some(OsString::from_vec(vec![0xff, 0xfe])),
            _ => None,
        };
        let host = Host {
            var: &lookup,
            cwd: Err(std::io::Error::other("unused")),
        };
        assert_eq!(resolve("SET", "f", &host).unwrap().expose(), "value");
        for (var, words) in [
            ("EMPTY", "EMPTY is empty"),
            ("UNSET", "UNSET is not set"),
            ("BINARY", "BINARY is not valid UTF-8"),
        ] {
            let e = resolve(var, "f", &host).unwrap_err();
            assert_eq!((e.path.as_str(), e.category), ("f", Category::Environment));
            assert!(e.message.contains(words), "{e}");
            assert!(
                e.hint
                    .as_deref()
                    .unwrap()
                    .contains(&format!("export {var}="))
            );
        }
    }
}
