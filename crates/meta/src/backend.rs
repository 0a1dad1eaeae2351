//! What answers a conversation: an HTTP API (`http`), a script of replies, or
//! codex in the sandbox. A backend retries its own transport faults; what it
//! returns is a reply text, or an error after giving up.

use serde::Serialize;

use super::MetaError;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::usage::Tokens;

/// A chat message sent to the backend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatMessage {
    pub(crate) role: &'static str,
    pub(crate) content: String,
}

/// A reply text, how many requests it took, and the tokens the provider reported
/// for it (None: it reported none).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub(crate) text: String,
    pub(crate) attempts: u32,
    pub(crate) usage: Option<Tokens>,
    /// What the backend itself found wrong with the reply (not the tool call it
    /// was to make): the conversation asks again, as for a reply that does not
    /// parse.
    pub(crate) problem: Option<String>,
}

/// How a backend holds a model to a reply's type, which says how to ask again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A YAML text, as the system prompt shows (the seed's protocol).
    Yaml,
    /// A JSON object the API holds to the reply's JSON Schema.
    Schema,
    /// The input of a tool call whose schema is the reply's.
    Tool,
}

/// A backend that gave up (after its own retries).
#[derive(Debug, Clone, PartialEq)]
pub struct BackendError {
    pub(crate) error: MetaError,
    pub(crate) attempts: u32,
}

/// The reply a conversation expects: its type and JSON Schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyFormat {
    pub(crate) kind: &'static str,
    pub(crate) schema: serde_json::Value,
}

/// Something that answers a conversation with a reply text.
pub trait ChatBackend {
    /// The reply to `messages`, of the type and schema `reply` says (a backend
    /// that can hold the model to the schema does; others ignore it).
    fn complete(
        &mut self,
        messages: &[ChatMessage],
        reply: &ReplyFormat,
    ) -> Result<Completion, BackendError>;

    /// How this backend holds the model to a reply's type.
    fn form(&self) -> Form {
        Form::Yaml
    }

    /// The stop request this backend gives up on; a reply's parse gives up on it too.
    fn interrupt(&self) -> Interrupt {
        Interrupt::never()
    }

    /// The model that answers, which names its price; None when no model runs
    /// (a script of replies costs nothing).
    fn model(&self) -> Option<&str> {
        None
    }
}

impl<B: ChatBackend + ?Sized> ChatBackend for Box<B> {
    fn complete(
        &mut self,
        messages: &[ChatMessage],
        reply: &ReplyFormat,
    ) -> Result<Completion, BackendError> {
        (**self).complete(messages, reply)
    }

    fn form(&self) -> Form {
        (**self).form()
    }

    fn interrupt(&self) -> Interrupt {
        (**self).interrupt()
    }

    fn model(&self) -> Option<&str> {
        (**self).model()
    }
}
