//! One outcome per run (SPEC §26): `resolved` and `unresolved` are the grader's
//! verdict on a COMPLETE attempt; `agent_failed` is an attempt that ended FAILED
//! (its own failure, a timeout, a budget); `infra_error` is everything that is not
//! the configuration's doing (a lost host, a missing image, the engine, a stopped
//! orchestrator, a grading that could not run): retried once, and out of the pass
//! rate's denominator.

use serde::{Deserialize, Serialize};

use crate::store::task_file::{Attempt, AttemptStatus};

/// How a run ended, for the pass rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Resolved,
    Unresolved,
    AgentFailed,
    InfraError,
}

impl Outcome {
    /// Its name in results.jsonl.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Resolved => "resolved",
            Outcome::Unresolved => "unresolved",
            Outcome::AgentFailed => "agent_failed",
            Outcome::InfraError => "infra_error",
        }
    }
}

/// What an attempt says before any grading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It ended COMPLETE: the grader decides.
    Grade,
    /// Decided already, and why.
    Decided(Outcome, String),
}

/// Words in an attempt's error that say the machinery failed, not the agent.
const INFRA: [&str; 15] = [
    "host lost",
    // A cluster that took no Pod in time, one without kubectl here, or one whose
    // network plugin ignores NetworkPolicy (SPEC §25): the place, not the agent.
    "host busy",
    "kubectl could not be run",
    "egress not enforced on",
    "orchestrator stopped",
    "interrupted",
    "Cannot connect to the Docker daemon",
    "docker daemon not reachable",
    "docker CLI not found",
    "is not available",
    "cannot run the worker",
    "cannot prepare the attempt's clone",
    "cannot start a bundler",
    "the sandbox container",
    "cannot bring the branch back",
];

/// The verdict on `attempt` (the latest of a run's task).
pub(crate) fn classify(attempt: &Attempt) -> Verdict {
    let error = attempt.error.clone().unwrap_or_default();
    match attempt.status {
        AttemptStatus::Succeeded => Verdict::Grade,
        AttemptStatus::Failed if INFRA.iter().any(|w| error.contains(w)) => {
            Verdict::Decided(Outcome::InfraError, error)
        }
        AttemptStatus::Failed => Verdict::Decided(Outcome::AgentFailed, error),
        AttemptStatus::AwaitingApproval => Verdict::Decided(
            Outcome::AgentFailed,
            "awaiting approval: an evaluation config must not set runner.meta.approve_plan".into(),
        ),
        AttemptStatus::Cancelled => Verdict::Decided(Outcome::InfraError, "cancelled".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(status: &str, error: Option<&str>) -> Attempt {
        serde_json::from_value(serde_json::json!({
            "attempt_id": "a", "job_id": "j", "task_id": "t", "status": status,
            "started_at": "x", "finished_at": "x", "duration_ms": 1,
            "error": error, "task_config": "", "log_dir": ""
        }))
        .unwrap()
    }

    #[test]
    fn each_ending_has_one_outcome() {
        assert_eq!(classify(&attempt("succeeded", None)), Verdict::Grade);
        let of = |a: &Attempt| match classify(a) {
            Verdict::Decided(o, _) => Some(o),
            Verdict::Grade => None,
        };
        assert_eq!(
            of(&attempt(
                "failed",
                Some("budget exhausted: max_tokens (9 of 5)")
            )),
            Some(Outcome::AgentFailed)
        );
        assert_eq!(
            of(&attempt("failed", Some("worker timed out"))),
            Some(Outcome::AgentFailed)
        );
        assert_eq!(
            of(&attempt("failed", Some("host lost: h1: no answer"))),
            Some(Outcome::InfraError)
        );
        assert_eq!(
            of(&attempt(
                "failed",
                Some("docker image x:y is not available: No such image")
            )),
            Some(Outcome::InfraError)
        );
        assert_eq!(
            of(&attempt("failed", Some("orchestrator stopped"))),
            Some(Outcome::InfraError)
        );
        for cluster in [
            "host busy: k8s://c/n: Unschedulable: 0/1 nodes are available: 1 Insufficient memory.",
            "kubectl could not be run: No such file or directory; install kubectl, or name it in AGENT_RUNNER_KUBECTL",
            "egress not enforced on k8s://c/n: its network plugin ignores NetworkPolicy (a probe Pod reached 10.0.0.1:443)",
        ] {
            assert_eq!(
                of(&attempt("failed", Some(cluster))),
                Some(Outcome::InfraError),
                "{cluster}"
            );
        }
    }
}
