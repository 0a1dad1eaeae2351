//! The pipeline around the runner (SPEC §11–§14): workspaces, the TaskStore, the IPC
//! queue, the Task Builder, the orchestrator, plans and the web view. Everything here
//! is files under
//! `$AGENT_RUNNER_HOME/workspaces/<id>/`, a contract shared with other programs (an
//! IDE reads and writes the same files), and the runner is driven as a child process
//! (`agent-runner run --json`), exactly as such a program would drive it. The runner
//! never imports this module.

pub mod builder;
pub mod clones;
pub mod error;
pub mod orchestrator;
pub mod plan;
pub mod queue;
pub mod store;
pub mod web;

pub use error::PipelineError;
pub use store::workspace::Workspace;
