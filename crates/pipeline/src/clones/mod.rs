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
//! - `clone`: a new repository holding only the attempt's base (root_dir's HEAD,
//!   or for a follow-up after a success the task's own branch) and dependency
//!   branches (objects copied from root_dir's store), checked out and merged;
//! - `bring_back`: the bundler's bundle (`bundler`) checked in a landing
//!   repository, its pack added and the branch set; a journal lets recovery undo a
//!   branch an attempt set but never recorded.
//!
//! - `push`: a branch root_dir holds pushed from a bare repository of ours
//!   borrowing its objects (SPEC §23 deliver).
//!
//! - `compare`: a try's change in numbers, and the winner's branch made the task's
//!   (SPEC §23 best of N).
//!
//! Around them: `spare` clones made ahead of their claim, `background` work off an
//! attempt's path (removing clones and containers, making spares), and `leftover`,
//! which removes what a killed orchestrator left in the workspace.

pub(crate) mod background;
mod bring_back;
pub(crate) mod bundler;
mod clone;
pub(crate) mod compare;
mod git;
pub(crate) mod leftover;
pub(crate) mod push;
mod root_repo;
pub(crate) mod spare;

use std::path::{Path, PathBuf};

use crate::PipelineError;

pub(crate) use bring_back::{bring_back, forget, reconcile};
pub(crate) use clone::{prepare, spare_clone};

/// An attempt's clone.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct AttemptClone {
    /// `clones/<job-id>`.
    pub(crate) dir: PathBuf,
    pub(crate) job_id: String,
    pub(crate) task_id: String,
    /// `agent-runner/<task-id>`.
    pub(crate) branch: String,
    /// root_dir's HEAD when it was made.
    pub(crate) base: String,
    /// Commits root_dir's repository has that the branch may build on: `base` and
    /// the tips of the dependency branches merged into it.
    pub(crate) haves: Vec<String>,
}

/// Where a clone's description is kept, in its job's log directory: a resumed
/// attempt (SPEC §19) goes on in the clone and brings its branch back as the first
/// attempt would have.
const DESCRIPTION: &str = "clone.json";

impl AttemptClone {
    /// Keeps the description in the job's log directory `log_dir`.
    pub(crate) fn save(&self, log_dir: &Path) -> Result<(), PipelineError> {
        let json = serde_json::to_vec(self).map_err(PipelineError::Encode)?;
        let path = log_dir.join(DESCRIPTION);
        agent_runner_core::fs::atomic::write(&path, &json)
            .map_err(PipelineError::io("write", &path))
    }

    /// The commit the clone described in `log_dir` started from.
    pub(crate) fn started_from(log_dir: &Path) -> Result<String, PipelineError> {
        let path = log_dir.join(DESCRIPTION);
        let bytes = agent_runner_core::fs::read::whole(&path, 1 << 20)
            .map_err(|e| PipelineError::Invalid(format!("{}: {e}", path.display())))?;
        let saved: AttemptClone =
            serde_json::from_slice(&bytes).map_err(|source| PipelineError::Json {
                path: path.clone(),
                source,
            })?;
        if !root_repo::is_object_id(&saved.base) {
            return Err(PipelineError::NotCommitIds(path));
        }
        Ok(saved.base)
    }

    /// The clone of job `job_id` (in `clones`) that an earlier attempt of task
    /// `task_id` left, as its log directory `log_dir` describes it; an error if the
    /// clone or its description is gone. Only the commits are taken from the file:
    /// the directory, job, task and branch are the ones named here.
    pub(crate) fn kept(
        clones: &Path,
        log_dir: &Path,
        job_id: &str,
        task_id: &str,
    ) -> Result<AttemptClone, PipelineError> {
        let path = log_dir.join(DESCRIPTION);
        let bytes = agent_runner_core::fs::read::whole(&path, 1 << 20).map_err(|source| {
            PipelineError::CloneNotDescribed {
                job_id: job_id.to_string(),
                path: path.clone(),
                source,
            }
        })?;
        let saved: AttemptClone =
            serde_json::from_slice(&bytes).map_err(|source| PipelineError::Json {
                path: path.clone(),
                source,
            })?;
        let dir = clones.join(job_id);
        if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            return Err(PipelineError::CloneGone {
                job_id: job_id.to_string(),
                dir,
            });
        }
        let commits_ok = root_repo::is_object_id(&saved.base)
            && saved.haves.iter().all(|h| root_repo::is_object_id(h));
        if !commits_ok {
            return Err(PipelineError::NotCommitIds(path));
        }
        Ok(AttemptClone {
            dir,
            job_id: job_id.to_string(),
            task_id: task_id.to_string(),
            branch: branch_name(task_id),
            base: saved.base,
            haves: saved.haves,
        })
    }
}

/// The branch of task `task_id`.
pub(crate) fn branch_name(task_id: &str) -> String {
    format!("agent-runner/{task_id}")
}

/// The commit branch `name` of root_dir's repository is at; `BranchGone` if it
/// is not there (a follow-up's start, SPEC §23).
pub(crate) fn branch_tip(root: &Path, name: &str) -> Result<String, PipelineError> {
    root_repo::RootRepo::open(root)?
        .branch(name)?
        .ok_or_else(|| PipelineError::BranchGone {
            branch: name.to_string(),
            root: root.to_path_buf(),
        })
}

/// True when `root` is the top of a git work tree.
pub(crate) fn is_git_root(root: &Path) -> bool {
    root_repo::RootRepo::open(root).is_ok()
}

/// The error for `branch` checked out in work tree `place` (root_dir itself, or a
/// worktree of its repository).
fn checked_out(branch: &str, place: &Path, root: &Path) -> PipelineError {
    if place == root {
        PipelineError::CheckedOutInRoot {
            branch: branch.to_string(),
            root: root.to_path_buf(),
        }
    } else {
        PipelineError::CheckedOutInWorktree {
            branch: branch.to_string(),
            place: place.to_path_buf(),
            root: root.to_path_buf(),
        }
    }
}
