//! The plan conversation, `chat.jsonl` (SPEC §11): one line per message,
//! `{"at", "role": "user"|"meta", "text", "potential_conflicts"?}`: what the user
//! asked and what Meta understood (and warned of, for the web view to show). Appended like a task file (one `write` of a whole line), so the web
//! view and the CLI can share it; read from its end, since only the latest
//! messages go into a request.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;

use serde::{Deserialize, Serialize};

use super::super::{PipelineError, Workspace, jsonl};
use crate::timestamp::Timestamp;

/// How much of the file's end is read for the latest messages.
const TAIL: u64 = 1 << 20;

/// Who said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Meta,
}

/// One message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub at: String,
    pub role: Role,
    pub text: String,
    /// Meta's `potential_conflicts` of the edit, for the web view (requests send
    /// only the text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub potential_conflicts: Vec<serde_json::Value>,
}

/// `chat.jsonl` of `ws`.
pub fn path(ws: &Workspace) -> std::path::PathBuf {
    ws.dir.join("chat.jsonl")
}

/// Appends a message by `role` (secrets already masked by the caller).
pub fn append(ws: &Workspace, role: Role, text: &str) -> Result<(), PipelineError> {
    append_message(ws, role, text, Vec::new())
}

/// Appends Meta's reply: its understanding and potential conflicts (secrets
/// already masked by the caller).
pub fn append_reply(
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
    let path = path(ws);
    let result = match jsonl::append(&path, &line) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match jsonl::create(&path, &line) {
            // Someone else created it just now.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => jsonl::append(&path, &line),
            other => other,
        },
        other => other,
    };
    result.map_err(PipelineError::io("append to", path))
}

/// The last `n` messages, oldest first. Lines that do not parse are skipped; a
/// missing file is no conversation.
pub fn recent(ws: &Workspace, n: usize) -> Result<Vec<ChatMessage>, PipelineError> {
    let path = path(ws);
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(PipelineError::io("open", path)(e)),
    };
    let read = |file: &mut std::fs::File| -> std::io::Result<Vec<u8>> {
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        let start = meta.len().saturating_sub(TAIL);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::new();
        file.take(TAIL).read_to_end(&mut bytes)?;
        if start > 0 {
            // The first line is likely cut: start after it.
            let cut = bytes
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |i| i + 1);
            bytes.drain(..cut);
        }
        Ok(bytes)
    };
    let bytes = read(&mut file).map_err(PipelineError::io("read", &path))?;
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
        let (ws, base) = crate::pipeline::workspace::scratch("chat");
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
            .open(path(&ws))
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
        let line = std::fs::read_to_string(path(&ws)).unwrap();
        let first: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
        assert_eq!(first["role"], "user");
        assert_eq!(first["text"], "m0");
        assert!(first["at"].as_str().unwrap().ends_with('Z'));
        std::fs::remove_dir_all(base).unwrap();
    }
}
