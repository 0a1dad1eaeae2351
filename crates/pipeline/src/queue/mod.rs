//! Jobs, and what they say about tasks (SPEC §11–§12).
//!
//! `run_request` (the checks `task run` and the web view share; a resume or a
//! follow-up goes on from the latest attempt) and `approval` (`task approve`,
//! `task reject`: jobs that go on from an attempt awaiting approval) write a job into
//! `ipc/queue/` through `jobs` (the job files: enqueue, list, claim by rename, move
//! to `failed/`); a claimed job names its `claimant`. A task's `status` is derived
//! from its lines and its job; `message` bounds every message a user sends; the `board` is every task with its status, kept
//! between looks by `board_cache`; `task_json` is the document other programs read
//! (`task list/show --json`, the web API).

pub mod approval;
pub mod board;
pub(crate) mod board_cache;
pub(crate) mod claimant;
pub mod jobs;
pub mod message;
pub mod run_request;
pub mod status;
pub mod task_json;
