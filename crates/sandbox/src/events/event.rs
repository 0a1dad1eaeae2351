//! One line of `events.jsonl`: when, and what happened. Newer writers may add kinds
//! and fields; a reader keeps what it knows and shows the rest as `Unknown`.

use serde::{Deserialize, Serialize};

/// The kinds of events the worker can cause in any number, which a full log stops
/// writing first (`Event::is_from_worker`).
pub(crate) const WORKER_EVENTS: &str = "worker_item, egress_denied";

/// A line: the time (RFC 3339 UTC) and the event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub at: String,
    #[serde(flatten)]
    pub(crate) event: Event,
}

/// Whether a worker or test run begins or has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Started,
    Finished,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A state change of the task (SPEC §4); also a run's start (`from` empty).
    State {
        #[serde(default)]
        from: String,
        to: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
    },
    /// A Meta call, once answered (or given up).
    Meta {
        #[serde(rename = "type")]
        call: String,
        duration_ms: u64,
        #[serde(default)]
        requests: u32,
        /// Token usage when the reply said (SPEC §15).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<serde_json::Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Something the worker did, from its event stream while it runs.
    WorkerItem {
        run: u32,
        /// `command_started`, `command_finished`, `file_changed`, `agent_message`.
        item: String,
        /// The command, the file (with its kind of change), or the message: short.
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
    },
    /// A worker run begins or has ended.
    WorkerRun {
        run: u32,
        phase: Phase,
        /// Continues the worker's earlier session (a resumed task).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resumed_session: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    /// A test run begins or has ended.
    Test {
        run: u32,
        phase: Phase,
        command: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        passed: Option<bool>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        timed_out: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
    /// The egress proxy refused a connection (SPEC §17).
    EgressDenied {
        host: String,
        port: u16,
        reason: String,
        /// The `runner.worker.allow` entry that would allow it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        allow: Option<String>,
        /// When present, this many refused connections to the destination since its
        /// last event (after its first ones, repeats are summed: `egress::repeats`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        connections: Option<u64>,
    },
    /// A budget limit reached (SPEC §15): which, and what was used of it.
    Budget {
        #[serde(default)]
        limit: String,
        #[serde(default)]
        message: String,
    },
    /// The log reached a bound (`writer::MAX_BYTES`): the kinds in `dropped` (or
    /// `all`) are no longer written.
    Truncated {
        #[serde(default)]
        limit_bytes: u64,
        #[serde(default)]
        dropped: String,
    },
    /// A kind this version does not know.
    #[serde(other)]
    Unknown,
}

impl Event {
    /// Applies `f` to every text field (masking and cutting before a write).
    pub(crate) fn map_text(&mut self, f: &dyn Fn(&str) -> String) {
        let mut apply = |s: &mut String| *s = f(s);
        match self {
            Event::State { from, to, reason } => {
                apply(from);
                apply(to);
                apply(reason);
            }
            Event::Meta { call, error, .. } => {
                apply(call);
                error.iter_mut().for_each(apply);
            }
            Event::WorkerItem { item, text, .. } => {
                apply(item);
                apply(text);
            }
            Event::WorkerRun {
                outcome, summary, ..
            } => {
                outcome.iter_mut().for_each(&mut apply);
                summary.iter_mut().for_each(apply);
            }
            Event::Test { command, .. } => apply(command),
            Event::EgressDenied {
                host,
                reason,
                allow,
                ..
            } => {
                apply(host);
                apply(reason);
                allow.iter_mut().for_each(apply);
            }
            Event::Budget { limit, message } => {
                apply(limit);
                apply(message);
            }
            Event::Truncated { dropped, .. } => apply(dropped),
            Event::Unknown => {}
        }
    }

    /// Whether the worker can cause this kind of event in any number (`WORKER_EVENTS`).
    pub(crate) fn is_from_worker(&self) -> bool {
        matches!(self, Event::WorkerItem { .. } | Event::EgressDenied { .. })
    }

    /// Whether the event ends the run: a terminal state.
    #[cfg(test)]
    pub(crate) fn is_end(&self) -> bool {
        matches!(self, Event::State { to, .. } if to == "COMPLETE" || to == "FAILED")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_and_unknown_kinds_are_kept_apart() {
        let record = Record {
            at: "2026-01-02T03:04:05.678Z".into(),
            event: Event::WorkerItem {
                run: 2,
                item: "command_finished".into(),
                text: "cargo test".into(),
                exit_code: Some(101),
            },
        };
        let json = serde_json::to_string(&record).unwrap();
        assert_eq!(
            json,
            r#"{"at":"2026-01-02T03:04:05.678Z","kind":"worker_item","run":2,"item":"command_finished","text":"cargo test","exit_code":101}"#
        );
        assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), record);
        let later: Record =
            serde_json::from_str(r#"{"at":"x","kind":"from_the_future","n":1}"#).unwrap();
        assert_eq!(later.event, Event::Unknown);
    }
}
