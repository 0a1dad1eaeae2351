//! How codex authenticates in the container (SPEC §6.2), decided when the task is
//! read: the host's `~/.codex/auth.json` (mounted read-only) if there is one, else
//! `CODEX_API_KEY` (passed by name). Both are secrets: every string value of at least
//! `MIN_SECRET_CHARS` in auth.json is masked wherever agent-runner writes (SPEC §10),
//! since the worker can print the file.

use std::path::{Path, PathBuf};

use super::host::{Host, Var};
use super::input_error::InputError;
use super::paths::{ReadError, io_reason, read_regular};
use crate::secret::Secret;

/// Largest auth.json we read (real ones are a few KiB).
pub const MAX_AUTH_BYTES: u64 = 1 << 20;
/// Shorter string values in auth.json (flags, ids, short names) are not secrets.
pub const MIN_SECRET_CHARS: usize = 8;

/// How codex authenticates inside the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodexAuth {
    /// The host's `~/.codex/auth.json`, mounted read-only.
    File {
        path: PathBuf,
        /// Its string values, to mask.
        secrets: Vec<Secret>,
        /// What it holds (the hosts codex needs depend on it).
        login: Login,
    },
    /// `CODEX_API_KEY` from the host, passed by name on each run.
    ApiKey(Secret),
    None,
}

/// What an auth.json holds: a ChatGPT login (`tokens`), an API key
/// (`OPENAI_API_KEY`), or both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Login {
    pub chatgpt: bool,
    pub api_key: bool,
}

impl CodexAuth {
    /// `$HOME/.codex/auth.json` if it exists, else `CODEX_API_KEY` if set.
    pub fn resolve(host: &Host) -> Result<Self, InputError> {
        if let Var::Set(home) = host.var("HOME") {
            let path = Path::new(&home).join(".codex").join("auth.json");
            if path.is_absolute() && std::fs::symlink_metadata(&path).is_ok() {
                return auth_file(path);
            }
        }
        match host.var("CODEX_API_KEY") {
            Var::Set(key) if !key.is_empty() => Ok(CodexAuth::ApiKey(Secret::new(key))),
            Var::NotUtf8 => Err(InputError::new(
                "CODEX_API_KEY",
                "environment variable CODEX_API_KEY is not valid UTF-8",
            )
            .with_hint("codex authenticates with it when there is no ~/.codex/auth.json")
            .environment()),
            _ => Ok(CodexAuth::None),
        }
    }

    /// The secrets this holds, for masking.
    pub fn secrets(&self) -> Vec<Secret> {
        match self {
            CodexAuth::File { secrets, .. } => secrets.clone(),
            CodexAuth::ApiKey(key) => vec![key.clone()],
            CodexAuth::None => Vec::new(),
        }
    }
}

fn auth_file(path: PathBuf) -> Result<CodexAuth, InputError> {
    let shown = path.display().to_string();
    let problem = |message: String| {
        InputError::new(shown.clone(), message)
            .with_hint("codex in the container authenticates with this file; fix or remove it")
            .environment()
    };
    // It is mounted into the container by path: the same rule as for the repo.
    if path
        .to_str()
        .is_none_or(|p| p.chars().any(char::is_control))
    {
        return Err(problem(
            "the path is not UTF-8 text without control characters; docker cannot mount it safely"
                .into(),
        ));
    }
    let bytes = read_regular(&path, MAX_AUTH_BYTES).map_err(|e| {
        problem(match e {
            ReadError::Io(e) => format!("cannot read it: {}", io_reason(&e)),
            ReadError::NotAFile => "not a regular file".into(),
            ReadError::TooLarge(len) => {
                format!("{len} bytes; the limit is {MAX_AUTH_BYTES} bytes")
            }
        })
    })?;
    let json: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        problem(format!(
            "not valid JSON ({e}), so its secrets cannot be masked"
        ))
    })?;
    let mut secrets = Vec::new();
    collect_strings(&json, &mut secrets);
    let login = Login {
        chatgpt: json.get("tokens").is_some_and(serde_json::Value::is_object),
        api_key: json
            .get("OPENAI_API_KEY")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|key| !key.is_empty()),
    };
    Ok(CodexAuth::File {
        path,
        secrets,
        login,
    })
}

/// Every string value (not key) of at least `MIN_SECRET_CHARS` characters.
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
    use std::ffi::OsString;

    use super::*;
    use crate::task::input_error::Category;

    struct Home(PathBuf);

    impl Home {
        fn new() -> Self {
            let dir =
                std::env::temp_dir().join(format!("agent-runner-auth-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(dir.join(".codex")).unwrap();
            Home(dir)
        }

        fn auth(&self) -> PathBuf {
            self.0.join(".codex/auth.json")
        }

        fn resolve(&self, key: Option<&str>) -> Result<CodexAuth, InputError> {
            let home = self.0.clone().into_os_string();
            let key = key.map(OsString::from);
            let lookup = move |name: &str| match name {
                "HOME" => Some(home.clone()),
                "CODEX_API_KEY" => key.clone(),
                _ => None,
            };
            CodexAuth::resolve(&Host {
                var: &lookup,
                cwd: Err("unused".into()),
            })
        }
    }

    impl Drop for Home {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn prefers_the_file_then_the_key() {
        let home = Home::new();
        assert_eq!(
            home.resolve(Some("codex-key-1")).unwrap(),
            CodexAuth::ApiKey(Secret::new("codex-key-1".into()))
        );
        assert_eq!(home.resolve(Some("")).unwrap(), CodexAuth::None);
        assert_eq!(home.resolve(None).unwrap(), CodexAuth::None);
        std::fs::write(home.auth(), "{}").unwrap();
        assert_eq!(
            home.resolve(Some("codex-key-1")).unwrap(),
            CodexAuth::File {
                path: home.auth(),
                secrets: vec![],
                login: Login::default(),
            }
        );
    }

    #[test]
    fn every_long_string_value_of_the_file_is_a_secret() {
        let home = Home::new();
        std::fs::write(
            home.auth(),
            r#"{"OPENAI_API_KEY": null, "tokens": {"id_token": "eyJhbGciOi.x.y",
               "access_token": "at-0123456789", "account_id": "short", "list": ["refresh-abcdefgh", "at-0123456789"]},
               "last_refresh": "2025-01-01T00:00:00Z", "n": 123456789}"#,
        )
        .unwrap();
        let auth = home.resolve(None).unwrap();
        let mut secrets: Vec<&str> = match &auth {
            CodexAuth::File { secrets, .. } => secrets.iter().map(Secret::expose).collect(),
            other => panic!("{other:?}"),
        };
        secrets.sort_unstable();
        let CodexAuth::File { login, .. } = &auth else {
            unreachable!()
        };
        assert_eq!(
            *login,
            Login {
                chatgpt: true,
                api_key: false
            }
        );
        assert_eq!(
            secrets,
            [
                "2025-01-01T00:00:00Z",
                "at-0123456789",
                "eyJhbGciOi.x.y",
                "refresh-abcdefgh",
            ]
        );
        assert_eq!(auth.secrets().len(), 4);
    }

    #[test]
    fn unreadable_files_are_errors_not_silent_fallbacks() {
        let home = Home::new();
        std::fs::write(home.auth(), "not json").unwrap();
        let e = home.resolve(Some("k")).unwrap_err();
        assert_eq!(e.path, home.auth().display().to_string());
        assert_eq!(e.category, Category::Environment);
        assert!(e.message.contains("not valid JSON"), "{e}");
        std::fs::remove_file(home.auth()).unwrap();
        let c_path =
            std::ffi::CString::new(home.auth().into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let e = home.resolve(None).unwrap_err();
        assert!(e.message.contains("not a regular file"), "{e}");
        std::fs::remove_file(home.auth()).unwrap();
        let big = std::fs::File::create(home.auth()).unwrap();
        big.set_len(MAX_AUTH_BYTES + 1).unwrap();
        let e = home.resolve(None).unwrap_err();
        assert!(e.message.contains("the limit is"), "{e}");
    }

    #[test]
    fn a_binary_codex_key_is_an_error() {
        use std::os::unix::ffi::OsStringExt;
        let lookup = |name: &str| (name == "CODEX_API_KEY").then(|| OsString::from_vec(vec![0xff]));
        let e = CodexAuth::resolve(&Host {
            var: &lookup,
            cwd: Err("unused".into()),
        })
        .unwrap_err();
        assert_eq!(e.path, "CODEX_API_KEY");
        assert!(e.message.contains("not valid UTF-8"), "{e}");
    }
}
