//! root_dir's git repository, read and written as plain files, never by git: its
//! config, hooks and info may be a worker's (see `git.rs`), so no git command runs
//! in it. What the isolated attempts need of it is small: HEAD and a few branches
//! (loose ref files or `packed-refs`), which branches are checked out (HEAD files of
//! the main worktree and the linked ones), its object store (which host git reads as
//! an alternate, after a check that nothing there can hang or lead it away), and to
//! add a pack and set a branch (git's lock file protocol, so git itself is never
//! raced). Every file is reached through `fs::Dir` (no symlink followed, no FIFO
//! opened), since a worker of an in-place run could write all of `.git`.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::PipelineError;
use agent_runner_core::fs::Dir;
use agent_runner_core::fs::dir::Kind;
use agent_runner_core::interrupt::Interrupt;

/// Levels of alternates followed (as git does).
const MAX_ALTERNATES_DEPTH: usize = 5;
/// Directory levels below an object store that are checked; git looks no deeper.
const MAX_OBJECTS_DEPTH: usize = 4;
/// Largest HEAD, ref, `gitdir:` or alternates file read.
const SMALL_FILE: u64 = 64 * 1024;

/// An opened repository of a work tree.
pub(crate) struct RootRepo {
    /// The work tree's top (root_dir).
    root: PathBuf,
    /// The work tree's own git directory (its HEAD).
    git_dir: Dir,
    /// The common git directory (refs, objects, worktrees); the same directory as
    /// `git_dir` unless root_dir is a linked worktree.
    common: Dir,
    /// `git_dir` and `common` are one directory.
    is_main: bool,
}

/// What HEAD names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) commit: String,
    /// `refs/heads/<name>`, unless HEAD is detached.
    pub(crate) branch: Option<String>,
}

impl RootRepo {
    /// The repository whose work tree's top is `root`: `root/.git` a directory, or a
    /// `gitdir:` file (a linked worktree). An error says why it is none.
    pub(crate) fn open(root: &Path) -> Result<RootRepo, PipelineError> {
        let top = Dir::open(root).map_err(PipelineError::Fs)?;
        let dot_git = root.join(".git");
        let (git_dir, is_main) = match top.existing(".git") {
            Ok(dir) => (dir, true),
            Err(_) => {
                let link =
                    read_small(&top, ".git").map_err(|source| PipelineError::NotAWorkTree {
                        root: root.to_path_buf(),
                        source,
                    })?;
                let target = link
                    .trim_end()
                    .strip_prefix("gitdir: ")
                    .ok_or_else(|| PipelineError::NotAGitdirFile(dot_git.clone()))?;
                let path = root.join(target);
                let dir = Dir::open(&path).map_err(|source| PipelineError::GitdirTarget {
                    dot_git: dot_git.clone(),
                    source,
                })?;
                (dir, false)
            }
        };
        let common = if is_main {
            if git_dir.exists("commondir").map_err(PipelineError::Fs)? {
                return Err(PipelineError::PlantedCommondir(dot_git.join("commondir")));
            }
            Dir::open(git_dir.path()).map_err(PipelineError::Fs)?
        } else {
            match read_small(&git_dir, "commondir") {
                Ok(text) => {
                    // Usually `../..`: named as it is, for messages.
                    let path = git_dir.path().join(text.trim_end());
                    let path = std::fs::canonicalize(&path).unwrap_or(path);
                    Dir::open(&path).map_err(PipelineError::Fs)?
                }
                Err(_) => Dir::open(git_dir.path()).map_err(PipelineError::Fs)?,
            }
        };
        let repo = RootRepo {
            root: root.to_path_buf(),
            git_dir,
            common,
            is_main,
        };
        for (dir, name) in [(&repo.git_dir, "HEAD"), (&repo.common, "objects")] {
            if !dir.exists(name).map_err(PipelineError::Fs)? {
                return Err(PipelineError::NotARepository {
                    dir: dir.path().to_path_buf(),
                    missing: name,
                });
            }
        }
        if repo.common.exists("reftable").map_err(PipelineError::Fs)? {
            return Err(PipelineError::Reftable(repo.common.path().to_path_buf()));
        }
        Ok(repo)
    }

    /// The object store (`objects/` of the common directory).
    pub(crate) fn objects(&self) -> PathBuf {
        self.common.join("objects")
    }

    /// Makes `dir` anew a bare repository of ours, in the object format of commit
    /// `like`, that borrows this repository's objects (checked first), so that git
    /// runs on them without running in root_dir; returns the objects' directory,
    /// for the `Repo::borrow` of `dir`.
    pub(crate) fn borrowed_by(
        &self,
        dir: &Path,
        like: &str,
        interrupt: Interrupt,
    ) -> Result<PathBuf, PipelineError> {
        let _ = std::fs::remove_dir_all(dir);
        if let Some(parent) = dir.parent() {
            crate::store::workspace::create_dir(parent)
                .map_err(PipelineError::io("create", parent))?;
        }
        super::git::init(dir, None, like, interrupt)?;
        self.check_objects()?;
        Ok(self.objects())
    }

    /// What HEAD names; an error if it names no commit.
    pub(crate) fn head(&self) -> Result<Head, PipelineError> {
        let text = read_small(&self.git_dir, "HEAD").map_err(PipelineError::Fs)?;
        let text = text.trim_end();
        match text.strip_prefix("ref: ") {
            Some(name) => {
                let commit = self
                    .resolve(name)?
                    .ok_or_else(|| PipelineError::UnbornHead(name.to_string()))?;
                Ok(Head {
                    commit,
                    branch: Some(name.to_string()),
                })
            }
            None if is_object_id(text) => Ok(Head {
                commit: text.to_string(),
                branch: None,
            }),
            None => Err(PipelineError::BadHead(self.git_dir.join("HEAD"))),
        }
    }

    /// The commit of branch `name` (`agent-runner/x`), if there is one.
    pub(crate) fn branch(&self, name: &str) -> Result<Option<String>, PipelineError> {
        self.resolve(&format!("refs/heads/{name}"))
    }

    /// The work tree in which branch `name` is checked out, if any: root_dir, the
    /// main worktree or a linked one.
    pub(crate) fn checked_out(&self, name: &str) -> Result<Option<PathBuf>, PipelineError> {
        let wanted = format!("ref: refs/heads/{name}");
        let names = |dir: &Dir| read_small(dir, "HEAD").is_ok_and(|head| head.trim_end() == wanted);
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
        for (entry, kind) in worktrees.entries().map_err(PipelineError::Fs)? {
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
    pub(crate) fn check_objects(&self) -> Result<(), PipelineError> {
        let mut stores = vec![(self.objects(), 0)];
        let mut seen = Vec::new();
        while let Some((store, depth)) = stores.pop() {
            if seen.contains(&store) {
                continue;
            }
            let dir = Dir::open(&store).map_err(PipelineError::ObjectStore)?;
            check_tree(&dir, 0)?;
            if let Ok(info) = dir.existing("info")
                && info.exists("alternates").unwrap_or(false)
            {
                if depth >= MAX_ALTERNATES_DEPTH {
                    return Err(PipelineError::AlternatesTooDeep(info.join("alternates")));
                }
                let text = read_small(&info, "alternates").map_err(PipelineError::Fs)?;
                for line in text.lines().map(str::trim) {
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    stores.push((store.join(line), depth + 1));
                }
            }
            seen.push(store);
        }
        Ok(())
    }

    /// Copies pack `pack-<hash>` (its `.pack`, `.rev` and `.idx`, the index last, as
    /// git does: a pack counts once its index is there) from `from` into the object
    /// store.
    pub(crate) fn add_pack(&self, from: &Path, hash: &str) -> Result<(), PipelineError> {
        if !is_object_id(hash) {
            return Err(PipelineError::NotAPackName(hash.to_string()));
        }
        let source = Dir::open(from).map_err(PipelineError::Fs)?;
        let pack = self
            .common
            .existing("objects")
            .and_then(|objects| objects.subdir("pack"))
            .map_err(PipelineError::Fs)?;
        for suffix in ["pack", "rev", "idx"] {
            let name = format!("pack-{hash}.{suffix}");
            let mut file = match source.open_file(&name) {
                Ok(file) => file,
                Err(_) if suffix == "rev" => continue,
                Err(e) => return Err(PipelineError::Fs(e)),
            };
            pack.write_atomic_from(&name, &mut file)
                .map_err(PipelineError::Fs)?;
        }
        Ok(())
    }

    /// Sets branch `name` (`agent-runner/<id>`) to `commit`, or removes it (None);
    /// what it was before.
    pub(crate) fn set_branch(
        &self,
        name: &str,
        commit: Option<&str>,
    ) -> Result<Option<String>, PipelineError> {
        let before = self.branch(name)?;
        let mut parts: Vec<&str> = check_ref_name(name)?.collect();
        let last = parts.pop().unwrap_or_default();
        let mut dir = self
            .common
            .existing("refs")
            .and_then(|refs| refs.existing("heads"))
            .map_err(PipelineError::Fs)?;
        for part in parts {
            dir = dir.subdir(part).map_err(PipelineError::Fs)?;
        }
        match commit {
            Some(commit) => dir.replace_locked(last, format!("{commit}\n").as_bytes()),
            None => dir.remove(last),
        }
        .map_err(PipelineError::Fs)?;
        Ok(before)
    }

    /// What ref `name` holds (a loose ref file, else `packed-refs`), following
    /// symbolic refs a few levels.
    fn resolve(&self, name: &str) -> Result<Option<String>, PipelineError> {
        let mut name = name.to_string();
        for _ in 0..5 {
            if !name.starts_with("refs/") {
                return Err(PipelineError::NotARef(name));
            }
            let text = match self.loose(&name)? {
                Some(text) => text,
                None => return self.packed(&name),
            };
            let text = text.trim_end();
            match text.strip_prefix("ref: ") {
                Some(next) => name = next.to_string(),
                None if is_object_id(text) => return Ok(Some(text.to_string())),
                None => return Err(PipelineError::RefWithoutCommit(name)),
            }
        }
        Err(PipelineError::RefsTooDeep(name))
    }

    /// The loose ref file `name`, if there is one.
    fn loose(&self, name: &str) -> Result<Option<String>, PipelineError> {
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
        if !dir.exists(last).map_err(PipelineError::Fs)? {
            return Ok(None);
        }
        read_small(&dir, last)
            .map(Some)
            .map_err(|source| PipelineError::RefUnreadable {
                name: name.to_string(),
                source,
            })
    }

    /// Ref `name` in `packed-refs`, if it is there.
    fn packed(&self, name: &str) -> Result<Option<String>, PipelineError> {
        if !self
            .common
            .exists("packed-refs")
            .map_err(PipelineError::Fs)?
        {
            return Ok(None);
        }
        let file = self
            .common
            .open_file("packed-refs")
            .map_err(PipelineError::Fs)?;
        for line in BufReader::new(file).split(b'\n') {
            let line = line.map_err(PipelineError::PackedRefs)?;
            let line = String::from_utf8_lossy(&line);
            if let Some((id, refname)) = line.trim_end().split_once(' ')
                && refname == name
                && is_object_id(id)
            {
                return Ok(Some(id.to_string()));
            }
        }
        Ok(None)
    }
}

/// Checks every entry below `dir` (an object store) down to `MAX_OBJECTS_DEPTH`.
fn check_tree(dir: &Dir, depth: usize) -> Result<(), PipelineError> {
    for (name, kind) in dir.entries().map_err(PipelineError::Fs)? {
        match kind {
            Kind::File => {}
            Kind::Dir if depth + 1 < MAX_OBJECTS_DEPTH => {
                let sub = dir.existing(&name).map_err(PipelineError::Fs)?;
                check_tree(&sub, depth + 1)?;
            }
            Kind::Dir => {}
            Kind::Other => {
                return Err(PipelineError::BlockingObject(dir.join(&name)));
            }
        }
    }
    Ok(())
}

/// A small regular file's text.
fn read_small(dir: &Dir, name: &str) -> std::io::Result<String> {
    let mut text = String::new();
    dir.open_file(name)?
        .take(SMALL_FILE)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// The components of a ref name that can be a path below the common directory: an
/// error for anything git would refuse or that could leave it.
fn check_ref_name(name: &str) -> Result<std::str::Split<'_, char>, PipelineError> {
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
        return Err(PipelineError::BadBranchName(name.to_string()));
    }
    Ok(name.split('/'))
}

pub(crate) use agent_runner_sandbox::backend::landing::is_object_id;

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::process::Command;

    /// Host git of the test's own, in `dir`; stdout.
    pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args([
                "-c",
                "safe.directory=*",
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@l",
            ])
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {:?}", out.stderr);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A repository with one commit on `main`, in a new directory; (dir, commit).
    pub(crate) fn repo(name: &str) -> (PathBuf, String) {
        let dir = std::env::temp_dir().join(format!(
            "ar-root-repo-{name}-{}",
            crate::store::id::random_hex(8)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        git(&dir, &["commit", "-q", "--allow-empty", "-m", "one"]);
        let head = git(&dir, &["rev-parse", "HEAD"]);
        (dir, head)
    }

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    #[test]
    fn reads_head_and_branches_loose_or_packed_as_git_does() {
        let (dir, one) = repo("read");
        let repo = RootRepo::open(&dir).unwrap();
        assert_eq!(
            repo.head().unwrap(),
            Head {
                commit: one.clone(),
                branch: Some("refs/heads/main".into())
            }
        );
        git(&dir, &["branch", "agent-runner/x"]);
        git(&dir, &["pack-refs", "--all"]);
        assert_eq!(repo.branch("agent-runner/x").unwrap(), Some(one.clone()));
        assert_eq!(repo.branch("agent-runner/y").unwrap(), None);
        git(&dir, &["commit", "-q", "--allow-empty", "-m", "two"]);
        let two = git(&dir, &["rev-parse", "HEAD"]);
        // A loose ref wins over its packed line, as in git.
        assert_eq!(
            repo.set_branch("agent-runner/x", Some(&two)).unwrap(),
            Some(one)
        );
        assert_eq!(git(&dir, &["rev-parse", "agent-runner/x"]), two);
        assert_eq!(repo.branch("agent-runner/x").unwrap(), Some(two.clone()));
        assert!(repo.branch("../../HEAD").is_err());
        assert!(repo.set_branch("agent-runner/.x", Some(&two)).is_err());
        git(&dir, &["checkout", "-q", "--detach"]);
        assert_eq!(repo.head().unwrap().branch, None);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_branch_is_set_under_git_s_lock_and_nowhere_else() {
        let (dir, one) = repo("lock");
        let repo = RootRepo::open(&dir).unwrap();
        std::fs::create_dir_all(dir.join(".git/refs/heads/agent-runner")).unwrap();
        std::fs::write(dir.join(".git/refs/heads/agent-runner/x.lock"), "").unwrap();
        let e = repo
            .set_branch("agent-runner/x", Some(&one))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x.lock: exists: another process is updating it"),
            "{e}"
        );
        std::fs::remove_file(dir.join(".git/refs/heads/agent-runner/x.lock")).unwrap();
        // A link where the branch's directory goes is not followed.
        let outside = dir.join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::remove_dir(dir.join(".git/refs/heads/agent-runner")).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join(".git/refs/heads/agent-runner")).unwrap();
        assert!(repo.set_branch("agent-runner/x", Some(&one)).is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        std::fs::remove_file(dir.join(".git/refs/heads/agent-runner")).unwrap();
        repo.set_branch("agent-runner/x", Some(&one)).unwrap();
        assert_eq!(git(&dir, &["rev-parse", "agent-runner/x"]), one);
        repo.set_branch("agent-runner/x", None).unwrap();
        assert_eq!(repo.branch("agent-runner/x").unwrap(), None);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn knows_which_worktree_has_a_branch_checked_out() {
        let (dir, _) = repo("worktrees");
        let linked = dir.with_extension("linked");
        git(
            &dir,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "agent-runner/w",
                linked.to_str().unwrap(),
            ],
        );
        let main = RootRepo::open(&dir).unwrap();
        assert_eq!(main.checked_out("main").unwrap(), Some(dir.clone()));
        assert_eq!(
            main.checked_out("agent-runner/w").unwrap(),
            Some(linked.clone())
        );
        assert_eq!(main.checked_out("agent-runner/z").unwrap(), None);
        // From the linked worktree's side (root_dir may be one).
        let from_linked = RootRepo::open(&linked).unwrap();
        assert_eq!(
            from_linked.head().unwrap().branch.as_deref(),
            Some("refs/heads/agent-runner/w")
        );
        assert_eq!(
            from_linked.checked_out("agent-runner/w").unwrap(),
            Some(linked.clone())
        );
        assert_eq!(from_linked.checked_out("main").unwrap(), Some(dir.clone()));
        assert_eq!(from_linked.objects(), dir.join(".git/objects"));
        std::fs::remove_dir_all(linked).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn refuses_a_planted_commondir_and_what_git_would_hang_on_in_the_object_store() {
        let (dir, _) = repo("objects");
        std::fs::write(dir.join(".git/commondir"), "../evil\n").unwrap();
        let e = RootRepo::open(&dir).err().unwrap().to_string();
        assert!(e.contains(".git/commondir exists"), "{e}");
        std::fs::remove_file(dir.join(".git/commondir")).unwrap();
        let repo = RootRepo::open(&dir).unwrap();
        repo.check_objects().unwrap();
        let fifo = dir.join(".git/objects/info/commit-graph");
        mkfifo(&fifo);
        let e = repo.check_objects().unwrap_err().to_string();
        assert!(e.contains("commit-graph is a FIFO"), "{e}");
        std::fs::remove_file(&fifo).unwrap();
        // A fan-out name the repository's own objects do not use (they vary by run).
        let link = (0..=255u8)
            .map(|n| dir.join(format!(".git/objects/{n:02x}")))
            .find(|path| !path.exists())
            .unwrap();
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(repo.check_objects().is_err(), "a link");
        std::fs::remove_file(&link).unwrap();
        // A store it borrows from is checked too.
        let other = dir.with_extension("other");
        std::fs::create_dir_all(other.join("pack")).unwrap();
        mkfifo(&other.join("pack/pack-x.idx"));
        std::fs::write(
            dir.join(".git/objects/info/alternates"),
            format!("{}\n", other.display()),
        )
        .unwrap();
        let e = repo.check_objects().unwrap_err().to_string();
        assert!(e.contains("pack-x.idx is a FIFO"), "{e}");
        std::fs::remove_dir_all(other).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
