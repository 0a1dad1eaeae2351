//! What the worker's agent does, told while it runs (SPEC §19's `worker_item`
//! events): after each line of its event stream has been read into the run record
//! (`agent::Transcript`), what that line added to it: a command started or
//! finished, a file changed, a message. Read from the record, so it holds for
//! every agent kind.

use std::collections::VecDeque;

use agent_runner_settings::agent::Transcript;
use agent_runner_settings::events::ItemKind;

/// Commands looked at for an end after each line (the record replaces a recent
/// start with its end).
const RECENT: usize = 64;

/// What was already told of a run.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// Commands seen so far, the dropped ones included.
    commands: usize,
    /// The recent commands' ids, and whether their end was told.
    recent: VecDeque<(String, bool)>,
    files: usize,
    message: Option<String>,
    /// MCP calls seen so far (the dropped ones included), and the recent ones' ids
    /// whose end was told.
    mcp_calls: usize,
    mcp_told: VecDeque<String>,
}

/// One thing the agent did: what kind of item, its text and a command's exit code.
pub(crate) type Seen<'a> = &'a mut dyn FnMut(ItemKind, &str, Option<i32>);

impl Watch {
    /// Tells `seen` what `record` holds that was not told yet.
    pub(crate) fn after_line(&mut self, record: &Transcript, seen: Seen) {
        let (dropped, len) = (record.commands_dropped, record.commands.len());
        let first_new = first_unseen(&mut self.commands, dropped, len);
        for command in &record.commands[first_new..] {
            seen(ItemKind::CommandStarted, &command.command, None);
            let ended = ended(command);
            if ended {
                seen(
                    ItemKind::CommandFinished,
                    &command.command,
                    command.exit_code,
                );
            }
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back((command.item_id.clone(), ended));
        }
        for command in record.commands[..first_new].iter().rev().take(RECENT) {
            if command.item_id.is_empty() || !ended(command) {
                continue;
            }
            let told = self
                .recent
                .iter_mut()
                .find(|(id, done)| !done && *id == command.item_id);
            if let Some((_, done)) = told {
                *done = true;
                seen(
                    ItemKind::CommandFinished,
                    &command.command,
                    command.exit_code,
                );
            }
        }
        self.mcp_calls(record, seen);
        for change in record.file_changes.iter().skip(self.files) {
            let text = match change.kind.as_str() {
                "" => change.path.clone(),
                kind => format!("{} ({kind})", change.path),
            };
            seen(ItemKind::FileChanged, &text, None);
        }
        self.files = record.file_changes.len();
        if record.agent_message != self.message {
            if let Some(message) = &record.agent_message {
                seen(ItemKind::AgentMessage, message, None);
            }
            self.message = record.agent_message.clone();
        }
    }
}

impl Watch {
    /// Tells each MCP tool call once it ended (a call's end replaces its start in
    /// the record, so the recent ones are looked at again).
    fn mcp_calls(&mut self, record: &Transcript, seen: Seen) {
        let (dropped, len) = (record.mcp_calls_dropped, record.mcp_calls.len());
        let from = first_unseen(&mut self.mcp_calls, dropped, len);
        let start = from.saturating_sub(RECENT);
        for call in &record.mcp_calls[start..] {
            if !call.ended() || self.mcp_told.iter().any(|id| *id == call.item_id) {
                continue;
            }
            if self.mcp_told.len() == RECENT {
                self.mcp_told.pop_front();
            }
            self.mcp_told.push_back(call.item_id.clone());
            seen(ItemKind::McpToolCall, &call.text(), None);
        }
    }
}

/// Whether the agent said the command ended.
fn ended(command: &agent_runner_settings::agent::CommandRecord) -> bool {
    command.exit_code.is_some() || command.status != "in_progress"
}

/// Where the items not told yet start in one of the record's capped lists: `len`
/// items kept after `dropped` were dropped from its front, of which `told` (the
/// count so far, which it becomes) were told. An item dropped before it was told
/// is not told.
fn first_unseen(told: &mut usize, dropped: usize, len: usize) -> usize {
    let total = dropped + len;
    let new = total.saturating_sub(*told).min(len);
    *told = total;
    len - new
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_settings::agent::{Kind, claude::CLAUDE, codex::CODEX};

    /// What `task logs` shows of a recorded real run, line by line as it came.
    fn seen(kind: &dyn Kind, sample: &str) -> Vec<(&'static str, Option<i32>)> {
        let stdout = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(sample),
        )
        .unwrap();
        let mut record = Transcript::default();
        let mut stream = kind.stream();
        let mut watch = Watch::default();
        let mut seen = Vec::new();
        for line in stdout.split(|&b| b == b'\n') {
            stream.feed(line, &mut record);
            watch.after_line(&record, &mut |item, _, code| {
                seen.push((item.as_str(), code))
            });
        }
        seen
    }

    #[test]
    fn a_recorded_codex_run_is_seen_item_by_item() {
        assert_eq!(
            seen(&CODEX, "testdata/codex-samples/cmd_fails/stdout.jsonl"),
            [
                ("command_started", None),
                ("command_finished", Some(3)),
                ("agent_message", None)
            ]
        );
    }

    #[test]
    fn an_mcp_tool_call_is_told_once_when_it_ended() {
        let lines = [
            r#"{"type":"item.started","item":{"id":"item_1","type":"mcp_tool_call","server":"notes","tool":"add","arguments":{"a":1},"result":null,"error":null,"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_1","type":"mcp_tool_call","server":"notes","tool":"add","arguments":{"a":1},"result":{"content":[]},"error":null,"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_2","type":"mcp_tool_call","server":"notes","tool":"boom","arguments":{},"result":null,"error":{"message":"no such tool"},"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"done"}}"#,
        ];
        let mut record = Transcript::default();
        let mut stream = CODEX.stream();
        let mut watch = Watch::default();
        let mut seen = Vec::new();
        for line in lines {
            stream.feed(line.as_bytes(), &mut record);
            watch.after_line(&record, &mut |item, text, _| {
                seen.push((item.as_str(), text.to_string()))
            });
        }
        assert_eq!(
            seen,
            [
                ("mcp_tool_call", "notes/add".to_string()),
                (
                    "mcp_tool_call",
                    "notes/boom (failed: no such tool)".to_string()
                ),
                ("agent_message", "done".to_string()),
            ]
        );
    }

    #[test]
    fn a_claude_mcp_tool_use_is_told_when_its_result_came() {
        let lines = [
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"mcp__notes__add","input":{"a":1}}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"3"}]}}"#,
        ];
        let mut record = Transcript::default();
        let mut stream = CLAUDE.stream();
        let mut watch = Watch::default();
        let mut seen = Vec::new();
        for line in lines {
            stream.feed(line.as_bytes(), &mut record);
            watch.after_line(&record, &mut |item, text, _| {
                seen.push((item.as_str(), text.to_string()))
            });
        }
        assert_eq!(seen, [("mcp_tool_call", "notes/add".to_string())]);
    }

    #[test]
    fn a_recorded_claude_run_is_seen_item_by_item() {
        let seen = seen(&CLAUDE, "testdata/claude/samples/success_bash/stdout.jsonl");
        let started = seen.iter().position(|s| s.0 == "command_started");
        let finished = seen.iter().position(|s| s.0 == "command_finished");
        assert!(
            started.is_some() && started < finished,
            "a command's start, then its end: {seen:?}"
        );
        assert_eq!(seen.last().map(|s| s.0), Some("agent_message"), "{seen:?}");
    }
}
