//! The worker's side of a run: the coding-agent CLIs behind one trait (`agent`), a
//! run's event log (`events`), egress control (`egress`), the Task YAML read into
//! the settings everything runs on (`task`), the sandbox the agent and the tests run
//! in (`worker`) and the mechanism under it (`backend`: Docker, the repository
//! bind-mounted, the egress link as a socket mount); `error` for what is wrong with
//! an allow entry or a file the task names. Knows nothing of Meta or the runner's
//! state machine.

pub mod agent;
pub mod backend;
pub mod egress;
pub mod error;
pub mod events;
pub mod task;
pub mod task_state;
pub mod worker;

pub use error::Error;
