//! The run record every agent kind's event stream is read into: the final message,
//! the commands run with their exit codes, the files changed, usage, errors, and
//! how the agent itself said the run ended. Bounded: long texts are cut and only the
//! latest commands and messages are kept, whatever the agent prints.

use serde::Serialize;

use agent_runner_core::text::{cut, tail};
use agent_runner_core::usage::Tokens;

/// Bounds on what a transcript keeps.
pub const MAX_COMMANDS: usize = 200;
pub const MAX_FILE_CHANGES: usize = 200;
pub const MAX_MESSAGES: usize = 20;
pub const MAX_TEXT: usize = 16 * 1024;
pub const MAX_COMMAND_TEXT: usize = 1000;
pub const MAX_COMMAND_OUTPUT: usize = 400;
/// Longest MCP server or tool name kept.
pub const MAX_NAME_TEXT: usize = 200;

/// Token usage of a run as its agent reported it: input includes cached input.
/// `Transcript::usage_for` makes it SPEC §15's usage of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    /// Part of `output_tokens`, when the agent reports it.
    pub reasoning_output_tokens: u64,
    /// What the agent itself says the run cost (claude's `total_cost_usd`), at its
    /// list prices; None when it does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// A file the agent said it changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    pub path: String,
    /// `add`, `update`, `delete`, as the agent says.
    pub kind: String,
}

/// A command the agent ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandRecord {
    /// The agent's id for it, pairing its start with its end.
    #[serde(skip)]
    pub item_id: String,
    pub command: String,
    /// None while running, or when the run ended before the command did.
    pub exit_code: Option<i32>,
    /// `in_progress`, `completed`, `failed`.
    pub status: String,
    /// The end of its output, for failed commands.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub output_tail: String,
}

impl CommandRecord {
    /// A command; its texts cut, and its output kept only when it failed.
    pub fn new(
        item_id: impl Into<String>,
        command: &str,
        exit_code: Option<i32>,
        status: impl Into<String>,
        output: &str,
    ) -> Self {
        let failed = exit_code.is_some_and(|c| c != 0);
        CommandRecord {
            item_id: item_id.into(),
            command: cut(command, MAX_COMMAND_TEXT),
            exit_code,
            status: status.into(),
            output_tail: if failed {
                tail(output, MAX_COMMAND_OUTPUT)
            } else {
                String::new()
            },
        }
    }
}

/// A call of the agent to a tool of an MCP server (SPEC §28).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpCall {
    /// The agent's id for it, pairing its start with its end.
    #[serde(skip)]
    pub item_id: String,
    pub server: String,
    pub tool: String,
    /// `in_progress`, `completed`, `failed`.
    pub status: String,
    /// The error it ended with, cut.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

impl McpCall {
    pub fn new(
        item_id: impl Into<String>,
        server: &str,
        tool: &str,
        status: impl Into<String>,
        error: &str,
    ) -> Self {
        McpCall {
            item_id: item_id.into(),
            server: cut(server, MAX_NAME_TEXT),
            tool: cut(tool, MAX_NAME_TEXT),
            status: status.into(),
            error: cut(error, MAX_COMMAND_OUTPUT),
        }
    }

    /// The call in words: `server/tool`, and how it failed.
    pub fn text(&self) -> String {
        match (self.status.as_str(), self.error.is_empty()) {
            ("failed", true) => format!("{}/{} (failed)", self.server, self.tool),
            ("failed", false) => format!("{}/{} (failed: {})", self.server, self.tool, self.error),
            _ => format!("{}/{}", self.server, self.tool),
        }
    }

    /// Whether the agent said it ended.
    pub fn ended(&self) -> bool {
        self.status != "in_progress"
    }
}

/// How the agent itself said its run ended (its terminal event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Terminal {
    /// codex `turn.completed`, claude `result` with `is_error: false`.
    Completed,
    /// codex `turn.failed`, claude `result` with `is_error: true`; the message.
    Failed(String),
}

/// What a run said, distilled from its event stream as it went by.
#[derive(Debug, Default, Clone)]
pub struct Transcript {
    /// The agent's session (codex thread id, claude session id), to resume it.
    pub session_id: Option<String>,
    pub terminal: Option<Terminal>,
    /// Usage the agent reported for the run (codex per turn, claude in `result`).
    pub usage: Option<Usage>,
    /// The model the agent said it runs (claude's `init` event); codex says none.
    pub model: Option<String>,
    /// The agent's last message: its answer on success.
    pub agent_message: Option<String>,
    pub commands: Vec<CommandRecord>,
    pub commands_dropped: usize,
    /// Its MCP tool calls (at most `MAX_COMMANDS`, the latest).
    pub mcp_calls: Vec<McpCall>,
    pub mcp_calls_dropped: usize,
    pub file_changes: Vec<FileChange>,
    /// Error events (retry notices, final errors), latest last.
    pub errors: Vec<String>,
    /// Errors that did not stop the run (warnings).
    pub warnings: Vec<String>,
    /// Lines that were not events of a known type.
    pub raw_lines: u64,
    pub events: u64,
}

impl Usage {
    /// The counts §15 adds up: `output_tokens` already holds the reasoning tokens.
    pub fn tokens(&self) -> Tokens {
        Tokens {
            input_tokens: self.input_tokens,
            cached_input_tokens: self.cached_input_tokens,
            output_tokens: self.output_tokens,
            reasoning_tokens: self.reasoning_output_tokens,
            ..Tokens::default()
        }
    }
}

impl Transcript {
    /// The run's usage (SPEC §15) on `model` (`runner.worker.model`, which names its
    /// price), else on the model the agent said it ran; tokens and cost as the agent
    /// reported them, None when it reported none (never guessed).
    pub fn usage_for(&self, model: Option<&str>) -> agent_runner_core::usage::Usage {
        agent_runner_core::usage::Usage {
            model: model.map(str::to_string).or_else(|| self.model.clone()),
            tokens: self.usage.as_ref().map(Usage::tokens),
            reported_cost_usd: self.usage.as_ref().and_then(|u| u.cost_usd),
        }
    }

    /// The agent said the run completed.
    pub fn completed(&self) -> bool {
        self.terminal == Some(Terminal::Completed)
    }

    /// The agent said the run failed, and why.
    pub fn failure(&self) -> Option<&str> {
        match &self.terminal {
            Some(Terminal::Failed(why)) => Some(why),
            _ => None,
        }
    }

    pub fn set_message(&mut self, text: &str) {
        self.agent_message = Some(cut(text, MAX_TEXT));
    }

    pub fn fail(&mut self, why: &str) {
        self.terminal = Some(Terminal::Failed(cut(why, MAX_TEXT)));
    }

    pub fn error(&mut self, message: &str) {
        push_bounded(&mut self.errors, cut(message, MAX_TEXT));
    }

    pub fn warning(&mut self, message: &str) {
        push_bounded(&mut self.warnings, cut(message, MAX_TEXT));
    }

    /// Records `record`; a record with the id of a recent one replaces it (its end
    /// replaces its start).
    pub fn command(&mut self, record: CommandRecord) {
        let (list, dropped) = (&mut self.commands, &mut self.commands_dropped);
        keep_latest(list, dropped, record, 8, |c| &c.item_id);
    }

    /// Records an MCP tool call; one with the id of a recent one replaces it.
    pub fn mcp_call(&mut self, call: McpCall) {
        let (list, dropped) = (&mut self.mcp_calls, &mut self.mcp_calls_dropped);
        keep_latest(list, dropped, call, 64, |c| &c.item_id);
    }

    /// The recent command with `item_id`, to complete it.
    pub fn command_mut(&mut self, item_id: &str) -> Option<&mut CommandRecord> {
        self.commands
            .iter_mut()
            .rev()
            .take(64)
            .find(|c| !item_id.is_empty() && c.item_id == item_id)
    }

    pub fn file_changed(&mut self, change: FileChange) {
        if self.file_changes.len() < MAX_FILE_CHANGES && !self.file_changes.contains(&change) {
            self.file_changes.push(change);
        }
    }
}

/// Records `item` in `list`, which keeps the latest `MAX_COMMANDS` items: an item
/// with the id of one of the last `window` replaces it (its end replaces its
/// start); else it goes last, the first dropped (and counted in `dropped`) when the
/// list is full. An empty id matches nothing.
fn keep_latest<T>(
    list: &mut Vec<T>,
    dropped: &mut usize,
    item: T,
    window: usize,
    id: impl Fn(&T) -> &String,
) {
    let recent = list
        .iter_mut()
        .rev()
        .take(window)
        .find(|c| !id(&item).is_empty() && id(c) == id(&item));
    match recent {
        Some(existing) => *existing = item,
        None => {
            if list.len() == MAX_COMMANDS {
                list.remove(0);
                *dropped += 1;
            }
            list.push(item);
        }
    }
}

fn push_bounded(list: &mut Vec<String>, value: String) {
    if list.len() == MAX_MESSAGES {
        list.remove(0);
    }
    list.push(value);
}

/// `line` without trailing whitespace (a CR, the newline).
pub fn trim_line(mut line: &[u8]) -> &[u8] {
    while let [rest @ .., last] = line {
        if last.is_ascii_whitespace() {
            line = rest
        } else {
            break;
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_the_runs_as_reported_on_the_named_model() {
        let mut t = Transcript::default();
        let none = t.usage_for(Some("m"));
        assert_eq!((none.model.as_deref(), none.tokens), (Some("m"), None));
        assert_eq!(none.reported_cost_usd, None);
        t.model = Some("claude-x".into());
        t.usage = Some(Usage {
            input_tokens: 10,
            cached_input_tokens: 4,
            output_tokens: 3,
            reasoning_output_tokens: 2,
            cost_usd: Some(0.5),
        });
        let used = t.usage_for(None);
        assert_eq!(used.model.as_deref(), Some("claude-x"), "the agent's word");
        assert_eq!(
            used.tokens,
            Some(Tokens {
                input_tokens: 10,
                cached_input_tokens: 4,
                output_tokens: 3,
                reasoning_tokens: 2,
                ..Tokens::default()
            })
        );
        assert_eq!(used.reported_cost_usd, Some(0.5));
        assert_eq!(
            t.usage_for(Some("m")).model.as_deref(),
            Some("m"),
            "the user's"
        );
    }

    #[test]
    fn mcp_calls_stay_bounded_and_ends_replace_starts() {
        let mut t = Transcript::default();
        t.mcp_call(McpCall::new("a", "notes", "add", "in_progress", ""));
        t.mcp_call(McpCall::new("a", "notes", "add", "failed", "boom"));
        assert_eq!(t.mcp_calls.len(), 1);
        assert_eq!(t.mcp_calls[0].text(), "notes/add (failed: boom)");
        for i in 0..1000 {
            t.mcp_call(McpCall::new(format!("i{i}"), "s", "t", "completed", ""));
        }
        assert_eq!(
            (t.mcp_calls.len(), t.mcp_calls_dropped),
            (MAX_COMMANDS, 801)
        );
    }

    #[test]
    fn commands_stay_bounded_and_ends_replace_starts() {
        let mut t = Transcript::default();
        t.command(CommandRecord::new("a", "ls", None, "in_progress", ""));
        t.command(CommandRecord::new("a", "ls", Some(2), "failed", "boom"));
        assert_eq!(t.commands.len(), 1);
        assert_eq!(t.commands[0].output_tail, "boom");
        let long = "x".repeat(100_000);
        for i in 0..1000 {
            t.command(CommandRecord::new(
                format!("i{i}"),
                &long,
                Some(1),
                "failed",
                &long,
            ));
            t.error(&long);
        }
        assert_eq!((t.commands.len(), t.commands_dropped), (MAX_COMMANDS, 801));
        assert!(
            t.commands
                .iter()
                .all(|c| c.command.len() <= MAX_COMMAND_TEXT + 3
                    && c.output_tail.len() <= MAX_COMMAND_OUTPUT + 3)
        );
        assert_eq!(t.errors.len(), MAX_MESSAGES);
        assert!(t.errors.iter().all(|e| e.len() <= MAX_TEXT + 3));
    }
}
