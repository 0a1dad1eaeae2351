//! A run's event log, `.agent-runner/logs/<id>/events.jsonl` (SPEC §19): one JSON
//! line per event, written as it happens, so a person can watch a run while it goes
//! (`task logs -f`, the web view's task page).
//!
//! - `event`: what an event is (`{"at", "kind", ...}`: `state`, `meta`,
//!   `worker_item`, `worker_run`, `test`, `egress_denied`, `budget`, `truncated`).
//! - `named`: the fields that name one of a fixed set, typed, read back as text
//!   when a newer writer names one this version does not know.
//! - `writer`: `Events`, the handle every part of a run writes through (the state
//!   machine, the sandbox's stream of worker items, the egress proxy's deny path):
//!   each line masked, bounded and appended in one `write`; the file bounded too.
//! - `reader`: the one reader of the file: lines from a byte offset (following a
//!   file that grows or is replaced), and each event as a readable line.
//!
//! The file sits in the runner's log directory, which the worker's container sees
//! read-only; it is opened and read only through `fs::Dir`.

pub mod event;
pub mod named;
pub mod reader;
pub mod writer;

pub use event::{CallTokens, Event, ItemKind, Phase, Record};
pub use named::{BudgetLimit, CallType, Dropped, Named};
pub use writer::Events;

/// The file's name in a task's log directory.
pub const FILE: &str = "events.jsonl";
