//! Notifications (SPEC §23): after an attempt is recorded, each `defaults.notify`
//! entry whose `on` names the attempt's event (`event`) gets its JSON (`payload`):
//! a `webhook` POST signed with `signature`, tried 3 times, or a `command` with the
//! JSON on its stdin. Never fatal: a failure is a warning in the orchestrator's log,
//! which names a webhook by its origin only (a URL's path can be its secret).

mod command;
mod not_sent;
mod signature;
mod webhook;

use std::path::Path;

use serde::Serialize;

use crate::store::notify_settings::Notifier;
use crate::store::task_file::{Attempt, AttemptStatus};
use agent_runner_core::interrupt::Interrupt;

/// What a notifier is told.
#[derive(Debug, Serialize)]
pub(crate) struct Payload<'a> {
    pub(crate) event: &'static str,
    pub(crate) task_id: &'a str,
    pub(crate) title: &'a str,
    pub(crate) status: &'static str,
    pub(crate) verified: bool,
    pub(crate) branch: Option<&'a str>,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) pr: Option<&'a str>,
}

/// The event of a recorded attempt: `budget` when a limit ended it,
/// `awaiting_approval` when its plan waits for the user (SPEC §23).
pub(crate) fn event(attempt: &Attempt) -> &'static str {
    let exhausted = attempt
        .budget
        .as_ref()
        .and_then(|b| b.get("exhausted"))
        .is_some_and(|e| !e.is_null());
    match attempt.status {
        AttemptStatus::Succeeded => "succeeded",
        AttemptStatus::AwaitingApproval => "awaiting_approval",
        _ if exhausted => "budget",
        _ => "failed",
    }
}

/// Tells every notifier in `notifiers` that wants to know of `attempt` (of the
/// task titled `title`); commands run in `cwd`.
pub(crate) fn attempt_ended(
    notifiers: &[Notifier],
    title: &str,
    attempt: &Attempt,
    cwd: &Path,
    interrupt: Interrupt,
) {
    let event = event(attempt);
    let payload = Payload {
        event,
        task_id: &attempt.task_id,
        title,
        status: attempt.status.as_str(),
        verified: attempt.is_verified() && attempt.status == AttemptStatus::Succeeded,
        branch: attempt.branch.as_deref(),
        cost_usd: attempt.cost_usd(),
        pr: attempt.delivery.as_ref().and_then(|d| d.pr.as_deref()),
    };
    let Ok(body) = serde_json::to_vec(&payload) else {
        return;
    };
    for notifier in notifiers.iter().filter(|n| n.on.iter().any(|e| e == event)) {
        let clock = std::time::Instant::now();
        let (what, sent) = match (&notifier.url, &notifier.command) {
            (Some(url), _) => (
                format!("webhook {}", webhook::origin(url)),
                webhook::post(url, notifier.secret_var(), &body, interrupt),
            ),
            (None, Some(command)) => (
                "notify command".to_string(),
                command::run(command, &body, cwd, interrupt),
            ),
            (None, None) => continue,
        };
        match sent {
            Ok(()) => log::info!(
                "task {}: {what} told `{event}` in {}",
                attempt.task_id,
                agent_runner_core::timestamp::human(clock.elapsed())
            ),
            Err(e) => log::warn!("task {}: {what} not told `{event}`: {e}", attempt.task_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(status: &str, budget: serde_json::Value) -> Attempt {
        let line = serde_json::json!({
            "attempt_id": "a", "job_id": "j", "task_id": "t", "status": status,
            "started_at": "s", "finished_at": "f", "duration_ms": 1,
            "task_config": "c", "log_dir": "l", "budget": budget,
        });
        serde_json::from_value(line).unwrap()
    }

    #[test]
    fn a_failed_attempt_a_limit_ended_is_a_budget_event() {
        let exhausted = serde_json::json!({"max_cost_usd": 1.0, "exhausted": "max_cost_usd"});
        let within = serde_json::json!({"max_cost_usd": 1.0, "exhausted": null});
        assert_eq!(event(&ended("failed", exhausted.clone())), "budget");
        assert_eq!(event(&ended("failed", within.clone())), "failed");
        assert_eq!(event(&ended("succeeded", within)), "succeeded");
        assert_eq!(event(&ended("failed", serde_json::Value::Null)), "failed");
        assert_eq!(
            event(&ended("awaiting_approval", serde_json::Value::Null)),
            "awaiting_approval"
        );
    }
}
