//! The exchange with Meta, for any message type: the runner's three messages
//! (`runner::protocol`), the Task Builder's `build_task_config` and the plan's
//! `decompose` and `plan_patch` all go through it.
//!
//! `conversation::ask` sends a request with its system prompt to a `ChatBackend`
//! (`http`: an HTTP API, one `WireFormat` per API — `openai_chat`: the Chat
//! Completions API — over the one retrying `transport`; `scripted`: replies read
//! from a file; `codex_cli`: one `codex exec --output-schema` per request in the
//! sandbox image),
//! parses the reply into its type (`reply`, whose JSON Schema `schema` helps write),
//! asks again with the problem when it does not check, and keeps the whole exchange
//! as a `MetaCall` (`call`). `messages` holds the JSON Schemas of the runner's three
//! replies and of the pipeline's `judge` (SPEC §23 best of N).

pub mod anthropic_messages;
pub(crate) mod backend;
pub(crate) mod call;
pub mod codex_cli;
pub mod conversation;
pub mod http;
pub mod messages;
pub mod open;
pub mod openai_chat;
pub mod openai_responses;
pub mod reply;
pub mod schema;
pub mod scripted;
pub(crate) mod transport;

pub use backend::{BackendError, ChatBackend, ChatMessage, Completion, Form, ReplyFormat};
pub use call::{MetaCall, MetaError, MetaOutcome, usage_line};
pub use http::HttpMeta;
pub use open::{CodexScratch, OpenError, Opening, open};
