//! Choosing and claiming the next job (SPEC §12 step 1): the oldest claimable job
//! in `ipc/queue/` is renamed into `ipc/running/` (two orchestrators never get the
//! same job) and its owner written. A job whose task waits on a dependency stays
//! queued (BLOCKED); one whose dependency failed is claimed to be recorded as a
//! failed attempt; an unreadable job, or one naming no task, moves to `ipc/failed/`.

use std::collections::HashMap;

use super::attempt::Claimed;
use super::owner::Claimant;
use super::queue::{self, Entry};
use super::record::TaskView;
use super::status::{self, JobState, Readiness};
use super::store::TaskStore;
use super::{PipelineError, Workspace};

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
            match readiness(&store, &task, || {
                jobs.get_or_insert_with(|| queue::job_states(ws))
            }) {
                Readiness::Ready => None,
                Readiness::Waiting(_) => continue,
                Readiness::Failed(dep, why) => Some(format!("dependency {dep} {why}")),
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
