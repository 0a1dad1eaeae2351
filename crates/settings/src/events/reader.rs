//! The one reader of `events.jsonl`: whole lines from a byte offset, so a follower
//! (`task logs -f`, the web view polling with an offset) reads each line once. The
//! file grows while a run writes it and is replaced when a new run starts: a cursor
//! names the file it points into (its inode), and a replaced file is read from its
//! start again. A line not yet complete is left for the next read; a line that does
//! not parse is skipped.

use std::os::unix::fs::{FileExt, MetadataExt};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::FILE;
use super::event::{CallTokens, Event, ItemKind, Phase, Record};
use super::named::{Dropped, Named};
use crate::agent::RunOutcome;
use agent_runner_core::fs::Dir;
use agent_runner_core::text::escape_controls;
use agent_runner_core::timestamp::human;

/// Most bytes read at once; a follower gets the rest on its next read.
pub const MAX_READ: u64 = 1 << 20;

/// Where a reader is: the file (its inode) and the offset of the next line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub file: u64,
    pub offset: u64,
}

/// What a read found.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub records: Vec<Record>,
    /// Where the next read starts.
    pub cursor: Cursor,
    /// The file is not the one the cursor named: these records start from its
    /// beginning (what was shown before belongs to an earlier run).
    pub restarted: bool,
}

/// The whole lines of `events.jsonl` in `logs` after `cursor` (at most `MAX_READ`
/// bytes). A missing file is `NotFound`.
pub fn read(logs: &Dir, cursor: Cursor) -> std::io::Result<Batch> {
    let file = logs.open_file(FILE)?;
    let meta = file.metadata()?;
    let restarted = cursor.file != meta.ino() || cursor.offset > meta.len();
    let start = if restarted { 0 } else { cursor.offset };
    let want = meta.len().saturating_sub(start).min(MAX_READ) as usize;
    let mut bytes = vec![0; want];
    let mut got = 0;
    while got < want {
        match file.read_at(&mut bytes[got..], start + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    bytes.truncate(got);
    // Only whole lines; a line longer than a whole read is skipped.
    let whole = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(at) => at + 1,
        None if got as u64 == MAX_READ => got,
        None => 0,
    };
    let records = bytes[..whole]
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect();
    Ok(Batch {
        records,
        cursor: Cursor {
            file: meta.ino(),
            offset: start + whole as u64,
        },
        restarted: restarted && cursor != Cursor::default(),
    })
}

/// `record` as one line for people: its time of day, then what happened; control
/// characters shown escaped (the texts come from the worker and from Meta).
pub fn describe(record: &Record) -> String {
    let clock = record.at.get(11..23).unwrap_or(&record.at);
    escape_controls(&format!("{clock} {}", what(&record.event)))
}

fn what(event: &Event) -> String {
    let ms = |ms: u64| human(Duration::from_millis(ms));
    match event {
        Event::State { from, to, reason } => {
            let reason = if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            };
            match from {
                None => format!("state {to}{reason}"),
                Some(from) => format!("state {from} → {to}{reason}"),
            }
        }
        Event::Meta {
            call,
            duration_ms,
            requests,
            usage,
            error,
        } => {
            let tokens = usage.as_ref().map(tokens).unwrap_or_default();
            let tries = if *requests > 1 {
                format!(", {requests} requests")
            } else {
                String::new()
            };
            match error {
                Some(e) => format!("meta {call} failed after {}{tries}: {e}", ms(*duration_ms)),
                None => format!(
                    "meta {call} answered in {}{tries}{tokens}",
                    ms(*duration_ms)
                ),
            }
        }
        Event::WorkerItem {
            run,
            item,
            text,
            exit_code,
        } => worker_item(*run, *item, text, *exit_code),
        Event::WorkerRun {
            run,
            phase: Phase::Started,
            resumed_session,
            ..
        } => {
            if *resumed_session {
                format!("worker run {run} started (continuing its earlier session)")
            } else {
                format!("worker run {run} started")
            }
        }
        Event::WorkerRun {
            run,
            phase: Phase::Finished,
            outcome,
            exit_code,
            duration_ms,
            summary,
            ..
        } => worker_run_finished(
            *run,
            outcome.as_ref(),
            *exit_code,
            *duration_ms,
            summary.as_deref(),
        ),
        Event::Test {
            run,
            phase: Phase::Started,
            command,
            ..
        } => format!("test {run}: {command}"),
        Event::Test {
            run,
            phase: Phase::Finished,
            exit_code,
            passed,
            timed_out,
            duration_ms,
            ..
        } => test_finished(*run, *exit_code, *passed, *timed_out, *duration_ms),
        Event::EgressDenied {
            host,
            port,
            reason,
            allow,
            list,
            connections,
        } => egress_denied(
            host,
            *port,
            reason,
            allow.as_deref(),
            list.as_deref(),
            *connections,
        ),
        Event::Budget { limit, message } => match message.is_empty() {
            true => format!("budget: {limit} reached"),
            false => format!("budget: {message}"),
        },
        Event::Truncated {
            limit_bytes,
            dropped,
        } => {
            let what = if *dropped == Named::Known(Dropped::All) {
                "no more events are written".to_string()
            } else {
                format!("no more {dropped} events are written")
            };
            format!(
                "the event log reached its bound ({}): {what}; the Task Note has the whole run",
                agent_runner_core::text::bytes(*limit_bytes)
            )
        }
        Event::Unknown => "(an event this version does not know)".into(),
    }
}

/// A line the worker's agent reported of run `run`.
fn worker_item(run: u32, item: ItemKind, text: &str, exit_code: Option<i32>) -> String {
    match item {
        ItemKind::CommandStarted => format!("  run {run} $ {text}"),
        ItemKind::CommandFinished => match exit_code {
            Some(code) => format!("  run {run} $ {text} → exit {code}"),
            None => format!("  run {run} $ {text} → ended"),
        },
        ItemKind::FileChanged => format!("  run {run} changed {text}"),
        ItemKind::AgentMessage => format!("  run {run} says: {text}"),
        ItemKind::McpToolCall => format!("  run {run} called MCP tool {text}"),
        ItemKind::Unknown => format!("  run {run} did something else: {text}"),
    }
}

/// The end of worker run `run`: how, how long, its exit code and summary.
fn worker_run_finished(
    run: u32,
    outcome: Option<&Named<RunOutcome>>,
    exit_code: Option<i32>,
    duration_ms: Option<u64>,
    summary: Option<&str>,
) -> String {
    let mut line = format!(
        "worker run {run} {}",
        outcome.map_or("ended", |o| o.as_str())
    );
    if let Some(ms) = duration_ms {
        line.push_str(&format!(" in {}", human(Duration::from_millis(ms))));
    }
    if let Some(code) = exit_code {
        line.push_str(&format!(" (exit {code})"));
    }
    if let Some(summary) = summary.filter(|s| !s.is_empty()) {
        line.push_str(&format!(": {summary}"));
    }
    line
}

/// The end of test run `run`: its verdict and how long it took.
fn test_finished(
    run: u32,
    exit_code: Option<i32>,
    passed: Option<bool>,
    timed_out: bool,
    duration_ms: Option<u64>,
) -> String {
    let verdict = match (timed_out, passed, exit_code) {
        (true, _, _) => "timed out".to_string(),
        (_, Some(true), _) => "passed".to_string(),
        (_, _, Some(code)) => format!("failed (exit {code})"),
        _ => "failed".to_string(),
    };
    match duration_ms {
        Some(d) => format!(
            "test {run} {verdict} in {}",
            human(Duration::from_millis(d))
        ),
        None => format!("test {run} {verdict}"),
    }
}

/// A connection the egress proxy refused (`connections` more times, when summed),
/// with how to allow it.
fn egress_denied(
    host: &str,
    port: u16,
    reason: &str,
    allow: Option<&str>,
    list: Option<&str>,
    connections: Option<u64>,
) -> String {
    let times = match connections {
        Some(n) => format!(" {n} more times"),
        None => String::new(),
    };
    match allow {
        Some(entry) => format!(
            "egress denied{times}: {host}:{port} ({reason}); to allow it, add `{entry}` to {}",
            list.unwrap_or("runner.worker.allow")
        ),
        None => format!("egress denied{times}: {host}:{port} ({reason})"),
    }
}

/// ", 1200 in / 60 out tokens".
fn tokens(usage: &CallTokens) -> String {
    format!(
        ", {} in / {} out tokens",
        usage.input_tokens, usage.output_tokens
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Events;
    use crate::task_state::TaskState;
    use agent_runner_core::secret::Redactor;
    use std::io::Write;

    #[test]
    fn a_follower_reads_each_whole_line_once_and_starts_over_on_a_new_file() {
        let top = agent_runner_core::fs::testing::scratch("events-read");
        let dir = Dir::open(&top).unwrap();
        assert_eq!(
            read(&dir, Cursor::default()).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
        let events = Events::create(&dir, Redactor::default()).unwrap();
        events.state(None, TaskState::Pending, "");
        events.state(Some(TaskState::Pending), TaskState::Planning, "");
        let first = read(&dir, Cursor::default()).unwrap();
        assert_eq!(first.records.len(), 2);
        assert!(!first.restarted);
        // A torn line waits for its end.
        let mut raw = dir.append(FILE).unwrap();
        raw.write_all(br#"{"at":"2026-01-01T00:00:00.000Z","kind":"state","#)
            .unwrap();
        let none = read(&dir, first.cursor).unwrap();
        assert!(none.records.is_empty());
        assert_eq!(none.cursor, first.cursor);
        raw.write_all(b"\"to\":\"RUNNING\"}\nnot json\n").unwrap();
        let next = read(&dir, none.cursor).unwrap();
        assert_eq!(next.records.len(), 1, "the bad line is skipped");
        assert_eq!(
            describe(&next.records[0]),
            "00:00:00.000 state RUNNING",
            "{:?}",
            next.records
        );
        // A new run replaces the file: read from its start.
        Events::create(&dir, Redactor::default()).unwrap().state(
            None,
            TaskState::Pending,
            "second run",
        );
        let again = read(&dir, next.cursor).unwrap();
        assert!(again.restarted);
        assert_eq!(again.records.len(), 1);
        std::fs::remove_dir_all(top).unwrap();
    }

    #[test]
    fn events_read_as_lines_with_controls_escaped() {
        let at = "2026-01-02T03:04:05.678Z".to_string();
        let line = |event| {
            describe(&Record {
                at: at.clone(),
                event,
            })
        };
        assert_eq!(
            line(Event::WorkerItem {
                run: 1,
                item: ItemKind::CommandFinished,
                text: "ls \u{1b}[31m".into(),
                exit_code: Some(2),
            }),
            "03:04:05.678   run 1 $ ls \\e[31m → exit 2"
        );
        assert_eq!(
            line(Event::Meta {
                call: super::super::CallType::NextAction.into(),
                duration_ms: 1500,
                requests: 2,
                usage: Some(CallTokens {
                    input_tokens: 10,
                    output_tokens: 3,
                    ..CallTokens::default()
                }),
                error: None,
            }),
            "03:04:05.678 meta next_action answered in 1.5 s, 2 requests, 10 in / 3 out tokens"
        );
        assert_eq!(
            line(Event::Test {
                run: 3,
                phase: Phase::Finished,
                command: "make test".into(),
                exit_code: Some(1),
                passed: Some(false),
                timed_out: false,
                duration_ms: Some(20),
            }),
            "03:04:05.678 test 3 failed (exit 1) in 20 ms"
        );
        let denied = |connections| {
            line(Event::EgressDenied {
                host: "github.com".into(),
                port: 443,
                reason: "not in runner.worker.allow".into(),
                allow: Some("github.com".into()),
                list: None,
                connections,
            })
        };
        assert_eq!(
            denied(None),
            "03:04:05.678 egress denied: github.com:443 (not in runner.worker.allow); to allow it, add `github.com` to runner.worker.allow"
        );
        assert_eq!(
            denied(Some(640)),
            "03:04:05.678 egress denied 640 more times: github.com:443 (not in runner.worker.allow); to allow it, add `github.com` to runner.worker.allow"
        );
        assert_eq!(
            line(Event::Truncated {
                limit_bytes: 4 << 20,
                dropped: Dropped::WorkerEvents.into()
            }),
            "03:04:05.678 the event log reached its bound (4.0 MiB): no more worker_item, egress_denied events are written; the Task Note has the whole run"
        );
        assert_eq!(
            line(Event::Truncated {
                limit_bytes: 5 << 20,
                dropped: Dropped::All.into()
            }),
            "03:04:05.678 the event log reached its bound (5.0 MiB): no more events are written; the Task Note has the whole run"
        );
    }
}
