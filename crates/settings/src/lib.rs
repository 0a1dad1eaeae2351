//! What a run is told and what it says, before any mechanism: the Task YAML read
//! into the settings everything runs on (`task`), the coding-agent CLIs behind one
//! trait with their event formats (`agent`), a run's event log (`events`), the task
//! states (`task_state`), the egress allow rules and the proxy variables (`allow`), how
//! Meta's codex asks an agent in a sandbox without knowing it (`scratch`), the
//! docker labels on what is ours (`labels`),
//! and `error` for what is wrong with an allow entry or a file the task names. Knows
//! nothing of containers, the proxy, Meta or the runner's state machine; every other
//! crate but `core` reads it.

pub mod agent;
pub mod allow;
pub mod error;
pub mod events;
pub mod labels;
pub mod scratch;
pub mod task;
pub mod task_state;

pub use error::Error;
