//! Asking for a task to run: the checks that `task run` and the web view's Run
//! button share before they write a job into the queue. A task runs at most once at
//! a time: one that is queued, blocked or running is not enqueued again.

use super::status::TaskStatus;
use super::store::Board;
use super::{PipelineError, Workspace, queue};

/// Why a task was not enqueued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("task {id} not found in workspace {workspace}")]
    NotFound { id: String, workspace: String },
    #[error("task {0} is deleted")]
    Deleted(String),
    #[error("task {id} is already {} (job {job}); not enqueued again", status.as_str())]
    Busy {
        id: String,
        status: TaskStatus,
        job: String,
    },
}

/// What asking for a run gave.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error(transparent)]
    Failed(#[from] PipelineError),
}

/// Whether task `id` may be enqueued, as `board` stands.
pub fn check(board: &Board, workspace_id: &str, id: &str) -> Result<(), Refused> {
    match board.status(id) {
        None => Err(Refused::NotFound {
            id: id.to_string(),
            workspace: workspace_id.to_string(),
        }),
        Some(TaskStatus::Deleted) => Err(Refused::Deleted(id.to_string())),
        Some(status @ (TaskStatus::Queued | TaskStatus::Blocked | TaskStatus::Running)) => {
            Err(Refused::Busy {
                id: id.to_string(),
                status,
                job: board
                    .jobs
                    .get(id)
                    .map_or("?".to_string(), |(_, j)| j.clone()),
            })
        }
        Some(TaskStatus::Pending | TaskStatus::Failed | TaskStatus::Succeeded) => Ok(()),
    }
}

/// Enqueues a job for task `id` if `check` allows it; returns the job id.
pub fn enqueue(ws: &Workspace, board: &Board, id: &str) -> Result<String, RunError> {
    check(board, &ws.id, id)?;
    Ok(queue::enqueue(ws, id)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::record::TaskView;
    use crate::pipeline::record::tests::record;
    use crate::pipeline::status::JobState;
    use std::collections::HashMap;

    #[test]
    fn only_idle_tasks_may_be_enqueued() {
        let view = |id: &str| TaskView {
            record: record(id),
            deleted: None,
            attempts: vec![],
            attempt_count: 0,
        };
        let jobs: HashMap<String, (JobState, String)> =
            [("busy".to_string(), (JobState::Running, "j-1".to_string()))].into();
        let board = Board::of(vec![view("idle"), view("busy")], jobs);
        assert_eq!(check(&board, "ws", "idle"), Ok(()));
        assert_eq!(
            check(&board, "ws", "busy").unwrap_err().to_string(),
            "task busy is already RUNNING (job j-1); not enqueued again"
        );
        assert_eq!(
            check(&board, "ws", "nope").unwrap_err().to_string(),
            "task nope not found in workspace ws"
        );
    }
}
