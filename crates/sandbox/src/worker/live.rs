//! What the worker's agent does, told while it runs (SPEC §19's `worker_item`
//! events): after each line of its event stream has been read into the run record
//! (`agent::Transcript`), what that line added to it: a command started or
//! finished, a file changed, a message. Read from the record, so it holds for
//! every agent kind.

use std::collections::VecDeque;

use crate::agent::Transcript;
use crate::events::ItemKind;

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
}

/// One thing the agent did: what kind of item, its text and a command's exit code.
pub(crate) type Seen<'a> = &'a mut dyn FnMut(ItemKind, &str, Option<i32>);

impl Watch {
    /// Tells `seen` what `record` holds that was not told yet.
    pub(crate) fn after_line(&mut self, record: &Transcript, seen: Seen) {
        let total = record.commands_dropped + record.commands.len();
        let new = total
            .saturating_sub(self.commands)
            .min(record.commands.len());
        self.commands = total;
        let first_new = record.commands.len() - new;
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

/// Whether the agent said the command ended.
fn ended(command: &crate::agent::CommandRecord) -> bool {
    command.exit_code.is_some() || command.status != "in_progress"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{Kind, claude::CLAUDE, codex::CODEX};

    /// What `task logs` shows of a recorded real run, line by line as it came.
    fn seen(kind: &dyn Kind, sample: &str) -> Vec<(&'static str, Option<i32>)> {
        let stdout = std::fs::read(crate::agent::kind::samples::at_top(sample)).unwrap();
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
