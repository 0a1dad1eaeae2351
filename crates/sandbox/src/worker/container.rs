//! The task's container: how it is started, how commands are run in it, how we know
//! it is still there, and how it goes away.
//!
//! It never outlives agent-runner. Its main process (under `--init`) is a keep-alive
//! that reads stdin until end-of-file, and that stdin is a pipe held by agent-runner
//! through an attached `docker run -i --rm`. However agent-runner ends, even by
//! SIGKILL, the pipe closes, the keep-alive exits, and `--rm` removes the container.
//! That is also the normal teardown (~0.05 s), with `docker rm -f` as the fallback.
//! The held `docker run` is also how we know the container is alive: it ends when
//! the container does or the daemon connection drops.
//!
//! The keep-alive runs inside the container, where the worker is root and could
//! freeze it (SIGSTOP): then the closed pipe would go unread. So a watchdog on the
//! host holds a second pipe of ours: a small `sh` that removes the container with
//! `docker rm -f` when that pipe closes, unless it was told the container is gone.
//!
//! With `network: allowlist` (SPEC §17) the container has no network; the keep-alive
//! is then the egress bridge (`egress::bridge`), mounted read-only with the proxy's
//! socket, and every exec gets the proxy variables.
//!
//! What the container may do (SPEC §9): the repo is mounted read-write, but
//! `.agent-runner/` (note, logs, locks) read-only on top of it, and `.git` so that
//! the worker can commit but not write what git on the host runs (`git_dir.rs`); capabilities are
//! dropped to what building software needs (no MKNOD, SETFCAP, FSETID, NET_RAW,
//! SYS_CHROOT, SETPCAP, AUDIT_WRITE), `no-new-privileges` is set, no file can get a
//! setuid or setgid bit (`seccomp.rs`: Docker's default profile plus that rule), and
//! pids (and optionally memory and CPUs) are limited. Values reach it only per exec,
//! by name (`exec`): none is in an argv, where every local user could read it; the
//! agent's login key only reaches the agent's runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::PROJECT_DIR;
use super::docker_cli::{self, daemon_problem, docker, last_lines, mount_spec};
use super::envelope::{PRIVATE_DIR, PrivateFile};
use super::git_dir;
use super::seccomp;
use super::sweep::{LABEL_TASK, owner_labels};
use super::{SandboxError, docker_cli::remove_container};
use crate::agent::{Kind, Login};
use crate::egress::bridge;
use crate::task::worker_env::RESERVED;
use crate::task::{EnvValue, WorkerLimits, WorkerSettings};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;
use agent_runner_core::process::{self, Held, HeldWait, Invocation, Limits};
use agent_runner_core::sys;
use agent_runner_core::timestamp::human;

/// HOME in the container when running as a non-root user.
pub(crate) const NONROOT_HOME: &str = "/tmp/agent-runner-home";

/// Capabilities the worker keeps (Docker's default set minus what can only serve
/// to escalate or to make device nodes).
const CAPABILITIES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "KILL",
    "NET_BIND_SERVICE",
    "SETGID",
    "SETUID",
];

const READY: &str = "agent-runner-ready ";
/// The keep-alive: creates the agent's home and links its login file there (see
/// `home_links`), reports its pid, then reads stdin until end-of-file. Its output is
/// drained. (With the egress proxy, the bridge does all this instead.)
const KEEPALIVE_SCRIPT: &str = include_str!("keepalive.sh");

/// Time allowed for `docker run` to report the keep-alive ready.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Time allowed for `docker pull` of a missing image.
const PULL_TIMEOUT: Duration = Duration::from_secs(600);

/// What a container is made from.
#[derive(Debug, Clone)]
pub(crate) struct ContainerSpec {
    pub(crate) task_id: String,
    pub(crate) repo: PathBuf,
    /// `<repo>/.agent-runner`, mounted read-only over the read-write repo.
    pub(crate) private_dir: PathBuf,
    pub(crate) worker: WorkerSettings,
    /// How the worker's agent logs in.
    pub(crate) login: Login,
    pub(crate) interrupt: Interrupt,
    /// The host directory that keeps the worker's session (`session.rs`), if any.
    pub(crate) session_dir: Option<PathBuf>,
}

/// Where the agent's login file is mounted and where, under HOME, the agent looks
/// for it (the keep-alive links one to the other). A link, not a mount into the
/// agent's home: Docker would create that directory root-owned, and the agent,
/// running as the user, must write there.
pub fn home_links(kind: &dyn Kind) -> Vec<(&'static str, &'static str)> {
    let rule = kind.login_rule();
    vec![(rule.mount, rule.link)]
}

/// A running container; see the module documentation.
pub(crate) struct Container {
    pub(crate) name: String,
    /// Pid of the keep-alive inside the container (spared when stopping work).
    pub(crate) keep_pid: String,
    keepalive: Held,
    watchdog: Watchdog,
    /// The proxy variables of every exec (empty without the egress proxy).
    proxy_env: Vec<(&'static str, String)>,
}

/// The host-side watchdog of a container; see the module documentation.
struct Watchdog(Held);

/// Waits for a line on stdin; at end-of-file without `done` (agent-runner is gone),
/// removes the container with the docker CLI at `$2` (the path agent-runner
/// found, not one the shell would look up).
const WATCHDOG_SCRIPT: &str = include_str!("watchdog.sh");

impl Watchdog {
    fn start(name: &str) -> Result<Watchdog, SandboxError> {
        let docker = process::program::resolve("docker")
            .map_err(|e| SandboxError::DockerMissing(format!("docker: {e}")))?;
        let invocation = Invocation::new("sh").args([
            "-c",
            WATCHDOG_SCRIPT,
            "agent-runner-watchdog",
            name,
            &docker.display().to_string(),
        ]);
        process::spawn_held(&invocation)
            .map(Watchdog)
            .map_err(|e| SandboxError::Io(format!("cannot start the container's watchdog: {e}")))
    }

    /// The container is gone (or being removed by us): the watchdog may end.
    fn dismiss(mut self) {
        let _ = self.0.send_line("done");
        self.0.release(Duration::from_secs(2));
    }
}

impl Container {
    /// Starts the container, pulling the image if it is missing and pullable.
    /// `egress`: the egress proxy's directory, when the task has one.
    pub(crate) fn start(
        spec: &ContainerSpec,
        egress: Option<&Path>,
    ) -> Result<Container, SandboxError> {
        let started = Instant::now();
        let container = match Container::run(spec, egress) {
            Err(SandboxError::ImageMissing { .. }) => {
                pull(spec)?;
                Container::run(spec, egress)?
            }
            other => other?,
        };
        log::info!(
            "container {} started in {}",
            container.name,
            human(started.elapsed())
        );
        Ok(container)
    }

    fn run(spec: &ContainerSpec, egress: Option<&Path>) -> Result<Container, SandboxError> {
        let suffix: String = uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .chars()
            .take(6)
            .collect();
        let name = format!("agent-runner-{}-{suffix}", spec.task_id);
        let git_mounts = git_dir::mounts(&spec.repo).map_err(SandboxError::Io)?;
        let watchdog = Watchdog::start(&name)?;
        let invocation = seccomp::with_profile(Invocation::new("docker").args(run_args(
            spec,
            &name,
            &git_mounts,
            egress,
        )));
        let mut keepalive = match process::spawn_held(&invocation) {
            Ok(keepalive) => keepalive,
            Err(e) => {
                watchdog.dismiss();
                return Err(docker_cli::docker_missing(e));
            }
        };
        match keepalive.wait_for_line(READY, START_TIMEOUT, spec.interrupt) {
            Ok(pid) => Ok(Container {
                name,
                keep_pid: pid.trim().to_string(),
                keepalive,
                watchdog,
                proxy_env: if egress.is_some() {
                    bridge::env()
                } else {
                    Vec::new()
                },
            }),
            Err(wait) => {
                let _ = keepalive.release(Duration::from_secs(2));
                // A failed start may leave a created container behind.
                remove_container(&name);
                watchdog.dismiss();
                match wait {
                    HeldWait::Interrupted => Err(SandboxError::Interrupted),
                    HeldWait::TimedOut => Err(SandboxError::Docker {
                        command: shorten_command(&invocation),
                        detail: format!(
                            "the container did not start within {}",
                            human(START_TIMEOUT)
                        ),
                    }),
                    HeldWait::Ended(stderr) => {
                        Err(diagnose_start(spec, &invocation, &stderr, egress))
                    }
                }
            }
        }
    }

    /// False once the container (or the daemon connection) is gone.
    pub(crate) fn is_alive(&mut self) -> bool {
        self.keepalive.is_running()
    }

    /// What docker said when the keep-alive ended, for messages.
    pub(crate) fn last_words(&self) -> String {
        last_lines(&self.keepalive.stderr(), 2)
    }

    /// `docker exec -i [-w dir] [-e ...] <container>`; the command follows. Values
    /// go by name (`-e NAME`, the value in the docker client's environment, which
    /// only this user and root can read), never in an argv, which every local user
    /// can. The exception: literal values of names the docker client itself reads
    /// (`worker_env::RESERVED`: proxies, `PATH`, ...), which must not reconfigure
    /// it; they go on the command line, and a credential there is refused when the
    /// task is read (`task::argv`), as are secrets under those names. `agent`: the
    /// variables of a run of the agent (`Kind::run_env`) and its login key; tests
    /// get neither. `file`: a file the envelope writes first (`PrivateFile`).
    pub fn exec(
        &self,
        spec: &ContainerSpec,
        workdir: Option<&str>,
        agent: Option<&[(&'static str, String)]>,
        file: Option<&PrivateFile>,
    ) -> Invocation {
        let mut invocation = Invocation::new("docker").args(["exec", "-i"]);
        if let Some(dir) = workdir {
            invocation = invocation.args(["-w", dir]);
        }
        let by_name = |invocation: Invocation, name: &str, value: &str| {
            invocation.args(["-e", name]).env(name, value)
        };
        for (name, value) in agent.unwrap_or_default() {
            invocation = by_name(invocation, name, value);
        }
        let mut key_in_env = false;
        let key_var = spec.worker.kind.login_rule().key_var;
        for env in &spec.worker.env {
            key_in_env |= env.name == key_var;
            invocation = match &env.value {
                EnvValue::Literal(value) if RESERVED.contains(&env.name) => {
                    invocation.args(["-e".to_string(), format!("{}={value}", env.name)])
                }
                value => by_name(invocation, &env.name, value.expose()),
            };
        }
        if let (Some(_), Login::Key { var, value }, false) = (agent, &spec.login, key_in_env) {
            invocation = by_name(invocation, var, value.expose());
        }
        // The proxy's own variables: reserved names, values of agent-runner's.
        for (name, value) in &self.proxy_env {
            invocation = invocation.args(["-e".to_string(), format!("{name}={value}")]);
        }
        for (name, value) in file.map(PrivateFile::env).unwrap_or_default() {
            invocation = by_name(invocation, name, &value);
        }
        invocation.arg(&self.name)
    }

    /// Ends the container; returns how long that took.
    pub(crate) fn remove(self) -> Duration {
        let started = Instant::now();
        // Closing the keep-alive's stdin ends the container, and `docker run --rm`
        // returns once it is removed. `docker rm -f` only if that does not happen.
        if !self.keepalive.release(Duration::from_secs(5)) {
            remove_container(&self.name);
        }
        let took = started.elapsed();
        self.watchdog.dismiss();
        log::info!("container {} removed in {}", self.name, human(took));
        took
    }
}

fn run_args(
    spec: &ContainerSpec,
    name: &str,
    git_mounts: &[git_dir::Mount],
    egress: Option<&Path>,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "run", "-i", "--rm", "--init", "--pull", "never", "--name", name,
    ]
    .map(String::from)
    .into();
    args.extend(["--label".into(), format!("{LABEL_TASK}={}", spec.task_id)]);
    for (label, value) in owner_labels(&Owner::this_process()) {
        args.extend(["--label".into(), format!("{label}={value}")]);
    }
    if let Some(network) = spec.worker.network.docker_network() {
        args.extend(["--network".into(), network.into()]);
    }
    args.extend(["--cap-drop".into(), "ALL".into()]);
    for cap in CAPABILITIES {
        args.extend(["--cap-add".into(), (*cap).into()]);
    }
    args.extend(["--security-opt".into(), "no-new-privileges".into()]);
    args.extend(seccomp::run_options());
    args.extend(limit_args(&spec.worker.limits));
    args.extend([
        "--mount".into(),
        mount_spec(&spec.repo, PROJECT_DIR, false),
        "--mount".into(),
        mount_spec(
            &spec.private_dir,
            &format!("{PROJECT_DIR}/{}", agent_runner_core::private_dir::DIR_NAME),
            true,
        ),
        "-w".into(),
        PROJECT_DIR.into(),
    ]);
    for mount in git_mounts {
        let target = format!("{PROJECT_DIR}/{}", mount.target);
        args.extend([
            "--mount".into(),
            mount_spec(&mount.source, &target, mount.readonly),
        ]);
    }
    args.extend(user_args());
    args.extend(["--tmpfs".into(), private_tmpfs()]);
    if let Login::File { path: file, .. } = &spec.login {
        let mount = spec.worker.kind.login_rule().mount;
        args.extend(["--mount".into(), mount_spec(file, mount, true)]);
    }
    let mut links: Vec<(String, String)> = home_links(spec.worker.kind)
        .into_iter()
        .map(|(mount, link)| (mount.to_string(), link.to_string()))
        .collect();
    if let Some(dir) = &spec.session_dir {
        // The agent keeps its sessions in the task's session directory (SPEC §19).
        args.extend(super::session::run_args(dir));
        if let Some(link) = super::session::home_link(spec.worker.kind) {
            links.push((super::session::MOUNT.to_string(), link));
        }
    }
    let links: Vec<(&str, &str)> = links
        .iter()
        .map(|(mount, link)| (mount.as_str(), link.as_str()))
        .collect();
    match egress {
        Some(dir) => {
            args.extend(["--mount".into(), mount_spec(dir, bridge::MOUNT, true)]);
            args.extend(["--entrypoint".into(), bridge::entrypoint()]);
            args.push(spec.worker.docker_image.clone());
            args.extend(bridge::args(&links));
        }
        None => {
            args.extend(["--entrypoint".into(), "/bin/sh".into()]);
            args.push(spec.worker.docker_image.clone());
            args.extend([
                "-c".into(),
                KEEPALIVE_SCRIPT.into(),
                "agent-runner-keepalive".into(),
            ]);
            for (mount, link) in links {
                args.extend([mount.to_string(), link.to_string()]);
            }
        }
    }
    args
}

/// The `--tmpfs` of `PRIVATE_DIR`: in memory, small, only the run's user's.
fn private_tmpfs() -> String {
    let (uid, gid) = sys::user_and_group();
    format!("{PRIVATE_DIR}:rw,noexec,nosuid,nodev,size=1m,mode=0700,uid={uid},gid={gid}")
}

/// `docker run` arguments for `runner.worker.limits`.
pub fn limit_args(limits: &WorkerLimits) -> Vec<String> {
    let mut args = vec!["--pids-limit".to_string(), limits.pids.to_string()];
    if let Some(bytes) = limits.memory_bytes {
        args.extend(["--memory".into(), bytes.to_string()]);
    }
    if let Some(cpus) = limits.cpus {
        args.extend(["--cpus".into(), cpus.to_string()]);
    }
    args
}

/// `docker run` arguments that make files created in the container belong to the
/// invoking user (`--user uid:gid`, with a HOME that user can write), unless root.
pub fn user_args() -> Vec<String> {
    let (uid, gid) = sys::user_and_group();
    if uid == 0 {
        return Vec::new();
    }
    vec![
        "--user".into(),
        format!("{uid}:{gid}"),
        "--env".into(),
        format!("HOME={NONROOT_HOME}"),
    ]
}

/// Why `docker run` failed: missing image, unreachable daemon, or something else.
fn diagnose_start(
    spec: &ContainerSpec,
    invocation: &Invocation,
    stderr: &str,
    egress: Option<&Path>,
) -> SandboxError {
    let image = &spec.worker.docker_image;
    if stderr.contains("No such image") || stderr.contains("Unable to find image") {
        return SandboxError::ImageMissing {
            image: image.clone(),
            detail: "not present locally".into(),
        };
    }
    if let Some(detail) = daemon_problem() {
        return SandboxError::DaemonUnreachable(detail);
    }
    let mut detail = last_lines(stderr, 5);
    if let (Some(dir), true) = (egress, stderr.contains(bridge::MOUNT)) {
        detail.push_str(&format!(
            " (the egress bridge could not run from {}: if that file system is mounted noexec, \
             point TMPDIR at one that is not)",
            dir.display()
        ));
    }
    SandboxError::Docker {
        command: shorten_command(invocation),
        detail,
    }
}

fn pull(spec: &ContainerSpec) -> Result<(), SandboxError> {
    let image = &spec.worker.docker_image;
    log::info!("image {image} not present; trying docker pull");
    let out = docker(&["pull", image], Limits::wall(PULL_TIMEOUT, spec.interrupt))?;
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

/// The `docker run` command line without the keep-alive script, for messages.
/// (The bridge's arguments are short: nothing to cut.)
fn shorten_command(invocation: &Invocation) -> String {
    invocation
        .display()
        .split(" -c ")
        .next()
        .unwrap_or_default()
        .to_string()
}
