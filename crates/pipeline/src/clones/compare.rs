//! What judging a task's tries (SPEC §23 best of N) needs of root_dir's
//! repository: each try's change in numbers (`git diff --shortstat` from where it
//! started, run in a bare repository of ours that borrows root_dir's objects, as
//! `bring_back` lands a bundle: no host git in root_dir), and the winner's branch
//! made the task's (`agent-runner/<id>`) by writing ref files.

use std::path::Path;

use super::git::Repo;
use super::root_repo::{RootRepo, is_object_id};
use super::{AttemptClone, checked_out};
use crate::PipelineError;
use agent_runner_core::interrupt::Interrupt;

/// The change of `branch` since the commit its attempt's clone started from (its
/// log directory `log_dir` describes the clone): files, lines added, lines removed.
/// `scratch` is a directory of ours, removed afterwards.
pub(crate) fn diff_stat(
    root: &Path,
    branch: &str,
    log_dir: &Path,
    scratch: &Path,
    interrupt: Interrupt,
) -> Result<[u64; 3], PipelineError> {
    let base = AttemptClone::started_from(log_dir)?;
    let repo = RootRepo::open(root)?;
    let Some(tip) = repo.branch(branch)? else {
        return Err(PipelineError::Invalid(format!(
            "branch {branch} is not in root_dir's repository"
        )));
    };
    let objects = repo.borrowed_by(scratch, &tip, interrupt)?;
    let ours = Repo {
        git_dir: scratch,
        work_tree: None,
        borrow: Some(&objects),
    };
    let out = ours.run(&["diff", "--shortstat", &base, &tip, "--"], interrupt);
    let _ = std::fs::remove_dir_all(scratch);
    Ok(shortstat(&out?))
}

/// `3 files changed, 10 insertions(+), 2 deletions(-)` in numbers (nothing: no
/// change).
fn shortstat(text: &str) -> [u64; 3] {
    let mut stat = [0; 3];
    for part in text.trim().split(',') {
        let mut words = part.split_whitespace();
        let Some(n) = words.next().and_then(|n| n.parse().ok()) else {
            continue;
        };
        match words.next() {
            Some(w) if w.starts_with("file") => stat[0] = n,
            Some(w) if w.starts_with("insertion") => stat[1] = n,
            Some(w) if w.starts_with("deletion") => stat[2] = n,
            _ => {}
        }
    }
    stat
}

/// Makes the winning try's branch `from` the task's branch `to`: `to` set to its
/// commit, `from` removed. Nothing is touched when `to` is checked out somewhere.
pub(crate) fn promote(root: &Path, from: &str, to: &str) -> Result<String, PipelineError> {
    let repo = RootRepo::open(root)?;
    if let Some(place) = repo.checked_out(to)? {
        return Err(checked_out(to, &place, root));
    }
    let commit = repo
        .branch(from)?
        .filter(|c| is_object_id(c))
        .ok_or_else(|| {
            PipelineError::Invalid(format!("branch {from} is not in root_dir's repository"))
        })?;
    repo.set_branch(to, Some(&commit))?;
    repo.set_branch(from, None)?;
    Ok(commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shortstat_in_numbers() {
        assert_eq!(
            shortstat(" 3 files changed, 10 insertions(+), 2 deletions(-)\n"),
            [3, 10, 2]
        );
        assert_eq!(shortstat(" 1 file changed, 1 deletion(-)"), [1, 0, 1]);
        assert_eq!(shortstat(""), [0, 0, 0]);
    }
}
