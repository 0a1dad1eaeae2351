//! `agent-runner tools install`: the tools volume on the Docker host (SPEC §21,
//! `agent_runner_sandbox::backend::tools`), filled now rather than at a task's first
//! use; a volume whose fill was interrupted is filled again. `agent-runner tools
//! image`: that volume's content as an image, for clusters (SPEC §25,
//! `backend::tools_image`).

use crate::error::exit;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_sandbox::backend::BackendError;
use agent_runner_sandbox::backend::{tools, tools_image};

use super::write_stdout;

/// `agent-runner tools …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ToolsCommand {
    /// Fill agent-runner's tools volume (the pinned codex and claude, and its static
    /// helper) on the Docker host, if it is not complete there yet.
    Install,
    /// Build the tools image a Kubernetes cluster's Pods take the tools from (the
    /// tools volume's content; filled first if missing), named for this build of
    /// agent-runner unless --tag names it. Push it where the cluster pulls, or load
    /// it on its nodes.
    Image {
        /// The image's name (default: agent-runner-tools:<this build's digest>,
        /// the name the Kubernetes backend runs).
        #[arg(long)]
        tag: Option<String>,
        /// Only the shell and the helper (~3 MB): for worker images that bring
        /// their own agent (runner.worker.agent_from: image).
        #[arg(long)]
        without_agents: bool,
    },
}

/// Runs the command; returns the exit code.
pub(crate) fn run(command: ToolsCommand, interrupt: Interrupt) -> i32 {
    match command {
        ToolsCommand::Image {
            tag,
            without_agents,
        } => match tools_image::build(tag.as_deref(), !without_agents, interrupt) {
            Ok(built) => {
                let line = format!(
                    "{} built ({} MB of tools{}): push it where the cluster pulls, or load it on its nodes\n",
                    built.image,
                    built.bytes.div_ceil(1_000_000),
                    if without_agents { ", no agents" } else { "" }
                );
                match write_stdout(&line) {
                    Ok(()) => exit::COMPLETE,
                    Err(_) => exit::FAILED,
                }
            }
            Err(BackendError::Interrupted) => exit::INTERRUPTED,
            Err(e) => {
                eprintln!("agent-runner tools image: error: {e}");
                exit::FAILED
            }
        },
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
