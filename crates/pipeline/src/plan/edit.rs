//! A checked plan edit: the plan as it will be once written, and the steps that
//! got it there (what the user is told). Made by `decompose` and `validate` from a
//! reply; written by `apply`.

use serde::Serialize;
use serde_json::Value;

use super::model::PlanState;

/// An edit that passed every check.
#[derive(Debug, Clone)]
pub(crate) struct Edit {
    /// Meta's summary of what the user wants.
    pub(crate) understanding: String,
    /// Meta's warnings, shown to the user as they came.
    pub(crate) potential_conflicts: Vec<Value>,
    /// The plan after the edit.
    pub(crate) state: PlanState,
    pub(crate) steps: Vec<Step>,
}

/// One thing an edit did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Step {
    Create {
        task_id: String,
        /// The reply's temporary id.
        temp_id: String,
        title: String,
        /// The node it went under.
        parent_id: String,
    },
    Update {
        task_id: String,
        /// The fields the reply gave.
        fields: Vec<&'static str>,
    },
    Move {
        task_id: String,
        parent_id: String,
        index: usize,
    },
    Delete {
        task_id: String,
        /// Tasks deleted with it (`cascade: true`).
        with: Vec<String>,
    },
}

/// The raw prompt of a planned task: what the Task Builder is given, verbatim in
/// the TaskConfig's instructions.
pub(crate) fn prompt_of(title: &str, description: Option<&str>) -> String {
    match description.map(str::trim).filter(|d| !d.is_empty()) {
        Some(d) => format!("{title}\n\n{d}"),
        None => title.to_string(),
    }
}
