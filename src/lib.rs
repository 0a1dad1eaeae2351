//! agent-runner: drives one software task to completion. Meta (an LLM) plans and
//! judges, the Worker (a coding-agent CLI: Codex or Claude Code) edits code inside
//! a Docker sandbox, the task's tests gate completion, and a Task Note records
//! everything.
#![deny(clippy::print_stdout)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod agent;
pub mod cli;
pub mod context;
pub mod deadline;
pub mod doctor;
pub mod egress;
pub mod error;
pub mod events;
pub mod fs;
pub mod interrupt;
pub mod logging;
pub mod markdown;
pub mod meta;
pub mod note;
pub mod owner;
pub mod pipeline;
pub mod private_dir;
pub mod process;
pub mod result;
pub mod resume;
pub mod runner;
pub mod secret;
pub mod sys;
pub mod task;
pub mod task_lock;
pub mod text;
pub mod timestamp;
pub mod usage;
pub mod worker;
pub mod yaml;
