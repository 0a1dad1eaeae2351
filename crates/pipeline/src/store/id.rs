//! Task and job ids. Both become file names (`tasks/<id>.jsonl`, `ipc/*/<id>.json`,
//! `logs/<id>/`) and a task id names its branch `agent-runner/<id>`, so both follow
//! the runner's task id rule (`agent_runner_settings::task::id`, SPEC §3.1). Anything else could name
//! a path outside the workspace, or a branch git refuses.

/// True when `id` may name a task or a job.
pub(crate) fn is_valid(id: &str) -> bool {
    agent_runner_settings::task::id::is_valid(id)
}

/// The error message for an invalid id given as `what` (`--id`, a job file name).
pub(crate) fn invalid(what: &str, id: &str) -> String {
    format!(
        "{what}: {:?} is not a valid id: {}",
        agent_runner_core::text::cut_chars(id, 60),
        agent_runner_settings::task::id::RULE
    )
}

/// A new task id: `t-` and 8 hex digits.
pub(crate) fn new_task_id() -> String {
    format!("t-{}", random_hex(8))
}

/// A new job id: `j-` and 12 hex digits.
pub(crate) fn new_job_id() -> String {
    format!("j-{}", random_hex(12))
}

/// A new attempt id: `a-` and 12 hex digits.
pub(crate) fn new_attempt_id() -> String {
    format!("a-{}", random_hex(12))
}

/// `n` random hex digits (n ≤ 32).
pub(crate) fn random_hex(n: usize) -> String {
    uuid::Uuid::new_v4().simple().to_string()[..n.min(32)].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule itself is the runner's, tested in `task::id`.
    #[test]
    fn new_ids_follow_the_rule() {
        assert!(is_valid(&new_task_id()) && new_task_id().len() == 10);
        assert!(is_valid(&new_job_id()) && new_job_id() != new_job_id());
        assert!(is_valid(&new_attempt_id()));
        assert!(
            !is_valid("../x") && !is_valid("x.lock"),
            "the runner's rule"
        );
    }
}
