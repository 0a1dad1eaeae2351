//! A task's status is derived, never stored (SPEC §11): from its lines (deleted,
//! latest attempt), the IPC directories (a job queued or running) and, for queued
//! tasks, its dependencies.

use crate::store::task_file::{Attempt, AttemptStatus, TaskView};

/// How `task list`, `task show` and the web view show a succeeded task whose latest
/// attempt was not verified by a passing test (SPEC §16).
pub const SUCCEEDED_UNVERIFIED: &str = "SUCCEEDED (unverified)";

/// The derived status of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaskStatus {
    Running,
    Blocked,
    Queued,
    Pending,
    Failed,
    /// Its latest attempt planned and waits for approval (SPEC §23).
    AwaitingApproval,
    Succeeded,
    Deleted,
}

impl TaskStatus {
    /// The name shown and written (`RUNNING`, ...).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Running => "RUNNING",
            TaskStatus::Blocked => "BLOCKED",
            TaskStatus::Queued => "QUEUED",
            TaskStatus::Pending => "PENDING",
            TaskStatus::Failed => "FAILED",
            TaskStatus::AwaitingApproval => "AWAITING_APPROVAL",
            TaskStatus::Succeeded => "SUCCEEDED",
            TaskStatus::Deleted => "DELETED",
        }
    }
}

/// Whether `view`, in `status`, succeeded with its test passing: only a SUCCEEDED
/// task can be verified, by its latest attempt.
pub(crate) fn verified(status: TaskStatus, view: &TaskView) -> bool {
    status == TaskStatus::Succeeded && view.latest().is_some_and(Attempt::is_verified)
}

/// The status as people see it: `SUCCEEDED (unverified)` for a task that succeeded
/// without a passing test (an LLM's word alone), else the status.
pub fn label(status: TaskStatus, view: &TaskView) -> &'static str {
    if status == TaskStatus::Succeeded && !verified(status, view) {
        SUCCEEDED_UNVERIFIED
    } else {
        status.as_str()
    }
}

/// Whether a task has a job in the IPC directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    None,
    Queued,
    Running,
}

/// The status of `view`, given its job state; `blocked` is whether its dependencies
/// hold a queued job back (see `readiness`).
pub(crate) fn derive(view: &TaskView, job: JobState, blocked: bool) -> TaskStatus {
    if view.deleted.is_some() {
        return TaskStatus::Deleted;
    }
    match job {
        JobState::Running => TaskStatus::Running,
        JobState::Queued if blocked => TaskStatus::Blocked,
        JobState::Queued => TaskStatus::Queued,
        JobState::None => match view.latest().map(|a| a.status) {
            Some(AttemptStatus::Succeeded) => TaskStatus::Succeeded,
            Some(AttemptStatus::Failed) => TaskStatus::Failed,
            Some(AttemptStatus::AwaitingApproval) => TaskStatus::AwaitingApproval,
            // `latest` skips cancelled jobs: they never ran.
            Some(AttemptStatus::Cancelled) | None => TaskStatus::Pending,
        },
    }
}

/// Whether a task's job may run now, as its dependencies stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Readiness {
    Ready,
    /// This dependency has not succeeded yet: the job stays queued (BLOCKED).
    Waiting(String),
    /// This dependency failed, or does not exist (deleted or never created): the job
    /// ends as a failed attempt.
    Failed(String, &'static str),
}

/// Decides whether a task depending on `depends_on` may run now; `status_of` gives a
/// dependency's status (None: no such task). A task without dependencies is always
/// ready.
pub(crate) fn readiness(
    depends_on: &[String],
    status_of: impl Fn(&str) -> Option<TaskStatus>,
) -> Readiness {
    for dep in depends_on {
        match status_of(dep) {
            Some(TaskStatus::Succeeded) => {}
            Some(TaskStatus::Failed) => return Readiness::Failed(dep.clone(), "failed"),
            Some(TaskStatus::Deleted) => return Readiness::Failed(dep.clone(), "was deleted"),
            None => return Readiness::Failed(dep.clone(), "does not exist"),
            Some(_) => return Readiness::Waiting(dep.clone()),
        }
    }
    Readiness::Ready
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::task_file::Deleted;
    use crate::store::task_file::tests::{attempt, record};

    fn view(attempts: &[AttemptStatus]) -> TaskView {
        TaskView {
            record: record("t-1"),
            deleted: None,
            attempt_count: attempts.len(),
            attempts: attempts
                .iter()
                .enumerate()
                .map(|(n, s)| attempt(&format!("j-{n}"), *s))
                .collect(),
        }
    }

    #[test]
    fn status_follows_jobs_then_the_latest_attempt() {
        use AttemptStatus::{Failed, Succeeded};
        assert_eq!(
            derive(&view(&[]), JobState::None, false),
            TaskStatus::Pending
        );
        assert_eq!(
            derive(&view(&[Failed]), JobState::None, false),
            TaskStatus::Failed
        );
        assert_eq!(
            derive(&view(&[Failed, Succeeded]), JobState::None, false),
            TaskStatus::Succeeded
        );
        assert_eq!(
            derive(&view(&[Succeeded, Failed]), JobState::None, false),
            TaskStatus::Failed
        );
        assert_eq!(
            derive(&view(&[Failed]), JobState::Queued, false),
            TaskStatus::Queued
        );
        // A cancelled job never ran: the task is as it was before it.
        use AttemptStatus::Cancelled;
        assert_eq!(
            derive(&view(&[Succeeded, Cancelled]), JobState::None, false),
            TaskStatus::Succeeded
        );
        assert_eq!(
            derive(&view(&[Cancelled]), JobState::None, false),
            TaskStatus::Pending
        );
        assert_eq!(
            derive(&view(&[]), JobState::Queued, true),
            TaskStatus::Blocked
        );
        assert_eq!(
            derive(&view(&[Succeeded]), JobState::Running, true),
            TaskStatus::Running
        );
        let mut deleted = view(&[Succeeded]);
        deleted.deleted = Some(Deleted {
            at: "x".into(),
            reason: String::new(),
        });
        assert_eq!(
            derive(&deleted, JobState::Running, false),
            TaskStatus::Deleted
        );
    }

    #[test]
    fn a_success_without_a_passing_test_is_shown_unverified() {
        let mut v = view(&[AttemptStatus::Succeeded]);
        let status = derive(&v, JobState::None, false);
        assert_eq!(label(status, &v), "SUCCEEDED (unverified)");
        v.attempts[0].verified = Some(true);
        assert!(verified(status, &v));
        assert_eq!(label(status, &v), "SUCCEEDED");
        // A line written before `verified` existed: its result decides.
        v.attempts[0].verified = None;
        v.attempts[0].result = Some(
            serde_json::value::RawValue::from_string(
                r#"{"state":"COMPLETE","validation":{"overall":"passed"}}"#.into(),
            )
            .unwrap(),
        );
        assert_eq!(label(status, &v), "SUCCEEDED");
        v.attempts[0].result = Some(
            serde_json::value::RawValue::from_string(
                r#"{"state":"COMPLETE","validation":{"overall":"unknown"}}"#.into(),
            )
            .unwrap(),
        );
        assert_eq!(label(status, &v), "SUCCEEDED (unverified)");
        // Other statuses are themselves, whatever the attempt says.
        let failed = view(&[AttemptStatus::Failed]);
        assert_eq!(label(TaskStatus::Failed, &failed), "FAILED");
        assert!(!verified(TaskStatus::Running, &v));
    }

    #[test]
    fn readiness_waits_for_dependencies_and_fails_with_them() {
        let status = |id: &str| match id {
            "ok" => Some(TaskStatus::Succeeded),
            "bad" => Some(TaskStatus::Failed),
            "gone" => Some(TaskStatus::Deleted),
            "busy" => Some(TaskStatus::Running),
            _ => None,
        };
        let deps = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(readiness(&[], status), Readiness::Ready);
        assert_eq!(readiness(&deps(&["ok"]), status), Readiness::Ready);
        assert_eq!(
            readiness(&deps(&["ok", "busy"]), status),
            Readiness::Waiting("busy".into())
        );
        assert_eq!(
            readiness(&deps(&["bad"]), status),
            Readiness::Failed("bad".into(), "failed")
        );
        assert_eq!(
            readiness(&deps(&["gone"]), status),
            Readiness::Failed("gone".into(), "was deleted")
        );
        assert_eq!(
            readiness(&deps(&["nope"]), status),
            Readiness::Failed("nope".into(), "does not exist")
        );
    }
}
