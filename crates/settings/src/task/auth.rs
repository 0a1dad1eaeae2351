//! How an agent logs in in the container (SPEC §6.2, §18), decided when the task is
//! read, by the kind's rule (`agent::LoginRule`): its login file in the host's HOME
//! (mounted read-only) or its key variable (passed by name), whichever the kind
//! prefers when both are there. A login file that exists but cannot be read is an
//! error, never a silent fallback: its values must be masked (SPEC §10).

use std::path::{Path, PathBuf};

use super::host::{Host, Var};
use super::input_error::InputError;
use super::paths::{io_reason, read_regular};
use crate::Error;
use crate::agent::login::secrets_in;
use crate::agent::{Kind, Login};
use agent_runner_core::secret::Secret;

/// Largest login file we read (real ones are a few KiB).
pub(crate) const MAX_AUTH_BYTES: u64 = 1 << 20;

/// The login `kind` gets on this host.
pub fn resolve(kind: &dyn Kind, host: &Host) -> Result<Login, InputError> {
    let rule = kind.login_rule();
    let file = match host.var("HOME") {
        Var::Set(home) => {
            let path = Path::new(&home).join(rule.file);
            (path.is_absolute() && std::fs::symlink_metadata(&path).is_ok()).then_some(path)
        }
        _ => None,
    };
    let key = match host.var(rule.key_var) {
        Var::Set(key) if !key.is_empty() => Some(Secret::new(key)),
        Var::NotUtf8 => {
            return Err(InputError::new(
                rule.key_var,
                format!("environment variable {} is not valid UTF-8", rule.key_var),
            )
            .with_hint(format!(
                "{} logs in with it (or with ~/{})",
                kind.program(),
                rule.file
            ))
            .environment());
        }
        _ => None,
    };
    match (file, key) {
        (Some(path), Some(_)) if rule.file_first => login_file(kind, path),
        (Some(path), None) => login_file(kind, path),
        (_, Some(value)) => Ok(Login::Key {
            var: rule.key_var,
            value,
        }),
        (None, None) => Ok(Login::None),
    }
}

fn login_file(kind: &dyn Kind, path: PathBuf) -> Result<Login, InputError> {
    let shown = path.display().to_string();
    let problem = |message: String| {
        InputError::new(shown.clone(), message)
            .with_hint(format!(
                "{} in the container logs in with this file; fix or remove it",
                kind.program()
            ))
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
            Error::Read(e) => format!("cannot read it: {}", io_reason(&e)),
            Error::TooLarge(len) => format!("{len} bytes; the limit is {MAX_AUTH_BYTES} bytes"),
            other => other.to_string(),
        })
    })?;
    let json: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        problem(format!(
            "not valid JSON ({e}), so its secrets cannot be masked"
        ))
    })?;
    Ok(Login::File {
        path,
        secrets: secrets_in(&json),
        modes: kind.login_modes(&json),
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;
    use crate::agent::claude::{CLAUDE, OAUTH};
    use crate::agent::codex::{CHATGPT, CODEX};
    use crate::task::input_error::Category;

    struct Home(PathBuf);

    impl Home {
        fn new() -> Self {
            let dir =
                std::env::temp_dir().join(format!("agent-runner-auth-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(dir.join(".codex")).unwrap();
            std::fs::create_dir_all(dir.join(".claude")).unwrap();
            Home(dir)
        }

        fn auth(&self) -> PathBuf {
            self.0.join(".codex/auth.json")
        }

        fn resolve(&self, kind: &dyn Kind, key: Option<&str>) -> Result<Login, InputError> {
            let home = self.0.clone().into_os_string();
            let key = key.map(OsString::from);
            let var = kind.login_rule().key_var;
            let lookup = move |name: &str| match name {
                "HOME" => Some(home.clone()),
                name if name == var => key.clone(),
                _ => None,
            };
            resolve(
                kind,
                &Host {
                    var: &lookup,
                    cwd: Err(std::io::Error::other("unused")),
                },
            )
        }
    }

    impl Drop for Home {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn key(var: &'static str, value: &str) -> Login {
        Login::Key {
            var,
            value: Secret::new(value.into()),
        }
    }

    #[test]
    fn codex_prefers_the_file_then_the_key() {
        let home = Home::new();
        assert_eq!(
            home.resolve(&CODEX, Some("codex-key-1")).unwrap(),
            key("CODEX_API_KEY", "codex-key-1")
        );
        assert_eq!(home.resolve(&CODEX, Some("")).unwrap(), Login::None);
        assert_eq!(home.resolve(&CODEX, None).unwrap(), Login::None);
        std::fs::write(
            home.auth(),
            r#"{"tokens": {"access_token": "at-0123456789"}}"#,
        )
        .unwrap();
        assert_eq!(
            home.resolve(&CODEX, Some("codex-key-1")).unwrap(),
            Login::File {
                path: home.auth(),
                secrets: vec![Secret::new("at-0123456789".into())],
                modes: vec![CHATGPT],
            }
        );
    }

    #[test]
    fn claude_prefers_the_key_then_the_file() {
        let home = Home::new();
        let file = home.0.join(".claude/.credentials.json");
        std::fs::write(
            &file,
            r#"{"claudeAiOauth": {"accessToken": "sk-ant-oat01-xyz", "refreshToken": "sk-ant-ort01-xyz", "expiresAt": 4102444800000}}"#,
        )
        .unwrap();
        assert_eq!(
            home.resolve(&CLAUDE, Some("sk-ant-key")).unwrap(),
            key("ANTHROPIC_API_KEY", "sk-ant-key")
        );
        let login = home.resolve(&CLAUDE, None).unwrap();
        assert_eq!(
            login,
            Login::File {
                path: file,
                secrets: vec![
                    Secret::new("sk-ant-oat01-xyz".into()),
                    Secret::new("sk-ant-ort01-xyz".into())
                ],
                modes: vec![OAUTH],
            }
        );
    }

    #[test]
    fn unreadable_files_are_errors_not_silent_fallbacks() {
        let home = Home::new();
        std::fs::write(home.auth(), "not json").unwrap();
        let e = home.resolve(&CODEX, Some("k")).unwrap_err();
        assert_eq!(e.path, home.auth().display().to_string());
        assert_eq!(e.category, Category::Environment);
        assert!(e.message.contains("not valid JSON"), "{e}");
        std::fs::remove_file(home.auth()).unwrap();
        let c_path =
            std::ffi::CString::new(home.auth().into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let e = home.resolve(&CODEX, None).unwrap_err();
        assert!(e.message.contains("not a regular file"), "{e}");
        std::fs::remove_file(home.auth()).unwrap();
        let big = std::fs::File::create(home.auth()).unwrap();
        big.set_len(MAX_AUTH_BYTES + 1).unwrap();
        let e = home.resolve(&CODEX, None).unwrap_err();
        assert!(e.message.contains("the limit is"), "{e}");
    }

    #[test]
    fn a_binary_key_is_an_error() {
        use std::os::unix::ffi::OsStringExt;
        let lookup = |name: &str| (name == "CODEX_API_KEY").then(|| OsString::from_vec(vec![0xff]));
        let e = resolve(
            &CODEX,
            &Host {
                var: &lookup,
                cwd: Err(std::io::Error::other("unused")),
            },
        )
        .unwrap_err();
        assert_eq!(e.path, "CODEX_API_KEY");
        assert!(e.message.contains("not valid UTF-8"), "{e}");
    }
}
