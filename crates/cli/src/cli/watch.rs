//! `agent-runner task logs|stop` (SPEC §19): watching and stopping a task's attempt
//! from the command line. Event lines go to stdout; what the command itself says
//! (waiting, ended) goes to stderr, so the events can be piped.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::error::{Error, exit};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::text::{escape_controls, one_line};
use agent_runner_core::timestamp::human;
use agent_runner_pipeline::queue::jobs;
use agent_runner_pipeline::store::task_file::{AttemptStatus, TaskView};
use agent_runner_pipeline::store::task_store::TaskStore;
use agent_runner_pipeline::watch;
use agent_runner_pipeline::watch::log::{Follower, Stage};
use agent_runner_pipeline::watch::stop::NotStopped;
use agent_runner_pipeline::{PipelineError, Workspace};
use agent_runner_sandbox::events::reader::describe;

use super::write_stdout;

/// How often `task logs -f` looks for new events (SPEC: seen within 200 ms).
pub(crate) const FOLLOW_POLL: Duration = Duration::from_millis(50);
/// How long a job may be between states (claimed, cancelled) before that is an error.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// `task logs [-f] ID`: the events of the task's current or last attempt; with
/// `follow`, until that attempt ends, then its status as the exit code.
pub(crate) fn logs(
    dir: &Path,
    task_id: &str,
    follow: bool,
    interrupt: Interrupt,
) -> Result<i32, Error> {
    let ws = open(dir)?;
    task(&ws, task_id)?;
    let mut follower = Follower::new(task_id);
    let mut said_waiting = false;
    let mut settling = Duration::ZERO;
    loop {
        let poll = follower.poll(&ws)?;
        if poll.restarted {
            say("(a new run started the event log again)");
        }
        if !poll.records.is_empty() {
            let text: String = poll
                .records
                .iter()
                .map(|r| format!("{}\n", describe(r)))
                .collect();
            write_stdout(&text)?;
        }
        let job = follower.job().unwrap_or("?").to_string();
        match poll.stage {
            Stage::Never => {
                say(&format!(
                    "task {task_id} has not run yet: no job, no attempt (enqueue it with `agent-runner task run {task_id}`)"
                ));
                return Ok(exit::FAILED);
            }
            Stage::Ended(attempt) => {
                let error = attempt.error.as_deref().map_or(String::new(), |e| {
                    format!(": {}", escape_controls(&one_line(e)))
                });
                say(&format!(
                    "attempt {} (job {job}) {} in {}{error}",
                    escape_controls(&attempt.attempt_id),
                    attempt.status.as_str(),
                    human(Duration::from_millis(attempt.duration_ms))
                ));
                return Ok(match (follow, attempt.status) {
                    (false, _) | (true, AttemptStatus::Succeeded) => exit::COMPLETE,
                    (true, _) => exit::FAILED,
                });
            }
            Stage::Queued if !follow => {
                say(&format!("job {job} is queued; it has not started yet"));
                return Ok(exit::COMPLETE);
            }
            Stage::Running | Stage::Settling if !follow => return Ok(exit::COMPLETE),
            Stage::Queued if !said_waiting => {
                say(&format!("job {job} is queued; waiting for it to start"));
                said_waiting = true;
            }
            Stage::Settling => {
                settling += FOLLOW_POLL;
                if settling > SETTLE_LIMIT {
                    return Err(PipelineError::Invalid(format!(
                        "job {job} of task {task_id} is neither queued, running nor recorded"
                    ))
                    .into());
                }
            }
            Stage::Queued | Stage::Running => settling = Duration::ZERO,
        }
        if interrupt.is_set() {
            return Ok(exit::INTERRUPTED);
        }
        std::thread::sleep(FOLLOW_POLL);
    }
}

/// How long `task stop` waits for a stopped job's attempt to be recorded.
const STOP_WAIT: Duration = Duration::from_secs(120);

/// `task stop ID`: stops the task's queued or running job, waits until its attempt
/// is recorded, and says how it ended.
pub(crate) fn stop(dir: &Path, task_id: &str, interrupt: Interrupt) -> Result<i32, Error> {
    let ws = open(dir)?;
    let stopped = match watch::stop::stop(&ws, task_id) {
        Ok(stopped) => stopped,
        Err(NotStopped::Failed(e)) => return Err(e.into()),
        Err(why) => {
            say(&format!("error: {}", escape_controls(&why.to_string())));
            return Ok(exit::FAILED);
        }
    };
    say(&escape_controls(&stopped.describe(task_id)));
    let job_id = stopped.job_id().to_string();
    let until = std::time::Instant::now() + STOP_WAIT;
    while jobs::find(&ws, &job_id).is_some() {
        if interrupt.is_set() {
            return Ok(exit::INTERRUPTED);
        }
        if std::time::Instant::now() >= until {
            say(&format!(
                "job {job_id} is still running after {}; see `agent-runner task show {task_id}`",
                human(STOP_WAIT)
            ));
            return Ok(exit::FAILED);
        }
        std::thread::sleep(FOLLOW_POLL);
    }
    let attempt = task(&ws, task_id)?
        .attempts
        .into_iter()
        .rev()
        .find(|a| a.job_id == job_id);
    match attempt {
        Some(a) => {
            let error = a.error.as_deref().map_or(String::new(), |e| {
                format!(": {}", escape_controls(&one_line(e)))
            });
            say(&format!(
                "job {job_id}: attempt {}{error}",
                a.status.as_str()
            ));
            Ok(exit::COMPLETE)
        }
        None => {
            say(&format!(
                "job {job_id} left the running jobs without an attempt; see `agent-runner task show {task_id}`"
            ));
            Ok(exit::FAILED)
        }
    }
}

fn open(dir: &Path) -> Result<Workspace, Error> {
    Ok(Workspace::open(&super::home()?, dir)?)
}

/// Task `task_id`, or the error that it is not there.
fn task(ws: &Workspace, task_id: &str) -> Result<TaskView, Error> {
    let store = TaskStore::new(ws);
    store.load(task_id)?.ok_or_else(|| {
        PipelineError::TaskNotFound {
            id: task_id.to_string(),
            workspace: ws.id.clone(),
            path: store.path(task_id),
        }
        .into()
    })
}

/// A line of the command's own on stderr.
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}
