//! One plan edit from a chat message, end to end (SPEC §13): take the plan lock,
//! read the plan, record the message in `chat.jsonl`, ask Meta (`decompose` or
//! `plan_patch`) through the workspace's Task Builder settings with the usual
//! retries and re-asks (a reply that fails a check against the plan is asked again,
//! with the reason), write the checked edit all or nothing (`apply`), record Meta's
//! understanding. The exchange is kept in `logs/plans/<edit-id>.log`.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::super::{PipelineError, Workspace};
use super::apply::{self, Change, Committed, Files};
use super::backend;
use super::chat::{self, Role};
use super::decompose::{self, Decomposition};
use super::edit::{Edit, Step};
use super::lock::{LockError, PlanLock};
use super::model::{PlanState, Rejection};
use super::patch::PlanPatch;
use super::request;
use super::trim;
use super::validate;
use crate::queue::jobs;
use crate::queue::status::JobState;
use crate::store::id;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::text::{cut, one_line};
use agent_runner_core::timestamp::Timestamp;
use agent_runner_meta::conversation::ask_checked;
use agent_runner_meta::reply::Reask;
use agent_runner_meta::{MetaCall, MetaError};

/// Which edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// New tasks from a request (`plan REQUEST...`).
    Decompose,
    /// An edit of the existing plan (`plan --patch MESSAGE...`).
    Patch,
}

impl Mode {
    fn kind(self) -> &'static str {
        match self {
            Mode::Decompose => "decompose",
            Mode::Patch => "plan_patch",
        }
    }
}

/// What an edit did.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub understanding: String,
    pub potential_conflicts: Vec<Value>,
    pub steps: Vec<Step>,
    /// None when the edit changed nothing.
    pub committed: Option<Committed>,
    /// The plan now.
    pub state: PlanState,
    /// `meta (model)` or `scripted (path)`.
    pub backend: String,
    /// Where the exchange was written.
    pub log: std::path::PathBuf,
    /// How long Meta took, re-asks included.
    pub meta_time: Duration,
    /// How long checking nothing started meanwhile and writing took.
    pub write_time: Duration,
}

/// Why there is no edit.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The backend could not be set up (no key, a bad setting).
    #[error("cannot ask Meta: {0}")]
    Backend(String),
    /// Meta failed, or gave no valid reply after the re-asks.
    #[error("{0}")]
    Meta(String),
    /// A valid reply that cannot be carried out now; nothing was written.
    #[error("the plan was not changed: {0}")]
    Refused(String),
    #[error("interrupted; the plan was not changed")]
    Interrupted,
}

/// Makes one plan edit from `message`.
pub fn run(
    ws: &Workspace,
    mode: Mode,
    message: &str,
    var: &dyn Fn(&str) -> Option<String>,
    interrupt: Interrupt,
) -> Result<Outcome, PlanError> {
    if message.trim().is_empty() {
        return Err(
            PipelineError::Invalid("the message is empty; say what you want".into()).into(),
        );
    }
    let _lock = PlanLock::acquire(ws, interrupt).map_err(|e| match e {
        LockError::Interrupted => PlanError::Interrupted,
        LockError::Io(e) => PlanError::Pipeline(e),
    })?;
    let loaded = PlanState::load(ws)?;
    let state = loaded.state;
    let history = chat::recent(ws, trim::MAX_MESSAGES)?;
    let scratch = std::env::temp_dir().join(format!("agent-runner-plan-{}", id::random_hex(12)));
    let mut backend = backend::open(&ws.defaults, mode.kind(), var, interrupt, &scratch)
        .map_err(|e| PlanError::Backend(e.to_string()))?;
    let message = backend.redactor.redact(message);
    chat::append(ws, Role::User, &message)?;

    let now = Timestamp::now().to_string();
    let (call, reply) = match mode {
        Mode::Decompose => {
            let outcome = ask_checked::<Decomposition, _>(
                backend.chat.as_mut(),
                request::system_prompt_decompose(),
                &request::decompose(&message, &state, &history),
                &backend.redactor,
                |reply| checked(decompose::plan(&reply, &state, &now)),
            );
            (outcome.call, outcome.reply)
        }
        Mode::Patch => {
            let outcome = ask_checked::<PlanPatch, _>(
                backend.chat.as_mut(),
                request::system_prompt_patch(),
                &request::patch(&message, &state, &history),
                &backend.redactor,
                |reply| checked(validate::plan(&reply, &state, &now)),
            );
            (outcome.call, outcome.reply)
        }
    };
    let edit_id = format!("p-{}", id::random_hex(12));
    let log = ws.logs_dir().join("plans").join(format!("{edit_id}.log"));
    write_log(&log, &backend.label, &call);
    let call_duration = call.duration;
    let edit = match reply {
        Ok(Ok(edit)) => edit,
        Ok(Err(refusal)) => return Err(PlanError::Refused(refusal)),
        Err(MetaError::Interrupted) => return Err(PlanError::Interrupted),
        Err(MetaError::Failed(m)) => {
            return Err(PlanError::Meta(format!(
                "Meta {} ({}) failed: {m} (the exchange is in {})",
                mode.kind(),
                backend.label,
                log.display()
            )));
        }
    };
    let clock = Instant::now();
    refuse_newly_running(ws, &state, &edit)?;
    let change = Change::between(&state, &edit.state);
    let committed = if change.is_empty(&state.wbs) {
        None
    } else {
        let reason = format!("plan --patch: {}", cut(&one_line(&message), 200));
        Some(apply::apply(
            ws,
            &state.wbs,
            &change,
            &loaded.uncommitted,
            &edit_id,
            &reason,
            &mut Files,
        )?)
    };
    let write_time = clock.elapsed();
    if let Some(c) = &committed {
        log::info!(
            "plan: edit {} written in {} (revision {}): {} created, {} updated, {} deleted",
            c.edit_id,
            agent_runner_core::timestamp::human(write_time),
            c.revision,
            change.created.len(),
            change.updated.len(),
            change.deleted.len()
        );
    }
    chat::append_reply(
        ws,
        &backend.redactor.redact(&edit.understanding),
        edit.potential_conflicts.clone(),
    )?;
    let mut after = edit.state;
    if let Some(c) = &committed {
        after.wbs.revision = c.revision;
    }
    Ok(Outcome {
        understanding: edit.understanding,
        potential_conflicts: edit.potential_conflicts,
        steps: edit.steps,
        committed,
        state: after,
        backend: backend.label,
        log,
        meta_time: call_duration,
        write_time,
    })
}

/// A check's verdict as the exchange wants it: an invalid reply is asked again, a
/// refusal ends the exchange with a valid reply that will not be carried out. Both
/// are texts: the re-ask sent to Meta, the refusal told the user.
fn checked(result: Result<Edit, Rejection>) -> Result<Result<Edit, String>, Reask> {
    match result {
        Ok(edit) => Ok(Ok(edit)),
        Err(Rejection::Invalid(why)) => Err(why),
        Err(Rejection::Refused(why)) => Ok(Err(why)),
    }
}

/// A task the edit deletes may have started while Meta was thinking: look again.
fn refuse_newly_running(ws: &Workspace, before: &PlanState, edit: &Edit) -> Result<(), PlanError> {
    let jobs = jobs::job_states(ws);
    for (id, task) in &edit.state.tasks {
        let deleted_now = task.deleted && before.live(id).is_some();
        if let Some((JobState::Running, job)) = jobs.get(id).filter(|_| deleted_now) {
            return Err(PlanError::Refused(format!(
                "task {id} is RUNNING (job {job}); a running task cannot be deleted: wait for it to finish, then ask again"
            )));
        }
    }
    Ok(())
}

/// `logs/plans/<edit-id>.log`: the exchange as it happened (secrets masked).
fn write_log(path: &std::path::Path, label: &str, call: &MetaCall) {
    let out = call.transcript(&format!("meta: {label}\ntype: {}", call.kind));
    let written = path
        .parent()
        .map_or(Ok(()), crate::store::workspace::create_dir)
        .and_then(|()| agent_runner_core::fs::atomic::write(path, out.as_bytes()));
    if let Err(e) = written {
        log::warn!("cannot write {}: {e}", path.display());
    }
}
