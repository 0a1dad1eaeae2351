//! The Meta agent: plans acceptance criteria, decides each next step, assesses
//! completion. `MetaAgent` speaks the runner's three messages (`protocol`) through
//! one generic exchange (`conversation`: request, reply checks, re-asks, a
//! `MetaCall` record) over a `ChatBackend`: the OpenAI Chat Completions API, or a
//! script of replies for offline runs. Other message types (the pipeline's) use the
//! same exchange.

pub mod backend;
pub mod conversation;
pub mod openai;
pub mod reply;
pub mod scripted;

use std::time::Duration;

use crate::context::TaskContext;
use crate::runner::protocol;
pub use crate::runner::protocol::{Assessment, MessageType, NextAction, Plan};
use crate::secret::Redactor;
use crate::timestamp::Timestamp;
pub use backend::{BackendError, ChatBackend, ChatMessage, Completion};
pub use conversation::MAX_REASKS;

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
    /// The message type (`plan_task`, `next_action`, ...).
    pub kind: &'static str,
    pub started: Timestamp,
    pub duration: Duration,
    /// Requests sent (HTTP requests, or script entries used), retries and re-asks included.
    pub attempts: u32,
    /// The request YAML (the user message), secrets masked.
    pub request: String,
    /// Every reply text received, in order, secrets masked; more than one when
    /// replies were invalid.
    pub replies: Vec<String>,
    pub error: Option<String>,
}

impl MetaCall {
    /// The exchange as plain text for a log file: `header` first, then when, how
    /// long, how many requests, the error, the request and every reply.
    pub fn transcript(&self, header: &str) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(out, "{header}");
        let _ = writeln!(out, "started: {}", self.started);
        let _ = writeln!(out, "duration_ms: {}", self.duration.as_millis());
        let _ = writeln!(out, "requests: {}", self.attempts);
        if let Some(error) = &self.error {
            let _ = writeln!(out, "error: {error}");
        }
        let _ = writeln!(out, "\n--- request ---\n{}", self.request.trim_end());
        for (n, reply) in self.replies.iter().enumerate() {
            let _ = writeln!(out, "\n--- reply {} ---\n{}", n + 1, reply.trim_end());
        }
        out
    }
}

/// The runner's Meta protocol over a chat backend.
pub struct MetaAgent<B> {
    backend: B,
    system_prompt: Option<String>,
    redactor: Redactor,
}

impl<B: ChatBackend> MetaAgent<B> {
    /// `system_prompt` replaces the default base text; secrets in `redactor` are
    /// masked in everything sent and recorded.
    pub fn new(backend: B, system_prompt: Option<String>, redactor: Redactor) -> Self {
        MetaAgent {
            backend,
            system_prompt,
            redactor,
        }
    }

    fn call<T: reply::Reply>(&mut self, kind: MessageType, ctx: &TaskContext) -> MetaOutcome<T> {
        let system = protocol::system_prompt(self.system_prompt.as_deref(), kind);
        let request = protocol::request(kind, ctx);
        conversation::ask(&mut self.backend, system, &request, &self.redactor)
    }
}

impl<B: ChatBackend> Meta for MetaAgent<B> {
    fn plan_task(&mut self, ctx: &TaskContext) -> MetaOutcome<Plan> {
        self.call(MessageType::PlanTask, ctx)
    }

    fn next_action(&mut self, ctx: &TaskContext) -> MetaOutcome<NextAction> {
        self.call(MessageType::NextAction, ctx)
    }

    fn completion_assessment(&mut self, ctx: &TaskContext) -> MetaOutcome<Assessment> {
        self.call(MessageType::CompletionAssessment, ctx)
    }
}
