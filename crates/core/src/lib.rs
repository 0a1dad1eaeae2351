//! The leaves of agent-runner, which know nothing of tasks, workers or Meta: the one
//! home for files untrusted code can reach (`fs`), every child process (`process`),
//! host git on repositories of ours (`git`),
//! secrets and their masking, text, time, deadlines and interrupts, usage and prices,
//! the YAML reader, logging, and our private directory in a repository; `error`
//! is their one error type (beside `git::GitError`, what a git command did).

pub mod cache_dir;
pub mod deadline;
pub mod error;
pub mod fs;
pub mod git;
pub mod interrupt;
pub mod logging;
pub mod markdown;
pub mod owner;
pub mod private_dir;
pub mod process;
pub mod secret;
pub mod sys;
pub mod task_lock;
pub mod text;
pub mod timestamp;
pub mod usage;
pub mod yaml;

pub use error::Error;
