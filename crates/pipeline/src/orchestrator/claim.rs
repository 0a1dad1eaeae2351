//! Choosing and claiming the next job (SPEC §12 step 1): the oldest claimable job
//! in `ipc/queue/` is renamed into `ipc/running/` (two orchestrators never get the
//! same job) and its owner written. A job whose task waits on a dependency stays
//! queued (BLOCKED); one whose dependency failed, or whose task is on a dependency
//! cycle, is claimed to be recorded as a failed attempt; an unreadable job, or one
//! whose task cannot be found or read, moves to `ipc/failed/` with the reason, and
//! the jobs behind it are looked at all the same.
//!
//! Each look reads the board once (task files through a cache that re-reads only
//! changed files) and decides every queued job from it. A look that finds nothing
//! to claim is not repeated until the queue, running or task directories or the
//! plan change, or `RECHECK` has passed (a task file edited in place changes no
//! directory): 500 jobs blocked behind a chain cost an idle orchestrator nothing.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant, SystemTime};

use super::attempt::Claimed;
use crate::queue::board::Board;
use crate::queue::board_cache::BoardCache;
use crate::queue::claimant::Claimant;
use crate::queue::jobs::{self, Entry};
use crate::queue::status::{JobState, Readiness, TaskStatus};
use crate::store::cycle;
use crate::store::task_file::TaskView;
use crate::store::task_store::TaskStore;
use crate::{PipelineError, Workspace};

/// How long a look that found nothing stands while no directory changed.
const RECHECK: Duration = Duration::from_secs(5);

/// What the claim loop keeps between looks.
pub(crate) struct Claimer {
    boards: BoardCache,
    /// The directories as they were when the last look found nothing to claim.
    quiet: Option<Snapshot>,
    looked: Instant,
}

impl Default for Claimer {
    fn default() -> Self {
        Claimer {
            boards: BoardCache::default(),
            quiet: None,
            looked: Instant::now(),
        }
    }
}

impl Claimer {
    /// The next job to run, claimed; None when no job is claimable now. Jobs moved
    /// to `ipc/failed/` on the way are counted in `unreadable`.
    pub(crate) fn next(
        &mut self,
        ws: &Workspace,
        unreadable: &mut usize,
    ) -> Result<Option<Claimed>, PipelineError> {
        let snapshot = Snapshot::take(ws);
        if snapshot.is_some() && snapshot == self.quiet && self.looked.elapsed() < RECHECK {
            return Ok(None);
        }
        self.quiet = None;
        self.looked = Instant::now();
        let claimed = self.look(ws, unreadable)?;
        if claimed.is_none() {
            self.quiet = snapshot;
        }
        Ok(claimed)
    }

    fn look(
        &self,
        ws: &Workspace,
        unreadable: &mut usize,
    ) -> Result<Option<Claimed>, PipelineError> {
        let entries = jobs::list(&ws.queue_dir());
        if entries.is_empty() {
            return Ok(None);
        }
        let store = TaskStore::new(ws);
        let board = self.boards.load(ws)?;
        let tasks: HashMap<&str, &TaskView> = board
            .tasks
            .iter()
            .map(|t| (t.record.id.as_str(), t))
            .collect();
        let mut cycles: Option<HashSet<&str>> = None;
        for entry in entries {
            let job = match jobs::read_job(&entry, &ws.id) {
                Ok(job) => job,
                Err(reason) => {
                    reject(ws, &entry, &reason.to_string(), unreadable)?;
                    continue;
                }
            };
            let task = match tasks.get(job.task_id.as_str()) {
                Some(task) => (*task).clone(),
                // Not on the board: missing, unreadable, or created since.
                None => match store.load(&job.task_id) {
                    Ok(Some(task)) => task,
                    Ok(None) => {
                        let reason =
                            format!("task {} not found in workspace {}", job.task_id, ws.id);
                        reject(ws, &entry, &reason, unreadable)?;
                        continue;
                    }
                    Err(e) => {
                        reject(
                            ws,
                            &entry,
                            &format!("task {}: {e}", job.task_id),
                            unreadable,
                        )?;
                        continue;
                    }
                },
            };
            let refusal = if task.deleted.is_some() {
                Some(format!("task {} was deleted", task.record.id))
            } else {
                let ready = board.readiness(&task);
                // A task on a cycle would wait for itself forever: refused, whatever
                // state its dependencies are in now.
                let cycle = (ready != Readiness::Ready)
                    .then(|| {
                        let cycles = cycles.get_or_insert_with(|| on_cycles(&tasks));
                        cycles
                            .contains(task.record.id.as_str())
                            .then(|| ring(&tasks, &task))
                            .flatten()
                    })
                    .flatten();
                match (ready, cycle) {
                    (Readiness::Ready, _) => None,
                    (_, Some(cycle)) => Some(format!("dependency cycle: {}", cycle::show(&cycle))),
                    (Readiness::Waiting(_), None) => continue,
                    (Readiness::Failed(dep, why), None) => Some(format!("dependency {dep} {why}")),
                }
            };
            if !jobs::claim(ws, &entry.job_id)? {
                continue;
            }
            jobs::write_owner(ws, &entry.job_id, &Claimant::this_process())?;
            log::info!(
                "job {}: claimed task {} \"{}\"",
                entry.job_id,
                task.record.id,
                agent_runner_core::text::cut_chars(
                    &agent_runner_core::text::one_line(&task.record.title),
                    80
                )
            );
            return Ok(Some(Claimed {
                job_id: entry.job_id,
                task,
                refusal,
                resume_from: job.resume_from,
                clone_job: job.clone_job,
                try_of: job.try_of,
                message: job.message,
                restart: job.restart,
                on_branch: job.on_branch,
                lost_host: job.lost_host,
                host: None,
            }));
        }
        Ok(None)
    }
}

/// The times and identities of the directories whose changes can make a job
/// claimable: the queue, the running jobs (an attempt recorded removes its job
/// there), the task files (a new task) and the workspace (a plan edit commits by
/// replacing `wbs.json`). None when one cannot be read, or changed within the last
/// whole second: it could change again within the same timestamp tick without its
/// times moving, so its snapshot is not trusted yet.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snapshot(Vec<(i64, i64, i64, i64, u64)>);

impl Snapshot {
    fn take(ws: &Workspace) -> Option<Snapshot> {
        let now = SystemTime::now();
        let mut stamps = Vec::with_capacity(4);
        for dir in [
            ws.queue_dir(),
            ws.running_dir(),
            ws.tasks_dir(),
            ws.dir.clone(),
        ] {
            let meta = std::fs::metadata(&dir).ok()?;
            let stamp = (
                meta.mtime(),
                meta.mtime_nsec(),
                meta.ctime(),
                meta.ctime_nsec(),
                meta.ino(),
            );
            let changed = (stamp.0.max(stamp.2) + 1).max(0) as u64;
            let changed = SystemTime::UNIX_EPOCH + Duration::from_secs(changed);
            if now.duration_since(changed).is_err() {
                return None;
            }
            stamps.push(stamp);
        }
        Some(Snapshot(stamps))
    }
}

/// The tasks on dependency cycles.
fn on_cycles<'a>(tasks: &HashMap<&'a str, &'a TaskView>) -> HashSet<&'a str> {
    let graph: HashMap<&str, Vec<&str>> = tasks
        .iter()
        .map(|(id, t)| {
            let deps = t.record.plan.depends_on.as_deref().unwrap_or_default();
            (*id, deps.iter().map(String::as_str).collect())
        })
        .collect();
    cycle::on_cycles(&graph)
}

/// The ring through `task`, named from it.
fn ring(tasks: &HashMap<&str, &TaskView>, task: &TaskView) -> Option<Vec<String>> {
    cycle::cycle_through(&task.record.id, |id| {
        tasks
            .get(id)
            .and_then(|t| t.record.plan.depends_on.clone())
            .unwrap_or_default()
    })
}

fn reject(
    ws: &Workspace,
    entry: &Entry,
    reason: &str,
    unreadable: &mut usize,
) -> Result<(), PipelineError> {
    if jobs::move_to_failed(ws, entry, reason)? {
        *unreadable += 1;
        log::warn!("job {}: moved to ipc/failed: {reason}", entry.job_id);
    }
    Ok(())
}

/// Warns about each job that stays queued behind a dependency: what `--once` leaves
/// behind when it stops.
pub(crate) fn warn_waiting(ws: &Workspace) {
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
