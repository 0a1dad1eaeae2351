//! `agent-runner run`: the whole task. Always prints one result on stdout.

use std::io::Write;
use std::time::Instant;

use crate::context::TaskContext;
use crate::deadline::Deadline;
use crate::error::{Error, exit};
use crate::interrupt::Interrupt;
use crate::meta::codex_cli::CodexCli;
use crate::meta::openai::OpenAiChat;
use crate::meta::scripted::Scripted;
use crate::note;
use crate::result::RunResult;
use crate::runner::Runner;
use crate::runner::meta::{Meta, MetaAgent};
use crate::secret::Redactor;
use crate::task::{InputError, Login, MetaBackend, Task};
use crate::task_lock::TaskLock;
use crate::worker::docker::{DockerSandbox, SandboxConfig};

use super::{read_task, report, write_stdout};

/// Runs the task on stdin to its end and prints its result; returns the exit code.
pub fn run(meta_model: Option<String>, json: bool, interrupt: Interrupt) -> i32 {
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
    crate::logging::mask(&redactor);
    if let Some(model) = &meta_model {
        if model.trim().is_empty() {
            return invalid(
                &InputError::new("--meta-model", "must not be empty").into(),
                &redactor,
            );
        }
        task.meta.model = model.clone();
        if let MetaBackend::CodexCli(codex) = &mut task.meta.backend {
            codex.model = Some(model.clone());
        }
        if let Some(problem) = crate::task::unpriced(&task.bounds, &task.meta, &task.worker) {
            let problem = InputError::new("--meta-model", problem.message);
            return invalid(&problem.into(), &redactor);
        }
    }
    // The task's clock starts here: the deadline counts from now.
    let deadline = Deadline::after(task.bounds.budget.max_duration);
    let system_prompt = task.meta.system_prompt.clone();
    match &task.meta.backend {
        MetaBackend::OpenAiChat { base_url, api_key } => {
            let chat = OpenAiChat::new(
                base_url,
                &task.meta.model,
                task.meta.temperature,
                api_key.value.clone(),
                task.meta.timeout,
            )
            .interruptible(interrupt)
            .until(deadline)
            .masking(redactor.clone());
            let meta = MetaAgent::new(chat, system_prompt, redactor.clone());
            execute(task, meta, auth, redactor, json, interrupt, deadline)
        }
        MetaBackend::Scripted { script } => match Scripted::load(script) {
            Ok(scripted) => {
                let meta = MetaAgent::new(scripted, system_prompt, redactor.clone());
                execute(task, meta, auth, redactor, json, interrupt, deadline)
            }
            Err(e) => invalid(&InputError::new("runner.meta.script", e).into(), &redactor),
        },
        MetaBackend::CodexCli(_) => {
            // A scratch directory of its own, outside the repository; its runs' logs
            // beside the worker's.
            let dir = std::env::temp_dir().join(format!(
                "agent-runner-meta-{}-{}",
                task.id,
                uuid::Uuid::new_v4().simple()
            ));
            let logs = crate::private_dir::open(&task.repo)
                .and_then(|dir| dir.subdir("logs"))
                .and_then(|logs| logs.subdir(&task.id))
                .and_then(|logs| logs.subdir("meta"))
                .ok();
            let Some(chat) =
                CodexCli::for_task(&task, dir, true, logs, redactor.clone(), interrupt)
            else {
                return invalid(
                    &InputError::new("runner.meta.kind", "not codex-cli").into(),
                    &redactor,
                );
            };
            let meta = MetaAgent::new(chat.until(deadline), system_prompt, redactor.clone());
            execute(task, meta, auth, redactor, json, interrupt, deadline)
        }
    }
}

fn execute(
    task: Task,
    meta: impl Meta,
    auth: Login,
    redactor: Redactor,
    json: bool,
    interrupt: Interrupt,
    deadline: Deadline,
) -> i32 {
    let clock = Instant::now();
    // Before anything is written: our directory, and the task's lock (a second run
    // of the same id must not touch the first one's note or logs).
    let prepared = crate::private_dir::open(&task.repo)
        .map_err(Error::PrivateDir)
        .and_then(|dir| Ok((TaskLock::acquire(&dir, &task.id)?, dir)))
        .and_then(|(lock, dir)| {
            let logs = dir
                .subdir("logs")
                .and_then(|logs| logs.subdir(&task.id))
                .map_err(Error::PrivateDir)?;
            Ok((lock, dir, logs))
        });
    let (_lock, private, logs) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            let code = report(&e, &redactor);
            let message = redactor.redact(&e.to_string());
            let result = RunResult::not_run(
                Some(task.id.clone()),
                message.clone(),
                message,
                clock.elapsed(),
            );
            emit(&result, json, &redactor);
            return code;
        }
    };
    let meta_name = match &task.meta.backend {
        MetaBackend::OpenAiChat { .. } => task.meta.model.clone(),
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
    let sandbox = DockerSandbox::new(SandboxConfig {
        task_id: task.id.clone(),
        repo: task.repo.clone(),
        private_dir: private.path().to_path_buf(),
        logs,
        worker: task.worker.clone(),
        login: auth,
        redactor: redactor.clone(),
        interrupt,
        deadline,
    });
    let note_path = task.note_path();
    let mut ctx = TaskContext::new(task);
    let mut note_error: Option<String> = None;
    let mut checkpoint = |ctx: &TaskContext| match note::write(&private, ctx, &redactor) {
        Ok(()) => note_error = None,
        Err(e) => {
            if note_error.is_none() {
                log::warn!("cannot write the Task Note {}: {e}", note_path.display());
            }
            note_error = Some(e.to_string());
        }
    };
    Runner::new(meta, sandbox, &mut checkpoint, interrupt)
        .until(deadline)
        .run(&mut ctx);
    let note = match note_error {
        None => Ok(note_path.as_path()),
        Some(e) => Err(e),
    };
    emit(&RunResult::of(&ctx, note), json, &redactor);
    exit::of_task(&ctx)
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
