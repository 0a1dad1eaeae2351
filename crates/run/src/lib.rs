//! The runner: the state machine (`runner`) over a task's context (`context`) that
//! asks Meta, runs the worker and the tests until done or a budget is spent; what a
//! resumed run carries over (`resume`), the Task Note (`note`), the result JSON
//! (`result`), and `doctor`'s checks of what a run needs. Knows nothing of the
//! pipeline, which drives it as a child process.

pub mod context;
pub mod doctor;
pub mod note;
pub mod result;
pub mod resume;
pub mod runner;
