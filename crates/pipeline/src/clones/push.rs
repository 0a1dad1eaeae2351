//! Pushing a branch root_dir's repository holds (SPEC §23 deliver) without running
//! git there (see `git.rs`): its tip is read as a file, and git pushes it from a
//! new bare repository of ours that borrows root_dir's objects.

use std::path::Path;

use super::git;
use super::root_repo::RootRepo;
use crate::PipelineError;
use agent_runner_core::interrupt::Interrupt;

/// Pushes `branch` of `root` to `url` under the same name, through a scratch
/// repository at `scratch` (removed after); the commit pushed.
pub(crate) fn push(
    root: &Path,
    branch: &str,
    url: &str,
    scratch: &Path,
    interrupt: Interrupt,
) -> Result<String, PipelineError> {
    let repo = RootRepo::open(root)?;
    let commit = repo.branch(branch)?.ok_or_else(|| {
        PipelineError::Invalid(format!("branch {branch} is not in {}", root.display()))
    })?;
    repo.check_objects()?;
    let _ = std::fs::remove_dir_all(scratch);
    if let Some(parent) = scratch.parent() {
        crate::store::workspace::create_dir(parent).map_err(PipelineError::io("create", parent))?;
    }
    let pushed = git::init(scratch, None, &commit, interrupt)
        .and_then(|()| git::push(scratch, &repo.objects(), url, &commit, branch, interrupt));
    let _ = std::fs::remove_dir_all(scratch);
    pushed.map(|_| commit)
}
