//! `claude-code-cli`: Anthropic's Claude Code CLI, as recorded from 2.1.330
//! (testdata/claude/README.md, testdata/claude/samples/).
//!
//! | what | how |
//! |---|---|
//! | run | `claude -p --output-format stream-json --verbose --dangerously-skip-permissions [--model M] [extra]`, prompt on stdin, in the repository (`docker exec -w`) |
//! | env | `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`; `IS_SANDBOX=1` as root (else it refuses to skip permissions); `ANTHROPIC_BASE_URL` from `runner.worker.base_url` |
//! | resume | the same, plus `--resume <session id>` |
//! | session | `~/.claude/projects/<cwd with / as ->/<session id>.jsonl` |
//! | login | `ANTHROPIC_API_KEY`, else `~/.claude/.credentials.json` (mounted, linked into `~/.claude`) |
//! | hosts | `api.anthropic.com`; with a login file also `platform.claude.com` (token refresh) |
//! | events | stream-json: `system` (`init`, `api_retry`), `assistant` (one per content block), `user` (tool results), `result` (the verdict, usage, `total_cost_usd`) |
//!
//! The verdict is `result.is_error`, not its `subtype` (API failures end with
//! `subtype: success` and `is_error: true`); a run without a `result` line failed
//! at start-up (stderr says why). A Bash command's exit code exists only in its
//! tool result's text (`Exit code N`), paired with its `tool_use` by id. Usage and
//! cost come from `result` only: `assistant` events carry start-of-message usage.

use std::collections::VecDeque;

use serde_json::Value;

use super::kind::{EventStream, HostsSpec, Kind, Need, Pinned, RunSpec, SettingsFile};
use super::login::{Login, LoginRule};
use super::record::{CommandRecord, FileChange, McpCall, Terminal, Transcript, Usage, trim_line};

/// The most one run can report it cost; more is a forged figure, not reported.
const MAX_REPORTED_COST_USD: f64 = 1e6;

/// The kind.
pub struct Claude;

pub const CLAUDE: Claude = Claude;

/// The API host.
pub const API_HOST: &str = "api.anthropic.com";
/// Where an OAuth login refreshes its token.
pub const REFRESH_HOST: &str = "platform.claude.com";
/// Login file mode: an OAuth login (`claudeAiOauth`).
pub const OAUTH: &str = "oauth";
/// A login token in the environment (`claude setup-token`).
pub const OAUTH_TOKEN_VAR: &str = "CLAUDE_CODE_OAUTH_TOKEN";

/// Tools whose successful use changed the file named by `file_path`.
const FILE_TOOLS: [&str; 4] = ["Write", "Edit", "MultiEdit", "NotebookEdit"];
/// Tool calls remembered until their result arrives.
const MAX_PENDING: usize = 256;
/// Longest model name kept.
const MAX_MODEL_CHARS: usize = 200;

impl Kind for Claude {
    fn name(&self) -> &'static str {
        "claude-code-cli"
    }

    fn taskconfig_type(&self) -> &'static str {
        "docker_claude_code_cli"
    }

    fn program(&self) -> &'static str {
        "claude"
    }

    fn pinned(&self) -> Pinned {
        Pinned {
            version: "2.1.330",
            build_var: "CLAUDE_VERSION",
        }
    }

    fn command(&self, run: &RunSpec) -> Vec<String> {
        let mut args: Vec<String> = [
            "claude",
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ]
        .map(String::from)
        .into();
        if let Some(model) = run.model {
            args.extend(["--model".to_string(), model.to_string()]);
        }
        if !run.mcp_servers.is_empty() {
            // The file's path only; its servers' credentials are in the file, in the
            // private tmpfs (`settings_file`). Strict: a `.mcp.json` the worker
            // wrote in the repository adds no server.
            args.extend([
                "--mcp-config".to_string(),
                run.settings_path.to_string(),
                "--strict-mcp-config".to_string(),
            ]);
        }
        args.extend(run.extra_args.iter().cloned());
        args
    }

    fn resume_command(&self, run: &RunSpec, session: &str) -> Vec<String> {
        let mut args = self.command(run);
        args.extend(["--resume".to_string(), session.to_string()]);
        args
    }

    fn session_files(&self, session: &str) -> Vec<String> {
        vec![format!(".claude/projects/*/{session}.jsonl")]
    }

    fn answer_args(&self, _schema: &str, _reply: &str) -> Option<Vec<String>> {
        // Its --json-schema puts the answer in the result event, not in a file; not
        // used (claude is no Meta provider).
        None
    }

    fn run_env(&self, run: &RunSpec) -> Vec<(&'static str, String)> {
        // Non-essential traffic on, it tried api.anthropic.com five times per run even
        // with a base URL set: off, the model's host is the only one contacted.
        let mut env = vec![("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string())];
        if run.root {
            // As root it refuses --dangerously-skip-permissions unless told it is
            // in a sandbox, which it is: the container.
            env.push(("IS_SANDBOX", "1".to_string()));
        }
        if let Some(url) = run.base_url {
            env.push(("ANTHROPIC_BASE_URL", url.to_string()));
        }
        env
    }

    fn settings_file(&self, run: &RunSpec) -> Option<SettingsFile> {
        // Its base URL is a variable, passed by name like every value; the MCP
        // servers are its `--mcp-config` file (`command`).
        (!run.mcp_servers.is_empty()).then(|| SettingsFile {
            link: None,
            contents: super::mcp::claude_json(run.mcp_servers),
        })
    }

    fn config_files(&self) -> &'static [&'static str] {
        // Its managed settings and MCP servers on Linux, which apply to every run.
        &[
            "/etc/claude-code/managed-settings.json",
            "/etc/claude-code/managed-mcp.json",
        ]
    }

    fn login_rule(&self) -> LoginRule {
        LoginRule {
            key_var: "ANTHROPIC_API_KEY",
            // From `claude setup-token`: a login without a file.
            env_logins: &[OAUTH_TOKEN_VAR],
            file: ".claude/.credentials.json",
            file_first: false,
            mount: "/run/agent-runner/claude-credentials.json",
            link: ".claude/.credentials.json",
            how: "log in with `claude` (/login) on this machine, or export ANTHROPIC_API_KEY",
        }
    }

    fn login_modes(&self, file: &Value) -> Vec<&'static str> {
        if file.get("claudeAiOauth").is_some_and(Value::is_object) {
            vec![OAUTH]
        } else {
            Vec::new()
        }
    }

    fn needs(&self, spec: &HostsSpec) -> Vec<Need> {
        let mut needs = Vec::new();
        let login_file = matches!(spec.login, Login::File { .. });
        let token_in_env = spec.env.iter().any(|(name, _)| *name == OAUTH_TOKEN_VAR);
        if spec.base_url.is_none() {
            let key = matches!(spec.login, Login::Key { .. })
                || spec
                    .env
                    .iter()
                    .any(|(name, _)| *name == "ANTHROPIC_API_KEY");
            let why = match (login_file || token_in_env, key) {
                (true, _) => "claude with a login",
                (false, true) => "claude with an API key",
                (false, false) => "claude's default API host",
            };
            needs.push(Need::new(API_HOST, why));
        }
        if login_file {
            needs.push(Need::new(REFRESH_HOST, "claude's login (token refresh)"));
        }
        if let Some(url) = spec.base_url {
            needs.push(Need::new(url, "base_url"));
        }
        for (name, value) in spec.env {
            if let (&"ANTHROPIC_BASE_URL", Some(url)) = (name, value) {
                needs.push(Need::new(*url, "ANTHROPIC_BASE_URL in runner.worker.env"));
            }
        }
        needs
    }

    fn stream(&self) -> Box<dyn EventStream> {
        Box::new(ClaudeStream::default())
    }
}

/// A tool call waiting for its result.
struct Pending {
    id: String,
    tool: String,
    /// `file_path` for the file tools.
    file: Option<String>,
}

/// Reads `--output-format stream-json` lines; remembers tool calls until their
/// results arrive (bounded).
#[derive(Default)]
struct ClaudeStream {
    pending: VecDeque<Pending>,
}

impl EventStream for ClaudeStream {
    fn feed(&mut self, line: &[u8], record: &mut Transcript) {
        let line = trim_line(line);
        if line.is_empty() {
            return;
        }
        let Ok(event) = serde_json::from_slice::<Value>(line) else {
            record.raw_lines += 1;
            return;
        };
        let known = match event.get("type").and_then(Value::as_str) {
            Some("system") => {
                self.system(&event, record);
                true
            }
            Some("assistant") => {
                self.assistant(&event, record);
                true
            }
            Some("user") => {
                self.user(&event, record);
                true
            }
            Some("result") => {
                result(&event, record);
                true
            }
            Some("rate_limit_event") => true,
            _ => false,
        };
        if !known {
            record.raw_lines += 1;
            return;
        }
        record.events += 1;
        if record.session_id.is_none()
            && let Some(id) = event.get("session_id").and_then(Value::as_str)
        {
            record.session_id = Some(id.to_string());
        }
    }
}

impl ClaudeStream {
    fn system(&mut self, event: &Value, record: &mut Transcript) {
        if event.get("subtype").and_then(Value::as_str) == Some("init") {
            // The model it runs, which names its price when runner.worker.model is
            // not set.
            if let Some(model) = event.get("model").and_then(Value::as_str) {
                record.model = Some(agent_runner_core::text::cut_chars(model, MAX_MODEL_CHARS));
            }
        }
        if event.get("subtype").and_then(Value::as_str) == Some("api_retry") {
            let what = text_of(event.get("error")).unwrap_or_else(|| "an error".into());
            let status = event
                .get("error_status")
                .and_then(Value::as_u64)
                .map_or(String::new(), |s| format!(" (HTTP {s})"));
            let attempt = event.get("attempt").and_then(Value::as_u64).unwrap_or(0);
            let max = event
                .get("max_retries")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            record.error(&format!(
                "API request failed with {what}{status}; retry {attempt} of {max}"
            ));
        }
    }

    fn assistant(&mut self, event: &Value, record: &mut Transcript) {
        let message = &event["message"];
        // Claude's own errors come as messages of a model called "<synthetic>".
        let synthetic = message.get("model").and_then(Value::as_str) == Some("<synthetic>");
        for block in &blocks(message) {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    if let Some(text) = block.get("text").and_then(Value::as_str) {
                        if synthetic {
                            record.error(text);
                        } else if !text.trim().is_empty() {
                            record.set_message(text);
                        }
                    }
                }
                Some("tool_use") => self.tool_use(block, record),
                _ => {}
            }
        }
    }

    fn tool_use(&mut self, block: &Value, record: &mut Transcript) {
        let id = block.get("id").and_then(Value::as_str).unwrap_or_default();
        let tool = block
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let input = &block["input"];
        if tool == "Bash" {
            let command = input.get("command").and_then(Value::as_str).unwrap_or("");
            record.command(CommandRecord::new(id, command, None, "in_progress", ""));
        }
        if let Some((server, name)) = mcp_tool(tool) {
            record.mcp_call(McpCall::new(id, server, name, "in_progress", ""));
        }
        if self.pending.len() == MAX_PENDING {
            self.pending.pop_front();
        }
        self.pending.push_back(Pending {
            id: id.to_string(),
            tool: tool.to_string(),
            file: FILE_TOOLS
                .contains(&tool)
                .then(|| input.get("file_path").and_then(Value::as_str))
                .flatten()
                .map(str::to_string),
        });
    }

    fn user(&mut self, event: &Value, record: &mut Transcript) {
        let structured = event.get("tool_use_result");
        for block in &blocks(&event["message"]) {
            if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                continue;
            }
            let id = block
                .get("tool_use_id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let Some(at) = self.pending.iter().position(|p| p.id == id) else {
                continue;
            };
            let Some(call) = self.pending.remove(at) else {
                continue;
            };
            let failed = block.get("is_error").and_then(Value::as_bool) == Some(true);
            let content = text_of(block.get("content")).unwrap_or_default();
            if let Some((server, name)) = mcp_tool(&call.tool) {
                record.mcp_call(McpCall::new(
                    id,
                    server,
                    name,
                    if failed { "failed" } else { "completed" },
                    if failed { &content } else { "" },
                ));
            }
            if call.tool == "Bash" {
                let (exit_code, output) = bash_exit(failed, &content);
                if let Some(command) = record.command_mut(id) {
                    let done = CommandRecord::new(
                        id,
                        &command.command,
                        exit_code,
                        if failed { "failed" } else { "completed" },
                        output,
                    );
                    *command = done;
                }
                for change in bash_changes(structured) {
                    record.file_changed(change);
                }
            }
            if let (Some(path), false) = (call.file, failed) {
                let created = structured
                    .and_then(|s| s.get("type"))
                    .and_then(Value::as_str)
                    == Some("create");
                record.file_changed(FileChange {
                    path,
                    kind: if created { "add" } else { "update" }.into(),
                });
            }
        }
    }
}

/// The server and tool of an MCP tool's name, `mcp__<server>__<tool>` (server
/// names have no `__`: `task::mcp`).
fn mcp_tool(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("mcp__")?;
    rest.split_once("__")
        .filter(|(s, t)| !s.is_empty() && !t.is_empty())
}

/// The verdict, the answer and the usage of the run.
fn result(event: &Value, record: &mut Transcript) {
    let text = event.get("result").and_then(Value::as_str);
    if event.get("is_error").and_then(Value::as_bool) == Some(false) {
        if let Some(text) = text {
            record.set_message(text);
        }
        record.terminal = Some(Terminal::Completed);
    } else {
        let errors: Vec<String> = event
            .get("errors")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| text_of(Some(e)))
            .collect();
        let why = match text.filter(|t| !t.trim().is_empty()) {
            Some(text) => text.to_string(),
            None if !errors.is_empty() => errors.join("; "),
            None => format!(
                "claude reported an error ({})",
                event
                    .get("subtype")
                    .and_then(Value::as_str)
                    .unwrap_or("no subtype")
            ),
        };
        record.fail(&why);
    }
    let usage = event.get("usage");
    let count = |key: &str| {
        usage
            .and_then(|u| u.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let cost = event.get("total_cost_usd").and_then(Value::as_f64);
    if usage.is_some() || cost.is_some() {
        let cached = count("cache_read_input_tokens");
        // The API's input_tokens leaves out what was read from or written to its cache;
        // SPEC §15's input includes cached input.
        record.usage = Some(Usage {
            input_tokens: count("input_tokens")
                .saturating_add(count("cache_creation_input_tokens"))
                .saturating_add(cached),
            cached_input_tokens: cached,
            output_tokens: count("output_tokens"),
            reasoning_output_tokens: 0,
            // A cost no run can have (the stream is the worker's to forge) is none.
            cost_usd: cost.filter(|c| (0.0..=MAX_REPORTED_COST_USD).contains(c)),
        });
    }
}

/// The exit code and output of a Bash tool result: 0 unless it is an error, whose
/// text starts `Exit code N`.
fn bash_exit(failed: bool, content: &str) -> (Option<i32>, &str) {
    if !failed {
        return (Some(0), content);
    }
    let Some(rest) = content.strip_prefix("Exit code ") else {
        return (None, content);
    };
    let (number, output) = rest.split_once('\n').unwrap_or((rest, ""));
    match number.trim().parse() {
        Ok(code) => (Some(code), output),
        Err(_) => (None, content),
    }
}

/// Files a Bash command changed, as claude saw them (`bashEditDiff`).
fn bash_changes(structured: Option<&Value>) -> Vec<FileChange> {
    let Some(diff) = structured.and_then(|s| s.get("bashEditDiff")) else {
        return Vec::new();
    };
    let created: Vec<&str> = diff
        .get("files")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|f| f.get("created").and_then(Value::as_bool) == Some(true))
        .filter_map(|f| f.get("filePath").and_then(Value::as_str))
        .collect();
    diff.get("changedFiles")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|path| FileChange {
            path: path.to_string(),
            kind: if created.contains(&path) {
                "add"
            } else {
                "update"
            }
            .into(),
        })
        .collect()
}

/// The content blocks of a message (a list; a bare string is one text block).
fn blocks(message: &Value) -> Vec<Value> {
    match message.get("content") {
        Some(Value::Array(blocks)) => blocks.clone(),
        Some(Value::String(text)) => vec![serde_json::json!({"type": "text", "text": text})],
        _ => Vec::new(),
    }
}

/// A string, or the texts of a list of text blocks, joined.
fn text_of(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let texts: Vec<&str> = items
                .iter()
                .filter_map(|i| i.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::kind::{read_all, samples};
    use crate::agent::outcome::{Exit, RunOutcome};
    use agent_runner_core::secret::Secret;
    use std::time::Duration;

    fn sample(name: &str) -> (Transcript, RunOutcome, String) {
        samples::judged(&CLAUDE, "testdata/claude/samples", name, exit)
    }

    /// 124: the recording's own `timeout` stopped it, as our limit would.
    fn exit(code: i32) -> Exit {
        match code {
            124 => Exit::TimedOut(Duration::from_secs(1800)),
            code => Exit::Code(code),
        }
    }

    const PROXY_REFUSED: &str = "API Error: Couldn't connect through your proxy (ERR_PROXY_TUNNEL) — the proxy refused the tunnel: check its credentials and that it allows this host";

    #[test]
    fn every_recorded_sample_is_judged_right() {
        use RunOutcome::*;
        let no_input = "Error: Input must be provided either through stdin or as a prompt argument when using --print";
        let expected: &[(&str, RunOutcome, &str)] = &[
            ("empty_stdin", Failed, no_input),
            (
                "fail_401",
                Failed,
                "Failed to authenticate. API Error: 401 fake server: status 401",
            ),
            (
                "fail_500",
                Failed,
                "API Error: 500 fake server: status 500. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:39571).",
            ),
            (
                "fail_500_max_retries_2",
                Failed,
                "API Error: 500 fake server: status 500. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:35017).",
            ),
            (
                "file_edit",
                Completed,
                "Wrote new.txt and edited notes.txt.",
            ),
            ("hosts_apikey_default_url", Failed, PROXY_REFUSED),
            (
                "hosts_apikey_default_url_nonessential_on",
                Failed,
                PROXY_REFUSED,
            ),
            ("hosts_apikey_fake_url", Completed, "Hi."),
            (
                "hosts_apikey_fake_url_no_no_proxy",
                Failed,
                "Failed to authenticate. API Error: 403 status code (no body)",
            ),
            ("hosts_apikey_fake_url_nonessential_on", Completed, "Hi."),
            (
                "hosts_apikey_fake_url_nonessential_on_autoupdater_on",
                Completed,
                "Hi.",
            ),
            ("hosts_oauth_default_url", Failed, PROXY_REFUSED),
            (
                "hosts_oauth_default_url_nonessential_on",
                Failed,
                PROXY_REFUSED,
            ),
            ("hosts_oauth_expired", Failed, PROXY_REFUSED),
            ("hosts_oauth_expired_fake_url", Completed, "Hi."),
            ("hosts_oauth_fake_url", Completed, "Hi."),
            ("hosts_oauth_fake_url_nonessential_on", Completed, "Hi."),
            ("max_turns", Failed, "Reached maximum number of turns (2)"),
            ("model_flag", Completed, "Hi."),
            (
                "model_not_found",
                Failed,
                "There's an issue with the selected model (claude-no-such-model). It may not exist or you may not have access to it. Run --model to pick a different model.",
            ),
            ("no_api_key", Failed, "Not logged in · Please run /login"),
            ("no_session_persistence", Completed, "Not kept."),
            ("no_stdin", Failed, no_input),
            ("non_root_user", Completed, "Done."),
            ("oauth_fake_url", Completed, "Hi."),
            ("oauth_readonly", Completed, "Hi."),
            ("oauth_token_env", Completed, "Hi."),
            ("resume_1_first", Completed, "I will remember banana."),
            ("resume_2_by_id", Completed, "The word was banana."),
            ("resume_3_continue", Completed, "Still banana."),
            (
                "resume_4_unknown_id",
                Failed,
                "No conversation found with session ID: 00000000-0000-4000-8000-000000000000",
            ),
            ("resume_5_other_cwd", Completed, "From elsewhere."),
            ("resume_6_continue_fresh_home", Completed, "Fresh."),
            ("resume_7_session_id", Completed, "Fixed id."),
            (
                "resume_8_session_id_again",
                Failed,
                "Error: Session ID 11111111-2222-4333-8444-555555555555 is already in use.",
            ),
            ("resume_9_only_transcript", Completed, "It was banana."),
            ("retry_then_ok", Completed, "Done."),
            (
                "root_without_is_sandbox",
                Failed,
                "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons",
            ),
            (
                "stall",
                TimedOut,
                "Timed out after 1800 s (max_run_time_sec); the worker was stopped.",
            ),
            (
                "stall_api_timeout",
                Failed,
                "Request timed out. If the API is slow to answer, or a proxy or gateway holds responses, set API_TIMEOUT_MS above 20000.",
            ),
            (
                "stream_cut",
                Failed,
                "API Error: Connection dropped (ECONNRESET). Check the gateway set in ANTHROPIC_BASE_URL, then try again.",
            ),
            (
                "stream_error",
                Failed,
                "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:32903).",
            ),
            ("success_bash", Completed, "Created hello.txt."),
        ];
        samples::all_judged(&CLAUDE, "testdata/claude/samples", exit, expected);
    }

    #[test]
    fn bash_calls_with_exit_codes_files_usage_and_cost_are_recorded() {
        let (t, _, _) = sample("success_bash");
        let commands: Vec<(&str, Option<i32>, &str)> = t
            .commands
            .iter()
            .map(|c| (c.command.as_str(), c.exit_code, c.status.as_str()))
            .collect();
        assert_eq!(
            commands,
            [
                ("echo hello > hello.txt && ls", Some(0), "completed"),
                ("ls /nonexistent", Some(2), "failed"),
            ]
        );
        assert_eq!(
            t.commands[1].output_tail,
            "ls: cannot access '/nonexistent': No such file or directory"
        );
        assert_eq!(
            t.file_changes,
            [FileChange {
                path: "/workspace/project/hello.txt".into(),
                kind: "add".into()
            }]
        );
        assert_eq!(
            t.usage,
            Some(Usage {
                input_tokens: 420,
                cached_input_tokens: 120,
                output_tokens: 30,
                reasoning_output_tokens: 0,
                cost_usd: Some(0.001824),
            })
        );
        assert_eq!(
            t.session_id.as_deref(),
            Some("97ddd105-fa61-47d8-9d09-2d54a2f73fcb")
        );
        assert_eq!(t.raw_lines, 0);
        assert_eq!(t.model.as_deref(), Some("claude-opus-5-5"), "from init");
        // SPEC §15: the run's usage, on the model it ran, with claude's own cost.
        let usage = t.usage_for(None);
        assert_eq!(usage.model.as_deref(), Some("claude-opus-5-5"));
        assert_eq!(usage.total_tokens(), 450);
        assert_eq!(usage.reported_cost_usd, Some(0.001824));
        assert_eq!(
            agent_runner_core::usage::Pricing::default().cost(&usage),
            Some(0.001824),
            "no price needed: claude said what the run cost"
        );

        let (t, _, _) = sample("file_edit");
        assert_eq!(
            t.file_changes,
            [
                FileChange {
                    path: "/workspace/project/new.txt".into(),
                    kind: "add".into()
                },
                FileChange {
                    path: "/workspace/project/notes.txt".into(),
                    kind: "update".into()
                },
            ],
            "the failed edit and the read change nothing"
        );
        assert!(t.commands.is_empty());

        let (t, _, _) = sample("fail_500");
        assert_eq!(
            t.errors.len(),
            11,
            "one per api_retry, and claude's own message"
        );
        assert_eq!(
            t.errors[0],
            "API request failed with server_error (HTTP 500); retry 1 of 10"
        );
        assert!(
            t.errors[10].starts_with("API Error: 500 fake server"),
            "{:?}",
            t.errors[10]
        );
        assert_eq!(t.agent_message, None, "<synthetic> text is no answer");
        assert_eq!(t.usage.as_ref().and_then(|u| u.cost_usd), Some(0.0));
        let (t, _, _) = sample("stall");
        assert_eq!(t.usage, None, "no result line, no usage");
    }

    #[test]
    fn a_forged_cost_or_token_count_is_no_figure_and_never_overflows() {
        let result = |usage: &str, cost: &str| {
            let line = format!(
                "{{\"type\":\"result\",\"is_error\":false,\"result\":\"ok\",\"usage\":{usage},\"total_cost_usd\":{cost}}}\n"
            );
            read_all(&CLAUDE, line.as_bytes()).usage.unwrap()
        };
        let max = u64::MAX;
        let usage = result(
            &format!(
                "{{\"input_tokens\":{max},\"cache_creation_input_tokens\":{max},\"cache_read_input_tokens\":5}}"
            ),
            "1e300",
        );
        assert_eq!((usage.input_tokens, usage.cost_usd), (max, None));
        assert_eq!(result("{}", "-1").cost_usd, None);
        assert_eq!(result("{}", "0.25").cost_usd, Some(0.25));
        assert_eq!(
            agent_runner_core::usage::account::round(1e300),
            1e300,
            "never infinite"
        );
    }

    #[test]
    fn broken_unknown_and_unpaired_lines_are_never_fatal() {
        let t = read_all(
            &CLAUDE,
            b"not json\n{\"type\":\"brand_new\"}\n{\"type\":\"user\",\"message\":{\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"nope\",\"is_error\":true,\"content\":\"Exit code 3\"}]}}\n{\"type\":\"assistant\",\"message\":{\"content\":\"plain\"}}\n{\"type\":\"result\"}\n",
        );
        assert_eq!((t.raw_lines, t.events), (2, 3));
        assert!(t.commands.is_empty());
        assert_eq!(
            t.failure(),
            Some("claude reported an error (no subtype)"),
            "a result without is_error is no success"
        );
        assert_eq!(t.agent_message.as_deref(), Some("plain"));
        assert_eq!(bash_exit(true, "Exit code 12\nout"), (Some(12), "out"));
        assert_eq!(bash_exit(true, "Exit code x"), (None, "Exit code x"));
        assert_eq!(bash_exit(true, "Killed"), (None, "Killed"));
    }

    #[test]
    fn pending_tool_calls_stay_bounded() {
        let mut t = Transcript::default();
        let mut stream = ClaudeStream::default();
        for n in 0..10_000 {
            let line = format!(
                r#"{{"type":"assistant","message":{{"content":[{{"type":"tool_use","id":"t{n}","name":"Read","input":{{}}}}]}}}}"#
            );
            stream.feed(line.as_bytes(), &mut t);
        }
        assert_eq!(stream.pending.len(), MAX_PENDING);
    }

    #[test]
    fn mcp_servers_are_a_config_file_whose_path_alone_is_in_argv() {
        let servers = crate::agent::mcp::tests::servers();
        let run = RunSpec {
            mcp_servers: &servers,
            ..spec(true, None)
        };
        let command = CLAUDE.command(&run).join(" ");
        assert!(
            command.contains(
                "--mcp-config /run/agent-runner/private/agent-settings --strict-mcp-config"
            ),
            "{command}"
        );
        for secret in servers.iter().flat_map(|s| s.secrets()) {
            let secret = secret.expose();
            assert!(secret.len() < 4 || !command.contains(secret), "{command}");
        }
        let file = CLAUDE.settings_file(&run).unwrap();
        assert_eq!(file.link, None, "the path is on the command line");
        assert!(file.contents.contains("s3cret-token"));
        assert!(
            !CLAUDE.command(&spec(true, None)).join(" ").contains("mcp"),
            "no servers, no flag"
        );
        assert_eq!(CLAUDE.settings_file(&spec(true, None)), None);
    }

    fn spec(root: bool, url: Option<&str>) -> RunSpec<'_> {
        RunSpec {
            model: Some("claude-x"),
            extra_args: &[],
            base_url: url,
            workdir: "/workspace/project",
            root,
            mcp_servers: &[],
            settings_path: "/run/agent-runner/private/agent-settings",
        }
    }

    #[test]
    fn command_lines_and_variables_follow_the_recorded_flags() {
        assert_eq!(
            CLAUDE.command(&spec(true, None)).join(" "),
            "claude -p --output-format stream-json --verbose --dangerously-skip-permissions --model claude-x"
        );
        assert!(
            CLAUDE
                .resume_command(&spec(true, None), "s-1")
                .join(" ")
                .ends_with("--model claude-x --resume s-1")
        );
        assert_eq!(
            CLAUDE.run_env(&spec(true, Some("http://127.0.0.2:1"))),
            [
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
                ("IS_SANDBOX", "1".to_string()),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.2:1".to_string()),
            ]
        );
        assert_eq!(
            CLAUDE.run_env(&spec(false, None)),
            [("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string())]
        );
        assert_eq!(
            CLAUDE.session_files("s-1"),
            [".claude/projects/*/s-1.jsonl"]
        );
    }

    fn needs(login: &Login, env: &[(&str, Option<&str>)], url: Option<&str>) -> Vec<String> {
        CLAUDE
            .needs(&HostsSpec {
                login,
                env,
                extra_args: &[],
                base_url: url,
            })
            .into_iter()
            .map(|n| n.destination)
            .collect()
    }

    #[test]
    fn the_api_host_and_for_a_login_file_its_refresh_host() {
        let key = Login::Key {
            var: "ANTHROPIC_API_KEY",
            value: Secret::new("sk-ant".into()),
        };
        let file = Login::File {
            path: "/h/.claude/.credentials.json".into(),
            secrets: vec![],
            modes: vec![OAUTH],
        };
        assert_eq!(needs(&key, &[], None), ["api.anthropic.com"]);
        assert_eq!(needs(&Login::None, &[], None), ["api.anthropic.com"]);
        assert_eq!(
            needs(&file, &[], None),
            ["api.anthropic.com", "platform.claude.com"]
        );
        assert_eq!(
            needs(&key, &[], Some("http://127.0.0.2:8/")),
            ["http://127.0.0.2:8/"],
            "with a base URL the key goes there only"
        );
        assert_eq!(
            needs(&file, &[], Some("http://gw")),
            ["platform.claude.com", "http://gw"]
        );
        assert_eq!(
            needs(
                &Login::None,
                &[
                    ("ANTHROPIC_BASE_URL", Some("https://gw.corp")),
                    ("CLAUDE_CODE_OAUTH_TOKEN", None)
                ],
                None
            ),
            ["api.anthropic.com", "https://gw.corp"]
        );
        let modes = CLAUDE.login_modes(&serde_json::json!({"claudeAiOauth": {"accessToken": "x"}}));
        assert_eq!(modes, [OAUTH]);
        assert!(CLAUDE.login_modes(&serde_json::json!({})).is_empty());
    }
}
