//! Calls to this process's Docker daemon that must go on answering (SPEC §22): a
//! remote daemon's health is checked beside a long call, a lost one ends the call
//! and every call after it at once, and a missing CLI or an interrupt are errors.
//! Below this, `docker_cli` only runs the CLI; `endpoint` says which daemon it is.

use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use super::BackendError;
use super::docker_cli::{
    DockerFault, Output, cli_missing, command, fault_in, last_lines, run_invocation,
};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Ending, Invocation, Limits, Stop};

/// The health check of a daemon: `docker version` within this (SPEC §22).
pub(crate) const HEALTH: Duration = Duration::from_secs(5);
/// How long a call to this process's daemon runs before the daemon is asked
/// whether it still answers (`HEALTH`), and again each time after.
const WATCH_EVERY: Duration = Duration::from_secs(10);
/// How often the watch looks at the interrupt (which wakes nothing).
const LOOK_EVERY: Duration = Duration::from_millis(20);
/// How long a lost host stays lost for this process's calls: the runner's end
/// (the removals, the copy's bring-back) no longer waits on it; a long-lived
/// process (the orchestrator) asks again after this.
const LOST_FOR: Duration = Duration::from_secs(120);

/// This process's daemon found lost (its health check unanswered): when, and the
/// message (`host lost: <daemon>: <detail>`).
static LOST: std::sync::Mutex<Option<(std::time::Instant, String)>> = std::sync::Mutex::new(None);

/// `host lost: …` when this process's daemon was found lost lately.
pub(crate) fn lost() -> Option<String> {
    let lost = LOST.lock().unwrap_or_else(|e| e.into_inner());
    lost.as_ref()
        .filter(|(at, _)| at.elapsed() < LOST_FOR)
        .map(|(_, message)| message.clone())
}

/// Remembers this process's daemon as lost: `message` says `host lost: …`.
pub(crate) fn mark_lost(message: &str) {
    let mut lost = LOST.lock().unwrap_or_else(|e| e.into_inner());
    *lost = Some((std::time::Instant::now(), message.to_string()));
}

/// None when this process's daemon answers `docker version` within `HEALTH`;
/// else why not.
pub(crate) fn unhealthy() -> Option<String> {
    let version = command().args(["version", "--format", "{{.Server.Version}}"]);
    match run_invocation(&version, HEALTH, Interrupt::never()) {
        Ok(out) if out.ok => None,
        Ok(out) if out.ending == Ending::TimedOut => {
            Some(format!("no answer within {} s", HEALTH.as_secs()))
        }
        Ok(out) => match fault_in(&out.stderr) {
            Some(DockerFault::Daemon) => Some(last_lines(&out.stderr, 2)),
            // Another answer is an answer: the daemon is there.
            _ => None,
        },
        Err(_) => None,
    }
}

/// Whether this process's daemon is off this machine's unix socket (read once).
fn remote_daemon() -> bool {
    static REMOTE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *REMOTE.get_or_init(|| super::endpoint::Endpoint::current(HEALTH).is_ok_and(|e| e.is_remote()))
}

/// The daemon of this process's calls in words, for a lost host's message.
fn daemon_name() -> String {
    match super::endpoint::Endpoint::current(HEALTH) {
        Ok(endpoint) => endpoint.to_string(),
        Err(_) => "the docker daemon".into(),
    }
}

/// `run_invocation` of a call to this process's daemon (made with `command`), which
/// must go on answering (SPEC §22: a paused or unreachable host ends the attempt
/// within seconds, not at the end of a long call's deadline): a call longer than
/// `WATCH_EVERY` is `watched`; on a lost host it is stopped and
/// `EngineUnreachable("host lost: …")` returned, as it is at once for every call
/// after. An interrupt ends it as `Ending::Interrupted`.
pub(crate) fn guarded(
    invocation: &Invocation,
    deadline: Duration,
    interrupt: Interrupt,
) -> Result<Output, BackendError> {
    if let Some(message) = lost() {
        return Err(BackendError::EngineUnreachable(message));
    }
    if deadline <= WATCH_EVERY {
        return run_invocation(invocation, deadline, interrupt).map_err(cli_missing);
    }
    let (out, lost) = watched(interrupt, |stop| run_invocation(invocation, deadline, stop));
    match lost {
        Some(message) => Err(BackendError::EngineUnreachable(message)),
        None => out.map_err(cli_missing),
    }
}

/// Runs `work` (something waiting on this process's daemon) with a stop flag of its
/// own, set by `interrupt` or, for a daemon off this machine, when that stops
/// answering: after each `WATCH_EVERY` its health is checked beside the work
/// (`unhealthy`); unanswered, the host is lost (`mark_lost`) and the flag set. What
/// `work` returned, and the lost host's message if that is why it was stopped.
pub(crate) fn watched<T>(
    interrupt: Interrupt,
    work: impl FnOnce(Interrupt) -> T,
) -> (T, Option<String>) {
    // This machine's own daemon is not a host that goes away: a slow answer of a
    // busy one must not end a healthy run.
    if !remote_daemon() {
        return (work(interrupt), None);
    }
    // One small allocation per watched call (`Interrupt::manual`): they are few.
    let stop = Interrupt::manual();
    // Set already: the work ends at once, as under `interrupt` itself.
    if interrupt.is_set() {
        stop.trigger();
    }
    // Dropped when the work has ended: the watch wakes at once, so the work's end
    // never waits for the watch's next look (a sleep of 20 ms did, on every exec).
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let found = std::sync::Mutex::new(None);
    let (on_loss, stopper) = (&found, &stop);
    let out = std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut next = std::time::Instant::now() + WATCH_EVERY;
            while let Err(RecvTimeoutError::Timeout) = ended.recv_timeout(LOOK_EVERY) {
                if interrupt.is_set() {
                    stopper.trigger();
                    return;
                }
                if std::time::Instant::now() >= next {
                    if let Some(detail) = lost().or_else(|| {
                        unhealthy().map(|detail| format!("host lost: {}: {detail}", daemon_name()))
                    }) {
                        mark_lost(&detail);
                        *on_loss.lock().unwrap_or_else(|e| e.into_inner()) = Some(detail);
                        stopper.trigger();
                        return;
                    }
                    next = std::time::Instant::now() + WATCH_EVERY;
                }
            }
        });
        let out = work(stop);
        drop(done);
        out
    });
    let found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    (out, found)
}

/// `docker rm -f`; true when it succeeded. Runs even after an interrupt; not on a
/// lost host (`guarded`): when it comes back, what held the container ends it.
pub(crate) fn remove_container(name: &str, deadline: Duration) -> bool {
    call(&["rm", "-f", name], deadline, Interrupt::never()).is_ok_and(|o| o.ok)
}

/// Waits, at most `deadline`, until docker no longer knows the container `name`
/// (`docker run --rm`'s own removal may be under way, and `docker rm -f` then says
/// "already in progress"): whether it is gone. Only the daemon's "no such" says
/// so; a daemon that does not answer says nothing.
pub(crate) fn wait_gone(name: &str, deadline: Duration) -> bool {
    let until = std::time::Instant::now() + deadline;
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        let answer = call(
            &["container", "inspect", "--format", "{{.Id}}", name],
            left.max(Duration::from_secs(1)),
            Interrupt::never(),
        );
        if answer.is_ok_and(|o| !o.ok && no_such(&o.stderr)) {
            return true;
        }
        if std::time::Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether a docker CLI's error says the object it named does not exist.
fn no_such(stderr: &str) -> bool {
    stderr.contains("No such container") || stderr.contains("No such object")
}

/// `guarded` for a call whose stdout is data, not text (`docker cp <src> -`): every
/// chunk of it goes to `sink` as it comes, none is kept here.
pub(crate) fn guarded_streaming(
    invocation: &Invocation,
    deadline: Duration,
    interrupt: Interrupt,
    sink: &mut dyn process::StreamFilter,
) -> Result<Output, BackendError> {
    if let Some(message) = lost() {
        return Err(BackendError::EngineUnreachable(message));
    }
    let (out, lost) = watched(interrupt, |stop| {
        let mut capture = Capture::in_memory(16 * 1024).with_filter(sink);
        let finished = process::run(
            invocation,
            &Limits::wall(deadline, stop),
            &mut capture,
            Stop::Terminate,
        )?;
        let stderr = capture.stderr();
        Ok::<_, agent_runner_core::Error>(Output {
            ok: finished.success(),
            code: finished.code(),
            ending: finished.ending,
            stdout: String::new(),
            stderr,
        })
    });
    match lost {
        Some(message) => Err(BackendError::EngineUnreachable(message)),
        None => out.map_err(cli_missing),
    }
}

/// `run` for the mechanism: a missing CLI, an interrupt and a lost host are errors.
pub(crate) fn call(
    args: &[&str],
    deadline: Duration,
    interrupt: Interrupt,
) -> Result<Output, BackendError> {
    let out = guarded(&command().args(args.iter().copied()), deadline, interrupt)?;
    if out.ending == Ending::Interrupted {
        return Err(BackendError::Interrupted);
    }
    Ok(out)
}

/// `Some(reason)` when the docker daemon does not answer within `deadline`.
pub(crate) fn daemon_problem(deadline: Duration) -> Option<String> {
    if let Some(message) = lost() {
        return Some(message);
    }
    match call(
        &["version", "--format", "{{.Server.Version}}"],
        deadline,
        Interrupt::never(),
    ) {
        Ok(out) if out.ok => None,
        Ok(out) => Some(last_lines(&out.stderr, 2)),
        Err(e) => Some(e.to_string()),
    }
}
