//! A running sandbox read from outside, by its name (`Backend::reads_from_outside`):
//! lookups as root at `/` beside the worker's runs, the engine's diff of the
//! container against its image, a file's content streamed out, the image's ID. The
//! agent's pinning (`worker::agent_files`) is its user; what the answers mean is
//! its business, how they are asked is the engine's (here: the docker CLI).

use super::daemon;
use std::time::Duration;

use super::BackendError;
use super::docker_cli::{self, cli_missing, last_lines};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Ending, Limits, StreamFilter};
use agent_runner_settings::task::worker_env::RESERVED;

/// Time allowed for the daemon to say whether it is there, after a call failed.
const DAEMON_TIMEOUT: Duration = Duration::from_secs(30);

/// The container `container`, with the task's literal variables (PATH among them)
/// as the runs get them (by name, but for the names the docker client reads
/// itself); no secret is needed here.
pub(crate) struct Outside<'a> {
    pub container: &'a str,
    pub env: Vec<(&'a str, &'a str)>,
    pub interrupt: Interrupt,
}

/// What `Outside::copy` found at a path.
pub(crate) enum Copied<F> {
    /// Nothing there.
    Missing,
    /// The stream, read through the filter to its end; the command, for messages.
    Read(F, String),
}

impl Outside<'_> {
    /// Runs `command` in the container as root at `/` within `within`: its status,
    /// stdout and stderr. Interrupted: an error.
    pub(crate) fn exec(
        &self,
        command: &[&str],
        within: Duration,
    ) -> Result<(bool, String, String), BackendError> {
        // Ends with agent-runner, as every exec (`docker.rs`, `exec_invocation`).
        let mut invocation = docker_cli::command()
            .args(["exec", "-w", "/"])
            .die_with_parent();
        for (name, value) in &self.env {
            invocation = if RESERVED.contains(name) {
                invocation.args(["-e".to_string(), format!("{name}={value}")])
            } else {
                invocation.args(["-e", name]).env(name, value)
            };
        }
        let invocation = invocation.arg(self.container).args(command.iter().copied());
        let out = daemon::guarded(&invocation, within, self.interrupt)?;
        if out.ending == Ending::Interrupted {
            return Err(BackendError::Interrupted);
        }
        Ok((out.ok, out.stdout, out.stderr))
    }

    /// The error of an exec of `program` that failed with `stderr`: the daemon's
    /// absence when `ask` and it does not answer, else the exec named.
    pub(crate) fn exec_failed(&self, program: &str, stderr: &str, ask: bool) -> BackendError {
        if ask && let Some(problem) = daemon_problem() {
            return BackendError::EngineUnreachable(problem);
        }
        BackendError::Failed {
            command: format!("docker exec {} {program}", self.container),
            detail: last_lines(stderr, 3),
        }
    }

    /// The error of a diff that did not list the container's changes.
    pub(crate) fn diff_failed(&self) -> BackendError {
        if let Some(problem) = daemon_problem() {
            return BackendError::EngineUnreachable(problem);
        }
        BackendError::Failed {
            command: format!("docker diff {}", self.container),
            detail: "the daemon did not list the container's changes".into(),
        }
    }

    /// The ID of the container's image; None when the engine could not say.
    pub(crate) fn image_id(&self, within: Duration) -> Option<String> {
        let invocation = docker_cli::command().args([
            "inspect",
            "--type",
            "container",
            "-f",
            "{{.Image}}",
            self.container,
        ]);
        let out = docker_cli::run_invocation(&invocation, within, self.interrupt).ok()?;
        let id = out.stdout.trim();
        (out.ok && id.starts_with("sha256:")).then(|| id.to_string())
    }

    /// The engine's diff of the container against its image: each path it names
    /// ("C /path", "A /path", "D /path"; a name with a newline in it can only add a
    /// line, never hide one) to `on_path`; whether the diff was complete.
    pub(crate) fn each_diff_path(&self, within: Duration, on_path: &mut dyn FnMut(&str)) -> bool {
        let invocation = docker_cli::command().args(["diff", self.container]);
        let mut on_line = |line: &[u8]| {
            if let Some((_, path)) = String::from_utf8_lossy(line).split_once(' ') {
                on_path(path);
            }
        };
        let mut capture = Capture::in_memory(4096).with_lines(64 * 1024, &mut on_line);
        let finished = process::run(
            &invocation,
            &Limits::wall(within, self.interrupt),
            &mut capture,
            process::Stop::Terminate,
        );
        drop(capture);
        finished.is_ok_and(|finished| finished.success())
    }

    /// `path`'s content (the link followed) as a tar stream of one entry, read
    /// through a new `F` (from `reader`) within `within`.
    pub(crate) fn copy<F: StreamFilter>(
        &self,
        path: &str,
        within: Duration,
        reader: impl Fn() -> F,
    ) -> Result<Copied<F>, BackendError> {
        match self.copy_with(path, &["-L"], within, &reader) {
            // podman 4 (as `docker`) has no `-L`: a link then arrives as a link,
            // which the tar reader refuses rather than misreads (SPEC §24).
            Err(BackendError::Failed { detail, .. })
                if detail.contains("unknown shorthand flag: 'L'") =>
            {
                self.copy_with(path, &[], within, &reader)
            }
            copied => copied,
        }
    }

    /// `copy` with the options `options` of `docker cp`.
    fn copy_with<F: StreamFilter>(
        &self,
        path: &str,
        options: &[&str],
        within: Duration,
        reader: &impl Fn() -> F,
    ) -> Result<Copied<F>, BackendError> {
        let source = format!("{}:{path}", self.container);
        let invocation = docker_cli::command()
            .arg("cp")
            .args(options.iter().copied())
            .args([source.as_str(), "-"]);
        let mut reader = reader();
        let mut capture = Capture::in_memory(16 * 1024).with_filter(&mut reader);
        let finished = process::run(
            &invocation,
            &Limits::wall(within, self.interrupt),
            &mut capture,
            process::Stop::Terminate,
        )
        .map_err(cli_missing)?;
        let stderr = capture.stderr();
        drop(capture);
        let command = format!("docker cp {} {source} -", options.join(" "));
        match finished.ending {
            Ending::Interrupted => return Err(BackendError::Interrupted),
            Ending::TimedOut | Ending::Stalled => {
                return Err(BackendError::Failed {
                    command,
                    detail: format!(
                        "no answer within {}",
                        agent_runner_core::timestamp::human(within)
                    ),
                });
            }
            Ending::Exited => {}
        }
        if !finished.success() {
            // Daemons before API 1.42 say the first, later ones the second.
            if stderr.contains("Could not find the file")
                || stderr.contains("No such container:path")
                || stderr.contains("no such file")
            {
                return Ok(Copied::Missing);
            }
            if let Some(problem) = daemon_problem() {
                return Err(BackendError::EngineUnreachable(problem));
            }
            return Err(BackendError::Failed {
                command,
                detail: last_lines(&stderr, 3),
            });
        }
        Ok(Copied::Read(reader, command))
    }
}

/// Why the engine does not answer, if it does not (asked after a call failed).
pub(crate) fn daemon_problem() -> Option<String> {
    daemon::daemon_problem(DAEMON_TIMEOUT)
}
