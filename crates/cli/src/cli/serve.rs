//! `agent-runner serve`: the web view of a workspace (SPEC §14). Prints the URL on
//! stdout (the command's one result: the address it listens on, never a name,
//! which could lead elsewhere), then serves until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::Path;

use crate::error::{Error, exit};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::escape_controls;
use agent_runner_pipeline::{PipelineError, Workspace, web};

use super::{report, write_stdout};

/// `--addr`: an IP address and a port; a name such as `localhost` is refused, so
/// what the server listens on is exactly what was asked.
pub(crate) fn parse_addr(value: &str) -> Result<SocketAddr, super::bad_value::BadValue> {
    value
        .parse()
        .map_err(|_| super::bad_value::BadValue::Addr(value.to_string()))
}

/// Serves the web view of the workspace of `workspace` on `addr`; returns the exit
/// code (130 after SIGINT/SIGTERM, 2 for a non-loopback address without
/// `allow_remote`).
pub(crate) fn run(
    workspace: &Path,
    addr: SocketAddr,
    allow_remote: bool,
    interrupt: Interrupt,
) -> i32 {
    if !addr.ip().is_loopback() && !allow_remote {
        eprintln!(
            "error: --addr {addr} is not a loopback address: the web view would be reachable from other machines\nhint: to serve on it anyway, add --allow-remote"
        );
        return exit::USAGE;
    }
    let prepared = (|| {
        let ws = Workspace::open(&super::home()?, workspace)?;
        let exe = super::this_binary()?;
        let listeners = web::listen(addr).map_err(|e| PipelineError::Invalid(e.to_string()))?;
        let local = listeners[0]
            .local_addr()
            .map_err(|e| PipelineError::Invalid(format!("cannot listen on {addr}: {e}")))?;
        Ok::<_, Error>((ws, exe, listeners, local))
    })();
    let (ws, exe, listeners, local) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => return report(&e, &Redactor::default()),
    };
    if !local.ip().is_loopback() {
        eprintln!(
            "warning: serving on {local}, reachable from other machines: anyone who can connect from another machine can read this workspace's tasks, notes and logs, and with the token in the pages create and run tasks"
        );
    }
    if let Err(e) = write_stdout(&format!("http://{local}/\n")) {
        return report(&e, &Redactor::default());
    }
    log::info!(
        "serving workspace {} ({}) on http://{local}/; Ctrl-C stops",
        ws.id,
        escape_controls(&ws.root_dir.display().to_string())
    );
    match web::serve(ws, listeners, exe, interrupt) {
        Ok(()) if interrupt.is_set() => exit::INTERRUPTED,
        Ok(()) => exit::COMPLETE,
        Err(e) => {
            eprintln!("error: the web view stopped: {e}");
            exit::FAILED
        }
    }
}
