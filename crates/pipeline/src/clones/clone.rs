//! An attempt's clone: a new repository of ours (`clones/<job-id>`) that holds only
//! what the attempt needs, root_dir's HEAD and the tips of its dependencies'
//! branches, with their history: no other branch, no stash, no object nothing
//! references (a `.env` staged once and dropped). git copies those objects out of
//! root_dir's object store, read as an alternate, into a pack of the clone's own
//! (`repack -a -d`), which then borrows nothing: the worker, root in its container,
//! can neither read nor rewrite root_dir's objects.
//!
//! Until its runner starts the clone is ours, so host git may check it out and merge
//! the dependencies into it (`git.rs`: none of your git configuration).

use std::path::Path;

use super::git::{self, Repo};
use super::root_repo::RootRepo;
use super::{AttemptClone, branch_name, checked_out};
use crate::PipelineError;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::private_dir::DIR_NAME;

/// Who makes the merge commits of dependency branches (unsigned).
const IDENTITY: [&str; 6] = [
    "-c",
    "user.name=agent-runner",
    "-c",
    "user.email=agent-runner@localhost",
    "-c",
    "commit.gpgSign=false",
];
/// The branch of a spare until it is taken.
const SPARE_BRANCH: &str = "agent-runner-spare";

/// Makes `clones/<job_id>` for task `task_id` on branch `branch` (default
/// `agent-runner/<task_id>`; a try's `-try-<k>`, SPEC §23) from root_dir's HEAD
/// (with `on_branch`, from that branch as root_dir has it: a follow-up builds on
/// the task's previous result, SPEC §23) and merges `merge` (branches of root_dir,
/// the task's dependencies) into it, one by one; a conflict is an error naming the
/// branch and the files. `start`: the commit to start from instead of HEAD (an
/// evaluation case's base, SPEC §26). `take_spare(base, dir)` moves a spare clone of commit
/// `base` to `dir` if there is one (`Spares::take`).
pub(crate) fn prepare(
    root: &Path,
    clones: &Path,
    take_spare: &dyn Fn(&str, &Path) -> bool,
    job_id: &str,
    (task_id, branch, on_branch, start): (&str, Option<String>, bool, Option<&str>),
    merge: &[String],
    interrupt: Interrupt,
) -> Result<AttemptClone, PipelineError> {
    let dir = &clones.join(job_id);
    let branch = branch.unwrap_or_else(|| branch_name(task_id));
    let repo = RootRepo::open(root)?;
    let head = repo
        .head()
        .map_err(|e| PipelineError::NoStart(Box::new(e)))?;
    if head.branch.as_deref() == Some(format!("refs/heads/{branch}").as_str()) {
        return Err(checked_out(&branch, root, root));
    }
    let base = if on_branch {
        super::branch_tip(root, &branch)?
    } else if let Some(start) = start {
        start.to_string()
    } else {
        head.commit
    };
    let mut tips = Vec::new();
    for name in merge {
        match repo.branch(name)? {
            Some(tip) => tips.push((name.as_str(), tip)),
            // Most likely merged by the user and deleted: HEAD has it then.
            None => log::warn!(
                "branch {name} of a dependency is no longer in root_dir's repository; {branch} starts without it"
            ),
        }
    }
    if let Some(parent) = dir.parent() {
        crate::store::workspace::create_dir(parent).map_err(PipelineError::io("create", parent))?;
    }
    let clone = Repo {
        git_dir: &dir.join(".git"),
        work_tree: Some(dir),
        borrow: None,
    };
    // A spare lacks branches that came back after it was made: none when merging.
    if tips.is_empty() && take_spare(&base, dir) {
        log::debug!("job {job_id}: a spare clone taken");
        clone.run(&["branch", "--quiet", "-m", &branch], interrupt)?;
    } else {
        make(&repo, dir, &branch, &base, &tips, interrupt)?;
    }
    let mut haves = vec![base.clone()];
    for (name, tip) in tips {
        let message = format!("agent-runner: merge {name} into {branch}");
        let mut args = IDENTITY.to_vec();
        args.extend(["merge", "--quiet", "--no-edit", "-m", &message, &tip]);
        if let Err(e) = clone.run(&args, interrupt) {
            let conflicts = clone
                .run(&["diff", "--name-only", "--diff-filter=U"], interrupt)
                .unwrap_or_default();
            let files: Vec<&str> = conflicts.lines().collect();
            return Err(if files.is_empty() {
                PipelineError::MergeFailed {
                    branch: name.to_string(),
                    error: Box::new(e),
                }
            } else {
                PipelineError::MergeConflict {
                    branch: name.to_string(),
                    files: files.into_iter().map(str::to_string).collect(),
                }
            });
        }
        haves.push(tip);
    }
    drop_private_dir(&clone, dir, interrupt)?;
    Ok(AttemptClone {
        dir: dir.to_path_buf(),
        job_id: job_id.to_string(),
        task_id: task_id.to_string(),
        branch,
        base,
        haves,
    })
}

/// Makes a spare clone of `root` in `dir` (`spare::Spares`), HEAD checked out; the
/// commit it has.
pub(crate) fn spare_clone(root: &Path, dir: &Path) -> Result<String, PipelineError> {
    let repo = RootRepo::open(root)?;
    let base = repo.head()?.commit;
    make(&repo, dir, SPARE_BRANCH, &base, &[], Interrupt::never())?;
    Ok(base)
}

/// A new repository in `dir` on `branch` at `base`, with `tips` as branches too,
/// holding their objects and no others, `base` checked out.
fn make(
    repo: &RootRepo,
    dir: &Path,
    branch: &str,
    base: &str,
    tips: &[(&str, String)],
    interrupt: Interrupt,
) -> Result<(), PipelineError> {
    // git would wait on a FIFO there for a writer that never comes.
    repo.check_objects()?;
    git::init(dir, Some(branch), base, interrupt)?;
    let objects = repo.objects();
    let borrowing = Repo {
        git_dir: &dir.join(".git"),
        work_tree: Some(dir),
        borrow: Some(&objects),
    };
    // update-ref checks that each is a commit git can read.
    borrowing.run(
        &["update-ref", &format!("refs/heads/{branch}"), base],
        interrupt,
    )?;
    for (name, tip) in tips {
        borrowing.run(
            &["update-ref", &format!("refs/heads/{name}"), tip],
            interrupt,
        )?;
    }
    // Without `-l`, the objects the branches need are copied from root_dir's store.
    borrowing.run(
        &["repack", "-a", "-d", "--quiet", "--no-write-bitmap-index"],
        interrupt,
    )?;
    let own = Repo {
        borrow: None,
        ..borrowing
    };
    own.run(&["reset", "--quiet", "--hard"], interrupt)?;
    Ok(())
}

/// Takes a committed `.agent-runner` out of the clone's work tree and index: a
/// branch may carry one (a dependency's worker committed a link there), and the
/// runner makes its own. (The bundler brings root_dir's back, whatever the worker
/// does to it.)
fn drop_private_dir(clone: &Repo, dir: &Path, interrupt: Interrupt) -> Result<(), PipelineError> {
    let path = dir.join(DIR_NAME);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return Ok(());
    };
    clone.run(
        &[
            "rm",
            "-r",
            "--quiet",
            "--cached",
            "--ignore-unmatch",
            "--",
            DIR_NAME,
        ],
        interrupt,
    )?;
    // Checked out by us from commits: remove_dir_all follows no link in it anyway.
    let removed = if meta.is_dir() {
        std::fs::remove_dir_all(&path)
    } else {
        std::fs::remove_file(&path)
    };
    removed.map_err(PipelineError::io("remove", &path))
}
