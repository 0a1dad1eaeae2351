//! The record of every connection: `.agent-runner/logs/<id>/egress.jsonl` (created
//! through the private directory, so nothing the worker left there is written
//! through), a progress line on stderr the first time a destination is denied, an
//! event for each denied one, and an exact, bounded tally for the note and the
//! result (`Summary`).
//!
//! The log and the events are bounded: after the first lines of a destination its
//! connections are summed (`repeats`), and the file stops at `MAX_LOG_BYTES` with a
//! last line `{"at","truncated":true,"limit_bytes"}`. The tally counts every
//! connection however the log went.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::sync::Mutex;
use std::time::Duration;

pub use super::record::{NO_HOST, Record};
use super::repeats::Repeats;
use agent_runner_core::fs::jsonl::Capped;
use agent_runner_core::secret::Redactor;
use agent_runner_core::timestamp::Timestamp;
use agent_runner_settings::events::{Event, Events};

/// Destinations tallied one by one; the rest are counted together.
const MAX_DESTINATIONS: usize = 200;
/// Largest `egress.jsonl` (its `truncated` line aside), unless the proxy's
/// settings say otherwise.
pub const MAX_LOG_BYTES: u64 = 4 << 20;
/// Room for the `truncated` line beyond `MAX_LOG_BYTES`.
const TRUNCATED_ROOM: u64 = 256;

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
    /// For a denied destination: the allow entry that would allow it (in the list
    /// `policy::list_in` finds in `reason`).
    pub allow_entry: Option<String>,
    /// A denied host the agent asks for in the background (`Kind::background_hosts`):
    /// refusing it fails nothing, so it is no gap in the allow list.
    pub background: bool,
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
    /// The log reached `MAX_LOG_BYTES`: later connections are only counted here.
    pub log_truncated: bool,
}

/// Where records go; shared by the proxy's threads.
pub struct Journal {
    redactor: Redactor,
    state: Mutex<State>,
    /// The run's event log: denied connections, as they are refused (SPEC §19).
    events: Events,
    /// The agent's background hosts (`Kind::background_hosts`).
    background: Vec<String>,
}

#[derive(Default)]
struct State {
    tallies: BTreeMap<(bool, String), Tally>,
    warned: HashSet<String>,
    summary: Summary,
    repeats: Repeats,
    /// `finish` has drained `repeats`: a connection that ends later gets its own line.
    finished: bool,
    log: Option<Capped>,
    /// The log's bound.
    max_log_bytes: u64,
}

impl Journal {
    /// A journal writing to `file` (None: tally only), masking `redactor`'s secrets
    /// (a worker could put a key in a host name).
    pub(crate) fn new(file: Option<File>, redactor: Redactor) -> Self {
        Journal {
            redactor,
            state: Mutex::new(State {
                log: file.map(Capped::new),
                max_log_bytes: MAX_LOG_BYTES,
                ..State::default()
            }),
            events: Events::none(),
            background: Vec::new(),
        }
    }

    /// The journal, telling the denials of `hosts` (the agent's background
    /// requests) apart: no warning, and no allow entry suggested.
    pub(crate) fn quiet_about(self, hosts: Vec<String>) -> Self {
        Journal {
            background: hosts,
            ..self
        }
    }

    /// The journal, its log bounded to `max_log_bytes`.
    pub fn bounded(self, max_log_bytes: u64) -> Self {
        if let Ok(mut state) = self.state.lock() {
            state.max_log_bytes = max_log_bytes;
        }
        self
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
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let state = &mut *state;
        let background = !record.allowed && self.background.contains(&record.host);
        if !record.allowed
            && state.warned.len() < MAX_DESTINATIONS
            && state.warned.insert(record.destination())
        {
            match &allow_entry {
                Some(_) if background => log::info!(
                    "egress denied: {} ({}): the agent's own background request (an update check or feature flags); refusing it fails nothing",
                    record.destination(),
                    record.reason
                ),
                Some(entry) => log::warn!(
                    "egress denied: {} ({}); to allow it, add `{entry}` to {}",
                    record.destination(),
                    record.reason,
                    super::policy::list_in(&record.reason)
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
        state.tally(&record, &allow_entry, background);
        let line = match state.finished {
            true => Some(record),
            false => state.repeats.take(record),
        };
        if let Some(line) = line {
            state.write(&line);
            self.tell(line, allow_entry);
        }
    }

    /// Writes the sums `repeats` still holds: the proxy has stopped.
    pub fn finish(&self) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.finished = true;
        for line in state.repeats.drain() {
            state.write(&line);
            let allow_entry = state
                .tallies
                .get(&(true, line.destination()))
                .and_then(|t| t.allow_entry.clone());
            self.tell(line, allow_entry);
        }
    }

    /// The event of a line about denied connections.
    fn tell(&self, line: Record, allow_entry: Option<String>) {
        if !line.allowed {
            let list = super::policy::list_in(&line.reason);
            self.events.emit(Event::EgressDenied {
                host: line.host,
                port: line.port,
                list: (list != "runner.worker.allow").then(|| list.to_string()),
                reason: line.reason,
                allow: allow_entry,
                connections: line.connections,
            });
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

impl State {
    /// Counts `record` (one connection) in the summary and its destination's tally.
    fn tally(&mut self, record: &Record, allow_entry: &Option<String>, background: bool) {
        if record.allowed {
            self.summary.allowed += 1;
        } else {
            self.summary.denied += 1;
        }
        let key = (!record.allowed, record.destination());
        if !self.tallies.contains_key(&key) && self.tallies.len() >= MAX_DESTINATIONS {
            self.summary.untallied += 1;
            return;
        }
        let tally = self.tallies.entry(key).or_insert_with(|| Tally {
            destination: record.destination(),
            allowed: record.allowed,
            background,
            ..Tally::default()
        });
        tally.connections += 1;
        tally.bytes_up += record.bytes_up;
        tally.bytes_down += record.bytes_down;
        tally.reason = record.reason.clone();
        if allow_entry.is_some() {
            tally.allow_entry = allow_entry.clone();
        }
    }

    /// One whole line in one write (readers may follow the file), unless the log
    /// is full: then its last line says so.
    fn write(&mut self, record: &Record) {
        let Some(log) = self.log.as_mut() else {
            return;
        };
        let mut line = serde_json::to_vec(record).unwrap_or_default();
        line.push(b'\n');
        let limit = self.max_log_bytes;
        let written = log.append(&line, limit).and_then(|written| {
            if written {
                return Ok(());
            }
            self.summary.log_truncated = true;
            let mut last = serde_json::to_vec(&serde_json::json!({
                "at": Timestamp::now().to_string(),
                "truncated": true,
                "limit_bytes": limit,
            }))
            .unwrap_or_default();
            last.push(b'\n');
            log.append(&last, limit + TRUNCATED_ROOM).map(drop)
        });
        if let Err(e) = &written {
            log::warn!("cannot write the egress log: {e}");
            self.summary.log_error = Some(e.to_string());
        }
        if written.is_err() || self.summary.log_truncated {
            self.log = None;
        }
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

    /// Lines of an egress log.
    fn lines(path: &std::path::Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn a_flood_of_denied_connections_makes_a_few_lines_and_exact_counts() {
        let top = agent_runner_core::fs::testing::scratch("egress-flood");
        let path = top.join("egress.jsonl");
        let logs = agent_runner_core::fs::Dir::open(&top).unwrap();
        let events = Events::create(&logs, Redactor::default()).unwrap();
        let journal =
            Journal::new(Some(File::create(&path).unwrap()), Redactor::default()).telling(events);
        for n in 0..20_000u64 {
            journal.record(
                record("github.com", 443, false, n % 7),
                Duration::ZERO,
                Some("github.com".into()),
            );
        }
        journal.record(
            record("api.openai.com", 443, true, 100),
            Duration::ZERO,
            None,
        );
        journal.finish();
        let summary = journal.summary();
        assert_eq!((summary.allowed, summary.denied), (1, 20_000));
        assert_eq!(summary.destinations.len(), 2);
        assert!(!summary.log_truncated);
        let log = lines(&path);
        assert!(log.len() < 30, "{} lines", log.len());
        let denied: Vec<&serde_json::Value> =
            log.iter().filter(|l| l["allowed"] == false).collect();
        let count = |l: &&serde_json::Value| l["connections"].as_u64().unwrap_or(1);
        assert_eq!(denied.iter().map(count).sum::<u64>(), 20_000);
        let up: u64 = denied.iter().map(|l| l["bytes_up"].as_u64().unwrap()).sum();
        assert_eq!(up, (0..20_000u64).map(|n| n % 7).sum::<u64>());
        let sum = denied.last().unwrap();
        assert!(
            sum["until"].is_string() && sum["host"] == "github.com",
            "{sum}"
        );
        // Events: the same lines, each sum one event with its count.
        let events = lines(&top.join(agent_runner_settings::events::FILE));
        let told: u64 = events
            .iter()
            .map(|e| {
                assert_eq!(e["kind"], "egress_denied");
                assert_eq!(e["allow"], "github.com");
                e["connections"].as_u64().unwrap_or(1)
            })
            .sum();
        assert_eq!((events.len(), told), (denied.len(), 20_000));
        // A connection that ends after the proxy stopped still gets its line.
        journal.record(record("github.com", 443, false, 0), Duration::ZERO, None);
        assert_eq!(lines(&path).len(), log.len() + 1);
        std::fs::remove_dir_all(top).unwrap();
    }

    #[test]
    fn the_log_stops_at_its_bound_with_a_last_line_saying_so() {
        let top = agent_runner_core::fs::testing::scratch("egress-cap");
        let path = top.join("egress.jsonl");
        let limit = 16 * 1024;
        let journal =
            Journal::new(Some(File::create(&path).unwrap()), Redactor::default()).bounded(limit);
        let total = 30_000u64;
        for n in 0..total {
            journal.record(
                record(&format!("h{n}.example"), 443, false, 1),
                Duration::ZERO,
                None,
            );
        }
        journal.finish();
        let summary = journal.summary();
        assert_eq!(summary.denied, total, "counted past the bound");
        assert!(summary.log_truncated);
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(
            size <= limit + TRUNCATED_ROOM && size > limit - 1024,
            "{size}"
        );
        let log = lines(&path);
        let last = log.last().unwrap();
        assert_eq!(last["truncated"], true, "{last}");
        assert_eq!(last["limit_bytes"], limit);
        assert_eq!(log.iter().filter(|l| l["truncated"] == true).count(), 1);
        std::fs::remove_dir_all(top).unwrap();
    }

    /// The agent's background hosts are tallied as such: no gap in the allow list.
    #[test]
    fn background_denials_are_told_apart() {
        let journal =
            Journal::new(None, Redactor::default()).quiet_about(vec!["ab.chatgpt.com".into()]);
        for host in ["ab.chatgpt.com", "needed.example"] {
            journal.record(
                record(host, 443, false, 0),
                Duration::ZERO,
                Some(host.into()),
            );
        }
        let summary = journal.summary();
        let background: Vec<(&str, bool)> = summary
            .destinations
            .iter()
            .map(|t| (t.destination.as_str(), t.background))
            .collect();
        assert_eq!(
            background,
            [("ab.chatgpt.com:443", true), ("needed.example:443", false)]
        );
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
