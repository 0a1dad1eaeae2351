//! The Worker side: a sandbox (one container per task) in which the worker's agent
//! CLI (`agent_runner_settings::agent`: codex, claude) runs and the task's tests run, and the records
//! those runs leave. What a run does is here (`sandbox.rs` has the flow); how the
//! sandbox is started, reached, fed and removed is the mechanism layer under it
//! (`crate::backend`).

mod agent_cache;
pub(crate) mod agent_files;
pub mod caches;
pub mod container;
pub mod envelope;
pub(crate) mod files;
pub mod git;
pub(crate) mod live;
pub(crate) mod prepare;
pub mod sandbox;
pub mod scratch;
pub(crate) mod session;

use std::path::PathBuf;
use std::time::Duration;

use crate::backend::BackendError;
pub(crate) use crate::backend::PROJECT_DIR;
use crate::backend::privileges::Finding;
use agent_runner_core::timestamp::Timestamp;
use agent_runner_core::usage::Usage;
pub(crate) use agent_runner_settings::agent::{RunOutcome, Transcript};
use agent_runner_settings::task::{SetupSpec, TestSpec};
use envelope::Leftovers;
use git::RepoChanges;
pub use prepare::{
    FIND_PROGRAM, FOUND, MISSING, missing as missing_program, missing_mcp, program as test_program,
    setup_error, setup_failed,
};

/// One worker (agent) run.
#[derive(Debug, Clone)]
pub struct WorkerRun {
    /// 1-based; also the loop number.
    pub number: u32,
    pub started: Timestamp,
    pub finished: Timestamp,
    pub duration: Duration,
    /// Exit status of the agent (through `docker exec`), if it exited.
    pub exit_code: Option<i32>,
    pub outcome: RunOutcome,
    /// The final agent message, or what went wrong.
    pub summary: String,
    pub transcript: Transcript,
    /// Full output (stdout and stderr as they came), secrets masked.
    pub log_path: PathBuf,
    pub output_bytes: u64,
    pub output_tail: String,
    /// What changed in the repository, as git in the container saw it.
    pub changes: RepoChanges,
    /// Processes the run left behind, stopped after it (None: not known, e.g. the
    /// run was interrupted).
    pub leftovers: Option<Leftovers>,
    /// Setuid/setgid files and device nodes found in the repository afterwards.
    pub privileges: Vec<Finding>,
    /// The model and the tokens the worker's event stream reported (SPEC §15).
    pub usage: Usage,
}

/// One run of the task's test command.
#[derive(Debug, Clone)]
pub struct TestRun {
    pub number: u32,
    pub command: String,
    pub cwd: String,
    pub started: Timestamp,
    pub duration: Duration,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub interrupted: bool,
    pub output_tail: String,
    pub log_path: PathBuf,
    /// Processes the test left behind, stopped after it.
    pub leftovers: Option<Leftovers>,
    /// Setuid/setgid files and device nodes found in the repository afterwards.
    pub privileges: Vec<Finding>,
}

impl TestRun {
    /// Exited 0 within its time limit.
    pub fn passed(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.interrupted
    }
}

/// The run of `task.setup` in a new sandbox (SPEC §21).
#[derive(Debug, Clone)]
pub struct SetupRun {
    /// Secrets masked.
    pub command: String,
    pub started: Timestamp,
    pub duration: Duration,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub interrupted: bool,
    pub output_tail: String,
    pub log_path: PathBuf,
    /// `task.setup.allow`, as written.
    pub allow: Vec<String>,
    /// What the egress proxy let through and refused while setup ran; None when
    /// the network is not `allowlist`.
    pub egress: Option<agent_runner_egress::Summary>,
}

impl SetupRun {
    /// Exited 0 within its time limit.
    pub fn passed(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.interrupted
    }
}

/// What was done before the first paid call (`Sandbox::prepare`).
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    pub setup: Option<SetupRun>,
    /// Why the task cannot go on (setup failed, the test's program is missing).
    pub failed: Option<String>,
}

/// What tearing the sandbox down did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Teardown {
    /// How long removing the container took, if there was one.
    pub removed_in: Option<Duration>,
    /// What the last sweep of the repository found, made once the container and
    /// every process in it were gone (so nothing can undo it).
    pub privileges: Vec<Finding>,
    /// What the egress proxy let through and refused; None when the network is
    /// not `allowlist`.
    pub egress: Option<agent_runner_egress::Summary>,
    /// Where the copy transport left the work (SPEC §22); None with the bind mount,
    /// where it is in place.
    pub work: Option<crate::backend::BroughtBack>,
    /// What the note must say of where the sandbox ran (a cluster that does not
    /// enforce egress, accepted; a session that could not be kept there).
    pub notices: Vec<String>,
}

/// The sandbox could not do its job (docker missing, daemon down, image unusable,
/// container gone). Unlike a failed worker run, this ends the task.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SandboxError {
    #[error("docker CLI not found: {0}")]
    DockerMissing(String),
    #[error("docker daemon not reachable: {0}")]
    DaemonUnreachable(String),
    #[error("{what} {image} is not available: {detail}")]
    ImageMissing {
        what: &'static str,
        image: String,
        detail: String,
    },
    #[error("docker image {image} cannot run the worker: {detail}")]
    ImageUnusable { image: String, detail: String },
    #[error("the sandbox container {name} is gone: {detail}")]
    ContainerGone { name: String, detail: String },
    #[error(
        "{left} process(es) the run left behind in container {name} survived SIGKILL; the sandbox is not quiet"
    )]
    NotQuiet { name: String, left: u32 },
    #[error("the agent {agent} changed during the task: {detail}")]
    AgentChanged { agent: String, detail: String },
    #[error("the repository could not be fully checked for setuid files and device nodes: {0}")]
    Unchecked(String),
    #[error("`{command}` failed: {detail}")]
    Docker { command: String, detail: String },
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
    #[error("interrupted")]
    Interrupted,
}

impl From<BackendError> for SandboxError {
    fn from(e: BackendError) -> Self {
        match e {
            BackendError::CliMissing(detail) => SandboxError::DockerMissing(detail),
            BackendError::EngineUnreachable(detail) => SandboxError::DaemonUnreachable(detail),
            BackendError::ImageMissing {
                what,
                image,
                detail,
            } => SandboxError::ImageMissing {
                what,
                image,
                detail,
            },
            BackendError::ImageUnusable { image, detail } => {
                SandboxError::ImageUnusable { image, detail }
            }
            BackendError::Gone { name, detail } => SandboxError::ContainerGone { name, detail },
            BackendError::Failed { command, detail } => SandboxError::Docker { command, detail },
            BackendError::Refused(detail) => SandboxError::Refused(detail),
            BackendError::Io(detail) => SandboxError::Io(detail),
            BackendError::Interrupted => SandboxError::Interrupted,
        }
    }
}

/// Where worker and test commands run. The runner is generic over it so its state
/// machine can be tested with an in-memory fake.
pub trait Sandbox {
    /// Before the first paid call: starts the sandbox, runs `setup` once in it and
    /// looks for `test`'s program (`prepare.rs`). Fakes need none of it.
    fn prepare(
        &mut self,
        _test: Option<&TestSpec>,
        _setup: Option<&SetupSpec>,
    ) -> Result<Prepared, SandboxError> {
        Ok(Prepared::default())
    }
    /// Runs the worker once with `prompt`. Worker failures are in the returned record.
    fn run_worker(&mut self, number: u32, prompt: &str) -> Result<WorkerRun, SandboxError>;
    /// Runs the task's test command.
    fn run_test(&mut self, number: u32, test: &TestSpec) -> Result<TestRun, SandboxError>;
    /// Removes everything the sandbox started; safe to call more than once.
    fn shutdown(&mut self) -> Teardown;
}

/// A borrowed sandbox is a sandbox, so a caller can keep it after the runner is done.
impl<S: Sandbox + ?Sized> Sandbox for &mut S {
    fn prepare(
        &mut self,
        test: Option<&TestSpec>,
        setup: Option<&SetupSpec>,
    ) -> Result<Prepared, SandboxError> {
        (**self).prepare(test, setup)
    }

    fn run_worker(&mut self, number: u32, prompt: &str) -> Result<WorkerRun, SandboxError> {
        (**self).run_worker(number, prompt)
    }

    fn run_test(&mut self, number: u32, test: &TestSpec) -> Result<TestRun, SandboxError> {
        (**self).run_test(number, test)
    }

    fn shutdown(&mut self) -> Teardown {
        (**self).shutdown()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mechanisms_errors_keep_their_words_in_the_sandbox() {
        let two = |a: &str, b: &str| (a.to_string(), b.to_string());
        let (image, detail) = two("img:1", "not present locally");
        let (name, command) = two("c1", "docker run");
        for e in [
            BackendError::CliMissing("no docker".into()),
            BackendError::EngineUnreachable("no answer".into()),
            BackendError::ImageMissing {
                what: crate::backend::DOCKER_IMAGE,
                image: image.clone(),
                detail: detail.clone(),
            },
            BackendError::ImageUnusable {
                image,
                detail: detail.clone(),
            },
            BackendError::Gone {
                name,
                detail: detail.clone(),
            },
            BackendError::Failed { command, detail },
            BackendError::Refused("not here".into()),
            BackendError::Io("disk full".into()),
            BackendError::Interrupted,
        ] {
            assert_eq!(SandboxError::from(e.clone()).to_string(), e.to_string());
        }
    }
}
