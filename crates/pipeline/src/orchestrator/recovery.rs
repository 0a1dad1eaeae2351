//! Start-up repair (SPEC §12): a job in `ipc/running/` whose owner is gone (its
//! orchestrator was killed, or the machine rebooted) becomes a failed attempt
//! "orchestrator stopped": never run twice, never lost. One orchestrator at a time
//! repairs (an exclusive `flock` on `ipc/.recover.lock`), and recording is
//! idempotent per job, so two orchestrators starting together record it once.

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime};

use crate::Workspace;
use crate::ended::{self, Tell};
use crate::queue::jobs::{self, Entry};
use crate::store::task_file::{Attempt, AttemptStatus};
use crate::store::task_store::TaskStore;
use agent_runner_core::fs::lock;
use agent_runner_core::interrupt::Interrupt;

/// A running job without an owner file is being claimed right now, unless it has
/// been like that for this long (its claimer died between the rename and the write).
const CLAIM_GRACE: Duration = Duration::from_secs(30);

/// Records the orphaned running jobs of `ws` as failed attempts, then tells the
/// notifiers of them (the orchestrator that ran them was killed before it could,
/// SPEC §23); returns how many.
pub(crate) fn recover(ws: &Workspace, interrupt: Interrupt) -> usize {
    let lock_path = ws.dir.join("ipc/.recover.lock");
    let Ok(one_at_a_time) = lock::open(&lock_path) else {
        log::warn!("cannot open {}; skipping recovery", lock_path.display());
        return 0;
    };
    if lock::lock(&one_at_a_time).is_err() {
        return 0;
    }
    let mut recovered = 0;
    let mut recorded = Vec::new();
    for entry in jobs::list(&ws.running_dir()) {
        if let Some(reason) = orphaned(ws, &entry)
            && settle(ws, &entry, &reason, &mut recorded)
        {
            recovered += 1;
        }
    }
    // Told once the repairs are done: a slow webhook holds no other orchestrator.
    drop(one_at_a_time);
    for (title, attempt) in &recorded {
        ended::tell(ws, title, attempt, interrupt);
    }
    recovered
}

/// Why `entry` is orphaned, or None if its owner may still be running it.
fn orphaned(ws: &Workspace, entry: &Entry) -> Option<String> {
    match jobs::read_owner(ws, &entry.job_id) {
        Some((owner, _)) if owner.is_gone() => Some(format!(
            "orchestrator stopped (pid {} on {} is gone; it had claimed the job at {})",
            owner.owner.pid, owner.owner.host, owner.claimed_at
        )),
        Some(_) => None,
        None => {
            // rename keeps the modification time; the change time is the claim.
            let meta = std::fs::metadata(&entry.path).ok()?;
            let changed = SystemTime::UNIX_EPOCH + Duration::from_secs(meta.ctime().max(0) as u64);
            let age = SystemTime::now()
                .duration_since(changed)
                .unwrap_or_default();
            (age > CLAIM_GRACE)
                .then(|| "orchestrator stopped (it left no owner record)".to_string())
        }
    }
}

/// Records the orphan (`ended::settle`, its notifiers told later); true when it was
/// settled here, as a failed attempt, as a job moved to `ipc/failed/`, or not at
/// all because recording failed (an error). A recorded attempt is added to
/// `recorded`, with its task's title.
fn settle(
    ws: &Workspace,
    entry: &Entry,
    reason: &str,
    recorded: &mut Vec<(String, Attempt)>,
) -> bool {
    let job = match jobs::read_job(entry, &ws.id) {
        Ok(job) => job,
        Err(e) => return drop_job(ws, entry, &e.to_string()),
    };
    let title = match TaskStore::new(ws).load(&job.task_id) {
        Ok(Some(view)) => view.record.title,
        Ok(None) => {
            let why = format!("task {} not found in workspace {}", job.task_id, ws.id);
            return drop_job(ws, entry, &why);
        }
        Err(e) => return drop_job(ws, entry, &format!("task {}: {e}", job.task_id)),
    };
    let (started_at, duration_ms) = match jobs::read_owner(ws, &entry.job_id) {
        Some((owner, claimed)) => (
            owner.claimed_at,
            SystemTime::now()
                .duration_since(claimed)
                .unwrap_or_default()
                .as_millis() as u64,
        ),
        None => (String::new(), 0),
    };
    let log_dir = ws.job_log_dir(&entry.job_id);
    // Killed while bringing the branch back: the branch must agree with the record.
    let mut reason = match crate::clones::reconcile(&ws.root_dir, &log_dir) {
        Some(branch) => format!("{reason}; {branch}"),
        None => reason.to_string(),
    };
    let clone = ws
        .clones_dir()
        .join(job.clone_job.as_deref().unwrap_or(&entry.job_id));
    if clone.is_dir() {
        reason = format!("{reason} ({})", super::attempt::kept_clone(&clone));
    }
    let error = format!(
        "{reason}; the runner's log, if it started: {}",
        log_dir.join("runner.stderr.log").display()
    );
    let mut attempt = Attempt {
        error: Some(error),
        resumed_from: job.resume_from.clone(),
        clone_job: job.clone_job.clone(),
        try_of: job.try_of.clone(),
        message: job.message.clone(),
        ..Attempt::ended(
            &entry.job_id,
            &job.task_id,
            AttemptStatus::Failed,
            started_at,
            duration_ms,
            &log_dir,
        )
    };
    // The last try of a group to end may be this one: its group is then judged.
    let settled = ended::settle(
        ws,
        &title,
        &mut attempt,
        Tell::Later,
        Interrupt::never(),
        |_, path| {
            log::warn!(
                "job {}: task {}: {reason}; recorded as a failed attempt; result {}",
                entry.job_id,
                job.task_id,
                path.display()
            );
        },
    );
    match settled {
        Ok(_) => recorded.push((title, attempt)),
        Err(e) => log::error!("job {}: cannot record it as stopped: {e}", entry.job_id),
    }
    true
}

/// Moves a running job that cannot be recorded into `ipc/failed/`, with the reason;
/// true when it was moved here.
fn drop_job(ws: &Workspace, entry: &Entry, why: &str) -> bool {
    let moved = jobs::move_to_failed(ws, entry, why).unwrap_or_else(|e| {
        log::error!(
            "job {}: {why}; and cannot move it to ipc/failed: {e}",
            entry.job_id
        );
        true
    });
    let _ = std::fs::remove_file(
        ws.running_dir()
            .join(format!("{}.owner.json", entry.job_id)),
    );
    if moved {
        log::warn!("job {}: moved to ipc/failed: {why}", entry.job_id);
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn one_orchestrator_at_a_time_repairs() {
        let (ws, base) = crate::store::workspace::scratch("recover");
        // Another orchestrator is repairing: it holds the lock (even shared).
        let other = std::fs::File::create(ws.dir.join("ipc/.recover.lock")).unwrap();
        assert!(lock::try_lock(&other, lock::Mode::Shared).unwrap());
        let (done, finished) = mpsc::channel();
        let waiting = ws.clone();
        std::thread::spawn(move || done.send(recover(&waiting, Interrupt::never())).unwrap());
        assert!(
            finished.recv_timeout(Duration::from_millis(300)).is_err(),
            "it waits for the other"
        );
        drop(other);
        assert_eq!(finished.recv_timeout(Duration::from_secs(5)), Ok(0));
        std::fs::remove_dir_all(base).unwrap();
    }
}
