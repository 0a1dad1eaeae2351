//! The one place a `docker` CLI call is made (SPEC §1: agent-runner talks to Docker
//! only through the CLI), and reading docker's own error messages. Every call here
//! has a deadline: short calls (`run`, `call`) take one as an argument, execs get
//! their run's limits (`docker.rs`), and a held `docker run` is waited for until
//! its main process is ready. A remote host (SPEC §22) adds its context to
//! `command`, and its own deadlines to the backend (`Docker`).

use std::path::Path;
use std::time::Duration;

use super::BackendError;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Ending, Invocation, Limits, Stop};
use agent_runner_core::text;

/// What a docker call printed and how it ended.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exited 0 within its deadline.
    pub ok: bool,
    pub code: Option<i32>,
    pub ending: Ending,
    /// The first MiB of stdout.
    pub stdout: String,
    /// The last 16 KiB of stderr.
    pub stderr: String,
}

/// The host this process's docker calls go to (`runner.sandbox.host`), once set.
static AIMED: std::sync::OnceLock<super::target::Target> = std::sync::OnceLock::new();

/// Aims every docker call of this process at `target` (`runner.sandbox.host`, SPEC
/// §22), over DOCKER_HOST and the current context; set once, before the first call.
pub fn aim(target: super::target::Target) -> Result<(), AimedElsewhere> {
    let wanted = target.clone();
    AIMED.set(target).or_else(|_| match AIMED.get() {
        Some(set) if *set == wanted => Ok(()),
        _ => Err(AimedElsewhere),
    })
}

/// `aim` of a process aimed at another host already.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the docker host of this process is set already")]
pub struct AimedElsewhere;

/// The host `aim` set, if any.
pub fn aimed() -> Option<&'static super::target::Target> {
    AIMED.get()
}

/// The docker CLI, ready for its arguments (aimed at the host `aim` set).
pub(crate) fn command() -> Invocation {
    aim_invocation(Invocation::new("docker"))
}

/// `invocation` (one that runs docker, directly or through a script) aimed at the
/// host `aim` set.
pub(crate) fn aim_invocation(invocation: Invocation) -> Invocation {
    match AIMED.get() {
        Some(target) => target.apply(invocation),
        None => invocation,
    }
}

/// Runs `docker <args>` for at most `deadline` (an `interrupt` ends it sooner); its
/// output, or why docker could not start.
pub fn run<S: AsRef<str>>(
    args: &[S],
    deadline: Duration,
    interrupt: Interrupt,
) -> Result<Output, agent_runner_core::Error> {
    let invocation = command().args(args.iter().map(AsRef::as_ref));
    run_invocation(&invocation, deadline, interrupt)
}

/// `run` of a docker command made with `command`.
pub(crate) fn run_invocation(
    invocation: &Invocation,
    deadline: Duration,
    interrupt: Interrupt,
) -> Result<Output, agent_runner_core::Error> {
    let mut stdout = String::new();
    let mut on_line = |line: &[u8]| {
        if stdout.len() < (1 << 20) {
            stdout.push_str(&String::from_utf8_lossy(line));
            stdout.push('\n');
        }
    };
    let mut capture = Capture::in_memory(16 * 1024).with_lines(64 * 1024, &mut on_line);
    let limits = Limits::wall(deadline, interrupt);
    let finished = process::run(invocation, &limits, &mut capture, Stop::Terminate)?;
    let stderr = capture.stderr();
    drop(capture);
    Ok(Output {
        ok: finished.success(),
        code: finished.code(),
        ending: finished.ending,
        stdout,
        stderr,
    })
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

/// The health check of a daemon: `docker version` within this (SPEC §22).
pub(crate) const HEALTH: Duration = Duration::from_secs(5);
/// How long a call to this process's daemon runs before the daemon is asked
/// whether it still answers (`HEALTH`), and again each time after.
const WATCH_EVERY: Duration = Duration::from_secs(10);
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
    let done = std::sync::atomic::AtomicBool::new(false);
    let found = std::sync::Mutex::new(None);
    let out = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut next = std::time::Instant::now() + WATCH_EVERY;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                if interrupt.is_set() {
                    stop.trigger();
                    return;
                }
                if std::time::Instant::now() >= next {
                    if let Some(detail) = lost().or_else(|| {
                        unhealthy().map(|detail| format!("host lost: {}: {detail}", daemon_name()))
                    }) {
                        mark_lost(&detail);
                        *found.lock().unwrap_or_else(|e| e.into_inner()) = Some(detail);
                        stop.trigger();
                        return;
                    }
                    next = std::time::Instant::now() + WATCH_EVERY;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let out = work(stop);
        done.store(true, std::sync::atomic::Ordering::SeqCst);
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
/// "already in progress"): whether it is gone.
pub(crate) fn wait_gone(name: &str, deadline: Duration) -> bool {
    let until = std::time::Instant::now() + deadline;
    loop {
        let known = call(
            &["container", "inspect", "--format", "{{.Id}}", name],
            deadline,
            Interrupt::never(),
        )
        .is_ok_and(|o| o.ok);
        if !known {
            return true;
        }
        if std::time::Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The docker CLI could not be started.
pub(crate) fn cli_missing(e: agent_runner_core::Error) -> BackendError {
    BackendError::CliMissing(format!(
        "{e}; install the Docker CLI and make sure `docker` is on PATH"
    ))
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

/// The fix for an engine that lacks a part agent-runner needs, from its error text:
/// podman (as `docker`) runs `--init` with catatonit, a package of its own (SPEC §24).
pub fn missing_part(stderr: &str) -> Option<&'static str> {
    (stderr.contains("container-init binary not found") || stderr.contains("catatonit")).then_some(
        "podman runs `--init` with catatonit, which is not installed: install it (Debian/Ubuntu: \
         apt-get install catatonit)",
    )
}

/// What docker's own error text says went wrong, if it is docker's (not the
/// command's) error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DockerFault {
    /// The container does not exist or is not running.
    ContainerGone,
    /// The daemon did not answer.
    Daemon,
    /// The runtime could not start the program (not in the image, not executable).
    CannotExec,
    /// Another error from the daemon.
    Other,
}

/// Classifies docker's own error messages (the CLI prints them on stderr).
pub(crate) fn fault_in(stderr: &str) -> Option<DockerFault> {
    if stderr.contains("No such container") || stderr.contains("is not running") {
        Some(DockerFault::ContainerGone)
    } else if stderr.contains("Cannot connect to the Docker daemon")
        || stderr.contains("error during connect")
    {
        Some(DockerFault::Daemon)
    } else if stderr.contains("OCI runtime exec failed")
        || stderr.contains("executable file not found")
    {
        Some(DockerFault::CannotExec)
    } else if stderr.contains("Error response from daemon") {
        Some(DockerFault::Other)
    } else {
        None
    }
}

/// `--mount` value for a bind mount. The value is CSV: a path with a comma or a
/// quote is quoted. (Paths with control characters are refused when the task is
/// read: CSV cannot carry a newline safely.)
pub(crate) fn mount_spec(source: &Path, target: &str, readonly: bool) -> String {
    let source = format!("source={}", source.display());
    let source = if source.contains([',', '"']) {
        format!("\"{}\"", source.replace('"', "\"\""))
    } else {
        source
    };
    let mut spec = format!("type=bind,{source},target={target}");
    if readonly {
        spec.push_str(",readonly");
    }
    spec
}

/// The last `n` non-empty lines of `text`, joined with " / ", control characters
/// shown escaped.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let start = lines.len().saturating_sub(n);
    let joined = lines[start..].join(" / ");
    if joined.is_empty() {
        "(no error output)".into()
    } else {
        text::escape_controls(&text::cut(&joined, 1000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_values_are_csv_quoted_when_needed() {
        assert_eq!(
            mount_spec(Path::new("/a/b"), "/t", false),
            "type=bind,source=/a/b,target=/t"
        );
        assert_eq!(
            mount_spec(Path::new("/a,b"), "/t", true),
            "type=bind,\"source=/a,b\",target=/t,readonly"
        );
    }

    #[test]
    fn last_lines_skips_blank_lines() {
        assert_eq!(last_lines("a\n\nb\n  \nc\n", 2), "b / c");
        assert_eq!(last_lines("", 2), "(no error output)");
    }

    #[test]
    fn docker_faults_are_told_from_command_output() {
        assert_eq!(
            fault_in("Error response from daemon: No such container: x"),
            Some(DockerFault::ContainerGone)
        );
        assert_eq!(
            fault_in("Error response from daemon: Container abc is not running"),
            Some(DockerFault::ContainerGone)
        );
        assert_eq!(
            fault_in("Cannot connect to the Docker daemon at unix:///x.sock."),
            Some(DockerFault::Daemon)
        );
        assert_eq!(
            fault_in(
                "OCI runtime exec failed: exec failed: unable to start container process: exec: \"sh\": executable file not found in $PATH: unknown"
            ),
            Some(DockerFault::CannotExec)
        );
        assert_eq!(fault_in("npm ERR! test failed"), None);
        // podman 4.3's words when catatonit is missing.
        assert!(
            missing_part("Error: container-init binary not found on the host: stat /usr/libexec/podman/catatonit: no such file or directory")
                .is_some_and(|fix| fix.contains("apt-get install catatonit"))
        );
        assert_eq!(missing_part("Error: No such image: x"), None);
    }
}
