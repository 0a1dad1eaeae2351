//! Plans (SPEC §13): Meta `decompose` turns a chat request into phases of tasks,
//! Meta `plan_patch` edits the plan by difference, and `plan --show` shows it.
//! A plan is the tasks of the TaskStore (their `task` and `update` lines carry the
//! plan fields: description, acceptance criteria, dependencies, phase, ...) and
//! the tree `wbs.json`; the conversation is `chat.jsonl`.
//!
//! An edit goes: `command` (lock, read, ask, write) → `request` (what Meta is
//! told, chosen by `trim`) → the reply, parsed and shape-checked (`decompose`,
//! `patch`, with `fields`) → worked out on a copy of the plan and checked against
//! it (`decompose::plan`, `validate`, on `model` and `wbs`, rings by `store::cycle`) into
//! an `edit` → written all or nothing (`apply`, committed by `wbs.json`'s rename;
//! which lines count is `store::commits`). `lock` serializes edits; `chat` is the
//! conversation; `backend` picks who answers (`schema`: the replies' JSON
//! Schemas, for a provider that holds the model to one); `tree` is the view.

pub(crate) mod apply;
pub(crate) mod backend;
pub(crate) mod chat;
pub mod command;
pub(crate) mod decompose;
pub mod edit;
pub(crate) mod fields;
pub(crate) mod lock;
pub mod model;
pub(crate) mod patch;
#[cfg(test)]
mod properties;
pub(crate) mod request;
pub mod schema;
pub mod tree;
pub(crate) mod trim;
pub(crate) mod validate;
pub(crate) mod wbs;
