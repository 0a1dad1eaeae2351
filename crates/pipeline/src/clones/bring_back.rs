//! Bringing a succeeded attempt's branch back into root_dir's repository. The clone
//! is the worker's now, so no host git runs in it: the bundler (a container) makes
//! the branch into a bundle. No host git runs in root_dir either (`git.rs`): the
//! bundle's pack is indexed and checked (`index-pack --strict`, then every object of
//! the branch reachable) in a landing repository of ours that borrows root_dir's
//! objects, and only then copied into root_dir's object store, and the branch is
//! set by writing its ref file (`root_repo.rs`). If it is checked out in root_dir or
//! in one of its worktrees, nothing is touched.
//!
//! The ref is written last, and a journal beside the attempt's logs says what it
//! was and what it becomes: an orchestrator killed between writing it and recording
//! the attempt leaves a branch the record does not know of, which the next one's
//! recovery puts back (`reconcile`). git children die with the orchestrator, and
//! none of them moves a branch.

use std::fs::File;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::git::Repo;
use super::root_repo::{RootRepo, is_object_id};
use super::{AttemptClone, checked_out};
use crate::PipelineError;
use crate::clones::bundler::{Bundled, Bundlers, Request};
use agent_runner_core::fs::atomic;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::timestamp::human;
use agent_runner_sandbox::backend::landing;
use agent_runner_settings::task::WorkerSettings;

/// The journal's name in the attempt's log directory.
const JOURNAL: &str = "branch-update.json";
/// Largest kept bundle taken (as the copy transport's).
const MAX_KEPT: u64 = 4 << 30;

/// What is being done to a branch.
#[derive(Serialize, Deserialize)]
struct Journal {
    branch: String,
    before: Option<String>,
    after: String,
}

/// Brings the clone's branch back into `root` as `agent-runner/<task-id>`: bundled
/// by a bundler of `worker`'s image and limits, landed on the host. The journal
/// goes into `log_dir`. Returns the untracked build caches left out of the branch.
pub(crate) fn bring_back(
    clone: &AttemptClone,
    root: &Path,
    bundlers: &Bundlers,
    worker: &WorkerSettings,
    log_dir: &Path,
    interrupt: Interrupt,
) -> Result<Vec<String>, PipelineError> {
    let request = Request {
        job_id: &clone.job_id,
        task_id: &clone.task_id,
        branch: &clone.branch,
        haves: &clone.haves,
        keep_untracked: worker.keep_untracked,
    };
    let clock = std::time::Instant::now();
    let (bundled, left_out) = match kept(clone)? {
        // The copy transport ran the attempt elsewhere (SPEC §22): nothing of the
        // clone was mounted, and its work came back as a bundle kept in it (open:
        // the file goes now, so a later attempt in this clone never takes it).
        Some(kept) => {
            let private = clone.dir.join(agent_runner_core::private_dir::DIR_NAME);
            let _ = std::fs::remove_file(agent_runner_sandbox::backend::copy::kept_bundle(
                &private,
                &clone.task_id,
            ));
            kept
        }
        None => bundlers
            .bundle(worker, &request, interrupt)
            .map_err(|e| PipelineError::Bundler(e.to_string()))?,
    };
    log::debug!(
        "job {}: bundled in {}",
        clone.job_id,
        human(clock.elapsed())
    );
    let repo = RootRepo::open(root)?;
    if let Some(place) = repo.checked_out(&clone.branch)? {
        return Err(checked_out(&clone.branch, &place, root));
    }
    let commit = match bundled {
        Bundled::Unchanged(commit) if clone.haves.contains(&commit) => commit,
        Bundled::Unchanged(commit) => return Err(PipelineError::UnchangedElsewhere(commit)),
        Bundled::Bundle { file, commit } => {
            let landing = bundlers.landing(&clone.job_id);
            let landed = land(&repo, file, &commit, clone, &landing, interrupt);
            let _ = std::fs::remove_dir_all(&landing);
            landed?;
            commit
        }
    };
    let before = repo.branch(&clone.branch)?;
    let journal = Journal {
        branch: clone.branch.clone(),
        before,
        after: commit.clone(),
    };
    let text = serde_json::to_vec(&journal).map_err(PipelineError::Encode)?;
    atomic::write(&log_dir.join(JOURNAL), &text)
        .map_err(PipelineError::io("write", log_dir.join(JOURNAL)))?;
    repo.set_branch(&clone.branch, Some(&commit))?;
    Ok(left_out)
}

/// The bundle the copy transport kept in the clone (`copy::kept_bundle`) and the
/// commit its header names, if there is one.
fn kept(clone: &AttemptClone) -> Result<Option<(Bundled, Vec<String>)>, PipelineError> {
    let private = clone.dir.join(agent_runner_core::private_dir::DIR_NAME);
    let path = agent_runner_sandbox::backend::copy::kept_bundle(&private, &clone.task_id);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let open = || {
        agent_runner_core::fs::read::open_regular(&path, MAX_KEPT)
            .map(|(file, _)| file)
            .map_err(PipelineError::io("read", path.clone()))
    };
    let (_, refs) = past_header(open()?)?;
    let commit = match refs.as_slice() {
        [(commit, _)] => commit.clone(),
        _ => {
            return Err(PipelineError::WrongBundle {
                refs,
                wanted: format!("refs/heads/agent-runner/{}", clone.task_id),
                commit: String::new(),
            });
        }
    };
    Ok(Some((
        Bundled::Bundle {
            file: open()?,
            commit,
        },
        Vec::new(),
    )))
}

/// Indexes and checks the bundle's pack in `landing` (a new repository of ours that
/// borrows root_dir's objects), then adds it to root_dir's object store.
fn land(
    repo: &RootRepo,
    file: File,
    commit: &str,
    clone: &AttemptClone,
    landing: &Path,
    interrupt: Interrupt,
) -> Result<(), PipelineError> {
    let (file, refs) = past_header(file)?;
    let wanted = format!("refs/heads/{}", clone.branch);
    // A kept bundle names the runner's branch (`agent-runner/<task-id>`), the same
    // for every try.
    let runners = format!("refs/heads/agent-runner/{}", clone.task_id);
    let named = |wanted: &str| refs == [(commit.to_string(), wanted.to_string())];
    if !named(&wanted) && !named(&runners) {
        return Err(PipelineError::WrongBundle {
            refs,
            wanted,
            commit: commit.to_string(),
        });
    }
    // index-pack completes the pack with the bases it lacks from root_dir's objects.
    let objects = repo.borrowed_by(landing, commit, interrupt)?;
    let landing_repo = Repo {
        git_dir: landing,
        work_tree: None,
        borrow: Some(&objects),
    };
    let indexed = landing_repo.run_reading(
        &["index-pack", "--stdin", "--fix-thin", "--strict"],
        file,
        interrupt,
    )?;
    let hash = indexed
        .split_whitespace()
        .nth(1)
        .filter(|h| is_object_id(h))
        .ok_or_else(|| PipelineError::IndexPack(indexed.clone()))?
        .to_string();
    let kind = landing_repo.run(&["cat-file", "-t", commit], interrupt)?;
    if kind.trim() != "commit" {
        return Err(PipelineError::NotACommit(kind.trim().to_string()));
    }
    // Every object of the branch is there (the pack's, or root_dir's).
    let mut args = vec!["rev-list", "--objects", "--quiet", commit, "--not"];
    args.extend(clone.haves.iter().map(String::as_str));
    landing_repo.run(&args, interrupt)?;
    repo.add_pack(&landing.join("objects/pack"), &hash)
}

/// The bundle file positioned at its pack, and the refs its header lists: the
/// sandbox's reader (`landing::past_header`), one for the copy transport and here.
fn past_header(file: File) -> Result<(File, Vec<(String, String)>), PipelineError> {
    landing::past_header(file).map_err(|e| PipelineError::BundleHeader(e.to_string()))
}

/// After an orchestrator stopped while bringing a branch back (recovery): if the
/// attempt in `log_dir` had set its branch in `root`, the branch goes back to what
/// it was, since the attempt is recorded as failed. What was done, for the record.
pub(crate) fn reconcile(root: &Path, log_dir: &Path) -> Option<String> {
    let path = log_dir.join(JOURNAL);
    let text = std::fs::read(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    let journal: Journal = serde_json::from_slice(&text).ok()?;
    let branch = &journal.branch;
    let repo = RootRepo::open(root).ok()?;
    if repo.branch(branch).ok()?.as_deref() != Some(journal.after.as_str()) {
        return None;
    }
    let restored = repo.set_branch(branch, journal.before.as_deref());
    Some(match (restored, &journal.before) {
        (Ok(_), Some(before)) => format!(
            "its branch {branch} had been brought back ({}) but not recorded: it is back at {before}",
            journal.after
        ),
        (Ok(_), None) => format!(
            "its branch {branch} had been brought back ({}) but not recorded: it is removed",
            journal.after
        ),
        (Err(e), _) => format!(
            "its branch {branch} had been brought back ({}) but not recorded, and cannot be put back: {e}",
            journal.after
        ),
    })
}

/// Drops the journal once the attempt is recorded.
pub(crate) fn forget(log_dir: &Path) {
    let _ = std::fs::remove_file(log_dir.join(JOURNAL));
}

#[cfg(test)]
mod tests {
    use super::super::root_repo::tests::{git, repo};
    use super::*;

    fn journal(dir: &Path, before: Option<&str>, after: &str) {
        let text = serde_json::to_vec(&Journal {
            branch: "agent-runner/x".into(),
            before: before.map(str::to_string),
            after: after.into(),
        })
        .unwrap();
        std::fs::write(dir.join(JOURNAL), text).unwrap();
    }

    #[test]
    fn recovery_puts_back_a_branch_set_by_an_attempt_that_was_never_recorded() {
        let (dir, one) = repo("reconcile");
        git(&dir, &["commit", "-q", "--allow-empty", "-m", "two"]);
        let two = git(&dir, &["rev-parse", "HEAD"]);
        let logs = dir.join("logs");
        std::fs::create_dir(&logs).unwrap();
        let branch = || {
            git(
                &dir,
                &[
                    "for-each-ref",
                    "--format=%(objectname)",
                    "refs/heads/agent-runner/x",
                ],
            )
        };
        // Was at one; the killed attempt set it to two.
        git(&dir, &["branch", "agent-runner/x", &two]);
        journal(&logs, Some(&one), &two);
        let said = reconcile(&dir, &logs).unwrap();
        assert!(said.contains(&format!("it is back at {one}")), "{said}");
        assert_eq!(branch(), one);
        assert!(!logs.join(JOURNAL).exists());
        // Was not there.
        git(&dir, &["branch", "-f", "agent-runner/x", &two]);
        journal(&logs, None, &two);
        assert!(reconcile(&dir, &logs).unwrap().contains("it is removed"));
        assert_eq!(branch(), "");
        // Moved on since (another attempt): left alone.
        git(&dir, &["branch", "agent-runner/x", &one]);
        journal(&logs, None, &two);
        assert_eq!(reconcile(&dir, &logs), None);
        assert_eq!(branch(), one);
        assert_eq!(reconcile(&dir, &logs), None, "no journal: nothing to do");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
