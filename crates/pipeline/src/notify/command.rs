//! A command notification: `sh -c` on the host, the JSON on its stdin, in the
//! job's log directory (never the repository).

use std::path::Path;
use std::time::Duration;

use super::not_sent::NotSent;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Ending, Invocation, Limits, Stop};
use agent_runner_core::text::{one_line, tail};

/// Time a notify command may take.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `command` with `body` on its stdin in `cwd`.
pub(crate) fn run(
    command: &str,
    body: &[u8],
    cwd: &Path,
    interrupt: Interrupt,
) -> Result<(), NotSent> {
    let invocation = Invocation::new("sh")
        .args(["-c", command])
        .stdin(body.to_vec())
        .cwd(cwd)
        .die_with_parent();
    let mut capture = Capture::in_memory(16 * 1024);
    let finished = process::run(
        &invocation,
        &Limits::wall(TIMEOUT, interrupt),
        &mut capture,
        Stop::Terminate,
    )
    .map_err(NotSent::CannotRun)?;
    match finished.ending {
        Ending::TimedOut => Err(NotSent::TimedOut(TIMEOUT.as_secs())),
        Ending::Interrupted => Err(NotSent::Interrupted),
        _ if finished.success() => Ok(()),
        _ => Err(NotSent::Exit {
            code: finished.code(),
            stderr: one_line(&tail(capture.stderr().trim(), 400)),
        }),
    }
}
