//! `agent-runner orchestrate` (SPEC §12): the queue of one workspace, worked.
//!
//! `orchestrate` is the loop (`Orchestrator::new`, a `tick` at a time, `shutdown`):
//! `recovery` first (orphaned jobs become failed attempts), a `presence` marker for
//! the web view, then `claim` (the next job whose dependencies allow it) and an
//! `attempt` per job on a thread of its own: where it runs (root_dir, or a clone
//! from `super::clones`), the TaskConfig (`super::builder`, `test_choice` picks the
//! test command, then `task_config` sets what the orchestrator owns), the runner as
//! a `child` process, the branch brought back. Whatever follows an ended attempt
//! (delivered, recorded, a best of N group judged, notified) is `super::ended`'s,
//! which recovery and `task stop` use too. `spend_limit` stops the claiming once the
//! finished attempts reach `--max-tokens` or `--max-cost-usd`. With hosts,
//! `placement` puts each attempt on the healthy host with the most free slots and
//! `host_sweep` removes each host's leftovers at start and after its health
//! re-checks.

pub(crate) mod attempt;
pub(crate) mod child;
pub(crate) mod claim;
pub(crate) mod host_sweep;
pub mod orchestrate;
pub(crate) mod placement;
pub(crate) mod presence;
pub(crate) mod recovery;
pub mod spend_limit;
pub(crate) mod task_config;
pub(crate) mod test_choice;
