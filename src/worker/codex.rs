//! The Codex CLI as a worker: its command line, its JSONL events (`codex exec
//! --json`, format recorded from codex-cli 0.169.0), and how a run is judged.
//! Success is exit 0 *and* `turn.completed`; exit 0 alone proves nothing.

use serde::{Deserialize, Serialize};

use crate::task::WorkerSettings;
use crate::text::{cut, tail};

/// Where the repository is mounted in the sandbox; codex works there (`-C`).
pub const PROJECT_DIR: &str = "/workspace/project";

/// Bounds on what a transcript keeps, whatever the worker prints.
const MAX_COMMANDS: usize = 200;
const MAX_FILE_CHANGES: usize = 200;
const MAX_MESSAGES: usize = 20;
const MAX_TEXT: usize = 16 * 1024;
const MAX_COMMAND_TEXT: usize = 1000;
const MAX_COMMAND_OUTPUT: usize = 400;

/// `codex exec` arguments after the program name; the prompt goes to stdin (`-`).
pub fn exec_args(settings: &WorkerSettings) -> Vec<String> {
    let mut args: Vec<String> = [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "-C",
        PROJECT_DIR,
    ]
    .map(String::from)
    .into();
    if let Some(model) = &settings.model {
        args.extend(["-m".to_string(), model.clone()]);
    }
    args.extend(settings.extra_args.iter().cloned());
    args.push("-".into());
    args
}

/// One line of `codex exec --json` output.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
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
        usage: Usage,
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
pub struct FailedTurn {
    #[serde(default)]
    pub message: Option<String>,
}

/// Token usage summed over the turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub cached_input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub reasoning_output_tokens: u64,
}

impl Usage {
    /// The counts §15 adds up. `output_tokens` already holds the reasoning tokens
    /// (`reasoning_output_tokens` is their share, as the Responses API reports it).
    pub fn tokens(&self) -> crate::usage::Tokens {
        crate::usage::Tokens {
            input_tokens: self.input_tokens,
            cached_input_tokens: self.cached_input_tokens,
            output_tokens: self.output_tokens,
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct Item {
    #[serde(default)]
    pub id: String,
    #[serde(flatten)]
    pub kind: ItemKind,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ItemKind {
    /// The agent's answer; the last one is the run's summary.
    AgentMessage { text: String },
    Reasoning {
        #[serde(default)]
        text: String,
    },
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
        changes: Vec<FileChange>,
    },
    /// Not fatal (e.g. an unknown-model warning).
    Error { message: String },
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct FileChange {
    pub path: String,
    #[serde(default)]
    pub kind: String,
}

/// A command the worker ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandRecord {
    #[serde(skip)]
    item_id: String,
    pub command: String,
    /// None while running, or when the run ended before the command did.
    pub exit_code: Option<i32>,
    pub status: String,
    /// The end of its output, for failed commands.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub output_tail: String,
}

/// What a worker run said, distilled from its JSONL as it streams by. Bounded:
/// long texts are cut and only the latest commands and messages are kept.
#[derive(Debug, Default, Clone)]
pub struct Transcript {
    pub thread_id: Option<String>,
    pub completed: Option<Usage>,
    pub failed: Option<String>,
    pub agent_message: Option<String>,
    pub commands: Vec<CommandRecord>,
    pub commands_dropped: usize,
    pub file_changes: Vec<FileChange>,
    /// Top-level `error` events (retry notices, final errors), latest last.
    pub errors: Vec<String>,
    /// `error` items: warnings that did not stop the run.
    pub warnings: Vec<String>,
    /// Lines that were not JSON events of a known type.
    pub raw_lines: u64,
    pub events: u64,
}

impl Transcript {
    /// Takes one stdout line. Anything that is not a known event is counted as raw
    /// text, never an error.
    pub fn feed(&mut self, line: &[u8]) {
        self.feed_observed(line, &mut |_| {});
    }

    /// `feed`, telling `seen` what a person watching the run would want to see of
    /// the line: a command started or finished, a file changed, an agent message.
    pub fn feed_observed(&mut self, line: &[u8], seen: &mut dyn FnMut(Sighting)) {
        let line = trim_ascii(line);
        if line.is_empty() {
            return;
        }
        match serde_json::from_slice::<Event>(line) {
            Ok(Event::Unknown) | Err(_) => self.raw_lines += 1,
            Ok(event) => {
                self.events += 1;
                sightings(&event, seen);
                self.apply(event);
            }
        }
    }

    fn apply(&mut self, event: Event) {
        match event {
            Event::ThreadStarted { thread_id } => self.thread_id = Some(thread_id),
            Event::TurnStarted | Event::Unknown => {}
            Event::TurnCompleted { usage } => self.completed = Some(usage),
            Event::TurnFailed { error } => {
                let message = error
                    .and_then(|e| e.message)
                    .filter(|m| !m.trim().is_empty());
                self.failed = Some(cut(
                    message
                        .as_deref()
                        .unwrap_or("turn.failed (codex gave no message)"),
                    MAX_TEXT,
                ));
            }
            Event::Error { message } => push_bounded(&mut self.errors, cut(&message, MAX_TEXT)),
            Event::ItemStarted { item }
            | Event::ItemUpdated { item }
            | Event::ItemCompleted { item } => self.item(item),
        }
    }

    fn item(&mut self, item: Item) {
        match item.kind {
            ItemKind::AgentMessage { text } => self.agent_message = Some(cut(&text, MAX_TEXT)),
            ItemKind::Reasoning { .. } | ItemKind::Other => {}
            ItemKind::Error { message } => {
                push_bounded(&mut self.warnings, cut(&message, MAX_TEXT))
            }
            ItemKind::FileChange { changes } => {
                for change in changes {
                    if self.file_changes.len() < MAX_FILE_CHANGES
                        && !self.file_changes.contains(&change)
                    {
                        self.file_changes.push(change);
                    }
                }
            }
            ItemKind::CommandExecution {
                command,
                aggregated_output,
                exit_code,
                status,
            } => {
                let failed = exit_code.is_some_and(|c| c != 0);
                let record = CommandRecord {
                    item_id: item.id,
                    command: cut(&command, MAX_COMMAND_TEXT),
                    exit_code,
                    status,
                    output_tail: if failed {
                        tail(&aggregated_output, MAX_COMMAND_OUTPUT)
                    } else {
                        String::new()
                    },
                };
                // item.completed replaces the item.started record of the same id.
                match self
                    .commands
                    .iter_mut()
                    .rev()
                    .take(8)
                    .find(|c| c.item_id == record.item_id && !c.item_id.is_empty())
                {
                    Some(existing) => *existing = record,
                    None => {
                        if self.commands.len() == MAX_COMMANDS {
                            self.commands.remove(0);
                            self.commands_dropped += 1;
                        }
                        self.commands.push(record);
                    }
                }
            }
        }
    }
}

/// One thing the worker did, as its event stream says while it runs (SPEC §19).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    /// `command_started`, `command_finished`, `file_changed`, `agent_message`.
    pub item: &'static str,
    pub text: String,
    pub exit_code: Option<i32>,
}

fn sightings(event: &Event, seen: &mut dyn FnMut(Sighting)) {
    let mut see = |item, text: &str, exit_code| {
        seen(Sighting {
            item,
            text: cut(text, MAX_COMMAND_TEXT),
            exit_code,
        })
    };
    match event {
        Event::ItemStarted { item } => {
            if let ItemKind::CommandExecution { command, .. } = &item.kind {
                see("command_started", command, None);
            }
        }
        Event::ItemCompleted { item } => match &item.kind {
            ItemKind::CommandExecution {
                command, exit_code, ..
            } => see("command_finished", command, *exit_code),
            ItemKind::AgentMessage { text } => see("agent_message", text, None),
            ItemKind::FileChange { changes } => {
                for change in changes.iter().take(MAX_FILE_CHANGES) {
                    let text = match change.kind.as_str() {
                        "" => change.path.clone(),
                        kind => format!("{} ({kind})", change.path),
                    };
                    see("file_changed", &text, None);
                }
            }
            _ => {}
        },
        _ => {}
    }
}

/// How a worker run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// Exit 0 and `turn.completed`.
    Completed,
    /// `turn.failed` or a non-zero exit.
    Failed,
    /// Ran past `max_run_time_sec`; killed.
    TimedOut,
    /// No output for `idle_timeout_sec`; killed.
    Stalled,
    /// Ended without a terminal event (killed by a signal, or exit 0 mid-turn).
    Crashed,
    /// agent-runner was interrupted (SIGINT/SIGTERM) during the run.
    Interrupted,
}

impl RunOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::Failed => "failed",
            RunOutcome::TimedOut => "timed_out",
            RunOutcome::Stalled => "stalled",
            RunOutcome::Crashed => "crashed",
            RunOutcome::Interrupted => "interrupted",
        }
    }
}

/// How the worker process ended, as seen from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exited with this status code.
    Code(i32),
    /// Killed by a signal, or not reaped.
    Signal,
    /// Stopped at `max_run_time_sec`.
    TimedOut(std::time::Duration),
    /// Stopped after `idle_timeout_sec` without output.
    Stalled(std::time::Duration),
    Interrupted,
}

/// Judges a run: its outcome and a one-paragraph summary (the final agent message
/// on success, the most telling error otherwise).
pub fn classify(transcript: &Transcript, exit: Exit, stderr: &str) -> (RunOutcome, String) {
    let reason = || {
        transcript
            .failed
            .clone()
            .or_else(|| transcript.errors.last().cloned())
            .or_else(|| stderr_reason(stderr))
    };
    let last_words = || match &transcript.agent_message {
        Some(m) => format!(" Last agent message: {m}"),
        None => String::new(),
    };
    match exit {
        Exit::TimedOut(limit) => (
            RunOutcome::TimedOut,
            format!(
                "Timed out after {} s (max_run_time_sec); the worker was stopped.{}",
                limit.as_secs(),
                last_words()
            ),
        ),
        Exit::Stalled(limit) => (
            RunOutcome::Stalled,
            format!(
                "Stalled: no output for {} s (idle_timeout_sec); the worker was stopped.{}",
                limit.as_secs(),
                last_words()
            ),
        ),
        Exit::Interrupted => (
            RunOutcome::Interrupted,
            "Interrupted; the worker was stopped.".into(),
        ),
        _ if transcript.failed.is_some() => (RunOutcome::Failed, reason().unwrap_or_default()),
        Exit::Code(0) if transcript.completed.is_some() => (
            RunOutcome::Completed,
            transcript
                .agent_message
                .clone()
                .unwrap_or_else(|| "(no final message)".into()),
        ),
        Exit::Code(code) if code != 0 && code < 128 => (
            RunOutcome::Failed,
            reason().unwrap_or_else(|| format!("codex exited with status {code}")),
        ),
        Exit::Code(code) => {
            let how = if code >= 128 {
                format!("was killed (exit status {code}, signal {})", code - 128)
            } else {
                "exited 0".to_string()
            };
            let detail = reason()
                .map(|r| format!(" Last error: {r}"))
                .unwrap_or_default();
            (
                RunOutcome::Crashed,
                format!("codex {how} before finishing its turn.{detail}"),
            )
        }
        Exit::Signal => {
            let detail = reason()
                .map(|r| format!(" Last error: {r}"))
                .unwrap_or_default();
            (
                RunOutcome::Crashed,
                format!("codex was killed by a signal before finishing its turn.{detail}"),
            )
        }
    }
}

/// The most telling stderr line: the first that is not noise.
fn stderr_reason(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .map(str::trim)
        .find(|l| {
            !l.is_empty()
                && !l.starts_with("WARNING:")
                && *l != "Reading additional input from stdin..."
        })
        .map(|l| cut(l, MAX_TEXT))
}

fn trim_ascii(mut line: &[u8]) -> &[u8] {
    while let [rest @ .., last] = line {
        if last.is_ascii_whitespace() {
            line = rest
        } else {
            break;
        }
    }
    line
}

fn push_bounded(list: &mut Vec<String>, value: String) {
    if list.len() == MAX_MESSAGES {
        list.remove(0);
    }
    list.push(value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn sample(name: &str) -> (Transcript, RunOutcome, String) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/codex-samples")
            .join(name);
        let stdout = std::fs::read(dir.join("stdout.jsonl")).unwrap();
        let stderr = std::fs::read_to_string(dir.join("stderr.txt")).unwrap();
        let code: i32 = std::fs::read_to_string(dir.join("exit_code"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut transcript = Transcript::default();
        for line in stdout.split(|&b| b == b'\n') {
            transcript.feed(line);
        }
        let (outcome, summary) = classify(&transcript, Exit::Code(code), &stderr);
        (transcript, outcome, summary)
    }

    /// What `task logs` shows of a real run: its commands, files and messages.
    #[test]
    fn a_recorded_run_is_seen_item_by_item() {
        let stdout = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("testdata/codex-samples/cmd_fails/stdout.jsonl"),
        )
        .unwrap();
        let mut transcript = Transcript::default();
        let mut seen = Vec::new();
        for line in stdout.split(|&b| b == b'\n') {
            transcript.feed_observed(line, &mut |s| seen.push((s.item, s.exit_code)));
        }
        assert_eq!(
            seen,
            [
                ("command_started", None),
                ("command_finished", Some(3)),
                ("agent_message", None)
            ],
            "{seen:?}"
        );
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
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/codex-samples");
        assert_eq!(
            std::fs::read_dir(dir).unwrap().count(),
            expected.len(),
            "a sample without an expectation"
        );
        for (name, outcome, summary) in expected {
            let (_, got_outcome, got_summary) = sample(name);
            assert_eq!(
                (got_outcome, got_summary.as_str()),
                (*outcome, *summary),
                "sample {name}"
            );
        }
    }

    #[test]
    fn commands_files_and_usage_are_recorded() {
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
        let (t, _, _) = sample("apply_patch");
        assert_eq!(
            t.file_changes,
            [FileChange {
                path: "/workspace/project/patched.txt".into(),
                kind: "add".into()
            }]
        );
        assert_eq!(t.completed.as_ref().map(|u| u.input_tokens), Some(3000));
        let (t, _, _) = sample("missing_command_item");
        assert!(t.commands.is_empty());
        assert_eq!(
            t.completed.as_ref().map(|u| u.cached_input_tokens),
            Some(1300)
        );
        let (t, _, _) = sample("fail_401");
        assert_eq!(t.errors.len(), 6);
    }

    #[test]
    fn unknown_and_broken_lines_are_kept_as_raw_text() {
        let mut t = Transcript::default();
        for line in [
            &b"not json"[..],
            b"{\"type\":\"brand.new\",\"x\":1}",
            b"{\"type\":\"turn.unknown\"}",
            b"\xff\xfe",
            b"",
            b"{\"type\":\"turn.started\"}",
        ] {
            t.feed(line);
        }
        assert_eq!((t.raw_lines, t.events), (4, 1));
    }

    #[test]
    fn a_failed_turn_without_a_message_still_fails_the_run() {
        for line in [
            &br#"{"type":"turn.failed"}"#[..],
            br#"{"type":"turn.failed","error":{}}"#,
            br#"{"type":"turn.failed","error":{"message":""}}"#,
        ] {
            let mut t = Transcript::default();
            t.feed(line);
            assert_eq!(
                classify(&t, Exit::Code(1), ""),
                (
                    RunOutcome::Failed,
                    "turn.failed (codex gave no message)".to_string()
                ),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn exit_zero_without_terminal_event_is_a_crash() {
        let mut t = Transcript::default();
        t.feed(br#"{"type":"turn.started"}"#);
        t.feed(
            br#"{"type":"item.completed","item":{"id":"1","type":"agent_message","text":"half"}}"#,
        );
        assert_eq!(classify(&t, Exit::Code(0), "").0, RunOutcome::Crashed);
        assert_eq!(
            classify(&t, Exit::Code(137), "").1,
            "codex was killed (exit status 137, signal 9) before finishing its turn."
        );
        assert_eq!(classify(&t, Exit::Signal, "").0, RunOutcome::Crashed);
        let (outcome, summary) =
            classify(&t, Exit::TimedOut(std::time::Duration::from_secs(3)), "");
        assert_eq!(outcome, RunOutcome::TimedOut);
        assert_eq!(
            summary,
            "Timed out after 3 s (max_run_time_sec); the worker was stopped. Last agent message: half"
        );
        assert_eq!(
            classify(&t, Exit::Stalled(std::time::Duration::from_secs(9)), "").0,
            RunOutcome::Stalled
        );
        t.feed(br#"{"type":"turn.completed","usage":{}}"#);
        assert_eq!(classify(&t, Exit::Code(2), "").0, RunOutcome::Failed);
        assert_eq!(classify(&t, Exit::Code(0), "").0, RunOutcome::Completed);
    }

    #[test]
    fn transcript_stays_bounded() {
        let mut t = Transcript::default();
        let long = "x".repeat(100_000);
        for i in 0..1000 {
            let line = format!(
                r#"{{"type":"item.completed","item":{{"id":"i{i}","type":"command_execution","command":"{long}","aggregated_output":"{long}","exit_code":1,"status":"failed"}}}}"#
            );
            t.feed(line.as_bytes());
            t.feed(format!(r#"{{"type":"error","message":"{long}"}}"#).as_bytes());
        }
        assert_eq!((t.commands.len(), t.commands_dropped), (MAX_COMMANDS, 800));
        assert!(
            t.commands
                .iter()
                .all(|c| c.command.len() <= MAX_COMMAND_TEXT + 3
                    && c.output_tail.len() <= MAX_COMMAND_OUTPUT + 3)
        );
        assert_eq!(t.errors.len(), MAX_MESSAGES);
        assert!(t.errors.iter().all(|e| e.len() <= MAX_TEXT + 3));
    }

    #[test]
    fn command_line_matches_the_recorded_working_flags() {
        let mut settings = crate::task::WorkerSettings {
            docker_image: "i".into(),
            max_run_time: std::time::Duration::from_secs(1),
            idle_timeout: std::time::Duration::from_secs(1),
            model: None,
            extra_args: vec![],
            network: crate::task::Network::None,
            allow: Default::default(),
            env: vec![],
            limits: Default::default(),
        };
        assert_eq!(
            exec_args(&settings).join(" "),
            "exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -C /workspace/project -"
        );
        settings.model = Some("o4-mini".into());
        settings.extra_args = vec!["-c".into(), "x=1".into()];
        assert!(
            exec_args(&settings)
                .join(" ")
                .ends_with("-C /workspace/project -m o4-mini -c x=1 -")
        );
    }
}
