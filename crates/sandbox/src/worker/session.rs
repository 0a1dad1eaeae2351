//! The worker's session kept across runs and containers (SPEC §19), so a resumed
//! task's worker goes on with its conversation. An agent keeps a session as files
//! under its home (`Kind::session_files`: codex's rollout in `.codex/sessions/`,
//! claude's transcript in `.claude/projects/`) and continues it with
//! `Kind::resume_command`. The directory that holds them is therefore a link
//! (made by the sandbox's main process, as for the login file) to a directory of
//! the task, `.agent-runner/state/<id>.session/`, that the transport puts at
//! `backend::SESSION_DIR` (`backend::Bind`: mounted read-write; `backend::Copy`:
//! instead a volume of the task on the daemon's host, `backend::session_volume`):
//! it outlives the container (even after a SIGKILL of agent-runner), and a new
//! container of the same task finds the session there.
//!
//! The worker may write anything into that directory, as into its repository; the
//! host only creates, mounts and (for a new run of the task) removes it, and the
//! privilege sweep of the repository covers it.

use super::WorkerRun;
use agent_runner_settings::agent::Kind;

/// The directory under HOME where `kind` keeps its sessions: the part of its
/// session files' path before the first wildcard (`.codex/sessions`). None when
/// it names none (a kind that keeps no session files).
pub(crate) fn home_link(kind: &dyn Kind) -> Option<String> {
    let pattern = kind.session_files("x").into_iter().next()?;
    let fixed: Vec<&str> = pattern
        .split('/')
        .take_while(|part| !part.contains('*'))
        .collect();
    // The last fixed part is a file name when there is no wildcard at all.
    let dir = if fixed.len() == pattern.split('/').count() {
        &fixed[..fixed.len().saturating_sub(1)]
    } else {
        &fixed[..]
    };
    let safe = !dir.is_empty()
        && dir
            .iter()
            .all(|part| !part.is_empty() && *part != "." && *part != "..");
    safe.then(|| dir.join("/"))
}

/// Whether a run that was to continue a session did not: it did not complete and
/// did nothing (no command, file, message or token), as when the agent finds no
/// such session (codex: `no rollout found for thread id`; claude: `No conversation
/// found with session ID`). Then the worker starts afresh.
pub(crate) fn not_continued(run: &WorkerRun) -> bool {
    let record = &run.transcript;
    !record.completed()
        && record.commands.is_empty()
        && record.file_changes.is_empty()
        && record.agent_message.is_none()
        && run.usage.tokens.is_none_or(|t| t.is_zero())
}

/// A session id as an agent prints it: only what can safely go on a command line
/// (the worker prints it: never an option such as `--help`).
pub(crate) fn is_session_id(id: &str) -> bool {
    id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_settings::agent::{claude::CLAUDE, codex::CODEX};

    #[test]
    fn each_kind_keeps_its_sessions_in_one_directory_of_its_home() {
        assert_eq!(home_link(&CODEX).as_deref(), Some(".codex/sessions"));
        assert_eq!(home_link(&CLAUDE).as_deref(), Some(".claude/projects"));
        assert!(is_session_id("0199a213-81c0-7800-8aa1-bbab2a035a53"));
        assert!(!is_session_id("x; rm -rf /") && !is_session_id(""));
        assert!(!is_session_id(&"a".repeat(129)));
        assert!(
            !is_session_id("--dangerously-bypass-approvals-and-sandbox") && !is_session_id("-")
        );
    }
}
