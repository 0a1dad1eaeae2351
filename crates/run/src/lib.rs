//! The runner: the state machine (`runner`) over a task's context (`context`) that
//! asks Meta, runs the worker and the tests until done or a budget is spent; a
//! whole run of a task (`task_run`: lock, our directory, resume, checkpoints), what
//! each loop did (`loop_record`), what a resumed run carries over (`resume`), the
//! Task Note (`note`), the result JSON (`result`), `doctor`'s checks of what a run
//! needs, and the crate's `error`. Knows nothing of the pipeline, which drives it
//! as a child process.

pub mod context;
pub mod doctor;
pub mod error;
pub(crate) mod loop_record;
pub mod note;
pub mod result;
pub mod resume;
pub mod runner;
pub mod session_host;
pub mod task_run;

pub use error::Error;
