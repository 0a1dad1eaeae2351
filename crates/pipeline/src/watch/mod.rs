//! Watching and steering a task's attempts (SPEC §19), for `task logs`, `task stop`
//! and the web view's live log and Stop button.
//!
//! - `log`: the events of a task's current or last attempt, followed as the job
//!   goes from queued to running to recorded; the runner writes them in the
//!   directory it works in (`store::attempt_files` says which), the reader
//!   is `agent_runner_settings::events::reader`.
//! - `follow`: a `log` follower polled until the attempt is recorded, what it
//!   reads told as it comes (`task logs -f`).
//! - `stop`: a queued job removed and settled as a `cancelled` attempt through
//!   `crate::ended`, as the orchestrator settles its own; a running attempt's
//!   runner sent SIGTERM, found through the job's owner file and checked by its
//!   start time; the attempt then records "stopped by the user" (`stop::wait`
//!   waits for that).

pub mod follow;
pub mod log;
pub mod stop;
