//! What the worker changed, as git sees it: HEAD and `git status --porcelain` before
//! and after each run (host side, git CLI). A repo without git, or no git at all, is
//! fine: there is simply nothing to record.

use std::path::Path;
use std::time::Duration;

use crate::process::{self, Capture, Invocation, Limits, Stop};

/// Status lines kept per snapshot.
const MAX_STATUS_LINES: usize = 200;
/// Lines read from one git command (enough to count what is not kept).
const MAX_READ_LINES: usize = 100_000;

/// The repository's state at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitState {
    /// None in a repository without commits.
    pub head: Option<String>,
    /// `git status --porcelain` lines, our own `.agent-runner/` left out.
    pub status: Vec<String>,
    /// Status lines beyond `MAX_STATUS_LINES`, not kept.
    pub more: usize,
}

/// True when `repo` is inside a git work tree (and git runs).
pub fn is_work_tree(repo: &Path) -> bool {
    git(repo, &["rev-parse", "--is-inside-work-tree"]).is_some_and(|out| out.trim() == "true")
}

/// HEAD and status now.
pub fn snapshot(repo: &Path) -> Option<GitState> {
    let status = git(repo, &["status", "--porcelain", "--untracked-files=all"])?;
    let head = git(repo, &["rev-parse", "--verify", "-q", "HEAD"]).map(|h| h.trim().to_string());
    let lines: Vec<String> = status
        .lines()
        .filter(|l| !l.get(3..).unwrap_or("").starts_with(".agent-runner/"))
        .map(str::to_string)
        .collect();
    Some(GitState {
        head: head.filter(|h| !h.is_empty()),
        more: lines.len().saturating_sub(MAX_STATUS_LINES),
        status: lines.into_iter().take(MAX_STATUS_LINES).collect(),
    })
}

/// Paths whose status differs between two snapshots, with the status after
/// (`clean` when a path's change went away).
pub fn changes(before: &GitState, after: &GitState) -> Vec<String> {
    let path = |line: &str| line.get(3..).unwrap_or(line).to_string();
    let mut out: Vec<String> = after
        .status
        .iter()
        .filter(|l| !before.status.contains(l))
        .map(|l| l.to_string())
        .collect();
    for line in &before.status {
        let p = path(line);
        if !after.status.iter().any(|l| path(l) == p) {
            out.push(format!("clean {p}"));
        }
    }
    out
}

/// stdout of a git command that succeeded; at most `MAX_READ_LINES` lines.
fn git(repo: &Path, args: &[&str]) -> Option<String> {
    let invocation = Invocation::new("git")
        .arg("-C")
        .arg(repo.display().to_string())
        .args(args.iter().copied());
    let mut lines = Vec::new();
    let mut on_line = |line: &[u8]| {
        if lines.len() < MAX_READ_LINES {
            lines.push(String::from_utf8_lossy(line).into_owned());
        }
    };
    let mut capture = Capture::in_memory(4096).with_lines(4096, &mut on_line);
    let finished = process::run(
        &invocation,
        &Limits::wall(Duration::from_secs(30)),
        &mut capture,
        Stop::Terminate,
    )
    .ok()?;
    drop(capture);
    finished.success().then(|| lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(lines: &[&str]) -> GitState {
        GitState {
            head: None,
            status: lines.iter().map(|s| s.to_string()).collect(),
            more: 0,
        }
    }

    #[test]
    fn changes_lists_new_and_cleaned_paths() {
        let before = state(&[" M a.rs", "?? old.txt"]);
        let after = state(&[" M a.rs", "?? new.txt", "M  b.rs"]);
        assert_eq!(
            changes(&before, &after),
            ["?? new.txt", "M  b.rs", "clean old.txt"]
        );
    }

    #[test]
    fn snapshots_a_real_repository() {
        let dir = std::env::temp_dir().join(format!("agent-runner-git-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join(".agent-runner")).unwrap();
        assert!(!is_work_tree(&dir));
        let ok = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&dir)
            .status();
        if !ok.is_ok_and(|s| s.success()) {
            return; // no git on this machine: nothing to record, nothing to test
        }
        std::fs::write(dir.join("new.txt"), "x").unwrap();
        std::fs::write(dir.join(".agent-runner/task-x.md"), "note").unwrap();
        assert!(is_work_tree(&dir));
        let snap = snapshot(&dir).unwrap();
        assert_eq!(
            snap,
            GitState {
                head: None,
                status: vec!["?? new.txt".into()],
                more: 0
            }
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
