//! The worker's session kept across runs and containers (SPEC §19), so a resumed
//! task's worker goes on with its conversation. Codex keeps a conversation (a
//! thread) as a rollout file in `$CODEX_HOME/sessions/` and continues it with
//! `codex exec resume <thread-id>`; only that file is needed
//! (testdata/codex/README.md). The container's CODEX_HOME is therefore a host
//! directory of the task, `.agent-runner/state/<id>.session/`, mounted read-write:
//! it outlives the container (even after a SIGKILL of agent-runner), and a new
//! container of the same task finds the thread there.
//!
//! The worker may write anything into that directory, as into its repository; the
//! host only creates, mounts and (for a new run of the task) removes it, and the
//! privilege sweep of the repository covers it. Everything codex-specific about
//! sessions is here (for a worker-kind trait to take over).

use std::path::Path;

use super::docker_cli::mount_spec;
use crate::task::WorkerSettings;

/// Where the session directory is mounted in the container (CODEX_HOME).
pub const MOUNT: &str = "/run/agent-runner/session";

/// The kind of worker whose sessions this module keeps.
pub const KIND: &str = "codex-cli";

/// `docker run` arguments that make `dir` the worker's home for sessions.
pub fn run_args(dir: &Path) -> Vec<String> {
    vec![
        "--mount".into(),
        mount_spec(dir, MOUNT, false),
        "--env".into(),
        format!("CODEX_HOME={MOUNT}"),
    ]
}

/// `codex exec` arguments (after the program name) that continue thread `id`;
/// the prompt goes to stdin as for a new run.
pub fn resume_args(settings: &WorkerSettings, id: &str) -> Vec<String> {
    let mut args = super::codex::exec_args(settings);
    // Exec options stand before the subcommand; `-` (stdin) ends both.
    args.pop();
    args.extend(["resume".to_string(), id.to_string(), "-".to_string()]);
    args
}

/// Whether a run that tried to continue a thread failed because codex has no
/// such thread (its rollout is gone): then the worker starts afresh.
pub fn lost(stderr: &str) -> bool {
    stderr.contains("no rollout found for thread id")
}

/// A thread id as codex prints it: only what can safely go on a command line.
pub fn is_thread_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_continued_with_the_real_codex_s_arguments() {
        let settings = crate::task::test_task("").worker;
        let args = resume_args(&settings, "0199a213-81c0-7800-8aa1-bbab2a035a53");
        assert_eq!(
            args,
            [
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "-C",
                "/workspace/project",
                "resume",
                "0199a213-81c0-7800-8aa1-bbab2a035a53",
                "-"
            ]
        );
        // The recorded error of a thread codex cannot find (resume_7_unknown_id).
        let recorded = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("testdata/codex/samples/resume_7_unknown_id/stderr.txt"),
        )
        .unwrap();
        assert!(lost(&recorded), "{recorded}");
        assert!(!is_thread_id("x; rm -rf /") && !is_thread_id(""));
    }
}
