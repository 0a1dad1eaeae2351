//! What one loop of a task did, made from the context in one place (`TaskContext::loop_record`):
//! the state file keeps the latest loops (`runner::state`), a resumed run inherits
//! them (`resume`) and shows them to Meta and to a worker that starts afresh, and a
//! replan's `plan_task` is told them (`runner::replan`). Texts are bounded here;
//! what goes to Meta is cleaned of control characters on the way (`cleaned`).

use serde::{Deserialize, Serialize};

use agent_runner_core::text::{cut, tail};

/// Bytes of a worker summary, a test output tail and a replan's reason kept per loop.
pub(crate) const MAX_LOOP_TEXT: usize = 512;
/// Bytes of a worker outcome's name kept (a hand-edited state file may hold any).
const MAX_OUTCOME: usize = 64;

/// What a loop did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LoopAction {
    RunWorker,
    Replan,
    /// Meta claimed completion (also what an action this version does not know in
    /// a state file reads as).
    #[serde(other)]
    MarkComplete,
}

/// One loop: its action, its worker run and test run, a replan's reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LoopRecord {
    #[serde(rename = "loop")]
    pub(crate) number: u32,
    pub(crate) action: LoopAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) worker: Option<WorkerOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) test: Option<TestOutcome>,
    /// A replan's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}

/// How a loop's worker run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct WorkerOutcome {
    pub(crate) outcome: String,
    #[serde(default)]
    pub(crate) exit_code: Option<i32>,
    #[serde(default)]
    pub(crate) summary: String,
}

/// How a loop's test run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TestOutcome {
    pub(crate) passed: bool,
    #[serde(default)]
    pub(crate) exit_code: Option<i32>,
    #[serde(default)]
    pub(crate) timed_out: bool,
    #[serde(default)]
    pub(crate) output_tail: String,
}

impl LoopRecord {
    /// Its texts bounded as a run bounds them: a hand-edited state file's would
    /// otherwise go whole into every Meta request.
    pub(crate) fn bounded(self) -> LoopRecord {
        LoopRecord {
            worker: self.worker.map(|w| {
                WorkerOutcome::new(&cut(&w.outcome, MAX_OUTCOME), w.exit_code, &w.summary)
            }),
            test: self
                .test
                .map(|t| TestOutcome::new(t.passed, t.exit_code, t.timed_out, &t.output_tail)),
            reason: self.reason.map(|r| cut(&r, MAX_LOOP_TEXT)),
            ..self
        }
    }

    /// Its texts with `clean` applied (control characters and ANSI escapes removed),
    /// for a request to Meta.
    pub(crate) fn cleaned(&self, clean: impl Fn(&str) -> String) -> LoopRecord {
        LoopRecord {
            worker: self.worker.as_ref().map(|w| WorkerOutcome {
                outcome: clean(&w.outcome),
                exit_code: w.exit_code,
                summary: clean(&w.summary),
            }),
            test: self.test.as_ref().map(|t| TestOutcome {
                output_tail: clean(&t.output_tail),
                ..t.clone()
            }),
            reason: self.reason.as_deref().map(&clean),
            ..self.clone()
        }
    }

    /// The action's name, as the state file spells it.
    pub(crate) fn action_name(&self) -> &'static str {
        match self.action {
            LoopAction::RunWorker => "run_worker",
            LoopAction::Replan => "replan",
            LoopAction::MarkComplete => "mark_complete",
        }
    }
}

impl WorkerOutcome {
    /// An outcome with its summary bounded.
    pub(crate) fn new(outcome: &str, exit_code: Option<i32>, summary: &str) -> Self {
        WorkerOutcome {
            outcome: outcome.to_string(),
            exit_code,
            summary: cut(summary, MAX_LOOP_TEXT),
        }
    }
}

impl TestOutcome {
    /// An outcome with its output bounded (the end kept: that is where tests fail).
    pub(crate) fn new(passed: bool, exit_code: Option<i32>, timed_out: bool, output: &str) -> Self {
        TestOutcome {
            passed,
            exit_code,
            timed_out,
            output_tail: tail(output, MAX_LOOP_TEXT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_this_version_does_not_know_reads_as_mark_complete() {
        let record: LoopRecord = serde_json::from_str(r#"{"loop": 3, "action": "dance"}"#).unwrap();
        assert_eq!(record.action, LoopAction::MarkComplete);
        let record: LoopRecord =
            serde_json::from_str(r#"{"loop": 3, "action": "replan", "reason": "r"}"#).unwrap();
        assert_eq!(
            (record.action, record.reason.as_deref()),
            (LoopAction::Replan, Some("r"))
        );
        assert_eq!(
            serde_json::to_string(&record).unwrap(),
            r#"{"loop":3,"action":"replan","reason":"r"}"#
        );
    }
}
