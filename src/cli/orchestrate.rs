//! `agent-runner orchestrate`: runs the queue of a workspace (SPEC §12).

use std::path::Path;

use crate::error::{Error, exit};
use crate::interrupt::Interrupt;
use crate::pipeline::orchestrator::orchestrate::{self, Ended, Options};
use crate::pipeline::{PipelineError, Workspace};
use crate::secret::Redactor;

use super::report;

/// Runs the orchestrator on the workspace of the directory `workspace`; returns the
/// exit code.
pub fn run(workspace: &Path, options: Options, interrupt: Interrupt) -> i32 {
    let prepared = (|| {
        let ws = Workspace::open(&super::home()?, workspace)?;
        let exe = std::env::current_exe().map_err(PipelineError::io(
            "locate the agent-runner binary",
            "/proc/self/exe",
        ))?;
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
