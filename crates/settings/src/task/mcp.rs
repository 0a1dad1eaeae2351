//! `runner.worker.mcp_servers` (SPEC §28): `{NAME: {command, args, env} | {url,
//! headers}}`, values of `env` and `headers` literal or `env:VAR`, resolved here and
//! masked from then on; and `runner.sandbox.runtime`, the runtime the container
//! runs under. A URL server's host joins the run's allow list (`joined`).

use std::collections::BTreeMap;

use super::env_ref;
use super::fields::non_empty;
use super::fields::url_value;
use super::host::Host;
use super::input_error::{InputError, InputErrors};
use super::raw::RawMcpServer;
use super::structure::MAX_KEY_SHOWN;
use crate::agent::{McpServer, McpTransport, McpValue};
use crate::allow::{AllowList, Origin, Rule};
use agent_runner_core::secret::Secret;
use agent_runner_core::text::cut_chars;

/// Most servers a task may give its worker.
const MAX_SERVERS: usize = 32;
/// Longest server name (claude's tool names are `mcp__NAME__tool`, at most 64).
const MAX_NAME: usize = 32;

/// `runner.worker.mcp_servers`, every problem recorded (None when there was one).
pub(crate) fn servers(
    raw: Option<BTreeMap<String, RawMcpServer>>,
    host: &Host,
    problems: &mut InputErrors,
) -> Option<Vec<McpServer>> {
    let raw = raw.unwrap_or_default();
    if raw.len() > MAX_SERVERS {
        problems.push(InputError::new(
            "runner.worker.mcp_servers",
            format!("at most {MAX_SERVERS} servers (got {})", raw.len()),
        ));
        return None;
    }
    let mut out = Vec::new();
    let mut complete = true;
    for (name, server) in raw {
        match server_of(name, server, host, problems) {
            Some(server) => out.push(server),
            None => complete = false,
        }
    }
    complete.then_some(out)
}

fn server_of(
    name: String,
    raw: RawMcpServer,
    host: &Host,
    problems: &mut InputErrors,
) -> Option<McpServer> {
    let field = format!(
        "runner.worker.mcp_servers.{}",
        cut_chars(&name, MAX_KEY_SHOWN)
    );
    if !is_name(&name) {
        problems.push(InputError::new(
            &field,
            format!(
                "a server's name must be 1 to {MAX_NAME} letters, digits, `_` or `-`, without `__` (it names the server in the agent's configuration and its tools)"
            ),
        ));
        return None;
    }
    let transport = match (non_empty(raw.command), non_empty(raw.url)) {
        (Some(command), None) => {
            for (present, key) in [(raw.headers.is_some(), "headers")] {
                if present {
                    problems.push(InputError::new(
                        format!("{field}.{key}"),
                        "only used with `url` (a remote server)",
                    ));
                    return None;
                }
            }
            stdio(&field, command, raw.args, raw.env, host, problems)?
        }
        (None, Some(url)) => {
            for (present, key) in [(raw.args.is_some(), "args"), (raw.env.is_some(), "env")] {
                if present {
                    problems.push(InputError::new(
                        format!("{field}.{key}"),
                        "only used with `command` (a server the agent starts in the sandbox)",
                    ));
                    return None;
                }
            }
            let url = problems.take(url_value(&url, &format!("{field}.url")))?;
            let headers = values(
                raw.headers,
                &format!("{field}.headers"),
                true,
                host,
                problems,
            )?;
            McpTransport::Remote { url, headers }
        }
        (Some(_), Some(_)) => {
            problems.push(InputError::new(
                &field,
                "give exactly one of `command` (stdio) and `url` (remote) (got both)",
            ));
            return None;
        }
        (None, None) => {
            problems.push(
                InputError::new(
                    &field,
                    "give `command` (a program in the sandbox, speaking MCP on stdio) or `url` (a remote server)",
                )
                .with_hint(format!("{field}:\n  command: python3\n  args: [-m, my_server]")),
            );
            return None;
        }
    };
    Some(McpServer { name, transport })
}

fn stdio(
    field: &str,
    command: String,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    host: &Host,
    problems: &mut InputErrors,
) -> Option<McpTransport> {
    let command = command.trim().to_string();
    if command.chars().any(|c| c.is_control() || c.is_whitespace()) {
        problems.push(
            InputError::new(
                format!("{field}.command"),
                format!(
                    "must be one program, a name on the sandbox's PATH or an absolute path (got {:?})",
                    cut_chars(&command, 60)
                ),
            )
            .with_hint("put its arguments in `args`"),
        );
        return None;
    }
    let args = args.unwrap_or_default();
    if let Some(n) = args.iter().position(|a| a.contains('\0')) {
        problems.push(InputError::new(
            format!("{field}.args[{n}]"),
            "must not contain a NUL character",
        ));
        return None;
    }
    let env = values(env, &format!("{field}.env"), false, host, problems)?;
    Some(McpTransport::Stdio { command, args, env })
}

/// A server's `env` or `headers`: names checked, `env:VAR` values resolved;
/// `all_secret`: literals are secrets too (headers are there to authenticate).
fn values(
    raw: Option<BTreeMap<String, String>>,
    field: &str,
    headers: bool,
    host: &Host,
    problems: &mut InputErrors,
) -> Option<Vec<(String, McpValue)>> {
    let mut out = Vec::new();
    let mut complete = true;
    for (name, value) in raw.unwrap_or_default() {
        let at = format!("{field}.{}", cut_chars(&name, MAX_KEY_SHOWN));
        let valid = if headers {
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        } else {
            env_ref::is_env_name(&name)
        };
        if !valid {
            complete = false;
            problems.push(InputError::new(
                &at,
                if headers {
                    "not a valid header name"
                } else {
                    "not a valid variable name (letters, digits, _; not starting with a digit)"
                },
            ));
            continue;
        }
        if value.chars().any(|c| c.is_control()) {
            complete = false;
            problems.push(InputError::new(&at, "must not contain control characters"));
            continue;
        }
        let resolved = env_ref::variable(&value, &at).and_then(|var| match var {
            None => Ok(McpValue {
                value: Secret::new(value),
                from: None,
            }),
            Some(var) => env_ref::resolve(&var, &at, host).map(|value| McpValue {
                value,
                from: Some(var),
            }),
        });
        match resolved {
            Ok(value) => out.push((name, value)),
            Err(e) => {
                complete = false;
                problems.push(e);
            }
        }
    }
    complete.then_some(out)
}

/// `[A-Za-z0-9_-]{1,MAX_NAME}`.
fn is_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && !name.contains("__")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `allow` with the host of every URL server on it (once), the defaults' reason
/// naming them.
pub(crate) fn joined(mut allow: AllowList, servers: &[McpServer]) -> AllowList {
    let mut named = Vec::new();
    for server in servers {
        let McpTransport::Remote { url, .. } = &server.transport else {
            continue;
        };
        let Some(rule) = super::default_allow::url_entry(url).and_then(|e| Rule::parse(&e).ok())
        else {
            continue;
        };
        if !allow.rules.contains(&rule) {
            allow.rules.push(rule);
        }
        named.push(format!("MCP server {}", server.name));
    }
    if let (Origin::Default(why), false) = (&mut allow.origin, named.is_empty()) {
        for name in named {
            if !why.is_empty() {
                why.push_str(", ");
            }
            why.push_str(&name);
        }
    }
    allow
}

/// `runner.sandbox.runtime`: a runtime's name as docker registers them.
pub(crate) fn runtime(raw: Option<String>, problems: &mut InputErrors) -> Option<Option<String>> {
    let Some(name) = non_empty(raw) else {
        return Some(None);
    };
    let name = name.trim().to_string();
    let valid = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !valid {
        problems.push(
            InputError::new(
                "runner.sandbox.runtime",
                format!(
                    "must be a runtime's name as the Docker daemon registers it, such as runsc (got {:?})",
                    cut_chars(&name, 60)
                ),
            )
            .with_hint("`docker info --format '{{json .Runtimes}}'` lists the daemon's"),
        );
        return None;
    }
    Some(Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_and_short() {
        assert!(is_name("notes") && is_name("docs-2") && is_name("a_b"));
        for bad in [
            "",
            "a.b",
            "a b",
            "a/b",
            "ü",
            "a__b",
            &"x".repeat(MAX_NAME + 1),
        ] {
            assert!(!is_name(bad), "{bad}");
        }
    }

    #[test]
    fn runtimes_are_names() {
        let mut problems = InputErrors::default();
        assert_eq!(
            runtime(Some("runsc".into()), &mut problems),
            Some(Some("runsc".into()))
        );
        assert_eq!(
            runtime(Some("io.containerd.runc.v2".into()), &mut problems),
            Some(Some("io.containerd.runc.v2".into()))
        );
        assert_eq!(runtime(None, &mut problems), Some(None));
        assert!(problems.is_empty());
        for bad in ["--privileged", "a b", "runsc;x", "-x"] {
            assert_eq!(runtime(Some(bad.into()), &mut problems), None, "{bad}");
        }
    }
}
