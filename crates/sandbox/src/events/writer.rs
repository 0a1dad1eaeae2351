//! `Events`: the handle a run writes its events through. Cheap to clone and to share
//! between threads (the state machine, the sandbox's output reader, the egress
//! proxy). Every text is masked before it is cut (SPEC §10), every line is bounded,
//! and a line is one `write` on an `O_APPEND` file, unbuffered: a reader sees an
//! event as soon as it happened. Writing is best effort: a failure is logged once
//! and the run goes on without its event log.

use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Mutex};

use super::{Event, FILE, Record};
use agent_runner_core::fs::Dir;
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::cut;
use agent_runner_core::timestamp::Timestamp;

/// Longest text field kept (a command, a message, a reason), in bytes.
pub(crate) const MAX_TEXT: usize = 400;
/// Longest line written, in bytes; longer ones are written with shorter texts.
pub(crate) const MAX_LINE: usize = 4096;
/// What texts are cut to when a line would still be longer than `MAX_LINE`.
const SHORT_TEXT: usize = 64;

/// Where a run's events go (or nowhere: `Events::none`).
#[derive(Clone, Default)]
pub struct Events(Option<Arc<Sink>>);

struct Sink {
    file: Mutex<Option<File>>,
    redactor: Redactor,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Events(on)"
        } else {
            "Events(off)"
        })
    }
}

impl Events {
    /// Events that go nowhere (unit tests, commands that run no task).
    pub fn none() -> Events {
        Events(None)
    }

    /// A new `events.jsonl` in `logs` (an earlier run's is replaced), masking
    /// `redactor`'s secrets.
    pub fn create(logs: &Dir, redactor: Redactor) -> std::io::Result<Events> {
        Ok(Events::to(logs.create(FILE)?, redactor))
    }

    /// `events.jsonl` in `logs`, continued (a resumed task keeps its earlier events).
    pub fn append(logs: &Dir, redactor: Redactor) -> std::io::Result<Events> {
        Ok(Events::to(logs.append(FILE)?, redactor))
    }

    fn to(file: File, redactor: Redactor) -> Events {
        Events(Some(Arc::new(Sink {
            file: Mutex::new(Some(file)),
            redactor,
        })))
    }

    /// Writes `event`, stamped now.
    pub fn emit(&self, event: Event) {
        let Some(sink) = &self.0 else { return };
        let Some(line) = sink.line(event) else { return };
        let Ok(mut file) = sink.file.lock() else {
            return;
        };
        let Some(out) = file.as_mut() else { return };
        // One write of the whole line: O_APPEND keeps lines whole, and a line this
        // short is written at once to a regular file.
        let why = match out.write(&line) {
            Ok(n) if n == line.len() => return,
            Ok(n) => format!("short write: {n} of {} bytes", line.len()),
            Err(e) => e.to_string(),
        };
        log::warn!("cannot write the event log ({why}); events are no longer recorded");
        *file = None;
    }

    /// A state change (`from` empty: the run starts in `to`).
    pub fn state(&self, from: &str, to: &str, reason: &str) {
        self.emit(Event::State {
            from: from.into(),
            to: to.into(),
            reason: reason.into(),
        });
    }

    /// Something the worker of run `run` did.
    pub(crate) fn worker_item(&self, run: u32, item: &str, text: &str, exit_code: Option<i32>) {
        self.emit(Event::WorkerItem {
            run,
            item: item.into(),
            text: text.into(),
            exit_code,
        });
    }
}

impl Sink {
    /// The record as one bounded JSON line with its newline; texts masked, on one
    /// line each, and cut.
    fn line(&self, mut event: Event) -> Option<Vec<u8>> {
        let redactor = &self.redactor;
        let clean = |limit: usize| {
            move |s: &str| {
                cut(
                    &agent_runner_core::text::one_line(&redactor.redact(s)),
                    limit,
                )
            }
        };
        event.map_text(&clean(MAX_TEXT));
        let at = Timestamp::now().to_string();
        let mut json = serde_json::to_vec(&Record {
            at: at.clone(),
            event: event.clone(),
        })
        .ok()?;
        if json.len() >= MAX_LINE {
            // Escapes can make a short text long (a control character is six bytes).
            event.map_text(&clean(SHORT_TEXT));
            json = serde_json::to_vec(&Record { at, event }).ok()?;
            if json.len() >= MAX_LINE {
                return None;
            }
        }
        json.push(b'\n');
        Some(json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::event::Phase;
    use agent_runner_core::secret::Secret;

    fn lines(dir: &Dir) -> Vec<Record> {
        let bytes = dir.read(FILE, 1 << 20).unwrap();
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| {
                assert!(l.len() < MAX_LINE, "bounded: {}", l.len());
                serde_json::from_str(l).unwrap()
            })
            .collect()
    }

    #[test]
    fn events_are_masked_on_one_line_and_bounded() {
        let top = agent_runner_core::fs::testing::scratch("events");
        let dir = Dir::open(&top).unwrap();
        let secret = "sk-events-secret-0123456789";
        let events = Events::create(&dir, Redactor::new(&[Secret::new(secret.into())])).unwrap();
        let long = format!("{}{secret}", "x".repeat(MAX_TEXT - 10));
        events.worker_item(
            1,
            "agent_message",
            &format!("key {secret}\nsecond line"),
            None,
        );
        events.worker_item(1, "command_started", &long, None);
        let controls = "\u{1}".repeat(3000);
        events.emit(Event::EgressDenied {
            host: controls.clone(),
            port: 443,
            reason: controls.clone(),
            allow: Some(controls),
        });
        events.emit(Event::WorkerRun {
            run: 1,
            phase: Phase::Finished,
            resumed_session: false,
            outcome: Some("completed".into()),
            exit_code: Some(0),
            duration_ms: Some(5),
            summary: Some("done".into()),
        });
        let got = lines(&dir);
        assert_eq!(got.len(), 4);
        let text = |n: usize| match &got[n].event {
            Event::WorkerItem { text, .. } => text.clone(),
            Event::EgressDenied { host, .. } => host.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(text(0), "key *** second line");
        // Masked before the cut: no prefix of the secret survives it.
        assert!(!text(1).contains("sk-events"), "{}", text(1));
        assert!(text(1).len() <= MAX_TEXT + 3);
        assert!(text(2).len() <= SHORT_TEXT + 3, "escapes cut shorter");
        // A continued log keeps what was there.
        Events::append(&dir, Redactor::default())
            .unwrap()
            .state("", "PENDING", "resumed");
        assert_eq!(lines(&dir).len(), 5);
        // A fresh log replaces it.
        Events::create(&dir, Redactor::default()).unwrap();
        assert_eq!(lines(&dir).len(), 0);
        Events::none().state("", "PENDING", "nowhere");
        std::fs::remove_dir_all(top).unwrap();
    }

    #[test]
    fn a_planted_link_is_not_written_through() {
        let top = agent_runner_core::fs::testing::scratch("events-link");
        let outside = agent_runner_core::fs::testing::scratch("events-outside").join("host");
        std::fs::write(&outside, "host data").unwrap();
        std::os::unix::fs::symlink(&outside, top.join(FILE)).unwrap();
        let dir = Dir::open(&top).unwrap();
        assert!(Events::append(&dir, Redactor::default()).is_err());
        Events::create(&dir, Redactor::default())
            .unwrap()
            .state("", "PENDING", "");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "host data");
        std::fs::remove_dir_all(top).unwrap();
        std::fs::remove_dir_all(outside.parent().unwrap()).unwrap();
    }
}
