//! Stopping a task's job (SPEC §19), for `task stop` and the web view's Stop button.
//!
//! A queued job is removed from the queue (an unlink, which a claim's rename either
//! beats or loses: never both) and recorded as a `cancelled` attempt. A running job
//! gets a stop request (`jobs::request_stop`) and its runner SIGTERM: the runner is
//! found in the job's owner file and signalled only if it is still the process that
//! started then (`Owner::terminate`: never a pid reused since). The runner cleans up
//! and writes its note; its attempt records "stopped by the user". A job whose
//! runner has not started yet never starts it (the attempt looks at the request
//! before and as it starts the runner), and a runner that ended by itself first
//! keeps its own outcome. Other attempts are not touched.

use std::time::{Duration, Instant};

use crate::ended::{self, Tell};
use crate::queue::jobs;
use crate::queue::status::JobState;
use crate::store::id;
use crate::store::task_file::{Attempt, AttemptStatus};
use crate::store::task_store::TaskStore;
use crate::{PipelineError, Workspace};
use agent_runner_core::interrupt::Interrupt;

/// The error of a job cancelled before it ran.
pub(crate) const CANCELLED: &str = "cancelled by the user before it ran";

/// What `stop` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// The queued job was removed and recorded `cancelled`.
    Cancelled { job_id: String },
    /// The running job's runner was sent SIGTERM.
    Terminated { job_id: String, pid: u32 },
    /// The job is claimed but its runner has not started: it will not start.
    NotStarted { job_id: String },
}

impl Stopped {
    /// The job stopped.
    pub fn job_id(&self) -> &str {
        match self {
            Stopped::Cancelled { job_id }
            | Stopped::Terminated { job_id, .. }
            | Stopped::NotStarted { job_id } => job_id,
        }
    }

    /// What was done, in a sentence.
    pub fn describe(&self, task_id: &str) -> String {
        match self {
            Stopped::Cancelled { job_id } => {
                format!("task {task_id}: job {job_id} removed from the queue (cancelled)")
            }
            Stopped::Terminated { job_id, pid } => format!(
                "task {task_id}: stopping job {job_id} (SIGTERM to its agent-runner, pid {pid}); it cleans up and writes its note"
            ),
            Stopped::NotStarted { job_id } => {
                format!("task {task_id}: job {job_id} is stopped before its agent-runner starts")
            }
        }
    }
}

/// Why nothing was stopped.
#[derive(Debug, thiserror::Error)]
pub enum NotStopped {
    #[error("task {id} not found in workspace {workspace}")]
    NotFound { id: String, workspace: String },
    #[error("task {0} has no queued or running job: nothing to stop")]
    Idle(String),
    #[error("job {job_id} of task {task_id} has already ended; its attempt keeps its own outcome")]
    Ended { task_id: String, job_id: String },
    #[error("job {job_id} of task {task_id}: its agent-runner cannot be stopped from here: {why}")]
    Unreachable {
        task_id: String,
        job_id: String,
        why: agent_runner_core::Error,
    },
    #[error(transparent)]
    Failed(#[from] PipelineError),
}

/// Stops task `task_id`'s queued or running job; see the module documentation.
pub fn stop(ws: &Workspace, task_id: &str) -> Result<Stopped, NotStopped> {
    let view = if id::is_valid(task_id) {
        TaskStore::new(ws).load(task_id)?
    } else {
        None
    };
    let Some(view) = view else {
        return Err(NotStopped::NotFound {
            id: task_id.to_string(),
            workspace: ws.id.clone(),
        });
    };
    let Some((state, job_id)) = jobs::job_states(ws).remove(task_id) else {
        return Err(NotStopped::Idle(task_id.to_string()));
    };
    if state == JobState::Queued
        && let Some(cancelled) = cancel(ws, task_id, &view.record.title, &job_id)?
    {
        return Ok(cancelled);
    }
    // Claimed meanwhile: stop it running.
    if !jobs::request_stop(ws, &job_id)? {
        return Err(NotStopped::Ended {
            task_id: task_id.to_string(),
            job_id,
        });
    }
    let runner = jobs::read_owner(ws, &job_id).and_then(|(claimant, _)| claimant.runner);
    let Some(runner) = runner else {
        return Ok(Stopped::NotStarted { job_id });
    };
    match runner.terminate() {
        Ok(()) => Ok(Stopped::Terminated {
            job_id,
            pid: runner.pid,
        }),
        // Ended by itself just now (or long ago, its attempt being recorded).
        Err(_) if runner.is_gone() => Err(NotStopped::Ended {
            task_id: task_id.to_string(),
            job_id,
        }),
        Err(why) => Err(NotStopped::Unreachable {
            task_id: task_id.to_string(),
            job_id,
            why,
        }),
    }
}

/// How long `wait` waits for a stopped job's attempt to be recorded.
pub const WAIT: Duration = Duration::from_secs(120);

/// What `wait` saw of a stopped job.
#[derive(Debug)]
pub enum Recorded {
    /// Its attempt is recorded.
    Attempt(Box<Attempt>),
    /// It left the jobs without an attempt.
    Nothing,
    /// It still runs after `WAIT`.
    StillRunning,
    Interrupted,
}

/// Waits until stopped job `job_id` of task `task_id` has left the queue and the
/// running jobs (at most `WAIT`), then gives its attempt.
pub fn wait(
    ws: &Workspace,
    task_id: &str,
    job_id: &str,
    interrupt: Interrupt,
) -> Result<Recorded, PipelineError> {
    let until = Instant::now() + WAIT;
    while jobs::find(ws, job_id).is_some() {
        if interrupt.is_set() {
            return Ok(Recorded::Interrupted);
        }
        if Instant::now() >= until {
            return Ok(Recorded::StillRunning);
        }
        std::thread::sleep(super::follow::POLL);
    }
    let attempt = TaskStore::new(ws)
        .load(task_id)?
        .and_then(|task| task.attempts.into_iter().rev().find(|a| a.job_id == job_id));
    Ok(attempt.map_or(Recorded::Nothing, |a| Recorded::Attempt(Box::new(a))))
}

/// Removes queued job `job_id` of the task titled `title` and settles it as a
/// cancelled attempt (`ended`: a cancelled try may be the last of its group to end,
/// which is then judged); None when it is no longer in the queue (an orchestrator
/// claimed it first).
fn cancel(
    ws: &Workspace,
    task_id: &str,
    title: &str,
    job_id: &str,
) -> Result<Option<Stopped>, NotStopped> {
    let Some((JobState::Queued, job)) = jobs::find(ws, job_id) else {
        return Ok(None);
    };
    let path = ws.queue_dir().join(format!("{job_id}.json"));
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(PipelineError::io("remove", &path)(e).into()),
    }
    let log_dir = ws.job_log_dir(job_id);
    let mut attempt = Attempt {
        error: Some(CANCELLED.into()),
        resumed_from: job.resume_from,
        clone_job: job.clone_job,
        try_of: job.try_of,
        message: job.message,
        ..Attempt::ended(
            job_id,
            task_id,
            AttemptStatus::Cancelled,
            String::new(),
            0,
            &log_dir,
        )
    };
    // It never ran: it started as it ended.
    attempt.started_at = attempt.finished_at.clone();
    ended::settle(
        ws,
        title,
        &mut attempt,
        Tell::Now,
        Interrupt::never(),
        |_, _| {},
    )?;
    Ok(Some(Stopped::Cancelled {
        job_id: job_id.to_string(),
    }))
}
