//! Which test command an attempt runs (SPEC §16): the task's pinned test, else the
//! workspace's (`defaults.task.test`), else the Task Builder's proposal. A pinned
//! test replaces the builder's whole (its `cwd` too): the user decides what proves
//! the work, and an LLM's proposal only fills the gap. The choice, and a proposal
//! that lost, go into `builder.log`.

use serde_norway::{Mapping, Value};

use crate::store::pinned_test::{PinnedTest, TestSource};
use agent_runner_core::text::{cut, one_line};

/// The test an attempt runs and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TestChoice {
    /// A pinned test to set as `task.test` (None: the draft's stands, or none).
    pub(crate) pinned: Option<PinnedTest>,
    pub(crate) source: TestSource,
    /// The lines for `builder.log`.
    pub(crate) log: String,
}

/// Chooses between the task's and the workspace's pinned tests and the test in the
/// builder's `draft` (its `task.test`; null or absent: none proposed).
pub(crate) fn choose(
    task: Option<&PinnedTest>,
    workspace: Option<&PinnedTest>,
    draft: &Mapping,
) -> TestChoice {
    let proposal = draft
        .get("task")
        .and_then(|t| t.get("test"))
        .filter(|t| !t.is_null());
    let (pinned, source) = match (task, workspace, proposal) {
        (Some(t), _, _) => (Some(t.clone()), TestSource::Task),
        (None, Some(w), _) => (Some(w.clone()), TestSource::Workspace),
        (None, None, Some(_)) => (None, TestSource::Builder),
        (None, None, None) => (None, TestSource::None),
    };
    let mut log = format!("\n--- test ---\ntest_source: {}\n", source.as_str());
    if let Some(test) = &pinned {
        log.push_str(&format!("command: {}\n", shown(&test.command)));
    }
    match (proposal, &pinned) {
        (Some(proposed), Some(_)) => log.push_str(&format!(
            "the builder's proposal {} is not used: a pinned test wins (task > workspace > builder)\n",
            shown(&proposed_command(proposed))
        )),
        (Some(proposed), None) => log.push_str(&format!(
            "command: {} (the builder's proposal)\n",
            shown(&proposed_command(proposed))
        )),
        (None, _) => {}
    }
    TestChoice {
        pinned,
        source,
        log,
    }
}

/// What a proposal's command says, for the log (whatever shape the draft has).
fn proposed_command(test: &Value) -> String {
    match test.get("command") {
        Some(Value::String(command)) => command.clone(),
        Some(other) => serde_norway::to_string(other).unwrap_or_default(),
        None => serde_norway::to_string(test).unwrap_or_default(),
    }
}

/// A command on one line, quoted, cut.
fn shown(command: &str) -> String {
    format!("`{}`", cut(&one_line(command), 500))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(yaml: &str) -> Mapping {
        serde_norway::from_str(yaml).unwrap()
    }

    fn pinned(command: &str) -> PinnedTest {
        PinnedTest {
            command: command.into(),
            timeout_sec: None,
        }
    }

    #[test]
    fn the_task_wins_over_the_workspace_which_wins_over_the_builder() {
        let proposing = draft("task:\n  instructions: x\n  test: {command: npm test, cwd: web}\n");
        let silent = draft("task:\n  instructions: x\n  test: null\n");
        let (task, ws) = (pinned("cargo test"), pinned("make check"));
        let choice = choose(Some(&task), Some(&ws), &proposing);
        assert_eq!(
            (choice.pinned.as_ref(), choice.source),
            (Some(&task), TestSource::Task)
        );
        assert_eq!(
            choice.log,
            "\n--- test ---\ntest_source: task\ncommand: `cargo test`\nthe builder's proposal `npm test` is not used: a pinned test wins (task > workspace > builder)\n"
        );
        let choice = choose(None, Some(&ws), &proposing);
        assert_eq!(
            (choice.pinned.as_ref(), choice.source),
            (Some(&ws), TestSource::Workspace)
        );
        assert!(choice.log.contains("`npm test` is not used"));
        let choice = choose(None, None, &proposing);
        assert_eq!((choice.pinned, choice.source), (None, TestSource::Builder));
        assert!(
            choice
                .log
                .contains("command: `npm test` (the builder's proposal)")
        );
        let choice = choose(None, None, &silent);
        assert_eq!((choice.pinned, choice.source), (None, TestSource::None));
        assert_eq!(choice.log, "\n--- test ---\ntest_source: none\n");
        let choice = choose(None, Some(&ws), &silent);
        assert!(!choice.log.contains("proposal"), "{}", choice.log);
    }
}
