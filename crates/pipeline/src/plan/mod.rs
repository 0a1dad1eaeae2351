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

pub mod apply;
pub mod backend;
pub mod chat;
pub mod command;
pub mod decompose;
pub mod edit;
pub mod fields;
pub mod lock;
pub mod model;
pub mod patch;
#[cfg(test)]
mod properties;
pub mod request;
pub mod schema;
pub mod tree;
pub mod trim;
pub mod validate;
pub mod wbs;
