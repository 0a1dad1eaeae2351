//! `defaults.notify` (SPEC §23): who is told when an attempt ends, and how: a
//! signed webhook (`url`, `secret: env:VAR`) or a command reading the JSON on its
//! stdin. The secret stays in the environment; only its variable's name is here.

use super::field_error::FieldError;
use serde::{Deserialize, Serialize};

/// The events a notifier can be told of.
pub(crate) const EVENTS: &[&str] = &["succeeded", "failed", "budget", "awaiting_approval"];

/// One entry of `defaults.notify`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Notifier {
    /// The events it is told of.
    pub(crate) on: Vec<String>,
    /// An `http://` or `https://` URL the JSON is POSTed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) url: Option<String>,
    /// `env:VAR`: the variable holding the webhook's HMAC key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) secret: Option<String>,
    /// Run with `sh -c` on the host, the JSON on its stdin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) command: Option<String>,
}

impl Notifier {
    /// The variable named by `secret: env:VAR`.
    pub(crate) fn secret_var(&self) -> Option<&str> {
        self.secret.as_deref()?.strip_prefix("env:")
    }

    /// Checks entry `index` of `notify`.
    pub(crate) fn check(&self, index: usize) -> Result<(), FieldError> {
        let at = format!("notify[{index}]");
        if self.on.is_empty() {
            return Err(FieldError::new(
                format!("{at}.on"),
                format!("name at least one of {}", EVENTS.join(", ")),
            ));
        }
        for event in &self.on {
            if !EVENTS.contains(&event.as_str()) {
                return Err(FieldError::new(
                    format!("{at}.on"),
                    format!("unknown event `{event}` (valid: {})", EVENTS.join(", ")),
                ));
            }
        }
        match (&self.url, &self.command) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new(at, "either `url` or `command`, not both"));
            }
            (None, None) => return Err(FieldError::new(at, "needs `url` or `command`")),
            (Some(url), None) => {
                let lower = url.to_ascii_lowercase();
                if !(lower.starts_with("http://") || lower.starts_with("https://"))
                    || url.contains(char::is_whitespace)
                {
                    return Err(FieldError::new(
                        format!("{at}.url"),
                        "expected an http:// or https:// URL",
                    ));
                }
            }
            (None, Some(command)) => {
                if command.trim().is_empty() {
                    return Err(FieldError::new(format!("{at}.command"), "empty"));
                }
                if self.secret.is_some() {
                    return Err(FieldError::new(
                        format!("{at}.secret"),
                        "only used with `url`",
                    ));
                }
            }
        }
        if self.secret.is_some() {
            let valid = self.secret_var().is_some_and(|v| {
                !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            if !valid {
                return Err(FieldError::new(
                    format!("{at}.secret"),
                    "expected `env:VAR` (the variable holding the key), never the key itself",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(on: &[&str], url: &str, secret: Option<&str>) -> Notifier {
        Notifier {
            on: on.iter().map(|s| s.to_string()).collect(),
            url: Some(url.into()),
            secret: secret.map(str::to_string),
            command: None,
        }
    }

    #[test]
    fn a_notifier_names_known_events_one_target_and_its_secret_by_variable() {
        assert!(
            hook(&["succeeded"], "https://h.test/x", Some("env:HOOK_KEY"))
                .check(0)
                .is_ok()
        );
        assert!(hook(&[], "https://h.test/x", None).check(0).is_err());
        let e = hook(&["done"], "https://h.test/x", None)
            .check(1)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("notify[1].on") && e.contains("succeeded, failed, budget"),
            "{e}"
        );
        assert!(
            hook(&["failed"], "file:///etc/passwd", None)
                .check(0)
                .is_err()
        );
        let e = hook(&["failed"], "https://h.test/x", Some("s3cr3t"))
            .check(0)
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cr3t") && e.contains("env:VAR"), "{e}");
        let both = Notifier {
            command: Some("cat".into()),
            ..hook(&["failed"], "https://h.test/x", None)
        };
        assert!(both.check(0).is_err());
    }
}
