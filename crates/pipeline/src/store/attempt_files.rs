//! Where an attempt's files are, as far as the workspace's own directories say: the
//! orchestrator's logs of the job in `logs/<job-id>/`, and the runner's (the Task
//! Note, run and test logs) in `.agent-runner/` of root_dir or of the attempt's
//! clone, or in `logs/<job-id>/agent-runner/` once a succeeded clone is cleaned up,
//! whichever the result's `note_path` names (for the judged line of a best of N
//! run, the winning try's job's). An attempt line in the TaskStore is a
//! file anyone with write access to it could forge, so its own paths
//! (`task_config`, `log_dir`, `note_path`) are never taken as they are: what the
//! web view serves and `task show` prints is built here, and is nothing else.

use std::path::{Path, PathBuf};

use super::id;
use super::task_file::Attempt;
use crate::Workspace;
use agent_runner_core::private_dir::DIR_NAME;

/// Where a cleaned-up clone's `.agent-runner/` goes, in the job's log directory.
pub(crate) const KEPT_DIR_NAME: &str = "agent-runner";

/// The job's log directory, `logs/<job-id>/`; None for a job id that is no id.
pub fn log_dir(ws: &Workspace, attempt: &Attempt) -> Option<PathBuf> {
    id::is_valid(&attempt.job_id).then(|| ws.job_log_dir(&attempt.job_id))
}

/// The log directory of the job whose runner did the attempt's work
/// (`Attempt::work_job`): its own, or a best of N run's winning try's, where the
/// TaskConfig is.
pub fn work_log_dir(ws: &Workspace, attempt: &Attempt) -> Option<PathBuf> {
    attempt.work_job().map(|job| ws.job_log_dir(job))
}

/// The job's result file, `ipc/results/<job-id>.json`; None for a job id that is
/// no id.
pub fn result_file(ws: &Workspace, attempt: &Attempt) -> Option<PathBuf> {
    id::is_valid(&attempt.job_id).then(|| ws.results_dir().join(format!("{}.json", attempt.job_id)))
}

/// Where the runner's files of `attempt` (of task `task_id`) are: the directory
/// they are opened from and the name in it, the one whose note the result's
/// `note_path` names; None when there is no result or it names another place.
pub(crate) fn runner_dir(
    ws: &Workspace,
    task_id: &str,
    attempt: &Attempt,
) -> Option<(PathBuf, &'static str)> {
    if !id::is_valid(task_id) {
        return None;
    }
    let result = attempt.result_value()?;
    let note = Path::new(result.get("note_path")?.as_str()?);
    let note_name = format!("task-{task_id}.md");
    let mut candidates = vec![(ws.root_dir.clone(), DIR_NAME)];
    // A best of N run's judged line: the winning try's job ran it.
    if let Some(job) = attempt.work_job().filter(|j| id::is_valid(j)) {
        candidates.insert(0, (ws.clones_dir().join(job), DIR_NAME));
        candidates.insert(0, (ws.job_log_dir(job), KEPT_DIR_NAME));
    }
    if let Some(clone) = attempt.clone_job.as_ref().filter(|j| id::is_valid(j)) {
        candidates.insert(1, (ws.clones_dir().join(clone), DIR_NAME));
    }
    // The runner names the note under its canonical repo path; the directory is
    // opened by the path we know (never following a symlink at its end).
    candidates.into_iter().find(|(dir, name)| {
        let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
        [dir, &canonical]
            .iter()
            .any(|d| note == d.join(name).join(&note_name))
    })
}

/// Where the runner of a queued or running job works: the clone the job names
/// (`clone_job`, a resumed attempt's), the job's own clone once it is made, or
/// root_dir. Built from ids only, like `runner_dir`.
pub(crate) fn run_dir(ws: &Workspace, job_id: &str, clone_job: Option<&str>) -> Option<PathBuf> {
    if let Some(clone) = clone_job {
        return id::is_valid(clone).then(|| ws.clones_dir().join(clone));
    }
    let own = ws.clones_dir().join(job_id);
    let cloned = id::is_valid(job_id) && std::fs::symlink_metadata(&own).is_ok_and(|m| m.is_dir());
    Some(if cloned { own } else { ws.root_dir.clone() })
}

/// The path of `attempt`'s Task Note (see `runner_dir`).
pub fn note_path(ws: &Workspace, task_id: &str, attempt: &Attempt) -> Option<PathBuf> {
    let (dir, name) = runner_dir(ws, task_id, attempt)?;
    Some(dir.join(name).join(format!("task-{task_id}.md")))
}
