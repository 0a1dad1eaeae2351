//! `agent-runner run`: the whole task (`agent_runner_run::task_run`). Always prints
//! one result on stdout.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::error::{Error, exit};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_run::result::RunResult;
use agent_runner_run::task_run::{MAX_MESSAGE, Ran, run_task};
use agent_runner_settings::task::{InputError, Task};

use super::{read_task, report, write_stdout};

/// Runs the task on stdin to its end and prints its result; returns the exit code.
pub(crate) fn run(
    meta_model: Option<String>,
    json: bool,
    resume: bool,
    message: Option<String>,
    interrupt: Interrupt,
) -> i32 {
    let clock = Instant::now();
    let mut task = match read_task(interrupt) {
        Ok(task) => task,
        Err(Error::Interrupted) => {
            let message = Error::Interrupted.to_string();
            let result = RunResult::not_run(None, message.clone(), message, clock.elapsed());
            emit(&result, json, &Redactor::default());
            return exit::INTERRUPTED;
        }
        Err(e) => return invalid(&e, &Redactor::default(), json, clock.elapsed()),
    };
    let redactor = Redactor::new(&task.secrets());
    agent_runner_core::logging::mask(&redactor);
    // Before any docker call: every one of this run goes to its host (SPEC §22).
    let placed = placement();
    if let Some(host) = task.sandbox_host.as_ref().or(placed.as_ref())
        && let Err(e) = agent_runner_sandbox::backend::host::Target::parse(host)
            .map_err(|e| e.to_string())
            .and_then(|target| {
                agent_runner_sandbox::backend::aim(target).map_err(|e| e.to_string())
            })
    {
        let problem = InputError::new("runner.sandbox.host", e);
        return invalid(&problem.into(), &redactor, json, clock.elapsed());
    }
    if let Some(model) = &meta_model
        && let Err(problem) = override_meta_model(&mut task, model)
    {
        return invalid(&problem.into(), &redactor, json, clock.elapsed());
    }
    let task_id = task.id.clone();
    let message = message.map(|m| m.trim().to_string());
    if let Some(m) = &message
        && (m.is_empty() || m.len() > MAX_MESSAGE)
    {
        let problem = InputError::new(
            "--message",
            format!("must be 1 to {MAX_MESSAGE} bytes of text (got {})", m.len()),
        );
        return invalid(&problem.into(), &redactor, json, clock.elapsed());
    }
    match run_task(task, resume, message, &redactor, interrupt) {
        Ok(Ran { ctx, note }) => {
            let note = note.map_err(|e| e.to_string());
            let note = note.as_deref().map_err(String::as_str);
            emit(&RunResult::of(&ctx, note), json, &redactor);
            exit::of_task(&ctx)
        }
        Err(agent_runner_run::Error::MetaSettings(problem)) => {
            invalid(&problem.into(), &redactor, json, clock.elapsed())
        }
        Err(e) => {
            let e = Error::from(e);
            let code = report(&e, &redactor);
            let message = redactor.redact(&e.to_string());
            let result =
                RunResult::not_run(Some(task_id), message.clone(), message, clock.elapsed());
            emit(&result, json, &redactor);
            code
        }
    }
}

/// `--meta-model`: the model that replaces `runner.meta.model`, which must be priced
/// when the budget has a cost limit.
fn override_meta_model(task: &mut Task, model: &str) -> Result<(), InputError> {
    if model.trim().is_empty() {
        return Err(InputError::new("--meta-model", "must not be empty"));
    }
    task.meta
        .set_model(model)
        .map_err(|e| InputError::new("--meta-model", e.0))?;
    match agent_runner_settings::task::unpriced(&task.bounds, &task.meta, &task.worker) {
        Some(problem) => Err(InputError::new("--meta-model", problem.message)),
        None => Ok(()),
    }
}

/// Invalid input: `error` reported on stderr and as the result; returns the exit code.
fn invalid(error: &Error, redactor: &Redactor, json: bool, took: Duration) -> i32 {
    let code = report(error, redactor);
    let message = redactor.redact(&error.to_string());
    emit(
        &RunResult::invalid_input(None, message, took),
        json,
        redactor,
    );
    code
}

/// The result on stdout: JSON or one line, secrets masked.
fn emit(result: &RunResult, json: bool, redactor: &Redactor) {
    let text = if json {
        result.json_masked(redactor)
    } else {
        redactor.redact(&result.line())
    };
    if let Err(e) = write_stdout(&format!("{text}\n")) {
        let _ = writeln!(std::io::stderr(), "error: {e}");
    }
}

/// The host the orchestrator placed this process on when the host is a cluster
/// (`host::SANDBOX_HOST_VAR`; a Docker host comes as `DOCKER_HOST`).
fn placement() -> Option<String> {
    std::env::var(agent_runner_sandbox::backend::host::SANDBOX_HOST_VAR)
        .ok()
        .filter(|h| !h.is_empty())
}

/// Why this process could not be aimed at the host it was placed on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlacementError {
    /// The host is no target (`Target::parse`'s words).
    #[error(transparent)]
    Host(agent_runner_sandbox::backend::host::TargetError),
    /// Aimed elsewhere already (`backend::aim`'s error, which is `docker_cli`'s:
    /// not named above the backend).
    #[error(transparent)]
    Aimed(Box<dyn std::error::Error + Send + Sync>),
}

/// Aims this process's sandboxes at the host of `placement`, if any: why not.
pub(crate) fn aim_at_placement() -> Result<(), PlacementError> {
    let Some(host) = placement() else {
        return Ok(());
    };
    let target =
        agent_runner_sandbox::backend::host::Target::parse(&host).map_err(PlacementError::Host)?;
    agent_runner_sandbox::backend::aim(target).map_err(|e| PlacementError::Aimed(Box::new(e)))
}
