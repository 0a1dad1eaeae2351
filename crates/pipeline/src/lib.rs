//! The pipeline around the runner (SPEC §11–§14): workspaces, the TaskStore, the IPC
//! queue, the Task Builder, the orchestrator, plans and the web view. Everything here
//! is files under `$AGENT_RUNNER_HOME/workspaces/<id>/`, a contract shared with other
//! programs (an IDE reads and writes the same files), and the runner is driven as a
//! child process (`agent-runner run --json`), exactly as such a program would drive
//! it. The runner's crate does not depend on this one (nor this one on it).
//!
//! A task goes: `store` (a workspace, its task files: `task new`, a plan) →
//! `queue` (`task run` or the web view's Run button writes a job; a task's status is
//! its lines joined with its job) → `orchestrator` (claim the job, build the
//! TaskConfig with the `builder`, run the runner as a child) → `clones` (an isolated
//! attempt's clone, and its branch brought back through the bundler) → `ended`, the
//! one way an ended attempt goes on, from the orchestrator, its recovery or `task
//! stop`: `deliver` pushes a verified attempt's branch and opens its pull request,
//! the attempt is recorded, a best of N group judged, and `notify` tells webhooks
//! and commands that it ended (SPEC §23). `eval` runs a suite of cases as tasks
//! through the orchestrator and grades them (SPEC §26). `watch` follows an attempt's
//! events and stops it; `plan` edits many tasks at once (Meta decompose and
//! plan_patch) and `web` shows and drives it all. Each folder's `mod.rs` has its own
//! map; each layer uses only those before it (`store` ← `queue` ← `ended` ←
//! `orchestrator`, `clones` ← `watch`; `plan` and `web` on top), which
//! crates/cli/tests/architecture.rs checks (no import circles).

pub(crate) mod builder;
pub(crate) mod clones;
pub mod deliver;
pub(crate) mod ended;
pub(crate) mod error;
pub mod eval;
pub(crate) mod notify;
pub mod orchestrator;
pub mod plan;
pub mod queue;
pub mod store;
pub mod watch;
pub mod web;

pub use error::PipelineError;
pub use store::workspace::Workspace;
