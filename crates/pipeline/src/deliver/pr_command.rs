//! The PR command of `defaults.deliver` (SPEC §23): `sh -c` on the host, in the
//! job's log directory (never in the repository, whose git configuration a worker
//! may have written: `gh` and `glab` take `--repo`), with what it needs in
//! variables, never spliced into the command line, so a title is never shell.

use std::path::Path;
use std::time::Duration;

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Ending, Invocation, Limits, Stop};
use agent_runner_core::text::{cut, one_line, tail};

/// Time a PR command may take.
const TIMEOUT: Duration = Duration::from_secs(300);

/// What the command gets as `AGENT_RUNNER_*` variables.
pub(crate) struct Env<'a> {
    pub(crate) task_id: &'a str,
    pub(crate) branch: &'a str,
    pub(crate) title: &'a str,
    /// The Task Note (empty when there is none).
    pub(crate) note: Option<&'a Path>,
}

/// Why the PR command did not give a PR (recorded on the delivery line).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrFailed {
    #[error("cannot run the PR command: {0}")]
    CannotRun(agent_runner_core::Error),
    #[error("the PR command was interrupted")]
    Interrupted,
    #[error("the PR command timed out after {0}s")]
    TimedOut(u64),
    /// Its exit code and its stderr's tail on one line.
    #[error("the PR command failed ({code:?}): {stderr}")]
    Failed { code: Option<i32>, stderr: String },
}

/// Runs `command`; its last non-empty output line (the PR's URL), or an error
/// naming the command's exit and its stderr tail.
pub(crate) fn run(
    command: &str,
    env: &Env,
    cwd: &Path,
    interrupt: Interrupt,
) -> Result<Option<String>, PrFailed> {
    let note = env
        .note
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let invocation = Invocation::new("sh")
        .args(["-c", command])
        .env("AGENT_RUNNER_TASK_ID", env.task_id)
        .env("AGENT_RUNNER_BRANCH", env.branch)
        .env("AGENT_RUNNER_TITLE", env.title)
        .env("AGENT_RUNNER_NOTE", &note)
        .cwd(cwd)
        .die_with_parent();
    let mut last = None;
    let mut on_line = |line: &[u8]| {
        let line = String::from_utf8_lossy(line);
        let line = line.trim();
        if !line.is_empty() {
            last = Some(cut(&one_line(line), 2000));
        }
    };
    let mut capture = Capture::in_memory(16 * 1024).with_lines(64 * 1024, &mut on_line);
    let finished = process::run(
        &invocation,
        &Limits::wall(TIMEOUT, interrupt),
        &mut capture,
        Stop::Terminate,
    )
    .map_err(PrFailed::CannotRun)?;
    let stderr = tail(capture.stderr().trim(), 600);
    drop(capture);
    match finished.ending {
        Ending::Interrupted => Err(PrFailed::Interrupted),
        Ending::TimedOut => Err(PrFailed::TimedOut(TIMEOUT.as_secs())),
        _ if finished.success() => Ok(last),
        _ => Err(PrFailed::Failed {
            code: finished.code(),
            stderr: one_line(&stderr),
        }),
    }
}
