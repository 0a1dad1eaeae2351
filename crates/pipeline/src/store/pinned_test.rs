//! A test command the user pins (SPEC §16): on a task (`task new --test`, an
//! `update` line, a plan_patch `update`) or for a whole workspace
//! (`defaults.task.test`). A pinned test wins over the Task Builder's proposal, so
//! what proves a task done is the user's choice, not an LLM's; the attempt line
//! says where its test came from (`TestSource`).

use super::field_error::FieldError;
use serde::{Deserialize, Serialize};

use agent_runner_settings::task::MAX_SECONDS;

/// Longest pinned command, in bytes: a command line, not a script.
pub(crate) const MAX_COMMAND: usize = 8 * 1024;

/// The error of an attempt that has no test from any source while the workspace
/// requires one (SPEC §16, word for word).
pub(crate) const NO_TEST: &str = "no test command: pin one with task new --test or defaults.task.test, or set defaults.require_test: false";

/// `{command, timeout_sec}`: run with `sh -c` in the sandbox after each worker run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedTest {
    pub command: String,
    /// Default: the runner's (`task.test.timeout_sec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) timeout_sec: Option<u64>,
}

impl PinnedTest {
    /// A pinned test from command-line flags, checked; errors name the flags
    /// (`--test`, `--test-timeout`).
    pub fn from_flags(
        command: &str,
        timeout_sec: Option<u64>,
        (command_flag, timeout_flag): (&str, &str),
    ) -> Result<Self, FieldError> {
        let test = PinnedTest {
            command: command.trim().to_string(),
            timeout_sec,
        };
        test.problems(command_flag, timeout_flag)?;
        Ok(test)
    }

    /// Checks the rules the runner applies to `task.test`, so that a pinned test
    /// never fails an attempt later as an invalid TaskConfig; `field` names it in
    /// errors (`defaults.task.test`, a plan reply's path).
    pub(crate) fn check(&self, field: &str) -> Result<(), FieldError> {
        self.problems(&format!("{field}.command"), &format!("{field}.timeout_sec"))
    }

    fn problems(&self, command_field: &str, timeout_field: &str) -> Result<(), FieldError> {
        if self.command.trim().is_empty() {
            return Err(FieldError::new(
                command_field,
                "empty; give a shell command",
            ));
        }
        if self.command.len() > MAX_COMMAND {
            return Err(FieldError::new(
                command_field,
                format!("{} bytes; at most {MAX_COMMAND}", self.command.len()),
            ));
        }
        if self.command.contains('\0') {
            return Err(FieldError::new(command_field, "holds a NUL character"));
        }
        if let Some(secs) = self.timeout_sec
            && !(1..=MAX_SECONDS).contains(&secs)
        {
            return Err(FieldError::new(
                timeout_field,
                format!("must be between 1 and {MAX_SECONDS} seconds (got {secs})"),
            ));
        }
        Ok(())
    }

    /// As `task.test` in a TaskConfig.
    pub(crate) fn to_yaml(&self) -> serde_norway::Value {
        let mut map = serde_norway::Mapping::new();
        map.insert("command".into(), self.command.as_str().into());
        if let Some(secs) = self.timeout_sec {
            map.insert("timeout_sec".into(), secs.into());
        }
        serde_norway::Value::Mapping(map)
    }
}

/// `{command, timeout_sec}` and nothing else: how a defaults file must write it (a
/// typo such as `timeout:` is an error there, not a silently ignored key).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StrictPinnedTest {
    command: String,
    #[serde(default)]
    timeout_sec: Option<u64>,
}

/// serde `deserialize_with` for a pinned test that refuses unknown keys.
pub(crate) fn strict<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<PinnedTest>, D::Error> {
    let raw: Option<StrictPinnedTest> = Option::deserialize(d)?;
    Ok(raw.map(|r| PinnedTest {
        command: r.command,
        timeout_sec: r.timeout_sec,
    }))
}

/// Where an attempt's test command came from (the attempt line's `test_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TestSource {
    /// The task's own (`task new --test`, an update).
    Task,
    /// The workspace's `defaults.task.test`.
    Workspace,
    /// The Task Builder's proposal (no pinned test).
    Builder,
    /// No test at all: the attempt cannot be verified.
    None,
}

impl TestSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TestSource::Task => "task",
            TestSource::Workspace => "workspace",
            TestSource::Builder => "builder",
            TestSource::None => "none",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_test_follows_the_runners_rules() {
        let flags = ("--test", "--test-timeout");
        assert_eq!(
            PinnedTest::from_flags("  cargo test ", Some(60), flags),
            Ok(PinnedTest {
                command: "cargo test".into(),
                timeout_sec: Some(60)
            })
        );
        assert_eq!(
            PinnedTest::from_flags(" ", None, flags)
                .unwrap_err()
                .to_string(),
            "--test: empty; give a shell command"
        );
        assert!(
            PinnedTest::from_flags("x", Some(0), flags)
                .unwrap_err()
                .to_string()
                .starts_with("--test-timeout: must be between 1 and")
        );
        let long = PinnedTest {
            command: "x".repeat(MAX_COMMAND + 1),
            timeout_sec: None,
        };
        assert!(
            long.check("t")
                .unwrap_err()
                .to_string()
                .starts_with("t.command: ")
        );
        assert!(PinnedTest::from_flags("a\0b", None, flags).is_err());
        assert_eq!(
            serde_norway::to_string(
                &PinnedTest::from_flags("make test", Some(5), flags)
                    .unwrap()
                    .to_yaml()
            )
            .unwrap(),
            "command: make test\ntimeout_sec: 5\n"
        );
        assert_eq!(
            serde_json::to_string(&TestSource::Workspace).unwrap(),
            "\"workspace\""
        );
    }
}
