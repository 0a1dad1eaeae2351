//! Following a task's current or last attempt (SPEC §19 `task logs [-f]`): a
//! `log::Follower` polled every `POLL` until the attempt is recorded (or, without
//! `follow`, once), what it reads told to the watcher as it comes.

use std::time::Duration;

use super::log::{Follower, Stage};
use crate::store::task_file::Attempt;
use crate::store::task_store::TaskStore;
use crate::{PipelineError, Workspace};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_settings::events::Record;

/// How often a follower looks for new events (SPEC: seen within 200 ms).
pub const POLL: Duration = Duration::from_millis(50);
/// How long a job may be between states (claimed, cancelled) before that is an error.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// What following tells as it goes.
#[derive(Debug)]
pub enum Progress<'a> {
    /// A new run started the event log again: what was told belongs to another.
    Restarted,
    /// The events written since the last, oldest first.
    Events(&'a [Record]),
    /// The job is queued: waiting for it to start (told once).
    Waiting { job: &'a str },
}

/// Where following ended.
#[derive(Debug)]
pub enum Followed {
    /// The task has neither a job nor an attempt.
    NeverRan,
    /// Its attempt of job `job` is recorded.
    Ended {
        job: String,
        attempt: Box<Attempt>,
    },
    /// Not following: job `job` is queued.
    Queued {
        job: String,
    },
    /// Not following: the job runs (or is between states); its events so far
    /// were told.
    Live,
    Interrupted,
}

/// Follows task `task_id`'s current or last attempt; with `follow`, until it is
/// recorded. `tell` gets what is read as it is read; its error ends following.
pub fn follow<E: From<PipelineError>>(
    ws: &Workspace,
    task_id: &str,
    follow: bool,
    interrupt: Interrupt,
    mut tell: impl FnMut(Progress) -> Result<(), E>,
) -> Result<Followed, E> {
    TaskStore::existing(ws, task_id)?;
    let mut follower = Follower::new(task_id);
    let mut said_waiting = false;
    let mut settling = Duration::ZERO;
    loop {
        let poll = follower.poll(ws)?;
        if poll.restarted {
            tell(Progress::Restarted)?;
        }
        if !poll.records.is_empty() {
            tell(Progress::Events(&poll.records))?;
        }
        let job = follower.job().unwrap_or("?").to_string();
        match poll.stage {
            Stage::Never => return Ok(Followed::NeverRan),
            Stage::Ended(attempt) => return Ok(Followed::Ended { job, attempt }),
            Stage::Queued if !follow => return Ok(Followed::Queued { job }),
            Stage::Running | Stage::Settling if !follow => return Ok(Followed::Live),
            Stage::Queued if !said_waiting => {
                tell(Progress::Waiting { job: &job })?;
                said_waiting = true;
            }
            Stage::Settling => {
                settling += POLL;
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
            return Ok(Followed::Interrupted);
        }
        std::thread::sleep(POLL);
    }
}
