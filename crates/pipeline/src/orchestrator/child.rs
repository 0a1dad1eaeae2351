//! One attempt's runner: `agent-runner run --json`, the same binary, as a child
//! process with the TaskConfig on stdin, its stderr in `runner.stderr.log`, and the
//! result JSON (SPEC §8) read from its stdout.
//!
//! Crash safety: if the orchestrator dies, even by SIGKILL, its children must notice
//! and clean up (stop the container, write the note "interrupted"). We use the
//! parent-death signal: the child is spawned with `PR_SET_PDEATHSIG = SIGTERM`, which
//! the runner handles like any SIGTERM. The kernel sends it when the *thread* that
//! spawned the child ends, so each child is spawned by its attempt's own thread,
//! which waits for the child to the end (`process::run`); a child that finds its
//! parent already gone when it starts exits at once. The alternatives named in the
//! issue were weaker here: a closing stdin pipe is only seen by a child that still
//! reads stdin (the runner reads it once, at start), and a shared process group is
//! not signalled by the kernel when its leader dies. The child's stderr goes straight
//! to its log file, so it keeps a place to write after the orchestrator is gone.

use std::path::Path;
use std::time::Duration;

use serde_json::value::RawValue;

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Ending, Invocation, Limits, Stop};
use agent_runner_sandbox::backend::host::Target;

/// Time the runner gets to clean up after SIGTERM before it is killed.
const CLEANUP_GRACE: Duration = Duration::from_secs(60);
/// Largest stdout kept (the result JSON is a few KiB).
const MAX_STDOUT: usize = 1 << 20;

/// How the runner child ended.
#[derive(Debug)]
pub(crate) struct ChildRun {
    /// The result JSON it printed, if it printed one.
    pub(crate) result: Option<Box<RawValue>>,
    /// `status` of that result.
    pub(crate) status: Option<String>,
    /// Its `error` (or `summary` when failed without an error).
    pub(crate) error: Option<String>,
    /// Its `verified` (SPEC §16): COMPLETE and the last test passed.
    pub(crate) verified: bool,
    pub(crate) ending: Ending,
    /// "exit status 1", "killed by signal 9".
    pub(crate) exit: String,
    pub(crate) duration: Duration,
}

/// Runs `exe run --json` (`--resume` with `resume`, `--message` with `message`) in `cwd` with `config` on
/// stdin, its caches those of `cache_repo` (the workspace's directory, whichever
/// clone the attempt runs in); stderr to `stderr_log`. `interrupt` forwards a SIGTERM to the child (it
/// then cleans up); `started` is told the child's pid as soon as it runs. An error:
/// the child could not be run at all.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    exe: &Path,
    config: &str,
    cwd: &Path,
    stderr_log: &Path,
    interrupt: Interrupt,
    resume: bool,
    message: Option<&str>,
    cache_repo: &Path,
    host: Option<&Target>,
    started: &mut dyn FnMut(u32),
) -> Result<ChildRun, agent_runner_core::Error> {
    let mut args = vec!["run", "--json"];
    if resume {
        args.push("--resume");
    }
    // A follow-up (SPEC §23): the user's own words, bounded, not a secret; one
    // argument, so that a message starting with `-` is no option.
    let message = message.map(|m| format!("--message={m}"));
    if let Some(message) = &message {
        args.push(message);
    }
    let invocation = Invocation::new(&exe.display().to_string())
        .args(args)
        .cwd(cwd)
        .stdin(config)
        .env("AGENT_RUNNER_CACHE_REPO", &cache_repo.display().to_string())
        .stderr_to(stderr_log)
        .die_with_parent();
    // Its sandbox starts on its host: every docker call it makes goes there.
    let invocation = match host {
        Some(target) => target.apply(invocation),
        None => invocation,
    };
    let limits = Limits {
        wall: None,
        idle: None,
        grace: CLEANUP_GRACE,
        interrupt,
    };
    let mut capture = Capture::in_memory(MAX_STDOUT);
    let finished =
        process::run_watched(&invocation, &limits, &mut capture, Stop::Terminate, started)?;
    let stdout = capture.tail();
    let result = last_json_object(&stdout);
    let parsed: Option<serde_json::Value> = result
        .as_ref()
        .and_then(|r| serde_json::from_str(r.get()).ok());
    let field = |name: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get(name))
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    let status = field("status");
    let error = field("error").or_else(|| {
        (status.as_deref() != Some("succeeded"))
            .then(|| field("summary"))
            .flatten()
    });
    let verified = parsed
        .as_ref()
        .and_then(|v| v.get("verified"))
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    Ok(ChildRun {
        result,
        status,
        error,
        verified,
        ending: finished.ending,
        exit: describe(finished.status),
        duration: finished.duration,
    })
}

/// The last line of `stdout` that is a JSON object.
fn last_json_object(stdout: &str) -> Option<Box<RawValue>> {
    stdout
        .lines()
        .rev()
        .map(str::trim)
        .filter(|l| l.starts_with('{'))
        .find_map(|l| {
            let raw: Box<RawValue> = serde_json::from_str(l).ok()?;
            Some(raw)
        })
}

fn describe(status: Option<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        None => "did not end".into(),
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            _ => "ended".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_result_is_the_last_json_object_line() {
        let raw = last_json_object("noise\n{\"status\":\"failed\"}\n{bad\n").unwrap();
        assert_eq!(raw.get(), "{\"status\":\"failed\"}");
        assert!(last_json_object("COMPLETE: task x\n").is_none());
    }

    #[test]
    fn a_stub_runner_is_read() {
        let dir =
            std::env::temp_dir().join(format!("ar-child-{}", crate::store::id::random_hex(8)));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("stub");
        std::fs::write(
            &exe,
            "#!/bin/sh\ncat >/dev/null\necho progress >&2\necho '{\"task_id\":\"t\",\"status\":\"failed\",\"summary\":\"s\",\"error\":\"boom\"}'\nexit 1\n",
        )
        .unwrap();
        std::process::Command::new("chmod")
            .args(["+x", exe.to_str().unwrap()])
            .status()
            .unwrap();
        let log = dir.join("stderr.log");
        let mut pid = 0;
        let run = run(
            &exe,
            "task: {}",
            &dir,
            &log,
            Interrupt::never(),
            false,
            None,
            &dir,
            None,
            &mut |p| pid = p,
        )
        .unwrap();
        assert_ne!(pid, 0, "told the runner's pid");
        assert_eq!(run.status.as_deref(), Some("failed"));
        assert_eq!(run.error.as_deref(), Some("boom"));
        assert_eq!(run.exit, "exit status 1");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "progress\n");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
