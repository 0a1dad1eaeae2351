//! How an agent logs in inside the container: the rule a kind states (its key
//! variable, its login file on the host and where that file goes in the container's
//! HOME) and the login a task resolved from it (`task::auth` reads the host). Both
//! ways are secrets: a key passes by name, a login file is mounted read-only and
//! every long string in it is masked wherever agent-runner writes (SPEC §10), since
//! the agent can print the file.

use std::path::PathBuf;

use agent_runner_core::secret::Secret;

/// Shorter string values in a login file (flags, ids, short names) are not secrets.
pub const MIN_SECRET_CHARS: usize = 8;

/// What a kind says about logging in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginRule {
    /// The API key variable the agent reads (`CODEX_API_KEY`).
    pub key_var: &'static str,
    /// Other variables that log it in when the task's env sets them (claude's
    /// `CLAUDE_CODE_OAUTH_TOKEN`); never taken from the host by themselves.
    pub env_logins: &'static [&'static str],
    /// The login file under the host's HOME (`.codex/auth.json`).
    pub file: &'static str,
    /// With both a login file and a key: the file wins (else the key).
    pub file_first: bool,
    /// Where the file is mounted read-only in the container.
    pub mount: &'static str,
    /// Where the agent looks for it, under the container's HOME; a link to `mount`.
    pub link: &'static str,
    /// How a user logs in, for messages.
    pub how: &'static str,
}

/// How an agent logs in for a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Login {
    /// The host's login file, mounted read-only.
    File {
        path: PathBuf,
        /// Its long string values, to mask.
        secrets: Vec<Secret>,
        /// What it holds, as the kind reads it (`chatgpt`, `api_key`, `oauth`); the
        /// hosts the agent needs depend on it.
        modes: Vec<&'static str>,
    },
    /// The key variable from the host, passed by name on each run.
    Key {
        var: &'static str,
        value: Secret,
    },
    None,
}

impl Login {
    /// The secrets this holds, for masking.
    pub fn secrets(&self) -> Vec<Secret> {
        match self {
            Login::File { secrets, .. } => secrets.clone(),
            Login::Key { value, .. } => vec![value.clone()],
            Login::None => Vec::new(),
        }
    }

    /// Whether a login file holding `mode` is used.
    pub fn has(&self, mode: &str) -> bool {
        matches!(self, Login::File { modes, .. } if modes.contains(&mode))
    }
}

/// Every string value (not key) of `value` of at least `MIN_SECRET_CHARS`
/// characters, each once.
pub fn secrets_in(value: &serde_json::Value) -> Vec<Secret> {
    let mut out = Vec::new();
    collect_strings(value, &mut out);
    out
}

fn collect_strings(value: &serde_json::Value, out: &mut Vec<Secret>) {
    match value {
        serde_json::Value::String(s)
            if s.chars().count() >= MIN_SECRET_CHARS
                && !out.iter().any(|known| known.expose() == s) =>
        {
            out.push(Secret::new(s.clone()));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_long_string_value_is_a_secret_once() {
        let json: serde_json::Value = serde_json::from_str(
            r#"{"OPENAI_API_KEY": null, "tokens": {"id_token": "eyJhbGciOi.x.y",
               "access_token": "at-0123456789", "account_id": "short", "list": ["refresh-abcdefgh", "at-0123456789"]},
               "last_refresh": "2025-01-01T00:00:00Z", "n": 123456789}"#,
        )
        .unwrap();
        let mut secrets: Vec<String> = secrets_in(&json)
            .iter()
            .map(|s| s.expose().to_string())
            .collect();
        secrets.sort_unstable();
        assert_eq!(
            secrets,
            [
                "2025-01-01T00:00:00Z",
                "at-0123456789",
                "eyJhbGciOi.x.y",
                "refresh-abcdefgh",
            ]
        );
    }
}
