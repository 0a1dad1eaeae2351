//! The board: every task of a workspace with its derived status (SPEC §11), what
//! `task list`, `task show`, the web view and the claim decision read. A status
//! joins the task's lines (the TaskStore) with its job in the IPC directories
//! (`jobs`); a queued task is BLOCKED while a dependency has not succeeded.

use std::collections::HashMap;

use super::jobs;
use super::status::{self, JobState, Readiness, TaskStatus};
use crate::store::task_file::TaskView;
use crate::store::task_store::TaskStore;
use crate::{PipelineError, Workspace};

/// Tasks with their derived statuses: what `task list`, `task show` and the claim
/// decision read.
pub struct Board {
    pub tasks: Vec<TaskView>,
    /// Job state and job id by task id.
    pub jobs: HashMap<String, (JobState, String)>,
    statuses: HashMap<String, TaskStatus>,
}

impl Board {
    /// Reads every task and job of `ws`.
    pub fn load(ws: &Workspace) -> Result<Board, PipelineError> {
        Board::load_from(ws, &TaskStore::new(ws))
    }

    /// Reads every task of `store` and every job of `ws`.
    pub(crate) fn load_from(ws: &Workspace, store: &TaskStore) -> Result<Board, PipelineError> {
        let tasks = store.load_all()?;
        Ok(Board::of(tasks, jobs::job_states(ws)))
    }

    /// The board needed for the status of `task` alone: whether a queued task is
    /// BLOCKED depends on its dependencies' statuses, so only then is every task read.
    pub fn around(ws: &Workspace, task: &TaskView) -> Result<Board, PipelineError> {
        match &task.record.plan.depends_on {
            Some(deps) if !deps.is_empty() => Board::load(ws),
            _ => Ok(Board::of(vec![task.clone()], jobs::job_states(ws))),
        }
    }

    /// The board of these tasks and jobs.
    pub(crate) fn of(tasks: Vec<TaskView>, jobs: HashMap<String, (JobState, String)>) -> Board {
        let job_of = |id: &str| jobs.get(id).map_or(JobState::None, |(s, _)| *s);
        // Statuses without BLOCKED first: blocking depends on the others' statuses.
        let base: HashMap<String, TaskStatus> = tasks
            .iter()
            .map(|t| {
                (
                    t.record.id.clone(),
                    status::derive(t, job_of(&t.record.id), false),
                )
            })
            .collect();
        let statuses = tasks
            .iter()
            .map(|t| {
                let id = &t.record.id;
                let mut status = base[id];
                if status == TaskStatus::Queued && readiness(t, &base) != Readiness::Ready {
                    status = TaskStatus::Blocked;
                }
                (id.clone(), status)
            })
            .collect();
        Board {
            tasks,
            jobs,
            statuses,
        }
    }

    /// The derived status of task `id`.
    pub fn status(&self, id: &str) -> Option<TaskStatus> {
        self.statuses.get(id).copied()
    }

    /// Whether task `id`'s job may run now.
    pub(crate) fn readiness(&self, task: &TaskView) -> Readiness {
        readiness(task, &self.statuses)
    }
}

fn readiness(task: &TaskView, statuses: &HashMap<String, TaskStatus>) -> Readiness {
    let deps = task.record.plan.depends_on.as_deref().unwrap_or_default();
    status::readiness(deps, |dep| statuses.get(dep).copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::task_file::AttemptStatus;
    use crate::store::task_file::tests::{attempt, record};

    #[test]
    fn a_queued_task_waiting_on_a_dependency_is_blocked() {
        let mut dep = TaskView {
            record: record("dep"),
            deleted: None,
            attempts: vec![],
            attempt_count: 0,
        };
        let mut task = TaskView {
            record: record("t"),
            deleted: None,
            attempts: vec![],
            attempt_count: 0,
        };
        task.record.plan.depends_on = Some(vec!["dep".into()]);
        let jobs: HashMap<String, (JobState, String)> =
            [("t".to_string(), (JobState::Queued, "j".to_string()))].into();
        let board = Board::of(vec![dep.clone(), task.clone()], jobs.clone());
        assert_eq!(board.status("t"), Some(TaskStatus::Blocked));
        assert_eq!(board.status("dep"), Some(TaskStatus::Pending));
        dep.attempts.push(attempt("j0", AttemptStatus::Succeeded));
        let board = Board::of(vec![dep, task.clone()], jobs);
        assert_eq!(board.status("t"), Some(TaskStatus::Queued));
        assert_eq!(board.readiness(&task), Readiness::Ready);
    }
}
