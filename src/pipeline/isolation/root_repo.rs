//! root_dir's git repository, read and written as plain files, never by git: its
//! config, hooks and info may be a worker's (see `git.rs`), so no git command runs
//! in it. What the isolated attempts need of it is small: HEAD and a few branches
//! (loose ref files or `packed-refs`), which branches are checked out (HEAD files of
//! the main worktree and the linked ones), its object store (which host git reads as
//! an alternate, after a check that nothing there can hang or lead it away), and to
//! add a pack and set a branch (git's lock file protocol, so git itself is never
//! raced). Every file is reached through `PrivateDir` (no symlink followed, no FIFO
//! opened), since a worker of an in-place run could write all of `.git`.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::private_dir::{Kind, PrivateDir};

/// Levels of alternates followed (as git does).
const MAX_ALTERNATES_DEPTH: usize = 5;
/// Directory levels below an object store that are checked; git looks no deeper.
const MAX_OBJECTS_DEPTH: usize = 4;
/// Largest HEAD, ref, `gitdir:` or alternates file read.
const SMALL_FILE: u64 = 64 * 1024;

/// An opened repository of a work tree.
pub struct RootRepo {
    /// The work tree's top (root_dir).
    root: PathBuf,
    /// The work tree's own git directory (its HEAD).
    git_dir: PrivateDir,
    /// The common git directory (refs, objects, worktrees); the same directory as
    /// `git_dir` unless root_dir is a linked worktree.
    common: PrivateDir,
    /// `git_dir` and `common` are one directory.
    is_main: bool,
}

/// What HEAD names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub commit: String,
    /// `refs/heads/<name>`, unless HEAD is detached.
    pub branch: Option<String>,
}

impl RootRepo {
    /// The repository whose work tree's top is `root`: `root/.git` a directory, or a
    /// `gitdir:` file (a linked worktree). An error says why it is none.
    pub fn open(root: &Path) -> Result<RootRepo, String> {
        let top = PrivateDir::open_existing(root).map_err(|e| e.to_string())?;
        let dot_git = root.join(".git");
        let (git_dir, is_main) = match top.existing(".git") {
            Ok(dir) => (dir, true),
            Err(_) => {
                let link = read_small(&top, ".git")
                    .map_err(|e| format!("{}: not a git work tree's top ({e})", root.display()))?;
                let target = link
                    .trim_end()
                    .strip_prefix("gitdir: ")
                    .ok_or_else(|| format!("{}: not a `gitdir:` file", dot_git.display()))?;
                let path = root.join(target);
                let dir = PrivateDir::open_existing(&path)
                    .map_err(|e| format!("{} names {e}", dot_git.display()))?;
                (dir, false)
            }
        };
        let common = if is_main {
            if git_dir.exists("commondir").map_err(|e| e.to_string())? {
                return Err(format!(
                    "{} exists, which a repository's own git directory never has: git would take its configuration from where it points (planted by a worker?). Remove it",
                    dot_git.join("commondir").display()
                ));
            }
            PrivateDir::open_existing(git_dir.path()).map_err(|e| e.to_string())?
        } else {
            match read_small(&git_dir, "commondir") {
                Ok(text) => {
                    let path = git_dir.path().join(text.trim_end());
                    PrivateDir::open_existing(&path).map_err(|e| e.to_string())?
                }
                Err(_) => PrivateDir::open_existing(git_dir.path()).map_err(|e| e.to_string())?,
            }
        };
        let repo = RootRepo {
            root: root.to_path_buf(),
            git_dir,
            common,
            is_main,
        };
        for (dir, name) in [(&repo.git_dir, "HEAD"), (&repo.common, "objects")] {
            if !dir.exists(name).map_err(|e| e.to_string())? {
                return Err(format!(
                    "{} has no {name}: not a git repository",
                    dir.path().display()
                ));
            }
        }
        if repo.common.exists("reftable").map_err(|e| e.to_string())? {
            return Err(format!(
                "{}: its refs are kept in a reftable, which isolated attempts cannot read yet",
                repo.common.path().display()
            ));
        }
        Ok(repo)
    }

    /// The object store (`objects/` of the common directory).
    pub fn objects(&self) -> PathBuf {
        self.common.join("objects")
    }

    /// What HEAD names; an error if it names no commit.
    pub fn head(&self) -> Result<Head, String> {
        let text = read_small(&self.git_dir, "HEAD").map_err(|e| e.to_string())?;
        let text = text.trim_end();
        match text.strip_prefix("ref: ") {
            Some(name) => {
                let commit = self
                    .resolve(name)?
                    .ok_or_else(|| format!("HEAD names {name}, which has no commit yet"))?;
                Ok(Head {
                    commit,
                    branch: Some(name.to_string()),
                })
            }
            None if is_object_id(text) => Ok(Head {
                commit: text.to_string(),
                branch: None,
            }),
            None => Err(format!(
                "{} is neither a ref nor a commit",
                self.git_dir.join("HEAD").display()
            )),
        }
    }

    /// The commit of branch `name` (`agent-runner/x`), if there is one.
    pub fn branch(&self, name: &str) -> Result<Option<String>, String> {
        self.resolve(&format!("refs/heads/{name}"))
    }

    /// The work tree in which branch `name` is checked out, if any: root_dir, the
    /// main worktree or a linked one.
    pub fn checked_out(&self, name: &str) -> Result<Option<PathBuf>, String> {
        let wanted = format!("ref: refs/heads/{name}");
        let names =
            |dir: &PrivateDir| read_small(dir, "HEAD").is_ok_and(|head| head.trim_end() == wanted);
        if names(&self.git_dir) {
            return Ok(Some(self.root.clone()));
        }
        if !self.is_main && names(&self.common) {
            // The main worktree: the directory that holds the common `.git`.
            let main = self.common.path();
            if main.file_name().is_some_and(|n| n == ".git") {
                return Ok(main.parent().map(Path::to_path_buf));
            }
        }
        let Ok(worktrees) = self.common.existing("worktrees") else {
            return Ok(None);
        };
        for (entry, kind) in worktrees.entries().map_err(|e| e.to_string())? {
            let Ok(dir) = worktrees.existing(&entry) else {
                continue;
            };
            if kind != Kind::Dir || !names(&dir) {
                continue;
            }
            // `gitdir` names the worktree's `.git` file.
            let place = read_small(&dir, "gitdir")
                .ok()
                .and_then(|p| Path::new(p.trim_end()).parent().map(Path::to_path_buf))
                .unwrap_or_else(|| dir.path().to_path_buf());
            return Ok(Some(place));
        }
        Ok(None)
    }

    /// Refuses an object store git could block on or be led away by (a FIFO, a
    /// device, a socket or a link where git reads objects, here or in a store it
    /// borrows from): git would wait for a writer that never comes, or read a device.
    pub fn check_objects(&self) -> Result<(), String> {
        let mut stores = vec![(self.objects(), 0)];
        let mut seen = Vec::new();
        while let Some((store, depth)) = stores.pop() {
            if seen.contains(&store) {
                continue;
            }
            let dir =
                PrivateDir::open_existing(&store).map_err(|e| format!("the object store {e}"))?;
            check_tree(&dir, 0)?;
            if let Ok(info) = dir.existing("info") {
                if info.exists("alternates").unwrap_or(false) {
                    if depth >= MAX_ALTERNATES_DEPTH {
                        return Err(format!(
                            "{}: alternates nested too deep",
                            info.join("alternates").display()
                        ));
                    }
                    let text = read_small(&info, "alternates").map_err(|e| e.to_string())?;
                    for line in text.lines().map(str::trim) {
                        if line.is_empty() || line.starts_with('#') {
                            continue;
                        }
                        stores.push((store.join(line), depth + 1));
                    }
                }
            }
            seen.push(store);
        }
        Ok(())
    }

    /// Copies pack `pack-<hash>` (its `.pack`, `.rev` and `.idx`, the index last, as
    /// git does: a pack counts once its index is there) from `from` into the object
    /// store.
    pub fn add_pack(&self, from: &Path, hash: &str) -> Result<(), String> {
        if !is_object_id(hash) {
            return Err(format!("{hash:?} is not a pack name"));
        }
        let source = PrivateDir::open_existing(from).map_err(|e| e.to_string())?;
        let pack = self
            .common
            .existing("objects")
            .and_then(|objects| objects.subdir("pack"))
            .map_err(|e| e.to_string())?;
        for suffix in ["pack", "rev", "idx"] {
            let name = format!("pack-{hash}.{suffix}");
            let mut file = match source.open_file(&name) {
                Ok(file) => file,
                Err(_) if suffix == "rev" => continue,
                Err(e) => return Err(e.to_string()),
            };
            pack.write_atomic_from(&name, &mut file)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Sets branch `name` (`agent-runner/<id>`) to `commit`, or removes it (None);
    /// what it was before.
    pub fn set_branch(&self, name: &str, commit: Option<&str>) -> Result<Option<String>, String> {
        let before = self.branch(name)?;
        let mut parts: Vec<&str> = check_ref_name(name)?.collect();
        let last = parts.pop().unwrap_or_default();
        let mut dir = self
            .common
            .existing("refs")
            .and_then(|refs| refs.existing("heads"))
            .map_err(|e| e.to_string())?;
        for part in parts {
            dir = dir.subdir(part).map_err(|e| e.to_string())?;
        }
        match commit {
            Some(commit) => dir.replace_locked(last, format!("{commit}\n").as_bytes()),
            None => dir.remove(last),
        }
        .map_err(|e| e.to_string())?;
        Ok(before)
    }

    /// What ref `name` holds (a loose ref file, else `packed-refs`), following
    /// symbolic refs a few levels.
    fn resolve(&self, name: &str) -> Result<Option<String>, String> {
        let mut name = name.to_string();
        for _ in 0..5 {
            if !name.starts_with("refs/") {
                return Err(format!("{name:?} is not a ref below refs/"));
            }
            let text = match self.loose(&name)? {
                Some(text) => text,
                None => return self.packed(&name),
            };
            let text = text.trim_end();
            match text.strip_prefix("ref: ") {
                Some(next) => name = next.to_string(),
                None if is_object_id(text) => return Ok(Some(text.to_string())),
                None => return Err(format!("ref {name} holds no commit id")),
            }
        }
        Err(format!("ref {name}: symbolic refs nested too deep"))
    }

    /// The loose ref file `name`, if there is one.
    fn loose(&self, name: &str) -> Result<Option<String>, String> {
        let mut parts: Vec<&str> = check_ref_name(name)?.collect();
        let last = parts.pop().unwrap_or_default();
        let mut dir = match self.common.existing(parts[0]) {
            Ok(dir) => dir,
            Err(_) => return Ok(None),
        };
        for part in &parts[1..] {
            dir = match dir.existing(part) {
                Ok(dir) => dir,
                Err(_) => return Ok(None),
            };
        }
        if !dir.exists(last).map_err(|e| e.to_string())? {
            return Ok(None);
        }
        read_small(&dir, last)
            .map(Some)
            .map_err(|e| format!("ref {name}: {e}"))
    }

    /// Ref `name` in `packed-refs`, if it is there.
    fn packed(&self, name: &str) -> Result<Option<String>, String> {
        if !self
            .common
            .exists("packed-refs")
            .map_err(|e| e.to_string())?
        {
            return Ok(None);
        }
        let file = self
            .common
            .open_file("packed-refs")
            .map_err(|e| e.to_string())?;
        for line in BufReader::new(file).split(b'\n') {
            let line = line.map_err(|e| format!("packed-refs: {e}"))?;
            let line = String::from_utf8_lossy(&line);
            if let Some((id, refname)) = line.trim_end().split_once(' ') {
                if refname == name && is_object_id(id) {
                    return Ok(Some(id.to_string()));
                }
            }
        }
        Ok(None)
    }
}

/// Checks every entry below `dir` (an object store) down to `MAX_OBJECTS_DEPTH`.
fn check_tree(dir: &PrivateDir, depth: usize) -> Result<(), String> {
    for (name, kind) in dir.entries().map_err(|e| e.to_string())? {
        match kind {
            Kind::File => {}
            Kind::Dir if depth + 1 < MAX_OBJECTS_DEPTH => {
                let sub = dir.existing(&name).map_err(|e| e.to_string())?;
                check_tree(&sub, depth + 1)?;
            }
            Kind::Dir => {}
            Kind::Other => {
                return Err(format!(
                    "{} is a FIFO, a socket, a device or a link; git would block on it or be led away by it. Remove it",
                    dir.join(&name).display()
                ));
            }
        }
    }
    Ok(())
}

/// A small regular file's text.
fn read_small(dir: &PrivateDir, name: &str) -> std::io::Result<String> {
    let mut text = String::new();
    dir.open_file(name)?
        .take(SMALL_FILE)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// The components of a ref name that can be a path below the common directory: an
/// error for anything git would refuse or that could leave it.
fn check_ref_name(name: &str) -> Result<std::str::Split<'_, char>, String> {
    let bad = name.is_empty()
        || name.len() > 1024
        || name.contains("..")
        || name.contains("@{")
        || name.ends_with(".lock")
        || name.ends_with('.')
        || name
            .chars()
            .any(|c| c.is_control() || matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\'))
        || name
            .split('/')
            .any(|part| part.is_empty() || part.starts_with('.') || part.ends_with(".lock"));
    if bad {
        return Err(format!("{name:?} is not a valid branch name"));
    }
    Ok(name.split('/'))
}

/// A full object id (SHA-1 or SHA-256), lower-case hex.
pub fn is_object_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
