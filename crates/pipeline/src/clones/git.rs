//! Host git, and only on repositories of ours: an attempt's fresh clone before its
//! worker starts, or a landing repository for a bundle. Never in root_dir's
//! repository: an earlier worker may have written its config, hooks or info (an
//! in-place run of an older version; a config of yours that includes a file of the
//! work tree), and git would run what they say (`core.fsmonitor`, `url.*.insteadOf`
//! to `ext::`, filters, hooks). root_dir's objects are read as an alternate object
//! store, which is data: no config, hook or attribute is read from there. The
//! invocation without the user's configuration is `agent_runner_core::git`'s, the
//! sandbox's landing's too.

use std::fs::File;
use std::path::Path;

use crate::PipelineError;
use agent_runner_core::git::{GitError, clean, quoted};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::Invocation;

/// A repository of ours that git may run in.
pub(crate) struct Repo<'a> {
    /// Its git directory.
    pub(crate) git_dir: &'a Path,
    /// Its work tree (the clone's), if git needs one.
    pub(crate) work_tree: Option<&'a Path>,
    /// An object store git may read objects from (root_dir's), if any.
    pub(crate) borrow: Option<&'a Path>,
}

impl Repo<'_> {
    /// `git <args>` here; its stdout.
    pub(crate) fn run(&self, args: &[&str], interrupt: Interrupt) -> Result<String, PipelineError> {
        run(&self.invocation(args), interrupt)
    }

    /// `git <args>` reading `stdin` from where it stands; its stdout.
    pub(crate) fn run_reading(
        &self,
        args: &[&str],
        stdin: File,
        interrupt: Interrupt,
    ) -> Result<String, PipelineError> {
        run(&self.invocation(args).stdin_file(stdin), interrupt)
    }

    fn invocation(&self, args: &[&str]) -> Invocation {
        let cwd = self.work_tree.unwrap_or(self.git_dir);
        let mut invocation = clean(cwd, args).env("GIT_DIR", &self.git_dir.display().to_string());
        if let Some(work_tree) = self.work_tree {
            invocation = invocation.env("GIT_WORK_TREE", &work_tree.display().to_string());
        }
        if let Some(objects) = self.borrow {
            invocation = invocation.env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &quoted(objects));
        }
        invocation
    }
}

/// Variables that would point git at another repository, object store or index
/// than ours.
const LOCATING: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
];

/// `git push --force <url> <commit>:refs/heads/<branch>` from `git_dir` (a bare
/// repository of ours borrowing `borrow`'s objects) with the user's own
/// credentials: unlike `clean`, the user's git configuration and variables stay
/// (a credential helper, `GIT_ASKPASS`, `GIT_SSH_COMMAND`, ssh-agent), since no
/// file of a worker's is checked out or filtered here; only what would locate
/// another repository goes, and no hook runs. The branch is agent-runner's own, so
/// it is forced (a new attempt starts from HEAD again).
pub(crate) fn push(
    git_dir: &Path,
    borrow: &Path,
    url: &str,
    commit: &str,
    branch: &str,
    interrupt: Interrupt,
) -> Result<String, PipelineError> {
    let mut invocation = Invocation::new("git");
    for name in LOCATING {
        invocation = invocation.env_remove(name);
    }
    let refspec = format!("+{commit}:refs/heads/{branch}");
    let invocation = invocation
        .env("GIT_DIR", &git_dir.display().to_string())
        .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &quoted(borrow))
        .env("GIT_TERMINAL_PROMPT", "0")
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "protocol.ext.allow=never",
            "push",
            "--porcelain",
            "--no-verify",
            "--",
            url,
            &refspec,
        ])
        .cwd(git_dir)
        .die_with_parent();
    run(&invocation, interrupt)
}

/// `git init` of a new repository in `dir`, of the object format of commit `like`
/// (SHA-1 or SHA-256, told by its length): with a work tree and HEAD on `branch`, or
/// bare (`dir` is its git directory) when `branch` is None.
pub(crate) fn init(
    dir: &Path,
    branch: Option<&str>,
    like: &str,
    interrupt: Interrupt,
) -> Result<(), PipelineError> {
    let format = if like.len() == 64 { "sha256" } else { "sha1" };
    let target = dir.display().to_string();
    let mut args = vec!["init", "--quiet", "--template=", "--object-format", format];
    match branch {
        Some(branch) => args.extend(["--initial-branch", branch]),
        None => args.push("--bare"),
    }
    args.extend(["--", &target]);
    let invocation = clean(dir.parent().unwrap_or(dir), &args);
    run(&invocation, interrupt).map(|_| ())
}

fn run(invocation: &Invocation, interrupt: Interrupt) -> Result<String, PipelineError> {
    agent_runner_core::git::run(invocation, interrupt).map_err(|e| match e {
        GitError::Interrupted { .. } => PipelineError::Interrupted,
        GitError::TimedOut { command } => PipelineError::GitTimedOut { command },
        GitError::Failed { command, stderr } => PipelineError::GitFailed { command, stderr },
        GitError::Start { source, .. } => source.into(),
    })
}
