//! Short calls of the `docker` CLI (inspect, rm, ps, version, pull) and reading
//! docker's own error messages. agent-runner talks to Docker only through the CLI
//! (SPEC §1).

use std::path::Path;
use std::time::Duration;

use super::SandboxError;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Ending, Limits, Stop};
use agent_runner_core::text;

/// What a short docker call printed.
pub(crate) struct DockerOutput {
    pub(crate) ok: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `docker <args>` with `limits`; its output, or why it could not run.
pub(crate) fn docker(args: &[&str], limits: Limits) -> Result<DockerOutput, SandboxError> {
    let invocation = process::Invocation::new("docker").args(args.iter().copied());
    let mut stdout = String::new();
    let mut on_line = |line: &[u8]| {
        if stdout.len() < (1 << 20) {
            stdout.push_str(&String::from_utf8_lossy(line));
            stdout.push('\n');
        }
    };
    let mut capture = Capture::in_memory(16 * 1024).with_lines(64 * 1024, &mut on_line);
    let finished = process::run(&invocation, &limits, &mut capture, Stop::Terminate)
        .map_err(docker_missing)?;
    let stderr = capture.stderr();
    drop(capture);
    if finished.ending == Ending::Interrupted {
        return Err(SandboxError::Interrupted);
    }
    Ok(DockerOutput {
        ok: finished.success(),
        stdout,
        stderr,
    })
}

/// `docker rm -f`; true when it succeeded. Runs even after an interrupt.
pub fn remove_container(name: &str) -> bool {
    docker(
        &["rm", "-f", name],
        Limits::cleanup(Duration::from_secs(30)),
    )
    .is_ok_and(|o| o.ok)
}

/// The docker CLI could not be started.
pub(crate) fn docker_missing(e: agent_runner_core::Error) -> SandboxError {
    SandboxError::DockerMissing(format!(
        "{e}; install the Docker CLI and make sure `docker` is on PATH"
    ))
}

/// `Some(reason)` when the docker daemon does not answer.
pub(crate) fn daemon_problem() -> Option<String> {
    match docker(
        &["version", "--format", "{{.Server.Version}}"],
        Limits::wall(Duration::from_secs(30), Interrupt::never()),
    ) {
        Ok(out) if out.ok => None,
        Ok(out) => Some(last_lines(&out.stderr, 2)),
        Err(e) => Some(e.to_string()),
    }
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
pub fn mount_spec(source: &Path, target: &str, readonly: bool) -> String {
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
pub(crate) fn last_lines(text: &str, n: usize) -> String {
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
    }
}
