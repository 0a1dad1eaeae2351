//! The JSON documents that describe tasks to other programs: `task list --json`,
//! `task show --json`, and the web view's API (`/api/tasks`, `/api/tasks/<id>`),
//! which serves the same documents, so that a script written against one works
//! against the other.

use std::path::Path;

use serde::Serialize;
use serde_json::{Value, json};

use super::board::Board;
use super::status::{self, JobState, TaskStatus};
use crate::Workspace;
use crate::store::pinned_test::TestSource;
use crate::store::task_file::{Attempt, TaskView};
use agent_runner_core::usage::{Account, ModelUsage};

/// The tasks of a board that a list shows, with their statuses, oldest first;
/// deleted tasks only with `all`.
pub fn rows(board: &Board, all: bool) -> Vec<(&TaskView, TaskStatus)> {
    let mut rows: Vec<(&TaskView, TaskStatus)> = board
        .tasks
        .iter()
        .filter_map(|t| Some((t, board.status(&t.record.id)?)))
        .filter(|(_, s)| all || *s != TaskStatus::Deleted)
        .collect();
    rows.sort_by(|a, b| {
        (&a.0.record.created_at, &a.0.record.id).cmp(&(&b.0.record.created_at, &b.0.record.id))
    });
    rows
}

/// `task list --json` and `/api/tasks`.
#[derive(Serialize)]
pub struct TaskList<'a> {
    pub(crate) workspace_id: &'a str,
    pub(crate) root_dir: &'a Path,
    pub(crate) tasks: Vec<ListedTask<'a>>,
}

/// One task in a `TaskList`.
#[derive(Serialize)]
pub(crate) struct ListedTask<'a> {
    pub(crate) id: &'a str,
    pub(crate) title: &'a str,
    pub(crate) status: &'static str,
    /// SUCCEEDED with a passing test (SPEC §16); false for every other status.
    pub(crate) verified: bool,
    pub(crate) created_at: &'a str,
    pub(crate) job_id: Option<&'a str>,
    pub(crate) attempts: usize,
    pub(crate) last_attempt: Option<AttemptBrief<'a>>,
}

/// An attempt without its result, as a list shows it.
#[derive(Serialize)]
pub(crate) struct AttemptBrief<'a> {
    pub(crate) attempt_id: &'a str,
    pub(crate) job_id: &'a str,
    pub(crate) status: &'static str,
    pub(crate) started_at: &'a str,
    pub(crate) finished_at: &'a str,
    pub(crate) duration_ms: u64,
    pub(crate) error: Option<&'a str>,
    pub(crate) test_source: Option<TestSource>,
    pub(crate) verified: bool,
    /// The run's and the Task Builder's tokens together (SPEC §15); null when not
    /// recorded.
    pub(crate) tokens: Option<u64>,
    /// Their cost; null when not known.
    pub(crate) cost_usd: Option<f64>,
    pub(crate) usage: Option<&'a Account>,
    pub(crate) builder_usage: Option<&'a ModelUsage>,
    pub(crate) budget: Option<&'a Value>,
    /// The Docker host it ran on (SPEC §22); null without hosts.
    pub(crate) host: Option<&'a str>,
}

impl<'a> TaskList<'a> {
    /// The list of `rows` (from `rows`) of `board`.
    pub fn new(ws: &'a Workspace, board: &'a Board, rows: &[(&'a TaskView, TaskStatus)]) -> Self {
        let tasks = rows
            .iter()
            .map(|(t, status)| ListedTask {
                id: &t.record.id,
                title: &t.record.title,
                status: status.as_str(),
                verified: status::verified(*status, t),
                created_at: &t.record.created_at,
                job_id: board.jobs.get(&t.record.id).map(|(_, j)| j.as_str()),
                attempts: t.attempt_count,
                last_attempt: t.latest().map(AttemptBrief::of),
            })
            .collect();
        TaskList {
            workspace_id: &ws.id,
            root_dir: &ws.root_dir,
            tasks,
        }
    }
}

impl<'a> AttemptBrief<'a> {
    /// The brief of attempt `a`.
    pub(crate) fn of(a: &'a Attempt) -> Self {
        AttemptBrief {
            attempt_id: &a.attempt_id,
            job_id: &a.job_id,
            status: a.status.as_str(),
            started_at: &a.started_at,
            finished_at: &a.finished_at,
            duration_ms: a.duration_ms,
            error: a.error.as_deref(),
            test_source: a.test_source,
            verified: a.is_verified(),
            tokens: a.total_tokens(),
            cost_usd: a.cost_usd(),
            usage: a.usage.as_ref(),
            builder_usage: a.builder_usage.as_ref(),
            budget: a.budget.as_ref(),
            host: a.host.as_deref(),
        }
    }
}

/// `task show --json` and `/api/tasks/<id>`: the record, status, job, every attempt
/// and the latest attempt's result.
pub fn detail(task: &TaskView, status: TaskStatus, job: Option<&(JobState, String)>) -> Value {
    json!({
        "task": task.record,
        "status": status.as_str(),
        "verified": status::verified(status, task),
        "deleted": task.deleted,
        "job": job.map(|(state, id)| json!({"id": id, "state": job_state(*state)})),
        "attempts": task.attempts,
        "latest_result": task.latest().and_then(Attempt::result_value),
    })
}

/// A job state as the JSON documents name it.
pub(crate) fn job_state(state: JobState) -> &'static str {
    match state {
        JobState::None => "none",
        JobState::Queued => "queued",
        JobState::Running => "running",
    }
}
