//! The record of every connection: one line each in `.agent-runner/logs/<id>/egress.jsonl`
//! (created through the private directory, so nothing the worker left there is written
//! through), a progress line on stderr the first time a destination is denied, and a
//! bounded tally for the note and the result (`Summary`).

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use crate::events::{Event, Events};
use agent_runner_core::secret::Redactor;
use agent_runner_core::timestamp::Timestamp;

/// The host of a connection whose request named none (unreadable, or refused first).
pub const NO_HOST: &str = "-";
/// Destinations tallied one by one; the rest are counted together.
const MAX_DESTINATIONS: usize = 200;

/// One connection, as `egress.jsonl` has it (SPEC §17).
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub(crate) at: String,
    /// The host asked for (`-` when the request could not be read).
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) allowed: bool,
    /// The entry that allowed it, or why it was refused (or failed).
    pub(crate) reason: String,
    pub(crate) bytes_up: u64,
    pub(crate) bytes_down: u64,
    pub(crate) duration_ms: u64,
}

impl Record {
    /// A connection that began at `at`, with nothing carried yet.
    pub(crate) fn new(at: Timestamp, host: String, port: u16) -> Self {
        Record {
            at: at.to_string(),
            host,
            port,
            allowed: false,
            reason: String::new(),
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
        }
    }

    /// `host:port`, or `-` when no destination was read.
    fn destination(&self) -> String {
        if self.host == NO_HOST {
            NO_HOST.to_string()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Connections to one destination.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// `host:port`.
    pub destination: String,
    pub allowed: bool,
    pub connections: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// The latest reason (for a denied destination: why).
    pub reason: String,
    /// For a denied destination: the `runner.worker.allow` entry that would allow it.
    pub allow_entry: Option<String>,
}

/// What the proxy did during a task: the note's Egress section and the result's
/// `egress`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Connections allowed, and denied.
    pub allowed: u64,
    pub denied: u64,
    /// Allowed destinations first, then denied; each by name.
    pub destinations: Vec<Tally>,
    /// Connections to destinations beyond the first `MAX_DESTINATIONS`.
    pub untallied: u64,
    /// Why the log could not be written, if it could not.
    pub log_error: Option<String>,
}

/// Where records go; shared by the proxy's threads.
pub(crate) struct Journal {
    file: Mutex<Option<File>>,
    redactor: Redactor,
    state: Mutex<State>,
    /// The run's event log: every denied connection, as it is refused (SPEC §19).
    events: Events,
}

#[derive(Default)]
struct State {
    tallies: BTreeMap<(bool, String), Tally>,
    warned: HashSet<String>,
    summary: Summary,
}

impl Journal {
    /// A journal writing to `file` (None: tally only), masking `redactor`'s secrets
    /// (a worker could put a key in a host name).
    pub(crate) fn new(file: Option<File>, redactor: Redactor) -> Self {
        Journal {
            file: Mutex::new(file),
            redactor,
            state: Mutex::new(State::default()),
            events: Events::none(),
        }
    }

    /// The journal, also telling `events` of every denied connection.
    pub(crate) fn telling(self, events: Events) -> Self {
        Journal { events, ..self }
    }

    /// Records a finished (or refused) connection. `allow_entry`: for a denied
    /// destination, the entry that would allow it.
    pub(crate) fn record(&self, mut record: Record, took: Duration, allow_entry: Option<String>) {
        record.duration_ms = took.as_millis() as u64;
        record.host = self.redactor.redact(&record.host);
        record.reason = self.redactor.redact(&record.reason);
        let allow_entry = allow_entry.map(|e| self.redactor.redact(&e));
        self.append(&record);
        if !record.allowed {
            self.events.emit(Event::EgressDenied {
                host: record.host.clone(),
                port: record.port,
                reason: record.reason.clone(),
                allow: allow_entry.clone(),
            });
        }
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if !record.allowed
            && state.warned.len() < MAX_DESTINATIONS
            && state.warned.insert(record.destination())
        {
            match &allow_entry {
                Some(entry) => log::warn!(
                    "egress denied: {} ({}); to allow it, add `{entry}` to runner.worker.allow",
                    record.destination(),
                    record.reason
                ),
                None if record.host == NO_HOST => {
                    log::warn!("egress denied: a connection ({})", record.reason)
                }
                None => log::warn!(
                    "egress denied: {} ({})",
                    record.destination(),
                    record.reason
                ),
            }
        }
        let state = &mut *state;
        if record.allowed {
            state.summary.allowed += 1;
        } else {
            state.summary.denied += 1;
        }
        let key = (!record.allowed, record.destination());
        if !state.tallies.contains_key(&key) && state.tallies.len() >= MAX_DESTINATIONS {
            state.summary.untallied += 1;
            return;
        }
        let tally = state.tallies.entry(key).or_insert_with(|| Tally {
            destination: record.destination(),
            allowed: record.allowed,
            ..Tally::default()
        });
        tally.connections += 1;
        tally.bytes_up += record.bytes_up;
        tally.bytes_down += record.bytes_down;
        tally.reason = record.reason;
        if allow_entry.is_some() {
            tally.allow_entry = allow_entry;
        }
    }

    /// One whole line per record, in one write (readers may follow the file).
    fn append(&self, record: &Record) {
        let Ok(mut file) = self.file.lock() else {
            return;
        };
        let Some(out) = file.as_mut() else {
            return;
        };
        let mut line = serde_json::to_vec(record).unwrap_or_default();
        line.push(b'\n');
        if let Err(e) = out.write_all(&line) {
            log::warn!("cannot write the egress log: {e}");
            if let Ok(mut state) = self.state.lock() {
                state.summary.log_error = Some(e.to_string());
            }
            *file = None;
        }
    }

    /// The tally so far.
    pub(crate) fn summary(&self) -> Summary {
        let Ok(state) = self.state.lock() else {
            return Summary::default();
        };
        let mut summary = state.summary.clone();
        summary.destinations = state.tallies.values().cloned().collect();
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_core::secret::Secret;

    fn record(host: &str, port: u16, allowed: bool, up: u64) -> Record {
        Record {
            allowed,
            bytes_up: up,
            bytes_down: up * 2,
            reason: if allowed {
                "allow x".into()
            } else {
                "not in runner.worker.allow".into()
            },
            ..Record::new(Timestamp::now(), host.into(), port)
        }
    }

    #[test]
    fn lines_are_whole_json_records_and_the_tally_adds_up() {
        let path = std::env::temp_dir().join(format!("egress-journal-{}", uuid::Uuid::new_v4()));
        let journal = Journal::new(
            Some(File::create(&path).unwrap()),
            Redactor::new(&[Secret::new("sk-secret-123".into())]),
        );
        journal.record(
            record("api.openai.com", 443, true, 10),
            Duration::from_millis(5),
            None,
        );
        journal.record(
            record("api.openai.com", 443, true, 5),
            Duration::from_millis(5),
            None,
        );
        journal.record(
            record("github.com", 443, false, 0),
            Duration::ZERO,
            Some("github.com".into()),
        );
        journal.record(
            record("sk-secret-123.evil.net", 443, false, 0),
            Duration::ZERO,
            Some("sk-secret-123.evil.net".into()),
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0]["host"], "api.openai.com");
        assert_eq!(lines[0]["port"], 443);
        assert_eq!(lines[0]["allowed"], true);
        assert_eq!(lines[0]["duration_ms"], 5);
        assert_eq!(lines[0].as_object().unwrap().len(), 8, "{}", lines[0]);
        let first = text.lines().next().unwrap();
        assert!(
            first.starts_with("{\"at\":\"") && first.contains("\"host\":\"api.openai.com\",\"port\":443,\"allowed\":true,\"reason\":\"allow x\",\"bytes_up\":10,\"bytes_down\":20,\"duration_ms\":5}"),
            "{first}"
        );
        assert!(!text.contains("sk-secret-123"), "{text}");
        let summary = journal.summary();
        assert_eq!((summary.allowed, summary.denied), (2, 2));
        let openai = &summary.destinations[0];
        assert_eq!(
            (
                openai.destination.as_str(),
                openai.connections,
                openai.bytes_up,
                openai.bytes_down
            ),
            ("api.openai.com:443", 2, 15, 30)
        );
        let github = summary
            .destinations
            .iter()
            .find(|t| t.destination == "github.com:443")
            .unwrap();
        assert!(!github.allowed);
        assert_eq!(github.allow_entry.as_deref(), Some("github.com"));
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn the_tally_stays_bounded() {
        let journal = Journal::new(None, Redactor::default());
        for n in 0..(MAX_DESTINATIONS + 50) {
            journal.record(
                record(&format!("h{n}.example.com"), 443, false, 0),
                Duration::ZERO,
                None,
            );
        }
        let summary = journal.summary();
        assert_eq!(summary.destinations.len(), MAX_DESTINATIONS);
        assert_eq!(summary.untallied, 50);
        assert_eq!(summary.denied, (MAX_DESTINATIONS + 50) as u64);
    }
}
