//! The task's container: what it is made of and what each exec in it is given (the
//! policy). How it is started, reached and removed is the mechanism under it
//! (`crate::backend`): the repository comes in through the transport
//! (`backend::Bind`), its main process and the way out to the egress proxy are the
//! carrier's (`backend::SocketLink`), and the backend (`backend::open`'s) renders the
//! whole as a container and removes it when we let go (or die).
//!
//! What the container may do (SPEC §9): see the repository as the transport mounts
//! it; capabilities are dropped to what building software needs (no MKNOD, SETFCAP,
//! FSETID, NET_RAW, SYS_CHROOT, SETPCAP, AUDIT_WRITE), `no-new-privileges` is set,
//! no file can get a setuid or setgid bit (`backend::seccomp`, on every container),
//! and pids (and optionally memory and CPUs) are limited. Values reach it only per
//! exec, by name (`env`): none is in an argv, where every local user could read it;
//! the agent's login key only reaches the agent's runs.

use std::time::{Duration, Instant};

use super::PROJECT_DIR;
use super::SandboxError;
use super::envelope::{PRIVATE_DIR, PrivateFile};
use crate::backend::sweep::{LABEL_TASK, owner_labels};
use crate::backend::{
    Backend, BackendError, Carrier, Confinement, Exec, Instance, Mount, PROGRAM_FOUND, READY,
    Ready, SESSION_DIR, Spec, Tmpfs, Transport, Var,
};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;
use agent_runner_core::process::{Capture, Finished, Limits, Stop};
use agent_runner_core::timestamp::human;
use agent_runner_settings::agent::{Kind, Login};
use agent_runner_settings::task::AgentFrom;
use agent_runner_settings::task::worker_env::RESERVED;
use agent_runner_settings::task::{EnvValue, WorkerSettings};

/// The longest the program's probe may take (as any stop of work).
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

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

/// Time allowed for the container to report its main process ready.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// What a container is made from.
#[derive(Debug, Clone)]
pub(crate) struct ContainerSpec {
    pub(crate) task_id: String,
    pub(crate) worker: WorkerSettings,
    /// How the worker's agent logs in.
    pub(crate) login: Login,
    pub(crate) interrupt: Interrupt,
    /// The transport keeps the worker's session (`session.rs`) at `SESSION_DIR`.
    pub(crate) keeps_session: bool,
    /// The tools volume (`backend::tools`), mounted read-only at `TOOLS_DIR`; None
    /// before the start, or when it could not be had (`tools_error` says why).
    pub(crate) tools: Option<String>,
    pub(crate) tools_error: Option<String>,
    /// The volumes of `runner.worker.caches` for this repository (`caches.rs`).
    pub(crate) caches: Vec<crate::backend::Volume>,
    /// The image's ID, looked up beside the tools volume before the start: the
    /// container is started from it, so that the agent's pinning kept for that ID
    /// (`agent_cache`) is had without asking the started container. None: started
    /// by the image's name, asked then.
    pub(crate) image_id: Option<String>,
}

/// The image's shell, which starts every run where the tools volume has none
/// (`envelope.rs`); pinned with the agent (`agent_files`).
pub(crate) const IMAGE_SHELL: &str = "/bin/sh";

impl ContainerSpec {
    /// The shell that runs the envelope around every exec: the tools volume's when
    /// it is mounted and has one (nothing in the container can change it, so it
    /// needs no pinning), else the image's `/bin/sh`, pinned with the agent
    /// (`agent_files`).
    pub(crate) fn shell(&self) -> &'static str {
        match (&self.tools, crate::backend::tools::host_shell()) {
            (Some(_), Some(_)) => crate::backend::tools::SHELL,
            _ => IMAGE_SHELL,
        }
    }
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
    instance: Box<dyn Instance>,
    pub(crate) name: String,
    /// Pid of the main process inside the container (spared when stopping work).
    pub(crate) keep_pid: String,
    /// The shell that runs the envelope (`ContainerSpec::shell`).
    pub(crate) shell: &'static str,
    /// The carrier's variables of every exec (the proxy's, with egress).
    carrier_env: Vec<(&'static str, String)>,
    /// The program's probe run beside the transport's `started`, not yet read.
    pub(crate) probed: Option<Probed>,
    /// The program the main process found as it started (`Carrier::find_program`):
    /// no probe of it needed.
    pub(crate) found: Option<String>,
    /// The image ID it was started from (None: from the image's name).
    pub(crate) image_id: Option<String>,
    /// Where its main process starts commands instead of the engine's exec.
    main_exec: Option<crate::backend::main_exec::MainExec>,
}

/// What the probe of a program (`prepare::FIND_PROGRAM`) gave.
pub(crate) struct Probed {
    pub(crate) program: String,
    pub(crate) finished: Result<Finished, BackendError>,
    pub(crate) said: String,
    pub(crate) stderr: String,
}

impl Container {
    /// Starts the container, pulling the image if it is missing and pullable.
    /// `probe`: a program whose probe runs beside what goes in at the start (the
    /// copy's stream): neither waits on the other (`probed`).
    pub(crate) fn start(
        backend: &dyn Backend,
        spec: &ContainerSpec,
        transport: &mut dyn Transport,
        carrier: &mut dyn Carrier,
        probe: Option<&str>,
    ) -> Result<Container, SandboxError> {
        let started = Instant::now();
        let id = spec.image_id.as_deref();
        let container = match Container::run(backend, spec, id, transport, carrier, probe) {
            // Pulled by its name, started by it (an ID looked up before may be gone).
            Err(SandboxError::ImageMissing { .. }) => {
                backend.pull(&spec.worker.docker_image, spec.interrupt)?;
                Container::run(backend, spec, None, transport, carrier, probe)?
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

    /// Starts it from the image `id` when given, else from the image's name.
    fn run(
        backend: &dyn Backend,
        spec: &ContainerSpec,
        id: Option<&str>,
        transport: &mut dyn Transport,
        carrier: &mut dyn Carrier,
        probe: Option<&str>,
    ) -> Result<Container, SandboxError> {
        let suffix: String = uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .chars()
            .take(6)
            .collect();
        let name = format!("agent-runner-{}-{suffix}", spec.task_id);
        transport.prepare(
            backend,
            &spec.worker.docker_image,
            spec.interrupt,
            Some(&mut *carrier),
        )?;
        let mounts = transport.mounts()?;
        let asked = probe.filter(|program| main_finds(spec, program, carrier));
        let sandbox = sandbox_spec(spec, id, &name, mounts, carrier);
        match backend.start(&sandbox) {
            Ok(started) => {
                let found = asked.filter(|_| {
                    started.ready.split_whitespace().next_back() == Some(PROGRAM_FOUND)
                });
                let mut said = started
                    .ready
                    .split_whitespace()
                    .filter(|word| !word.starts_with("program="));
                let keep_pid = said.next().unwrap_or_default().to_string();
                let mut container = Container {
                    instance: started.instance,
                    name,
                    keep_pid,
                    shell: spec.shell(),
                    carrier_env: carrier.exec_env(),
                    probed: None,
                    found: found.map(str::to_string),
                    image_id: id.map(str::to_string),
                    main_exec: carrier
                        .main_exec()
                        .filter(|_| crate::backend::main_exec::wanted()),
                };
                // Before anything runs in it: the daemon sees this machine's files.
                // Beside it, the program's probe: the image's shell looks a name up
                // on its PATH, nothing of the repository's or the worker's runs.
                let probe = probe
                    .filter(|_| found.is_none())
                    .map(|program| (program, container.program_probe(spec, program)));
                let instance = &*container.instance;
                let (moved, probed) = std::thread::scope(|scope| {
                    let probing = probe.map(|(program, exec)| {
                        scope.spawn(move || {
                            let limits = Limits::wall(PROBE_TIMEOUT, spec.interrupt);
                            let mut capture = Capture::in_memory(4096);
                            let finished =
                                instance.exec(exec, &limits, &mut capture, Stop::Terminate);
                            Probed {
                                program: program.to_string(),
                                finished,
                                said: capture.tail(),
                                stderr: capture.stderr(),
                            }
                        })
                    });
                    let moved = transport.started(backend, said.next(), instance);
                    (moved, probing.and_then(|h| h.join().ok()))
                });
                if let Err(e) = moved {
                    let _ = container.remove();
                    return Err(e.into());
                }
                container.probed = probed;
                // Our helper is PID 1, or the sandbox is not the one we asked for
                // (an init above it could be taken over by the worker, SPEC §9).
                if sandbox.main.own_init && container.keep_pid != "1" {
                    let detail = format!(
                        "its main process ({}) is pid {}, not 1: an init of the engine's is above it",
                        sandbox.main.entrypoint, container.keep_pid
                    );
                    let _ = container.remove();
                    return Err(SandboxError::Docker {
                        command: "docker run --init=false".into(),
                        detail,
                    });
                }
                if let Some(stream) = started.stream
                    && let Err(e) = carrier.attach(stream)
                {
                    let _ = container.remove();
                    return Err(e.into());
                }
                Ok(container)
            }
            Err(BackendError::Failed {
                command,
                mut detail,
            }) => {
                if let Some(refused) = transport.start_failed(backend, &detail) {
                    return Err(refused.into());
                }
                detail.extend(carrier.start_hint(&detail));
                Err(SandboxError::Docker { command, detail })
            }
            Err(e) => {
                let _ = transport.start_failed(backend, &e.to_string());
                Err(e.into())
            }
        }
    }

    /// The exec of `prepare::FIND_PROGRAM` for `program`, in the project with the
    /// variables of a test's exec.
    pub(crate) fn program_probe(&self, spec: &ContainerSpec, program: &str) -> Exec {
        Exec {
            workdir: Some(PROJECT_DIR.to_string()),
            env: self.env(spec, None, None),
            command: ["/bin/sh", "-c", super::prepare::FIND_PROGRAM, "sh", program]
                .map(String::from)
                .into(),
            stdin: Vec::new(),
            stdin_file: None,
        }
    }

    /// Runs `exec` in the container; see `backend::Instance::exec`.
    pub(crate) fn exec(
        &self,
        exec: Exec,
        limits: &Limits,
        capture: &mut Capture,
        stop: Stop,
    ) -> Result<Finished, SandboxError> {
        if let Some(opened) = self.main_exec.as_ref().and_then(|main| main.open(&exec)) {
            let finished = opened.run(exec, limits, capture, stop);
            if finished.status.is_none()
                && finished.ending == agent_runner_core::process::Ending::Exited
            {
                // Its status never came: the main process, and the sandbox, ended.
                return Err(self.instance.gone().into());
            }
            return Ok(finished);
        }
        Ok(self.instance.exec(exec, limits, capture, stop)?)
    }

    /// The variables of an exec. Values go by name (the value in the engine
    /// client's environment, which only this user and root can read), never in an
    /// argv, which every local user can. The exception: literal values of names the
    /// client itself reads (`worker_env::RESERVED`: proxies, `PATH`, ...), which must
    /// not reconfigure it; they go on the command line, and a credential there is
    /// refused when the task is read (`task::argv`), as are secrets under those
    /// names. `agent`: the variables of a run of the agent (`Kind::run_env`) and its
    /// login key; tests get neither. `file`: a file the envelope writes first
    /// (`PrivateFile`).
    pub(crate) fn env(
        &self,
        spec: &ContainerSpec,
        agent: Option<&[(&'static str, String)]>,
        file: Option<&PrivateFile>,
    ) -> Vec<Var> {
        let by_name = |name: &str, value: &str| Var::ByName(name.into(), value.into());
        let mut env: Vec<Var> = agent
            .unwrap_or_default()
            .iter()
            .map(|(name, value)| by_name(name, value))
            .collect();
        let mut key_in_env = false;
        let key_var = spec.worker.kind.login_rule().key_var;
        for entry in &spec.worker.env {
            key_in_env |= entry.name == key_var;
            env.push(match &entry.value {
                EnvValue::Literal(value) if RESERVED.contains(&entry.name) => {
                    Var::Literal(entry.name.clone(), value.clone())
                }
                value => by_name(&entry.name, value.expose()),
            });
        }
        if let (Some(_), Login::Key { var, value }, false) = (agent, &spec.login, key_in_env) {
            env.push(by_name(var, value.expose()));
        }
        // The carrier's own variables: reserved names, values of agent-runner's.
        for (name, value) in &self.carrier_env {
            env.push(Var::Literal(name.to_string(), value.clone()));
        }
        for (name, value) in file.map(PrivateFile::env).unwrap_or_default() {
            env.push(by_name(name, &value));
        }
        env
    }

    /// Has `carrier` make the container quiet: every process but its main one
    /// killed (`backend::Carrier::quiet`); None when this carrier cannot.
    pub(crate) fn quiet(
        &mut self,
        carrier: &mut dyn Carrier,
    ) -> Option<Result<crate::backend::Quiet, SandboxError>> {
        carrier
            .quiet(&mut *self.instance)
            .map(|quiet| quiet.map_err(Into::into))
    }

    /// False once the container (or the engine connection) is gone.
    pub(crate) fn is_alive(&mut self) -> bool {
        self.instance.is_alive()
    }

    /// The error of a lost host (`backend::Instance::lost`).
    pub(crate) fn lost(&self) -> Option<SandboxError> {
        self.instance.lost().map(Into::into)
    }

    /// The error for a container that has gone.
    pub(crate) fn gone(&self) -> SandboxError {
        self.instance.gone().into()
    }

    /// Why an exec failed in the engine itself, not in its command.
    pub(crate) fn diagnose(&mut self, image: &str, stderr: &str) -> SandboxError {
        self.instance.diagnose(image, stderr).into()
    }

    /// The running sandbox, for the transport's last word before it goes.
    pub(crate) fn instance(&self) -> &dyn Instance {
        &*self.instance
    }

    /// Ends the container: how long that took, or why it may still be there.
    /// The error is a line of the Task Note as it is (`Teardown::notices`).
    pub(crate) fn remove(self) -> Result<Duration, String> {
        let removal = self.instance.remove(Duration::from_secs(5));
        if removal.left {
            let why = format!(
                "The sandbox container {} was not confirmed removed within {}: the next sweep of its host removes it once this agent-runner has ended.",
                self.name,
                human(removal.took)
            );
            log::warn!("{why}");
            return Err(why);
        }
        log::info!("container {} removed in {}", self.name, human(removal.took));
        Ok(removal.took)
    }
}

/// Has `carrier` deliver the files the container needs from the host: the agent's
/// login file, where the agent's home links point to (`home_links`).
pub(crate) fn deliver_files(spec: &ContainerSpec, carrier: &mut dyn Carrier) {
    if let Login::File { path: file, .. } = &spec.login {
        carrier.deliver(file, spec.worker.kind.login_rule().mount);
    }
}

/// Whether the main process is to look `program` up as it starts (where it can),
/// with the image's PATH and nothing else of the probe's variables: a yes saves the
/// probe's exec, unless the task sets a variable that changes how the shell or its
/// loader runs or looks up (PATH, LD_*, SHELLOPTS, …). No file of a longer name is
/// on any PATH.
fn main_finds(spec: &ContainerSpec, program: &str, carrier: &mut dyn Carrier) -> bool {
    let steers_shell = spec.worker.env.iter().any(|entry| {
        RESERVED.contains(&entry.name) || matches!(entry.name.as_str(), "SHELLOPTS" | "BASHOPTS")
    });
    !steers_shell && program.len() <= 255 && carrier.find_program(program)
}

/// What the backend starts for `spec` (from the image `id` when given): the
/// transport's `mounts`, the carrier's main process and mounts, and this module's
/// policy.
fn sandbox_spec(
    spec: &ContainerSpec,
    id: Option<&str>,
    name: &str,
    mut mounts: Vec<Mount>,
    carrier: &dyn Carrier,
) -> Spec {
    let mut links: Vec<(String, String)> = home_links(spec.worker.kind)
        .into_iter()
        .map(|(mount, link)| (mount.to_string(), link.to_string()))
        .collect();
    if spec.keeps_session
        && let Some(link) = super::session::home_link(spec.worker.kind)
    {
        // The agent keeps its sessions in the task's session directory (SPEC §19).
        links.push((SESSION_DIR.to_string(), link));
    }
    mounts.extend(carrier.mounts());
    if let Some(volume) = &spec.tools {
        mounts.push(Mount::volume(volume, crate::backend::tools::TOOLS_DIR));
    }
    let mut labels = vec![(LABEL_TASK.to_string(), spec.task_id.clone())];
    labels.extend(carrier.labels());
    labels.extend(
        owner_labels(&Owner::this_process())
            .into_iter()
            .map(|(label, value)| (label.to_string(), value)),
    );
    // The carrier's own expiry (the lifeline's, which its helper keeps) wins.
    let (label, expires) = crate::backend::sweep::expiry_label(crate::backend::sweep::LIFETIME);
    if !labels.iter().any(|(name, _)| name == label) {
        labels.push((label.to_string(), expires));
    }
    let mut sandbox = Spec::new(
        id.unwrap_or(&spec.worker.docker_image),
        carrier.main(&links),
    );
    sandbox.name = Some(name.to_string());
    sandbox.labels = labels;
    let image_only = spec.worker.agent_from == AgentFrom::Image;
    sandbox.tools_parts = spec
        .tools
        .as_ref()
        .and_then(|_| crate::backend::tools::parts_for(spec.worker.kind.program(), image_only));
    sandbox.held = true;
    sandbox.stream = carrier.streams();
    sandbox.watchdog = true;
    sandbox.ready = Some(Ready {
        prefix: READY,
        within: START_TIMEOUT,
        interrupt: spec.interrupt,
    });
    sandbox.network = spec.worker.network.into();
    sandbox.confinement = Some(Confinement { keep: CAPABILITIES });
    sandbox.limits = Some(spec.worker.limits.clone());
    sandbox.as_user = true;
    sandbox.mounts = mounts;
    sandbox.volumes = spec.caches.clone();
    sandbox.tmpfs = vec![Tmpfs {
        target: PRIVATE_DIR.to_string(),
        size: "1m",
    }];
    sandbox.workdir = Some(PROJECT_DIR.to_string());
    sandbox.runtime = spec.worker.runtime.clone();
    sandbox
}
