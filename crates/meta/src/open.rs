//! The one constructor of a Meta backend from resolved settings (`runner.meta`,
//! and the worker's, beside which Meta's codex runs), used by `run`, the Task
//! Builder and plans alike (SPEC §20).

use std::path::PathBuf;
use std::time::Duration;

use super::ChatBackend;
use super::codex_cli::CodexCli;
use super::openai_chat::OpenAiChat;
use super::scripted::Scripted;
use agent_runner_core::deadline::Deadline;
use agent_runner_core::fs::Dir;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_sandbox::task::{MetaBackend, MetaSettings, WorkerSettings};

/// What a backend is opened with besides its settings.
pub struct Opening<'a> {
    pub meta: &'a MetaSettings,
    /// The worker's settings: Meta's codex takes its image, network and login.
    pub worker: &'a WorkerSettings,
    /// Names Meta's codex container.
    pub task_id: &'a str,
    /// Masks every secret in what comes back.
    pub redactor: Redactor,
    pub interrupt: Interrupt,
    /// The task's deadline (SPEC §15).
    pub deadline: Deadline,
    /// Where Meta's codex works.
    pub scratch: CodexScratch,
}

/// Where Meta's codex works: a directory (removed afterwards when `remove_after`),
/// where its run logs go (default: in the directory), and how long all its
/// requests may take together (a plan request's 15 min).
pub struct CodexScratch {
    pub dir: PathBuf,
    pub remove_after: bool,
    pub logs: Option<Dir>,
    pub within: Option<Duration>,
}

/// Why no backend could be opened: the field at fault and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct OpenError {
    pub field: &'static str,
    pub message: String,
}

/// The backend `opening.meta` names.
pub fn open(opening: Opening) -> Result<Box<dyn ChatBackend>, OpenError> {
    let meta = opening.meta;
    match &meta.backend {
        MetaBackend::OpenAiChat { base_url, api_key } => Ok(Box::new(
            OpenAiChat::backend(
                base_url,
                &meta.model,
                meta.temperature,
                api_key.value.clone(),
                meta.timeout,
            )
            .interruptible(opening.interrupt)
            .until(opening.deadline)
            .masking(opening.redactor),
        )),
        MetaBackend::Scripted { script } => match Scripted::load(script) {
            Ok(scripted) => Ok(Box::new(scripted)),
            Err(message) => Err(OpenError {
                field: "runner.meta.script",
                message,
            }),
        },
        MetaBackend::CodexCli(_) => {
            let scratch = opening.scratch;
            let codex = CodexCli::new(
                meta,
                opening.worker,
                opening.task_id,
                scratch.dir,
                scratch.remove_after,
                scratch.logs,
                opening.redactor,
                opening.interrupt,
            )
            .ok_or(OpenError {
                field: "runner.meta.kind",
                message: "not codex-cli".into(),
            })?
            .until(opening.deadline);
            Ok(match scratch.within {
                Some(within) => Box::new(codex.with_deadline(within)),
                None => Box::new(codex),
            })
        }
    }
}
