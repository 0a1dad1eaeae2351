//! The Docker sandbox: one container per task, driven through the `docker` CLI only.
//!
//! The container never outlives agent-runner. Its main process (under `--init`) is a
//! keep-alive that reads stdin until end-of-file, and that stdin is a pipe held by
//! agent-runner through an attached `docker run -i --rm`. However agent-runner ends,
//! even by SIGKILL, the pipe closes, the keep-alive exits, and `--rm` removes the
//! container. That is also the normal teardown (~0.06 s; no 10 s `docker stop`), with
//! `docker rm -f` as the fallback.
//! Labels name the owner (pid, host, start time) so a start-up sweep can remove
//! containers whose owner is gone; it never matches by name.
//!
//! Secrets reach the container only by name, per `docker exec -e NAME`, with the value
//! in the docker client's environment: never in an argv, never on `docker run` (values
//! given there persist in `docker inspect`).

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::codex::{self, Exit, PROJECT_DIR, Transcript};
use super::git::GitWatch;
use super::{Sandbox, SandboxError, TestRun, WorkerRun};
use crate::interrupt::Interrupt;
use crate::process::{
    self, Capture, Ending, Finished, Held, HeldWait, Invocation, Limits, SpawnError, Stop,
};
use crate::secret::Redactor;
use crate::sys;
use crate::task::{CodexAuth, Network, TestSpec, WorkerSettings};
use crate::timestamp::{Timestamp, human};

pub const LABEL_TASK: &str = "agent-runner.task";
pub const LABEL_OWNER_PID: &str = "agent-runner.owner-pid";
pub const LABEL_OWNER_HOST: &str = "agent-runner.owner-host";
pub const LABEL_OWNER_START: &str = "agent-runner.owner-start";

/// Read-only mount point of the host's codex `auth.json`; `$CODEX_HOME/auth.json`
/// links to it. (Mounting straight into CODEX_HOME would make Docker create that
/// directory root-owned, and codex running as the user must write there.)
pub const AUTH_MOUNT: &str = "/run/agent-runner/auth.json";
/// HOME in the container when running as a non-root user.
pub const NONROOT_HOME: &str = "/tmp/agent-runner-home";

const READY: &str = "agent-runner-ready ";
/// The keep-alive: creates CODEX_HOME (codex exits 1 without it), links auth.json,
/// reports its pid, then reads stdin until end-of-file.
const KEEPALIVE_SCRIPT: &str = r#"set -e
home="${CODEX_HOME:-$HOME/.codex}"
mkdir -p "$home"
if [ -e /run/agent-runner/auth.json ]; then ln -sf /run/agent-runner/auth.json "$home/auth.json"; fi
echo "agent-runner-ready $$"
exec cat >/dev/null
"#;

/// Stops all work in the container except PID 1 and the keep-alive (`$1`): SIGTERM,
/// up to 5 s grace, SIGKILL; prints how many processes are left. Shell builtins only,
/// so the script does not count helpers of its own.
const STOP_SCRIPT: &str = r#"keep=$1
sweep() {
  n=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$p" in 1|"$keep"|"$$") continue ;; esac
    st=
    while read -r k v _; do if [ "$k" = State: ]; then st=$v; break; fi; done 2>/dev/null < "$d/status"
    case "$st" in ""|Z) continue ;; esac
    n=$((n + 1))
    [ -z "$1" ] || kill "-$1" "$p" 2>/dev/null
  done
}
sweep TERM
i=0
while [ $i -lt 50 ]; do sweep ""; [ "$n" = 0 ] && break; sleep 0.1; i=$((i + 1)); done
[ "$n" = 0 ] || { sweep KILL; sleep 0.1; sweep ""; }
echo "left $n"
"#;

/// Bytes of worker/test output kept in memory (the rest is in the log file).
const OUTPUT_TAIL: usize = 64 * 1024;
/// Longest JSONL line handed to the event parser.
const MAX_EVENT_LINE: usize = 2 << 20;
/// Time allowed for `docker run` to report the keep-alive ready.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Time allowed for `docker pull` of a missing image.
const PULL_TIMEOUT: Duration = Duration::from_secs(600);

/// What the sandbox needs to know about the task.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    pub task_id: String,
    pub repo: PathBuf,
    /// Where worker and test logs go.
    pub log_dir: PathBuf,
    pub worker: WorkerSettings,
    pub auth: CodexAuth,
    /// Secrets to mask in logs and tails.
    pub redactor: Redactor,
    /// Stops worker and test runs (and waiting for the container) when set.
    pub interrupt: Interrupt,
}

/// The Docker sandbox; see the module documentation.
pub struct DockerSandbox {
    config: SandboxConfig,
    container: Option<Container>,
    sweep: Option<JoinHandle<()>>,
    git: GitWatch,
}

struct Container {
    name: String,
    /// Pid of the keep-alive inside the container (spared when stopping work).
    keep_pid: String,
    keepalive: Held,
}

impl DockerSandbox {
    /// Prepares the sandbox. No container starts until the first run; the sweep of
    /// orphaned containers starts now, in the background.
    pub fn new(config: SandboxConfig) -> Self {
        let sweep = std::thread::Builder::new()
            .name("sweep".into())
            .spawn(|| {
                for name in sweep_orphans() {
                    log::info!("removed container {name}: its agent-runner is gone");
                }
            })
            .ok();
        DockerSandbox {
            git: GitWatch::new(&config.repo),
            config,
            container: None,
            sweep,
        }
    }

    /// Name of the running container, if started.
    pub fn container_name(&self) -> Option<&str> {
        self.container.as_ref().map(|c| c.name.as_str())
    }

    fn ensure_started(&mut self) -> Result<(), SandboxError> {
        if self.container.is_none() {
            let started = Instant::now();
            let container = match self.start() {
                Err(SandboxError::ImageMissing { .. }) => {
                    self.pull()?;
                    self.start()?
                }
                other => other?,
            };
            log::info!(
                "container {} started in {}",
                container.name,
                human(started.elapsed())
            );
            self.container = Some(container);
        }
        Ok(())
    }

    fn start(&self) -> Result<Container, SandboxError> {
        let suffix: String = uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .chars()
            .take(6)
            .collect();
        let name = format!("agent-runner-{}-{suffix}", self.config.task_id);
        let invocation = Invocation::new("docker").args(self.run_args(&name));
        let mut keepalive = process::spawn_held(&invocation).map_err(docker_missing)?;
        match keepalive.wait_for_line(READY, START_TIMEOUT, self.config.interrupt) {
            Ok(pid) => Ok(Container {
                name,
                keep_pid: pid.trim().to_string(),
                keepalive,
            }),
            Err(wait) => {
                let _ = keepalive.release(Duration::from_secs(2));
                // A failed start may leave a created container behind.
                remove_container(&name);
                match wait {
                    HeldWait::Interrupted => Err(SandboxError::Interrupted),
                    HeldWait::TimedOut => Err(SandboxError::Docker {
                        command: invocation.display(),
                        detail: format!(
                            "the container did not start within {}",
                            human(START_TIMEOUT)
                        ),
                    }),
                    HeldWait::Ended(stderr) => Err(self.diagnose_start(&invocation, &stderr)),
                }
            }
        }
    }

    fn run_args(&self, name: &str) -> Vec<String> {
        let config = &self.config;
        let mut args: Vec<String> = vec!["run".into(), "-i".into(), "--rm".into(), "--init".into()];
        args.extend([
            "--pull".into(),
            "never".into(),
            "--name".into(),
            name.into(),
        ]);
        let labels = [
            (LABEL_TASK, config.task_id.clone()),
            (LABEL_OWNER_PID, std::process::id().to_string()),
            (LABEL_OWNER_HOST, sys::hostname()),
            (
                LABEL_OWNER_START,
                sys::process_start_ticks("self").unwrap_or_default(),
            ),
        ];
        for (label, value) in labels {
            args.extend(["--label".into(), format!("{label}={value}")]);
        }
        if config.worker.network != Network::Bridge {
            args.extend(["--network".into(), config.worker.network.as_str().into()]);
        }
        args.extend([
            "--mount".into(),
            mount_spec(&config.repo, PROJECT_DIR, false),
            "-w".into(),
            PROJECT_DIR.into(),
        ]);
        let (uid, gid) = sys::user_and_group();
        if uid != 0 {
            // Files the worker creates belong to the invoking user; HOME must then
            // be somewhere that user can write.
            args.extend(["--user".into(), format!("{uid}:{gid}")]);
            args.extend(["--env".into(), format!("HOME={NONROOT_HOME}")]);
        }
        if let CodexAuth::File { path: file, .. } = &config.auth {
            args.extend(["--mount".into(), mount_spec(file, AUTH_MOUNT, true)]);
        }
        args.extend(["--entrypoint".into(), "/bin/sh".into()]);
        args.push(config.worker.docker_image.clone());
        args.extend(["-c".into(), KEEPALIVE_SCRIPT.into()]);
        args
    }

    /// Why `docker run` failed: missing image, unreachable daemon, or something else.
    fn diagnose_start(&self, invocation: &Invocation, stderr: &str) -> SandboxError {
        let image = &self.config.worker.docker_image;
        if stderr.contains("No such image") || stderr.contains("Unable to find image") {
            return SandboxError::ImageMissing {
                image: image.clone(),
                detail: "not present locally".into(),
            };
        }
        if let Some(detail) = daemon_problem() {
            return SandboxError::DaemonUnreachable(detail);
        }
        SandboxError::Docker {
            command: shorten_command(invocation),
            detail: last_lines(stderr, 5),
        }
    }

    fn pull(&self) -> Result<(), SandboxError> {
        let image = &self.config.worker.docker_image;
        log::info!("image {image} not present; trying docker pull");
        let out = docker(
            &["pull", image],
            Limits::wall(PULL_TIMEOUT, self.config.interrupt),
        )?;
        if out.ok {
            return Ok(());
        }
        Err(SandboxError::ImageMissing {
            image: image.clone(),
            detail: format!(
                "not present locally and `docker pull` failed: {}. Build it with `make sandbox-image` \
                 (or set runner.worker.docker_image)",
                last_lines(&out.stderr, 2)
            ),
        })
    }

    /// `docker exec [-i] [-w dir] -e NAME… <container>`, with the values of NAME… in
    /// the docker client's environment (secrets by name); the command follows.
    fn exec_command(&self, stdin: bool, workdir: Option<&str>) -> Invocation {
        let mut invocation = Invocation::new("docker").arg("exec");
        if stdin {
            invocation = invocation.arg("-i");
        }
        if let Some(dir) = workdir {
            invocation = invocation.args(["-w", dir]);
        }
        let mut env: Vec<(&str, &str)> = (self.config.worker.env.iter())
            .map(|e| (e.name.as_str(), e.value.expose()))
            .collect();
        if let CodexAuth::ApiKey(key) = &self.config.auth {
            if !env.iter().any(|(name, _)| *name == "CODEX_API_KEY") {
                env.push(("CODEX_API_KEY", key.expose()));
            }
        }
        for (name, value) in env {
            invocation = invocation.args(["-e", name]).env(name, value);
        }
        invocation.arg(self.container_name().unwrap_or_default())
    }

    fn capture<'a>(&self, log_path: &Path) -> Result<Capture<'a>, SandboxError> {
        let cannot = |e: std::io::Error| {
            SandboxError::Io(format!("cannot write {}: {e}", log_path.display()))
        };
        if let Some(dir) = log_path.parent() {
            std::fs::create_dir_all(dir).map_err(cannot)?;
        }
        let file = std::fs::File::create(log_path).map_err(cannot)?;
        Ok(Capture::in_memory(OUTPUT_TAIL)
            .redacting(&self.config.redactor)
            .with_log(file, log_path.to_path_buf()))
    }

    /// Runs `invocation` (a `docker exec` in the container); on a limit or an
    /// interrupt, stops the work inside the container.
    fn exec(
        &self,
        invocation: &Invocation,
        limits: &Limits,
        capture: &mut Capture,
    ) -> Result<(Finished, Option<u32>), SandboxError> {
        let container = self
            .container
            .as_ref()
            .ok_or_else(|| SandboxError::Docker {
                command: invocation.display(),
                detail: "the container is not running".into(),
            })?;
        let mut leftover = None;
        let mut stop = || leftover = stop_work(&container.name, &container.keep_pid);
        let finished = process::run(invocation, limits, capture, Stop::Custom(&mut stop))
            .map_err(docker_missing)?;
        if finished.ending == Ending::Exited && finished.code().is_some_and(|c| c >= 125) {
            self.check_alive(&capture.stderr())?;
        }
        Ok((finished, leftover))
    }

    /// After a `docker exec` failed in docker itself: is the sandbox still there?
    fn check_alive(&self, stderr: &str) -> Result<(), SandboxError> {
        let Some(container) = &self.container else {
            return Ok(());
        };
        if stderr.contains("No such container") || stderr.contains("is not running") {
            return Err(SandboxError::Docker {
                command: format!("docker exec {}", container.name),
                detail: format!("the container is gone: {}", last_lines(stderr, 2)),
            });
        }
        if stderr.contains("Cannot connect to the Docker daemon")
            || stderr.contains("error during connect")
        {
            return Err(SandboxError::DaemonUnreachable(last_lines(stderr, 2)));
        }
        Ok(())
    }
}

impl Sandbox for DockerSandbox {
    fn run_worker(&mut self, number: u32, prompt: &str) -> Result<WorkerRun, SandboxError> {
        if self.container.is_none() {
            // Nothing can change the repository while the container starts.
            self.git.prefetch();
        }
        self.ensure_started()?;
        let git_before = self.git.before();
        let log_path = self.config.log_dir.join(format!("run-{number}.log"));
        let started = Timestamp::now();
        let mut transcript = Transcript::default();
        let mut on_line = |line: &[u8]| transcript.feed(line);
        let mut capture = self
            .capture(&log_path)?
            .with_lines(MAX_EVENT_LINE, &mut on_line);
        let invocation = self
            .exec_command(true, None)
            .arg("codex")
            .args(codex::exec_args(&self.config.worker))
            .stdin(prompt.as_bytes());
        let settings = &self.config.worker;
        let limits = Limits {
            wall: Some(settings.max_run_time),
            idle: Some(settings.idle_timeout),
            grace: Duration::from_secs(2),
            interrupt: self.config.interrupt,
        };
        let (finished, leftover_processes) = self.exec(&invocation, &limits, &mut capture)?;
        let output_tail = capture.tail();
        let stderr = capture.stderr();
        let output_bytes = capture.bytes();
        drop(capture);
        let exit = match finished.ending {
            Ending::TimedOut => Exit::TimedOut(settings.max_run_time),
            Ending::Stalled => Exit::Stalled(settings.idle_timeout),
            Ending::Interrupted => Exit::Interrupted,
            Ending::Exited => finished.code().map_or(Exit::Signal, Exit::Code),
        };
        let (outcome, summary) = codex::classify(&transcript, exit, &stderr);
        let git_after = self.git.after();
        Ok(WorkerRun {
            number,
            started,
            finished: Timestamp::now(),
            duration: finished.duration,
            exit_code: finished.code(),
            outcome,
            summary: self.config.redactor.redact(&summary),
            transcript,
            log_path,
            output_bytes,
            output_tail,
            git_before,
            git_after,
            leftover_processes,
        })
    }

    fn run_test(&mut self, number: u32, test: &TestSpec) -> Result<TestRun, SandboxError> {
        self.ensure_started()?;
        let log_path = self.config.log_dir.join(format!("test-{number}.log"));
        let workdir = if test.cwd.is_empty() {
            PROJECT_DIR.to_string()
        } else {
            format!("{PROJECT_DIR}/{}", test.cwd)
        };
        let mut capture = self.capture(&log_path)?;
        let invocation =
            self.exec_command(false, Some(&workdir))
                .args(["sh", "-c", test.command.as_str()]);
        let limits = Limits {
            wall: Some(test.timeout),
            idle: None,
            grace: Duration::from_secs(2),
            interrupt: self.config.interrupt,
        };
        let started = Timestamp::now();
        let (finished, _) = self.exec(&invocation, &limits, &mut capture)?;
        // The repository is still now until the next worker run, while Meta is asked.
        self.git.prefetch();
        Ok(TestRun {
            number,
            command: test.command.clone(),
            cwd: test.cwd.clone(),
            started,
            duration: finished.duration,
            exit_code: finished.code(),
            timed_out: finished.ending == Ending::TimedOut,
            interrupted: finished.ending == Ending::Interrupted,
            output_tail: capture.tail(),
            log_path,
        })
    }

    fn shutdown(&mut self) -> Option<Duration> {
        let removed = self.container.take().map(|container| {
            let started = Instant::now();
            // Closing the keep-alive's stdin ends the container, and `docker run --rm`
            // returns once it is removed. `docker rm -f` only if that does not happen.
            if !container.keepalive.release(Duration::from_secs(5)) {
                remove_container(&container.name);
            }
            let took = started.elapsed();
            log::info!("container {} removed in {}", container.name, human(took));
            took
        });
        if let Some(sweep) = self.sweep.take() {
            let _ = sweep.join();
        }
        removed
    }
}

impl Drop for DockerSandbox {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Removes containers labelled `agent-runner.task` whose owner (pid, start time) is
/// gone from this host; returns their names. Containers of other hosts, and those
/// without an owner label, are left alone.
pub fn sweep_orphans() -> Vec<String> {
    let format = format!(
        "{{{{.ID}}}}\t{{{{.Names}}}}\t{{{{.Label \"{LABEL_OWNER_PID}\"}}}}\t{{{{.Label \"{LABEL_OWNER_HOST}\"}}}}\t{{{{.Label \"{LABEL_OWNER_START}\"}}}}"
    );
    let filter = format!("label={LABEL_TASK}");
    let Ok(out) = docker(
        &["ps", "-a", "--filter", &filter, "--format", &format],
        Limits::cleanup(Duration::from_secs(30)),
    ) else {
        return Vec::new();
    };
    let host = sys::hostname();
    let mut removed = Vec::new();
    for line in out.stdout.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        let [id, name, pid, owner_host, start] = fields[..] else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if owner_host != host {
            continue;
        }
        let alive = sys::process_alive(pid)
            && (start.is_empty()
                || sys::process_start_ticks(&pid.to_string()).as_deref() == Some(start));
        if !alive && remove_container(id) {
            removed.push(name.to_string());
        }
    }
    removed
}

/// `docker rm -f`; true when it succeeded. Runs even after an interrupt.
fn remove_container(name: &str) -> bool {
    docker(
        &["rm", "-f", name],
        Limits::cleanup(Duration::from_secs(30)),
    )
    .is_ok_and(|o| o.ok)
}

/// Runs the stop script in the container; the number of processes left, if known.
fn stop_work(container: &str, keep_pid: &str) -> Option<u32> {
    let out = docker(
        &["exec", container, "sh", "-c", STOP_SCRIPT, "sh", keep_pid],
        Limits::cleanup(Duration::from_secs(20)),
    )
    .ok()?;
    let left = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("left "))
        .and_then(|n| n.trim().parse().ok());
    log::info!(
        "stopped the work in container {container} ({} processes left)",
        left.map_or("?".into(), |n: u32| n.to_string())
    );
    left
}

/// `Some(reason)` when the docker daemon does not answer.
fn daemon_problem() -> Option<String> {
    match docker(
        &["version", "--format", "{{.Server.Version}}"],
        Limits::wall(Duration::from_secs(30), Interrupt::never()),
    ) {
        Ok(out) if out.ok => None,
        Ok(out) => Some(last_lines(&out.stderr, 2)),
        Err(e) => Some(e.to_string()),
    }
}

struct DockerOutput {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// A short docker CLI call with its output.
fn docker(args: &[&str], limits: Limits) -> Result<DockerOutput, SandboxError> {
    let invocation = Invocation::new("docker").args(args.iter().copied());
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

fn docker_missing(e: SpawnError) -> SandboxError {
    SandboxError::DockerMissing(format!(
        "{e}; install the Docker CLI and make sure `docker` is on PATH"
    ))
}

/// `--mount` value for a bind mount. The value is CSV: a path with a comma or a
/// quote is quoted.
fn mount_spec(source: &Path, target: &str, readonly: bool) -> String {
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

/// The last `n` non-empty lines of `text`, joined with " / ".
fn last_lines(text: &str, n: usize) -> String {
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
        joined
    }
}

/// The `docker run` command line without the keep-alive script, for messages.
fn shorten_command(invocation: &Invocation) -> String {
    invocation
        .display()
        .split(" -c ")
        .next()
        .unwrap_or_default()
        .to_string()
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
}
