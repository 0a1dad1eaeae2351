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

/// Whether the daemon said the image is not there (`docker image inspect`, `docker
/// run`, `docker create`), in the words its versions use.
pub(crate) fn no_such_image(stderr: &str) -> bool {
    stderr.contains("No such image") || stderr.contains("Unable to find image")
}

/// The docker CLI could not be started.
pub(crate) fn cli_missing(e: agent_runner_core::Error) -> BackendError {
    BackendError::CliMissing(format!(
        "{e}; install the Docker CLI and make sure `docker` is on PATH"
    ))
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
        || stderr.contains(super::main_exec::EXEC_FAILED)
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
