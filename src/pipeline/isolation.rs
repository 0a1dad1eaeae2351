//! Isolated attempts (SPEC §12 `--jobs N`): each runs in its own clone of root_dir,
//! on branch `agent-runner/<task-id>`, started from root_dir's HEAD merged with the
//! branches of the task's dependencies, and a succeeded attempt's branch is brought
//! back into root_dir's repository without touching the user's checked-out branch or
//! work tree.
//!
//! The clone is made with `git clone --local --no-hardlinks`: hard-linked object
//! files would let the worker (root in its container) rewrite root_dir's objects.
//! Until the runner starts, the clone is ours, and host git may set it up (switch,
//! merge), without the user's git config: dependency branches are worker-written,
//! and the user's filter drivers must not run on them. After the worker has run, no host git command may touch it (SPEC §9: its
//! `.git/config` could run code on the host): the branch leaves it as a bundle made
//! by the `bundler` container, and the host only `git fetch`es that file into
//! root_dir, checking every object. Host git commands on root_dir run with hooks and
//! fsmonitor off, since an earlier non-isolated run may have let a worker write its
//! config.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::bundler::{Bundled, Bundlers, Request};
use super::spare::Spares;
use crate::interrupt::Interrupt;
use crate::process::{self, Capture, Invocation, Limits, Stop};
use crate::task::WorkerSettings;

const GIT_TIMEOUT: Duration = Duration::from_secs(300);
/// Who makes the merge commits of dependency branches (unsigned, whatever the
/// user's global git config says).
const IDENTITY: [&str; 6] = [
    "-c",
    "user.name=agent-runner",
    "-c",
    "user.email=agent-runner@localhost",
    "-c",
    "commit.gpgSign=false",
];

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

/// True when `root` is the top level of a git work tree.
pub fn is_git_root(root: &Path) -> bool {
    git_on_root(root, &["rev-parse", "--show-toplevel"], Interrupt::never())
        .is_ok_and(|out| Path::new(out.trim()) == root)
}

/// Clones `root` (HEAD, committed state) into `clones/<job_id>` on branch `agent-runner/<task_id>`
/// and merges `merge` (branches of root_dir, the task's dependencies) into it, one
/// by one; a conflict is an error naming the branch and the files.
pub fn prepare(
    root: &Path,
    clones: &Path,
    spares: &Spares,
    job_id: &str,
    task_id: &str,
    merge: &[String],
    interrupt: Interrupt,
) -> Result<AttemptClone, String> {
    let dir = &clones.join(job_id);
    let branch = branch_name(task_id);
    // One call for both: the commit to start from, and the checked-out branch.
    let head = git_on_root(
        root,
        &["rev-parse", "HEAD^{commit}", "--symbolic-full-name", "HEAD"],
        interrupt,
    )
    .map_err(|e| {
        format!("root_dir has no commit to start from (isolated attempts start from HEAD): {e}")
    })?;
    let mut lines = head.lines();
    let base = lines.next().unwrap_or_default().trim().to_string();
    if lines.next().map(str::trim) == Some(format!("refs/heads/{branch}").as_str()) {
        return Err(checked_out(&branch, root));
    }
    if let Some(parent) = dir.parent() {
        super::workspace::create_dir(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    // A spare lacks branches that came back after it was made: none when merging.
    if merge.is_empty() && spares.take(&base, dir) {
        log::debug!("job {job_id}: a spare clone taken");
    } else {
        // Checked out once, by the switch below.
        clone_unchecked_out(root, dir, interrupt)?;
    }
    // The clone is ours until the worker starts: host git may still run here.
    git_in_clone(dir, &["switch", "--quiet", "-C", &branch, &base], interrupt)?;
    let mut haves = vec![base.clone()];
    for name in merge {
        let tip = git_in_clone(
            dir,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/remotes/origin/{name}^{{commit}}"),
            ],
            interrupt,
        );
        let Ok(tip) = tip else {
            // Most likely merged by the user and deleted: HEAD has it then.
            log::warn!(
                "branch {name} of a dependency is no longer in root_dir's repository; {branch} starts without it"
            );
            continue;
        };
        let message = format!("agent-runner: merge {name} into {branch}");
        let mut args = IDENTITY.to_vec();
        args.extend(["merge", "--quiet", "--no-edit", "-m", &message, tip.trim()]);
        if let Err(e) = git_in_clone(dir, &args, interrupt) {
            let conflicts =
                git_in_clone(dir, &["diff", "--name-only", "--diff-filter=U"], interrupt)
                    .unwrap_or_default();
            let files: Vec<&str> = conflicts.lines().collect();
            return Err(if files.is_empty() {
                format!("merging {name} into the attempt's start failed: {e}")
            } else {
                format!(
                    "merging {name} into the attempt's start failed: conflict in {}",
                    files.join(", ")
                )
            });
        }
        haves.push(tip.trim().to_string());
    }
    Ok(AttemptClone {
        dir: dir.to_path_buf(),
        job_id: job_id.to_string(),
        task_id: task_id.to_string(),
        branch,
        base,
        haves,
    })
}

/// `git clone` of `root` into `dir` with nothing checked out and no sample hooks
/// copied: the caller checks out once, without the user's config.
fn clone_unchecked_out(root: &Path, dir: &Path, interrupt: Interrupt) -> Result<(), String> {
    let dir_s = dir.display().to_string();
    let root_s = root.display().to_string();
    git(
        None,
        &[
            "clone",
            "--quiet",
            "--local",
            "--no-hardlinks",
            "--no-checkout",
            "--template=",
            "--",
            &root_s,
            &dir_s,
        ],
        interrupt,
    )?;
    Ok(())
}

/// Clones `root` into `dir` as a spare (`spare::Spares`), HEAD checked out as
/// `prepare` checks out (without the user's config); the commit it has.
pub fn spare_clone(root: &Path, dir: &Path) -> Result<String, String> {
    let never = Interrupt::never();
    clone_unchecked_out(root, dir, never)?;
    git_in_clone(dir, &["reset", "--quiet", "--hard"], never)?;
    let head = git_in_clone(dir, &["rev-parse", "HEAD^{commit}"], never)?;
    Ok(head.trim().to_string())
}

/// Brings the clone's branch back into `root` as `agent-runner/<task-id>`: bundled
/// by a bundler of `worker`'s image and limits, fetched on the host. `work` is a
/// directory of ours.
pub fn bring_back(
    clone: &AttemptClone,
    root: &Path,
    bundlers: &Bundlers,
    worker: &WorkerSettings,
    work: &Path,
    interrupt: Interrupt,
) -> Result<(), String> {
    let target = format!("refs/heads/{}", clone.branch);
    let request = Request {
        job_id: &clone.job_id,
        task_id: &clone.task_id,
        branch: &clone.branch,
        haves: &clone.haves,
    };
    let bundle = work.join("branch.bundle");
    let clock = std::time::Instant::now();
    let bundled = bundlers.bundle(worker, &request, &bundle, interrupt)?;
    log::debug!(
        "job {}: bundled in {}",
        clone.job_id,
        crate::timestamp::human(clock.elapsed())
    );
    match bundled {
        Bundled::Unchanged(sha) => {
            refuse_checked_out(root, &clone.branch, interrupt)?;
            git_on_root(root, &["update-ref", &target, &sha], interrupt)?;
        }
        Bundled::Bundle(bundle) => {
            let refspec = format!("+{target}:{target}");
            let fetched = git_on_root(
                root,
                &[
                    "-c",
                    "transfer.fsckObjects=true",
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    // A worker's commit moving a submodule would fetch that
                    // submodule from its remote and move its refs.
                    "--no-recurse-submodules",
                    "--no-write-fetch-head",
                    &bundle.display().to_string(),
                    &refspec,
                ],
                interrupt,
            );
            let _ = std::fs::remove_file(&bundle);
            // git refuses to fetch into the checked-out branch by itself.
            fetched.map_err(|e| {
                if e.contains("refusing to fetch into branch") {
                    checked_out(&clone.branch, root)
                } else {
                    e
                }
            })?;
        }
    }
    Ok(())
}

/// An error if `branch` is checked out in root_dir or in one of its linked worktrees:
/// updating it would change that work tree under its user.
fn refuse_checked_out(root: &Path, branch: &str, interrupt: Interrupt) -> Result<(), String> {
    // Without -z (git < 2.36 lacks it): a worktree path with a newline is misread.
    let list = git_on_root(root, &["worktree", "list", "--porcelain"], interrupt)?;
    let wanted = format!("branch refs/heads/{branch}");
    let mut path = None;
    for field in list.lines() {
        if let Some(p) = field.strip_prefix("worktree ") {
            path = Some(p);
        } else if field == wanted {
            return Err(match path {
                Some(p) if Path::new(p) != root => format!(
                    "{branch} is checked out in {p}, a worktree of root_dir {}; switch it to another branch so it can be updated",
                    root.display()
                ),
                _ => checked_out(branch, root),
            });
        }
    }
    Ok(())
}

fn checked_out(branch: &str, root: &Path) -> String {
    format!(
        "{branch} is checked out in root_dir {}; switch to another branch so it can be updated",
        root.display()
    )
}

/// `git -c core.hooksPath=/dev/null -c core.fsmonitor=false ... -C root ...`; stdout.
fn git_on_root(root: &Path, args: &[&str], interrupt: Interrupt) -> Result<String, String> {
    git(Some(root), args, interrupt)
}

/// `git -C clone ...` in an attempt's clone before its worker starts, with no user or
/// system config: the files it checks out come from worker-written branches, and
/// drivers the user configured (a smudge filter, git-lfs reading a `.lfsconfig`
/// there for where to connect) would run on the host on them. Nothing is fetched.
/// The checkout is then also the files as committed, as the bundler reads them back.
fn git_in_clone(clone: &Path, args: &[&str], interrupt: Interrupt) -> Result<String, String> {
    let invocation = git_invocation(Some(clone))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(["-c", "protocol.allow=never"])
        .args(args.iter().copied());
    run_git(&invocation, interrupt)
}

fn git(dir: Option<&Path>, args: &[&str], interrupt: Interrupt) -> Result<String, String> {
    run_git(&git_invocation(dir).args(args.iter().copied()), interrupt)
}

/// `git` with hooks, fsmonitor and automatic maintenance off, in `dir`.
fn git_invocation(dir: Option<&Path>) -> Invocation {
    // No automatic maintenance either: a fetch would start a detached `git
    // maintenance` in the user's repository after every attempt.
    let mut invocation = Invocation::new("git").args([
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "maintenance.auto=false",
        "-c",
        "gc.auto=0",
    ]);
    if let Some(dir) = dir {
        invocation = invocation.args(["-C".to_string(), dir.display().to_string()]);
    }
    invocation
}

fn run_git(invocation: &Invocation, interrupt: Interrupt) -> Result<String, String> {
    let (ok, stdout, stderr) = run(invocation, interrupt)?;
    if ok {
        Ok(stdout)
    } else {
        Err(format!(
            "`{}` failed: {}",
            invocation.display(),
            crate::text::tail(stderr.trim(), 600)
        ))
    }
}

/// Runs a short command; (success, stdout, stderr tail).
fn run(invocation: &Invocation, interrupt: Interrupt) -> Result<(bool, String, String), String> {
    let mut stdout = String::new();
    let mut on_line = |line: &[u8]| {
        if stdout.len() < 256 * 1024 {
            stdout.push_str(&String::from_utf8_lossy(line));
            stdout.push('\n');
        }
    };
    let mut capture = Capture::in_memory(16 * 1024).with_lines(64 * 1024, &mut on_line);
    let finished = process::run(
        invocation,
        &Limits::wall(GIT_TIMEOUT, interrupt),
        &mut capture,
        Stop::Terminate,
    )
    .map_err(|e| e.to_string())?;
    let stderr = capture.stderr();
    drop(capture);
    match finished.ending {
        process::Ending::Interrupted => Err("interrupted".into()),
        process::Ending::TimedOut => Err(format!("`{}` timed out", invocation.display())),
        _ => Ok((finished.success(), stdout, stderr)),
    }
}
