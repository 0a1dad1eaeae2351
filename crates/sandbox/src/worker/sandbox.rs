//! The sandbox of a task: one container per task (`container.rs`), every worker and
//! test run an exec wrapped in the envelope (`envelope.rs`: git snapshots and
//! leftover processes handled inside the container), what the worker wrote checked
//! after each run (the transport's `after_run`: on the host, for the bind mount), and
//! the sandbox checked for life after each exec: a dead container, daemon or
//! unusable image ends the task at once instead of looping on paid Meta calls (SPEC
//! §9). The mechanism under it is `crate::backend`: the engine `backend::open`
//! chooses (every container under the seccomp profile of `backend::seccomp`), a
//! transport (bind or copy) and a carrier (socket or lifeline).
//!
//! A worker run: the snapshot before it (an exec of its own, or with the copy
//! transport taken at the end of the test run just before) → the agent's files
//! checked against those pinned when the container started (`agent_files.rs`) → the
//! agent, by its absolute path → the snapshot after → the transport's check.
//!
//! A run: the container started on first use (the carrier opened, with
//! `network: allowlist` the egress proxy started on its socket, the transport's
//! mounts made) → the exec of the envelope around the command → on a limit or an
//! interrupt, the work inside stopped by an exec of its own → `settle`: the sandbox
//! alive and quiet, or the task ends → the transport's check. At the end: the
//! container removed, the proxy stopped, the carrier closed, the transport finished
//! (a last sweep that nothing inside can undo).
//!
//! Logs are created through agent-runner's private directory (`private_dir.rs`,
//! through `fs::Dir`), so nothing the worker left in the repo is ever written
//! through.

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::PROJECT_DIR;
use super::agent_files::AgentFiles;
use super::container::{Container, ContainerSpec, IMAGE_SHELL};
use super::envelope::{Envelope, EnvelopeReader, Leftovers, Mode, PrivateFile, Report};
use super::git::{RepoChanges, Snapshot};
use super::live;
use super::prepare;
use super::session;
use super::{Prepared, Sandbox, SandboxError, SetupRun, Teardown, TestRun, WorkerRun};
use crate::backend::endpoint::Endpoint;
use crate::backend::privileges::{Finding, Fix};
use crate::backend::{
    Backend, BackendError, Bind, Carrier, Copy, CopyTask, Exec, ExecCopy, Lifeline, SocketLink,
    Transport, Var, lifeline,
};
use agent_runner_core::deadline::Deadline;
use agent_runner_core::fs::Dir;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{Capture, Ending, Finished, Limits, Stop};
use agent_runner_core::secret::Redactor;
use agent_runner_core::timestamp::Timestamp;
use agent_runner_egress::{self as egress, Egress};
use agent_runner_settings::agent::{Exit, RunSpec, Transcript, classify};
use agent_runner_settings::events::Events;
use agent_runner_settings::task::{
    AgentFrom, Login, Network, SetupSpec, TestSpec, TransportChoice, WorkerSettings,
};

/// When the agent's pinning started, and what it found.
type Pinned = (std::time::Instant, Result<AgentFiles, SandboxError>);

/// Bytes of worker/test output kept in memory (the rest is in the log file).
const OUTPUT_TAIL: usize = 64 * 1024;
/// Longest JSONL line handed to the event parser.
const MAX_EVENT_LINE: usize = 2 << 20;
/// The agent's settings file of a run (`Kind::settings_file`) in the private tmpfs,
/// and its path there.
const SETTINGS_NAME: &str = "agent-settings";
const SETTINGS_PATH: &str = "/run/agent-runner/private/agent-settings";
/// Time allowed for the envelope's stop of leftovers (5 s grace inside).
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// What the sandbox needs to know about the task.
#[derive(Debug)]
pub struct SandboxConfig {
    pub task_id: String,
    pub repo: PathBuf,
    /// `<repo>/.agent-runner`, already created: mounted read-only in the container.
    pub private_dir: PathBuf,
    /// Where worker and test logs go (`.agent-runner/logs/<id>`).
    pub logs: Dir,
    pub worker: WorkerSettings,
    /// How the worker's agent logs in.
    pub login: Login,
    /// Secrets to mask in logs and tails.
    pub redactor: Redactor,
    /// Stops worker and test runs (and waiting for the container) when set.
    pub interrupt: Interrupt,
    /// Where the worker's items and denied connections are told as they happen.
    pub events: Events,
    /// A host directory that keeps the worker's session across containers
    /// (`session.rs`); None: the session lives and dies with the container.
    pub session_dir: Option<PathBuf>,
    /// A resumed run: the worker's session the runs before kept is gone on with
    /// (`session_dir` as it is; under the copy transport, the task's session volume
    /// on the sandbox's host); else it starts empty.
    pub resumed: bool,
    /// The task's deadline: each run's own limit is cut to the time it leaves.
    pub deadline: Deadline,
}

/// How the first worker run of a resumed task goes on from the runs before.
#[derive(Debug, Clone)]
pub struct Continuation {
    /// The agent session to continue (codex thread, claude session), if any.
    pub session: Option<String>,
    /// The history in words, put before the prompt when the worker starts afresh.
    pub history: String,
    /// The user's follow-up message (SPEC §23), put before the first prompt either way.
    pub message: Option<String>,
}

/// The sandbox on the engine `backend::open` chose; see the module documentation.
pub struct ContainerSandbox {
    spec: ContainerSpec,
    backend: Arc<dyn Backend>,
    transport: Box<dyn Transport>,
    /// The transport is the copy (`backend::copy`): nothing of this machine may be
    /// mounted, so the carrier is the lifeline.
    copies: bool,
    logs: Dir,
    redactor: Redactor,
    deadline: Deadline,
    container: Option<Container>,
    /// The link to the container, from just before it starts to just after it ends.
    carrier: Option<Box<dyn Carrier>>,
    /// The agent's files as the container started with them.
    agent: Option<AgentFiles>,
    /// The pinning of the agent's files while it runs beside the first calls that
    /// run nothing of the repository's or the worker's (the test program's probe).
    pinning: Option<JoinHandle<Pinned>>,
    /// The program whose probe runs beside the container's start (the test's,
    /// when no setup runs before it: setup may install it).
    probe_beside: Option<String>,
    /// The snapshot before the next worker run, taken at the end of the last exec
    /// (a test run); dropped by any other exec.
    next_before: Option<Report>,
    /// A worker run has started in this container.
    ran_worker: bool,
    /// The egress proxy, while the container runs (network allowlist).
    egress: Option<Egress>,
    /// What the proxy did, once it has stopped.
    egress_done: Option<egress::Summary>,
    sweep: Option<JoinHandle<()>>,
    /// A run started whose repository has not been swept since.
    unswept: bool,
    events: Events,
    /// For the next worker run: go on from the runs before (a resumed task).
    continuation: Option<Continuation>,
    /// Why the caches' volumes could not be named: the start fails with it.
    caches_error: Option<String>,
    /// For the note (`Teardown::notices`).
    notices: Vec<String>,
}

impl ContainerSandbox {
    /// Prepares the sandbox. No container starts until the first run; the sweep of
    /// orphaned containers starts now, in the background.
    pub fn new(config: SandboxConfig) -> Self {
        ContainerSandbox::on(crate::backend::open(), config)
    }

    /// `new` on `backend`.
    pub(crate) fn on(backend: Arc<dyn Backend>, config: SandboxConfig) -> Self {
        let sweeper = backend.clone();
        let sweep = std::thread::Builder::new()
            .name("sweep".into())
            .spawn(move || {
                agent_runner_core::process::priority::background();
                for name in sweeper.sweep_orphans() {
                    log::info!("removed container {name}: its agent-runner is gone");
                }
            })
            .ok();
        let transport = transport(&backend, &config);
        let copies = transport.1;
        // An engine whose sandboxes keep nothing of ours keeps no session either,
        // unless it keeps one of its own (a cluster's claim): else a resumed task
        // starts the agent afresh with its history (SPEC §25).
        let keeps_session =
            config.session_dir.is_some() && (!backend.files_by_exec() || backend.keeps_sessions());
        let transport = transport.0;
        let (caches, caches_error) =
            match super::caches::volumes(&config.repo, &config.worker.caches) {
                Ok(caches) => (caches, None),
                Err(e) => (Vec::new(), Some(e.to_string())),
            };
        ContainerSandbox {
            caches_error,
            spec: ContainerSpec {
                caches,
                task_id: config.task_id,
                worker: config.worker,
                login: config.login,
                interrupt: config.interrupt,
                keeps_session,
                tools: None,
                tools_error: None,
                image_id: None,
            },
            backend,
            transport,
            copies,
            logs: config.logs,
            redactor: config.redactor,
            deadline: config.deadline,
            container: None,
            carrier: None,
            agent: None,
            pinning: None,
            probe_beside: None,
            next_before: None,
            ran_worker: false,
            egress: None,
            egress_done: None,
            sweep,
            unswept: false,
            events: config.events,
            continuation: None,
            notices: Vec::new(),
        }
    }

    /// Makes the next worker run go on from the runs before: it continues the
    /// worker's session when it can, else starts afresh with the history before
    /// its prompt.
    pub fn continue_from(&mut self, continuation: Continuation) {
        self.continuation = Some(continuation);
    }

    /// Keeps the caches of `repo` instead of the task's repository's (a pipeline
    /// attempt in a clone shares its workspace's). Before the sandbox starts.
    pub fn caches_of(&mut self, repo: &std::path::Path) {
        match super::caches::volumes(repo, &self.spec.worker.caches) {
            Ok(caches) => (self.spec.caches, self.caches_error) = (caches, None),
            Err(e) => (self.spec.caches, self.caches_error) = (Vec::new(), Some(e.to_string())),
        }
    }

    /// The task is finished for good (COMPLETE): the worker's session the transport
    /// kept on the sandbox's host is removed.
    pub fn forget_session(&mut self) {
        self.transport.forget_session();
    }

    /// Name of the running container, if started.
    pub fn container_name(&self) -> Option<&str> {
        self.container.as_ref().map(|c| c.name.as_str())
    }

    /// The variables of an exec in the running container (started on first use),
    /// and the keep-alive's pid the envelope must spare; `agent`: the variables of an
    /// agent's run, `file`: a file for the envelope to write (`Container::env`).
    fn exec_base(
        &mut self,
        agent: Option<&[(&'static str, String)]>,
        file: Option<&PrivateFile>,
    ) -> Result<(Vec<Var>, String), SandboxError> {
        self.container()?;
        self.pinned()?;
        self.unswept = true;
        self.next_before = None;
        let container = self
            .container
            .as_ref()
            .ok_or_else(|| SandboxError::Io("the container is not running".into()))?;
        Ok((
            container.env(&self.spec, agent, file),
            container.keep_pid.clone(),
        ))
    }

    /// What a run of the worker's agent is given: the task's settings, run in the
    /// repository, as root when agent-runner is root.
    pub(crate) fn run_spec(&self) -> RunSpec<'_> {
        let worker = &self.spec.worker;
        RunSpec {
            model: worker.model.as_deref(),
            extra_args: &worker.extra_args,
            base_url: worker.base_url.as_deref(),
            workdir: PROJECT_DIR,
            root: agent_runner_core::sys::user_and_group().0 == 0,
            mcp_servers: &worker.mcp_servers,
            settings_path: SETTINGS_PATH,
        }
    }

    /// The worker's agent.
    pub(crate) fn kind(&self) -> &'static dyn agent_runner_settings::agent::Kind {
        self.spec.worker.kind
    }

    /// Sets the time limits of the next runs (a caller with a deadline cuts them).
    pub(crate) fn set_run_limits(&mut self, max_run_time: Duration, idle_timeout: Duration) {
        self.spec.worker.max_run_time = max_run_time;
        self.spec.worker.idle_timeout = idle_timeout;
    }

    /// Runs the worker's agent once with `command` (its `Kind::command`, or
    /// `Kind::resume_command` to continue a session) and `prompt` on stdin. Agent
    /// failures are in the returned record.
    pub(crate) fn run_agent(
        &mut self,
        number: u32,
        prompt: &str,
        command: &[String],
    ) -> Result<WorkerRun, SandboxError> {
        let kind = self.spec.worker.kind;
        let AgentExec {
            before,
            command,
            envelope,
            exec,
        } = self.agent_exec(prompt, command)?;
        let settings = &self.spec.worker;
        let (wall, cut) = self.deadline.cut(settings.max_run_time);
        let limits = Limits {
            wall: Some(wall),
            idle: Some(settings.idle_timeout),
            grace: Duration::from_secs(2),
            interrupt: self.spec.interrupt,
        };
        let (max_run_time, idle_timeout) = (settings.max_run_time, settings.idle_timeout);
        let (agent_started, check) = self.check_beside()?;
        log::debug!("worker run {number}: the agent {} starts", command[0]);
        let reader = envelope.reader().on_agent(agent_started);
        let AgentOutput {
            started,
            finished,
            stopped,
            output_tail,
            stderr,
            output_bytes,
            mut report,
            transcript,
            log_path,
        } = self.agent_output(number, exec, reader, &limits)?;
        let before = match before {
            Some(before) => before,
            None => Report {
                git_before: report.git_before.take(),
                stopped: report.stopped_before,
                ..Report::default()
            },
        };
        report.git_before = before.git_before;
        let settled = self.settle(Mode::Worker, &finished, report, stopped, &stderr);
        let mut report = self.settled_and_checked(settled, check, &finished, number)?;
        report.stopped = merge(before.stopped, report.stopped);
        if let Some(Leftovers { left, .. }) = before.stopped
            && left > 0
        {
            let name = self.started()?.name.clone();
            return Err(SandboxError::NotQuiet { name, left });
        }
        let exit = match finished.ending {
            Ending::TimedOut => Exit::TimedOut(max_run_time),
            Ending::Stalled => Exit::Stalled(idle_timeout),
            Ending::Interrupted => Exit::Interrupted,
            Ending::Exited => finished.code().map_or(Exit::Signal, Exit::Code),
        };
        let (outcome, mut summary) = classify(kind.program(), &transcript, exit, &stderr);
        if cut && finished.ending == Ending::TimedOut {
            summary = format!(
                "Stopped at the task's deadline (runner.budget.max_duration_sec), {} into the run; the worker was stopped.",
                agent_runner_core::timestamp::human(finished.duration)
            );
        }
        let usage = transcript.usage_for(self.spec.worker.model.as_deref());
        Ok(WorkerRun {
            number,
            started,
            finished: Timestamp::now(),
            duration: finished.duration,
            exit_code: finished.code(),
            outcome,
            summary: self.redactor.redact(&summary),
            transcript,
            log_path,
            output_bytes,
            output_tail,
            changes: RepoChanges::from_snapshots(report.git_before, report.git_after, report.diff),
            leftovers: report.stopped,
            privileges: self.sweep_after_run()?,
            usage,
        })
    }

    /// The exec of an agent's run with `prompt` on its stdin (the container started
    /// on first use, the agent's variables and settings file given), and the
    /// snapshot before it, unless the envelope takes it in the run's own exec.
    fn agent_exec(&mut self, prompt: &str, command: &[String]) -> Result<AgentExec, SandboxError> {
        let kind = self.spec.worker.kind;
        let agent_env = kind.run_env(&self.run_spec());
        // The agent's settings that hold what no argv may (a base URL's password).
        let settings = kind.settings_file(&self.run_spec()).map(|s| PrivateFile {
            name: SETTINGS_NAME,
            link: s.link.map(str::to_string),
            contents: s.contents,
        });
        let taken = self.next_before.take();
        let (env, keep_pid) = self.exec_base(Some(&agent_env), settings.as_ref())?;
        // The container's first run takes its snapshot before in its own exec
        // (nothing of the worker's has run yet to block git); a later one without
        // the snapshot the test run took takes it by an exec of its own, which
        // stops what it leaves.
        let before = match taken {
            Some(before) => Some(before),
            None if !self.ran_worker => None,
            None => Some(self.before_run(&keep_pid)?),
        };
        self.ran_worker = true;
        let command = self.checked_agent(command)?;
        let head_before = before.as_ref().map(|before| {
            before
                .git_before
                .as_ref()
                .and_then(Snapshot::head)
                .unwrap_or("")
                .to_string()
        });
        let envelope = Envelope::new();
        let exec = Exec {
            workdir: None,
            env,
            command: Envelope::worker(
                self.spec.shell(),
                &keep_pid,
                head_before.as_deref(),
                &command,
            ),
            stdin: envelope.stdin(prompt.as_bytes()),
            stdin_file: None,
        };
        Ok(AgentExec {
            before,
            command,
            envelope,
            exec,
        })
    }

    /// The agent's run of `exec` under `limits`, its output read through the
    /// envelope's `reader` into the transcript, and into events as it comes.
    fn agent_output(
        &mut self,
        number: u32,
        exec: Exec,
        mut reader: EnvelopeReader,
        limits: &Limits,
    ) -> Result<AgentOutput, SandboxError> {
        let kind = self.spec.worker.kind;
        let mut transcript = Transcript::default();
        let mut stream = kind.stream();
        let mut watch = live::Watch::default();
        let events = self.events.clone();
        let mut on_line = |line: &[u8]| {
            stream.feed(line, &mut transcript);
            watch.after_line(&transcript, &mut |item, text, code| {
                events.worker_item(number, item, text, code)
            });
        };
        let started = Timestamp::now();
        let (capture, log_path) = self.capture(&format!("run-{number}.log"))?;
        let quiet = |line: &[u8]| kind.is_retry_notice(line);
        let mut capture = capture
            .with_filter(&mut reader)
            .with_lines(MAX_EVENT_LINE, &mut on_line)
            .with_quiet_lines(&quiet);
        let (finished, stopped) = self.run_enveloped(exec, limits, &mut capture)?;
        let (output_tail, stderr, output_bytes) =
            (capture.tail(), capture.stderr(), capture.bytes());
        drop(capture);
        let report = reader.report(&self.redactor);
        // The check waits for the agent's start, which can no longer come.
        drop(reader);
        Ok(AgentOutput {
            started,
            finished,
            stopped,
            output_tail,
            stderr,
            output_bytes,
            report,
            transcript,
            log_path,
        })
    }

    /// The run's `settled` report once the agent's `check` beside it has passed:
    /// before anything of the run is taken (SPEC §27), a changed agent fails the
    /// task, and nothing of its run is kept.
    fn settled_and_checked(
        &mut self,
        settled: Result<Report, SandboxError>,
        check: Option<JoinHandle<Result<(), SandboxError>>>,
        finished: &Finished,
        number: u32,
    ) -> Result<Report, SandboxError> {
        let Some(check) = check else {
            return settled;
        };
        let checked = check
            .join()
            .unwrap_or_else(|_| Err(SandboxError::Io("the agent's check failed".into())));
        match checked {
            Err(SandboxError::AgentChanged { agent, detail }) => {
                self.transport.discard();
                // A container that went during the run fails the task as gone:
                // the diff of a dead one says nothing of its agent (under gVisor
                // it names `/bin` replaced); nothing of the run is kept either way.
                if let Err(gone @ SandboxError::ContainerGone { .. }) = settled {
                    return Err(gone);
                }
                Err(SandboxError::AgentChanged {
                    agent,
                    detail: format!(
                        "{detail}; worker run {number}'s output, usage and work are discarded"
                    ),
                })
            }
            // The sandbox's own failure says more (the container gone, say); an
            // interrupted run ends as interrupted (the check's diff was cut too).
            Err(e) if settled.is_ok() && !matches!(finished.ending, Ending::Interrupted) => Err(e),
            _ => settled,
        }
    }

    /// The running container, started on first use; an error at once if it has
    /// died since the last run (its keep-alive ended).
    fn container(&mut self) -> Result<&mut Container, SandboxError> {
        match &mut self.container {
            None => {
                if let Some(e) = &self.caches_error {
                    return Err(SandboxError::Io(e.clone()));
                }
                // Before anything goes to the sandbox's host.
                if let Some(why) = self.gvisor_refusal() {
                    return Err(SandboxError::Refused(why));
                }
                self.tools_volume_beside_the_copy()?;
                self.open_carrier()?;
                let carrier = self
                    .carrier
                    .as_deref_mut()
                    .ok_or_else(|| SandboxError::Io("the carrier is not open".into()))?;
                let probe = self.probe_beside.take();
                let container = Container::start(
                    &*self.backend,
                    &self.spec,
                    &mut *self.transport,
                    carrier,
                    probe.as_deref(),
                )?;
                // Before anything else runs in it (`agent_files.rs`), where the
                // engine lets us read the container from outside: in a thread, joined
                // before the first exec that could change the agent's files
                // (`pinned`).
                if self.backend.reads_from_outside() {
                    let (name, mut spec) = (container.name.clone(), self.spec.clone());
                    // The pinning kept for the ID it started from; else asked.
                    spec.image_id = container.image_id.clone();
                    let pin = move || {
                        let started = std::time::Instant::now();
                        (started, AgentFiles::pin(&name, &spec))
                    };
                    self.pinning = Some(
                        std::thread::Builder::new()
                            .name("pin".into())
                            .spawn(pin)
                            .map_err(|e| SandboxError::Io(format!("cannot pin the agent: {e}")))?,
                    );
                }
                self.container = Some(container);
            }
            Some(container) => {
                if !container.is_alive() {
                    // The carrier's own reason first: it ended a sandbox that broke
                    // the lifeline's protocol.
                    return Err(match self.carrier.as_ref().and_then(|c| c.fault()) {
                        Some(fault) => SandboxError::Io(fault),
                        None => container.gone(),
                    });
                }
            }
        }
        self.started()
    }

    /// The agent's files pinned (the pinning joined), before an exec that could
    /// change them.
    fn pinned(&mut self) -> Result<(), SandboxError> {
        let Some(pinning) = self.pinning.take() else {
            return Ok(());
        };
        let (started, agent) = pinning
            .join()
            .map_err(|_| SandboxError::Io("the agent's pinning failed".into()))?;
        let agent = agent?;
        log::info!(
            "agent {} pinned in {}",
            agent.agent(),
            agent_runner_core::timestamp::human(started.elapsed())
        );
        self.agent = Some(agent);
        Ok(())
    }

    /// The tools volume, mounted in every sandbox (`backend::tools`): had (filled
    /// first on a new host) before the first container starts. Without it the agent
    /// can only come from the image: with `agent_from: tools` that ends the task
    /// here, otherwise the task goes on (and fails at the start if the image has no
    /// agent either, saying why the volume is missing). At the same time, as neither
    /// needs the others (SPEC §27: the start's calls concurrent): where the
    /// container's agent is pinned from outside (`pin`), the image's ID, which that
    /// pinning is kept by; and where the repository is copied to the sandbox's
    /// host, its copy.
    fn tools_volume_beside_the_copy(&mut self) -> Result<(), SandboxError> {
        if self.spec.tools.is_some() || self.spec.tools_error.is_some() {
            return Ok(());
        }
        let backend = self.backend.clone();
        let (image, interrupt) = (self.spec.worker.docker_image.clone(), self.spec.interrupt);
        let (copies, by_id) = (self.copies, backend.reads_from_outside());
        let started = std::time::Instant::now();
        let (had, copied, id) = std::thread::scope(|scope| {
            let looking = scope.spawn(|| backend.tools_volume(interrupt));
            let id = by_id.then(|| scope.spawn(|| backend.image_id(&image, interrupt)));
            let copied = match copies {
                true => self.transport.prepare(&*backend, &image, interrupt, None),
                false => Ok(()),
            };
            let had = looking.join().unwrap_or_else(|_| {
                Err(BackendError::Io(
                    "the tools volume: its thread failed".into(),
                ))
            });
            (had, copied, id.map(|id| id.join().ok().flatten()))
        });
        if let Some(id) = id {
            self.spec.image_id = id;
        }
        self.take_tools(had, started)?;
        copied.map_err(SandboxError::from)
    }

    /// What `tools_volume` does with the backend's answer `had`, asked at `started`.
    fn take_tools(
        &mut self,
        had: Result<Option<String>, BackendError>,
        started: std::time::Instant,
    ) -> Result<(), SandboxError> {
        match had {
            Ok(volume) => {
                log::debug!(
                    "tools volume {volume:?} had in {}",
                    agent_runner_core::timestamp::human(started.elapsed())
                );
                self.spec.tools = volume;
                Ok(())
            }
            Err(BackendError::Interrupted) => Err(SandboxError::Interrupted),
            Err(e) if self.spec.worker.agent_from == AgentFrom::Tools => Err(e.into()),
            Err(e) => {
                log::warn!(
                    "agent-runner's tools volume could not be had ({e}); the agent must come from the image, and without git in it no snapshot is taken"
                );
                self.spec.tools_error = Some(e.to_string());
                Ok(())
            }
        }
    }

    /// The snapshot before a worker run, as an exec of its own that also stops what
    /// it left (`Envelope::before`), so that nothing comes between the agent's check
    /// and its start.
    fn before_run(&mut self, keep_pid: &str) -> Result<Report, SandboxError> {
        let redactor = self.redactor.clone();
        let image = self.spec.worker.docker_image.clone();
        let limits = Limits::wall(STOP_TIMEOUT, self.spec.interrupt);
        let container = self.started()?;
        let mut report = envelope_exec(
            container,
            Envelope::before(container.shell, keep_pid),
            limits,
            &redactor,
        );
        if self.spec.interrupt.is_set() {
            return Err(SandboxError::Interrupted);
        }
        let container = self.started()?;
        if !report.started {
            return Err(container.diagnose(&image, &report.stderr));
        }
        if report.stopped.is_none() {
            // It did not finish (git stuck, say, on a FIFO the worker left): stop
            // what it started before the check.
            let follow_up = stop_work(container, None, &redactor);
            if !follow_up.started {
                return Err(container.diagnose(&image, &follow_up.stderr));
            }
            report.stopped = follow_up.stopped;
        }
        report.stopped = self.quieten(report.stopped)?;
        let container = self.started()?;
        match report.stopped {
            Some(Leftovers { left, .. }) if left > 0 => Err(SandboxError::NotQuiet {
                name: container.name.clone(),
                left,
            }),
            _ => Ok(report),
        }
    }

    /// The agent's check beside the next run (`AgentFiles::check_beside`): the
    /// sender the envelope's reader tells when the agent starts, and the check's
    /// thread, joined once the run has ended. None where nothing is to be checked
    /// beside the run (an engine not read from outside, an agent with nothing of
    /// the image's, or one checked before the run).
    #[allow(clippy::type_complexity)]
    fn check_beside(
        &self,
    ) -> Result<
        (
            std::sync::mpsc::Sender<()>,
            Option<JoinHandle<Result<(), SandboxError>>>,
        ),
        SandboxError,
    > {
        let (sender, started) = std::sync::mpsc::channel();
        let (Some(container), Some(agent)) = (&self.container, &self.agent) else {
            return Ok((sender, None));
        };
        if !self.backend.reads_from_outside() || agent.checked_before() || agent.nothing_to_check()
        {
            return Ok((sender, None));
        }
        let (agent, name, spec) = (agent.clone(), container.name.clone(), self.spec.clone());
        let check = std::thread::Builder::new()
            .name("check".into())
            .spawn(move || {
                // Not niced, unlike the sweep: the run's results wait for it, and
                // under a fork chain's load a niced check starved for minutes.
                let begun = std::time::Instant::now();
                let checked = agent.check_beside(&name, &spec, started);
                log::debug!(
                    "agent {} checked beside its run in {}",
                    agent.agent(),
                    agent_runner_core::timestamp::human(begun.elapsed())
                );
                checked
            })
            .map_err(|e| SandboxError::Io(format!("cannot check the agent: {e}")))?;
        Ok((sender, Some(check)))
    }

    /// `command` as the agent runs it; where the daemon's diff cannot vouch for the
    /// agent's files, once they are found to be the ones the container started with
    /// (`agent_files.rs`), before the run. An engine that cannot be read from
    /// outside has nothing pinned.
    fn checked_agent(&mut self, command: &[String]) -> Result<Vec<String>, SandboxError> {
        if !self.backend.reads_from_outside() {
            return Ok(command.to_vec());
        }
        let image = &self.spec.worker.docker_image;
        let (Some(container), Some(agent)) = (&self.container, &self.agent) else {
            return Err(SandboxError::Io("the container is not running".into()));
        };
        let line = agent.command(command, image)?;
        if !agent.checked_before() {
            return Ok(line);
        }
        let started = std::time::Instant::now();
        agent.check(&container.name, &self.spec)?;
        log::debug!(
            "agent {} checked in {}",
            agent.agent(),
            agent_runner_core::timestamp::human(started.elapsed())
        );
        Ok(line)
    }

    /// Why the sandbox cannot run here under its runtime: gVisor (the task's
    /// runtime, else the engine's default) where PID 1 speaks over its stdio
    /// (`stdio_refusal`). Where the engine cannot say what a runtime runs, its
    /// name alone decides.
    fn gvisor_refusal(&self) -> Option<String> {
        if !self.copies && !self.backend.remote() {
            return None;
        }
        let runtime = self.spec.worker.runtime.as_deref();
        if let Some(why) = runtime.and_then(|r| stdio_refusal(r, &[], false)) {
            return Some(why);
        }
        let (name, programs) = self.backend.resolve_runtime(runtime)?;
        stdio_refusal(&name, &programs, runtime.is_none())
    }

    /// Opens the carrier if it is not, with the files it delivers; with the network
    /// `allowlist`, starts the egress proxy, which the carrier's connections reach.
    /// The carrier is the lifeline (`backend::lifeline`, the helper from the tools
    /// volume) where no host path can be mounted: a remote daemon, or the copy
    /// transport; else the socket and the bridge, which carries egress far faster
    /// than `docker run -i`'s stdio can (bench/lifeline.py).
    fn open_carrier(&mut self) -> Result<(), SandboxError> {
        if self.carrier.is_some() {
            return Ok(());
        }
        if self.copies
            && self.spec.tools.is_none()
            && let Some(why) = copy_refusal(&self.spec.worker, &self.spec.login)
        {
            return Err(SandboxError::Refused(why));
        }
        let egress = self.spec.worker.network == Network::Allowlist;
        // On a remote daemon the lifeline even without egress: the bridge, PID 1
        // otherwise, comes from a host directory such a daemon may not see.
        let remote = self.backend.remote();
        let lifeline = self.spec.tools.is_some() && (self.copies || remote);
        let cannot =
            |e: std::io::Error| SandboxError::Io(format!("cannot start the egress proxy: {e}"));
        let (socket, listener) = match lifeline {
            true => (None, None),
            false => {
                // A host directory is mounted on this machine's daemon only.
                let (socket, listener) =
                    SocketLink::open(egress, !self.copies && !remote).map_err(cannot)?;
                (Some(socket), listener)
            }
        };
        if egress {
            let started = Egress::start(
                listener,
                &self.spec.worker.allow,
                Some(&self.logs),
                self.redactor.clone(),
                egress::Settings {
                    background: (self.spec.worker.kind.background_hosts().iter())
                        .map(|h| h.to_string())
                        .collect(),
                    ..egress::Settings::default()
                },
                self.events.clone(),
            )
            .map_err(cannot)?;
            log::info!(
                "egress proxy started; allowed: {}",
                self.spec.worker.allow.entries().join(", ")
            );
            self.egress = Some(started);
        }
        let mut carrier: Box<dyn Carrier> = match (socket, &self.egress) {
            (Some(socket), _) => Box::new(socket),
            (None, egress) => {
                let left = self.deadline.cut(lifeline::DEFAULT_LIFE).0;
                Box::new(Lifeline::new(
                    egress.as_ref().map(Egress::door),
                    Lifeline::expiry(Some(left)),
                ))
            }
        };
        super::container::deliver_files(&self.spec, &mut *carrier);
        self.carrier = Some(carrier);
        Ok(())
    }

    /// The container, known to be started.
    fn started(&mut self) -> Result<&mut Container, SandboxError> {
        self.container
            .as_mut()
            .ok_or_else(|| SandboxError::Io("the container is not running".into()))
    }

    /// A new log file `name` and a capture writing to it.
    fn capture<'a>(&self, name: &str) -> Result<(Capture<'a>, PathBuf), SandboxError> {
        let path = self.logs.join(name);
        let file = self
            .logs
            .create(name)
            .map_err(|e| SandboxError::Io(format!("cannot write a log: {e}")))?;
        let capture = Capture::in_memory(OUTPUT_TAIL)
            .redacting(&self.redactor)
            .with_log(file, path.clone());
        Ok((capture, path))
    }

    /// A command of the user's (`task.setup`, the test) made ready to run: in a
    /// private file, since it may hold anything (never in an argv), run by the
    /// image's shell by its path (the tools volume's, the envelope's, would run its
    /// own applets for the command's `grep`, `sed`, … instead of the image's).
    /// Returns the exec's variables, the keep-alive's pid and the command.
    fn user_script(
        &mut self,
        name: &'static str,
        contents: &str,
    ) -> Result<(Vec<Var>, String, [String; 2]), SandboxError> {
        let script = PrivateFile {
            name,
            link: None,
            contents: contents.to_string(),
        };
        let (env, keep_pid) = self.exec_base(None, Some(&script))?;
        Ok((env, keep_pid, [IMAGE_SHELL.to_string(), script.path()]))
    }

    /// The limits of a command of the task's (`task.setup`, the test): its own time
    /// limit cut to the task's deadline, and no idle limit (a build or a test may be
    /// quiet for long, unlike an agent).
    fn command_limits(&self, timeout: Duration) -> Limits {
        Limits {
            wall: Some(self.deadline.cut(timeout).0),
            idle: None,
            grace: Duration::from_secs(2),
            interrupt: self.spec.interrupt,
        }
    }

    /// Runs an enveloped command; on a limit or an interrupt, stops the work inside
    /// the container (whose report is returned along).
    fn run_enveloped(
        &mut self,
        exec: Exec,
        limits: &Limits,
        capture: &mut Capture,
    ) -> Result<(Finished, Option<Report>), SandboxError> {
        let ran = self.run_enveloped_as_is(exec, limits, capture);
        ran.map_err(|e| self.carriers_fault_first(e))
    }

    /// The carrier's own reason, when it has one, instead of `e`: a sandbox that
    /// broke the lifeline's protocol was ended by it, and what follows (the
    /// container gone, an exec failed) is only the consequence.
    fn carriers_fault_first(&self, e: SandboxError) -> SandboxError {
        match self.carrier.as_ref().and_then(|c| c.fault()) {
            Some(fault) if !matches!(e, SandboxError::Interrupted) => SandboxError::Io(fault),
            _ => e,
        }
    }

    fn run_enveloped_as_is(
        &mut self,
        exec: Exec,
        limits: &Limits,
        capture: &mut Capture,
    ) -> Result<(Finished, Option<Report>), SandboxError> {
        let redactor = self.redactor.clone();
        let container: &Container = self.container()?;
        let mut stopped = None;
        let redactor = &redactor;
        let mut stop = || {
            // A lost host would hold the stop's exec to its deadline as well.
            if container.lost().is_none() {
                stopped = Some(stop_work(container, None, redactor));
            }
        };
        let finished = container.exec(exec, limits, capture, Stop::Custom(&mut stop))?;
        Ok((finished, stopped))
    }

    /// After an enveloped command: makes sure nothing it started still runs (a
    /// follow-up stop when the envelope could not finish its own), and that the
    /// sandbox is alive and usable. Returns the complete report.
    fn settle(
        &mut self,
        mode: Mode,
        finished: &Finished,
        report: Report,
        stopped: Option<Report>,
        stderr: &str,
    ) -> Result<Report, SandboxError> {
        let settled = self.settle_as_is(mode, finished, report, stopped, stderr);
        settled.map_err(|e| self.carriers_fault_first(e))
    }

    fn settle_as_is(
        &mut self,
        mode: Mode,
        finished: &Finished,
        mut report: Report,
        stopped: Option<Report>,
        stderr: &str,
    ) -> Result<Report, SandboxError> {
        let image = self.spec.worker.docker_image.clone();
        let redactor = self.redactor.clone();
        let container = self.started()?;
        if let Some(name) = &report.missing_command {
            return Err(SandboxError::ImageUnusable {
                image,
                detail: format!("it has no `{name}` on PATH"),
            });
        }
        if !report.started && finished.ending == Ending::Exited {
            // docker could not run the envelope at all: docker's error, not the run's.
            return Err(container.diagnose(&image, stderr));
        }
        let first = stopped.and_then(|s| s.stopped);
        if report.stopped.is_none() && finished.ending != Ending::Interrupted {
            // The envelope did not finish (timed out, killed, or the container went):
            // stop what is left now, and take the snapshot it could not.
            // A host that stopped answering would hold each of those calls to its
            // deadline: it is lost, and the attempt ends now.
            if finished.ending == Ending::TimedOut
                && let Some(lost) = container.lost()
            {
                return Err(lost);
            }
            let head = (mode == Mode::Worker).then(|| {
                report
                    .git_before
                    .as_ref()
                    .and_then(Snapshot::head)
                    .unwrap_or("")
                    .to_string()
            });
            let follow_up = stop_work(container, head.as_deref(), &redactor);
            if !follow_up.started {
                return Err(container.diagnose(&image, &follow_up.stderr));
            }
            report.git_after = follow_up.git_after.or(report.git_after);
            report.diff = follow_up.diff.or(report.diff);
            report.stopped = merge(first, follow_up.stopped);
        } else {
            report.stopped = merge(first, report.stopped);
        }
        if !container.is_alive() {
            return Err(container.gone());
        }
        report.stopped = self.quieten(report.stopped)?;
        let container = self.started()?;
        if let Some(Leftovers { left, .. }) = report.stopped
            && left > 0
        {
            // Something keeps running between runs (and could edit the repo while
            // the tests or Meta look): the sandbox cannot be trusted any more.
            return Err(SandboxError::NotQuiet {
                name: container.name.clone(),
                left,
            });
        }
        Ok(report)
    }

    /// After the envelope's own stop pass, the container's main process kills
    /// whatever is still there (`backend::Carrier::quiet`): nothing of a command
    /// outlives it, even what made the envelope spare it (or outran its pass: a
    /// chain of forks under load). `stopped`, with what the main process found
    /// added; what is left is the main process's word, as it came last.
    fn quieten(&mut self, stopped: Option<Leftovers>) -> Result<Option<Leftovers>, SandboxError> {
        let (Some(container), Some(carrier)) =
            (self.container.as_mut(), self.carrier.as_deref_mut())
        else {
            return Ok(stopped);
        };
        let quiet = match container.quiet(carrier) {
            None => return Ok(stopped),
            Some(quiet) => quiet?,
        };
        if quiet.found > 0 {
            log::warn!(
                "{} process(es) outlived the envelope's stop in container {}; its main process killed them",
                quiet.found,
                container.name
            );
        }
        Ok(Some(match stopped {
            Some(Leftovers { found, .. }) => Leftovers {
                found: found + quiet.found,
                left: quiet.left,
            },
            None => Leftovers {
                found: quiet.found,
                left: quiet.left,
            },
        }))
    }

    /// Runs `task.setup` in the sandbox, with its own hosts allowed and its own
    /// variables, as the tests run (the envelope stops what it leaves).
    fn run_setup(&mut self, setup: &SetupSpec) -> Result<SetupRun, SandboxError> {
        let (mut env, keep_pid, command) = self.user_script("setup-command", &setup.command)?;
        // By name, never on a command line (`task::setup` refuses the names the
        // docker client itself reads).
        for entry in &setup.env {
            env.push(Var::ByName(
                entry.name.clone(),
                entry.value.expose().to_string(),
            ));
        }
        let envelope = Envelope::new();
        let exec = Exec {
            workdir: Some(PROJECT_DIR.to_string()),
            env,
            command: Envelope::test(self.spec.shell(), &keep_pid, &command),
            stdin: envelope.stdin(b""),
            stdin_file: None,
        };
        let limits = self.command_limits(setup.timeout);
        if let Some(egress) = &self.egress {
            egress.allow_also(Some(setup.allow.clone()));
            log::info!("setup may also reach: {}", setup.allow.entries().join(", "));
        }
        let mut reader = envelope.reader();
        let started = Timestamp::now();
        let (capture, log_path) = self.capture("setup.log")?;
        let mut capture = capture.with_filter(&mut reader);
        let ran = self.run_enveloped(exec, &limits, &mut capture);
        // Setup's hosts are setup's only: whatever happened, the list is the task's
        // again before anything else runs.
        let egress = self.egress.as_ref().map(|egress| {
            egress.allow_also(None);
            egress.summary()
        });
        let (finished, stopped) = ran?;
        let (output_tail, stderr) = (capture.tail(), capture.stderr());
        drop(capture);
        self.settle(
            Mode::Test,
            &finished,
            reader.report(&self.redactor),
            stopped,
            &stderr,
        )?;
        self.sweep_after_run()?;
        if let (Some(agent), Some(container)) = (self.agent.as_mut(), self.container.as_ref())
            && self.backend.reads_from_outside()
        {
            agent.after_setup(&container.name, &self.spec)?;
        }
        Ok(SetupRun {
            command: self.redactor.redact(&setup.command),
            started,
            duration: finished.duration,
            exit_code: finished.code(),
            timed_out: finished.ending == Ending::TimedOut,
            interrupted: finished.ending == Ending::Interrupted,
            output_tail,
            log_path,
            allow: setup.allow.entries(),
            egress,
        })
    }

    /// Whether the test command's program (`prepare::program`) is on the
    /// sandbox's PATH; None when it is, or the command does not start with one.
    fn missing_program(&mut self, test: &TestSpec) -> Result<Option<String>, SandboxError> {
        let Some(program) = prepare::program(&test.command) else {
            return Ok(None);
        };
        let image = self.spec.worker.docker_image.clone();
        Ok((!self.has_program(program)?).then(|| prepare::missing(program, &image)))
    }

    /// The first stdio MCP server (SPEC §28) whose command is not in the image nor
    /// the tools volume: why the task cannot start.
    fn missing_mcp_command(&mut self) -> Result<Option<String>, SandboxError> {
        let commands: Vec<(String, String)> = self
            .spec
            .worker
            .mcp_servers
            .iter()
            .filter_map(|server| match &server.transport {
                agent_runner_settings::agent::McpTransport::Stdio { command, .. } => {
                    Some((server.name.clone(), command.clone()))
                }
                agent_runner_settings::agent::McpTransport::Remote { .. } => None,
            })
            .collect();
        for (name, command) in commands {
            if !self.has_program(&command)? {
                return Ok(Some(prepare::missing_mcp(
                    &name,
                    &command,
                    &self.spec.worker.docker_image,
                )));
            }
        }
        Ok(None)
    }

    /// Whether `program` is a program (or builtin) of the sandbox's shell: on its
    /// PATH, or an absolute path to one.
    fn has_program(&mut self, program: &str) -> Result<bool, SandboxError> {
        // Beside the pinning: the image's shell looks the program up, nothing of the
        // repository's or the worker's runs.
        self.container()?;
        // Found by the main process as it started?
        if self.started()?.found.as_deref() == Some(program) {
            log::debug!("`{program}` found by the sandbox's main process as it started");
            return Ok(true);
        }
        self.next_before = None;
        self.unswept = true;
        // Probed already beside the container's start (`prepare`)?
        let probed = self
            .started()?
            .probed
            .take()
            .filter(|probed| probed.program == program);
        let (finished, said, stderr) = match probed {
            Some(probed) => (probed.finished?, probed.said, probed.stderr),
            None => {
                let exec = self
                    .container
                    .as_ref()
                    .map(|c| c.program_probe(&self.spec, program))
                    .ok_or_else(|| SandboxError::Io("the container is not running".into()))?;
                let limits = Limits::wall(STOP_TIMEOUT, self.spec.interrupt);
                let mut capture = Capture::in_memory(4096);
                let finished =
                    self.started()?
                        .exec(exec, &limits, &mut capture, Stop::Terminate)?;
                (finished, capture.tail(), capture.stderr())
            }
        };
        if finished.ending == Ending::Interrupted {
            return Err(SandboxError::Interrupted);
        }
        let image = self.spec.worker.docker_image.clone();
        if said.contains(prepare::FOUND) {
            Ok(true)
        } else if said.contains(prepare::MISSING) {
            Ok(false)
        } else {
            // /bin/sh did not run the script: the engine's words.
            Err(self.started()?.diagnose(&image, &stderr))
        }
    }

    /// The transport's check of what a run wrote (for the bind mount: setuid/setgid
    /// bits and device nodes removed from the repository). As root (when a setuid
    /// file would be root's), a part that could not be checked stops the task, since
    /// it could hide one.
    fn sweep_after_run(&mut self) -> Result<Vec<Finding>, SandboxError> {
        self.unswept = false;
        let found = self.transport.after_run();
        let unchecked = found.iter().find(|f| matches!(f.what, Fix::Failed(_)));
        if let (Some(finding), (0, _)) = (unchecked, agent_runner_core::sys::user_and_group()) {
            return Err(SandboxError::Unchecked(finding.to_string()));
        }
        Ok(found)
    }
}

impl Sandbox for ContainerSandbox {
    fn prepare(
        &mut self,
        test: Option<&TestSpec>,
        setup: Option<&SetupSpec>,
    ) -> Result<Prepared, SandboxError> {
        // Setup's secrets never meet what a worker could have written: a cache is
        // written by the workers of earlier tasks (and by this one's, later, in
        // this very container), so a sandbox whose setup has secrets has none.
        if let Some(setup) = setup.filter(|s| !s.env.is_empty())
            && !self.spec.caches.is_empty()
        {
            if self.container.is_some() {
                return Err(SandboxError::Io(
                    "task.setup.env: the sandbox started with runner.worker.caches mounted; setup's secrets are not given to it".into(),
                ));
            }
            log::warn!(
                "runner.worker.caches are not mounted: task.setup.env gives setup secrets ({}), and setup never runs with what a worker could have written",
                setup
                    .env
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            self.spec.caches.clear();
        }
        self.probe_beside = test
            .filter(|_| setup.is_none())
            .and_then(|test| prepare::program(&test.command))
            .map(String::from);
        let started = self.container().map(drop);
        self.probe_beside = None;
        started?;
        let mut prepared = Prepared::default();
        if let Some(setup) = setup {
            let run = self.run_setup(setup)?;
            prepared.failed = prepare::setup_failed(&run);
            prepared.setup = Some(run);
            if prepared.failed.is_some() {
                return Ok(prepared);
            }
        }
        if let Some(test) = test {
            prepared.failed = self.missing_program(test)?;
            if prepared.failed.is_some() {
                return Ok(prepared);
            }
        }
        prepared.failed = self.missing_mcp_command()?;
        Ok(prepared)
    }

    fn run_worker(&mut self, number: u32, prompt: &str) -> Result<WorkerRun, SandboxError> {
        let kind = self.spec.worker.kind;
        let command = kind.command(&self.run_spec());
        let Some(continuation) = self.continuation.take() else {
            return self.run_agent(number, prompt, &command);
        };
        let prompt = &match &continuation.message {
            Some(message) => format!("The user's follow-up message:\n{message}\n\n{prompt}"),
            None => prompt.to_string(),
        };
        let afresh = format!("{}\n\n{prompt}", continuation.history);
        let session = continuation.session.filter(|id| session::is_session_id(id));
        if session.is_some() && !self.spec.keeps_session {
            let notice = format!(
                "The worker's session is not kept where this sandbox runs (a cluster whose entry names no session_storage_class, SPEC §25): worker run {number} started afresh with the history of the runs before in its prompt."
            );
            log::info!("{notice}");
            self.notices.push(notice);
        }
        let Some(session) = session.filter(|_| self.spec.keeps_session) else {
            return self.run_agent(number, &afresh, &command);
        };
        log::info!("worker run {number}: continuing the worker's session {session}");
        let resume = kind.resume_command(&self.run_spec(), &session);
        let run = self.run_agent(number, prompt, &resume)?;
        if session::not_continued(&run) {
            let why = agent_runner_core::text::first_line(&run.summary, 200);
            log::warn!(
                "worker run {number}: the worker's session {session} could not be continued ({why}); it starts afresh with the history in its prompt"
            );
            // Where it went (a volume or claim removed, another host) is not
            // known here; that it happened belongs in the note (SPEC §25).
            self.notices.push(format!(
                "The worker's session could not be continued ({why}): worker run {number} started afresh with the history of the runs before in its prompt."
            ));
            return self.run_agent(number, &afresh, &command);
        }
        Ok(run)
    }

    fn run_test(&mut self, number: u32, test: &TestSpec) -> Result<TestRun, SandboxError> {
        let workdir = if test.cwd.is_empty() {
            PROJECT_DIR.to_string()
        } else {
            format!("{PROJECT_DIR}/{}", test.cwd)
        };
        let (env, keep_pid, command) = self.user_script("test-command", &test.command)?;
        let envelope = Envelope::new();
        // Nothing of the worker's runs between this run and the next worker run
        // (Meta only reads what is reported), so the snapshot before that run is
        // taken here, saving it an exec. (With the bind mount, what the user
        // changes in the working tree meanwhile counts as the worker's.)
        let command = Envelope::test_then_before(self.spec.shell(), &keep_pid, &command);
        let exec = Exec {
            workdir: Some(workdir),
            env,
            command,
            stdin: envelope.stdin(b""),
            stdin_file: None,
        };
        let limits = self.command_limits(test.timeout);
        let mut reader = envelope.reader();
        let started = Timestamp::now();
        let (capture, log_path) = self.capture(&format!("test-{number}.log"))?;
        let mut capture = capture.with_filter(&mut reader);
        let (finished, stopped) = self.run_enveloped(exec, &limits, &mut capture)?;
        let (output_tail, stderr) = (capture.tail(), capture.stderr());
        drop(capture);
        let report = self.settle(
            Mode::Test,
            &finished,
            reader.report(&self.redactor),
            stopped,
            &stderr,
        )?;
        self.next_before = next_before(&finished, &report);
        Ok(TestRun {
            number,
            command: self.redactor.redact(&test.command),
            cwd: test.cwd.clone(),
            started,
            duration: finished.duration,
            exit_code: finished.code(),
            timed_out: finished.ending == Ending::TimedOut,
            interrupted: finished.ending == Ending::Interrupted,
            output_tail,
            log_path,
            leftovers: report.stopped,
            privileges: self.sweep_after_run()?,
        })
    }

    fn shutdown(&mut self) -> Teardown {
        // A pinning still under way is let finish (its result unused) before the
        // container goes: its `docker cp` racing the removal left the container
        // behind (seen once in a task whose first Meta call failed at once).
        if let Some(pinning) = self.pinning.take() {
            let _ = pinning.join();
        }
        // What comes out through the running sandbox comes out first
        // (`backend::exec_copy`).
        if let Some(container) = self.container.as_mut()
            && container.is_alive()
        {
            self.transport.before_removal(container.instance());
        }
        let removed = self.container.take().map(Container::remove);
        let had_container = removed.is_some();
        let removed_in = match removed {
            Some(Err(why)) => {
                self.notices.push(why);
                None
            }
            Some(Ok(took)) => Some(took),
            None => None,
        };
        // After the container: nothing inside can open a connection any more.
        if let Some(egress) = self.egress.take() {
            self.egress_done = Some(egress.stop());
        }
        if let Some(carrier) = self.carrier.take() {
            carrier.close();
        }
        let egress = (self.spec.worker.network == Network::Allowlist)
            .then(|| self.egress_done.clone().unwrap_or_default());
        // With the container gone, no process of the worker's is left to undo it: this
        // last sweep is what guarantees that no setuid file or device node outlives
        // the task, whatever ran in the container (even a replaced shell).
        let privileges = if had_container || self.unswept {
            self.unswept = false;
            self.transport.finish()
        } else {
            Vec::new()
        };
        if let Some(sweep) = self.sweep.take() {
            let _ = sweep.join();
        }
        Teardown {
            removed_in,
            privileges,
            egress,
            work: self.transport.brought_back(),
            notices: std::mem::take(&mut self.notices)
                .into_iter()
                .chain(self.backend.notices())
                .collect(),
        }
    }
}

/// The task's transport on `backend` (`copy::chosen`), and whether it is the copy
/// (which keeps the worker's session in a volume on the daemon's host instead of
/// `session_dir`).
fn transport(backend: &Arc<dyn Backend>, config: &SandboxConfig) -> (Box<dyn Transport>, bool) {
    let task = CopyTask {
        repo: config.repo.clone(),
        private_dir: &config.private_dir,
        task_id: &config.task_id,
        worker: &config.worker,
        interrupt: config.interrupt,
        session: config.session_dir.as_ref().map(|_| config.resumed),
    };
    if backend.files_by_exec() {
        return (Box::new(ExecCopy::new(backend.clone(), task)), true);
    }
    let endpoint = Endpoint::current(Duration::from_secs(10)).ok();
    if crate::backend::copy::chosen(config.worker.transport, endpoint.as_ref())
        == TransportChoice::Bind
    {
        let bind = Bind::new(
            config.repo.clone(),
            config.private_dir.clone(),
            config.session_dir.clone(),
        );
        return (Box::new(bind), false);
    }
    (Box::new(Copy::new(backend.clone(), task)), true)
}

/// The daemon that keeps the worker's session of a task with `worker`'s settings,
/// when it is not this machine's directory but a volume there (the copy transport,
/// SPEC §22): a resumed run must go to that daemon.
pub fn session_host(worker: &WorkerSettings) -> Option<Endpoint> {
    // A target whose sessions pin no daemon (a cluster: SPEC §25) needs none.
    if crate::backend::aimed().is_some_and(|t| !t.pins_sessions()) {
        return None;
    }
    let endpoint = Endpoint::current(Duration::from_secs(10)).ok()?;
    (crate::backend::copy::chosen(worker.transport, Some(&endpoint)) == TransportChoice::Copy)
        .then_some(endpoint)
}

/// What the copy transport cannot carry without the lifeline (no tools volume): the
/// socket carrier mounts the egress proxy's socket and a login file from this
/// machine.
fn copy_refusal(worker: &WorkerSettings, login: &Login) -> Option<String> {
    const WHY: &str = "the copy transport (runner.sandbox.transport: copy, the default for a docker daemon not on this machine's unix socket) mounts nothing of this machine";
    if worker.network == Network::Allowlist {
        return Some(format!(
            "runner.worker.network: allowlist needs the lifeline (the helper of agent-runner's tools volume, which could not be had) or the egress proxy's socket mounted from this machine, and {WHY}; fill the tools volume (`agent-runner hosts prepare` or `agent-runner tools install`), or use network: none or bridge, or runner.sandbox.transport: bind with a daemon that sees this machine's files"
        ));
    }
    if let Login::File { path, .. } = login {
        return Some(format!(
            "the agent's login file {} would be mounted from this machine, and {WHY}; log the agent in with an API key variable instead",
            path.display()
        ));
    }
    None
}

/// Why `runtime` cannot hold a sandbox whose PID 1 speaks to agent-runner over its
/// stdio (the lifeline, or the keep-alive without the bridge's socket: a remote
/// daemon, the copy transport, a cluster): gVisor lets the worker reopen PID 1's
/// pipes through `/proc/1/fd` (it ignores the non-dumpable flag), so the worker
/// could read what comes on them (a login file) or forge PID 1's answers. Only
/// this machine's daemon with the bind transport gives PID 1 a socket instead.
/// `runtime` is the task's (else the engine's default, `default`), gVisor by its
/// name or by what the engine runs for it (`programs`: paths, containerd shims, a
/// RuntimeClass's handler).
fn stdio_refusal(runtime: &str, programs: &[String], default: bool) -> Option<String> {
    let gvisor = |name: &str| {
        let name = name.to_ascii_lowercase();
        name.contains("runsc") || name.contains("gvisor")
    };
    let by_program = programs
        .iter()
        .any(|p| gvisor(p.rsplit('/').next().unwrap_or_default()));
    let which = match default {
        true => format!("the engine's default runtime `{runtime}`"),
        false => format!("`{runtime}`"),
    };
    (gvisor(runtime) || by_program).then(|| {
        format!(
            "runner.sandbox.runtime: {which} (gVisor) runs only on this machine's Docker daemon with the bind transport: elsewhere the sandbox's PID 1 talks to agent-runner over its stdio, which gVisor lets the worker reopen (/proc/1/fd); name another runtime there, or run on this machine's daemon with runner.sandbox.transport: bind"
        )
    })
}

impl Drop for ContainerSandbox {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// An agent's run made ready: its exec and what it needs after.
struct AgentExec {
    /// The snapshot before the run, taken already; None: the run's envelope takes it.
    before: Option<Report>,
    /// The agent's command as it runs.
    command: Vec<String>,
    envelope: Envelope,
    exec: Exec,
}

/// What an agent's run gave, before it is settled.
struct AgentOutput {
    started: Timestamp,
    finished: Finished,
    /// The report of the stop that followed a cut run.
    stopped: Option<Report>,
    output_tail: String,
    stderr: String,
    output_bytes: u64,
    /// The envelope's report, as its reader read it.
    report: Report,
    transcript: Transcript,
    log_path: PathBuf,
}

/// Stops everything in the container but the keep-alive (and, for a worker run,
/// takes the snapshot after it, diffed against `head_before`), as its own exec.
fn stop_work(container: &Container, head_before: Option<&str>, redactor: &Redactor) -> Report {
    let args = Envelope::stop(container.shell, &container.keep_pid, head_before);
    let report = envelope_exec(container, args, Limits::cleanup(STOP_TIMEOUT), redactor);
    if let Some(left) = report.stopped {
        log::info!(
            "stopped the work in container {} ({} processes stopped, {} left)",
            container.name,
            left.found,
            left.left
        );
    }
    report
}

/// An exec of the envelope with `args` (no command of the
/// worker's or the test's): its report, with its stderr.
fn envelope_exec(
    container: &Container,
    args: Vec<String>,
    limits: Limits,
    redactor: &Redactor,
) -> Report {
    let envelope = Envelope::new();
    let mut reader = envelope.reader();
    let exec = Exec {
        command: args,
        stdin: envelope.stdin(b""),
        stdin_file: None,
        ..Exec::default()
    };
    let mut capture = Capture::in_memory(16 * 1024).with_filter(&mut reader);
    let run = container.exec(exec, &limits, &mut capture, Stop::Terminate);
    let stderr = match run {
        Ok(_) => capture.stderr(),
        Err(e) => e.to_string(),
    };
    drop(capture);
    let mut report = reader.report(redactor);
    report.stderr = stderr;
    report
}

/// The snapshot before the next worker run a test run took, when it took it whole:
/// the run ended by itself, the snapshot is complete and nothing git started is
/// left. Otherwise that worker run takes it by an exec of its own.
fn next_before(finished: &Finished, report: &Report) -> Option<Report> {
    let quiet = matches!(report.stopped_before, Some(Leftovers { left: 0, .. }));
    (finished.ending == Ending::Exited && report.git_before.is_some() && quiet).then(|| Report {
        started: true,
        git_before: report.git_before.clone(),
        stopped: report.stopped_before,
        ..Report::default()
    })
}

/// Leftovers of an interrupted envelope plus those of its follow-up stop.
fn merge(first: Option<Leftovers>, second: Option<Leftovers>) -> Option<Leftovers> {
    match (first, second) {
        (Some(a), Some(b)) => Some(Leftovers {
            found: a.found + b.found,
            left: b.left,
        }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    //! The sandbox over a fake backend: what it asks the mechanism for, in which
    //! order, and what it does with the answers. The fake's exec runs a host shell
    //! that answers as the envelope would (never the envelope itself: its sweep of
    //! `/proc` would stop the host's processes). The Docker backend itself is tested
    //! against the real daemon (`crates/cli/tests/sandbox.rs` and the others).

    use std::collections::VecDeque;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::backend::{BackendError, Instance, Mount, Net, Output, Spec, Started};

    #[test]
    fn the_settings_path_kinds_are_told_is_where_the_envelope_writes_it() {
        let file = PrivateFile {
            name: SETTINGS_NAME,
            link: None,
            contents: String::new(),
        };
        assert_eq!(file.path(), SETTINGS_PATH);
    }
    use agent_runner_core::process::{self, HeldWait, Invocation};

    /// What the fake was asked, in order.
    #[derive(Default)]
    struct Log {
        calls: Vec<String>,
        specs: Vec<Spec>,
        execs: Vec<Exec>,
        /// The engine does not confirm a removal.
        removal_left: bool,
    }

    struct Fake {
        log: Arc<Mutex<Log>>,
        /// The answers of the next starts (Ok when none is left).
        starts: Mutex<VecDeque<BackendError>>,
        alive: Arc<AtomicBool>,
        /// What the bridge says after its pid instead of the token it read (a
        /// daemon elsewhere).
        says: Arc<Mutex<Option<String>>>,
    }

    /// Answers as the envelope does: started, some output, nothing left behind.
    const FAKE_ENVELOPE: &str = r#"IFS= read -r n
printf '\036%s started\n\036%s end\n' "$n" "$n"
echo "test output"
printf '\036%s stopped\n0 0\n\036%s end\n' "$n" "$n"
exit 3"#;

    /// A file of a sandbox of `spec` on a daemon of this machine: the host's.
    fn read_mounted(spec: &Spec, path: &str) -> Option<String> {
        spec.mounts.iter().find_map(|m| {
            let rest = path.strip_prefix(&m.target)?;
            std::fs::read_to_string(m.source.join(rest.trim_start_matches('/'))).ok()
        })
    }

    /// The bridge's side of its control socket (`backend::SocketLink`), as a
    /// bridge that found nothing to stop: each request logged as "line quiet".
    /// Execs it refuses (as under gVisor): they go to the fake engine.
    fn answer_on_control(spec: &Spec, log: &Arc<Mutex<Log>>) {
        use std::io::{BufRead, Read, Write};
        let Some(path) = spec
            .main
            .args
            .iter()
            .find_map(|a| a.strip_prefix("control="))
        else {
            return;
        };
        let host = spec.mounts.iter().find_map(|m| {
            let rest = path.strip_prefix(&m.target)?;
            Some(m.source.join(rest.trim_start_matches('/')))
        });
        let stream = std::os::unix::net::UnixStream::connect(host.unwrap()).unwrap();
        let log = log.clone();
        std::thread::spawn(move || {
            let mut answers = stream.try_clone().unwrap();
            let mut reader = std::io::BufReader::new(stream);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end_matches('\n');
                if let Some(len) = line.strip_prefix("exec ") {
                    let mut request = vec![0; len.parse().unwrap()];
                    reader.read_exact(&mut request).unwrap();
                    if answers.write_all(b"agent-runner-exec-refused\n").is_err() {
                        break;
                    }
                    continue;
                }
                log.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .calls
                    .push(format!("line {line}"));
                if answers.write_all(b"agent-runner-quiet 0 0\n").is_err() {
                    break;
                }
            }
        });
    }

    impl Backend for Fake {
        fn start(&self, spec: &Spec) -> Result<Started, BackendError> {
            let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
            log.calls.push("start".into());
            log.specs.push(spec.clone());
            if let Some(e) = self
                .starts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front()
            {
                return Err(e);
            }
            drop(log);
            answer_on_control(spec, &self.log);
            Ok(Started {
                instance: Box::new(FakeInstance {
                    name: spec.name.clone().unwrap(),
                    log: self.log.clone(),
                    alive: self.alive.clone(),
                }),
                // Our helper is PID 1; the image's keep-alive is under an init. The
                // bridge says the locality token it was named, as it reads it.
                ready: match spec
                    .main
                    .args
                    .first()
                    .and_then(|a| a.strip_prefix("token="))
                {
                    Some(file) => {
                        let says = self.says.lock().unwrap_or_else(|e| e.into_inner()).clone();
                        let read = read_mounted(spec, file).unwrap_or("-".into());
                        format!("1 {}\n", says.unwrap_or(read))
                    }
                    None if spec.main.own_init => "1\n".into(),
                    None => "42\n".into(),
                },
                stream: None,
            })
        }

        fn pull(&self, image: &str, _: Interrupt) -> Result<(), BackendError> {
            self.log
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .calls
                .push(format!("pull {image}"));
            Ok(())
        }

        /// A daemon on this machine: `cat` of a mounted file reads the host's.
        fn run_once(&self, spec: &Spec, _: Duration, _: Interrupt) -> Result<Output, BackendError> {
            self.log
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .calls
                .push("run_once".into());
            let stdout = match (spec.main.entrypoint.as_str(), spec.main.args.first()) {
                ("cat", Some(path)) => read_mounted(spec, path),
                _ => None,
            };
            Ok(Output {
                ok: stdout.is_some(),
                code: Some(if stdout.is_some() { 0 } else { 1 }),
                ending: agent_runner_core::process::Ending::Exited,
                stdout: stdout.unwrap_or_default(),
                stderr: String::new(),
            })
        }

        fn sweep_orphans(&self) -> Vec<String> {
            self.log
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .calls
                .push("sweep".into());
            Vec::new()
        }
    }

    struct FakeInstance {
        name: String,
        log: Arc<Mutex<Log>>,
        alive: Arc<AtomicBool>,
    }

    impl Instance for FakeInstance {
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
            // The program's probe: only `make` is there.
            let script = match exec.command.iter().any(|a| a == prepare::FIND_PROGRAM) {
                true if exec.command.last().is_some_and(|p| p == "make") => {
                    "echo agent-runner-found"
                }
                true => "echo agent-runner-missing",
                false => FAKE_ENVELOPE,
            };
            let invocation = Invocation::new("sh")
                .args(["-c", script])
                .stdin(exec.stdin.clone());
            let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
            log.calls.push("exec".into());
            log.execs.push(exec);
            drop(log);
            process::run(&invocation, limits, capture, stop)
                .map_err(|e| BackendError::Io(e.to_string()))
        }

        fn is_alive(&mut self) -> bool {
            self.alive.load(Ordering::SeqCst)
        }

        fn gone(&self) -> BackendError {
            BackendError::Gone {
                name: self.name.clone(),
                detail: "fake: gone".into(),
            }
        }

        fn diagnose(&mut self, _: &str, stderr: &str) -> BackendError {
            BackendError::Failed {
                command: "fake exec".into(),
                detail: stderr.to_string(),
            }
        }

        fn send_line(&mut self, line: &str) -> std::io::Result<()> {
            self.log
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .calls
                .push(format!("line {line}"));
            Ok(())
        }

        fn read_line(&mut self, _: &str, _: Duration, _: Interrupt) -> Result<String, HeldWait> {
            Err(HeldWait::TimedOut)
        }

        fn stderr(&self) -> String {
            String::new()
        }

        fn remove(self: Box<Self>, _: Duration) -> crate::backend::Removal {
            let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
            log.calls.push("remove".into());
            crate::backend::Removal {
                took: Duration::from_millis(1),
                left: log.removal_left,
            }
        }
    }

    struct Setup {
        repo: PathBuf,
        log: Arc<Mutex<Log>>,
        alive: Arc<AtomicBool>,
        says: Arc<Mutex<Option<String>>>,
        sandbox: ContainerSandbox,
    }

    impl Drop for Setup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.repo);
        }
    }

    /// A sandbox over a fake whose starts first fail with `starts`.
    fn setup(starts: Vec<BackendError>) -> Setup {
        let repo = std::env::temp_dir().join(format!(
            "agent-runner-fake-backend-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&repo).unwrap();
        let private = agent_runner_core::private_dir::open(&repo).unwrap();
        let logs = private.subdir("logs").unwrap().subdir("t1").unwrap();
        let task = agent_runner_settings::task::test_task(
            "runner:\n  worker:\n    network: none\n    env: {LIT: plain}\n",
        );
        let log = Arc::new(Mutex::new(Log::default()));
        let alive = Arc::new(AtomicBool::new(true));
        let says = Arc::new(Mutex::new(None));
        let fake = Fake {
            log: log.clone(),
            starts: Mutex::new(starts.into()),
            alive: alive.clone(),
            says: says.clone(),
        };
        let sandbox = ContainerSandbox::on(
            Arc::new(fake),
            SandboxConfig {
                task_id: "t1".into(),
                repo: repo.clone(),
                private_dir: private.path().to_path_buf(),
                logs,
                worker: task.worker,
                login: Login::None,
                redactor: Redactor::default(),
                interrupt: Interrupt::never(),
                events: Events::none(),
                session_dir: None,
                resumed: false,
                deadline: Deadline::none(),
            },
        );
        Setup {
            repo,
            log,
            alive,
            says,
            sandbox,
        }
    }

    fn test_spec() -> TestSpec {
        TestSpec {
            command: "make check".into(),
            cwd: "sub".into(),
            timeout: Duration::from_secs(30),
        }
    }

    fn setuid_file(path: &std::path::Path) {
        std::fs::write(path, "x").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o4755)).unwrap();
    }

    /// The programs probed, in order.
    fn probed(log: &Mutex<Log>) -> Vec<String> {
        let log = log.lock().unwrap_or_else(|e| e.into_inner());
        log.execs
            .iter()
            .filter(|e| e.command.iter().any(|a| a == prepare::FIND_PROGRAM))
            .filter_map(|e| e.command.last().cloned())
            .collect()
    }

    #[test]
    fn the_test_programs_probe_at_the_start_answers_the_preflight_once() {
        let mut found = setup(Vec::new());
        let prepared = found.sandbox.prepare(Some(&test_spec()), None).unwrap();
        assert_eq!(prepared.failed, None);
        assert_eq!(probed(&found.log), ["make"]);

        let mut missing = setup(Vec::new());
        let test = TestSpec {
            command: "no-such-tool -q".into(),
            ..test_spec()
        };
        let prepared = missing.sandbox.prepare(Some(&test), None).unwrap();
        let image = missing.sandbox.spec.worker.docker_image.clone();
        assert_eq!(
            prepared.failed,
            Some(prepare::missing("no-such-tool", &image))
        );
        assert_eq!(probed(&missing.log), ["no-such-tool"]);
    }

    fn calls(log: &Mutex<Log>) -> Vec<String> {
        let calls = log.lock().unwrap_or_else(|e| e.into_inner()).calls.clone();
        // The start-up sweep runs beside the rest, in its own thread.
        calls.into_iter().filter(|c| c != "sweep").collect()
    }

    #[test]
    fn the_sandbox_names_the_tools_parts_its_agent_uses() {
        let mut s = setup(vec![]);
        s.sandbox.spec.tools = Some("agent-runner-tools-x".into());
        s.sandbox.run_test(1, &test_spec()).unwrap();
        let spec = s.log.lock().unwrap_or_else(|e| e.into_inner()).specs[0].clone();
        assert!(spec.mounts.contains(&Mount::volume(
            "agent-runner-tools-x",
            crate::backend::tools::TOOLS_DIR
        )));
        assert_eq!(
            spec.tools_parts,
            Some(vec!["bin".into(), "ready".into(), "codex".into()])
        );
    }

    #[test]
    fn a_run_asks_the_backend_for_the_policys_sandbox_and_everything_goes_at_the_end() {
        let mut s = setup(vec![]);
        setuid_file(&s.repo.join("before-the-run"));
        let run = s.sandbox.run_test(1, &test_spec()).unwrap();
        assert_eq!(run.exit_code, Some(3));
        assert!(run.output_tail.contains("test output"), "{run:?}");
        assert_eq!(run.privileges.len(), 1, "swept after the run: {run:?}");
        assert_eq!(
            s.sandbox
                .container_name()
                .map(|n| n.starts_with("agent-runner-t1-")),
            Some(true)
        );

        let spec = s.log.lock().unwrap_or_else(|e| e.into_inner()).specs[0].clone();
        assert!(spec.held && spec.watchdog, "ends with us, watched");
        assert_eq!(spec.ready.map(|r| r.prefix), Some(crate::backend::READY));
        assert_eq!(spec.network, Net::Isolated);
        assert_eq!(spec.confinement.map(|c| c.keep.len()), Some(7));
        assert!(spec.as_user);
        assert!(
            spec.labels
                .contains(&("agent-runner.task".into(), "t1".into()))
        );
        assert!(
            spec.labels
                .iter()
                .any(|(l, _)| l == "agent-runner.owner-pid")
        );
        assert_eq!(
            spec.mounts[..2],
            [
                Mount::new(&s.repo, PROJECT_DIR, false),
                Mount::new(
                    s.repo.join(".agent-runner"),
                    "/workspace/project/.agent-runner",
                    true
                ),
            ]
        );
        assert_eq!(spec.tmpfs[0].target, super::super::envelope::PRIVATE_DIR);
        assert_eq!(
            (spec.main.entrypoint.as_str(), spec.main.own_init),
            ("/run/agent-runner/egress/bridge", true),
            "the bridge as the keep-alive and PID 1, without egress"
        );
        assert_eq!(
            spec.main.args.last().map(String::as_str),
            Some(".codex/auth.json")
        );

        let exec = s.log.lock().unwrap_or_else(|e| e.into_inner()).execs[0].clone();
        assert_eq!(exec.workdir.as_deref(), Some("/workspace/project/sub"));
        // The user's command goes as a file by name, never on a command line.
        assert!(exec.env.contains(&Var::ByName(
            "AGENT_RUNNER_FILE".into(),
            "make check".into()
        )));
        assert!(
            exec.env
                .contains(&Var::ByName("LIT".into(), "plain".into()))
        );
        assert!(
            !exec.command.iter().any(|a| a.contains("make check")),
            "{:?}",
            exec.command
        );
        assert_eq!(exec.command[..2], ["/bin/sh", "-c"], "the pinned shell");
        assert!(
            exec.command.contains(&"1".to_string()),
            "the keep-alive's pid (PID 1) is spared"
        );

        setuid_file(&s.repo.join("after-the-run"));
        let teardown = s.sandbox.shutdown();
        assert_eq!(teardown.removed_in, Some(Duration::from_millis(1)));
        assert_eq!(teardown.privileges.len(), 1, "the last sweep: {teardown:?}");
        assert_eq!(teardown.egress, None);
        assert_eq!(calls(&s.log), ["start", "exec", "line quiet", "remove"]);
        let again = s.sandbox.shutdown();
        assert_eq!(again.removed_in, None);
        assert_eq!(
            calls(&s.log),
            ["start", "exec", "line quiet", "remove"],
            "removed once"
        );
    }

    #[test]
    fn a_removal_the_engine_does_not_confirm_is_said_not_claimed() {
        let mut s = setup(vec![]);
        s.sandbox.run_test(1, &test_spec()).unwrap();
        let name = s.sandbox.container_name().unwrap().to_string();
        s.log.lock().unwrap_or_else(|e| e.into_inner()).removal_left = true;
        setuid_file(&s.repo.join("after-the-run"));
        let teardown = s.sandbox.shutdown();
        assert_eq!(teardown.removed_in, None, "not said removed");
        assert!(
            teardown.notices.iter().any(|n| n.contains(&format!(
                "The sandbox container {name} was not confirmed removed"
            ))),
            "{teardown:?}"
        );
        assert_eq!(
            teardown.privileges.len(),
            1,
            "swept all the same: {teardown:?}"
        );
    }

    #[test]
    fn gvisor_is_refused_where_pid_1_speaks_over_its_stdio() {
        for runtime in ["runsc", "runsc-kvm", "gVisor"] {
            assert!(
                stdio_refusal(runtime, &[], false)
                    .is_some_and(|why| why.contains(&format!("`{runtime}` (gVisor)"))),
                "{runtime}"
            );
        }
        // Another name for it: known by what the engine runs.
        for programs in [
            &["/usr/bin/runsc"][..],
            &["io.containerd.runsc.v1"],
            &["io.containerd.runc.v2", "/usr/local/bin/runsc"],
            &["gvisor"],
        ] {
            let programs: Vec<String> = programs.iter().map(|p| p.to_string()).collect();
            assert!(
                stdio_refusal("secure", &programs, false).is_some(),
                "{programs:?}"
            );
        }
        // The engine's default, the task naming none.
        assert!(
            stdio_refusal("runsc", &[], true)
                .is_some_and(|why| why.contains("the engine's default runtime `runsc` (gVisor)"))
        );
        for runtime in ["runc", "kata", "crun"] {
            assert_eq!(stdio_refusal(runtime, &[], false), None, "{runtime}");
        }
        assert_eq!(
            stdio_refusal("secure", &["/opt/kata/bin/kata-runtime".to_string()], false),
            None
        );
    }

    #[test]
    fn the_agents_key_reaches_its_runs_by_name_and_the_tests_never() {
        let mut s = setup(vec![]);
        s.sandbox.spec.login = Login::Key {
            var: "CODEX_API_KEY",
            value: agent_runner_core::secret::Secret::new("sk-fake-key".into()),
        };
        s.sandbox.run_worker(1, "do it").unwrap();
        s.sandbox.run_test(1, &test_spec()).unwrap();
        let log = s.log.lock().unwrap_or_else(|e| e.into_inner());
        let key = Var::ByName("CODEX_API_KEY".into(), "sk-fake-key".into());
        // The agent's run (the container's first takes its snapshot before in the
        // same exec), the test.
        assert_eq!(log.execs.len(), 2);
        assert!(log.execs[0].env.contains(&key), "{:?}", log.execs[0].env);
        assert!(!log.execs[1].env.contains(&key), "{:?}", log.execs[1].env);
        let argv = format!(
            "{:?}",
            log.execs.iter().map(|e| &e.command).collect::<Vec<_>>()
        );
        assert!(!argv.contains("sk-fake-key"));
    }

    /// The names in agent-runner's directory of the repository.
    fn private_entries(s: &Setup) -> Vec<String> {
        std::fs::read_dir(s.repo.join(agent_runner_core::private_dir::DIR_NAME))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_bridge_proves_locality_as_it_starts_with_no_container_of_its_own() {
        let mut s = setup(vec![]);
        s.sandbox.run_test(1, &test_spec()).unwrap();
        assert_eq!(calls(&s.log), ["start", "exec", "line quiet"]);
        let log = s.log.lock().unwrap_or_else(|e| e.into_inner());
        let token = log.specs[0].main.args[0].strip_prefix("token=").unwrap();
        assert!(
            token.starts_with("/workspace/project/.agent-runner/locality-")
                && token.ends_with("/token"),
            "{token}"
        );
        drop(log);
        let left = private_entries(&s);
        assert!(left.iter().all(|n| !n.starts_with("locality-")), "{left:?}");
        // Proven once: a second start names no token.
        s.sandbox.shutdown();
        s.sandbox.run_test(2, &test_spec()).unwrap();
        let log = s.log.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            !log.specs[1].main.args[0].starts_with("token="),
            "{:?}",
            log.specs[1].main.args
        );
    }

    #[test]
    fn a_bridge_that_says_another_token_is_refused_before_anything_runs() {
        for said in ["-", "0123456789abcdef0123456789abcdef"] {
            let mut s = setup(vec![]);
            *s.says.lock().unwrap() = Some(said.into());
            let e = s.sandbox.run_test(1, &test_spec()).unwrap_err().to_string();
            assert!(e.contains("refusing to bind-mount the repository"), "{e}");
            assert_eq!(calls(&s.log), ["start", "remove"], "nothing ran in it");
            let left = private_entries(&s);
            assert!(left.iter().all(|n| !n.starts_with("locality-")), "{left:?}");
        }
    }

    #[test]
    fn a_daemon_without_the_bridges_directory_is_refused_by_name() {
        let missing = BackendError::Failed {
            command: "docker run".into(),
            detail: "docker: Error response from daemon: invalid mount config for type \"bind\": bind source path does not exist: /tmp/agent-runner-bridge-x".into(),
        };
        let mut s = setup(vec![missing]);
        let e = s.sandbox.run_test(1, &test_spec()).unwrap_err().to_string();
        assert!(e.contains("refusing to bind-mount the repository"), "{e}");
        assert!(e.contains("bind source path does not exist"), "{e}");
        let left = private_entries(&s);
        assert!(left.iter().all(|n| !n.starts_with("locality-")), "{left:?}");
    }

    #[test]
    fn a_missing_image_is_pulled_and_the_start_tried_once_more() {
        let missing = BackendError::ImageMissing {
            what: crate::backend::DOCKER_IMAGE,
            image: "x".into(),
            detail: "not present locally".into(),
        };
        let mut s = setup(vec![missing]);
        s.sandbox.spec.login = Login::File {
            path: "/h/.codex/auth.json".into(),
            secrets: vec![],
            modes: vec![],
        };
        s.sandbox.run_test(1, &test_spec()).unwrap();
        assert_eq!(
            calls(&s.log),
            [
                "start",
                "pull agent-runner-codex:latest",
                "start",
                "exec",
                "line quiet"
            ]
        );
        let log = s.log.lock().unwrap_or_else(|e| e.into_inner());
        assert_ne!(log.specs[0].name, log.specs[1].name, "a new name each time");
        let login = Mount::new("/h/.codex/auth.json", "/run/agent-runner/auth.json", true);
        for spec in &log.specs {
            let mounted = spec.mounts.iter().filter(|m| **m == login).count();
            assert_eq!(
                mounted, 1,
                "the login file, read-only, once: {:?}",
                spec.mounts
            );
        }
    }

    #[test]
    fn a_container_starts_from_the_image_id_looked_up_and_after_a_pull_from_its_name() {
        let id = format!("sha256:{}", "ab".repeat(32));
        let mut s = setup(vec![]);
        s.sandbox.spec.image_id = Some(id.clone());
        s.sandbox.run_test(1, &test_spec()).unwrap();
        assert_eq!(s.log.lock().unwrap().specs[0].image, id);
        // Gone by the time it starts: pulled by its name, and started by it.
        let missing = BackendError::ImageMissing {
            what: crate::backend::DOCKER_IMAGE,
            image: id.clone(),
            detail: "No such image".into(),
        };
        let mut s = setup(vec![missing]);
        s.sandbox.spec.image_id = Some(id.clone());
        s.sandbox.run_test(1, &test_spec()).unwrap();
        let log = s.log.lock().unwrap();
        let images: Vec<&str> = log.specs.iter().map(|spec| spec.image.as_str()).collect();
        assert_eq!(images, [id.as_str(), "agent-runner-codex:latest"]);
        assert!(
            log.calls
                .contains(&"pull agent-runner-codex:latest".to_string())
        );
    }

    #[test]
    fn a_failed_start_ends_the_run_with_the_backends_words() {
        let failed = BackendError::Failed {
            command: "docker run --name x".into(),
            detail: "no space left on device".into(),
        };
        let mut s = setup(vec![failed]);
        let e = s.sandbox.run_test(1, &test_spec()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`docker run --name x` failed: no space left on device"
        );
        assert_eq!(calls(&s.log), ["start"]);
        assert_eq!(s.sandbox.shutdown().removed_in, None, "nothing to remove");
    }

    #[test]
    fn a_sandbox_that_died_ends_the_next_run_at_once() {
        let mut s = setup(vec![]);
        s.sandbox.run_test(1, &test_spec()).unwrap();
        s.alive.store(false, Ordering::SeqCst);
        let e = s.sandbox.run_test(2, &test_spec()).unwrap_err();
        assert!(
            matches!(&e, SandboxError::ContainerGone { detail, .. } if detail == "fake: gone"),
            "{e}"
        );
        assert_eq!(
            calls(&s.log),
            ["start", "exec", "line quiet"],
            "no exec in a dead sandbox (the first one made quiet by PID 1)"
        );
    }
}
