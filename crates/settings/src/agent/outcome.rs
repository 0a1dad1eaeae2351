//! How a run ended, judged the same way for every agent kind: completed only with
//! exit 0 *and* the agent's own word that it completed (exit 0 alone proves
//! nothing); failed when the agent says so or exits non-zero; timed out or stalled
//! when our limits stopped it; crashed when it ended without a word.

use serde::Serialize;

use super::record::{MAX_TEXT, Transcript};
use agent_runner_core::text::cut;

/// How a worker run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// Exit 0 and the agent's terminal success event.
    Completed,
    /// The agent's failure event, or a non-zero exit.
    Failed,
    /// Ran past `max_run_time_sec`; killed.
    TimedOut,
    /// No output for `idle_timeout_sec`; killed.
    Stalled,
    /// Ended without a terminal event (killed by a signal, or exit 0 mid-run).
    Crashed,
    /// agent-runner was interrupted (SIGINT/SIGTERM) during the run.
    Interrupted,
}

impl RunOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::Failed => "failed",
            RunOutcome::TimedOut => "timed_out",
            RunOutcome::Stalled => "stalled",
            RunOutcome::Crashed => "crashed",
            RunOutcome::Interrupted => "interrupted",
        }
    }
}

/// How the agent's process ended, as seen from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exited with this status code.
    Code(i32),
    /// Killed by a signal, or not reaped.
    Signal,
    /// Stopped at `max_run_time_sec`.
    TimedOut(std::time::Duration),
    /// Stopped after `idle_timeout_sec` without output.
    Stalled(std::time::Duration),
    Interrupted,
}

/// Judges a run of `program`: its outcome and a one-paragraph summary (the final
/// agent message on success, the most telling error otherwise).
pub fn classify(
    program: &str,
    transcript: &Transcript,
    exit: Exit,
    stderr: &str,
) -> (RunOutcome, String) {
    let reason = || {
        transcript
            .failure()
            .map(str::to_string)
            .or_else(|| transcript.errors.last().cloned())
            .or_else(|| stderr_reason(stderr))
    };
    let last_words = || match &transcript.agent_message {
        Some(m) => format!(" Last agent message: {m}"),
        None => String::new(),
    };
    match exit {
        Exit::TimedOut(limit) => (
            RunOutcome::TimedOut,
            format!(
                "Timed out after {} s (max_run_time_sec); the worker was stopped.{}",
                limit.as_secs(),
                last_words()
            ),
        ),
        Exit::Stalled(limit) => (
            RunOutcome::Stalled,
            format!(
                "Stalled: no output for {} s (idle_timeout_sec); the worker was stopped.{}",
                limit.as_secs(),
                last_words()
            ),
        ),
        Exit::Interrupted => (
            RunOutcome::Interrupted,
            "Interrupted; the worker was stopped.".into(),
        ),
        _ if transcript.failure().is_some() => (RunOutcome::Failed, reason().unwrap_or_default()),
        Exit::Code(0) if transcript.completed() => (
            RunOutcome::Completed,
            transcript
                .agent_message
                .clone()
                .unwrap_or_else(|| "(no final message)".into()),
        ),
        Exit::Code(code) if code != 0 && code < 128 => (
            RunOutcome::Failed,
            reason().unwrap_or_else(|| format!("{program} exited with status {code}")),
        ),
        Exit::Code(code) => {
            let how = if code >= 128 {
                format!("was killed (exit status {code}, signal {})", code - 128)
            } else {
                "exited 0".to_string()
            };
            let detail = reason()
                .map(|r| format!(" Last error: {r}"))
                .unwrap_or_default();
            (
                RunOutcome::Crashed,
                format!("{program} {how} before finishing its turn.{detail}"),
            )
        }
        Exit::Signal => {
            let detail = reason()
                .map(|r| format!(" Last error: {r}"))
                .unwrap_or_default();
            (
                RunOutcome::Crashed,
                format!("{program} was killed by a signal before finishing its turn.{detail}"),
            )
        }
    }
}

/// The most telling stderr line: the first that is not noise.
fn stderr_reason(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .map(str::trim)
        .find(|l| {
            !l.is_empty()
                && !l.starts_with("WARNING:")
                && *l != "Reading additional input from stdin..."
        })
        .map(|l| cut(l, MAX_TEXT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::record::Terminal;
    use std::time::Duration;

    #[test]
    fn exit_zero_without_terminal_event_is_a_crash() {
        let mut t = Transcript::default();
        t.set_message("half");
        assert_eq!(
            classify("codex", &t, Exit::Code(0), "").0,
            RunOutcome::Crashed
        );
        assert_eq!(
            classify("codex", &t, Exit::Code(137), "").1,
            "codex was killed (exit status 137, signal 9) before finishing its turn."
        );
        assert_eq!(
            classify("claude", &t, Exit::Signal, "").0,
            RunOutcome::Crashed
        );
        let (outcome, summary) = classify("codex", &t, Exit::TimedOut(Duration::from_secs(3)), "");
        assert_eq!(outcome, RunOutcome::TimedOut);
        assert_eq!(
            summary,
            "Timed out after 3 s (max_run_time_sec); the worker was stopped. Last agent message: half"
        );
        assert_eq!(
            classify("codex", &t, Exit::Stalled(Duration::from_secs(9)), "").0,
            RunOutcome::Stalled
        );
        t.terminal = Some(Terminal::Completed);
        assert_eq!(
            classify("codex", &t, Exit::Code(2), "").0,
            RunOutcome::Failed
        );
        assert_eq!(
            classify("claude", &t, Exit::Code(2), "").1,
            "claude exited with status 2"
        );
        assert_eq!(
            classify("codex", &t, Exit::Code(0), "").0,
            RunOutcome::Completed
        );
        t.fail("no");
        assert_eq!(
            classify("codex", &t, Exit::Code(0), ""),
            (RunOutcome::Failed, "no".to_string())
        );
    }

    #[test]
    fn a_start_up_failure_is_told_by_its_stderr() {
        let t = Transcript::default();
        assert_eq!(
            classify(
                "claude",
                &t,
                Exit::Code(1),
                "WARNING: x\n\nError: no stdin\n"
            ),
            (RunOutcome::Failed, "Error: no stdin".to_string())
        );
    }
}
