//! One line of `egress.jsonl` (SPEC §17): a connection, or the sum of several to
//! one destination (`repeats`).

use serde::Serialize;

use agent_runner_core::timestamp::Timestamp;

/// The host of a connection whose request named none (unreadable, or refused first).
pub const NO_HOST: &str = "-";

/// One connection, as `egress.jsonl` has it (SPEC §17), or the sum of several to
/// one destination (`connections`, `until`; see `repeats`).
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub at: String,
    /// The host asked for (`-` when the request could not be read).
    pub host: String,
    pub port: u16,
    pub allowed: bool,
    /// The entry that allowed it, or why it was refused (or failed).
    pub reason: String,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub duration_ms: u64,
    /// A sum: the connections it stands for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<u64>,
    /// A sum: when its last connection began (`at`: its first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

impl Record {
    /// A connection that began at `at`, with nothing carried yet.
    pub fn new(at: Timestamp, host: String, port: u16) -> Self {
        Record {
            at: at.to_string(),
            host,
            port,
            allowed: false,
            reason: String::new(),
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
            connections: None,
            until: None,
        }
    }

    /// `host:port`, or `-` when no destination was read.
    pub fn destination(&self) -> String {
        if self.host == NO_HOST {
            NO_HOST.to_string()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}
