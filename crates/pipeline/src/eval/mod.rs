//! Evaluation (SPEC §26): how well configurations solve a suite of cases, graded by
//! tests the worker never sees.
//!
//! ```text
//! SUITE.yaml ─ suite (reader: field paths, line/column; nothing runs if invalid)
//!    │
//!    ├─ validate: per case, base and solution (repo: commits of ours) ─ grade
//!    │
//!    └─ run: repo (the eval workspace's root_dir: refs/eval/<case>)
//!         → tasks eval-<case>-<config>-<k> (store::eval_task: base + runner)
//!         → orchestrator (clones from the base, hosts, budgets, --jobs)
//!         → outcome (the attempt) ─ grade (its branch + the grader's files, a fresh
//!           sandbox, no network) → results (results.jsonl, a line per graded run)
//!         → summary (pass_at_k: pass@k, Wilson interval) → summary.json, table
//! ```
//!
//! The grader's files go from the suite's directory into the grading sandbox only:
//! never into the eval's repository, a clone or the worker's sandbox. The web view
//! shows an eval's summary (`web::pages`' eval page); `import_swebench` writes a suite
//! from SWE-bench instances whose repositories are here.

pub mod error;
pub mod grade;
pub mod grade_on_host;
pub mod import_swebench;
pub mod outcome;
pub mod pass_at_k;
mod preflight;
pub(crate) mod repo;
pub mod results;
pub mod run;
pub mod suite;
pub mod summary;
pub mod table;
pub mod validate;

pub use error::EvalError;
