//! A scratch sandbox: an agent in the sandbox image, in a directory of its own (no
//! repository mounted), answering one request per run with its last message in the
//! shape of a JSON Schema (`Kind::answer_args`: codex's `--output-schema` and
//! `--output-last-message`). The codex-cli Meta provider and the codex Task Builder
//! use it (SPEC §12, §18): it is a `ContainerSandbox`, so the same container, login,
//! network and egress proxy, limits, timeouts (SIGTERM, 5 s, SIGKILL inside the
//! container) and secrets by name as a worker run, and one container for all the
//! requests of its owner.
//!
//! The schema goes in the directory's `.agent-runner/` (read-only in the container);
//! the reply file is removed before each run (a failed run leaves a stale one) and
//! read without following links, as any file the agent could write.

use std::os::unix::fs::DirBuilderExt;
use std::time::Duration;

use super::sandbox::{ContainerSandbox, SandboxConfig};
use super::{PROJECT_DIR, Sandbox, SandboxError, WorkerRun};
use agent_runner_core::fs::Dir;
use agent_runner_settings::agent::RunOutcome;
pub use agent_runner_settings::scratch::ScratchConfig;
use agent_runner_settings::scratch::{ScratchAgent, ScratchAnswer, ScratchError};

/// Where the agent writes its last message, in the directory.
const REPLY_FILE: &str = "last-message.txt";
/// Largest reply read.
const MAX_REPLY: u64 = 1 << 20;

/// An answer: the last message (None when the agent wrote none) and the run.
pub struct Answer {
    pub text: Option<String>,
    pub run: WorkerRun,
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AskError {
    #[error("{0}")]
    Sandbox(#[from] SandboxError),
    #[error("{0}")]
    Setup(String),
}

/// See the module documentation.
pub struct Scratch {
    sandbox: ContainerSandbox,
    dir: Dir,
    private: Dir,
    remove_after: bool,
    runs: u32,
}

impl Scratch {
    /// Prepares the directory; the container starts with the first request.
    pub fn open(config: ScratchConfig) -> Result<Scratch, AskError> {
        let setup = |what: &str, e: std::io::Error| {
            AskError::Setup(format!("cannot {what} {}: {e}", config.dir.display()))
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&config.dir)
            .map_err(|e| setup("create", e))?;
        let dir = Dir::open(&config.dir).map_err(|e| setup("open", e))?;
        let private =
            agent_runner_core::private_dir::open(&config.dir).map_err(|e| setup("prepare", e))?;
        let logs = match config.logs {
            Some(logs) => logs,
            None => private
                .subdir("logs")
                .and_then(|logs| logs.subdir(&config.task_id))
                .map_err(|e| setup("prepare", e))?,
        };
        let sandbox = ContainerSandbox::new(SandboxConfig {
            task_id: config.task_id,
            repo: config.dir.clone(),
            private_dir: private.path().to_path_buf(),
            logs,
            worker: config.worker,
            login: config.login,
            redactor: config.redactor,
            interrupt: config.interrupt,
            // Each request's limit is cut by its caller (`ask`'s `limit`).
            deadline: agent_runner_core::deadline::Deadline::none(),
            // A scratch run is no task's worker: no events, no session kept.
            events: agent_runner_settings::events::Events::none(),
            session_dir: None,
            resumed: false,
        });
        Ok(Scratch {
            sandbox,
            dir,
            private,
            remove_after: config.remove_after,
            runs: 0,
        })
    }

    /// Runs the agent once with `prompt`, for at most `limit` with or without
    /// output; its last message, which `schema` (a JSON Schema) describes. The
    /// agent does not check its reply against the schema: the caller parses it.
    pub fn ask(
        &mut self,
        prompt: &str,
        schema: &serde_json::Value,
        limit: Duration,
    ) -> Result<Answer, AskError> {
        self.runs += 1;
        let number = self.runs;
        let kind = self.sandbox.kind();
        let schema_file = format!("schema-{number}.json");
        let bytes = serde_json::to_vec_pretty(schema)
            .map_err(|e| AskError::Setup(format!("cannot encode the schema: {e}")))?;
        self.private
            .write_atomic(&schema_file, &bytes)
            .map_err(|e| AskError::Setup(format!("cannot write the schema: {e}")))?;
        if let Err(e) = self.dir.remove(REPLY_FILE)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(AskError::Setup(format!(
                "cannot remove the last reply {}: {e}",
                self.dir.join(REPLY_FILE).display()
            )));
        }
        let in_container = |name: &str| format!("{PROJECT_DIR}/{name}");
        let schema_path = in_container(&format!(
            "{}/{schema_file}",
            agent_runner_core::private_dir::DIR_NAME
        ));
        let answer_args = kind
            .answer_args(&schema_path, &in_container(REPLY_FILE))
            .ok_or_else(|| {
                AskError::Setup(format!(
                    "{} cannot answer in the shape of a schema",
                    kind.name()
                ))
            })?;
        self.sandbox.set_run_limits(limit, limit);
        let mut command = kind.command(&self.sandbox.run_spec());
        // Before the prompt argument (`-`) where the kind has one.
        let at = command
            .iter()
            .rposition(|a| a == "-")
            .unwrap_or(command.len());
        command.splice(at..at, answer_args);
        let run = self.sandbox.run_agent(number, prompt, &command)?;
        let text = (run.outcome == RunOutcome::Completed)
            .then(|| self.dir.read(REPLY_FILE, MAX_REPLY).ok())
            .flatten()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
        let _ = self.private.remove(&schema_file);
        Ok(Answer { text, run })
    }

    /// Removes the container (and the directory, if it is ours).
    pub fn shutdown(&mut self) {
        self.sandbox.shutdown();
        if self.remove_after {
            let _ = std::fs::remove_dir_all(self.dir.path());
        }
    }
}

/// The sandbox's `OpenScratch`, for Meta's codex.
pub fn open(config: ScratchConfig) -> Result<Box<dyn ScratchAgent>, ScratchError> {
    match Scratch::open(config) {
        Ok(scratch) => Ok(Box::new(scratch)),
        Err(e) => Err(e.into()),
    }
}

impl ScratchAgent for Scratch {
    fn ask(
        &mut self,
        prompt: &str,
        schema: &serde_json::Value,
        limit: Duration,
    ) -> Result<ScratchAnswer, ScratchError> {
        let Answer { text, run } = Scratch::ask(self, prompt, schema, limit)?;
        Ok(ScratchAnswer {
            text,
            outcome: run.outcome,
            tokens: run.usage.tokens,
            duration: run.duration,
            summary: run.summary,
            log_path: run.log_path,
        })
    }
}

impl From<AskError> for ScratchError {
    fn from(e: AskError) -> ScratchError {
        match e {
            AskError::Sandbox(SandboxError::Interrupted) => ScratchError::Interrupted,
            e => ScratchError::Failed(e.to_string()),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.shutdown();
    }
}
