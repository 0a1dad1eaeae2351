//! Asking for a task to run: the checks that `task run` and the web view's Run
//! button share before they write a job into the queue. A task runs at most once at
//! a time: one that is queued, blocked or running is not enqueued again. The check
//! and the write happen under `enqueue.lock` in the workspace, on the task as it
//! stands then, so two requests (two servers, a server and the CLI) never both
//! enqueue it. A failed attempt can also be continued (`enqueue_resume`).

use std::fs::File;

use super::board::Board;
use super::jobs::{self, Continuing};
use super::status::TaskStatus;
use crate::store::task_file::AttemptStatus;
use crate::store::task_store::TaskStore;
use crate::{PipelineError, Workspace};
use agent_runner_core::fs::{Dir, lock};

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
    #[error("task {id} cannot be continued: {why}")]
    NotResumable { id: String, why: String },
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
pub(crate) fn check(board: &Board, workspace_id: &str, id: &str) -> Result<(), Refused> {
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
        Some(
            TaskStatus::Pending
            | TaskStatus::Failed
            | TaskStatus::AwaitingApproval
            | TaskStatus::Succeeded,
        ) => Ok(()),
    }
}

/// The tasks `task run --all` enqueues: every one not yet succeeded and not queued,
/// blocked, running or deleted, oldest first.
pub fn not_yet_run(ws: &Workspace) -> Result<Vec<String>, PipelineError> {
    let board = Board::load(ws)?;
    let mut tasks: Vec<_> = board
        .tasks
        .iter()
        .filter(|t| {
            matches!(
                board.status(&t.record.id),
                Some(TaskStatus::Pending | TaskStatus::Failed)
            )
        })
        .collect();
    tasks.sort_by(|a, b| {
        (&a.record.created_at, &a.record.id).cmp(&(&b.record.created_at, &b.record.id))
    });
    Ok(tasks.into_iter().map(|t| t.record.id.clone()).collect())
}

/// Enqueues a job for task `id` if `check` allows it; returns the job id.
pub fn enqueue(ws: &Workspace, id: &str) -> Result<String, RunError> {
    let _one_at_a_time = lock(ws)?;
    // Queued and blocked are both refused, so the task alone decides: no need to
    // read its dependencies.
    let task = TaskStore::new(ws).load(id)?;
    let board = Board::of(task.into_iter().collect(), jobs::job_states(ws));
    check(&board, &ws.id, id)?;
    Ok(jobs::enqueue(ws, id)?)
}

/// Enqueues task `id` as `n` tries of a best of N run (SPEC §23), `kinds` cycled
/// over them (none: the workspace's kind for all), if `check` allows it; returns
/// the tries' job ids. Each try runs in a clone of its own: root_dir must be a git
/// repository.
pub fn enqueue_tries(
    ws: &Workspace,
    id: &str,
    n: u32,
    kinds: &[String],
) -> Result<Vec<String>, RunError> {
    crate::store::tries::check_count(n, "--tries")
        .map_err(|e| PipelineError::Invalid(e.to_string()))?;
    if !kinds.is_empty() {
        crate::store::tries::check_kinds(kinds, "--kinds")
            .map_err(|e| PipelineError::Invalid(e.to_string()))?;
        ws.defaults
            .check_kind_settings(kinds)
            .map_err(|e| PipelineError::Invalid(e.to_string()))?;
    }
    if n == 1 && kinds.is_empty() {
        return Ok(vec![enqueue(ws, id)?]);
    }
    if !crate::clones::is_git_root(&ws.root_dir) {
        return Err(PipelineError::Invalid(format!(
            "--tries: {} is not the top of a git work tree; each try runs in a clone of its own",
            ws.root_dir.display()
        ))
        .into());
    }
    let _one_at_a_time = lock(ws)?;
    let task = TaskStore::new(ws).load(id)?;
    let board = Board::of(task.into_iter().collect(), jobs::job_states(ws));
    check(&board, &ws.id, id)?;
    Ok(jobs::enqueue_tries(
        ws,
        id,
        crate::store::tries::plan(n, kinds),
    )?)
}

/// Enqueues a job that continues task `id`'s latest attempt, a failed (or
/// interrupted, or stopped) one whose runner left its state (SPEC §19): in the same
/// directory, the attempt's clone if it had one. Returns the job id.
pub fn enqueue_resume(ws: &Workspace, id: &str) -> Result<String, RunError> {
    continue_latest(
        ws,
        id,
        &[AttemptStatus::Failed],
        Continuing::default(),
        || Ok(()),
    )
}

/// Enqueues a follow-up (`task run --resume ID --message`, SPEC §23): task `id`'s
/// latest attempt goes on with `message`, whether it failed, succeeded (the same
/// criteria plus the message) or awaits approval. After a success whose clone was
/// removed once its branch came back, the task runs again from its start, the
/// message added to its instructions, in a new clone of that branch; a branch no
/// longer there is refused. Returns the job id.
pub fn enqueue_follow_up(ws: &Workspace, id: &str, message: &str) -> Result<String, RunError> {
    let message = super::message::check_message(message)
        .map_err(|e| PipelineError::Invalid(format!("--message: {e}")))?;
    let allowed = [
        AttemptStatus::Failed,
        AttemptStatus::Succeeded,
        AttemptStatus::AwaitingApproval,
    ];
    let continuing = Continuing {
        message: Some(message),
        ..Continuing::default()
    };
    continue_latest(ws, id, &allowed, continuing, || Ok(()))
}

/// Enqueues a job that goes on from task `id`'s latest attempt, if its status is one
/// of `allowed` and its runner left its state; `continuing` says how (its
/// `resume_from` and `clone_job` are set here). `before` runs under the enqueue
/// lock once every check passed, just before the job is written; its error stops it.
pub(crate) fn continue_latest(
    ws: &Workspace,
    id: &str,
    allowed: &[AttemptStatus],
    mut continuing: Continuing,
    before: impl FnOnce() -> Result<(), PipelineError>,
) -> Result<String, RunError> {
    let _one_at_a_time = lock(ws)?;
    let task = TaskStore::new(ws).load(id)?;
    let board = Board::of(task.iter().cloned().collect(), jobs::job_states(ws));
    check(&board, &ws.id, id)?;
    let refuse = |why: String| Refused::NotResumable {
        id: id.to_string(),
        why,
    };
    let Some(latest) = task.as_ref().and_then(|t| t.latest()) else {
        return Err(refuse("it has not run yet: run it instead".into()).into());
    };
    if !allowed.contains(&latest.status) {
        let nothing = if allowed == [AttemptStatus::AwaitingApproval] {
            "it awaits no approval"
        } else {
            "there is nothing to continue; run it again instead"
        };
        return Err(refuse(format!(
            "its latest attempt (job {}) {}: {nothing}",
            latest.job_id,
            latest.status.as_str()
        ))
        .into());
    }
    // The judged line of a best of N run goes on from its winning try's job.
    let Some(work_job) = latest.work_job() else {
        return Err(refuse(format!(
            "its latest attempt (job {}) is a best of N run that no try won: run it again instead",
            latest.job_id
        ))
        .into());
    };
    let work_job = work_job.to_string();
    let clone_job = latest.clone_job.clone().or_else(|| {
        let own = ws.clones_dir().join(&work_job);
        std::fs::symlink_metadata(own)
            .is_ok_and(|m| m.is_dir())
            .then(|| work_job.clone())
    });
    let run_dir = clone_job
        .as_ref()
        .map_or(ws.root_dir.clone(), |c| ws.clones_dir().join(c));
    let config = ws.job_log_dir(&work_job).join("task-config.yaml");
    let state = format!("{id}.json");
    let saved = Dir::open(&run_dir)
        .and_then(|d| d.existing(agent_runner_core::private_dir::DIR_NAME))
        .and_then(|d| d.existing("state"))
        .and_then(|d| d.exists(&state))
        .unwrap_or(false);
    // A follow-up after a success whose clone is gone (its branch came back) runs
    // afresh in a new clone from that branch, so it builds on the result.
    let follow_up = continuing.message.is_some() && !continuing.restart;
    if let (false, true, AttemptStatus::Succeeded, Some(branch), true) = (
        saved,
        follow_up,
        latest.status,
        &latest.branch,
        config.is_file(),
    ) {
        crate::clones::branch_tip(&ws.root_dir, branch).map_err(|e| refuse(e.to_string()))?;
        continuing.resume_from = Some(work_job);
        continuing.restart = true;
        continuing.on_branch = true;
        before()?;
        return Ok(jobs::enqueue_continuing(ws, id, continuing)?);
    }
    if !saved || !config.is_file() {
        let why = if latest.status == AttemptStatus::Succeeded && latest.branch.is_some() {
            "its clone was removed once its branch was brought back"
        } else {
            "it ended before agent-runner ran its task"
        };
        return Err(refuse(format!(
            "its latest attempt (job {work_job}) left no saved state in {} ({why}): run it again instead",
            run_dir.display()
        ))
        .into());
    }
    continuing.resume_from = Some(work_job);
    continuing.clone_job = clone_job;
    before()?;
    Ok(jobs::enqueue_continuing(ws, id, continuing)?)
}

/// The workspace's enqueue lock, waited for: it is held for a few file reads.
fn lock(ws: &Workspace) -> Result<File, PipelineError> {
    let path = ws.dir.join("enqueue.lock");
    let file = lock::open(&path).map_err(PipelineError::io("open", path.clone()))?;
    lock::lock(&file).map_err(PipelineError::io("lock", path))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::status::JobState;
    use crate::store::task_file::TaskView;
    use crate::store::task_file::tests::record;
    use std::collections::HashMap;

    /// Many requests at once for one task, as from two servers and the CLI: one job.
    #[test]
    fn concurrent_requests_enqueue_a_task_once() {
        let (ws, base) = crate::store::workspace::scratch("run-request");
        TaskStore::new(&ws).create(&record("t-1")).unwrap();
        for round in 0..10 {
            let start = std::sync::Barrier::new(8);
            let enqueued = std::thread::scope(|s| {
                let requests: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            enqueue(&ws, "t-1").is_ok()
                        })
                    })
                    .collect();
                requests
                    .into_iter()
                    .map(|r| r.join().unwrap())
                    .filter(|&ok| ok)
                    .count()
            });
            let queued = jobs::list(&ws.queue_dir()).len();
            assert_eq!((enqueued, queued), (1, 1), "round {round}");
            for entry in jobs::list(&ws.queue_dir()) {
                std::fs::remove_file(entry.path).unwrap();
            }
        }
        std::fs::remove_dir_all(base).unwrap();
    }

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
