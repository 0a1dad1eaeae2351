//! MCP servers the worker's agent is given (`runner.worker.mcp_servers`, SPEC §28),
//! and how each kind is told of them: codex as `[mcp_servers.NAME]` tables of its
//! `config.toml`, Claude Code as the JSON of an `--mcp-config` file. Both are the
//! agent's settings file of the run (`Kind::settings_file`): written into the
//! container's private tmpfs before the run, never on a command line, since the
//! servers' variables and headers are credentials.
//!
//! A stdio server runs inside the sandbox (the agent starts it); a URL server is
//! reached through the egress proxy, its host on the run's allow list
//! (`task::mcp`).

use serde_json::{Map, Value, json};

use agent_runner_core::secret::Secret;

/// One MCP server, its values resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// The key under `runner.worker.mcp_servers` (`[A-Za-z0-9_-]`, at most 64):
    /// a bare TOML key, and the middle of claude's `mcp__NAME__tool`.
    pub name: String,
    pub transport: McpTransport,
}

/// How the agent reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A program the agent starts in the sandbox, speaking MCP on its stdio.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Its variables: each `(name, value)`; values given as `env:VAR` are
        /// secrets, literals are not.
        env: Vec<(String, McpValue)>,
    },
    /// A server over streamable HTTP.
    Remote {
        url: String,
        /// Request headers; every value is masked (they are there to authenticate).
        headers: Vec<(String, McpValue)>,
    },
}

/// A value of a server's variable or header, and how `validate` may show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpValue {
    pub value: Secret,
    /// `env:VAR` for a value from the host; None for a literal.
    pub from: Option<String>,
}

impl McpServer {
    /// Every value to mask: variables from the host, every header value, and the
    /// credentials in a URL.
    pub fn secrets(&self) -> Vec<Secret> {
        match &self.transport {
            McpTransport::Stdio { env, .. } => env
                .iter()
                .filter(|(_, v)| v.from.is_some())
                .map(|(_, v)| v.value.clone())
                .collect(),
            McpTransport::Remote { url, headers } => {
                let mut out = agent_runner_core::secret::in_url(url);
                out.extend(headers.iter().map(|(_, v)| v.value.clone()));
                out
            }
        }
    }

    /// The server in words, without any secret value: `validate` and the note.
    pub fn describe(&self) -> String {
        let values = |values: &[(String, McpValue)]| {
            values
                .iter()
                .map(|(name, v)| match &v.from {
                    Some(var) => format!("{name}=env:{var}"),
                    None => format!("{name}=***"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        match &self.transport {
            McpTransport::Stdio { command, args, env } => {
                let mut text = format!("{}: stdio `{}", self.name, command);
                for arg in args {
                    text.push(' ');
                    text.push_str(arg);
                }
                text.push('`');
                if !env.is_empty() {
                    text.push_str(&format!(" (env {})", values(env)));
                }
                text
            }
            McpTransport::Remote { url, headers } => {
                let mut text = format!("{}: {}", self.name, without_credentials(url));
                if !headers.is_empty() {
                    text.push_str(&format!(" (headers {})", values(headers)));
                }
                text
            }
        }
    }
}

/// `url` with any userinfo and query left out (both may hold a credential).
fn without_credentials(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{host}{path}")
}

/// The `[mcp_servers.NAME]` tables of codex's `config.toml` (after the rest of it).
pub fn codex_toml(servers: &[McpServer]) -> String {
    // A JSON string is a TOML basic string (the same escapes), and the names are
    // bare keys.
    let string = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    let table = |values: &[(String, McpValue)]| {
        let entries: Vec<String> = values
            .iter()
            .map(|(k, v)| format!("{} = {}", string(k), string(v.value.expose())))
            .collect();
        format!("{{ {} }}", entries.join(", "))
    };
    let mut out = String::new();
    for server in servers {
        out.push_str(&format!("\n\n[mcp_servers.{}]", server.name));
        match &server.transport {
            McpTransport::Stdio { command, args, env } => {
                let args: Vec<String> = args.iter().map(|a| string(a)).collect();
                out.push_str(&format!(
                    "\ncommand = {}\nargs = [{}]",
                    string(command),
                    args.join(", ")
                ));
                if !env.is_empty() {
                    out.push_str(&format!("\nenv = {}", table(env)));
                }
            }
            McpTransport::Remote { url, headers } => {
                out.push_str(&format!("\nurl = {}", string(url)));
                if !headers.is_empty() {
                    out.push_str(&format!("\nhttp_headers = {}", table(headers)));
                }
            }
        }
    }
    out
}

/// The JSON of Claude Code's `--mcp-config` file.
pub fn claude_json(servers: &[McpServer]) -> String {
    let object = |values: &[(String, McpValue)]| {
        Value::Object(
            values
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.value.expose().to_string())))
                .collect::<Map<String, Value>>(),
        )
    };
    let mut all = Map::new();
    for server in servers {
        let entry = match &server.transport {
            McpTransport::Stdio { command, args, env } => json!({
                "type": "stdio",
                "command": command,
                "args": args,
                "env": object(env),
            }),
            McpTransport::Remote { url, headers } => json!({
                "type": "http",
                "url": url,
                "headers": object(headers),
            }),
        };
        all.insert(server.name.clone(), entry);
    }
    json!({ "mcpServers": all }).to_string()
}

#[cfg(test)]
pub mod tests {
    use super::*;

    pub fn servers() -> Vec<McpServer> {
        vec![
            McpServer {
                name: "notes".into(),
                transport: McpTransport::Stdio {
                    command: "python3".into(),
                    args: vec!["/srv/notes.py".into(), "--say \"hi\"".into()],
                    env: vec![
                        (
                            "NOTES_TOKEN".into(),
                            McpValue {
                                value: Secret::new("s3cret-token".into()),
                                from: Some("HOST_TOKEN".into()),
                            },
                        ),
                        (
                            "MODE".into(),
                            McpValue {
                                value: Secret::new("fast".into()),
                                from: None,
                            },
                        ),
                    ],
                },
            },
            McpServer {
                name: "docs-2".into(),
                transport: McpTransport::Remote {
                    url: "https://u:pw@mcp.example.com:8443/mcp?key=k".into(),
                    headers: vec![(
                        "Authorization".into(),
                        McpValue {
                            value: Secret::new("Bearer abc123".into()),
                            from: Some("DOCS_AUTH".into()),
                        },
                    )],
                },
            },
        ]
    }

    #[test]
    fn codex_gets_a_table_per_server_its_values_toml_strings() {
        assert_eq!(
            codex_toml(&servers()),
            "\n\n[mcp_servers.notes]\ncommand = \"python3\"\n\
             args = [\"/srv/notes.py\", \"--say \\\"hi\\\"\"]\n\
             env = { \"NOTES_TOKEN\" = \"s3cret-token\", \"MODE\" = \"fast\" }\n\n\
             [mcp_servers.docs-2]\nurl = \"https://u:pw@mcp.example.com:8443/mcp?key=k\"\n\
             http_headers = { \"Authorization\" = \"Bearer abc123\" }"
        );
    }

    #[test]
    fn claude_gets_its_mcp_config_json() {
        let parsed: Value = serde_json::from_str(&claude_json(&servers())).unwrap();
        let notes = &parsed["mcpServers"]["notes"];
        assert_eq!(notes["type"], "stdio");
        assert_eq!(notes["command"], "python3");
        assert_eq!(notes["env"]["NOTES_TOKEN"], "s3cret-token");
        let docs = &parsed["mcpServers"]["docs-2"];
        assert_eq!(docs["type"], "http");
        assert_eq!(docs["headers"]["Authorization"], "Bearer abc123");
    }

    #[test]
    fn described_without_a_secret() {
        let text: Vec<String> = servers().iter().map(McpServer::describe).collect();
        assert_eq!(
            text,
            [
                "notes: stdio `python3 /srv/notes.py --say \"hi\"` (env NOTES_TOKEN=env:HOST_TOKEN, MODE=***)",
                "docs-2: https://mcp.example.com:8443/mcp (headers Authorization=env:DOCS_AUTH)",
            ]
        );
        let secrets: Vec<String> = servers()
            .iter()
            .flat_map(McpServer::secrets)
            .map(|s| s.expose().to_string())
            .collect();
        for secret in ["s3cret-token", "Bearer abc123", "pw"] {
            assert!(secrets.iter().any(|s| s == secret), "{secret} not masked");
        }
    }
}
