//! Command line: parses arguments, reads the task from stdin, dispatches, and turns
//! the outcome into output and an exit code. stdout carries only results.

use std::io::{IsTerminal, Read, Write};
use std::time::Instant;

use clap::{Parser, Subcommand};

use crate::context::TaskContext;
use crate::error::{Error, exit};
use crate::meta::openai::OpenAiChat;
use crate::meta::scripted::Scripted;
use crate::meta::{Meta, MetaAgent};
use crate::note;
use crate::result::RunResult;
use crate::runner::Runner;
use crate::secret::Redactor;
use crate::task::{self, Host, InputError, MetaBackend, Task};
use crate::worker::docker::{CodexAuth, DockerSandbox, SandboxConfig};

/// Largest Task YAML read from stdin.
const MAX_STDIN_BYTES: u64 = 16 << 20;

#[derive(Debug, Parser)]
#[command(
    name = "agent-runner",
    version,
    about = "Drive one software task to completion: Meta (an LLM) plans and judges, \
             Codex CLI edits code in a Docker sandbox, tests gate completion.",
    after_help = "The Task YAML is read from stdin, e.g. `agent-runner run < task.yaml`.\n\
                  Progress goes to stderr (RUST_LOG filters it); results go to stdout."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the task in the Task YAML on stdin until COMPLETE or FAILED; write the Task Note.
    Run {
        /// Meta model to use (overrides runner.meta.model).
        #[arg(long, value_name = "MODEL")]
        meta_model: Option<String>,
        /// Print the result as one JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Check the Task YAML on stdin and print the task as it would run; runs nothing.
    Validate,
}

/// Runs the program; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return exit::of_usage(&e);
        }
    };
    crate::logging::init();
    match cli.command {
        Command::Run { meta_model, json } => run(meta_model, json),
        Command::Validate => match validate() {
            Ok(()) => exit::COMPLETE,
            Err(e) => report(&e),
        },
    }
}

/// `agent-runner run`: the whole task. Always prints a result on stdout.
fn run(meta_model: Option<String>, json: bool) -> i32 {
    crate::sys::install_interrupt_handlers();
    let clock = Instant::now();
    let invalid = |error: &Error| {
        let code = report(error);
        let message = crate::secret::redact_global(&error.to_string());
        emit(
            &RunResult::invalid_input(None, message, clock.elapsed()),
            json,
        );
        code
    };
    let mut task = match read_task() {
        Ok(task) => task,
        Err(e) => return invalid(&e),
    };
    if let Some(model) = meta_model {
        if model.trim().is_empty() {
            return invalid(&InputError::new("--meta-model", "must not be empty").into());
        }
        task.meta.model = model;
    }
    let var = |name: &str| std::env::var(name).ok();
    let auth = CodexAuth::detect(&var);
    let mut secrets = task.secrets();
    secrets.extend(auth.secret().cloned());
    let redactor = Redactor::new(&secrets);
    crate::secret::set_global(redactor.clone());
    let system_prompt = task.meta.system_prompt.clone();
    match &task.meta.backend {
        MetaBackend::OpenAiChat { base_url, api_key } => {
            let chat = OpenAiChat::new(
                base_url,
                &task.meta.model,
                task.meta.temperature,
                api_key.value.clone(),
                task.meta.timeout,
            );
            let meta = MetaAgent::new(chat, system_prompt, redactor.clone());
            execute(task, meta, auth, redactor, json)
        }
        MetaBackend::Scripted { script } => match Scripted::load(script) {
            Ok(scripted) => {
                let meta = MetaAgent::new(scripted, system_prompt, redactor.clone());
                execute(task, meta, auth, redactor, json)
            }
            Err(e) => invalid(&InputError::new("runner.meta.script", e).into()),
        },
    }
}

fn execute(task: Task, meta: impl Meta, auth: CodexAuth, redactor: Redactor, json: bool) -> i32 {
    let meta_name = match &task.meta.backend {
        MetaBackend::OpenAiChat { .. } => task.meta.model.clone(),
        MetaBackend::Scripted { script } => format!("scripted ({})", script.display()),
    };
    log::info!(
        "task {} \"{}\": repo {}, meta {meta_name}, worker image {}, at most {} loops",
        task.id,
        task.title,
        task.repo.display(),
        task.worker.docker_image,
        task.meta.max_loops
    );
    let sandbox = DockerSandbox::new(SandboxConfig {
        task_id: task.id.clone(),
        repo: task.repo.clone(),
        log_dir: task.log_dir(),
        worker: task.worker.clone(),
        auth,
        redactor: redactor.clone(),
    });
    let note_path = task.note_path();
    let mut ctx = TaskContext::new(task);
    let mut note_error: Option<String> = None;
    let mut checkpoint = |ctx: &TaskContext| match note::write(ctx, &redactor) {
        Ok(()) => note_error = None,
        Err(e) => {
            if note_error.is_none() {
                log::warn!("cannot write the Task Note {}: {e}", note_path.display());
            }
            note_error = Some(e.to_string());
        }
    };
    Runner::new(meta, sandbox, &mut checkpoint).run(&mut ctx);
    let written = note_error.is_none().then_some(note_path.as_path());
    emit(&RunResult::of(&ctx, written), json);
    exit::of_task(&ctx)
}

/// The result on stdout: JSON or a line.
fn emit(result: &RunResult, json: bool) {
    let text = if json { result.json() } else { result.line() };
    let text = crate::secret::redact_global(&text);
    if let Err(e) = write_stdout(&format!("{text}\n")) {
        let _ = writeln!(std::io::stderr(), "error: {e}");
    }
}

fn validate() -> Result<(), Error> {
    let task = read_task()?;
    write_stdout(&task::resolved_yaml(&task))
}

/// Reads and validates the Task YAML from stdin, against the real environment.
fn read_task() -> Result<Task, Error> {
    let text = read_stdin()?;
    let cwd =
        std::env::current_dir().map_err(|e| Error::Stdin(format!("current directory: {e}")))?;
    let var = |name: &str| std::env::var(name).ok();
    let task = task::parse(
        &text,
        &Host {
            var: &var,
            cwd: &cwd,
        },
    )?;
    crate::secret::set_global(crate::secret::Redactor::new(&task.secrets()));
    Ok(task)
}

fn read_stdin() -> Result<String, Error> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(Error::Stdin(
            "expected the Task YAML on stdin, e.g. `agent-runner validate < task.yaml`".into(),
        ));
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .take(MAX_STDIN_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::Stdin(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_STDIN_BYTES {
        return Err(Error::Stdin(format!(
            "the Task YAML is larger than {MAX_STDIN_BYTES} bytes"
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = valid.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
        Error::Stdin(format!(
            "not valid UTF-8 (invalid byte at line {line}, column {column})"
        ))
    })
}

fn write_stdout(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(Error::Stdout)
}

/// Prints an error (and its hint) on stderr; returns its exit code.
fn report(error: &Error) -> i32 {
    let message = crate::secret::redact_global(&error.to_string());
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "error: {message}");
    if let Some(hint) = error.hint() {
        let _ = writeln!(err, "hint: {}", crate::secret::redact_global(hint));
    }
    error.exit_code()
}
