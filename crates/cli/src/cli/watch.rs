//! `agent-runner task logs|stop` (SPEC §19): watching and stopping a task's attempt
//! from the command line (`agent_runner_pipeline::watch`). Event lines go to
//! stdout; what the command itself says (waiting, ended) goes to stderr, so the
//! events can be piped.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::error::{Error, exit};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::text::{escape_controls, one_line};
use agent_runner_core::timestamp::human;
use agent_runner_pipeline::Workspace;
use agent_runner_pipeline::store::task_file::AttemptStatus;
use agent_runner_pipeline::watch;
use agent_runner_pipeline::watch::follow::{Followed, Progress};
use agent_runner_pipeline::watch::stop::{NotStopped, Recorded};
use agent_runner_settings::events::reader::describe;

use super::write_stdout;

/// `task logs [-f] ID`: the events of the task's current or last attempt; with
/// `follow`, until that attempt ends, then its status as the exit code.
pub(crate) fn logs(
    dir: &Path,
    task_id: &str,
    follow: bool,
    interrupt: Interrupt,
) -> Result<i32, Error> {
    let ws = open(dir)?;
    let followed = watch::follow::follow(&ws, task_id, follow, interrupt, |progress| {
        match progress {
            Progress::Restarted => say("(a new run started the event log again)"),
            Progress::Events(records) => {
                let text: String = records
                    .iter()
                    .map(|r| format!("{}\n", describe(r)))
                    .collect();
                write_stdout(&text)?;
            }
            Progress::Waiting { job } => {
                say(&format!("job {job} is queued; waiting for it to start"));
            }
        }
        Ok::<_, Error>(())
    })?;
    Ok(match followed {
        Followed::NeverRan => {
            say(&format!(
                "task {task_id} has not run yet: no job, no attempt (enqueue it with `agent-runner task run {task_id}`)"
            ));
            exit::FAILED
        }
        Followed::Ended { job, attempt } => {
            say(&format!(
                "attempt {} (job {job}) {} in {}{}",
                escape_controls(&attempt.attempt_id),
                attempt.status.as_str(),
                human(Duration::from_millis(attempt.duration_ms)),
                error_text(attempt.error.as_deref())
            ));
            match (follow, attempt.status) {
                (false, _) | (true, AttemptStatus::Succeeded) => exit::COMPLETE,
                (true, _) => exit::FAILED,
            }
        }
        Followed::Queued { job } => {
            say(&format!("job {job} is queued; it has not started yet"));
            exit::COMPLETE
        }
        Followed::Live => exit::COMPLETE,
        Followed::Interrupted => exit::INTERRUPTED,
    })
}

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
    let job_id = stopped.job_id();
    Ok(match watch::stop::wait(&ws, task_id, job_id, interrupt)? {
        Recorded::Attempt(a) => {
            say(&format!(
                "job {job_id}: attempt {}{}",
                a.status.as_str(),
                error_text(a.error.as_deref())
            ));
            exit::COMPLETE
        }
        Recorded::Nothing => {
            say(&format!(
                "job {job_id} left the running jobs without an attempt; see `agent-runner task show {task_id}`"
            ));
            exit::FAILED
        }
        Recorded::StillRunning => {
            say(&format!(
                "job {job_id} is still running after {}; see `agent-runner task show {task_id}`",
                human(watch::stop::WAIT)
            ));
            exit::FAILED
        }
        Recorded::Interrupted => exit::INTERRUPTED,
    })
}

fn open(dir: &Path) -> Result<Workspace, Error> {
    Ok(Workspace::open(&super::home()?, dir)?)
}

/// `: <error>` of an attempt, on one line and safe for a terminal; nothing without one.
fn error_text(error: Option<&str>) -> String {
    error.map_or(String::new(), |e| {
        format!(": {}", escape_controls(&one_line(e)))
    })
}

/// A line of the command's own on stderr.
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}
