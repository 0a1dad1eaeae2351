//! One line of `events.jsonl`: when, and what happened. Newer writers may add kinds
//! and fields; a reader keeps what it knows and shows the rest as `Unknown`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::named::{BudgetLimit, CallType, Dropped, Named};
use crate::agent::RunOutcome;
use crate::task_state::TaskState;

pub use super::named::WORKER_EVENTS;

/// A line: the time (RFC 3339 UTC) and the event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub at: String,
    #[serde(flatten)]
    pub event: Event,
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
    /// A state change of the task (SPEC §4); also a run's start (no `from`,
    /// written `""`).
    State {
        #[serde(default, with = "from_state")]
        from: Option<TaskState>,
        to: TaskState,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
    },
    /// A Meta call, once answered (or given up).
    Meta {
        #[serde(rename = "type")]
        call: Named<CallType>,
        duration_ms: u64,
        #[serde(default)]
        requests: u32,
        /// Token usage when the reply said (SPEC §15).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<CallTokens>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Something the worker did, from its event stream while it runs.
    WorkerItem {
        run: u32,
        item: ItemKind,
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
        outcome: Option<Named<RunOutcome>>,
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
        /// The allow entry that would allow it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        allow: Option<String>,
        /// The list `allow` goes in: `task.setup.allow` for a denial during setup;
        /// absent: `runner.worker.allow`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        list: Option<String>,
        /// When present, this many refused connections to the destination since its
        /// last event (after its first ones, repeats are summed: `egress::repeats`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        connections: Option<u64>,
    },
    /// A budget limit reached (SPEC §15): which, and what was used of it.
    Budget {
        #[serde(default)]
        limit: Named<BudgetLimit>,
        #[serde(default)]
        message: String,
    },
    /// The log reached a bound (`writer::MAX_BYTES`): the kinds in `dropped` (or
    /// `all`) are no longer written.
    Truncated {
        #[serde(default)]
        limit_bytes: u64,
        #[serde(default)]
        dropped: Named<Dropped>,
    },
    /// A kind this version does not know.
    #[serde(other)]
    Unknown,
}

/// What a worker item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    CommandStarted,
    CommandFinished,
    /// The text is the file, with its kind of change.
    FileChanged,
    AgentMessage,
    /// A call to a tool of an MCP server, once it ended (SPEC §28): the text is
    /// `server/tool`, with how it failed.
    McpToolCall,
    /// A kind this version does not know (a newer writer's).
    #[serde(other)]
    Unknown,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemKind::CommandStarted => "command_started",
            ItemKind::CommandFinished => "command_finished",
            ItemKind::FileChanged => "file_changed",
            ItemKind::AgentMessage => "agent_message",
            ItemKind::McpToolCall => "mcp_tool_call",
            ItemKind::Unknown => "unknown",
        }
    }
}

/// A Meta call's tokens (SPEC §15), when its provider reported them. The fields
/// are in the order the format has always had them (alphabetical).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallTokens {
    #[serde(default)]
    pub cached_input_tokens: u64,
    #[serde(default, alias = "prompt_tokens")]
    pub input_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, alias = "completion_tokens")]
    pub output_tokens: u64,
}

/// `from` of a state change: a state, or `""` for none (a run's start).
mod from_state {
    use super::*;

    pub(super) fn serialize<S: Serializer>(
        from: &Option<TaskState>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(from.map_or("", TaskState::as_str))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<TaskState>, D::Error> {
        let name = String::deserialize(deserializer)?;
        if name.is_empty() {
            return Ok(None);
        }
        TaskState::deserialize(serde::de::value::StrDeserializer::<D::Error>::new(&name)).map(Some)
    }
}

impl Event {
    /// Applies `f` to every text field (masking and cutting before a write).
    pub fn map_text(&mut self, f: &dyn Fn(&str) -> String) {
        let apply = |s: &mut String| *s = f(s);
        match self {
            Event::State { reason, .. } => apply(reason),
            Event::Meta { call, error, .. } => {
                call.map_text(f);
                error.iter_mut().for_each(apply);
            }
            Event::WorkerItem { text, .. } => apply(text),
            Event::WorkerRun {
                outcome, summary, ..
            } => {
                outcome.iter_mut().for_each(|o| o.map_text(f));
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
                limit.map_text(f);
                apply(message);
            }
            Event::Truncated { dropped, .. } => dropped.map_text(f),
            Event::Unknown => {}
        }
    }

    /// Whether the worker can cause this kind of event in any number (`WORKER_EVENTS`).
    pub fn is_from_worker(&self) -> bool {
        matches!(self, Event::WorkerItem { .. } | Event::EgressDenied { .. })
    }

    /// Whether the event ends the run: a terminal state.
    #[cfg(test)]
    pub fn is_end(&self) -> bool {
        matches!(self, Event::State { to, .. } if to.is_terminal())
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
                item: ItemKind::CommandFinished,
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

    #[test]
    fn typed_fields_are_written_as_the_format_always_had_them() {
        let line = |event| {
            serde_json::to_string(&Record {
                at: "t".into(),
                event,
            })
            .unwrap()
        };
        let start = Event::State {
            from: None,
            to: TaskState::Pending,
            reason: "started".into(),
        };
        let start_line = r#"{"at":"t","kind":"state","from":"","to":"PENDING","reason":"started"}"#;
        assert_eq!(line(start.clone()), start_line);
        let change = Event::State {
            from: Some(TaskState::Running),
            to: TaskState::Validating,
            reason: String::new(),
        };
        let change_line = r#"{"at":"t","kind":"state","from":"RUNNING","to":"VALIDATING"}"#;
        assert_eq!(line(change.clone()), change_line);
        let meta = Event::Meta {
            call: CallType::NextAction.into(),
            duration_ms: 5,
            requests: 1,
            usage: Some(CallTokens {
                cached_input_tokens: 2,
                input_tokens: 10,
                model: Some("m".into()),
                output_tokens: 3,
            }),
            error: None,
        };
        let meta_line = r#"{"at":"t","kind":"meta","type":"next_action","duration_ms":5,"requests":1,"usage":{"cached_input_tokens":2,"input_tokens":10,"model":"m","output_tokens":3}}"#;
        assert_eq!(line(meta.clone()), meta_line);
        for (text, event) in [
            (start_line, start),
            (change_line, change),
            (meta_line, meta),
        ] {
            assert_eq!(serde_json::from_str::<Record>(text).unwrap().event, event);
        }
        // A state this version does not know is no state: the line is skipped.
        assert!(
            serde_json::from_str::<Record>(r#"{"at":"t","kind":"state","from":"","to":"PAUSED"}"#)
                .is_err()
        );
        let item: Record = serde_json::from_str(
            r#"{"at":"t","kind":"worker_item","run":1,"item":"web_search","text":"x"}"#,
        )
        .unwrap();
        assert!(matches!(
            item.event,
            Event::WorkerItem {
                item: ItemKind::Unknown,
                ..
            }
        ));
    }

    /// The typed fields write the texts they always wrote, read back as the same
    /// type, and a text a newer writer chose reads and writes back unchanged.
    #[test]
    fn typed_fields_round_trip_as_their_texts() {
        let lines = [
            (
                Event::Meta {
                    call: CallType::BuildTaskConfig.into(),
                    duration_ms: 1,
                    requests: 1,
                    usage: None,
                    error: None,
                },
                r#"{"at":"t","kind":"meta","type":"build_task_config","duration_ms":1,"requests":1}"#,
            ),
            (
                Event::WorkerRun {
                    run: 2,
                    phase: Phase::Finished,
                    resumed_session: false,
                    outcome: Some(RunOutcome::TimedOut.into()),
                    exit_code: None,
                    duration_ms: Some(3),
                    summary: Some("s".into()),
                },
                r#"{"at":"t","kind":"worker_run","run":2,"phase":"finished","outcome":"timed_out","duration_ms":3,"summary":"s"}"#,
            ),
            (
                Event::Budget {
                    limit: BudgetLimit::MaxCostUsd.into(),
                    message: "m".into(),
                },
                r#"{"at":"t","kind":"budget","limit":"max_cost_usd","message":"m"}"#,
            ),
            (
                Event::Truncated {
                    limit_bytes: 9,
                    dropped: Dropped::WorkerEvents.into(),
                },
                r#"{"at":"t","kind":"truncated","limit_bytes":9,"dropped":"worker_item, egress_denied"}"#,
            ),
            (
                Event::Truncated {
                    limit_bytes: 9,
                    dropped: Dropped::All.into(),
                },
                r#"{"at":"t","kind":"truncated","limit_bytes":9,"dropped":"all"}"#,
            ),
            (
                Event::Budget {
                    limit: Named::Other("max_steps".into()),
                    message: String::new(),
                },
                r#"{"at":"t","kind":"budget","limit":"max_steps","message":""}"#,
            ),
        ];
        for (event, text) in lines {
            let record = Record {
                at: "t".into(),
                event: event.clone(),
            };
            assert_eq!(serde_json::to_string(&record).unwrap(), text);
            assert_eq!(serde_json::from_str::<Record>(text).unwrap().event, event);
        }
        // Every name reads back as itself.
        for call in <CallType as super::super::named::Name>::ALL {
            let text = format!(
                r#"{{"at":"t","kind":"meta","type":"{}","duration_ms":0}}"#,
                super::super::named::Name::as_str(*call)
            );
            match serde_json::from_str::<Record>(&text).unwrap().event {
                Event::Meta { call: read, .. } => assert_eq!(read, Named::Known(*call)),
                other => panic!("{other:?}"),
            }
        }
        // An old line without the field reads as the empty text it meant.
        let old: Record = serde_json::from_str(r#"{"at":"t","kind":"truncated"}"#).unwrap();
        assert_eq!(
            old.event,
            Event::Truncated {
                limit_bytes: 0,
                dropped: Named::Other(String::new())
            }
        );
    }
}
