//! `agent-runner orchestrate` (SPEC §12): the queue of one workspace, worked.
//!
//! `orchestrate` is the loop: `recovery` first (orphaned jobs become failed
//! attempts), a `presence` marker for the web view, then `claim` (the next job
//! whose dependencies allow it) and an `attempt` per job on a thread of its own:
//! where it runs (root_dir, or a clone from `super::clones`), the TaskConfig
//! (`super::builder`, `test_choice` picks the test command, then `task_config`
//! sets what the orchestrator owns), the
//! runner as a `child` process, the branch brought back, a verified one delivered
//! (`super::deliver`), `recording` of the outcome (task file, result, job files)
//! and then `super::notify`, where `store::attempt_files` says an
//! attempt's files are. A try of a best of N run (SPEC §23) skips delivery and
//! notification; the last of its group to be recorded runs the `judgement` (with
//! Meta's `judge` message) and records the judged line, which is delivered and
//! notified. `spend_limit` stops the claiming once the finished attempts
//! reach `--max-tokens` or `--max-cost-usd`. With hosts, `placement` puts each
//! attempt on the healthy host with the most free slots and `host_sweep` removes
//! each host's leftovers at start and after its health re-checks.

pub(crate) mod attempt;
pub(crate) mod child;
pub(crate) mod claim;
pub(crate) mod host_sweep;
pub(crate) mod judge;
pub(crate) mod judgement;
pub mod orchestrate;
pub(crate) mod placement;
pub(crate) mod presence;
pub(crate) mod recording;
pub(crate) mod recovery;
pub mod spend_limit;
pub(crate) mod task_config;
pub(crate) mod test_choice;
