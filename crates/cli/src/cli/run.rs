//! `agent-runner run`: the whole task. Always prints one result on stdout.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::error::{Error, exit};
use agent_runner_core::deadline::Deadline;
use agent_runner_core::fs::Dir;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_core::task_lock::TaskLock;
use agent_runner_meta::{CodexScratch, Opening};
use agent_runner_run::context::{CriteriaVersion, TaskContext, TaskState};
use agent_runner_run::note;
use agent_runner_run::result::RunResult;
use agent_runner_run::runner::Runner;
use agent_runner_run::runner::meta::{Meta, MetaAgent};
use agent_runner_run::runner::state::{self, State};
use agent_runner_sandbox::events::Events;
use agent_runner_sandbox::task::{InputError, Login, MetaBackend, Task};
use agent_runner_sandbox::worker::docker::{Continuation, DockerSandbox, SandboxConfig};

use super::{read_task, report, write_stdout};

/// Runs the task on stdin to its end and prints its result; returns the exit code.
pub(crate) fn run(
    meta_model: Option<String>,
    json: bool,
    resume: bool,
    interrupt: Interrupt,
) -> i32 {
    let clock = Instant::now();
    let invalid = |error: &Error, redactor: &Redactor| {
        let code = report(error, redactor);
        let message = redactor.redact(&error.to_string());
        emit(
            &RunResult::invalid_input(None, message, clock.elapsed()),
            json,
            redactor,
        );
        code
    };
    let mut task = match read_task(interrupt) {
        Ok(task) => task,
        Err(Error::Interrupted) => {
            let message = Error::Interrupted.to_string();
            let result = RunResult::not_run(None, message.clone(), message, clock.elapsed());
            emit(&result, json, &Redactor::default());
            return exit::INTERRUPTED;
        }
        Err(e) => return invalid(&e, &Redactor::default()),
    };
    let auth = task.login.clone();
    let redactor = Redactor::new(&task.secrets());
    agent_runner_core::logging::mask(&redactor);
    if let Some(model) = &meta_model {
        if model.trim().is_empty() {
            return invalid(
                &InputError::new("--meta-model", "must not be empty").into(),
                &redactor,
            );
        }
        if let Err(e) = task.meta.set_model(model) {
            return invalid(&InputError::new("--meta-model", e).into(), &redactor);
        }
        if let Some(problem) =
            agent_runner_sandbox::task::unpriced(&task.bounds, &task.meta, &task.worker)
        {
            let problem = InputError::new("--meta-model", problem.message);
            return invalid(&problem.into(), &redactor);
        }
    }
    let prepared = match prepare(&task, resume) {
        Ok(prepared) => prepared,
        Err(e) => return not_run(&task.id, &e, &redactor, json, clock.elapsed()),
    };
    let system_prompt = task.meta.system_prompt.clone();
    // Meta's codex: a scratch directory of its own, outside the repository; its
    // runs' logs beside the worker's.
    let scratch = CodexScratch {
        dir: std::env::temp_dir().join(format!(
            "agent-runner-meta-{}-{}",
            task.id,
            uuid::Uuid::new_v4().simple()
        )),
        remove_after: true,
        logs: prepared.logs.subdir("meta").ok(),
        within: None,
    };
    let backend = agent_runner_meta::open(Opening {
        meta: &task.meta,
        worker: &task.worker,
        task_id: &task.id,
        redactor: redactor.clone(),
        interrupt,
        deadline: prepared.deadline,
        scratch,
    });
    match backend {
        Ok(backend) => {
            let meta = MetaAgent::new(backend, system_prompt, redactor.clone());
            execute(task, meta, auth, redactor, json, prepared, interrupt)
        }
        Err(e) => invalid(&InputError::new(e.field, e.message).into(), &redactor),
    }
}

/// What a run holds before it starts: our directory, the task's lock, its log
/// directory, and the saved state a resumed run goes on from.
struct Prepared {
    _lock: TaskLock,
    private: Dir,
    logs: Dir,
    saved: Option<State>,
    /// The task's deadline (`max_duration_sec`), from now.
    deadline: Deadline,
}

/// Before anything is written: our directory, and the task's lock (a second run of
/// the same id must not touch the first one's note, logs or state); with `resume`,
/// the saved state, of the same task (SPEC §19).
fn prepare(task: &Task, resume: bool) -> Result<Prepared, Error> {
    let private = agent_runner_core::private_dir::open(&task.repo).map_err(Error::PrivateDir)?;
    let lock = TaskLock::acquire(&private, &task.id)?;
    let logs = private
        .subdir("logs")
        .and_then(|logs| logs.subdir(&task.id))
        .map_err(Error::PrivateDir)?;
    let saved = resume.then(|| saved_state(&private, task)).transpose()?;
    // The task's clock starts here: the deadline counts from now, less what the
    // runs before a resume took (SPEC §19: the budget counts the whole task).
    let earlier = saved
        .as_ref()
        .map_or(Duration::ZERO, |s| Duration::from_millis(s.elapsed_ms));
    let deadline = Deadline::after(
        task.bounds
            .budget
            .max_duration
            .map(|max| max.saturating_sub(earlier)),
    );
    Ok(Prepared {
        _lock: lock,
        private,
        logs,
        saved,
        deadline,
    })
}

/// The result of a task that could not start: `e` reported and on stdout.
fn not_run(task_id: &str, e: &Error, redactor: &Redactor, json: bool, took: Duration) -> i32 {
    let code = report(e, redactor);
    let message = redactor.redact(&e.to_string());
    let result = RunResult::not_run(Some(task_id.to_string()), message.clone(), message, took);
    emit(&result, json, redactor);
    code
}

fn execute(
    task: Task,
    meta: impl Meta,
    auth: Login,
    redactor: Redactor,
    json: bool,
    prepared: Prepared,
    interrupt: Interrupt,
) -> i32 {
    let clock = Instant::now();
    let Prepared {
        _lock,
        private,
        logs,
        saved,
        deadline,
    } = prepared;
    let resume = saved.is_some();
    let session_dir = match session_dir(&private, &task.id, resume) {
        Ok(dir) => dir,
        Err(e) => {
            let e = Error::PrivateDir(e);
            return not_run(&task.id, &e, &redactor, json, clock.elapsed());
        }
    };
    let meta_name = match &task.meta.backend {
        MetaBackend::Api(api) => format!("{} ({})", api.wire.as_str(), task.meta.model),
        MetaBackend::Scripted { script } => format!("scripted ({})", script.display()),
        MetaBackend::CodexCli(_) => format!("codex-cli ({})", task.meta.model),
    };
    log::info!(
        "task {} \"{}\": repo {}, meta {meta_name}, worker {} in image {}, at most {} loops",
        task.id,
        task.title,
        task.repo.display(),
        task.worker.kind.name(),
        task.worker.docker_image,
        task.meta.max_loops
    );
    let events = if saved.is_some() {
        Events::append(&logs, redactor.clone())
    } else {
        Events::create(&logs, redactor.clone())
    };
    let events = events.unwrap_or_else(|e| {
        log::warn!("cannot write the event log: {e}");
        Events::none()
    });
    let mut sandbox = DockerSandbox::new(SandboxConfig {
        task_id: task.id.clone(),
        repo: task.repo.clone(),
        private_dir: private.path().to_path_buf(),
        logs,
        worker: task.worker.clone(),
        login: auth,
        redactor: redactor.clone(),
        interrupt,
        events: events.clone(),
        session_dir: Some(session_dir),
        deadline,
    });
    let note_path = task.note_path();
    let mut ctx = TaskContext::new(task);
    ctx.events = events;
    if let Some(saved) = &saved {
        let resumed = saved.resumed(&private, &ctx.task.note_name());
        log::info!(
            "resuming task {} after {} loop(s); the run before ended {}",
            ctx.task.id,
            resumed.loops,
            resumed.previous
        );
        sandbox.continue_from(Continuation {
            session: resumed
                .worker_session
                .as_ref()
                .filter(|s| s.kind == ctx.task.worker.kind.name())
                .map(|s| s.id.clone()),
            history: agent_runner_run::resume::for_worker(&resumed, HISTORY_FOR_WORKER),
        });
        ctx.criteria = saved.criteria.clone();
        ctx.criteria_versions = saved.criteria_versions.clone();
        if ctx.criteria_versions.is_empty() {
            ctx.criteria_versions.push(CriteriaVersion {
                at_loop: 0,
                reason: "from the saved state".into(),
                criteria: Vec::new(),
            });
        }
        ctx.loops = saved.loops;
        ctx.replans = saved.replans;
        ctx.resumed = Some(resumed);
    }
    let start = if ctx.resumed.is_some() {
        "resumed"
    } else {
        "started"
    };
    ctx.events.state("", ctx.state.as_str(), start);
    let mut note_error: Option<String> = None;
    let mut state_error = false;
    let mut last_state: Option<State> = None;
    let mut checkpoint = |ctx: &TaskContext| {
        match note::write(&private, ctx, &redactor) {
            Ok(()) => note_error = None,
            Err(e) => {
                if note_error.is_none() {
                    log::warn!("cannot write the Task Note {}: {e}", note_path.display());
                }
                note_error = Some(e.to_string());
            }
        }
        let clock = Instant::now();
        let state = State::of(ctx);
        // Steps that change nothing it holds (an assessment that ticked no
        // criterion, the sandbox's removal) cost no write: a rename over a file
        // is most of a checkpoint's time.
        if last_state.as_ref().is_some_and(|last| last.same_as(&state)) {
            return;
        }
        match state.write(&private, &redactor) {
            Ok(()) => {
                log::debug!("state written in {} µs", clock.elapsed().as_micros());
                last_state = Some(state);
            }
            Err(e) => {
                if !state_error {
                    log::warn!("cannot write the task's state (a resume would not find it): {e}");
                }
                state_error = true;
            }
        }
    };
    // Written before the first step too: a run killed at once leaves its state.
    checkpoint(&ctx);
    Runner::new(meta, sandbox, &mut checkpoint, interrupt)
        .until(deadline)
        .run(&mut ctx);
    if ctx.state == TaskState::Complete {
        // Nothing to resume: the worker's session (which holds what the worker saw,
        // unmasked) is not kept.
        let removed = private
            .existing(state::DIR)
            .and_then(|d| d.remove_tree(&state::session_dir_name(&ctx.task.id)));
        if let Err(e) = removed {
            log::warn!("cannot remove the worker's session: {e}");
        }
    }
    let note = match note_error {
        None => Ok(note_path.as_path()),
        Some(e) => Err(e),
    };
    emit(&RunResult::of(&ctx, note), json, &redactor);
    exit::of_task(&ctx)
}

/// Bytes of history put before the first prompt of a worker that cannot continue
/// its session.
const HISTORY_FOR_WORKER: usize = 4096;

/// The saved state a resumed run goes on from, checked: of this task, unchanged,
/// and not already COMPLETE.
fn saved_state(private: &Dir, task: &Task) -> Result<State, Error> {
    let refuse = |why: String| -> Error {
        InputError::new("--resume", format!("cannot resume task {}: {why}", task.id)).into()
    };
    if task.id_generated {
        return Err(refuse(
            "it has no task.id (one is made up for each run): give the task an id to resume it"
                .into(),
        ));
    }
    let path = private.join(state::DIR).join(state::file_name(&task.id));
    let saved = State::read(private, &task.id)
        .map_err(refuse)?
        .ok_or_else(|| {
            refuse(format!(
                "no saved state ({} does not exist): it has not run in this repository; run it without --resume",
                path.display()
            ))
        })?;
    match saved.refusal(task) {
        Some(why) => Err(refuse(why)),
        None => Ok(saved),
    }
}

/// The directory that keeps the worker's session (`worker::session`): the one the
/// runs before left when resuming, else a new, empty one.
fn session_dir(private: &Dir, task_id: &str, resume: bool) -> std::io::Result<PathBuf> {
    let states = private.subdir(state::DIR)?;
    let name = state::session_dir_name(task_id);
    if !resume {
        states.remove_tree(&name)?;
    }
    Ok(states.private_subdir(&name)?.path().to_path_buf())
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
