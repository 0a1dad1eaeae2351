//! The exchange with Meta, for any message type: the runner's three messages
//! (`runner::protocol`), the Task Builder's `build_task_config` and the plan's
//! `decompose` and `plan_patch` all go through it.
//!
//! `conversation::ask` sends a request with its system prompt to a `ChatBackend`
//! (`openai`: the Chat Completions API; `scripted`: replies read from a file), parses
//! the reply into its type (`reply`), asks again with the problem when it does not
//! check, and keeps the whole exchange as a `MetaCall` (`call`).

pub mod backend;
pub mod call;
pub mod conversation;
pub mod openai;
pub mod reply;
pub mod scripted;

pub use backend::{BackendError, ChatBackend, ChatMessage, Completion};
pub use call::{MetaCall, MetaError, MetaOutcome, usage_line};
pub use conversation::MAX_REASKS;
