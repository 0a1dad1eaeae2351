//! The states a task goes through (SPEC §4), by name: the event log
//! (`events::Event::State`) and the runner's state file say them. Apart from `task`
//! so that the event log does not depend on the Task YAML reader; the edges between
//! them are the runner's state machine's (`agent_runner_run::context`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// States of a task (SPEC §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TaskState {
    Pending,
    Planning,
    Running,
    Validating,
    Complete,
    Failed,
    /// Planned, stopped until the plan is approved (SPEC §23): this run ended, the
    /// task did not.
    #[serde(rename = "AWAITING_APPROVAL")]
    AwaitingApproval,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "PENDING",
            TaskState::Planning => "PLANNING",
            TaskState::Running => "RUNNING",
            TaskState::Validating => "VALIDATING",
            TaskState::Complete => "COMPLETE",
            TaskState::Failed => "FAILED",
            TaskState::AwaitingApproval => "AWAITING_APPROVAL",
        }
    }

    /// COMPLETE, FAILED or AWAITING_APPROVAL: the run has ended (a resume goes
    /// on from the last two).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Complete | TaskState::Failed | TaskState::AwaitingApproval
        )
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_spelled_as_the_files_spell_them() {
        for state in [
            TaskState::Pending,
            TaskState::Planning,
            TaskState::Running,
            TaskState::Validating,
            TaskState::Complete,
            TaskState::Failed,
            TaskState::AwaitingApproval,
        ] {
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
            assert_eq!(serde_json::from_str::<TaskState>(&json).unwrap(), state);
        }
    }
}
