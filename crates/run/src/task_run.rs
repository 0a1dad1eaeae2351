//! Running one task, from its validated `Task` to its end (SPEC §8, §19): what
//! `agent-runner run` does once its arguments are read, and what any other caller
//! of the runner would do.
//!
//! `run_task`: our directory in the repository and the task's lock (a second run of
//! the same id must not touch the first one's note, logs or state) → with `resume`,
//! the saved state, checked to be the same task's → the deadline, less what the
//! runs before took → Meta's backend → the event log, the sandbox, and the context
//! with what a resumed run carries over → the state machine, with a checkpoint
//! after every step that writes the Task Note and the state file → the worker's
//! session removed once the task is COMPLETE.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::context::{CriteriaVersion, TaskContext, TaskState};
use crate::error::Error;
use crate::note;
use crate::runner::Runner;
use crate::runner::meta::{Meta, MetaAgent};
use crate::runner::state::{self, State};
use crate::session_host::{self, SessionHost};
use agent_runner_core::deadline::Deadline;
use agent_runner_core::fs::Dir;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_core::task_lock::TaskLock;
use agent_runner_meta::{CodexScratch, Opening};
use agent_runner_sandbox::worker::sandbox::{ContainerSandbox, Continuation, SandboxConfig};
use agent_runner_settings::events::Events;
use agent_runner_settings::task::{InputError, MetaBackend, Task};

/// Bytes of history put before the first prompt of a worker that cannot continue
/// its session.
const HISTORY_FOR_WORKER: usize = 4096;

/// A task that ran to COMPLETE or FAILED.
#[derive(Debug)]
pub struct Ran {
    pub ctx: TaskContext,
    /// The Task Note's path, or why it could not be written.
    pub note: Result<PathBuf, std::io::Error>,
}

/// The longest follow-up message (`--message`), in bytes.
pub const MAX_MESSAGE: usize = 8192;

/// Runs `task` to its end; see the module documentation. `redactor` masks the
/// task's secrets everywhere the run writes; `interrupt` stops it at the next step.
/// `message`, with `resume`, is the user's follow-up (SPEC §23): a task whose last
/// run ended COMPLETE goes on with it too. An error means the task did not start:
/// nothing ran.
pub fn run_task(
    task: Task,
    resume: bool,
    message: Option<String>,
    redactor: &Redactor,
    interrupt: Interrupt,
) -> Result<Ran, Error> {
    let mut prepared = Prepared::new(&task, resume, message.is_some())?;
    prepared.message = message;
    let system_prompt = task.meta.system_prompt.clone();
    let deadline = prepared.deadline;
    // Meta's codex: a scratch directory of its own, outside the repository; its
    // runs' logs beside the worker's.
    let scratch = CodexScratch {
        open: agent_runner_sandbox::worker::scratch::open,
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
        deadline,
        scratch,
    })
    .map_err(|e| Error::MetaSettings(InputError::new(e.field, e.message)))?;
    let meta = MetaAgent::new(backend, system_prompt, redactor.clone());
    execute(task, meta, prepared, redactor, interrupt)
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
    /// The user's follow-up message.
    message: Option<String>,
}

impl Prepared {
    /// Before anything is written: our directory and the task's lock; with
    /// `resume`, the saved state, of the same task (SPEC §19).
    fn new(task: &Task, resume: bool, follow_up: bool) -> Result<Prepared, Error> {
        let private =
            agent_runner_core::private_dir::open(&task.repo).map_err(Error::PrivateDir)?;
        let lock = TaskLock::acquire(&private, &task.id)?;
        let logs = private
            .subdir("logs")
            .and_then(|logs| logs.subdir(&task.id))
            .map_err(Error::PrivateDir)?;
        let saved = resume
            .then(|| saved_state(&private, task, follow_up))
            .transpose()?;
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
            message: None,
        })
    }
}

/// Runs the task with `meta` in a Docker sandbox, writing the note and the state
/// after every step.
fn execute(
    task: Task,
    meta: impl Meta,
    prepared: Prepared,
    redactor: &Redactor,
    interrupt: Interrupt,
) -> Result<Ran, Error> {
    let Prepared {
        _lock,
        private,
        logs,
        saved,
        deadline,
        message,
    } = prepared;
    let session_dir =
        session_dir(&private, &task.id, saved.is_some()).map_err(Error::PrivateDir)?;
    // Under the copy transport the session is on the sandbox's host: a resume goes
    // there (SPEC §22). After COMPLETE there is none to go on with.
    if let Some(saved_host) = saved
        .as_ref()
        .filter(|s| s.state != TaskState::Complete)
        .and_then(|s| s.session_host.as_ref())
    {
        let now =
            agent_runner_sandbox::backend::endpoint::Endpoint::current(Duration::from_secs(10))
                .ok();
        session_host::go_to(saved_host, now.as_ref()).map_err(|why| Error::CannotResume {
            task_id: task.id.clone(),
            why: why.to_string(),
        })?;
    }
    let session_host = agent_runner_sandbox::worker::sandbox::session_host(&task.worker)
        .map(|endpoint| SessionHost::of(&endpoint));
    log::info!(
        "task {} \"{}\": repo {}, meta {}, worker {} in image {}, at most {} loops",
        task.id,
        task.title,
        task.repo.display(),
        meta_name(&task),
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
    let mut sandbox = ContainerSandbox::new(SandboxConfig {
        task_id: task.id.clone(),
        repo: task.repo.clone(),
        private_dir: private.path().to_path_buf(),
        logs,
        worker: task.worker.clone(),
        login: task.login.clone(),
        redactor: redactor.clone(),
        interrupt,
        events: events.clone(),
        session_dir: Some(session_dir),
        resumed: saved.is_some(),
        deadline,
    });
    // The orchestrator runs an attempt in a clone; its caches are the workspace's.
    if let Some(repo) = std::env::var_os("AGENT_RUNNER_CACHE_REPO").filter(|r| !r.is_empty()) {
        sandbox.caches_of(std::path::Path::new(&repo));
    }
    let note_path = task.note_path();
    let mut ctx = TaskContext::new(task);
    ctx.events = events;
    ctx.session_host = session_host;
    if let Some(saved) = &saved {
        go_on_from(&mut ctx, &mut sandbox, saved, &private, message);
    }
    let start = if ctx.resumed.is_some() {
        "resumed"
    } else {
        "started"
    };
    ctx.events.state(None, ctx.state, start);
    let mut checkpoint = Checkpoint::new(&private, redactor, note_path);
    let mut step = |ctx: &TaskContext| checkpoint.write(ctx);
    // Written before the first step too: a run killed at once leaves its state.
    step(&ctx);
    Runner::new(meta, &mut sandbox, &mut step, interrupt)
        .until(deadline)
        .run(&mut ctx);
    if ctx.state == TaskState::Complete {
        sandbox.forget_session();
        // Nothing to resume: the worker's session (which holds what the worker saw,
        // unmasked) is not kept.
        let removed = private
            .existing(state::DIR)
            .and_then(|d| d.remove_tree(&state::session_dir_name(&ctx.task.id)));
        if let Err(e) = removed {
            log::warn!("cannot remove the worker's session: {e}");
        }
    }
    let note = checkpoint.note();
    Ok(Ran { ctx, note })
}

/// A resumed run goes on from `saved`: the worker's session (unless the task was
/// complete), its history and the user's `message`, and the context as it was.
fn go_on_from(
    ctx: &mut TaskContext,
    sandbox: &mut ContainerSandbox,
    saved: &State,
    private: &Dir,
    message: Option<String>,
) {
    let mut resumed = saved.resumed(private, &ctx.task.note_name());
    resumed.message = message;
    // After COMPLETE the session is gone (removed as that run ended): the worker starts
    // afresh with the history and the message.
    let completed = saved.state == TaskState::Complete;
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
            .filter(|s| s.kind == ctx.task.worker.kind.name() && !completed)
            .map(|s| s.id.clone()),
        history: crate::resume::for_worker(&resumed, HISTORY_FOR_WORKER),
        message: resumed.message.clone(),
    });
    restore(ctx, saved);
    if completed {
        // The same criteria, to be met again with the message (SPEC §23).
        ctx.criteria.iter_mut().for_each(|c| c.passed = false);
    }
    ctx.resumed = Some(resumed);
}

/// Meta as the log names it.
fn meta_name(task: &Task) -> String {
    match &task.meta.backend {
        MetaBackend::Api(api) => format!("{} ({})", api.wire.as_str(), task.meta.model),
        MetaBackend::Scripted { script } => format!("scripted ({})", script.display()),
        MetaBackend::CodexCli(_) => format!("codex-cli ({})", task.meta.model),
    }
}

/// A resumed run's context: the saved criteria, their versions, loops and replans.
fn restore(ctx: &mut TaskContext, saved: &State) {
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
}

/// What is written after every step: the Task Note, and the state file when what
/// it holds changed. A failure is logged once and the run goes on.
struct Checkpoint<'a> {
    private: &'a Dir,
    redactor: &'a Redactor,
    note_path: PathBuf,
    /// Why the latest note could not be written.
    note_error: Option<std::io::Error>,
    state_error: bool,
    last_state: Option<State>,
}

impl<'a> Checkpoint<'a> {
    fn new(private: &'a Dir, redactor: &'a Redactor, note_path: PathBuf) -> Self {
        Checkpoint {
            private,
            redactor,
            note_path,
            note_error: None,
            state_error: false,
            last_state: None,
        }
    }

    fn write(&mut self, ctx: &TaskContext) {
        match note::write(self.private, ctx, self.redactor) {
            Ok(()) => self.note_error = None,
            Err(e) => {
                if self.note_error.is_none() {
                    log::warn!(
                        "cannot write the Task Note {}: {e}",
                        self.note_path.display()
                    );
                }
                self.note_error = Some(e);
            }
        }
        let clock = Instant::now();
        let state = State::of(ctx);
        // Steps that change nothing it holds (an assessment that ticked no
        // criterion, the sandbox's removal) cost no write: a rename over a file
        // is most of a checkpoint's time.
        if self
            .last_state
            .as_ref()
            .is_some_and(|last| last.same_as(&state))
        {
            return;
        }
        match state.write(self.private, self.redactor) {
            Ok(()) => {
                log::debug!("state written in {} µs", clock.elapsed().as_micros());
                self.last_state = Some(state);
            }
            Err(e) => {
                if !self.state_error {
                    log::warn!("cannot write the task's state (a resume would not find it): {e}");
                }
                self.state_error = true;
            }
        }
    }

    /// The note's path, or why its latest write failed.
    fn note(self) -> Result<PathBuf, std::io::Error> {
        match self.note_error {
            None => Ok(self.note_path),
            Some(e) => Err(e),
        }
    }
}

/// The saved state a resumed run goes on from, checked: of this task, unchanged,
/// and not already COMPLETE unless a follow-up message goes on from there.
fn saved_state(private: &Dir, task: &Task, follow_up: bool) -> Result<State, Error> {
    let refuse = |why: String| Error::CannotResume {
        task_id: task.id.clone(),
        why,
    };
    if task.id_generated {
        return Err(refuse(
            "it has no task.id (one is made up for each run): give the task an id to resume it"
                .into(),
        ));
    }
    let path = private.join(state::DIR).join(state::file_name(&task.id));
    let saved = State::read(private, &task.id)
        .map_err(|e| refuse(e.to_string()))?
        .ok_or_else(|| {
            refuse(format!(
                "no saved state ({} does not exist): it has not run in this repository; run it without --resume",
                path.display()
            ))
        })?;
    match saved.refusal(task) {
        Some(_)
            if follow_up && saved.state == TaskState::Complete && saved.changed(task).is_none() =>
        {
            Ok(saved)
        }
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
