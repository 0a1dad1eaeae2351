//! The workspace and its tasks, as files (SPEC §11): what every other part reads.
//!
//! `workspace` (where everything is, `workspace.json`, private modes) with its
//! `defaults` (what is wrong with them, `defaults_error`; a `--kinds` they would
//! send with another kind's model, `kind_settings`; the test a user pins
//! there or on a task, `pinned_test`; where verified branches are delivered,
//! `delivery`; who is told when an attempt ends, `notify_settings`); `id`
//! (task and job ids, which name files and branches); a task is a
//! JSON Lines file, `task_file` (its lines and their fold into the current task),
//! kept by `task_store` (create, append, read one or all); `new_task` makes one
//! from a prompt; `commits` says which lines written by a plan edit count;
//! `cycle` finds dependency rings among tasks; `spending` adds up what the
//! attempts used, per day and model; `tries` the tries of a best of N run and their comparison (SPEC §23); `eval_task`
//! what a task that is a run of an evaluation carries (SPEC §26); `attempt_files` says where an attempt's files
//! are (the job's logs, the runner's note and logs), built from ids only, for
//! `task show`, `task logs` and the web view.

pub mod attempt_files;
pub(crate) mod commits;
pub(crate) mod cycle;
pub mod defaults;
pub mod defaults_error;
pub mod delivery;
pub mod eval_task;
pub mod field_error;
pub(crate) mod id;
pub mod kind_settings;
pub mod new_task;
pub(crate) mod notify_settings;
pub mod pinned_test;
pub(crate) mod plan_fields;
pub mod spending;
pub mod task_file;
pub mod task_store;
pub mod tries;
pub mod workspace;
