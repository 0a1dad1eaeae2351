//! The outcome printed on stdout (SPEC §8): one JSON object with `--json`, otherwise a
//! line for people. Printed on every outcome, including invalid input, so a caller
//! always gets an answer.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::context::{TaskContext, TaskState};
use agent_runner_core::secret::Redactor;
use agent_runner_core::usage::Account;
use agent_runner_settings::task::Budget;

#[derive(Debug, Serialize)]
pub struct RunResult {
    /// None only when the input was too broken to know it.
    pub(crate) task_id: Option<String>,
    /// `succeeded`, `failed` or `awaiting_approval` (SPEC §23).
    pub(crate) status: &'static str,
    pub(crate) state: &'static str,
    pub(crate) summary: String,
    pub(crate) validation: Validation,
    pub(crate) duration_ms: u128,
    pub(crate) loops: u32,
    /// True only when the task is COMPLETE and its last test run passed (SPEC §16).
    pub(crate) verified: bool,
    /// How often Meta replaced the acceptance criteria (SPEC §16).
    pub(crate) replans: u32,
    pub(crate) note_path: Option<String>,
    /// Why the Task Note could not be written (then `note_path` is null).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) note_error: Option<String>,
    /// Why the task failed (or the input error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// Connections the egress proxy allowed and denied (SPEC §17); null when the
    /// network is not `allowlist`.
    pub(crate) egress: Option<EgressCounts>,
    /// What the task's paid calls used and cost (SPEC §15): this run's.
    pub(crate) usage: Account,
    /// A resumed run (SPEC §19): what the whole task used and cost, the runs before
    /// included, which the budget counts. Absent when the run did not resume.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_usage: Option<Account>,
    /// The task's limits, and the one that ended it.
    pub(crate) budget: BudgetReport,
    /// The acceptance criteria: how many, and how many passed (SPEC §23 compares
    /// tries by it). Absent when nothing ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) criteria: Option<CriteriaCount>,
    /// AWAITING_APPROVAL only: the planned acceptance criteria the user approves
    /// or rejects (SPEC §23), `{id, description}` each.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) plan: Option<Vec<PlannedCriterion>>,
    /// Where the copy transport left the work (SPEC §22): `agent-runner/<id>`'s
    /// words, or why it could not be brought back. Absent with the bind mount.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) work: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct CriteriaCount {
    pub(crate) passed: usize,
    pub(crate) total: usize,
}

/// A criterion of a plan awaiting approval.
#[derive(Debug, Serialize)]
pub(crate) struct PlannedCriterion {
    pub(crate) id: String,
    pub(crate) description: String,
}

/// The `budget` object: the limits set (null: none) and `exhausted`, the limit
/// that ended the task or null.
#[derive(Debug, Default, Serialize)]
pub(crate) struct BudgetReport {
    pub(crate) max_tokens: Option<u64>,
    pub(crate) max_cost_usd: Option<f64>,
    pub(crate) max_duration_sec: Option<u64>,
    pub(crate) exhausted: Option<&'static str>,
}

impl BudgetReport {
    fn of(budget: &Budget, exhausted: Option<&'static str>) -> Self {
        BudgetReport {
            max_tokens: budget.max_tokens,
            max_cost_usd: budget.max_cost_usd,
            max_duration_sec: budget.max_duration.map(|d| d.as_secs()),
            exhausted,
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct EgressCounts {
    pub(crate) allowed: u64,
    pub(crate) denied: u64,
}

#[derive(Debug, Serialize)]
pub(crate) struct Validation {
    /// `passed`, `failed`, or `unknown` when no test ran.
    pub(crate) overall: &'static str,
    pub(crate) commands: Vec<ValidationCommand>,
    /// The end of the last test run's output (SPEC §23: what the judge of tries sees).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) test_tail: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ValidationCommand {
    pub(crate) command: String,
    pub(crate) exit_code: Option<i32>,
    pub(crate) duration_ms: u128,
}

impl RunResult {
    /// The result of a task that ran; `note` is the note's path if it was written,
    /// else why not.
    pub fn of(ctx: &TaskContext, note: Result<&Path, &str>) -> Self {
        let complete = ctx.state == TaskState::Complete;
        let summary = match (&ctx.failure, &ctx.assessment) {
            (Some(reason), _) if !complete => reason.clone(),
            (_, Some(a)) => a.summary.clone(),
            _ => String::new(),
        };
        RunResult {
            task_id: Some(ctx.task.id.clone()),
            status: match ctx.state {
                TaskState::Complete => "succeeded",
                TaskState::AwaitingApproval => "awaiting_approval",
                _ => "failed",
            },
            state: ctx.state.as_str(),
            summary,
            validation: Validation {
                overall: match ctx.last_test_run() {
                    None => "unknown",
                    Some(t) if t.passed() => "passed",
                    Some(_) => "failed",
                },
                commands: ctx
                    .test_runs
                    .iter()
                    .map(|t| ValidationCommand {
                        command: t.command.clone(),
                        exit_code: t.exit_code,
                        duration_ms: t.duration.as_millis(),
                    })
                    .collect(),
                test_tail: ctx
                    .last_test_run()
                    .map(|t| agent_runner_core::text::tail(t.output_tail.trim_end(), 1024)),
            },
            duration_ms: ctx.duration().as_millis(),
            loops: ctx.loops,
            verified: ctx.verified(),
            replans: ctx.replans,
            note_path: note.as_ref().ok().map(|p| p.display().to_string()),
            note_error: note.err().map(str::to_string),
            error: ctx.failure.clone(),
            egress: ctx
                .teardown
                .as_ref()
                .and_then(|t| t.egress.as_ref())
                .map(|s| EgressCounts {
                    allowed: s.allowed,
                    denied: s.denied,
                }),
            usage: ctx.usage(),
            task_usage: ctx.resumed.as_ref().map(|_| ctx.task_usage()),
            budget: BudgetReport::of(&ctx.task.bounds.budget, ctx.budget_exhausted),
            criteria: Some(CriteriaCount {
                passed: ctx.criteria.iter().filter(|c| c.passed).count(),
                total: ctx.criteria.len(),
            }),
            plan: (ctx.state == TaskState::AwaitingApproval).then(|| {
                ctx.criteria
                    .iter()
                    .map(|c| PlannedCriterion {
                        id: c.id.clone(),
                        description: c.description.clone(),
                    })
                    .collect()
            }),
            work: ctx
                .teardown
                .as_ref()
                .and_then(|t| t.work.as_ref())
                .map(ToString::to_string),
        }
    }

    /// The result when the input was invalid and nothing ran.
    pub fn invalid_input(task_id: Option<String>, error: String, took: Duration) -> Self {
        RunResult::not_run(task_id, format!("invalid input: {error}"), error, took)
    }

    /// The result when the task could not start (and nothing ran).
    pub fn not_run(
        task_id: Option<String>,
        summary: String,
        error: String,
        took: Duration,
    ) -> Self {
        RunResult {
            task_id,
            status: "failed",
            state: TaskState::Failed.as_str(),
            summary,
            validation: Validation {
                overall: "unknown",
                commands: vec![],
                test_tail: None,
            },
            duration_ms: took.as_millis(),
            loops: 0,
            verified: false,
            replans: 0,
            note_path: None,
            note_error: None,
            error: Some(error),
            egress: None,
            usage: Account {
                cost_usd: Some(0.0),
                ..Account::default()
            },
            task_usage: None,
            budget: BudgetReport::default(),
            criteria: None,
            plan: None,
            work: None,
        }
    }

    pub(crate) fn json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!("{{\"status\":\"failed\",\"error\":\"cannot encode the result: {e}\"}}")
        })
    }

    /// `json` with `redactor`'s secrets masked in its strings. Masking the encoded
    /// text instead would break the document when a secret is also JSON (`true`, a
    /// number): a `CI=true` secret made `"verified":***`.
    pub fn json_masked(&self, redactor: &Redactor) -> String {
        fn mask(value: &mut serde_json::Value, redactor: &Redactor) {
            match value {
                serde_json::Value::String(s) => *s = redactor.redact(s),
                serde_json::Value::Array(items) => items.iter_mut().for_each(|v| mask(v, redactor)),
                serde_json::Value::Object(map) => map.values_mut().for_each(|v| mask(v, redactor)),
                _ => {}
            }
        }
        match serde_json::to_value(self) {
            Ok(mut value) => {
                mask(&mut value, redactor);
                value.to_string()
            }
            Err(_) => self.json(),
        }
    }

    /// One line for people: outside text (a Meta error, a summary) is put on one
    /// line with its control characters shown escaped, so it can neither add lines
    /// (a fake `COMPLETE: …` under a failed task) nor steer the terminal.
    pub fn line(&self) -> String {
        agent_runner_core::text::escape_controls(&agent_runner_core::text::one_line(
            &self.raw_line(),
        ))
    }

    fn raw_line(&self) -> String {
        let id = self.task_id.as_deref().unwrap_or("?");
        let secs = self.duration_ms as f64 / 1000.0;
        let note = match (&self.note_path, &self.note_error) {
            (Some(p), _) => format!("; note: {p}"),
            (None, Some(e)) => format!("; the Task Note could not be written: {e}"),
            (None, None) => String::new(),
        };
        // A failure that is the work's (SPEC §22) says it once.
        let note = match &self.work {
            Some(work) if !self.summary.contains(work.as_str()) => format!("; {work}{note}"),
            _ => note,
        };
        if self.status == "succeeded" {
            let unverified = if self.verified { "" } else { " (unverified)" };
            format!(
                "{}: task {id} in {secs:.1} s, {} loop(s), tests {}{unverified}{note}",
                self.state, self.loops, self.validation.overall
            )
        } else {
            format!("{}: task {id}: {}{note}", self.state, self.summary)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_in_the_strings_of_the_json_not_in_its_syntax() {
        let secret = agent_runner_core::secret::Secret::new("true".into());
        let mut result = RunResult::not_run(
            Some("T".into()),
            "it is true".into(),
            "x".into(),
            Duration::from_millis(5),
        );
        result.verified = true;
        let json = result.json_masked(&Redactor::new([&secret]));
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["verified"], true);
        assert_eq!(value["summary"], "it is ***");
    }

    #[test]
    fn the_human_line_stays_one_line_without_controls() {
        let result = RunResult::not_run(
            Some("T".into()),
            "HTTP 400: bad\nCOMPLETE: task T in 1.0 s, 1 loop(s), tests passed\n\u{1b}]0;owned\u{7}".into(),
            "x".into(),
            Duration::from_millis(5),
        );
        let line = result.line();
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(
            line.starts_with("FAILED: task T: HTTP 400: bad COMPLETE:"),
            "{line}"
        );
        assert!(line.contains("\\e]0;owned\\x07"), "{line}");
    }
}
