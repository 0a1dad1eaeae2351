//! What follows an ended attempt (SPEC §12 step 4, §19, §23), one way for every way
//! an attempt ends: the orchestrator's attempts, the orphans its recovery finds, a
//! queued job `task stop` cancels, and the judged line of a best of N run. In
//! order: a verified attempt that is no try is delivered (`super::deliver`; before
//! it is recorded, so its line says where it went), then recorded (`recording`),
//! then a try's group is judged once all its tries are recorded (`judgement`, with
//! Meta's `judge` message in `judge`), whose judged line comes back through here;
//! any other attempt is told to the notifiers (`super::notify`), except a job
//! cancelled before it ran.

pub(crate) mod judge;
pub(crate) mod judgement;
pub(crate) mod recording;

use std::path::Path;
use std::time::Instant;

use crate::store::task_file::{Attempt, AttemptStatus};
use crate::store::tries::TryOf;
use crate::{PipelineError, Workspace};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::timestamp::human;

/// When the notifiers are told of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tell {
    /// Once it is recorded (a try: never, its group's judged line is).
    Now,
    /// By the caller, with `tell`, once it holds no lock a slow webhook must not
    /// hold (recovery).
    Later,
}

/// Settles the ended `attempt` of the task titled `title`: delivered when due,
/// recorded, then `recorded` is called with the result file, and then its group
/// judged (a try) or the notifiers told (`tell`). Returns what it counts as: its
/// status; for a try the judged line's when it was the last of its group, else
/// succeeded (a failed try fails nothing by itself). An error is the recording's:
/// the attempt is then neither judged nor told.
pub(crate) fn settle(
    ws: &Workspace,
    title: &str,
    attempt: &mut Attempt,
    tell: Tell,
    interrupt: Interrupt,
    recorded: impl FnOnce(&Attempt, &Path),
) -> Result<AttemptStatus, PipelineError> {
    if attempt.is_verified() && attempt.try_of.is_none() {
        deliver(ws, title, attempt, interrupt);
    }
    let result = recording::record(ws, attempt)?;
    // Recorded: recovery has nothing to put back.
    crate::clones::forget(Path::new(&attempt.log_dir));
    recorded(attempt, &result);
    let status = match &attempt.try_of {
        Some(try_of) => judged(ws, &attempt.task_id, try_of, interrupt),
        None => {
            if tell == Tell::Now && attempt.status != AttemptStatus::Cancelled {
                self::tell(ws, title, attempt, interrupt);
            }
            attempt.status
        }
    };
    Ok(status)
}

/// Tells every notifier that wants to know of the recorded `attempt` of the task
/// titled `title`; their commands run in its log directory.
pub(crate) fn tell(ws: &Workspace, title: &str, attempt: &Attempt, interrupt: Interrupt) {
    let log_dir = Path::new(&attempt.log_dir);
    crate::notify::attempt_ended(&ws.defaults.notify, title, attempt, log_dir, interrupt);
}

/// Delivers the verified `attempt`; its delivery, done or refused, goes on its line.
fn deliver(ws: &Workspace, title: &str, attempt: &mut Attempt, interrupt: Interrupt) {
    let clock = Instant::now();
    attempt.delivery = crate::deliver::deliver(ws, title, attempt, interrupt);
    let Some(delivery) = &attempt.delivery else {
        return;
    };
    let (job_id, describe) = (&attempt.job_id, delivery.describe());
    if delivery.is_done() {
        log::info!("job {job_id}: {describe} in {}", human(clock.elapsed()));
    } else {
        log::warn!(
            "job {job_id}: {describe}; retry with `agent-runner task deliver {}`",
            attempt.task_id
        );
    }
}

/// After try `try_of` of task `task_id` was recorded: when it was the last of its
/// group, the judged line, settled under the group's lock; what the try counts as.
fn judged(ws: &Workspace, task_id: &str, try_of: &TryOf, interrupt: Interrupt) -> AttemptStatus {
    let Some(mut judged) = judgement::after_try(ws, task_id, try_of, interrupt) else {
        return AttemptStatus::Succeeded;
    };
    let group = &try_of.group;
    let settled = settle(
        ws,
        &judged.title,
        &mut judged.whole,
        Tell::Now,
        interrupt,
        |whole, path| {
            log::info!(
                "tries {group}: task {task_id} {}: {}; result {}",
                whole.status.as_str(),
                whole.tries.as_ref().map_or("", |c| c.why.as_str()),
                path.display()
            );
        },
    );
    match settled {
        Ok(status) => status,
        Err(e) => {
            log::error!("tries {group}: cannot record the judgement: {e}");
            AttemptStatus::Failed
        }
    }
}
