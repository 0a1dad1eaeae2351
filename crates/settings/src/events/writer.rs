//! `Events`: the handle a run writes its events through. Cheap to clone and to share
//! between threads (the state machine, the sandbox's output reader, the egress
//! proxy). Every text is masked before it is cut (SPEC §10), every line is bounded,
//! and a line is one `write` on an `O_APPEND` file, unbuffered: a reader sees an
//! event as soon as it happened. Writing is best effort: a failure is logged once
//! and the run goes on without its event log.
//!
//! The file is bounded too: the worker can cause events in any number (its items,
//! denied connections), so those stop at `MAX_BYTES`, and the run's own events
//! (states, Meta calls, runs, tests, budgets: a few per loop) at `RESERVE` more,
//! each time after one `truncated` line saying what is no longer written. The Task
//! Note still has the whole run.

use std::sync::{Arc, Mutex};

use super::{Event, FILE, ItemKind, Record};
use crate::task_state::TaskState;
use agent_runner_core::fs::Dir;
use agent_runner_core::fs::jsonl::Capped;
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::cut;
use agent_runner_core::timestamp::Timestamp;

/// Longest text field kept (a command, a message, a reason), in bytes.
pub const MAX_TEXT: usize = 400;
/// Longest line written, in bytes; longer ones are written with shorter texts.
pub const MAX_LINE: usize = 4096;
/// What texts are cut to when a line would still be longer than `MAX_LINE`.
const SHORT_TEXT: usize = 64;
/// Largest file for the events the worker can cause in any number.
pub const MAX_BYTES: u64 = 4 << 20;
/// What the run's own events may add beyond `MAX_BYTES`.
pub const RESERVE: u64 = 1 << 20;
/// Room for the `truncated` lines themselves, beyond either bound.
const TRUNCATED_ROOM: u64 = 1024;

/// Where a run's events go (or nowhere: `Events::none`).
#[derive(Clone, Default)]
pub struct Events(Option<Arc<Sink>>);

struct Sink {
    file: Mutex<Option<Log>>,
    redactor: Redactor,
}

/// The file, and which of its bounds it has reached.
struct Log {
    file: Capped,
    /// The worker's events are no longer written.
    worker_cut: bool,
    /// No event is written any more.
    all_cut: bool,
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

    fn to(file: std::fs::File, redactor: Redactor) -> Events {
        Events(Some(Arc::new(Sink {
            file: Mutex::new(Some(Log {
                file: Capped::new(file),
                worker_cut: false,
                all_cut: false,
            })),
            redactor,
        })))
    }

    /// Writes `event`, stamped now, unless the file has reached its bound for it.
    pub fn emit(&self, event: Event) {
        let Some(sink) = &self.0 else { return };
        let from_worker = event.is_from_worker();
        let Some(line) = sink.line(event) else { return };
        let Ok(mut file) = sink.file.lock() else {
            return;
        };
        let Some(log) = file.as_mut() else { return };
        if log.all_cut || (from_worker && log.worker_cut) {
            return;
        }
        let limit = if from_worker {
            MAX_BYTES
        } else {
            MAX_BYTES + RESERVE
        };
        let written = log.file.append(&line, limit).and_then(|written| {
            if written {
                return Ok(());
            }
            log.worker_cut = true;
            log.all_cut = !from_worker;
            let cut = sink.line(Event::Truncated {
                limit_bytes: limit,
                dropped: if from_worker {
                    super::Dropped::WorkerEvents.into()
                } else {
                    super::Dropped::All.into()
                },
            });
            cut.map_or(Ok(true), |cut| {
                log.file.append(&cut, limit + TRUNCATED_ROOM)
            })
            .map(drop)
        });
        if let Err(e) = written {
            log::warn!("cannot write the event log ({e}); events are no longer recorded");
            *file = None;
        }
    }

    /// A state change (`from` None: the run starts in `to`).
    pub fn state(&self, from: Option<TaskState>, to: TaskState, reason: &str) {
        self.emit(Event::State {
            from,
            to,
            reason: reason.into(),
        });
    }

    /// Something the worker of run `run` did.
    pub fn worker_item(&self, run: u32, item: ItemKind, text: &str, exit_code: Option<i32>) {
        self.emit(Event::WorkerItem {
            run,
            item,
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
            ItemKind::AgentMessage,
            &format!("key {secret}\nsecond line"),
            None,
        );
        events.worker_item(1, ItemKind::CommandStarted, &long, None);
        let controls = "\u{1}".repeat(3000);
        events.emit(Event::EgressDenied {
            host: controls.clone(),
            port: 443,
            reason: controls.clone(),
            allow: Some(controls),
            list: None,
            connections: None,
        });
        events.emit(Event::WorkerRun {
            run: 1,
            phase: Phase::Finished,
            resumed_session: false,
            outcome: Some(crate::agent::RunOutcome::Completed.into()),
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
        Events::append(&dir, Redactor::default()).unwrap().state(
            None,
            TaskState::Pending,
            "resumed",
        );
        assert_eq!(lines(&dir).len(), 5);
        // A fresh log replaces it.
        Events::create(&dir, Redactor::default()).unwrap();
        assert_eq!(lines(&dir).len(), 0);
        Events::none().state(None, TaskState::Pending, "nowhere");
        std::fs::remove_dir_all(top).unwrap();
    }

    #[test]
    fn the_worker_s_events_stop_at_the_bound_and_the_run_s_own_at_the_reserve() {
        let top = agent_runner_core::fs::testing::scratch("events-cap");
        let dir = Dir::open(&top).unwrap();
        let events = Events::create(&dir, Redactor::default()).unwrap();
        let size = || std::fs::metadata(top.join(FILE)).unwrap().len();
        let all = || -> Vec<Record> {
            String::from_utf8(std::fs::read(top.join(FILE)).unwrap())
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        let text = "x".repeat(300);
        // More than the bound holds, the run's own events in between.
        for _ in 0..MAX_BYTES / 300 {
            events.worker_item(1, ItemKind::CommandStarted, &text, None);
            events.state(Some(TaskState::Running), TaskState::Running, "loop");
        }
        let after_cut = size();
        assert!(after_cut <= MAX_BYTES + RESERVE, "{after_cut}");
        for _ in 0..100 {
            events.worker_item(1, ItemKind::CommandStarted, &text, None);
        }
        assert_eq!(size(), after_cut, "no more worker items");
        events.state(Some(TaskState::Running), TaskState::Failed, "the end");
        let got = all();
        let cut: Vec<&Record> = got
            .iter()
            .filter(|r| matches!(r.event, Event::Truncated { .. }))
            .collect();
        assert_eq!(cut.len(), 1);
        assert_eq!(
            cut[0].event,
            Event::Truncated {
                limit_bytes: MAX_BYTES,
                dropped: super::super::Dropped::WorkerEvents.into()
            }
        );
        let items_after_cut = got
            .iter()
            .skip_while(|r| !matches!(r.event, Event::Truncated { .. }))
            .filter(|r| r.event.is_from_worker())
            .count();
        assert_eq!(items_after_cut, 0);
        assert!(got.last().unwrap().event.is_end(), "the run's end is there");
        // The run's own events stop at the reserve, after a second such line.
        let reason = "y".repeat(300);
        for _ in 0..(RESERVE / 300 + 100) {
            events.state(Some(TaskState::Running), TaskState::Running, &reason);
        }
        let full = size();
        assert!(full <= MAX_BYTES + RESERVE + TRUNCATED_ROOM, "{full}");
        assert!(full > MAX_BYTES + RESERVE - 1024, "{full}");
        assert_eq!(
            all().last().unwrap().event,
            Event::Truncated {
                limit_bytes: MAX_BYTES + RESERVE,
                dropped: super::super::Dropped::All.into()
            }
        );
        events.state(Some(TaskState::Running), TaskState::Failed, "later");
        assert_eq!(size(), full);
        // A continued log counts what it holds.
        Events::append(&dir, Redactor::default())
            .unwrap()
            .worker_item(2, ItemKind::CommandStarted, "x", None);
        assert_eq!(size(), full);
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
            .state(None, TaskState::Pending, "");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "host data");
        std::fs::remove_dir_all(top).unwrap();
        std::fs::remove_dir_all(outside.parent().unwrap()).unwrap();
    }
}
