//! The approval gate in the pipeline (SPEC §23). With `runner.meta.approve_plan`
//! in `defaults.runner`, an attempt ends `awaiting_approval` after Meta's plan (no
//! sandbox started); then `task approve` enqueues a job that resumes its runner
//! (`run --resume`: the plan approved), `task approve --criteria FILE` one that
//! runs the task again in the same clone with the user's criteria (recorded on the
//! task: the runner then plans none), and `task reject --message` one that runs it
//! again with the message added to its instructions, so that Meta plans anew and
//! the new plan awaits approval in turn.

use std::path::Path;

use serde::Deserialize;

use super::jobs::Continuing;
use super::message::check_message;
use super::run_request::{RunError, continue_latest};
use crate::PipelineError;
use crate::Workspace;
use crate::store::plan_fields::PlanFields;
use crate::store::task_file::{AttemptStatus, Line, TaskChanges, Update};
use crate::store::task_store::TaskStore;
use agent_runner_core::timestamp::Timestamp;
use agent_runner_settings::task::MAX_ACCEPTANCE_CRITERIA;

/// The largest criteria file read.
const MAX_CRITERIA_FILE: u64 = 256 << 10;

/// Approves the plan task `id`'s latest attempt awaits: its runner resumes with
/// the plan, or, with `criteria` (read by `read_criteria`), the task runs again
/// with those instead. Returns the job id.
pub fn approve(
    ws: &Workspace,
    id: &str,
    criteria: Option<Vec<String>>,
) -> Result<String, RunError> {
    let awaiting = [AttemptStatus::AwaitingApproval];
    let Some(criteria) = criteria else {
        return continue_latest(ws, id, &awaiting, Continuing::default(), || Ok(()));
    };
    let continuing = Continuing {
        restart: true,
        ..Continuing::default()
    };
    // Recorded once the job is sure to be written: the task's criteria from now on,
    // which a later resume of this attempt finds unchanged.
    let record = || {
        let line = Line::Update(Update {
            at: Timestamp::now().to_string(),
            changes: TaskChanges {
                plan: PlanFields {
                    acceptance_criteria: Some(criteria),
                    ..PlanFields::default()
                },
                ..TaskChanges::default()
            },
        });
        TaskStore::new(ws).append(id, &line)
    };
    continue_latest(ws, id, &awaiting, continuing, record)
}

/// Rejects the plan task `id`'s latest attempt awaits, with the user's `message`:
/// the task is planned again with it. Returns the job id.
pub fn reject(ws: &Workspace, id: &str, message: &str) -> Result<String, RunError> {
    let message =
        check_message(message).map_err(|e| PipelineError::Invalid(format!("--message: {e}")))?;
    let continuing = Continuing {
        message: Some(message),
        restart: true,
        ..Continuing::default()
    };
    continue_latest(
        ws,
        id,
        &[AttemptStatus::AwaitingApproval],
        continuing,
        || Ok(()),
    )
}

/// The instructions a restarted run gets: the task's, with the user's `message`
/// added for Meta's new plan: with `on_branch`, a follow-up on the previous result
/// (SPEC §23), else the reason a plan was rejected.
pub(crate) fn with_message(instructions: &str, message: &str, on_branch: bool) -> String {
    let lead = if on_branch {
        "This task was done before: the repository holds its result. The user follows up with"
    } else {
        "The acceptance criteria planned before were rejected by the user, who said"
    };
    format!("{}\n\n{lead}:\n{message}", instructions.trim_end())
}

/// A criteria file: `acceptance_criteria:` and a list of texts.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CriteriaFile {
    acceptance_criteria: Vec<String>,
}

/// The criteria of `path` (`task approve --criteria`): a YAML mapping with
/// `acceptance_criteria:`, 1 to 50 non-blank texts. Errors name the file and the
/// line, or the field.
pub fn read_criteria(path: &Path) -> Result<Vec<String>, PipelineError> {
    let at = path.display();
    let invalid = |e: String| PipelineError::Invalid(format!("--criteria {at}: {e}"));
    let bytes = agent_runner_core::fs::read::whole(path, MAX_CRITERIA_FILE)
        .map_err(|e| invalid(e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| invalid("not UTF-8 text".into()))?;
    agent_runner_core::yaml::check(&text, agent_runner_core::yaml::Rules::Document)
        .map_err(|e| invalid(e.to_string()))?;
    let file: CriteriaFile = serde_norway::from_str(&text).map_err(|e| {
        invalid(format!(
            "{e} (expected `acceptance_criteria:` and a list of texts)"
        ))
    })?;
    let criteria = file.acceptance_criteria;
    if criteria.is_empty() || criteria.len() > MAX_ACCEPTANCE_CRITERIA {
        return Err(invalid(format!(
            "acceptance_criteria: {} criteria; give 1 to {MAX_ACCEPTANCE_CRITERIA}",
            criteria.len()
        )));
    }
    if let Some(n) = criteria.iter().position(|c| c.trim().is_empty()) {
        return Err(invalid(format!("acceptance_criteria[{n}]: empty")));
    }
    Ok(criteria.iter().map(|c| c.trim().to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn criteria(text: &str) -> Result<Vec<String>, String> {
        let dir = std::env::temp_dir().join(format!("criteria-{}", uuid_like()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.yaml");
        std::fs::write(&path, text).unwrap();
        let read = read_criteria(&path).map_err(|e| e.to_string());
        std::fs::remove_dir_all(&dir).unwrap();
        read
    }

    fn uuid_like() -> String {
        format!(
            "{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        )
    }

    #[test]
    fn a_criteria_file_is_checked_with_its_line_or_field() {
        assert_eq!(
            criteria("acceptance_criteria:\n  - ' it builds '\n  - tests pass\n").unwrap(),
            ["it builds", "tests pass"]
        );
        let e = criteria("acceptance_criteria:\n  - ok\n  - {a: 1}\n").unwrap_err();
        assert!(e.contains("line 3"), "{e}");
        let e = criteria("acceptance_criteria:\n  - ok\n  - '  '\n").unwrap_err();
        assert!(e.contains("acceptance_criteria[1]: empty"), "{e}");
        let e = criteria("criteria: [a]\n").unwrap_err();
        assert!(e.contains("unknown field `criteria`"), "{e}");
        let e = criteria("acceptance_criteria: []\n").unwrap_err();
        assert!(e.contains("give 1 to 50"), "{e}");
        let e = criteria("acceptance_criteria: [a\n").unwrap_err();
        assert!(e.contains("line"), "{e}");
    }
}
