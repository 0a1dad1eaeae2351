//! `codex-cli`: the OpenAI Codex CLI (`codex exec`), as recorded from codex-cli
//! 0.169.0 (testdata/codex-samples/, testdata/codex/README.md).
//!
//! | what | how |
//! |---|---|
//! | run | `codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -C <dir> [-m M] [extra] -`, prompt on stdin |
//! | configuration | `$CODEX_HOME/config.toml`: agent-runner's, written before every run |
//! | resume | the same options, then `resume <thread id> -` |
//! | session | `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl` |
//! | login | `~/.codex/auth.json` (mounted, linked into `~/.codex`), else `CODEX_API_KEY` |
//! | hosts | API key: `api.openai.com`; ChatGPT login: `chatgpt.com`, `auth.openai.com` |
//! | events | JSONL: `thread.started`, `turn.completed` (usage), `turn.failed`, `item.*`, `error` |
//!
//! Codex's own bubblewrap sandbox cannot work under Docker's default seccomp
//! profile; the container is the sandbox.
//!
//! codex's user configuration, `$CODEX_HOME/config.toml`, is agent-runner's: the
//! envelope links it to a file of the container's private tmpfs before every run
//! (it fails the run when it cannot), so one the worker wrote to steer a later run
//! (a provider, hooks, MCP servers, the commands' environment) is replaced before
//! that run starts. It holds `runner.worker.base_url` as a model provider of ours
//! (codex ignores `OPENAI_BASE_URL` in the environment): a URL may hold a password
//! or a key, and `-c model_providers.…` would put it in an argv every local user
//! can read. Why not `--ignore-user-config` and a profile (`-p`): codex 0.169.0
//! then reads no profile either (testdata/codex/README.md). The system
//! configuration (`/etc/codex`), which the worker can write as root, is pinned
//! with the agent (`CONFIG_FILES`, `worker::agent_files`).
//! Codex also tries github.com and api.github.com (its update check),
//! ab.chatgpt.com (feature flags) and chatgpt.com (with an API key too); refusing
//! them does not fail a run, and they are left out of its hosts: a
//! prompt-injected worker could use an allowed host as a way out. They are its
//! `background_hosts`: their denials are told apart from what a task needed.

/// The model provider a `runner.worker.base_url` becomes in codex's configuration.
const PROVIDER: &str = "agent-runner";

use serde::Deserialize;

use super::kind::{EventStream, HostsSpec, Kind, Need, Pinned, RunSpec, SettingsFile};
use super::login::LoginRule;
use super::record::{CommandRecord, FileChange, McpCall, Terminal, Transcript, Usage, trim_line};

/// The kind.
pub struct Codex;

pub const CODEX: Codex = Codex;

/// The API host codex uses with an API key.
pub const API_HOST: &str = "api.openai.com";
/// The hosts codex uses with a ChatGPT login.
pub const CHATGPT_HOSTS: [&str; 2] = ["chatgpt.com", "auth.openai.com"];
/// What codex asks for in the background with any login (its update check,
/// feature flags, and chatgpt.com with an API key too): refused, nothing fails.
const BACKGROUND_HOSTS: [&str; 4] = [
    "chatgpt.com",
    "ab.chatgpt.com",
    "github.com",
    "api.github.com",
];
/// Login file modes: a ChatGPT login (`tokens`) and an API key (`OPENAI_API_KEY`).
pub const CHATGPT: &str = "chatgpt";
pub const API_KEY: &str = "api_key";

/// codex's user configuration under HOME (`$CODEX_HOME/config.toml`): agent-runner's.
const CONFIG_FILE: &str = ".codex/config.toml";
/// The first line of that file.
const CONFIG_HEADER: &str = "# agent-runner's, written before every run";

/// The configuration codex reads outside HOME, which only the image should bring.
const CONFIG_FILES: [&str; 3] = [
    "/etc/codex/config.toml",
    "/etc/codex/managed_config.toml",
    "/etc/codex/requirements.toml",
];

/// The flags of every `codex exec` run (testdata/codex/README.md).
const EXEC_FLAGS: [&str; 4] = [
    "exec",
    "--json",
    "--skip-git-repo-check",
    "--dangerously-bypass-approvals-and-sandbox",
];

impl Codex {
    /// `codex exec` options (before the prompt or a `resume` subcommand).
    fn exec_options(&self, run: &RunSpec) -> Vec<String> {
        let mut args: Vec<String> = std::iter::once("codex")
            .chain(EXEC_FLAGS)
            .chain(["-C", run.workdir])
            .map(String::from)
            .collect();
        if let Some(model) = run.model {
            args.extend(["-m".to_string(), model.to_string()]);
        }
        args.extend(run.extra_args.iter().cloned());
        args
    }
}

impl Kind for Codex {
    fn name(&self) -> &'static str {
        "codex-cli"
    }

    fn taskconfig_type(&self) -> &'static str {
        "docker_codex_cli"
    }

    fn program(&self) -> &'static str {
        "codex"
    }

    fn pinned(&self) -> Pinned {
        Pinned {
            version: "0.169.0",
            build_var: "CODEX_VERSION",
        }
    }

    fn command(&self, run: &RunSpec) -> Vec<String> {
        let mut args = self.exec_options(run);
        args.push("-".into());
        args
    }

    fn resume_command(&self, run: &RunSpec, session: &str) -> Vec<String> {
        let mut args = self.exec_options(run);
        args.extend(["resume".into(), session.to_string(), "-".into()]);
        args
    }

    fn session_files(&self, session: &str) -> Vec<String> {
        vec![format!(".codex/sessions/*/*/*/rollout-*-{session}.jsonl")]
    }

    fn answer_args(&self, schema: &str, reply: &str) -> Option<Vec<String>> {
        // codex sends the schema as the request's strict json_schema and writes the
        // last agent_message, byte for byte, to the file (testdata/codex/README.md).
        Some(
            ["--output-schema", schema, "--output-last-message", reply]
                .map(String::from)
                .into(),
        )
    }

    fn run_env(&self, _run: &RunSpec) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    fn refused_arg(&self, run: &RunSpec) -> Option<(usize, String)> {
        let n = run.extra_args.iter().position(|arg| {
            arg == "--profile"
                || arg.starts_with("--profile=")
                || (arg.starts_with("-p") && !arg.starts_with("--"))
        })?;
        Some((
            n,
            "codex's -p/--profile cannot be used: the profile would be a file in the \
             container, where only the worker could have written it (to steer a later \
             run); give its settings as -c options instead"
                .into(),
        ))
    }

    fn settings_file(&self, run: &RunSpec) -> Option<SettingsFile> {
        let mut contents = CONFIG_HEADER.to_string();
        if let Some(url) = run.base_url {
            // A JSON string is a TOML basic string (the same escapes).
            let url = serde_json::to_string(url).ok()?;
            // Not `openai_base_url`: codex's own provider speaks WebSockets first
            // (`supports_websockets`, which a built-in provider's settings cannot
            // change; the `responses_websockets` features are gone in 0.169.0), and
            // a gateway that does not costs every request a failed upgrade (SPEC
            // §24). So a provider of ours, logged in as codex's own.
            contents.push_str(&format!(
                "\nmodel_provider = \"{PROVIDER}\"\n\n[model_providers.{PROVIDER}]\n\
                 name = \"runner.worker.base_url\"\nbase_url = {url}\nwire_api = \"responses\"\n\
                 requires_openai_auth = true\nsupports_websockets = false"
            ));
        }
        contents.push_str(&super::mcp::codex_toml(run.mcp_servers));
        Some(SettingsFile {
            link: Some(CONFIG_FILE),
            contents,
        })
    }

    fn config_files(&self) -> &'static [&'static str] {
        &CONFIG_FILES
    }

    fn login_rule(&self) -> LoginRule {
        LoginRule {
            key_var: "CODEX_API_KEY",
            env_logins: &[],
            file: ".codex/auth.json",
            file_first: true,
            mount: "/run/agent-runner/auth.json",
            link: ".codex/auth.json",
            how: "run `codex login` on this machine, or export CODEX_API_KEY",
        }
    }

    fn login_modes(&self, file: &serde_json::Value) -> Vec<&'static str> {
        let mut modes = Vec::new();
        if file.get("tokens").is_some_and(serde_json::Value::is_object) {
            modes.push(CHATGPT);
        }
        let key = file
            .get("OPENAI_API_KEY")
            .and_then(serde_json::Value::as_str);
        if key.is_some_and(|key| !key.is_empty()) {
            modes.push(API_KEY);
        }
        modes
    }

    fn needs(&self, spec: &HostsSpec) -> Vec<Need> {
        let mut needs = Vec::new();
        let login = spec.login;
        if login.has(CHATGPT) {
            needs.extend(CHATGPT_HOSTS.map(|h| Need::new(h, "codex with a ChatGPT login")));
            if login.has(API_KEY) {
                needs.push(Need::new(API_HOST, "its API key"));
            }
        } else if spec.base_url.is_none() {
            let key_in_env = spec.env.iter().any(|(name, _)| *name == "CODEX_API_KEY");
            let why = if *login == super::login::Login::None && !key_in_env {
                "codex's default API host"
            } else {
                "codex with an API key"
            };
            needs.push(Need::new(API_HOST, why));
        }
        if let Some(url) = spec.base_url {
            needs.push(Need::new(url, "base_url"));
        }
        for (name, value) in spec.env {
            if let (&"OPENAI_BASE_URL", Some(url)) = (name, value) {
                needs.push(Need::new(*url, "OPENAI_BASE_URL in runner.worker.env"));
            }
        }
        for url in config_base_urls(spec.extra_args) {
            needs.push(Need::new(url, "base_url in runner.worker.extra_args"));
        }
        needs
    }

    fn background_hosts(&self) -> &'static [&'static str] {
        &BACKGROUND_HOSTS
    }

    fn stream(&self) -> Box<dyn EventStream> {
        Box::new(CodexStream)
    }

    /// `{"type":"error","message":"Reconnecting... 2/5 (…)"}`: codex retrying its
    /// model; with nothing listening it retries for ever (testdata/codex-samples).
    fn is_retry_notice(&self, line: &[u8]) -> bool {
        #[derive(serde::Deserialize)]
        struct Notice {
            #[serde(rename = "type")]
            kind: String,
            message: String,
        }
        serde_json::from_slice::<Notice>(line)
            .is_ok_and(|n| n.kind == "error" && n.message.starts_with("Reconnecting"))
    }
}

/// `base_url = "…"` values in codex `-c`/`--config` options: a key ending in
/// `base_url`, or an inline table holding one (a custom model provider).
pub fn config_base_urls(args: &[String]) -> Vec<String> {
    let mut values = Vec::new();
    let mut next_is_config = false;
    for arg in args {
        let config = if next_is_config {
            Some(arg.as_str())
        } else {
            arg.strip_prefix("--config=")
                .or_else(|| arg.strip_prefix("-c").filter(|rest| !rest.is_empty()))
        };
        next_is_config = arg == "-c" || arg == "--config";
        if let Some(config) = config {
            values.push(config);
        }
    }
    let mut urls = Vec::new();
    for value in values {
        let mut rest = value;
        while let Some(at) = rest.find("base_url") {
            rest = &rest[at + "base_url".len()..];
            let after = rest.trim_start();
            let Some(after) = after.strip_prefix('=') else {
                continue;
            };
            let after = after.trim_start();
            let Some(quote) = after.chars().next().filter(|c| *c == '"' || *c == '\'') else {
                continue;
            };
            if let Some(end) = after[1..].find(quote) {
                urls.push(after[1..1 + end].to_string());
            }
        }
    }
    urls
}

/// One line of `codex exec --json` output.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Event {
    #[serde(rename = "thread.started")]
    ThreadStarted {
        #[serde(default)]
        thread_id: String,
    },
    #[serde(rename = "turn.started")]
    TurnStarted,
    #[serde(rename = "turn.completed")]
    TurnCompleted {
        #[serde(default)]
        usage: CodexUsage,
    },
    #[serde(rename = "turn.failed")]
    TurnFailed {
        #[serde(default)]
        error: Option<FailedTurn>,
    },
    #[serde(rename = "item.started")]
    ItemStarted { item: Item },
    #[serde(rename = "item.updated")]
    ItemUpdated { item: Item },
    #[serde(rename = "item.completed")]
    ItemCompleted { item: Item },
    /// Retry notices and the final error text (not fatal by itself).
    #[serde(rename = "error")]
    Error { message: String },
    /// A type this version does not know: kept as raw text.
    #[serde(other)]
    Unknown,
}

/// The `error` of a `turn.failed`; its message may be missing.
#[derive(Debug, Deserialize)]
struct FailedTurn {
    #[serde(default)]
    message: Option<String>,
}

/// Token usage summed over the turn (cached input is part of input).
#[derive(Debug, Default, Deserialize)]
struct CodexUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cached_input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    reasoning_output_tokens: u64,
}

#[derive(Debug, Deserialize)]
struct Item {
    #[serde(default)]
    id: String,
    #[serde(flatten)]
    kind: ItemKind,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ItemKind {
    /// The agent's answer; the last one is the run's summary.
    AgentMessage { text: String },
    CommandExecution {
        command: String,
        #[serde(default)]
        aggregated_output: String,
        exit_code: Option<i32>,
        #[serde(default)]
        status: String,
    },
    FileChange {
        #[serde(default)]
        changes: Vec<RawFileChange>,
    },
    /// Not fatal (e.g. an unknown-model warning).
    Error { message: String },
    /// A call to a tool of an MCP server (SPEC §28); its arguments and result are
    /// the model's business, not kept.
    McpToolCall {
        #[serde(default)]
        server: String,
        #[serde(default)]
        tool: String,
        #[serde(default)]
        status: String,
        #[serde(default)]
        error: Option<FailedTurn>,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct RawFileChange {
    path: String,
    #[serde(default)]
    kind: String,
}

/// Reads `codex exec --json` lines. Stateless: every event carries its ids.
struct CodexStream;

impl EventStream for CodexStream {
    fn feed(&mut self, line: &[u8], record: &mut Transcript) {
        let line = trim_line(line);
        if line.is_empty() {
            return;
        }
        match serde_json::from_slice::<Event>(line) {
            Ok(Event::Unknown) | Err(_) => record.raw_lines += 1,
            Ok(event) => {
                record.events += 1;
                apply(event, record);
            }
        }
    }
}

fn apply(event: Event, record: &mut Transcript) {
    match event {
        Event::ThreadStarted { thread_id } => record.session_id = Some(thread_id),
        Event::TurnStarted | Event::Unknown => {}
        Event::TurnCompleted { usage } => {
            record.terminal = Some(Terminal::Completed);
            record.usage = Some(Usage {
                input_tokens: usage.input_tokens,
                cached_input_tokens: usage.cached_input_tokens,
                output_tokens: usage.output_tokens,
                reasoning_output_tokens: usage.reasoning_output_tokens,
                cost_usd: None,
            });
        }
        Event::TurnFailed { error } => {
            let message = error
                .and_then(|e| e.message)
                .filter(|m| !m.trim().is_empty());
            record.fail(
                message
                    .as_deref()
                    .unwrap_or("turn.failed (codex gave no message)"),
            );
        }
        Event::Error { message } => record.error(&message),
        Event::ItemStarted { item }
        | Event::ItemUpdated { item }
        | Event::ItemCompleted { item } => match item.kind {
            ItemKind::AgentMessage { text } => record.set_message(&text),
            ItemKind::Other => {}
            ItemKind::Error { message } => record.warning(&message),
            ItemKind::FileChange { changes } => {
                for change in changes {
                    record.file_changed(FileChange {
                        path: change.path,
                        kind: change.kind,
                    });
                }
            }
            ItemKind::CommandExecution {
                command,
                aggregated_output,
                exit_code,
                status,
            } => record.command(CommandRecord::new(
                item.id,
                &command,
                exit_code,
                status,
                &aggregated_output,
            )),
            ItemKind::McpToolCall {
                server,
                tool,
                status,
                error,
            } => record.mcp_call(McpCall::new(
                item.id,
                &server,
                &tool,
                status,
                error.and_then(|e| e.message).as_deref().unwrap_or(""),
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::kind::{read_all, samples};
    use crate::agent::login::Login;
    use crate::agent::outcome::{Exit, RunOutcome, classify};
    use agent_runner_core::secret::Secret;

    fn sample(name: &str) -> (Transcript, RunOutcome, String) {
        samples::judged(&CODEX, "testdata/codex-samples", name, exit)
    }

    /// The recordings ran codex to its end.
    fn exit(code: i32) -> Exit {
        Exit::Code(code)
    }

    #[test]
    fn every_recorded_sample_is_judged_right() {
        use RunOutcome::*;
        let expected: &[(&str, RunOutcome, &str)] = &[
            ("apply_patch", Completed, "Added patched.txt and hello.txt"),
            (
                "chat_wire",
                Failed,
                "Error loading config.toml: `wire_api = \"chat\"` is no longer supported.",
            ),
            (
                "cmd_fails",
                Completed,
                "The command failed with exit code 3",
            ),
            (
                "codex_home_missing",
                Failed,
                "Error finding codex home: CODEX_HOME points to \"/root/.codex\", but that path does not exist",
            ),
            (
                "conn_refused",
                Failed,
                "Reconnecting... waiting for network (Connection failed: error sending request)",
            ),
            (
                "conn_refused_bounded",
                Failed,
                "Connection failed: error sending request",
            ),
            (
                "fail_401",
                Failed,
                "unexpected status 401 Unauthorized: Incorrect API key provided: sk-fake. (fake 401), url: http://127.0.0.1:40601/v1/responses",
            ),
            (
                "fail_500",
                Failed,
                "We’re currently experiencing high demand, which may cause temporary errors.",
            ),
            (
                "http_429",
                Failed,
                "exceeded retry limit, last status: 429 Too Many Requests",
            ),
            ("missing_command_item", Completed, "Created hello.txt"),
            ("no_stdin_flag", Failed, "No prompt provided via stdin."),
            ("readonly", Completed, "Created hello.txt"),
            (
                "response_failed_quota",
                Failed,
                "Quota exceeded. Check your plan and billing details.",
            ),
            ("retry_then_ok", Completed, "ok after retry"),
            ("stdin_dash", Completed, "Created hello.txt"),
            (
                "stream_cut",
                Failed,
                "stream disconnected before completion: Transport error: network error: error decoding response body",
            ),
            (
                "stream_eof",
                Failed,
                "stream disconnected before completion: stream closed before response.completed",
            ),
            ("success", Completed, "Created hello.txt"),
        ];
        samples::all_judged(&CODEX, "testdata/codex-samples", exit, expected);
    }

    #[test]
    fn commands_files_usage_and_the_session_are_recorded() {
        let (t, _, _) = sample("cmd_fails");
        assert_eq!(t.commands.len(), 1, "item.completed replaces item.started");
        assert_eq!(
            t.commands[0].command,
            "/bin/sh -lc 'echo to-stderr >&2; exit 3'"
        );
        assert_eq!(
            (t.commands[0].exit_code, t.commands[0].status.as_str()),
            (Some(3), "failed")
        );
        assert_eq!(t.commands[0].output_tail, "to-stderr\n");
        assert_eq!(
            t.warnings.len(),
            1,
            "the unknown-model error item is a warning"
        );
        assert!(t.session_id.as_deref().is_some_and(|id| !id.is_empty()));
        let (t, _, _) = sample("apply_patch");
        assert_eq!(
            t.file_changes,
            [FileChange {
                path: "/workspace/project/patched.txt".into(),
                kind: "add".into()
            }]
        );
        assert_eq!(t.usage.as_ref().map(|u| u.input_tokens), Some(3000));
        let (t, _, _) = sample("missing_command_item");
        assert!(t.commands.is_empty());
        assert_eq!(t.usage.as_ref().map(|u| u.cached_input_tokens), Some(1300));
        assert_eq!(t.usage.as_ref().and_then(|u| u.cost_usd), None);
        let (t, _, _) = sample("fail_401");
        assert_eq!(t.errors.len(), 6);
    }

    #[test]
    fn unknown_and_broken_lines_are_kept_as_raw_text() {
        let t = read_all(
            &CODEX,
            b"not json\n{\"type\":\"brand.new\",\"x\":1}\n{\"type\":\"turn.unknown\"}\n\xff\xfe\n\n{\"type\":\"turn.started\"}\n",
        );
        assert_eq!((t.raw_lines, t.events), (4, 1));
    }

    #[test]
    fn a_failed_turn_without_a_message_still_fails_the_run() {
        for line in [
            &br#"{"type":"turn.failed"}"#[..],
            br#"{"type":"turn.failed","error":{}}"#,
            br#"{"type":"turn.failed","error":{"message":""}}"#,
        ] {
            let t = read_all(&CODEX, line);
            assert_eq!(
                classify("codex", &t, Exit::Code(1), ""),
                (
                    RunOutcome::Failed,
                    "turn.failed (codex gave no message)".to_string()
                ),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    fn spec<'a>(model: Option<&'a str>, extra: &'a [String], url: Option<&'a str>) -> RunSpec<'a> {
        RunSpec {
            model,
            extra_args: extra,
            base_url: url,
            workdir: "/workspace/project",
            root: true,
            mcp_servers: &[],
            settings_path: "/run/agent-runner/private/agent-settings",
        }
    }

    #[test]
    fn mcp_servers_go_into_the_config_file_not_argv() {
        let servers = crate::agent::mcp::tests::servers();
        let run = RunSpec {
            mcp_servers: &servers,
            ..spec(None, &[], None)
        };
        let command = CODEX.command(&run).join(" ");
        assert!(
            !command.contains("mcp") && !command.contains("s3cret"),
            "{command}"
        );
        let file = CODEX.settings_file(&run).unwrap();
        assert!(
            file.contents
                .contains("\n\n[mcp_servers.notes]\ncommand = \"python3\"")
                && file.contents.contains("\"NOTES_TOKEN\" = \"s3cret-token\""),
            "{}",
            file.contents
        );
    }

    #[test]
    fn command_lines_match_the_recorded_working_flags() {
        assert_eq!(
            CODEX.command(&spec(None, &[], None)).join(" "),
            "codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -C /workspace/project -"
        );
        let extra = ["-c".to_string(), "x=1".to_string()];
        // The base URL is in codex's configuration file, never on the command line.
        let url = "http://user:pw-0123@h:1/v1?api-key=k-0123\"x";
        let command = CODEX
            .command(&spec(Some("o4-mini"), &extra, Some(url)))
            .join(" ");
        assert!(
            command.ends_with("-C /workspace/project -m o4-mini -c x=1 -"),
            "{command}"
        );
        assert!(!command.contains("pw-0123") && !command.contains("k-0123"));
        assert_eq!(
            CODEX.settings_file(&spec(None, &[], Some(url))),
            Some(SettingsFile {
                link: Some(".codex/config.toml"),
                contents: "# agent-runner's, written before every run\n\
                           model_provider = \"agent-runner\"\n\n\
                           [model_providers.agent-runner]\n\
                           name = \"runner.worker.base_url\"\n\
                           base_url = \"http://user:pw-0123@h:1/v1?api-key=k-0123\\\"x\"\n\
                           wire_api = \"responses\"\n\
                           requires_openai_auth = true\n\
                           supports_websockets = false"
                    .into()
            })
        );
        // Written before every run, so that none the worker wrote is read.
        assert_eq!(
            CODEX.settings_file(&spec(None, &[], None)),
            Some(SettingsFile {
                link: Some(".codex/config.toml"),
                contents: "# agent-runner's, written before every run".into()
            })
        );
        assert!(
            CODEX
                .resume_command(&spec(Some("m"), &[], None), "th-1")
                .join(" ")
                .ends_with("-C /workspace/project -m m resume th-1 -")
        );
        assert_eq!(
            CODEX.session_files("th-1"),
            [".codex/sessions/*/*/*/rollout-*-th-1.jsonl"]
        );
    }

    fn needs(
        login: &Login,
        env: &[(&str, Option<&str>)],
        args: &[String],
        url: Option<&str>,
    ) -> Vec<String> {
        CODEX
            .needs(&HostsSpec {
                login,
                env,
                extra_args: args,
                base_url: url,
            })
            .into_iter()
            .map(|n| n.destination)
            .collect()
    }

    fn file(modes: Vec<&'static str>) -> Login {
        Login::File {
            path: "/home/u/.codex/auth.json".into(),
            secrets: vec![],
            modes,
        }
    }

    #[test]
    fn the_api_host_for_a_key_and_the_chatgpt_hosts_for_a_login() {
        let key = Login::Key {
            var: "CODEX_API_KEY",
            value: Secret::new("sk-x".into()),
        };
        assert_eq!(needs(&key, &[], &[], None), ["api.openai.com"]);
        assert_eq!(
            needs(&file(vec![API_KEY]), &[], &[], None),
            ["api.openai.com"]
        );
        assert_eq!(
            needs(&file(vec![CHATGPT]), &[], &[], None),
            ["chatgpt.com", "auth.openai.com"]
        );
        assert_eq!(
            needs(&file(vec![CHATGPT, API_KEY]), &[], &[], None),
            ["chatgpt.com", "auth.openai.com", "api.openai.com"]
        );
        // A base URL replaces the API host: the key is not sent there.
        assert_eq!(
            needs(&key, &[], &[], Some("http://127.0.0.2:9/v1")),
            ["http://127.0.0.2:9/v1"]
        );
        let why = CODEX.needs(&HostsSpec {
            login: &Login::None,
            env: &[],
            extra_args: &[],
            base_url: None,
        });
        assert_eq!(why[0].why, "codex's default API host");
    }

    #[test]
    fn reconnecting_notices_are_retry_notices_and_nothing_else_is() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/codex-samples");
        let stdout = std::fs::read_to_string(format!("{root}/conn_refused/stdout.jsonl")).unwrap();
        let notices = stdout
            .lines()
            .filter(|l| CODEX.is_retry_notice(l.as_bytes()))
            .count();
        assert_eq!(notices, 6, "{stdout}");
        for line in [
            r#"{"type":"error","message":"Connection failed: error sending request"}"#,
            r#"{"type":"item.completed","item":{"type":"agent_message","text":"Reconnecting"}}"#,
            r#"{"type":"turn.failed","error":{"message":"Reconnecting... 5/5"}}"#,
            "Reconnecting... plain text",
        ] {
            assert!(!CODEX.is_retry_notice(line.as_bytes()), "{line}");
        }
        assert!(CODEX.is_retry_notice(
            br#"{"type":"error","message":"Reconnecting... 2/5 (stream disconnected before completion)"}"#
        ));
    }

    #[test]
    fn configured_base_urls_are_needed() {
        let args: Vec<String> = [
            "-c",
            "model_providers.fake={name=\"fake\",base_url=\"http://127.0.0.2:4000/v1\",wire_api=\"responses\"}",
            "--config=model_providers.b.base_url='https://b.example:8443/api'",
            "-cmodel_providers.c.base_url = \"https://user:pw@c.example\"",
            "--model",
            "base_url=\"https://ignored.example\"",
        ]
        .map(String::from)
        .into();
        assert_eq!(
            needs(
                &Login::None,
                &[
                    ("OPENAI_BASE_URL", Some("https://llm.corp.example/v1")),
                    ("OTHER", Some("https://not-a-base-url.example")),
                ],
                &args,
                None
            ),
            [
                "api.openai.com",
                "https://llm.corp.example/v1",
                "http://127.0.0.2:4000/v1",
                "https://b.example:8443/api",
                "https://user:pw@c.example",
            ]
        );
    }
}
