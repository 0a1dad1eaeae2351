//! What a resumed task carries over from the runs before it (SPEC §19): what each
//! loop did, the worker's session, the usage and time so far and the earlier note. The state
//! file (`runner::state`) keeps it after every step; `run --resume` reads it back
//! into the new run's `TaskContext`, whose requests to Meta, first worker prompt and
//! note then show it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::loop_record::LoopRecord;
use agent_runner_core::text::cut;
use agent_runner_core::timestamp::Timestamp;
use agent_runner_core::usage::Account;

/// Loops kept in the history (the latest).
pub(crate) const MAX_LOOPS_KEPT: usize = 100;

/// The worker's conversation, when its CLI can continue one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerSession {
    /// The worker kind (`codex-cli`).
    pub kind: String,
    /// Its session id (codex: the thread id).
    pub id: String,
}

/// A resumed run's inheritance; see the module documentation.
#[derive(Debug, Clone)]
pub struct Resumed {
    /// When this run resumed.
    pub(crate) at: Timestamp,
    /// Loops done before it.
    pub loops: u32,
    /// How the run before ended: `FAILED: <reason>`, or how far it got when it left
    /// no end (killed).
    pub previous: String,
    pub(crate) history: Vec<LoopRecord>,
    /// What the runs before used and cost (SPEC §15): this run's budget counts it.
    pub(crate) usage: Account,
    /// How long the runs before ran: `max_duration_sec` counts it.
    pub(crate) elapsed: Duration,
    pub worker_session: Option<WorkerSession>,
    /// The Task Note the runs before left (this run's note keeps it).
    pub(crate) earlier_note: Option<String>,
    /// The user's follow-up message (`--message`, SPEC §23): in each request to Meta,
    /// before the worker's first prompt, and in the note.
    pub message: Option<String>,
}

/// The history in words, for a worker that starts afresh (its session cannot be
/// continued): what the loops before did, latest last, at most `max` bytes.
pub fn for_worker(resumed: &Resumed, max: usize) -> String {
    let mut lines = vec![format!(
        "This task was resumed after {} loop(s); the run before ended: {}. What each loop did:",
        resumed.loops, resumed.previous
    )];
    for record in &resumed.history {
        let mut line = format!("- loop {}: {}", record.number, record.action_name());
        if let Some(w) = &record.worker {
            line.push_str(&format!(
                "; worker {} ({})",
                w.outcome,
                agent_runner_core::text::one_line(&cut(&w.summary, 200))
            ));
        }
        if let Some(t) = &record.test {
            line.push_str(if t.passed {
                "; tests passed"
            } else {
                "; tests failed"
            });
        }
        lines.push(line);
    }
    // The latest loops matter most: drop the oldest first.
    while lines.iter().map(|l| l.len() + 1).sum::<usize>() > max && lines.len() > 2 {
        lines.remove(1);
    }
    cut(&lines.join("\n"), max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loop_record::{LoopAction, TestOutcome, WorkerOutcome};

    #[test]
    fn the_worker_is_told_the_latest_loops_within_its_bound() {
        let resumed = Resumed {
            at: Timestamp::now(),
            loops: 30,
            previous: "FAILED: budget exhausted".into(),
            history: (1..=30)
                .map(|n| LoopRecord {
                    number: n,
                    action: LoopAction::RunWorker,
                    worker: Some(WorkerOutcome::new("completed", Some(0), &"x".repeat(2000))),
                    test: Some(TestOutcome::new(n == 30, Some(1), false, "boom")),
                    reason: None,
                })
                .collect(),
            usage: Account::default(),
            elapsed: Duration::ZERO,
            worker_session: None,
            earlier_note: None,
            message: None,
        };
        let text = for_worker(&resumed, 2048);
        assert!(text.len() <= 2048 + 3, "{}", text.len());
        assert!(text.starts_with("This task was resumed after 30 loop(s)"));
        assert!(text.contains("- loop 30: run_worker; worker completed"));
        assert!(text.ends_with("tests passed"), "{text}");
        assert!(!text.contains("- loop 1:"), "the oldest dropped");
    }
}
