//! The repository's `.git` as the container sees it (SPEC §9). The worker may commit
//! (objects, refs, index, logs), but may not plant what git on the host would run or
//! take configuration from the next time you run git in the repository, nor what
//! agent-runner's host side reads:
//! - `.git` is a mount point of its own, so it cannot be renamed away and replaced
//!   by a directory of the worker's (a rename of a directory that only holds mount
//!   points succeeds);
//! - read-only inside it: `config` (fsmonitor, filters, `url.*`, includes,
//!   `core.hooksPath`), `hooks/`, `info/` (attributes, excludes, sparse-checkout),
//!   and, if there, `config.worktree`, `modules/` (submodules' configs) and
//!   `worktrees/` (linked worktrees' HEADs, `commondir` and `gitdir` files).
//!   `hooks/` and `info/` are created empty if missing, and `config.worktree` if
//!   `extensions.worktreeConfig` asks for it: a mount point must exist, and they
//!   change nothing for git;
//! - a `.git` file (`gitdir:` of a linked worktree or a submodule) is read-only.
//!
//! A `commondir` file in `.git` would make git read its configuration (and hooks)
//! from where it points, and cannot be forbidden by a mount (git dies on a
//! directory there): a repository's own git directory never has one, so the sweep
//! after each run removes it (`remove_redirect`). A `.git` that is a symlink, or a
//! symlink where a read-only entry goes, could be swapped under its mount: the run
//! is refused before it starts.
//!
//! What stays the worker's: the work tree, including a repository nested in it,
//! whose config git honours when it looks into it (see docs/security-model.md).

use std::io::Read;
use std::path::{Path, PathBuf};

use super::privileges::{Finding, Fix};
use agent_runner_core::fs::Dir;
use agent_runner_core::fs::dir::Kind;

/// A bind mount of a path of the repository onto the same path in the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    pub(crate) source: PathBuf,
    /// Relative to the repository.
    pub(crate) target: String,
    pub(crate) readonly: bool,
}

/// Why `.git` cannot be protected.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GitDirError {
    /// The repository or its `.git` could not be read, or an entry made.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(
        "{} is a symlink or not a regular file or directory: agent-runner cannot keep the worker from replacing it (make it a directory, or a `gitdir:` file)",
        .0.display()
    )]
    DotGitOdd(PathBuf),
    /// An entry of `.git` to be mounted read-only.
    #[error(
        "{} is a symlink (or a FIFO, a socket, a device): agent-runner cannot keep the worker from changing what it leads to; make it a plain file or directory",
        .0.display()
    )]
    EntryOdd(PathBuf),
}

/// Entries of `.git` mounted read-only when they are there.
const READ_ONLY_IF_THERE: [&str; 3] = ["config.worktree", "modules", "worktrees"];

/// The mounts that protect `repo`'s `.git` (none without one); an error if it cannot
/// be protected.
pub(crate) fn mounts(repo: &Path) -> Result<Vec<Mount>, GitDirError> {
    let top = Dir::open(repo)?;
    let kind = top
        .entries()?
        .into_iter()
        .find(|(name, _)| name == ".git")
        .map(|(_, kind)| kind);
    let dot_git = repo.join(".git");
    let mount = |name: &str, readonly: bool| Mount {
        source: repo.join(name),
        target: name.to_string(),
        readonly,
    };
    match kind {
        None => return Ok(Vec::new()),
        Some(Kind::File) => return Ok(vec![mount(".git", true)]),
        Some(Kind::Dir) => {}
        Some(Kind::Other) => return Err(GitDirError::DotGitOdd(dot_git)),
    }
    let git = top.existing(".git")?;
    let mut entries = git.entries()?;
    let kind_of = |entries: &[(String, Kind)], name: &str| {
        entries.iter().find(|(n, _)| n == name).map(|(_, k)| *k)
    };
    // Made if missing: a mount point must exist.
    for dir in ["hooks", "info"] {
        if kind_of(&entries, dir).is_none() {
            git.subdir(dir)?;
            entries.push((dir.to_string(), Kind::Dir));
        }
    }
    if kind_of(&entries, "config").is_none() {
        git.create("config")?;
        entries.push(("config".to_string(), Kind::File));
    }
    if kind_of(&entries, "config.worktree").is_none() && wants_worktree_config(&git) {
        git.create("config.worktree")?;
        entries.push(("config.worktree".to_string(), Kind::File));
    }
    let mut mounts = vec![mount(".git", false)];
    for name in ["config", "hooks", "info"]
        .into_iter()
        .chain(READ_ONLY_IF_THERE)
    {
        match kind_of(&entries, name) {
            None => {}
            Some(Kind::Other) => return Err(GitDirError::EntryOdd(git.join(name))),
            Some(_) => mounts.push(mount(&format!(".git/{name}"), true)),
        }
    }
    Ok(mounts)
}

/// True when `.git/config` turns on `extensions.worktreeConfig` (read as text: a
/// mention anywhere is enough to make the file).
fn wants_worktree_config(git: &Dir) -> bool {
    let mut text = String::new();
    git.open_file("config")
        .and_then(|file| file.take(1 << 20).read_to_string(&mut text))
        .is_ok_and(|_| text.to_ascii_lowercase().contains("worktreeconfig"))
}

/// Removes a `commondir` file from `repo`'s `.git` directory (see the module
/// documentation); what was done, if there was one.
pub(crate) fn remove_redirect(repo: &Path) -> Option<Finding> {
    let git = Dir::open(repo).and_then(|top| top.existing(".git")).ok()?;
    if !git.exists("commondir").unwrap_or(false) {
        return None;
    }
    let what = match git.remove("commondir") {
        Ok(()) => Fix::RemovedRedirect,
        Err(e) => Fix::Failed(e.to_string()),
    };
    Some(Finding {
        path: ".git/commondir".into(),
        what,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "agent-runner-git-dir-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_git_directory_gets_itself_mounted_and_its_config_hooks_and_info_read_only() {
        let repo = scratch();
        std::fs::create_dir_all(repo.join(".git/modules")).unwrap();
        std::fs::write(
            repo.join(".git/config"),
            "[extensions]\n\tworktreeConfig = true\n",
        )
        .unwrap();
        let mounts = mounts(&repo).unwrap();
        let shown: Vec<(&str, bool)> = mounts
            .iter()
            .map(|m| (m.target.as_str(), m.readonly))
            .collect();
        assert_eq!(
            shown,
            [
                (".git", false),
                (".git/config", true),
                (".git/hooks", true),
                (".git/info", true),
                (".git/config.worktree", true),
                (".git/modules", true),
            ]
        );
        assert!(repo.join(".git/hooks").is_dir() && repo.join(".git/info").is_dir());
        assert_eq!(
            std::fs::read(repo.join(".git/config.worktree")).unwrap(),
            b""
        );
        std::fs::remove_dir_all(repo).unwrap();
    }

    #[test]
    fn links_where_git_reads_config_are_refused_and_a_gitdir_file_is_read_only() {
        let repo = scratch();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::os::unix::fs::symlink("/tmp", repo.join(".git/hooks")).unwrap();
        let e = mounts(&repo).unwrap_err().to_string();
        assert!(e.contains(".git/hooks is a symlink"), "{e}");
        std::fs::remove_dir_all(repo.join(".git")).unwrap();
        std::os::unix::fs::symlink("/tmp", repo.join(".git")).unwrap();
        let e = mounts(&repo).unwrap_err().to_string();
        assert!(e.contains(".git is a symlink"), "{e}");
        std::fs::remove_file(repo.join(".git")).unwrap();
        std::fs::write(repo.join(".git"), "gitdir: /elsewhere\n").unwrap();
        assert_eq!(
            mounts(&repo).unwrap(),
            [Mount {
                source: repo.join(".git"),
                target: ".git".into(),
                readonly: true
            }]
        );
        std::fs::remove_file(repo.join(".git")).unwrap();
        assert_eq!(mounts(&repo).unwrap(), []);
        std::fs::remove_dir_all(repo).unwrap();
    }

    #[test]
    fn a_planted_commondir_is_removed() {
        let repo = scratch();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        assert_eq!(remove_redirect(&repo), None);
        std::fs::write(repo.join(".git/commondir"), "../evil\n").unwrap();
        assert_eq!(
            remove_redirect(&repo),
            Some(Finding {
                path: ".git/commondir".into(),
                what: Fix::RemovedRedirect
            })
        );
        assert!(!repo.join(".git/commondir").exists());
        std::fs::remove_dir_all(repo).unwrap();
    }
}
