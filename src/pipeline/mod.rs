//! The pipeline around the runner (SPEC §11–§14): workspaces, the TaskStore, the IPC
//! queue, the Task Builder, the orchestrator, plans and the web view. Everything here
//! is files under
//! `$AGENT_RUNNER_HOME/workspaces/<id>/`, a contract shared with other programs (an
//! IDE reads and writes the same files), and the runner is driven as a child process
//! (`agent-runner run --json`), exactly as such a program would drive it. The runner
//! never imports this module.

pub mod atomic_file;
pub mod attempt;
pub mod attempt_files;
pub mod background;
pub mod board_cache;
pub mod builder;
pub mod bundler;
pub mod child;
pub mod claim;
pub mod cycle;
pub mod defaults;
pub mod error;
pub mod id;
pub mod isolation;
pub mod jsonl;
pub mod leftover;
pub mod new_task;
pub mod orchestrator;
pub mod outcome;
pub mod owner;
pub mod plan;
pub mod presence;
pub mod queue;
pub mod record;
pub mod recovery;
pub mod run_request;
pub mod safe_read;
pub mod spare;
pub mod status;
pub mod store;
pub mod task_config;
pub mod task_json;
pub mod web;
pub mod workspace;

pub use error::PipelineError;
pub use workspace::Workspace;
