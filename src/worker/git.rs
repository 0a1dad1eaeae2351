//! What the worker changed, as git sees it: HEAD and `git status` before and after
//! each run (host side, git CLI). A repo without git, or no git at all, is fine:
//! there is simply nothing to record.
//!
//! A snapshot is one `git status --porcelain=v2 --branch` call. Snapshots taken while
//! the repository is sure to be still (no worker or test running) are taken in the
//! background, so they cost no wall time: see `GitWatch`.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::process::{self, Capture, Invocation, Limits, Stop};

/// Status lines kept per snapshot.
const MAX_STATUS_LINES: usize = 200;
/// Lines read from git (enough to count what is not kept).
const MAX_READ_LINES: usize = 100_000;

/// The repository's state at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitState {
    /// None in a repository without commits.
    pub head: Option<String>,
    /// One line per changed path, `XY path` as in `git status --short`; our own
    /// `.agent-runner/` left out.
    pub status: Vec<String>,
    /// Status lines beyond `MAX_STATUS_LINES`, not kept.
    pub more: usize,
}

/// HEAD and status now; None when `repo` is not a git work tree or git is missing.
pub fn snapshot(repo: &Path) -> Option<GitState> {
    let output = git(
        repo,
        &[
            "--no-optional-locks",
            "status",
            "--porcelain=v2",
            "--branch",
            "--untracked-files=all",
        ],
    )?;
    Some(parse_status(&output))
}

/// Parses `git status --porcelain=v2 --branch` output.
fn parse_status(output: &str) -> GitState {
    let mut head = None;
    let mut lines = Vec::new();
    for line in output.lines() {
        let fields: Vec<&str> = line.splitn(2, ' ').collect();
        let entry = match fields[..] {
            ["#", rest] => {
                if let Some(oid) = rest.strip_prefix("branch.oid ") {
                    head = (oid != "(initial)").then(|| oid.to_string());
                }
                continue;
            }
            // Ordinary change: 1 XY sub mH mI mW hH hI path
            ["1", rest] => rest
                .splitn(8, ' ')
                .collect::<Vec<_>>()
                .get(7)
                .map(|path| (xy(rest), path.to_string())),
            // Rename or copy: 2 XY sub mH mI mW hH hI Xscore path<TAB>orig
            ["2", rest] => rest.splitn(9, ' ').collect::<Vec<_>>().get(8).map(|paths| {
                let (path, orig) = paths.split_once('\t').unwrap_or((paths, ""));
                (xy(rest), format!("{path} (from {orig})"))
            }),
            // Unmerged: u XY sub m1 m2 m3 mW h1 h2 h3 path
            ["u", rest] => rest
                .splitn(10, ' ')
                .collect::<Vec<_>>()
                .get(9)
                .map(|path| (xy(rest), path.to_string())),
            ["?", path] => Some(("??".to_string(), path.to_string())),
            _ => None,
        };
        if let Some((xy, path)) = entry {
            if !path.starts_with(".agent-runner/") {
                lines.push(format!("{xy} {path}"));
            }
        }
    }
    GitState {
        head,
        more: lines.len().saturating_sub(MAX_STATUS_LINES),
        status: lines.into_iter().take(MAX_STATUS_LINES).collect(),
    }
}

/// The `XY` status of a v2 entry, with `.` (unchanged) shown as a space.
fn xy(rest: &str) -> String {
    rest.chars()
        .take(2)
        .map(|c| if c == '.' { ' ' } else { c })
        .collect()
}

/// Paths whose status differs between two snapshots, with the status after
/// (`clean` when a path's change went away).
pub fn changes(before: &GitState, after: &GitState) -> Vec<String> {
    let path = |line: &str| line.get(3..).unwrap_or(line).to_string();
    let mut out: Vec<String> = after
        .status
        .iter()
        .filter(|l| !before.status.contains(l))
        .cloned()
        .collect();
    for line in &before.status {
        let p = path(line);
        if !after.status.iter().any(|l| path(l) == p) {
            out.push(format!("clean {p}"));
        }
    }
    out
}

/// Snapshots around worker runs. `prefetch` starts the next "before" snapshot in the
/// background, for when the repository is still until the next worker run (after a
/// test run, while Meta is asked; before the container exists).
pub struct GitWatch {
    repo: PathBuf,
    /// None until known; false when the repo is not a git work tree.
    enabled: Option<bool>,
    next_before: Option<Next>,
}

enum Next {
    Ready(Option<GitState>),
    Pending(JoinHandle<Option<GitState>>),
}

impl GitWatch {
    pub fn new(repo: &Path) -> Self {
        GitWatch {
            repo: repo.to_path_buf(),
            enabled: None,
            next_before: None,
        }
    }

    /// Starts the next "before" snapshot in the background. The repository must not
    /// change until `before` returns it.
    pub fn prefetch(&mut self) {
        if self.enabled == Some(false) {
            return;
        }
        let repo = self.repo.clone();
        self.next_before = Some(
            match std::thread::Builder::new()
                .name("git".into())
                .spawn(move || snapshot(&repo))
            {
                Ok(handle) => Next::Pending(handle),
                Err(_) => Next::Ready(snapshot(&self.repo)),
            },
        );
    }

    /// The state before a worker run.
    pub fn before(&mut self) -> Option<GitState> {
        if self.enabled == Some(false) {
            return None;
        }
        let state = match self.next_before.take() {
            Some(Next::Ready(state)) => state,
            Some(Next::Pending(handle)) => handle.join().ok().flatten(),
            None => snapshot(&self.repo),
        };
        self.enabled = Some(state.is_some());
        state
    }

    /// The state after a worker run; it is also the next run's "before" unless
    /// `prefetch` replaces it (a test run may change the repository).
    pub fn after(&mut self) -> Option<GitState> {
        if self.enabled != Some(true) {
            return None;
        }
        let state = snapshot(&self.repo);
        self.next_before = Some(Next::Ready(state.clone()));
        state
    }
}

/// stdout of a git command that succeeded.
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
        &Limits::wall(
            Duration::from_secs(30),
            crate::interrupt::Interrupt::never(),
        ),
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
    fn parses_porcelain_v2() {
        let output = "# branch.oid 1234abcd\n# branch.head main\n\
                      1 .M N... 100644 100644 100644 aaa bbb src/main.rs\n\
                      1 A. N... 000000 100644 100644 000 ccc new file.rs\n\
                      2 R. N... 100644 100644 100644 aaa aaa R100 b.rs\ta.rs\n\
                      u UU N... 100644 100644 100644 100644 a b c conflict.rs\n\
                      ? .agent-runner/task-x.md\n? untracked.txt";
        assert_eq!(
            parse_status(output),
            GitState {
                head: Some("1234abcd".into()),
                status: vec![
                    " M src/main.rs".into(),
                    "A  new file.rs".into(),
                    "R  b.rs (from a.rs)".into(),
                    "UU conflict.rs".into(),
                    "?? untracked.txt".into()
                ],
                more: 0,
            }
        );
        assert_eq!(parse_status("# branch.oid (initial)\n").head, None);
    }

    #[test]
    fn watches_a_real_repository() {
        let dir = std::env::temp_dir().join(format!("agent-runner-git-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join(".agent-runner")).unwrap();
        let git_init = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&dir)
            .status();
        if git_init.is_ok_and(|s| s.success()) {
            let mut watch = GitWatch::new(&dir);
            watch.prefetch();
            std::fs::write(dir.join(".agent-runner/task-x.md"), "note").unwrap();
            assert_eq!(
                watch.before(),
                Some(GitState::default()),
                "our own files are left out"
            );
            std::fs::write(dir.join("new.txt"), "x").unwrap();
            let after = watch.after().unwrap();
            assert_eq!(after.status, ["?? new.txt"]);
            assert_eq!(
                watch.before(),
                Some(after),
                "reused when nothing ran in between"
            );
        }
        let plain =
            std::env::temp_dir().join(format!("agent-runner-nogit-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&plain).unwrap();
        let mut watch = GitWatch::new(&plain);
        assert_eq!((watch.before(), watch.after()), (None, None));
        let _ = std::fs::remove_dir_all(dir);
        let _ = std::fs::remove_dir_all(plain);
    }
}
