//! `agent-runner orchestrate`: runs the queue of a workspace (SPEC §12).

use std::path::Path;

use crate::error::{Error, exit};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_pipeline::Workspace;
use agent_runner_pipeline::orchestrator::orchestrate::{self, Ended, Options};

use super::report;

/// Runs the orchestrator on the workspace of the directory `workspace`; returns the
/// exit code.
pub(crate) fn run(workspace: &Path, options: Options, interrupt: Interrupt) -> i32 {
    if let Err(e) = agent_runner_sandbox::backend::host::check_pool(&options.hosts, |i| {
        format!("--host {}", options.hosts[i].name)
    }) {
        eprintln!("agent-runner orchestrate: error: {e}");
        return exit::FAILED;
    }
    let prepared = (|| {
        let ws = Workspace::open(&super::home()?, workspace)?;
        let exe = super::this_binary()?;
        Ok::<_, Error>((ws, exe))
    })();
    match prepared {
        Ok((ws, exe)) => match orchestrate::run(ws, options, exe, interrupt) {
            Ended::Succeeded => exit::COMPLETE,
            Ended::Failed => exit::FAILED,
            Ended::Interrupted => exit::INTERRUPTED,
        },
        Err(e) => report(&e, &Redactor::default()),
    }
}
