//! Isolated attempts (SPEC §12 `--jobs N`): each runs in its own clone of root_dir,
//! on branch `agent-runner/<task-id>`, started from root_dir's HEAD merged with the
//! branches of the task's dependencies, and a succeeded attempt's branch is brought
//! back into root_dir's repository without touching the user's checked-out branch or
//! work tree.
//!
//! No host git command ever runs in root_dir's repository or reads its config (a
//! worker may have written it, SPEC §9), nor in a clone once a worker was in it:
//! - `root_repo`: root_dir's repository read and written as plain files (HEAD,
//!   branches, worktrees' HEADs, its object store checked, a pack added, a ref set);
//! - `git`: host git, only in repositories of ours and without the user's config;
//! - `clone`: a new repository holding only the attempt's base and dependency
//!   branches (objects copied from root_dir's store), checked out and merged;
//! - `bring_back`: the bundler's bundle (`super::bundler`) checked in a landing
//!   repository, its pack added and the branch set; a journal lets recovery undo a
//!   branch an attempt set but never recorded.

mod bring_back;
mod clone;
mod git;
mod root_repo;

use std::path::{Path, PathBuf};

pub use bring_back::{bring_back, forget, reconcile};
pub use clone::{prepare, spare_clone};

/// An attempt's clone.
#[derive(Debug, Clone)]
pub struct AttemptClone {
    /// `clones/<job-id>`.
    pub dir: PathBuf,
    pub job_id: String,
    pub task_id: String,
    /// `agent-runner/<task-id>`.
    pub branch: String,
    /// root_dir's HEAD when it was made.
    pub base: String,
    /// Commits root_dir's repository has that the branch may build on: `base` and
    /// the tips of the dependency branches merged into it.
    pub haves: Vec<String>,
}

/// The branch of task `task_id`.
pub fn branch_name(task_id: &str) -> String {
    format!("agent-runner/{task_id}")
}

/// True when `root` is the top of a git work tree.
pub fn is_git_root(root: &Path) -> bool {
    root_repo::RootRepo::open(root).is_ok()
}

/// The error for `branch` checked out in work tree `place` (root_dir itself, or a
/// worktree of its repository).
fn checked_out(branch: &str, place: &Path, root: &Path) -> String {
    if place == root {
        format!(
            "{branch} is checked out in root_dir {}; switch to another branch so it can be updated",
            root.display()
        )
    } else {
        format!(
            "{branch} is checked out in {}, a worktree of root_dir {}'s repository; switch it to another branch so it can be updated",
            place.display(),
            root.display()
        )
    }
}
