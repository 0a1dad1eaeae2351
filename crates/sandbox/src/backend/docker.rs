//! The Docker backend: sandboxes are containers of a Docker daemon, driven through
//! the docker CLI (`docker_cli.rs`, where every call is made).
//!
//! A container never outlives agent-runner. Its main process (agent-runner's helper
//! as PID 1 with `--init=false`, else under the engine's `--init`) reads stdin until
//! end-of-file, and that stdin is a pipe held by agent-runner through an
//! attached `docker run -i --rm`. However agent-runner ends, even by SIGKILL, the pipe
//! closes, the main process exits, and `--rm` removes the container. That is also the
//! normal removal (~0.05 s), with `docker rm -f` as the fallback. The held `docker
//! run` is also how we know the container is alive: it ends when the container does
//! or the daemon connection drops.
//!
//! The main process runs inside the container, where the worker is root and could
//! freeze an engine's init or the image's keep-alive (SIGSTOP; our helper as PID 1
//! takes no signal from inside): then the closed pipe would go unread. So for a sandbox that
//! asks for one, a watchdog on the host holds a second pipe of ours: a small `sh`
//! (`watchdog.sh`) that removes the container with `docker rm -f` when that pipe
//! closes, unless it was told the container is gone.
//!
//! An exec's variables go by name (`-e NAME`, the value in the docker client's
//! environment, which only this user and root can read), never in an argv, which
//! every local user can read; only `Var::Literal`s, names the client itself reads,
//! go on the command line.

use super::daemon;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use super::daemon::{call, daemon_problem, remove_container};
use super::docker_cli::{self, DockerFault, cli_missing, fault_in, last_lines, mount_spec};
use super::endpoint::Endpoint;
use super::lifeline::{Down, Stream};
use super::spec::{Exec, Net, Spec, Var, Volume};
use super::{Backend, BackendError, Instance, LabelledVolume, Output, Started, seccomp, sweep};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{
    self, Capture, Ending, Finished, Held, HeldWait, Invocation, Limits, Stop,
};
use agent_runner_core::sys;
use agent_runner_core::timestamp::human;

/// HOME in the container when running as a non-root user.
const NONROOT_HOME: &str = "/tmp/agent-runner-home";

/// The local Docker, with the deadlines of its calls.
#[derive(Debug, Clone)]
pub struct Docker {
    /// Of a short call: inspect, rm, ps, version.
    short: Duration,
    /// Of `docker pull`.
    pull: Duration,
    /// The daemon the CLI reaches, read once (`endpoint.rs`).
    endpoint: std::sync::Arc<std::sync::OnceLock<Result<Endpoint, BackendError>>>,
}

impl Default for Docker {
    fn default() -> Self {
        Docker {
            short: Duration::from_secs(30),
            pull: Duration::from_secs(600),
            endpoint: Default::default(),
        }
    }
}

impl Docker {
    /// The daemon the CLI reaches; refused when secrets would cross the network
    /// in clear (plain tcp:// beyond the loopback).
    pub fn endpoint(&self) -> Result<&Endpoint, BackendError> {
        let endpoint = self
            .endpoint
            .get_or_init(|| Endpoint::current(self.short))
            .as_ref()
            .map_err(Clone::clone)?;
        match endpoint.refusal() {
            Some(refused) => Err(refused),
            None => Ok(endpoint),
        }
    }
}

impl Backend for Docker {
    fn start(&self, spec: &Spec) -> Result<Started, BackendError> {
        self.endpoint()?;
        if let Some(message) = daemon::lost() {
            return Err(BackendError::EngineUnreachable(message));
        }
        let name = spec
            .name
            .clone()
            .ok_or_else(|| BackendError::Io("a held container needs a name".into()))?;
        for volume in &spec.volumes {
            create_volume(volume, self.short)?;
            // `volume create` of a name that exists keeps that volume as it is.
            super::volume_labels::check(
                &volume.name,
                &volume.labels,
                &volume.whose,
                Interrupt::never(),
            )?;
        }
        let watchdog = Watchdog::start(&name, spec.watchdog)?;
        let invocation = seccomp::with_profile(docker_cli::command().args(run_args(spec)));
        let mut held = match process::spawn_held(&invocation) {
            Ok(held) => held,
            Err(e) => {
                watchdog.dismiss();
                return Err(cli_missing(e));
            }
        };
        let ready = match &spec.ready {
            None => String::new(),
            // The lifeline's output is its stream, taken later: it stays to be read.
            // Any other is drained, so that an exec can see it end (`exec`).
            Some(ready) => match daemon::watched(ready.interrupt, |watch| {
                if spec.stream {
                    held.read_line(ready.prefix, ready.within, watch)
                } else {
                    held.wait_for_line(ready.prefix, ready.within, watch)
                }
            }) {
                (Ok(line), _) => line,
                (Err(wait), lost) => {
                    let _ = held.release(Duration::from_secs(2));
                    // A failed start may leave a created container behind (on a
                    // lost host, our closed pipe ends it there when it is back).
                    remove_container(&name, self.short);
                    watchdog.dismiss();
                    return Err(match wait {
                        _ if lost.is_some() => {
                            BackendError::EngineUnreachable(lost.unwrap_or_default())
                        }
                        HeldWait::Interrupted => BackendError::Interrupted,
                        HeldWait::TimedOut => BackendError::Failed {
                            command: shorten_command(&invocation),
                            detail: format!(
                                "the container did not start within {}",
                                human(ready.within)
                            ),
                        },
                        HeldWait::Ended(stderr) => self.diagnose_start(spec, &invocation, &stderr),
                    });
                }
            },
        };
        let stream = match spec.stream.then(|| held.take_stream()).flatten() {
            None => None,
            Some((input, up)) => match Down::spawn(input) {
                Ok(down) => Some(Stream {
                    up: Box::new(up),
                    down,
                }),
                Err(e) => {
                    let _ = held.release(Duration::from_secs(2));
                    remove_container(&name, self.short);
                    watchdog.dismiss();
                    return Err(BackendError::Io(format!("lifeline: {e}")));
                }
            },
        };
        Ok(Started {
            instance: Box::new(Container {
                name,
                held: std::sync::Mutex::new(held),
                watchdog,
                short: self.short,
                daemon: self.daemon(),
                lost: Default::default(),
                down: stream.as_ref().map(|stream| stream.down.clone()),
            }),
            ready,
            stream,
        })
    }

    fn pull(&self, image: &str, interrupt: Interrupt) -> Result<(), BackendError> {
        log::info!("image {image} not present; trying docker pull");
        let out = call(&["pull", image], self.pull, interrupt)?;
        if out.ok {
            return Ok(());
        }
        Err(BackendError::ImageMissing {
            what: super::DOCKER_IMAGE,
            image: image.to_string(),
            detail: format!(
                "not present locally and `docker pull` failed: {}. Build it with `make sandbox-image` \
                 (or set runner.worker.docker_image)",
                last_lines(&out.stderr, 2)
            ),
        })
    }

    fn image_id(&self, image: &str, interrupt: Interrupt) -> Option<String> {
        self.endpoint().ok()?;
        let out = call(
            &["image", "inspect", "--format", "{{.Id}}", image],
            self.short,
            interrupt,
        )
        .ok()?;
        // As the container's image is read (`outside`): a digest, else by name.
        let id = out.stdout.trim();
        let digest = id
            .strip_prefix("sha256:")
            .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
        (out.ok && digest).then(|| id.to_string())
    }

    fn has_image(&self, image: &str, interrupt: Interrupt) -> Result<bool, BackendError> {
        self.endpoint()?;
        let out = call(
            &["image", "inspect", "--format", "{{.Id}}", image],
            self.short,
            interrupt,
        )?;
        if out.ok {
            return Ok(true);
        }
        if docker_cli::no_such_image(&out.stderr) {
            return Ok(false);
        }
        Err(match daemon_problem(self.short) {
            Some(detail) => BackendError::EngineUnreachable(format!("{}: {detail}", self.daemon())),
            None => BackendError::Failed {
                command: format!("docker image inspect {image}"),
                detail: last_lines(&out.stderr, 2),
            },
        })
    }

    fn run_once(
        &self,
        spec: &Spec,
        wall: Duration,
        interrupt: Interrupt,
    ) -> Result<Output, BackendError> {
        self.endpoint()?;
        let invocation = seccomp::with_profile(docker_cli::command().args(run_args(spec)));
        daemon::guarded(&invocation, wall, interrupt)
    }

    fn sweep_orphans(&self) -> Vec<String> {
        sweep::remove_orphans(self.short)
    }

    fn reads_from_outside(&self) -> bool {
        true
    }

    fn tools_volume(&self, interrupt: Interrupt) -> Result<Option<String>, BackendError> {
        // A daemon refused (plain tcp:// elsewhere) is told before any call to it.
        self.endpoint()?;
        super::tools::ensure(interrupt).map(|filled| Some(filled.volume))
    }

    /// `docker create` (nothing runs), `docker cp` of `path` as a tar stream (the
    /// file's bytes are in it as they are), `docker rm`.
    fn read_unstarted(&self, spec: &Spec, path: &str) -> Result<Output, BackendError> {
        self.endpoint()?;
        let name = format!("agent-runner-read-{}", uuid::Uuid::new_v4().simple());
        let mut args = run_args(spec);
        args.retain(|a| a != "--rm");
        args[0] = "create".into();
        args.splice(1..1, ["--name".to_string(), name.clone()]);
        let invocation = seccomp::with_profile(docker_cli::command().args(args));
        let created = docker_cli::run_invocation(&invocation, self.short, Interrupt::never())
            .map_err(cli_missing)?;
        if !created.ok {
            return Ok(created);
        }
        let source = format!("{name}:{path}");
        let read = call(&["cp", &source, "-"], self.short, Interrupt::never());
        remove_container(&name, self.short);
        read
    }

    fn remote(&self) -> bool {
        self.endpoint().is_ok_and(Endpoint::is_remote)
    }

    fn resolve_runtime(&self, name: Option<&str>) -> Option<(String, Vec<String>)> {
        super::runtime::resolve(name, HEALTH)
    }

    fn daemon(&self) -> String {
        match self.endpoint.get() {
            Some(Ok(endpoint)) => endpoint.to_string(),
            _ => "the docker daemon".into(),
        }
    }

    fn labelled_volumes(
        &self,
        key: &str,
        values: &[&str],
    ) -> Result<Vec<LabelledVolume>, BackendError> {
        // Names first, then their labels through `inspect`: `{{.Label "…"}}` in
        // `volume ls` is Docker's only, `index .Labels` of `inspect` both engines
        // know (SPEC §24).
        let filter = format!("label={key}");
        let names = self.checked(
            "docker volume ls",
            &["volume", "ls", "-q", "--filter", &filter],
        )?;
        let names: Vec<&str> = names
            .lines()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut format = "{{.Name}}".to_string();
        for value in values {
            format.push_str(&format!("\t{{{{index .Labels \"{value}\"}}}}"));
        }
        let mut args = vec!["volume", "inspect", "--format", &format];
        args.extend(names.iter().copied());
        let listed = self.checked("docker volume inspect", &args)?;
        Ok(listed
            .lines()
            .filter_map(|line| {
                let mut parts = line.splitn(values.len() + 1, '\t');
                let name = parts.next().filter(|n| !n.is_empty())?.to_string();
                let mut labels: Vec<String> = parts.map(str::to_string).collect();
                labels.resize(values.len(), String::new());
                Some(LabelledVolume {
                    name,
                    values: labels,
                })
            })
            .collect())
    }

    fn remove_volume(&self, name: &str) -> Result<(), BackendError> {
        self.checked(&format!("docker volume rm {name}"), &["volume", "rm", name])
            .map(drop)
    }
}

impl Docker {
    /// `docker <args>` within the short deadline: its stdout, or an error naming
    /// `command` with its stderr's tail.
    fn checked(&self, command: &str, args: &[&str]) -> Result<String, BackendError> {
        let out = docker_cli::run(args, self.short, Interrupt::never()).map_err(cli_missing)?;
        if !out.ok {
            return Err(BackendError::Failed {
                command: command.to_string(),
                detail: last_lines(&out.stderr, 3),
            });
        }
        Ok(out.stdout)
    }

    /// Why `docker run` failed: missing image, unreachable daemon, or something else.
    fn diagnose_start(&self, spec: &Spec, invocation: &Invocation, stderr: &str) -> BackendError {
        if docker_cli::no_such_image(stderr) {
            return BackendError::ImageMissing {
                what: super::DOCKER_IMAGE,
                image: spec.image.clone(),
                detail: "not present locally".into(),
            };
        }
        if let Some(detail) = daemon_problem(self.short) {
            // The daemon named as the environment chose it (SPEC §22), then
            // docker's words; a lost host's message names it already.
            if detail.starts_with("host lost") {
                return BackendError::EngineUnreachable(detail);
            }
            return BackendError::EngineUnreachable(format!("{}: {detail}", self.daemon()));
        }
        if let (Some(runtime), true) = (&spec.runtime, super::runtime::is_unknown(stderr)) {
            let known = super::runtime::known(self.short).unwrap_or_default();
            return BackendError::Refused(super::runtime::unknown(runtime, &known));
        }
        if let Some(fix) = docker_cli::missing_part(stderr) {
            return BackendError::Failed {
                command: "docker run --init".into(),
                detail: format!("{fix}; {}", last_lines(stderr, 1)),
            };
        }
        BackendError::Failed {
            command: shorten_command(invocation),
            detail: last_lines(stderr, 5),
        }
    }
}

/// A running container; see the module documentation.
struct Container {
    name: String,
    /// In a mutex: execs run beside each other (`Instance: Sync`).
    held: std::sync::Mutex<Held>,
    watchdog: Watchdog,
    /// The deadline of a short call.
    short: Duration,
    /// The daemon in words (`Backend::daemon`), for a lost host's message.
    daemon: String,
    /// The daemon did not answer its health check: the host is lost.
    lost: std::sync::Mutex<Option<String>>,
    /// The lifeline's way down, closed first on removal (it holds the stdin).
    down: Option<Down>,
}

/// The health check of a daemon: `docker version` within this (SPEC §22).
const HEALTH: Duration = Duration::from_secs(5);

impl Instance for Container {
    fn name(&self) -> &str {
        &self.name
    }

    fn exec(
        &self,
        exec: Exec,
        limits: &Limits,
        capture: &mut Capture,
        stop: Stop,
    ) -> Result<Finished, BackendError> {
        // A run's limit may be an hour: a host that stops answering meanwhile is
        // found by the health checks beside it, not at the limit (SPEC §22).
        let invocation = exec_invocation(&self.name, exec);
        let ended = self.held.lock().unwrap_or_else(|e| e.into_inner()).ended();
        let gone = AtomicBool::new(false);
        let (finished, lost) = daemon::watched(limits.interrupt, |watch| {
            let Some(ended) = ended else {
                let limits = Limits {
                    interrupt: watch,
                    ..*limits
                };
                return process::run(&invocation, &limits, capture, stop);
            };
            // The exec also ends when the container's main process does: under gVisor
            // `docker exec` does not return when its container is killed.
            let stop_exec = Interrupt::manual();
            // Dropped when the exec has ended: the watch wakes at once, so no exec
            // waits for its watch's next look.
            let (done, finished_exec) = std::sync::mpsc::channel::<()>();
            let (gone, stop_exec) = (&gone, &stop_exec);
            std::thread::scope(|scope| {
                scope.spawn(move || {
                    loop {
                        if ended.load(Ordering::SeqCst) {
                            gone.store(true, Ordering::SeqCst);
                        }
                        if watch.is_set() || gone.load(Ordering::SeqCst) {
                            stop_exec.trigger();
                            return;
                        }
                        match finished_exec.recv_timeout(EXEC_WATCH) {
                            Err(RecvTimeoutError::Timeout) => {}
                            _ => return,
                        }
                    }
                });
                let limits = Limits {
                    interrupt: *stop_exec,
                    ..*limits
                };
                let finished = process::run(&invocation, &limits, capture, stop);
                drop(done);
                finished
            })
        });
        if let Some(message) = lost {
            self.remember_lost(&message);
            return Err(BackendError::EngineUnreachable(message));
        }
        if gone.load(Ordering::SeqCst) {
            // A daemon that went takes its containers' clients with it: a lost
            // host, not a container that ended there.
            return Err(self.gone());
        }
        finished.map_err(cli_missing)
    }

    fn is_alive(&mut self) -> bool {
        super::held_mut(&mut self.held).is_running()
    }

    fn gone(&self) -> BackendError {
        // A daemon that went takes its containers' clients with it: a lost host,
        // not a container that ended there.
        if let Some(lost) = self.lost() {
            return lost;
        }
        BackendError::Gone {
            name: self.name.clone(),
            detail: last_lines(&super::held_stderr(&self.held), 2),
        }
    }

    fn lost(&self) -> Option<BackendError> {
        let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
        if lost.is_none() {
            // Found lost by another call of this process (`daemon::watched`).
            if let Some(message) = daemon::lost() {
                *lost = Some(message.clone());
                return Some(BackendError::EngineUnreachable(message));
            }
            let detail = match call(
                &["version", "--format", "{{.Server.Version}}"],
                HEALTH,
                Interrupt::never(),
            ) {
                Ok(out) if out.ok => return None,
                Ok(out) if out.ending == Ending::TimedOut => {
                    format!("no answer within {} s", HEALTH.as_secs())
                }
                Ok(out) => last_lines(&out.stderr, 2),
                Err(e) => e.to_string(),
            };
            let message = format!("host lost: {}: {detail}", self.daemon);
            // Every call after (the removal, the copy's bring-back) answers at once.
            daemon::mark_lost(&message);
            *lost = Some(message);
        }
        lost.clone().map(BackendError::EngineUnreachable)
    }

    fn diagnose(&mut self, image: &str, stderr: &str) -> BackendError {
        match fault_in(stderr) {
            Some(DockerFault::Daemon) => {
                let message = format!("host lost: {}: {}", self.daemon, last_lines(stderr, 2));
                self.remember_lost(&message);
                BackendError::EngineUnreachable(message)
            }
            Some(DockerFault::ContainerGone) => BackendError::Gone {
                name: self.name.clone(),
                detail: last_lines(stderr, 2),
            },
            Some(DockerFault::CannotExec) => BackendError::ImageUnusable {
                image: image.to_string(),
                detail: last_lines(stderr, 2),
            },
            // Before anything that waits on the daemon: a lost host answers nothing.
            _ if self.lost().is_some() => self.lost().unwrap_or_else(|| self.gone()),
            _ if self.is_dying() => self.gone(),
            _ => match daemon_problem(self.short) {
                Some(detail) => BackendError::EngineUnreachable(detail),
                None => BackendError::Failed {
                    command: format!("docker exec {}", self.name),
                    detail: last_lines(stderr, 3),
                },
            },
        }
    }

    fn send_line(&mut self, line: &str) -> std::io::Result<()> {
        super::held_mut(&mut self.held).send_line(line)
    }

    fn read_line(
        &mut self,
        prefix: &str,
        within: Duration,
        interrupt: Interrupt,
    ) -> Result<String, HeldWait> {
        super::held_mut(&mut self.held).read_line(prefix, within, interrupt)
    }

    fn stderr(&self) -> String {
        super::held_stderr(&self.held)
    }

    fn remove(self: Box<Self>, within: Duration) -> super::Removal {
        let this = *self;
        let started = Instant::now();
        // Closing the main process's stdin ends the container, and `docker run --rm`
        // returns once it is removed. `docker rm -f` only if that does not happen.
        // A lost host gets the health check's deadline, not a short call's: when it
        // comes back, our closed pipe ends the container there.
        if let Some(down) = &this.down {
            down.close();
        }
        let lost = this.lost.lock().is_ok_and(|lost| lost.is_some()) || daemon::lost().is_some();
        let (within, deadline) = if lost {
            (within.min(HEALTH), HEALTH)
        } else {
            (within, this.short)
        };
        let held = this.held.into_inner().unwrap_or_else(|e| e.into_inner());
        // Gone is what counts: `--rm`'s own removal may be the one under way.
        let gone = held.release(within)
            || remove_container(&this.name, deadline)
            || daemon::wait_gone(&this.name, deadline);
        let took = started.elapsed();
        if gone {
            this.watchdog.dismiss();
        } else {
            this.watchdog.hand_over();
        }
        super::Removal { took, left: !gone }
    }
}

/// How often an exec looks whether its container's main process is still there.
const EXEC_WATCH: Duration = Duration::from_millis(50);

/// How often, and how far apart, `is_dying` looks (about 2 s in all).
const DYING_CHECKS: u32 = 10;
const DYING_PAUSE: Duration = Duration::from_millis(200);

impl Container {
    /// The host is lost (`message`: `host lost: …`), for this container and every
    /// call of this process after.
    fn remember_lost(&self, message: &str) {
        daemon::mark_lost(message);
        *self.lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(message.to_string());
    }

    /// Whether docker says the container is running (false when it is gone, or when
    /// docker cannot say).
    fn is_running(&self) -> bool {
        call(
            &["inspect", "--format", "{{.State.Running}}", &self.name],
            self.short,
            Interrupt::never(),
        )
        .is_ok_and(|out| out.ok && out.stdout.trim() == "true")
    }

    /// Whether the container is gone or going. An exec that fails without a word is
    /// often the first sign of a container whose main process just ended, while
    /// docker still reports it running for a moment, so this waits a little for it
    /// to settle.
    fn is_dying(&mut self) -> bool {
        for _ in 0..DYING_CHECKS {
            if !self.is_alive() || !self.is_running() {
                return true;
            }
            std::thread::sleep(DYING_PAUSE);
        }
        false
    }
}

/// The host-side watchdog of a container, if it has one; see the module
/// documentation.
struct Watchdog(Option<std::sync::Mutex<Held>>);

/// Waits for a line on stdin; at end-of-file without `done` (agent-runner is gone),
/// removes the container with the docker CLI at `$2` (the path agent-runner
/// found, not one the shell would look up).
const WATCHDOG_SCRIPT: &str = include_str!("watchdog.sh");

impl Watchdog {
    /// The watchdog of container `name`; none unless `wanted`.
    fn start(name: &str, wanted: bool) -> Result<Watchdog, BackendError> {
        if !wanted {
            return Ok(Watchdog(None));
        }
        let docker = process::program::resolve("docker")
            .map_err(|e| BackendError::CliMissing(format!("docker: {e}")))?;
        let invocation = docker_cli::aim_invocation(Invocation::new("sh")).args([
            "-c",
            WATCHDOG_SCRIPT,
            "agent-runner-watchdog",
            name,
            &docker.display().to_string(),
        ]);
        process::spawn_held(&invocation)
            .map(|held| Watchdog(Some(std::sync::Mutex::new(held))))
            .map_err(|e| BackendError::Io(format!("cannot start the container's watchdog: {e}")))
    }

    /// The container may still be there: the watchdog, its pipe closed without
    /// `done`, removes it on its own, and may outlive this call.
    fn hand_over(self) {
        drop(self.0);
    }

    /// The container is gone (or being removed by us): the watchdog may end.
    fn dismiss(self) {
        if let Some(held) = self.0 {
            let mut held = held.into_inner().unwrap_or_else(|e| e.into_inner());
            let _ = held.send_line("done");
            held.release(Duration::from_secs(2));
        }
    }
}

/// `docker volume create` of `volume` with its labels; a volume of that name that
/// exists already is kept as it is.
fn create_volume(volume: &Volume, deadline: Duration) -> Result<(), BackendError> {
    let mut args = vec!["volume".to_string(), "create".into()];
    for (label, value) in &volume.labels {
        args.extend(["--label".into(), format!("{label}={value}")]);
    }
    args.push(volume.name.clone());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = daemon::call(&args, deadline, Interrupt::never())?;
    if out.ok {
        return Ok(());
    }
    Err(BackendError::Failed {
        command: format!("docker volume create {}", volume.name),
        detail: docker_cli::last_lines(&out.stderr, 3),
    })
}

/// The `docker run` arguments of `spec`.
fn run_args(spec: &Spec) -> Vec<String> {
    let mut args: Vec<String> = if spec.held {
        ["run", "-i", "--rm", "--pull", "never"]
            .map(String::from)
            .into()
    } else {
        ["run", "--rm", "--pull", "never"].map(String::from).into()
    };
    // The engine's init, unless the main process is its own (`Main::own_init`): an
    // init the worker could take over must not be PID 1 of a sandbox it runs in.
    // `--init` on probes too, so that doctor's find an engine without it.
    // `--init=false` said outright: a daemon may add its init by default.
    let init = if spec.main.own_init {
        "--init=false"
    } else {
        "--init"
    };
    args.insert(args.len() - 2, init.into());
    if let Some(name) = &spec.name {
        args.extend(["--name".into(), name.clone()]);
    }
    if let Some(runtime) = &spec.runtime {
        args.extend(["--runtime".into(), runtime.clone()]);
    }
    if spec.stream {
        // The stream is ours alone: the engine keeps no log of what goes up it.
        args.extend(["--log-driver".into(), "none".into()]);
    }
    for (label, value) in &spec.labels {
        args.extend(["--label".into(), format!("{label}={value}")]);
    }
    match spec.network {
        Net::Isolated => args.extend(["--network".into(), "none".into()]),
        Net::Host => args.extend(["--network".into(), "host".into()]),
        Net::Default => {}
    }
    if let Some(confinement) = &spec.confinement {
        args.extend(["--cap-drop".into(), "ALL".into()]);
        for cap in confinement.keep {
            args.extend(["--cap-add".into(), (*cap).into()]);
        }
        args.extend(["--security-opt".into(), "no-new-privileges".into()]);
    }
    // Every container we start: no set-id file, ever (`seccomp.rs`).
    args.extend(seccomp::run_options());
    if let Some(limits) = &spec.limits {
        args.extend(["--pids-limit".to_string(), limits.pids.to_string()]);
        if let Some(bytes) = limits.memory_bytes {
            args.extend(["--memory".into(), bytes.to_string()]);
        }
        if let Some(cpus) = limits.cpus {
            args.extend(["--cpus".into(), cpus.to_string()]);
        }
    }
    for mount in &spec.mounts {
        let value = match mount.volume {
            // A volume's name is the engine's ([a-zA-Z0-9][a-zA-Z0-9_.-]*): no CSV quoting.
            // `ro=true`, not `readonly` nor `volume-nocopy`: podman 4.3 refuses
            // both (SPEC §24). An engine copies an image's files into a volume only
            // while it is empty, and the tools volume is filled before any mount.
            true => format!(
                "type=volume,source={},target={}{}",
                mount.source.display(),
                mount.target,
                if mount.readonly { ",ro=true" } else { "" }
            ),
            false => mount_spec(&mount.source, &mount.target, mount.readonly),
        };
        args.extend(["--mount".into(), value]);
    }
    for volume in &spec.volumes {
        args.extend([
            "--mount".into(),
            format!(
                "type=volume,source={},target={}",
                volume.name, volume.target
            ),
        ]);
    }
    if let Some(dir) = &spec.workdir {
        args.extend(["-w".into(), dir.clone()]);
    }
    let (uid, gid) = sys::user_and_group();
    if spec.as_user && uid != 0 {
        args.extend([
            "--user".into(),
            format!("{uid}:{gid}"),
            "--env".into(),
            format!("HOME={NONROOT_HOME}"),
        ]);
    }
    // Root's is the owner a tmpfs has anyway: no `uid=`, which podman 4 refuses.
    let owner = if (uid, gid) == (0, 0) {
        String::new()
    } else {
        format!(",uid={uid},gid={gid}")
    };
    for tmpfs in &spec.tmpfs {
        args.extend([
            "--tmpfs".into(),
            format!(
                "{}:rw,noexec,nosuid,nodev,size={},mode=0700{owner}",
                tmpfs.target, tmpfs.size
            ),
        ]);
    }
    args.extend(["--entrypoint".into(), spec.main.entrypoint.clone()]);
    args.push(spec.image.clone());
    args.extend(spec.main.args.iter().cloned());
    args
}

/// `docker exec -i [-w dir] [-e ...] <container> <command...>` with `exec`'s stdin;
/// see the module documentation for the variables.
fn exec_invocation(name: &str, exec: Exec) -> Invocation {
    // Ends with agent-runner: under gVisor a `docker exec` does not end with its
    // container, so a killed agent-runner would leave its clients behind. (The
    // thread that spawns it waits for it: `die_with_parent`'s rule.)
    let mut invocation = docker_cli::command().args(["exec", "-i"]).die_with_parent();
    if let Some(dir) = &exec.workdir {
        invocation = invocation.args(["-w", dir]);
    }
    for var in &exec.env {
        invocation = match var {
            Var::ByName(name, value) => invocation.args(["-e", name]).env(name, value),
            Var::Literal(name, value) => {
                invocation.args(["-e".to_string(), format!("{name}={value}")])
            }
        };
    }
    invocation = invocation.arg(name).args(exec.command).stdin(exec.stdin);
    match exec.stdin_file {
        Some(file) => invocation.stdin_shared(file),
        None => invocation,
    }
}

/// The `docker run` command line for messages: without a script's text, and its
/// options (labels, capabilities, mounts: 1.5 KB) shown as `…`, so that the cause
/// after it is seen. (The bridge's arguments are short: nothing to cut.)
fn shorten_command(invocation: &Invocation) -> String {
    let shown = invocation.display();
    let shown = shown.split(" -c ").next().unwrap_or_default();
    match (shown.split_once(" run "), shown.find(" --entrypoint ")) {
        (Some((program, _)), Some(at)) => format!("{program} run …{}", &shown[at..]),
        _ => shown.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::{Confinement, Main, Mount, Ready, Tmpfs};
    use super::*;
    use agent_runner_settings::task::WorkerLimits;

    fn full() -> Spec {
        let mut spec = Spec::new(
            "img:1",
            Main {
                entrypoint: "/run/x/bridge".into(),
                args: vec!["3128".into(), "/run/x/proxy.sock".into()],
                own_init: true,
            },
        );
        spec.name = Some("c1".into());
        spec.labels = vec![("agent-runner.task".into(), "t1".into())];
        spec.held = true;
        spec.ready = Some(Ready {
            prefix: "ready ",
            within: Duration::from_secs(1),
            interrupt: Interrupt::never(),
        });
        spec.network = Net::Isolated;
        spec.confinement = Some(Confinement {
            keep: &["CHOWN", "KILL"],
        });
        spec.limits = Some(WorkerLimits {
            memory_bytes: Some(1 << 30),
            cpus: Some(1.5),
            pids: 100,
        });
        spec.as_user = true;
        spec.mounts = vec![
            Mount::new("/r", "/workspace/project", false),
            Mount::new("/r/.agent-runner", "/workspace/project/.agent-runner", true),
        ];
        spec.tmpfs = vec![Tmpfs {
            target: "/run/p".into(),
            size: "1m",
        }];
        spec.workdir = Some("/workspace/project".into());
        spec
    }

    #[test]
    fn a_held_confined_sandbox_is_rendered_as_docker_run_arguments() {
        let (uid, gid) = sys::user_and_group();
        let user: Vec<String> = if uid == 0 {
            vec![]
        } else {
            vec![
                "--user".into(),
                format!("{uid}:{gid}"),
                "--env".into(),
                "HOME=/tmp/agent-runner-home".into(),
            ]
        };
        let expected: Vec<String> = [
            "run",
            "-i",
            "--rm",
            "--init=false",
            "--pull",
            "never",
            "--name",
            "c1",
            "--label",
            "agent-runner.task=t1",
            "--network",
            "none",
            "--cap-drop",
            "ALL",
            "--cap-add",
            "CHOWN",
            "--cap-add",
            "KILL",
            "--security-opt",
            "no-new-privileges",
            "--security-opt",
            "seccomp=/dev/fd/3",
            "--pids-limit",
            "100",
            "--memory",
            "1073741824",
            "--cpus",
            "1.5",
            "--mount",
            "type=bind,source=/r,target=/workspace/project",
            "--mount",
            "type=bind,source=/r/.agent-runner,target=/workspace/project/.agent-runner,readonly",
            "-w",
            "/workspace/project",
        ]
        .map(String::from)
        .into_iter()
        .chain(user)
        .chain(
            [
                "--tmpfs".to_string(),
                if (uid, gid) == (0, 0) {
                    "/run/p:rw,noexec,nosuid,nodev,size=1m,mode=0700".to_string()
                } else {
                    format!("/run/p:rw,noexec,nosuid,nodev,size=1m,mode=0700,uid={uid},gid={gid}")
                },
            ]
            .into_iter()
            .chain(
                [
                    "--entrypoint",
                    "/run/x/bridge",
                    "img:1",
                    "3128",
                    "/run/x/proxy.sock",
                ]
                .map(String::from),
            ),
        )
        .collect();
        assert_eq!(run_args(&full()), expected);
    }

    #[test]
    fn a_runtime_is_asked_for_by_name() {
        let mut spec = Spec::new("img:1", Main::shell("echo hi", []));
        spec.runtime = Some("runsc".into());
        let args = run_args(&spec);
        let at = args.iter().position(|a| a == "--runtime").unwrap();
        assert_eq!(args[at + 1], "runsc");
        assert!(at < args.iter().position(|a| a == "img:1").unwrap());
    }

    #[test]
    fn a_probe_asks_for_nothing_it_did_not_name() {
        let mut spec = Spec::new("img:1", Main::shell("echo hi", []));
        spec.network = Net::Host;
        assert_eq!(
            run_args(&spec),
            [
                "run",
                "--rm",
                "--init",
                "--pull",
                "never",
                "--network",
                "host",
                "--security-opt",
                "seccomp=/dev/fd/3",
                "--entrypoint",
                "/bin/sh",
                "img:1",
                "-c",
                "echo hi"
            ]
        );
    }

    #[test]
    fn exec_values_go_by_name_and_only_literals_on_the_command_line() {
        let exec = Exec {
            workdir: Some("/w".into()),
            env: vec![
                Var::ByName("SECRET".into(), "s3cret".into()),
                Var::Literal("HTTPS_PROXY".into(), "http://127.0.0.1:3128".into()),
            ],
            command: vec!["sh".into(), "-c".into(), "true".into()],
            stdin: b"in".to_vec(),
            stdin_file: None,
        };
        let shown = format!("{:?}", exec_invocation("c1", exec));
        assert!(
            shown.contains(
                r#"args: ["exec", "-i", "-w", "/w", "-e", "SECRET", "-e", "HTTPS_PROXY=http://127.0.0.1:3128", "c1", "sh", "-c", "true"]"#
            ),
            "{shown}"
        );
        assert!(shown.contains(r#"env: [("SECRET", "s3cret")]"#), "{shown}");
    }

    #[test]
    fn a_failed_start_names_the_command_without_the_script() {
        let invocation =
            Invocation::new("docker").args(["run", "--name", "c", "img", "-c", "a long script"]);
        assert_eq!(shorten_command(&invocation), "docker run --name c img");
        let held = Invocation::new("docker").args([
            "run",
            "-i",
            "--label",
            "a=b",
            "--entrypoint",
            "/bridge",
            "img",
            "3128",
        ]);
        assert_eq!(
            shorten_command(&held),
            "docker run … --entrypoint /bridge img 3128"
        );
    }
}
