//! `agent-runner tools install`: the tools volume on the Docker host (SPEC §21,
//! `agent_runner_sandbox::backend::tools`), filled now rather than at a task's first
//! use; a volume whose fill was interrupted is filled again.

use crate::error::exit;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_sandbox::backend::BackendError;
use agent_runner_sandbox::backend::tools;

use super::write_stdout;

/// `agent-runner tools …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ToolsCommand {
    /// Fill agent-runner's tools volume (the pinned codex and claude, and its static
    /// helper) on the Docker host, if it is not complete there yet.
    Install,
}

/// Runs the command; returns the exit code.
pub(crate) fn run(command: ToolsCommand, interrupt: Interrupt) -> i32 {
    match command {
        ToolsCommand::Install => match tools::install(interrupt) {
            Ok(filled) => {
                let line = match filled.took {
                    None => format!("{} is there already (complete)\n", filled.volume),
                    Some(took) => format!(
                        "{} filled in {} ({} MB downloaded, sha512-checked)\n",
                        filled.volume,
                        agent_runner_core::timestamp::human(took),
                        filled.downloaded / 1_000_000
                    ),
                };
                match write_stdout(&line) {
                    Ok(()) => exit::COMPLETE,
                    Err(_) => exit::FAILED,
                }
            }
            Err(BackendError::Interrupted) => exit::INTERRUPTED,
            Err(e) => {
                eprintln!("agent-runner tools install: error: {e}");
                exit::FAILED
            }
        },
    }
}
