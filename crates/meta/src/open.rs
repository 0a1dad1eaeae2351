//! The one constructor of a Meta backend from resolved settings (`runner.meta`,
//! and the worker's, beside which Meta's codex runs), used by `run`, the Task
//! Builder and plans alike (SPEC §20).

use std::path::PathBuf;
use std::time::Duration;

use super::ChatBackend;
use super::anthropic_messages::{ANTHROPIC_VERSION, AnthropicMessages};
use super::codex_cli::CodexCli;
use super::http::{HttpMeta, WireFormat};
use super::openai_chat::OpenAiChat;
use super::openai_responses::OpenAiResponses;
use super::scripted::Scripted;
use agent_runner_core::deadline::Deadline;
use agent_runner_core::fs::Dir;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::{Redactor, Secret};
use agent_runner_settings::scratch::OpenScratch;
use agent_runner_settings::task::{
    EffortLevel, MetaApi, MetaBackend, MetaSettings, Wire, WorkerSettings,
};

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
    /// The sandbox it runs in (`sandbox::worker::scratch::open`).
    pub open: OpenScratch,
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

/// The request headers of `api`: its key in the kind's header (a bearer token;
/// Anthropic's `x-api-key` with its version), then `runner.meta.headers`.
fn headers(api: &MetaApi) -> Vec<(String, Secret)> {
    let mut out = Vec::new();
    if let Some(key) = &api.api_key {
        let value = match api.wire {
            Wire::AnthropicMessages => key.value.clone(),
            _ => Secret::new(format!("Bearer {}", key.value.expose())),
        };
        out.push((api.wire.auth_header().to_string(), value));
    }
    if api.wire == Wire::AnthropicMessages {
        out.push((
            "anthropic-version".into(),
            Secret::new(ANTHROPIC_VERSION.into()),
        ));
    }
    out.extend(api.headers.iter().map(|h| (h.name.clone(), h.value())));
    out
}

fn http<W: WireFormat + 'static>(
    format: W,
    api: &MetaApi,
    meta: &MetaSettings,
    headers: Vec<(String, Secret)>,
    opening: Opening,
) -> Box<dyn ChatBackend> {
    Box::new(
        HttpMeta::new(format, &api.base_url, &meta.model, headers, meta.timeout)
            .interruptible(opening.interrupt)
            .until(opening.deadline)
            .masking(opening.redactor),
    )
}

/// The backend `opening.meta` names.
pub fn open(opening: Opening) -> Result<Box<dyn ChatBackend>, OpenError> {
    let meta = opening.meta;
    match &meta.backend {
        MetaBackend::Api(api) => {
            let effort = meta.reasoning_effort.as_ref().map(|e| e.level);
            let model = meta.model.clone();
            let temperature = meta.temperature;
            let headers = headers(api);
            Ok(match api.wire {
                Wire::OpenAiResponses => http(
                    OpenAiResponses {
                        model,
                        temperature,
                        reasoning_effort: effort.map(EffortLevel::as_str),
                    },
                    api,
                    meta,
                    headers,
                    opening,
                ),
                Wire::OpenAiChat => http(
                    OpenAiChat {
                        model,
                        temperature,
                        reasoning_effort: effort.map(EffortLevel::as_str),
                        structured: api.structured,
                    },
                    api,
                    meta,
                    headers,
                    opening,
                ),
                Wire::AnthropicMessages => http(
                    AnthropicMessages {
                        model,
                        temperature,
                        thinking_budget: effort.and_then(EffortLevel::thinking_budget),
                    },
                    api,
                    meta,
                    headers,
                    opening,
                ),
            })
        }
        MetaBackend::Scripted { script } => match Scripted::load(script) {
            Ok(scripted) => Ok(Box::new(scripted)),
            Err(error) => Err(OpenError {
                field: "runner.meta.script",
                message: error.to_string(),
            }),
        },
        MetaBackend::CodexCli(_) => {
            let scratch = opening.scratch;
            let codex = CodexCli::new(
                scratch.open,
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
