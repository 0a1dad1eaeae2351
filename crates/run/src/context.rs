//! The state of a running task: where it is in the state machine, the acceptance
//! criteria, and every Meta call, worker run and test run so far. The Task Note and
//! the result JSON are written from it.

use std::time::Duration;

use crate::Error;
use crate::loop_record::{LoopAction, LoopRecord, MAX_LOOP_TEXT, TestOutcome, WorkerOutcome};
use crate::resume::Resumed;
use agent_runner_core::text::cut;
use agent_runner_core::timestamp::Timestamp;
use agent_runner_core::usage::Account;
use agent_runner_meta::MetaCall;
use agent_runner_sandbox::worker::{Teardown, TestRun, WorkerRun};
use agent_runner_settings::events::Events;
use agent_runner_settings::task::Task;

pub use agent_runner_settings::task::TaskState;

/// The edges of the state machine between `TaskState`s (SPEC §4).
pub(crate) trait Edges {
    /// Whether the state machine goes from this state to `next`.
    fn can_go_to(self, next: TaskState) -> bool;
}

impl Edges for TaskState {
    /// Any live state may fail; terminal states have no way out.
    fn can_go_to(self, next: TaskState) -> bool {
        use TaskState::*;
        match (self, next) {
            (Complete | Failed | AwaitingApproval, _) => false,
            (_, Failed) => true,
            (Pending, Planning) | (Planning, Running) | (Running, Validating) => true,
            // A replan (SPEC §16): Meta replaces the criteria mid-run.
            (Running, Planning) => true,
            (Validating, Running) | (Validating, Complete) => true,
            // The approval gate (SPEC §23): the plan waits for the user.
            (Planning, AwaitingApproval) => true,
            _ => false,
        }
    }
}

/// An acceptance criterion planned by Meta.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Criterion {
    pub id: String,
    pub description: String,
    pub(crate) passed: bool,
}

/// One version of the acceptance criteria: the first plan (or the task's own), then
/// one per replan (SPEC §16), each with the loop it was made at and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CriteriaVersion {
    /// Loops done when this version was made (0: before the first loop).
    pub at_loop: u32,
    pub reason: String,
    /// As they stood when the version was replaced (the current one: `criteria`).
    pub criteria: Vec<Criterion>,
}

/// What Meta's `completion_assessment` said (`runner::protocol`).
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    pub(crate) summary: String,
    pub(crate) passed_criteria: Vec<String>,
    pub(crate) remaining_risks: Vec<String>,
    pub(crate) all_criteria_satisfied: Option<bool>,
}

/// One state change.
#[derive(Debug, Clone)]
pub(crate) struct Transition {
    pub(crate) from: TaskState,
    pub(crate) to: TaskState,
    pub(crate) at: Timestamp,
    pub(crate) reason: String,
}

/// Everything known about a task while and after it runs.
#[derive(Debug, Clone)]
pub struct TaskContext {
    pub task: Task,
    pub state: TaskState,
    pub(crate) started: Timestamp,
    pub(crate) finished: Option<Timestamp>,
    pub criteria: Vec<Criterion>,
    pub(crate) meta_calls: Vec<MetaCall>,
    pub(crate) worker_runs: Vec<WorkerRun>,
    pub(crate) test_runs: Vec<TestRun>,
    /// The latest completion assessment.
    pub(crate) assessment: Option<Assessment>,
    pub(crate) transitions: Vec<Transition>,
    /// Iterations of RUNNING → VALIDATING so far, replans included (bounded by
    /// `max_loops`).
    pub loops: u32,
    /// Every version of the criteria, the current one last.
    pub criteria_versions: Vec<CriteriaVersion>,
    /// Replans so far (bounded by `max_replans`).
    pub replans: u32,
    /// Why the task failed, when it did.
    pub(crate) failure: Option<String>,
    pub interrupted: bool,
    /// How the sandbox went away (set once it has).
    pub(crate) teardown: Option<Teardown>,
    /// `task.setup` as it ran in this run's sandbox (SPEC §21).
    pub setup: Option<agent_runner_sandbox::worker::SetupRun>,
    /// Where the run's events go as they happen (SPEC §19).
    pub events: Events,
    /// What this run carries over from the runs before it (`run --resume`).
    pub resumed: Option<Resumed>,
    /// The budget limit that ended the task (`max_tokens`, ...), if one did.
    pub(crate) budget_exhausted: Option<&'static str>,
    /// The docker host that keeps the worker's session, when it is not this
    /// machine's directory (`session_host`).
    pub session_host: Option<crate::session_host::SessionHost>,
}

impl TaskContext {
    pub fn new(task: Task) -> Self {
        TaskContext {
            task,
            state: TaskState::Pending,
            started: Timestamp::now(),
            finished: None,
            criteria: Vec::new(),
            meta_calls: Vec::new(),
            worker_runs: Vec::new(),
            test_runs: Vec::new(),
            assessment: None,
            transitions: Vec::new(),
            loops: 0,
            criteria_versions: Vec::new(),
            replans: 0,
            failure: None,
            interrupted: false,
            teardown: None,
            setup: None,
            events: Events::none(),
            resumed: None,
            budget_exhausted: None,
            session_host: None,
        }
    }

    /// What the task's Meta calls and worker runs used and cost so far (SPEC §15).
    pub(crate) fn usage(&self) -> Account {
        Account::of(
            self.meta_calls.iter().map(|c| &c.usage),
            self.worker_runs.iter().map(|r| &r.usage),
            &self.task.bounds.pricing,
        )
    }

    /// What the whole task used and cost: the runs before a resume (their costs
    /// as they were, or priced now when they had no price) and this run's (SPEC §19:
    /// usage and budget count the whole task).
    pub(crate) fn task_usage(&self) -> Account {
        let now = self.usage();
        match &self.resumed {
            Some(r) => r.usage.repriced(&self.task.bounds.pricing).plus(&now),
            None => now,
        }
    }

    /// How long the whole task has run: the runs before a resume and this one.
    pub(crate) fn task_elapsed(&self) -> Duration {
        let earlier = self.resumed.as_ref().map_or(Duration::ZERO, |r| r.elapsed);
        earlier.saturating_add(self.duration())
    }

    /// Moves to `to`, recording why. Entering FAILED records `reason` as the failure.
    pub(crate) fn transition(
        &mut self,
        to: TaskState,
        reason: impl Into<String>,
    ) -> Result<(), Error> {
        let from = self.state;
        if !from.can_go_to(to) {
            return Err(Error::InvalidTransition { from, to });
        }
        let reason = reason.into();
        log::info!(
            "state {from} → {to}{}",
            if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            }
        );
        self.events.state(Some(from), to, &reason);
        if to == TaskState::Failed {
            self.failure = Some(reason.clone());
        }
        if to.is_terminal() {
            self.finished = Some(Timestamp::now());
        }
        self.transitions.push(Transition {
            from,
            to,
            at: Timestamp::now(),
            reason,
        });
        self.state = to;
        Ok(())
    }

    pub(crate) fn last_worker_run(&self) -> Option<&WorkerRun> {
        self.worker_runs.last()
    }

    pub(crate) fn last_test_run(&self) -> Option<&TestRun> {
        self.test_runs.last()
    }

    /// Makes `criteria` the current criteria, a new version made for `reason`; the
    /// version it replaces keeps its criteria as they stood.
    pub(crate) fn set_criteria(&mut self, criteria: Vec<Criterion>, reason: impl Into<String>) {
        if let Some(current) = self.criteria_versions.last_mut() {
            current.criteria = std::mem::take(&mut self.criteria);
        }
        self.criteria_versions.push(CriteriaVersion {
            at_loop: self.loops,
            reason: reason.into(),
            criteria: Vec::new(),
        });
        self.criteria = criteria;
    }

    /// True when the task is COMPLETE and its last test run passed (SPEC §16): the
    /// user's own check agrees, not only Meta.
    pub(crate) fn verified(&self) -> bool {
        self.state == TaskState::Complete && self.last_test_run().is_some_and(|t| t.passed())
    }

    /// Wall time from start to finish (or to now while running).
    pub(crate) fn duration(&self) -> Duration {
        self.finished
            .unwrap_or_else(Timestamp::now)
            .since(self.started)
    }
}

impl TaskContext {
    /// Loop `n` (`loop_record.rs`): one of the runs before a resume as the state file kept it,
    /// else this run's worker run and test run, or its replan.
    pub(crate) fn loop_record(&self, n: u32) -> LoopRecord {
        let earlier = self.resumed.as_ref().filter(|r| n <= r.loops);
        if let Some(record) = earlier.and_then(|r| r.history.iter().find(|r| r.number == n)) {
            return record.clone();
        }
        let worker = self.worker_runs.iter().rev().find(|r| r.number == n);
        let test = self.test_runs.iter().rev().find(|t| t.number == n);
        // A version made at loop n of this run is that loop's replan (a plan made
        // when a resumed run starts is at its first loop's number less one).
        let replan = (earlier.is_none() && n > 0)
            .then(|| self.criteria_versions.iter().find(|v| v.at_loop == n))
            .flatten();
        LoopRecord {
            number: n,
            action: match (worker, replan) {
                (Some(_), _) => LoopAction::RunWorker,
                (None, Some(_)) => LoopAction::Replan,
                (None, None) => LoopAction::MarkComplete,
            },
            worker: worker.map(|r| WorkerOutcome::new(r.outcome.as_str(), r.exit_code, &r.summary)),
            test: test
                .map(|t| TestOutcome::new(t.passed(), t.exit_code, t.timed_out, &t.output_tail)),
            reason: replan.map(|v| cut(&v.reason, MAX_LOOP_TEXT)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TaskState::*;
    use super::*;

    #[test]
    fn edges_match_the_spec() {
        let all = [
            Pending,
            Planning,
            Running,
            Validating,
            Complete,
            Failed,
            AwaitingApproval,
        ];
        let allowed: Vec<(TaskState, TaskState)> = all
            .iter()
            .flat_map(|&a| all.iter().map(move |&b| (a, b)))
            .filter(|(a, b)| a.can_go_to(*b))
            .collect();
        assert_eq!(
            allowed,
            [
                (Pending, Planning),
                (Pending, Failed),
                (Planning, Running),
                (Planning, Failed),
                (Planning, AwaitingApproval),
                (Running, Planning),
                (Running, Validating),
                (Running, Failed),
                (Validating, Running),
                (Validating, Complete),
                (Validating, Failed),
            ]
        );
    }
}
