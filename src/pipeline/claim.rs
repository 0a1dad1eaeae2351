//! Choosing and claiming the next job (SPEC §12 step 1): the oldest claimable job
//! in `ipc/queue/` is renamed into `ipc/running/` (two orchestrators never get the
//! same job) and its owner written. A job whose task waits on a dependency stays
//! queued (BLOCKED); one whose dependency failed, or whose task is on a dependency
//! cycle, is claimed to be recorded as a failed attempt; an unreadable job, or one
//! naming no task, moves to `ipc/failed/`.

use std::collections::HashMap;

use super::attempt::Claimed;
use super::owner::Claimant;
use super::queue::{self, Entry};
use super::record::TaskView;
use super::status::{self, JobState, Readiness, TaskStatus};
use super::store::{Board, TaskStore};
use super::{PipelineError, Workspace, cycle};

/// The next job to run, claimed; None when no job is claimable now. Jobs moved to
/// `ipc/failed/` on the way are counted in `unreadable`.
pub fn next(ws: &Workspace, unreadable: &mut usize) -> Result<Option<Claimed>, PipelineError> {
    let store = TaskStore::new(ws);
    // Read once per call, and only if some task has dependencies.
    let mut jobs: Option<HashMap<String, (JobState, String)>> = None;
    for entry in queue::list(&ws.queue_dir()) {
        let job = match queue::read_job(&entry, &ws.id) {
            Ok(job) => job,
            Err(reason) => {
                reject(ws, &entry, &reason, unreadable)?;
                continue;
            }
        };
        let Some(task) = store.load(&job.task_id)? else {
            let reason = format!("task {} not found in workspace {}", job.task_id, ws.id);
            reject(ws, &entry, &reason, unreadable)?;
            continue;
        };
        let refusal = if task.deleted.is_some() {
            Some(format!("task {} was deleted", task.record.id))
        } else {
            let ready = readiness(&store, &task, || {
                jobs.get_or_insert_with(|| queue::job_states(ws))
            });
            // A task on a cycle would wait for itself forever: refused, whatever
            // state its dependencies are in now.
            let cycle = (ready != Readiness::Ready)
                .then(|| cycle_of(&store, &task))
                .flatten();
            match (ready, cycle) {
                (Readiness::Ready, _) => None,
                (_, Some(cycle)) => Some(format!("dependency cycle: {}", cycle::show(&cycle))),
                (Readiness::Waiting(_), None) => continue,
                (Readiness::Failed(dep, why), None) => Some(format!("dependency {dep} {why}")),
            }
        };
        if !queue::claim(ws, &entry.job_id)? {
            continue;
        }
        queue::write_owner(ws, &entry.job_id, &Claimant::this_process())?;
        log::info!(
            "job {}: claimed task {} \"{}\"",
            entry.job_id,
            task.record.id,
            crate::text::cut_chars(&crate::text::one_line(&task.record.title), 80)
        );
        return Ok(Some(Claimed {
            job_id: entry.job_id,
            task,
            refusal,
        }));
    }
    Ok(None)
}

fn reject(
    ws: &Workspace,
    entry: &Entry,
    reason: &str,
    unreadable: &mut usize,
) -> Result<(), PipelineError> {
    if queue::move_to_failed(ws, entry, reason)? {
        *unreadable += 1;
        log::warn!("job {}: moved to ipc/failed: {reason}", entry.job_id);
    }
    Ok(())
}

/// Warns about each job that stays queued behind a dependency: what `--once` leaves
/// behind when it stops.
pub fn warn_waiting(ws: &Workspace) {
    let Ok(board) = Board::load(ws) else { return };
    for task in &board.tasks {
        let Some((JobState::Queued, job)) = board.jobs.get(&task.record.id) else {
            continue;
        };
        if let Readiness::Waiting(dep) = board.readiness(task) {
            let status = board.status(&dep).unwrap_or(TaskStatus::Pending);
            let hint = if status == TaskStatus::Pending {
                " (no job: enqueue it with `agent-runner task run`)"
            } else {
                ""
            };
            log::warn!(
                "job {job}: task {} stays queued: its dependency {dep} is {}{hint}",
                task.record.id,
                status.as_str()
            );
        }
    }
}

/// The dependency cycle `task` is on, if any.
fn cycle_of(store: &TaskStore, task: &TaskView) -> Option<Vec<String>> {
    if task
        .record
        .depends_on
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        return None;
    }
    cycle::cycle_through(&task.record.id, |id| {
        if id == task.record.id {
            return task.record.depends_on.clone().unwrap_or_default();
        }
        store
            .load(id)
            .ok()
            .flatten()
            .and_then(|view| view.record.depends_on)
            .unwrap_or_default()
    })
}

/// Whether `task`'s job may run now: the "claimable now" decision. Without
/// dependencies, always; `jobs` gives the queued and running jobs by task.
pub fn readiness<'a>(
    store: &TaskStore,
    task: &TaskView,
    jobs: impl FnOnce() -> &'a HashMap<String, (JobState, String)>,
) -> Readiness {
    let deps = task.record.depends_on.as_deref().unwrap_or_default();
    if deps.is_empty() {
        return Readiness::Ready;
    }
    let jobs = jobs();
    status::readiness(deps, |dep| {
        let view = store.load(dep).ok().flatten()?;
        let job = jobs.get(dep).map_or(JobState::None, |(s, _)| *s);
        Some(status::derive(&view, job, false))
    })
}
