//! An agent asked one question at a time in a sandbox without the repository: how
//! Meta's `codex-cli` backend (the `meta` crate) runs codex without knowing the
//! sandbox. The sandbox crate implements `ScratchAgent`; whoever opens Meta hands
//! it the sandbox's `OpenScratch`, so `meta` depends on these settings only.

use std::path::PathBuf;
use std::time::Duration;

use crate::agent::RunOutcome;
use crate::task::{Login, WorkerSettings};
use agent_runner_core::fs::Dir;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_core::usage::Tokens;

/// What a scratch sandbox is made of.
pub struct ScratchConfig {
    /// The container's label and name part.
    pub task_id: String,
    /// The directory the agent works in; created if missing.
    pub dir: PathBuf,
    /// Remove `dir` when done (a directory of our own, not a caller's log).
    pub remove_after: bool,
    /// Where run logs go; default `dir/.agent-runner/logs/<task_id>/`.
    pub logs: Option<Dir>,
    /// The agent's settings (kind, image, network, allow list, limits).
    pub worker: WorkerSettings,
    pub login: Login,
    pub redactor: Redactor,
    pub interrupt: Interrupt,
}

/// One answer: the agent's last message (None when it wrote none) and its run.
#[derive(Debug, Clone)]
pub struct ScratchAnswer {
    pub text: Option<String>,
    pub outcome: RunOutcome,
    /// The tokens the agent reported for the run.
    pub tokens: Option<Tokens>,
    pub duration: Duration,
    /// One line on how the run ended.
    pub summary: String,
    /// The run's output on the host.
    pub log_path: PathBuf,
}

/// Why a question got no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScratchError {
    #[error("interrupted")]
    Interrupted,
    #[error("{0}")]
    Failed(String),
}

/// See the module documentation.
pub trait ScratchAgent {
    /// Runs the agent once with `prompt`, for at most `limit`; its last message,
    /// which `schema` (a JSON Schema) describes and the caller checks.
    fn ask(
        &mut self,
        prompt: &str,
        schema: &serde_json::Value,
        limit: Duration,
    ) -> Result<ScratchAnswer, ScratchError>;
}

/// Opens a scratch sandbox; its container starts with the first question.
pub type OpenScratch = fn(ScratchConfig) -> Result<Box<dyn ScratchAgent>, ScratchError>;
