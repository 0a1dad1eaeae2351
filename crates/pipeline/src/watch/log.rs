//! The events of a task's current or last attempt (SPEC §19 `task logs`, the web
//! view's live log). A `Follower` is where a reader is: the job it follows, and a
//! cursor into the runner's `events.jsonl`. Each `poll` looks where the job is now
//! (queued, running, recorded) and returns the events written since the last one.
//!
//! The runner of a job writes `.agent-runner/logs/<task-id>/events.jsonl` in the
//! directory it works in (root_dir, or a clone), a file an earlier run of the task
//! may have left: only events from the job's claim (or the attempt's start) on are
//! the job's. Paths are built from ids by `attempt_files`, never taken from a file.

use std::path::Path;

use crate::queue::jobs;
use crate::queue::status::JobState;
use crate::store::attempt_files;
use crate::store::id;
use crate::store::task_file::Attempt;
use crate::store::task_store::TaskStore;
use crate::{PipelineError, Workspace};
use agent_runner_core::fs::Dir;
use agent_runner_core::private_dir::DIR_NAME;
use agent_runner_settings::events::Record;
use agent_runner_settings::events::reader::{self, Cursor, MAX_READ};

/// Where the followed attempt is.
#[derive(Debug, Clone)]
pub enum Stage {
    /// The task has neither a job nor an attempt.
    Never,
    Queued,
    Running,
    /// Between two of these for a moment (a job being claimed or cancelled): look
    /// again.
    Settling,
    /// Recorded.
    Ended(Box<Attempt>),
}

/// What a poll found.
#[derive(Debug)]
pub struct Poll {
    pub stage: Stage,
    /// The events written since the last poll, oldest first.
    pub records: Vec<Record>,
    /// What was seen before belongs to another file (an earlier run): start over.
    pub restarted: bool,
}

/// A reader of one task's attempt; see the module documentation.
#[derive(Debug, Clone)]
pub struct Follower {
    task_id: String,
    job: Option<String>,
    cursor: Cursor,
}

impl Follower {
    /// A reader of task `task_id`'s current or last attempt, from its start.
    pub fn new(task_id: &str) -> Follower {
        Follower::at(task_id, None, Cursor::default())
    }

    /// A reader that already follows `job` and has read up to `cursor` (a web page
    /// polling with what the last answer said).
    pub(crate) fn at(task_id: &str, job: Option<String>, cursor: Cursor) -> Follower {
        Follower {
            task_id: task_id.to_string(),
            job,
            cursor,
        }
    }

    /// The job followed, once known.
    pub fn job(&self) -> Option<&str> {
        self.job.as_deref()
    }

    /// Where the next poll reads from.
    pub(crate) fn cursor(&self) -> Cursor {
        self.cursor
    }

    /// Looks where the job is now and reads the events written since.
    pub fn poll(&mut self, ws: &Workspace) -> Result<Poll, PipelineError> {
        if !id::is_valid(&self.task_id) {
            return Err(PipelineError::Invalid(id::invalid(
                "task id",
                &self.task_id,
            )));
        }
        if self.job.is_none() {
            self.job = jobs::job_states(ws)
                .remove(&self.task_id)
                .map(|(_, job)| job);
        }
        let Some(job_id) = self.job.clone() else {
            // No job: the last attempt, if any.
            let task = self.task(ws)?;
            let Some(last) = task.and_then(|t| t.attempts.last().cloned()) else {
                return Ok(self.found(Stage::Never));
            };
            self.job = Some(last.job_id.clone());
            return self.ended(ws, last);
        };
        match jobs::find(ws, &job_id) {
            Some((JobState::Running, job)) => {
                let since = jobs::read_owner(ws, &job_id)
                    .map(|(claimant, _)| claimant.claimed_at)
                    .unwrap_or_default();
                let Some(dir) = attempt_files::run_dir(ws, &job_id, job.clone_job.as_deref())
                else {
                    return Ok(self.found(Stage::Running));
                };
                let (records, restarted) = self.read(&dir, DIR_NAME, &since);
                Ok(Poll {
                    stage: Stage::Running,
                    records,
                    restarted,
                })
            }
            Some(_) => Ok(self.found(Stage::Queued)),
            None => {
                let attempt = self
                    .task(ws)?
                    .and_then(|t| t.attempts.into_iter().rev().find(|a| a.job_id == job_id));
                match attempt {
                    Some(attempt) => self.ended(ws, attempt),
                    None => Ok(self.found(Stage::Settling)),
                }
            }
        }
    }

    fn task(
        &self,
        ws: &Workspace,
    ) -> Result<Option<crate::store::task_file::TaskView>, PipelineError> {
        TaskStore::new(ws).load(&self.task_id)
    }

    fn found(&self, stage: Stage) -> Poll {
        Poll {
            stage,
            records: Vec::new(),
            restarted: false,
        }
    }

    /// The rest of a recorded attempt's events (none if its runner left no files).
    fn ended(&mut self, ws: &Workspace, attempt: Attempt) -> Result<Poll, PipelineError> {
        let (records, restarted) = match attempt_files::runner_dir(ws, &self.task_id, &attempt) {
            Some((dir, name)) => self.read(&dir, name, &attempt.started_at),
            None => (Vec::new(), false),
        };
        Ok(Poll {
            stage: Stage::Ended(Box::new(attempt)),
            records,
            restarted,
        })
    }

    /// The events after the cursor in `<base>/<name>/logs/<task-id>/`, those from
    /// `since` on; whether the file is not the one the cursor was in.
    fn read(&mut self, base: &Path, name: &str, since: &str) -> (Vec<Record>, bool) {
        let logs = Dir::open(base)
            .and_then(|d| d.existing(name))
            .and_then(|d| d.existing("logs"))
            .and_then(|d| d.existing(&self.task_id));
        let Ok(logs) = logs else {
            return (Vec::new(), false);
        };
        let mut records = Vec::new();
        let mut restarted = false;
        // A bounded number of reads per poll; the rest comes with the next one.
        for _ in 0..16 {
            let Ok(batch) = reader::read(&logs, self.cursor) else {
                break;
            };
            if batch.restarted {
                restarted = true;
                records.clear();
            }
            let read = batch.cursor.offset.saturating_sub(if batch.restarted {
                0
            } else {
                self.cursor.offset
            });
            self.cursor = batch.cursor;
            records.extend(batch.records.into_iter().filter(|r| r.at.as_str() >= since));
            if read < MAX_READ {
                break;
            }
        }
        (records, restarted)
    }
}
