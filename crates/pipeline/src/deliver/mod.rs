//! Delivery (SPEC §23): a verified attempt's branch where people review it.
//!
//! `deliver` is called by the orchestrator for an attempt about to be recorded
//! (verified, its branch brought back), and by `task deliver ID` again for the
//! latest one: `clones::push` pushes the branch to `defaults.deliver.push_url`
//! (host git never in root_dir's repository), then `pr_command` runs the PR
//! command on the host. What it did is a `store::delivery::Delivery`: on the
//! attempt line the first time, on a `delivery` line when retried. A failed
//! delivery changes nothing the attempt did.

pub(crate) mod pr_command;

use crate::clones;
use crate::store::attempt_files;
use crate::store::delivery::Delivery;
use crate::store::task_file::Line;
use crate::store::task_file::{Attempt, AttemptStatus};
use crate::store::task_store::TaskStore;
use crate::{PipelineError, Workspace};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::timestamp::Timestamp;

/// Why `attempt` cannot be delivered, if it cannot: only a succeeded, verified
/// attempt with a branch is.
pub(crate) fn refusal(attempt: &Attempt) -> Option<String> {
    if attempt.status != AttemptStatus::Succeeded || !attempt.is_verified() {
        return Some(format!(
            "attempt {} is not a verified success (only those are delivered)",
            attempt.attempt_id
        ));
    }
    if attempt.branch.is_none() {
        return Some(format!(
            "attempt {} ran in root_dir and left no branch (set `isolation: clone` in the workspace defaults)",
            attempt.attempt_id
        ));
    }
    None
}

/// Delivers `attempt` of the task titled `title` as the workspace's defaults say;
/// None when they say nothing of delivery.
pub(crate) fn deliver(
    ws: &Workspace,
    title: &str,
    attempt: &Attempt,
    interrupt: Interrupt,
) -> Option<Delivery> {
    let settings = ws.defaults.deliver.as_ref()?;
    let branch = attempt.branch.clone().unwrap_or_default();
    let mut delivery = Delivery {
        attempt_id: attempt.attempt_id.clone(),
        at: Timestamp::now().to_string(),
        branch: branch.clone(),
        pushed: None,
        pr: None,
        error: refusal(attempt),
    };
    if delivery.error.is_some() {
        return Some(delivery);
    }
    let scratch = ws.job_log_dir(&attempt.job_id).join("push.git");
    match clones::push::push(
        &ws.root_dir,
        &branch,
        &settings.push_url,
        &scratch,
        interrupt,
    ) {
        Ok(commit) => delivery.pushed = Some(commit),
        Err(e) => {
            delivery.error = Some(format!(
                "cannot push {branch} to {}: {e}",
                settings.push_url
            ));
            return Some(delivery);
        }
    }
    if let Some(command) = &settings.pr_command {
        let note = attempt_files::note_path(ws, &attempt.task_id, attempt);
        let env = pr_command::Env {
            task_id: &attempt.task_id,
            branch: &branch,
            title,
            note: note.as_deref(),
        };
        let cwd = ws.job_log_dir(&attempt.job_id);
        match pr_command::run(command, &env, &cwd, interrupt) {
            Ok(url) => delivery.pr = url,
            Err(e) => delivery.error = Some(e.to_string()),
        }
    }
    Some(delivery)
}

/// `task deliver ID`: delivers the task's latest attempt again and records it on
/// a `delivery` line.
pub fn again(
    ws: &Workspace,
    task_id: &str,
    interrupt: Interrupt,
) -> Result<Delivery, PipelineError> {
    let store = TaskStore::new(ws);
    let task = store
        .load(task_id)?
        .ok_or_else(|| PipelineError::Invalid(format!("no task {task_id}")))?;
    let attempt = task
        .attempts
        .iter()
        .rev()
        .find(|a| a.status != AttemptStatus::Cancelled)
        .ok_or_else(|| PipelineError::Invalid(format!("task {task_id} has no attempt")))?;
    if let Some(reason) = refusal(attempt) {
        return Err(PipelineError::Invalid(reason));
    }
    let delivery = deliver(ws, &task.record.title, attempt, interrupt).ok_or_else(|| {
        PipelineError::Invalid(
            "the workspace's defaults have no `deliver:` (set it with `workspace set --defaults FILE.yaml`)".into(),
        )
    })?;
    store.append(task_id, &Line::Delivery(delivery.clone()))?;
    Ok(delivery)
}
