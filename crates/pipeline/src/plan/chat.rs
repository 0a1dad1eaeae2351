//! The plan conversation, `chat.jsonl` (SPEC §11): one line per message,
//! `{"at", "role": "user"|"meta", "text", "potential_conflicts"?}`: what the user
//! asked and what Meta understood (and warned of, for the web view to show). Appended like a task file (one `write` of a whole line), so the web
//! view and the CLI can share it; read from its end, since only the latest
//! messages go into a request.

use serde::{Deserialize, Serialize};

use super::super::{PipelineError, Workspace};
use agent_runner_core::fs::jsonl;
use agent_runner_core::timestamp::Timestamp;

/// How much of the file's end is read for the latest messages.
const TAIL: u64 = 1 << 20;

/// Who said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    User,
    Meta,
}

/// One message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChatMessage {
    pub(crate) at: String,
    pub(crate) role: Role,
    pub(crate) text: String,
    /// Meta's `potential_conflicts` of the edit, for the web view (requests send
    /// only the text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) potential_conflicts: Vec<serde_json::Value>,
}

/// Appends a message by `role` (secrets already masked by the caller).
pub(crate) fn append(ws: &Workspace, role: Role, text: &str) -> Result<(), PipelineError> {
    append_message(ws, role, text, Vec::new())
}

/// Appends Meta's reply: its understanding and potential conflicts (secrets
/// already masked by the caller).
pub(crate) fn append_reply(
    ws: &Workspace,
    text: &str,
    potential_conflicts: Vec<serde_json::Value>,
) -> Result<(), PipelineError> {
    append_message(ws, Role::Meta, text, potential_conflicts)
}

fn append_message(
    ws: &Workspace,
    role: Role,
    text: &str,
    potential_conflicts: Vec<serde_json::Value>,
) -> Result<(), PipelineError> {
    let message = ChatMessage {
        at: Timestamp::now().to_string(),
        role,
        text: text.to_string(),
        potential_conflicts,
    };
    let line = serde_json::to_vec(&message).unwrap_or_default();
    let path = ws.chat_path();
    jsonl::append_or_create(&path, &line).map_err(PipelineError::io("append to", path))
}

/// The last `n` messages, oldest first. Lines that do not parse are skipped; a
/// missing file is no conversation.
pub(crate) fn recent(ws: &Workspace, n: usize) -> Result<Vec<ChatMessage>, PipelineError> {
    let path = ws.chat_path();
    let bytes = match agent_runner_core::fs::read::tail(&path, TAIL) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(PipelineError::io("read", path)(e)),
    };
    let mut messages: Vec<ChatMessage> = jsonl::lines(&bytes)
        .filter_map(|(_, line, _)| serde_json::from_slice(line).ok())
        .collect();
    let skip = messages.len().saturating_sub(n);
    messages.drain(..skip);
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_appended_and_the_latest_read_back() {
        let (ws, base) = crate::store::workspace::scratch("chat");
        assert!(recent(&ws, 10).unwrap().is_empty());
        for n in 0..12 {
            append(
                &ws,
                if n % 2 == 0 { Role::User } else { Role::Meta },
                &format!("m{n}"),
            )
            .unwrap();
        }
        // Another writer's torn line is skipped.
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(ws.chat_path())
            .unwrap()
            .write_all(b"{\"at\":\"x\",\"ro")
            .unwrap();
        append(&ws, Role::User, "last").unwrap();
        let got = recent(&ws, 10).unwrap();
        let texts: Vec<&str> = got.iter().map(|m| m.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10", "m11", "last"
            ]
        );
        assert_eq!(got[0].role, Role::Meta);
        let line = std::fs::read_to_string(ws.chat_path()).unwrap();
        let first: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
        assert_eq!(first["role"], "user");
        assert_eq!(first["text"], "m0");
        assert!(first["at"].as_str().unwrap().ends_with('Z'));
        std::fs::remove_dir_all(base).unwrap();
    }
}
