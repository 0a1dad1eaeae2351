//! The Docker sandbox: one container per task (`container.rs`, under the seccomp
//! profile of `seccomp.rs`), every worker and test run a `docker exec` wrapped in the
//! envelope (`envelope.rs`: git snapshots and leftover processes handled inside the
//! container), the repository swept on the host for privileged leftovers after each
//! run (`privileges.rs`), and the sandbox checked for life after each exec: a dead
//! container, daemon or unusable image ends the task at once instead of looping on
//! paid Meta calls (SPEC §9).
//!
//! A worker run: the snapshot before it (an exec of its own) → the agent's files
//! checked against those pinned when the container started (`agent_files.rs`) → the
//! agent, by its absolute path → the snapshot after → the host-side sweep.
//!
//! With `network: allowlist` the egress proxy (`egress`) starts just before the
//! container and stops just after it.
//!
//! Logs are created through agent-runner's private directory (`private_dir.rs`,
//! through `fs::Dir`), so nothing the worker left in the repo is ever written
//! through.

use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::Duration;

use super::PROJECT_DIR;
use super::agent_files::AgentFiles;
use super::container::{Container, ContainerSpec};
use super::docker_cli::{
    DockerFault, daemon_problem, docker, docker_missing, fault_in, last_lines,
};
use super::envelope::{Envelope, Leftovers, Mode, PrivateFile, Report};
use super::git::{RepoChanges, Snapshot};
use super::live;
use super::privileges::{self, Finding, Fix};
use super::session;
use super::sweep::sweep_orphans;
use super::{Sandbox, SandboxError, Teardown, TestRun, WorkerRun};
use crate::agent::{Exit, RunSpec, Transcript, classify};
use crate::egress::{self, Egress};
use crate::events::Events;
use crate::task::{Login, Network, TestSpec, WorkerSettings};
use agent_runner_core::deadline::Deadline;
use agent_runner_core::fs::Dir;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Ending, Finished, Invocation, Limits, Stop};
use agent_runner_core::secret::Redactor;
use agent_runner_core::timestamp::Timestamp;

/// Bytes of worker/test output kept in memory (the rest is in the log file).
const OUTPUT_TAIL: usize = 64 * 1024;
/// Longest JSONL line handed to the event parser.
const MAX_EVENT_LINE: usize = 2 << 20;
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
}

/// The Docker sandbox; see the module documentation.
pub struct DockerSandbox {
    spec: ContainerSpec,
    logs: Dir,
    redactor: Redactor,
    deadline: Deadline,
    container: Option<Container>,
    /// The agent's files as the container started with them.
    agent: Option<AgentFiles>,
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
            spec: ContainerSpec {
                task_id: config.task_id,
                repo: config.repo,
                private_dir: config.private_dir,
                worker: config.worker,
                login: config.login,
                interrupt: config.interrupt,
                session_dir: config.session_dir,
            },
            logs: config.logs,
            redactor: config.redactor,
            deadline: config.deadline,
            container: None,
            agent: None,
            egress: None,
            egress_done: None,
            sweep,
            unswept: false,
            events: config.events,
            continuation: None,
        }
    }

    /// Makes the next worker run go on from the runs before: it continues the
    /// worker's session when it can, else starts afresh with the history before
    /// its prompt.
    pub fn continue_from(&mut self, continuation: Continuation) {
        self.continuation = Some(continuation);
    }

    /// Name of the running container, if started.
    pub fn container_name(&self) -> Option<&str> {
        self.container.as_ref().map(|c| c.name.as_str())
    }

    /// `docker exec` into the running container (started on first use), and the
    /// keep-alive's pid the envelope must spare; `agent`: the variables of an
    /// agent's run, `file`: a file for the envelope to write (`Container::exec`).
    fn exec_base(
        &mut self,
        workdir: Option<&str>,
        agent: Option<&[(&'static str, String)]>,
        file: Option<&PrivateFile>,
    ) -> Result<(Invocation, String), SandboxError> {
        self.container()?;
        self.unswept = true;
        let container = self
            .container
            .as_ref()
            .ok_or_else(|| SandboxError::Io("the container is not running".into()))?;
        Ok((
            container.exec(&self.spec, workdir, agent, file),
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
        }
    }

    /// The worker's agent.
    pub(crate) fn kind(&self) -> &'static dyn crate::agent::Kind {
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
        let agent_env = kind.run_env(&self.run_spec());
        // The agent's settings that hold what no argv may (a base URL's password).
        let settings = kind.settings_file(&self.run_spec()).map(|s| PrivateFile {
            name: "agent-settings",
            link: Some(s.link.to_string()),
            contents: s.contents,
        });
        let (base, keep_pid) = self.exec_base(None, Some(&agent_env), settings.as_ref())?;
        let before = self.before_run(&keep_pid)?;
        let command = self.checked_agent(command)?;
        let head_before = before
            .git_before
            .as_ref()
            .and_then(Snapshot::head)
            .unwrap_or("")
            .to_string();
        let envelope = Envelope::new();
        let invocation = base
            .args(Envelope::worker(&keep_pid, &head_before, &command))
            .stdin(envelope.stdin(prompt.as_bytes()));
        let settings = &self.spec.worker;
        let (wall, cut) = self.deadline.cut(settings.max_run_time);
        let limits = Limits {
            wall: Some(wall),
            idle: Some(settings.idle_timeout),
            grace: Duration::from_secs(2),
            interrupt: self.spec.interrupt,
        };
        let (max_run_time, idle_timeout) = (settings.max_run_time, settings.idle_timeout);
        let mut reader = envelope.reader();
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
        let mut capture = capture
            .with_filter(&mut reader)
            .with_lines(MAX_EVENT_LINE, &mut on_line);
        let (finished, stopped) = self.run_enveloped(&invocation, &limits, &mut capture)?;
        let (output_tail, stderr, output_bytes) =
            (capture.tail(), capture.stderr(), capture.bytes());
        drop(capture);
        let mut report = reader.report(&self.redactor);
        report.git_before = before.git_before;
        let mut report = self.settle(Mode::Worker, &finished, report, stopped, &stderr)?;
        report.stopped = merge(before.stopped, report.stopped);
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

    /// The running container, started on first use; an error at once if it has
    /// died since the last run (its keep-alive ended).
    fn container(&mut self) -> Result<&mut Container, SandboxError> {
        match &mut self.container {
            None => {
                let egress = self.egress()?.map(|e| e.dir().to_path_buf());
                let container = Container::start(&self.spec, egress.as_deref())?;
                // Before anything else runs in it (`agent_files.rs`).
                let started = std::time::Instant::now();
                let agent = AgentFiles::pin(&container.name, &self.spec);
                self.container = Some(container);
                let agent = agent?;
                log::info!(
                    "agent {} pinned in {}",
                    agent.agent(),
                    agent_runner_core::timestamp::human(started.elapsed())
                );
                self.agent = Some(agent);
            }
            Some(container) => {
                if !container.is_alive() {
                    return Err(gone(container));
                }
            }
        }
        self.started()
    }

    /// The snapshot before a worker run, as an exec of its own that also stops what
    /// it left (`Envelope::before`), so that nothing comes between the agent's check
    /// and its start.
    fn before_run(&mut self, keep_pid: &str) -> Result<Report, SandboxError> {
        let redactor = self.redactor.clone();
        let image = self.spec.worker.docker_image.clone();
        let limits = Limits::wall(STOP_TIMEOUT, self.spec.interrupt);
        let container = self.started()?;
        let mut report = envelope_exec(container, Envelope::before(keep_pid), limits, &redactor);
        if self.spec.interrupt.is_set() {
            return Err(SandboxError::Interrupted);
        }
        let container = self.started()?;
        if !report.started {
            return Err(diagnose(container, &image, &report.stderr));
        }
        if report.stopped.is_none() {
            // It did not finish (git stuck, say, on a FIFO the worker left): stop
            // what it started before the check.
            let follow_up = stop_work(container, None, &redactor);
            if !follow_up.started {
                return Err(diagnose(container, &image, &follow_up.stderr));
            }
            report.stopped = follow_up.stopped;
        }
        match report.stopped {
            Some(Leftovers { left, .. }) if left > 0 => Err(SandboxError::NotQuiet {
                name: container.name.clone(),
                left,
            }),
            _ => Ok(report),
        }
    }

    /// `command` as the agent runs it, once the agent's files are found to be the
    /// ones the container started with (`agent_files.rs`).
    fn checked_agent(&mut self, command: &[String]) -> Result<Vec<String>, SandboxError> {
        let image = &self.spec.worker.docker_image;
        let (Some(container), Some(agent)) = (&self.container, &self.agent) else {
            return Err(SandboxError::Io("the container is not running".into()));
        };
        let line = agent.command(command, image)?;
        let started = std::time::Instant::now();
        agent.check(&container.name, &self.spec)?;
        log::debug!(
            "agent {} checked in {}",
            agent.agent(),
            agent_runner_core::timestamp::human(started.elapsed())
        );
        Ok(line)
    }

    /// The egress proxy, started on first use, when the network is `allowlist`.
    fn egress(&mut self) -> Result<Option<&Egress>, SandboxError> {
        if self.spec.worker.network != Network::Allowlist {
            return Ok(None);
        }
        if self.egress.is_none() {
            let started = Egress::start(
                &self.spec.worker.allow,
                Some(&self.logs),
                self.redactor.clone(),
                egress::Settings::default(),
                self.events.clone(),
            )
            .map_err(|e| SandboxError::Io(format!("cannot start the egress proxy: {e}")))?;
            log::info!(
                "egress proxy started; allowed: {}",
                self.spec.worker.allow.entries().join(", ")
            );
            self.egress = Some(started);
        }
        Ok(self.egress.as_ref())
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

    /// Runs an enveloped command; on a limit or an interrupt, stops the work inside
    /// the container (whose report is returned along).
    fn run_enveloped(
        &mut self,
        invocation: &Invocation,
        limits: &Limits,
        capture: &mut Capture,
    ) -> Result<(Finished, Option<Report>), SandboxError> {
        let redactor = self.redactor.clone();
        let container = self.container()?;
        let mut stopped = None;
        let redactor = &redactor;
        let mut stop = || stopped = Some(stop_work(container, None, redactor));
        let finished = process::run(invocation, limits, capture, Stop::Custom(&mut stop))
            .map_err(docker_missing)?;
        Ok((finished, stopped))
    }

    /// After an enveloped command: makes sure nothing it started still runs (a
    /// follow-up stop when the envelope could not finish its own), and that the
    /// sandbox is alive and usable. Returns the complete report.
    fn settle(
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
            return Err(diagnose(container, &image, stderr));
        }
        let first = stopped.and_then(|s| s.stopped);
        if report.stopped.is_none() && finished.ending != Ending::Interrupted {
            // The envelope did not finish (timed out, killed, or the container went):
            // stop what is left now, and take the snapshot it could not.
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
                return Err(diagnose(container, &image, &follow_up.stderr));
            }
            report.git_after = follow_up.git_after.or(report.git_after);
            report.diff = follow_up.diff.or(report.diff);
            report.stopped = merge(first, follow_up.stopped);
        } else {
            report.stopped = merge(first, report.stopped);
        }
        if !container.is_alive() {
            return Err(gone(container));
        }
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

    /// Removes setuid/setgid bits and device nodes the run left in the repository.
    fn sweep_privileges(&mut self) -> Vec<Finding> {
        self.unswept = false;
        let redirect = super::git_dir::remove_redirect(&self.spec.repo);
        match privileges::sweep(&self.spec.repo) {
            Ok(mut found) => {
                found.extend(redirect);
                for finding in found.iter().take(10) {
                    log::warn!("repository sweep: {finding}");
                }
                if found.len() > 10 {
                    log::warn!("repository sweep: … and {} more", found.len() - 10);
                }
                found
            }
            Err(e) => vec![Finding {
                path: ".".into(),
                what: Fix::Failed(format!("cannot open the repository: {e}")),
            }],
        }
    }

    /// `sweep_privileges` after a run: as root (when a setuid file would be
    /// root's), a part of the repository that could not be checked stops the task,
    /// since it could hide one.
    fn sweep_after_run(&mut self) -> Result<Vec<Finding>, SandboxError> {
        let found = self.sweep_privileges();
        let unchecked = found.iter().find(|f| matches!(f.what, Fix::Failed(_)));
        if let (Some(finding), (0, _)) = (unchecked, agent_runner_core::sys::user_and_group()) {
            return Err(SandboxError::Unchecked(finding.to_string()));
        }
        Ok(found)
    }
}

impl Sandbox for DockerSandbox {
    fn run_worker(&mut self, number: u32, prompt: &str) -> Result<WorkerRun, SandboxError> {
        let kind = self.spec.worker.kind;
        let command = kind.command(&self.run_spec());
        let Some(continuation) = self.continuation.take() else {
            return self.run_agent(number, prompt, &command);
        };
        let afresh = format!("{}\n\n{prompt}", continuation.history);
        let Some(session) = continuation.session.filter(|id| session::is_session_id(id)) else {
            return self.run_agent(number, &afresh, &command);
        };
        log::info!("worker run {number}: continuing the worker's session {session}");
        let resume = kind.resume_command(&self.run_spec(), &session);
        let run = self.run_agent(number, prompt, &resume)?;
        if session::not_continued(&run) {
            log::warn!(
                "worker run {number}: the worker's session {session} could not be continued ({}); it starts afresh with the history in its prompt",
                agent_runner_core::text::first_line(&run.summary, 200)
            );
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
        // The command is the user's and may hold anything: in a file, not an argv.
        let script = PrivateFile {
            name: "test-command",
            link: None,
            contents: test.command.clone(),
        };
        let (base, keep_pid) = self.exec_base(Some(&workdir), None, Some(&script))?;
        let envelope = Envelope::new();
        let command = ["sh".to_string(), script.path()];
        let invocation = base
            .args(Envelope::test(&keep_pid, &command))
            .stdin(envelope.stdin(b""));
        let limits = Limits {
            wall: Some(self.deadline.cut(test.timeout).0),
            idle: None,
            grace: Duration::from_secs(2),
            interrupt: self.spec.interrupt,
        };
        let mut reader = envelope.reader();
        let started = Timestamp::now();
        let (capture, log_path) = self.capture(&format!("test-{number}.log"))?;
        let mut capture = capture.with_filter(&mut reader);
        let (finished, stopped) = self.run_enveloped(&invocation, &limits, &mut capture)?;
        let (output_tail, stderr) = (capture.tail(), capture.stderr());
        drop(capture);
        let report = self.settle(
            Mode::Test,
            &finished,
            reader.report(&self.redactor),
            stopped,
            &stderr,
        )?;
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
        let removed_in = self.container.take().map(Container::remove);
        // After the container: nothing inside can open a connection any more.
        if let Some(egress) = self.egress.take() {
            self.egress_done = Some(egress.stop());
        }
        let egress = (self.spec.worker.network == Network::Allowlist)
            .then(|| self.egress_done.clone().unwrap_or_default());
        // With the container gone, no process of the worker's is left to undo it: this
        // last sweep is what guarantees that no setuid file or device node outlives
        // the task, whatever ran in the container (even a replaced shell).
        let privileges = if removed_in.is_some() || self.unswept {
            self.sweep_privileges()
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
        }
    }
}

impl Drop for DockerSandbox {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Stops everything in the container but the keep-alive (and, for a worker run,
/// takes the snapshot after it, diffed against `head_before`), as its own exec.
fn stop_work(container: &Container, head_before: Option<&str>, redactor: &Redactor) -> Report {
    let args = Envelope::stop(&container.keep_pid, head_before);
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

/// `docker exec -i <container>` of the envelope with `args` (no command of the
/// worker's or the test's): its report, with its stderr.
fn envelope_exec(
    container: &Container,
    args: Vec<String>,
    limits: Limits,
    redactor: &Redactor,
) -> Report {
    let envelope = Envelope::new();
    let mut reader = envelope.reader();
    let invocation = Invocation::new("docker")
        .args(["exec", "-i", container.name.as_str()])
        .args(args)
        .stdin(envelope.stdin(b""));
    let mut capture = Capture::in_memory(16 * 1024).with_filter(&mut reader);
    let run = process::run(&invocation, &limits, &mut capture, Stop::Terminate);
    let stderr = match run {
        Ok(_) => capture.stderr(),
        Err(e) => e.to_string(),
    };
    drop(capture);
    let mut report = reader.report(redactor);
    report.stderr = stderr;
    report
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

/// Whether docker says the container is running (false when it is gone, or when
/// docker cannot say).
fn is_running(name: &str) -> bool {
    docker(
        &["inspect", "--format", "{{.State.Running}}", name],
        Limits::cleanup(Duration::from_secs(30)),
    )
    .is_ok_and(|out| out.ok && out.stdout.trim() == "true")
}

/// Whether the container is gone or going. An exec that fails without a word is
/// often the first sign of a container whose main process just ended, while docker
/// still reports it running for a moment, so this waits a little for it to settle.
fn is_dying(container: &mut Container) -> bool {
    for _ in 0..DYING_CHECKS {
        if !container.is_alive() || !is_running(&container.name) {
            return true;
        }
        std::thread::sleep(DYING_PAUSE);
    }
    false
}

/// How often, and how far apart, `is_dying` looks (about 2 s in all).
const DYING_CHECKS: u32 = 10;
const DYING_PAUSE: Duration = Duration::from_millis(200);

/// The container has gone.
fn gone(container: &Container) -> SandboxError {
    SandboxError::ContainerGone {
        name: container.name.clone(),
        detail: container.last_words(),
    }
}

/// Why an exec failed in docker itself: container gone, daemon down, image unable
/// to run the envelope, or something else docker said.
fn diagnose(container: &mut Container, image: &str, stderr: &str) -> SandboxError {
    match fault_in(stderr) {
        Some(DockerFault::Daemon) => SandboxError::DaemonUnreachable(last_lines(stderr, 2)),
        Some(DockerFault::ContainerGone) => SandboxError::ContainerGone {
            name: container.name.clone(),
            detail: last_lines(stderr, 2),
        },
        Some(DockerFault::CannotExec) => SandboxError::ImageUnusable {
            image: image.to_string(),
            detail: last_lines(stderr, 2),
        },
        _ if is_dying(container) => gone(container),
        _ => match daemon_problem() {
            Some(detail) => SandboxError::DaemonUnreachable(detail),
            None => SandboxError::Docker {
                command: format!("docker exec {}", container.name),
                detail: last_lines(stderr, 3),
            },
        },
    }
}
