//! The Meta agent: plans acceptance criteria, decides each next step, assesses
//! completion. `MetaAgent` speaks the protocol (request YAML, reply checks, re-asks
//! with the parse error, one `MetaCall` record per call) over a `ChatBackend`: the
//! OpenAI Chat Completions API, or a script of replies for offline runs.

pub mod openai;
pub mod protocol;
pub mod scripted;

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::context::TaskContext;
use crate::secret::Redactor;
use crate::text::cut;
use crate::timestamp::{Timestamp, human};
pub use protocol::{Assessment, MessageType, NextAction, Plan};
use protocol::{Reply, parse_reply};

/// Invalid replies are answered by asking again, at most this many times.
pub const MAX_REASKS: u32 = 3;
/// Longest reply text kept in a record or sent back in a re-ask.
const MAX_REPLY_KEPT: usize = 16 * 1024;

/// What the runner asks of Meta. Each call returns its record along with the reply,
/// so a failed call still shows in the Task Note.
pub trait Meta {
    fn plan_task(&mut self, ctx: &TaskContext) -> MetaOutcome<Plan>;
    fn next_action(&mut self, ctx: &TaskContext) -> MetaOutcome<NextAction>;
    fn completion_assessment(&mut self, ctx: &TaskContext) -> MetaOutcome<Assessment>;
}

pub struct MetaOutcome<T> {
    pub call: MetaCall,
    pub reply: Result<T, MetaError>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    #[error("{0}")]
    Failed(String),
    #[error("interrupted")]
    Interrupted,
}

/// One Meta call as it happened, for the Task Note.
#[derive(Debug, Clone)]
pub struct MetaCall {
    pub kind: MessageType,
    pub started: Timestamp,
    pub duration: Duration,
    /// Requests sent (HTTP requests, or script entries used), retries and re-asks included.
    pub attempts: u32,
    /// The request YAML (the user message).
    pub request: String,
    /// Every reply text received, in order; more than one when replies were invalid.
    pub replies: Vec<String>,
    pub error: Option<String>,
}

/// A chat message sent to the backend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatMessage {
    pub role: &'static str,
    pub content: String,
}

/// A reply text and how many requests it took.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub attempts: u32,
}

/// A backend that gave up (after its own retries).
#[derive(Debug, Clone, PartialEq)]
pub struct BackendError {
    pub error: MetaError,
    pub attempts: u32,
}

/// Something that answers a conversation with a reply text.
pub trait ChatBackend {
    fn complete(&mut self, messages: &[ChatMessage]) -> Result<Completion, BackendError>;
}

/// The Meta protocol over a chat backend.
pub struct MetaAgent<B> {
    backend: B,
    system_prompt: Option<String>,
    redactor: Redactor,
}

impl<B: ChatBackend> MetaAgent<B> {
    /// `system_prompt` replaces the default base text; secrets in `redactor` are
    /// masked in everything recorded.
    pub fn new(backend: B, system_prompt: Option<String>, redactor: Redactor) -> Self {
        MetaAgent {
            backend,
            system_prompt,
            redactor,
        }
    }

    fn call<T: Reply>(&mut self, ctx: &TaskContext) -> MetaOutcome<T> {
        let kind = T::KIND;
        let started = Timestamp::now();
        let clock = Instant::now();
        let request = self.redactor.redact(&protocol::request(kind, ctx));
        let mut messages = vec![
            ChatMessage {
                role: "system",
                content: protocol::system_prompt(self.system_prompt.as_deref(), kind),
            },
            ChatMessage {
                role: "user",
                content: request.clone(),
            },
        ];
        let mut call = MetaCall {
            kind,
            started,
            duration: Duration::ZERO,
            attempts: 0,
            request,
            replies: Vec::new(),
            error: None,
        };
        let mut problem = String::new();
        for round in 0..=MAX_REASKS {
            let completion = match self.backend.complete(&messages) {
                Ok(completion) => completion,
                Err(e) => {
                    call.attempts += e.attempts;
                    return self.finish(call, clock, Err(e.error));
                }
            };
            call.attempts += completion.attempts;
            let kept = cut(&self.redactor.redact(&completion.text), MAX_REPLY_KEPT);
            call.replies.push(kept.clone());
            match parse_reply::<T>(&completion.text) {
                Ok(reply) => return self.finish(call, clock, Ok(reply)),
                Err(e) => {
                    problem = e;
                    if round < MAX_REASKS {
                        log::warn!(
                            "meta {}: invalid reply ({problem}); asking again",
                            kind.as_str()
                        );
                        messages.push(ChatMessage {
                            role: "assistant",
                            content: kept,
                        });
                        messages.push(ChatMessage {
                            role: "user",
                            content: format!(
                                "Your reply was invalid: {problem}\nAnswer again with exactly one YAML document of type {}, following the schema, without code fences or prose.",
                                kind.as_str()
                            ),
                        });
                    }
                }
            }
        }
        let start = call
            .replies
            .last()
            .map(|r| cut(r.trim(), 200))
            .unwrap_or_default();
        let error = MetaError::Failed(format!(
            "no valid {} reply after {MAX_REASKS} re-asks: {problem}; the last reply began: {start:?}",
            kind.as_str()
        ));
        self.finish(call, clock, Err(error))
    }

    fn finish<T>(
        &self,
        mut call: MetaCall,
        clock: Instant,
        reply: Result<T, MetaError>,
    ) -> MetaOutcome<T> {
        call.duration = clock.elapsed();
        let plural = if call.attempts == 1 { "" } else { "s" };
        // Masked once here, for the log, the record and the caller alike.
        let reply = reply.map_err(|e| match e {
            MetaError::Failed(m) => MetaError::Failed(self.redactor.redact(&m)),
            other => other,
        });
        match &reply {
            Ok(_) => log::info!(
                "meta {}: {}, {} attempt{plural}",
                call.kind.as_str(),
                human(call.duration),
                call.attempts
            ),
            Err(e) => {
                log::warn!(
                    "meta {} failed after {}, {} attempt{plural}: {e}",
                    call.kind.as_str(),
                    human(call.duration),
                    call.attempts
                );
                call.error = Some(e.to_string());
            }
        }
        MetaOutcome { call, reply }
    }
}

impl<B: ChatBackend> Meta for MetaAgent<B> {
    fn plan_task(&mut self, ctx: &TaskContext) -> MetaOutcome<Plan> {
        self.call(ctx)
    }

    fn next_action(&mut self, ctx: &TaskContext) -> MetaOutcome<NextAction> {
        self.call(ctx)
    }

    fn completion_assessment(&mut self, ctx: &TaskContext) -> MetaOutcome<Assessment> {
        self.call(ctx)
    }
}
