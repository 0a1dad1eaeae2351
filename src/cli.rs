//! Command line: parses arguments, reads the task from stdin, dispatches, and turns
//! the outcome into output and an exit code. stdout carries only results.

use std::io::{IsTerminal, Read, Write};

use clap::{Parser, Subcommand};

use crate::error::{Error, exit};
use crate::task::{self, Host, Task};

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
    /// Check the Task YAML on stdin and print the task as it would run; runs nothing.
    Validate,
}

/// Runs the program; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    crate::logging::init();
    match cli.command {
        Command::Validate => match validate() {
            Ok(()) => exit::COMPLETE,
            Err(e) => report(&e),
        },
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
