//! The eval's repository: a git repository of ours (the eval workspace's root_dir)
//! that holds each case's base commit as `refs/eval/<case>`, so an attempt's clone
//! starts there (`clones::prepare`'s `start`) and its branch comes back here, and
//! from which the grader's sandbox gets an attempt's files (`git archive`). A
//! case's repository is only read: its objects as an alternate object store, or its
//! bundle unpacked (no git runs in it). None of the user's git configuration is
//! read (`core::git::clean`). The grader's files are never put here.

use std::path::{Path, PathBuf};

use super::error::EvalError;
use super::suite::Case;
use agent_runner_core::git::{clean, quoted};
use agent_runner_core::interrupt::Interrupt;

/// The file in `.git/` that marks a repository as an eval workspace's of ours.
const MARKER: &str = "agent-runner-eval";
const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "agent-runner"),
    ("GIT_AUTHOR_EMAIL", "agent-runner@localhost"),
    ("GIT_COMMITTER_NAME", "agent-runner"),
    ("GIT_COMMITTER_EMAIL", "agent-runner@localhost"),
];

/// Commits of ours are the same whenever they are made.
const FIXED_DATE: [(&str, &str); 2] = [
    ("GIT_AUTHOR_DATE", "2000-01-01T00:00:00Z"),
    ("GIT_COMMITTER_DATE", "2000-01-01T00:00:00Z"),
];

/// A repository of ours.
pub(crate) struct EvalRepo {
    git_dir: PathBuf,
}

impl EvalRepo {
    /// The eval workspace's root `root`: made (a repository with one commit) when it
    /// does not exist or is empty; else it must be one we made.
    pub(crate) fn open_root(root: &Path, interrupt: Interrupt) -> Result<EvalRepo, EvalError> {
        let git_dir = root.join(".git");
        if git_dir.join(MARKER).is_file() {
            return Ok(EvalRepo { git_dir });
        }
        let empty = match std::fs::read_dir(root) {
            Ok(mut entries) => entries.next().is_none(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(EvalError::io("read", root)(e)),
        };
        if !empty {
            return Err(EvalError::NotEvalRoot {
                path: root.to_path_buf(),
                detail: "it is not empty; name a new or empty directory with -w".into(),
            });
        }
        std::fs::create_dir_all(root).map_err(EvalError::io("create", root))?;
        let readme = root.join("README.md");
        std::fs::write(
            &readme,
            "agent-runner's evaluation workspace: each case's base is refs/eval/<case>, each run's branch agent-runner/<task>.\n",
        )
        .map_err(EvalError::io("write", &readme))?;
        let repo = EvalRepo { git_dir };
        repo.git(root, &["init", "-q", "-b", "main", "."], &[], interrupt)?;
        repo.git(root, &["add", "README.md"], &[], interrupt)?;
        let mut env = IDENTITY.to_vec();
        env.extend(FIXED_DATE);
        repo.git(
            root,
            &["commit", "-q", "-m", "agent-runner evaluation workspace"],
            &env,
            interrupt,
        )?;
        let marker = repo.git_dir.join(MARKER);
        std::fs::write(&marker, "").map_err(EvalError::io("write", &marker))?;
        Ok(repo)
    }

    /// A bare repository of ours in `dir` (made), for `eval validate`.
    pub(crate) fn scratch(dir: &Path, interrupt: Interrupt) -> Result<EvalRepo, EvalError> {
        std::fs::create_dir_all(dir).map_err(EvalError::io("create", dir))?;
        let repo = EvalRepo {
            git_dir: dir.to_path_buf(),
        };
        repo.git(dir, &["init", "-q", "--bare", "."], &[], interrupt)?;
        Ok(repo)
    }

    /// The case's base as `refs/eval/<case>` here (kept if already there): its
    /// full commit id.
    pub(crate) fn import(&self, case: &Case, interrupt: Interrupt) -> Result<String, EvalError> {
        let name = format!("refs/eval/{}", case.id);
        if let Ok(have) = self.rev(&name, interrupt)
            && have.starts_with(&case.base)
        {
            return Ok(have);
        }
        let fail = |detail: String| EvalError::Case {
            case: case.id.clone(),
            detail,
        };
        let borrowed;
        let mut env: Vec<(&str, &str)> = Vec::new();
        if case.repo.is_file() {
            self.git(
                &self.git_dir,
                &["bundle", "unbundle", &case.repo.display().to_string()],
                &[],
                interrupt,
            )
            .map_err(|e| fail(format!("the bundle {}: {e}", case.repo.display())))?;
        } else {
            let objects = [case.repo.join(".git/objects"), case.repo.join("objects")]
                .into_iter()
                .find(|p| p.is_dir())
                .ok_or_else(|| {
                    fail(format!(
                        "{} is neither a git repository nor a bundle",
                        case.repo.display()
                    ))
                })?;
            borrowed = quoted(&objects);
            env.push(("GIT_ALTERNATE_OBJECT_DIRECTORIES", &borrowed));
        }
        let commit = self
            .git(
                &self.git_dir,
                &[
                    "rev-parse",
                    "--verify",
                    "-q",
                    &format!("{}^{{commit}}", case.base),
                ],
                &env,
                interrupt,
            )
            .map(|s| s.trim().to_string())
            .map_err(|_| {
                fail(format!(
                    "base {} is no commit of {}",
                    case.base,
                    case.repo.display()
                ))
            })?;
        self.git(
            &self.git_dir,
            &["update-ref", &name, &commit],
            &env,
            interrupt,
        )?;
        // Without `-l`, the objects the ref needs are copied into our own pack.
        self.git(
            &self.git_dir,
            &["repack", "-a", "-d", "-q", "--no-write-bitmap-index"],
            &env,
            interrupt,
        )?;
        Ok(commit)
    }

    /// A commit of `base` with the patch `patch` applied (a case's solution).
    pub(crate) fn with_patch(
        &self,
        case: &str,
        base: &str,
        patch: &Path,
        interrupt: Interrupt,
    ) -> Result<String, EvalError> {
        let index = self
            .git_dir
            .join(format!("eval-index-{}", uuid::Uuid::new_v4().simple()));
        let index_text = index.display().to_string();
        let env = [("GIT_INDEX_FILE", index_text.as_str())];
        let made = (|| {
            self.git(&self.git_dir, &["read-tree", base], &env, interrupt)?;
            self.git(
                &self.git_dir,
                &["apply", "--cached", &patch.display().to_string()],
                &env,
                interrupt,
            )
            .map_err(|e| EvalError::Case {
                case: case.to_string(),
                detail: format!(
                    "the solution {} does not apply to the base: {e}",
                    patch.display()
                ),
            })?;
            let tree = self.git(&self.git_dir, &["write-tree"], &env, interrupt)?;
            let mut env = IDENTITY.to_vec();
            env.extend(FIXED_DATE);
            let commit = self.git(
                &self.git_dir,
                &[
                    "commit-tree",
                    tree.trim(),
                    "-p",
                    base,
                    "-m",
                    "the case's solution",
                ],
                &env,
                interrupt,
            )?;
            Ok(commit.trim().to_string())
        })();
        let _ = std::fs::remove_file(&index);
        made
    }

    /// `commit`'s files as a tar file at `out`.
    pub(crate) fn archive(
        &self,
        commit: &str,
        out: &Path,
        interrupt: Interrupt,
    ) -> Result<(), EvalError> {
        self.git(
            &self.git_dir,
            &[
                "archive",
                "--format=tar",
                "-o",
                &out.display().to_string(),
                commit,
            ],
            &[],
            interrupt,
        )?;
        Ok(())
    }

    /// The file `path` of `commit`.
    pub(crate) fn show(
        &self,
        commit: &str,
        path: &str,
        interrupt: Interrupt,
    ) -> Result<String, EvalError> {
        self.git(
            &self.git_dir,
            &["show", &format!("{commit}:{path}")],
            &[],
            interrupt,
        )
    }

    /// The commit `name` is (a branch, a ref), if any.
    pub(crate) fn rev(&self, name: &str, interrupt: Interrupt) -> Result<String, EvalError> {
        Ok(self
            .git(
                &self.git_dir,
                &["rev-parse", "--verify", "-q", &format!("{name}^{{commit}}")],
                &[],
                interrupt,
            )?
            .trim()
            .to_string())
    }

    fn git(
        &self,
        cwd: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        interrupt: Interrupt,
    ) -> Result<String, EvalError> {
        let mut invocation = clean(cwd, args).env("GIT_DIR", &self.git_dir.display().to_string());
        if cwd != self.git_dir {
            invocation = invocation.env("GIT_WORK_TREE", &cwd.display().to_string());
        }
        for (name, value) in env {
            invocation = invocation.env(name, value);
        }
        agent_runner_core::git::run(&invocation, interrupt).map_err(|e| match e {
            agent_runner_core::git::GitError::Interrupted { .. } => EvalError::Interrupted,
            e => EvalError::Git(e.to_string()),
        })
    }
}
