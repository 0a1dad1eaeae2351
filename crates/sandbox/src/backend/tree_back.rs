//! The copy transport's way back where the image has no git (SPEC §21, §22): the
//! bundler (`bundler.sh`) needs git in the worker's image, so there the work
//! comes back as the volume's tree instead, one tar stream (`docker cp
//! <container>:<dir> -` through a container that never runs), read as hostile
//! data (`untar.rs`), and is committed HERE by host git in a repository of ours:
//! `git fast-import` reads blobs and one commit from us, never a work tree, so
//! nothing of the worker's (config, attributes, hooks, links) can steer it. The
//! commit is then made into a bundle and landed under the same checks as the
//! bundler's (`landing.rs`).
//!
//! What the commit holds is what the bundler's `git add -A` would: HEAD's tree
//! with the worker's changes, tracked files updated whatever the ignore rules say,
//! new files unless the repository's `.gitignore` files ignore them (asked of
//! `git check-ignore` over those files alone, written into a directory of ours)
//! or they are new build caches (`CACHE_DIRS`) the task does not keep;
//! submodules and `.agent-runner` as HEAD has them. Links are links (their
//! target's text), FIFOs and devices are left out, `.git` anywhere is left out,
//! and what is kept is bounded in size.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufWriter, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::landing;
use super::untar::{self, Kind};
use agent_runner_core::git::GitError;
use agent_runner_core::interrupt::Interrupt;

/// Most bytes of files kept (the bundler's bound on a bundle).
const MAX_KEPT: u64 = 4 << 30;
/// Most entries read.
const MAX_ENTRIES: usize = 1_000_000;
/// Longest path kept.
const MAX_PATH: usize = 4096;
/// `.gitignore` files larger than this are not read; all of them together at most
/// `MAX_IGNORES`.
const MAX_IGNORE_FILE: u64 = 1 << 20;
const MAX_IGNORES: u64 = 16 << 20;
/// Largest `ls-tree` or `check-ignore` answer read.
const MAX_LISTING: usize = 1 << 30;

/// Directories of untracked build output a repository without a `.gitignore`
/// would not want in its branch (SPEC §24), and compiled Python files: the same
/// as `bundler.sh`'s `CACHES`.
const CACHE_DIRS: &[&str] = &[
    "__pycache__",
    "node_modules",
    "target",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".gradle",
    ".next",
    ".cache",
];
const CACHE_SUFFIXES: &[&str] = &[".pyc", ".pyo"];

/// Why the tree was not committed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TreeBackError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("cannot start git fast-import: {0}")]
    Start(std::io::Error),
    #[error("git fast-import: its thread failed")]
    ImportThread,
    #[error("git ls-tree answered {0:?}")]
    LsTree(String),
    #[error("cannot feed git fast-import: {0}")]
    Feed(std::io::Error),
    #[error("the work's tree: {0}")]
    Tree(std::io::Error),
    #[error("the work's tree has more than {MAX_ENTRIES} entries")]
    TooManyEntries,
    #[error("the work's files are larger than {} GiB", MAX_KEPT >> 30)]
    TooLarge,
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What the tree is committed on.
pub(crate) struct TreeBack<'a> {
    /// The user's repository: its objects are borrowed, as data.
    pub(crate) objects: PathBuf,
    /// A directory of ours, emptied by the caller.
    pub(crate) scratch: &'a Path,
    pub(crate) task_id: &'a str,
    /// `agent-runner/<id>`.
    pub(crate) branch: &'a str,
    /// The commit the volume started from (HEAD of the copy).
    pub(crate) base: &'a str,
    /// `runner.worker.keep_untracked`.
    pub(crate) keep_untracked: bool,
    pub(crate) interrupt: Interrupt,
}

/// What came of it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Committed {
    /// The tree is HEAD's.
    Unchanged,
    /// The branch at `commit` on top of the base, as a bundle at `path`.
    Bundle { path: PathBuf, commit: String },
}

/// One path kept from the stream: its git mode and its blob's mark.
#[derive(Debug, Clone, Copy)]
struct Kept {
    mode: &'static str,
    mark: u64,
}

impl TreeBack<'_> {
    /// Reads the tar stream `tar` (the volume's directory as `docker cp` writes it:
    /// every name under one top directory) and commits it on the base.
    pub(crate) fn commit(&self, tar: impl Read) -> Result<Committed, TreeBackError> {
        let import = self.scratch.join("import");
        landing::run(
            &landing::clean(self.scratch, &["init", "-q", "--template=", "import"]),
            self.interrupt,
        )?;
        let git_dir = import.join(".git");
        let tracked = self.tracked(&git_dir)?;
        let (reader, writer) = std::io::pipe().map_err(TreeBackError::Start)?;
        let fast_import = self
            .git(&git_dir, &["fast-import", "--quiet"])
            .stdin_file(std::fs::File::from(OwnedFd::from(reader)));
        let interrupt = self.interrupt;
        let (read, imported) = std::thread::scope(|scope| {
            let importing = scope.spawn(move || landing::run(&fast_import, interrupt));
            let read = self.stream(tar, writer, &tracked, &git_dir);
            let imported = match importing.join() {
                Ok(done) => done.map_err(TreeBackError::from),
                Err(_) => Err(TreeBackError::ImportThread),
            };
            (read, imported)
        });
        read?;
        imported?;
        let reference = format!("refs/heads/{}", self.branch);
        let commit = self.git_out(&git_dir, &["rev-parse", "--verify", &reference])?;
        let tree = self.git_out(&git_dir, &["rev-parse", &format!("{commit}^{{tree}}")])?;
        let base_tree =
            self.git_out(&git_dir, &["rev-parse", &format!("{}^{{tree}}", self.base)])?;
        if tree == base_tree {
            return Ok(Committed::Unchanged);
        }
        let path = self.scratch.join("work.bundle");
        let not = format!("^{}", self.base);
        landing::run(
            &self.git(
                &git_dir,
                &[
                    "bundle",
                    "create",
                    "-q",
                    &path.display().to_string(),
                    &reference,
                    &not,
                ],
            ),
            self.interrupt,
        )?;
        Ok(Committed::Bundle { path, commit })
    }

    /// `git <args>` in our import repository, the user's objects borrowed.
    fn git(&self, git_dir: &Path, args: &[&str]) -> agent_runner_core::process::Invocation {
        landing::clean(self.scratch, args)
            .env("GIT_DIR", &git_dir.display().to_string())
            .env(
                "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                &agent_runner_core::git::quoted(&self.objects),
            )
    }

    fn git_out(&self, git_dir: &Path, args: &[&str]) -> Result<String, GitError> {
        landing::run(&self.git(git_dir, args), self.interrupt).map(|s| s.trim().to_string())
    }

    /// The base's tree: path → mode (`160000` for a submodule).
    fn tracked(&self, git_dir: &Path) -> Result<BTreeMap<Vec<u8>, String>, TreeBackError> {
        let listing = agent_runner_core::git::run_bytes(
            &self.git(git_dir, &["ls-tree", "-r", "-z", "--full-tree", self.base]),
            MAX_LISTING,
            self.interrupt,
        )?;
        let mut tracked = BTreeMap::new();
        for record in listing.split(|&b| b == 0).filter(|r| !r.is_empty()) {
            let Some(tab) = record.iter().position(|&b| b == b'\t') else {
                return Err(TreeBackError::LsTree(
                    String::from_utf8_lossy(record).into_owned(),
                ));
            };
            let mode = String::from_utf8_lossy(record.split(|&b| b == b' ').next().unwrap_or(b""));
            tracked.insert(record[tab + 1..].to_vec(), mode.into_owned());
        }
        Ok(tracked)
    }

    /// The tar stream's files as blobs into fast-import (`out`), then the commit of
    /// what is kept; closes `out` at the end.
    fn stream(
        &self,
        tar: impl Read,
        out: std::io::PipeWriter,
        tracked: &BTreeMap<Vec<u8>, String>,
        git_dir: &Path,
    ) -> Result<(), TreeBackError> {
        let mut out = BufWriter::with_capacity(1 << 16, out);
        let submodules: Vec<&Vec<u8>> = tracked
            .iter()
            .filter(|(_, mode)| *mode == "160000")
            .map(|(path, _)| path)
            .collect();
        let mut blobs = Blobs::default();
        untar::read_entries(tar, TreeBackError::Tree, &mut |entry, content| {
            blobs.entry(&mut out, &submodules, entry, content)
        })?;
        if !blobs.left_out.is_empty() {
            log::warn!(
                "left out of the branch (neither a file, a directory nor a link, or a name too long): {}",
                blobs
                    .left_out
                    .iter()
                    .take(20)
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let new: Vec<&Vec<u8>> = blobs
            .kept
            .keys()
            .filter(|p| !tracked.contains_key(*p))
            .collect();
        let ignored = self.ignored(git_dir, &blobs.ignores, &new)?;
        let dropped: BTreeSet<&Vec<u8>> = new
            .iter()
            .copied()
            .filter(|p| ignored.contains(*p) || (!self.keep_untracked && is_cache(p)))
            .collect();
        if !dropped.is_empty() {
            log::info!(
                "{} new file(s) left out of the branch: ignored by the repository's .gitignore, or build caches",
                dropped.len()
            );
        }
        self.write_commit(&mut out, tracked, &blobs.kept, &dropped)
    }

    /// The commit into fast-import (`out`, flushed): on the base, the tracked
    /// paths not `kept` deleted (submodules and our directory as the base has
    /// them), each path kept but `dropped` as its blob.
    fn write_commit(
        &self,
        out: &mut impl Write,
        tracked: &BTreeMap<Vec<u8>, String>,
        kept: &BTreeMap<Vec<u8>, Kept>,
        dropped: &BTreeSet<&Vec<u8>>,
    ) -> Result<(), TreeBackError> {
        let broken = TreeBackError::Feed;
        let message = format!("agent-runner: task {}\n", self.task_id);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        write!(
            out,
            "commit refs/heads/{}\ncommitter agent-runner <agent-runner@localhost> {now} +0000\ndata {}\n{message}from {}\n",
            self.branch,
            message.len(),
            self.base
        )
        .map_err(broken)?;
        for (path, mode) in tracked {
            let private = path.split(|&b| b == b'/').next()
                == Some(agent_runner_core::private_dir::DIR_NAME.as_bytes());
            if mode != "160000" && !private && !kept.contains_key(path) {
                out.write_all(b"D ")
                    .and_then(|()| out.write_all(&quoted(path)))
                    .and_then(|()| out.write_all(b"\n"))
                    .map_err(broken)?;
            }
        }
        for (path, this) in kept {
            if dropped.contains(path) {
                continue;
            }
            write!(out, "M {} :{} ", this.mode, this.mark)
                .and_then(|()| out.write_all(&quoted(path)))
                .and_then(|()| out.write_all(b"\n"))
                .map_err(broken)?;
        }
        out.write_all(b"\n").map_err(broken)?;
        out.flush().map_err(broken)?;
        Ok(())
    }

    /// Which of `new` the repository's `.gitignore` files (`ignores`: path,
    /// content) ignore, as git would: asked of `git check-ignore` over a directory
    /// of ours holding those files alone, with no ignore file of the user's.
    fn ignored(
        &self,
        git_dir: &Path,
        ignores: &[(Vec<u8>, Vec<u8>)],
        new: &[&Vec<u8>],
    ) -> Result<BTreeSet<Vec<u8>>, TreeBackError> {
        if ignores.is_empty() || new.is_empty() {
            return Ok(BTreeSet::new());
        }
        let tree = self.scratch.join("ignores");
        let io = |what: &Path, source: std::io::Error| TreeBackError::Io {
            path: what.to_path_buf(),
            source,
        };
        for (path, content) in ignores {
            use std::os::unix::ffi::OsStrExt;
            let file = tree.join(std::ffi::OsStr::from_bytes(path));
            if let Some(dir) = file.parent() {
                std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
            }
            std::fs::write(&file, content).map_err(|e| io(&file, e))?;
        }
        // check-ignore exits 1 when nothing is ignored, as when it fails: a path of
        // ours that is always ignored tells the two apart.
        let sentinel = format!(".agent-runner-ignored-{}", uuid::Uuid::new_v4().simple());
        let info = git_dir.join("info");
        std::fs::create_dir_all(&info).map_err(|e| io(&info, e))?;
        std::fs::write(info.join("exclude"), format!("/{sentinel}\n")).map_err(|e| io(&info, e))?;
        let mut input = sentinel.as_bytes().to_vec();
        input.push(0);
        for path in new {
            input.extend_from_slice(path);
            input.push(0);
        }
        let invocation = landing::clean(
            &tree,
            &[
                "-c",
                "core.excludesFile=/dev/null",
                "check-ignore",
                "--no-index",
                "--stdin",
                "-z",
            ],
        )
        .env("GIT_DIR", &git_dir.display().to_string())
        .env("GIT_WORK_TREE", &tree.display().to_string())
        .stdin(input);
        let answer = agent_runner_core::git::run_bytes(&invocation, MAX_LISTING, self.interrupt)?;
        Ok(answer
            .split(|&b| b == 0)
            .filter(|p| !p.is_empty() && *p != sentinel.as_bytes())
            .map(<[u8]>::to_vec)
            .collect())
    }
}

/// What the tar stream gave so far: the blobs sent to fast-import and what is
/// known of them.
#[derive(Default)]
struct Blobs {
    /// Every path kept, a hard link's as its target's.
    kept: BTreeMap<Vec<u8>, Kept>,
    /// The paths kept with a blob of their own, which a later hard link may name.
    by_name: HashMap<Vec<u8>, Kept>,
    /// The `.gitignore` files read: path, content.
    ignores: Vec<(Vec<u8>, Vec<u8>)>,
    /// Bytes of the files kept.
    total: u64,
    /// Bytes of the `.gitignore` files read.
    ignore_bytes: u64,
    /// Entries read.
    entries: usize,
    /// What is not a file, a directory nor a link, or a name too long.
    left_out: Vec<Vec<u8>>,
    /// The last blob's mark.
    mark: u64,
}

impl Blobs {
    /// One entry of the stream: left out, or kept with its blob written to `out`.
    fn entry(
        &mut self,
        out: &mut impl Write,
        submodules: &[&Vec<u8>],
        entry: untar::Entry,
        content: &mut untar::Content<'_>,
    ) -> Result<(), TreeBackError> {
        self.entries += 1;
        if self.entries > MAX_ENTRIES {
            return Err(TreeBackError::TooManyEntries);
        }
        let Some(path) = relative(&entry.name) else {
            return Ok(());
        };
        if path.len() > MAX_PATH {
            self.left_out.push(path);
            return Ok(());
        }
        if not_the_works(&path, submodules) {
            return Ok(());
        }
        let (mode, data): (&'static str, Option<Vec<u8>>) = match &entry.kind {
            Kind::Dir => return Ok(()),
            Kind::Other(_) => {
                self.left_out.push(path);
                return Ok(());
            }
            Kind::Hardlink(target) => {
                match relative(target).and_then(|t| self.by_name.get(&t).copied()) {
                    Some(earlier) => {
                        self.kept.insert(path, earlier);
                    }
                    None => self.left_out.push(path),
                }
                return Ok(());
            }
            Kind::Symlink(target) => ("120000", Some(target.clone())),
            Kind::File => self.file(&path, &entry, content)?,
        };
        self.mark += 1;
        write_blob(out, self.mark, data, entry.size, content)?;
        let this = Kept {
            mode,
            mark: self.mark,
        };
        self.by_name.insert(path.clone(), this);
        self.kept.insert(path, this);
        Ok(())
    }

    /// A file's mode, and its content when it is a `.gitignore` read (within
    /// bounds) for `ignored`; counted against `MAX_KEPT`.
    fn file(
        &mut self,
        path: &[u8],
        entry: &untar::Entry,
        content: &mut untar::Content<'_>,
    ) -> Result<(&'static str, Option<Vec<u8>>), TreeBackError> {
        self.total += entry.size;
        if self.total > MAX_KEPT {
            return Err(TreeBackError::TooLarge);
        }
        let mode = if entry.mode & 0o100 != 0 {
            "100755"
        } else {
            "100644"
        };
        let is_ignore_file = path.rsplit(|&b| b == b'/').next() == Some(b".gitignore");
        if is_ignore_file
            && entry.size <= MAX_IGNORE_FILE
            && self.ignore_bytes + entry.size <= MAX_IGNORES
        {
            let mut bytes = Vec::new();
            content.copy_to(&mut bytes).map_err(TreeBackError::Tree)?;
            self.ignore_bytes += entry.size;
            self.ignores.push((path.to_vec(), bytes.clone()));
            Ok((mode, Some(bytes)))
        } else {
            Ok((mode, None))
        }
    }
}

/// A path that is not the work's: in our directory, in a `.git` anywhere, or in
/// one of the base's `submodules`.
fn not_the_works(path: &[u8], submodules: &[&Vec<u8>]) -> bool {
    let first = path.split(|&b| b == b'/').next().unwrap_or(b"");
    let in_git = path
        .split(|&b| b == b'/')
        .any(|c| c.eq_ignore_ascii_case(b".git"));
    let in_submodule = submodules
        .iter()
        .any(|s| path == **s || (path.starts_with(s) && path.get(s.len()) == Some(&b'/')));
    first == agent_runner_core::private_dir::DIR_NAME.as_bytes() || in_git || in_submodule
}

/// Blob `mark` into fast-import (`out`): `data` when it was read already, else
/// the entry's `size` bytes of `content` as they are read.
fn write_blob(
    out: &mut impl Write,
    mark: u64,
    data: Option<Vec<u8>>,
    size: u64,
    content: &mut untar::Content<'_>,
) -> Result<(), TreeBackError> {
    let broken = TreeBackError::Feed;
    match data {
        Some(bytes) => {
            write!(out, "blob\nmark :{mark}\ndata {}\n", bytes.len())
                .and_then(|()| out.write_all(&bytes))
                .map_err(broken)?;
        }
        None => {
            write!(out, "blob\nmark :{mark}\ndata {size}\n").map_err(broken)?;
            content.copy_to(out).map_err(|e| match e.kind() {
                std::io::ErrorKind::BrokenPipe => broken(e),
                _ => TreeBackError::Tree(e),
            })?;
        }
    }
    out.write_all(b"\n").map_err(broken)
}

/// A name of the stream below its top directory, checked: None for the top
/// itself, and for a name with an empty, `.` or `..` part (never a path here).
fn relative(name: &[u8]) -> Option<Vec<u8>> {
    let name = name.strip_suffix(b"/").unwrap_or(name);
    let name = name.strip_prefix(b"./").unwrap_or(name);
    let slash = name.iter().position(|&b| b == b'/')?;
    let rest = &name[slash + 1..];
    let fine = !rest.is_empty()
        && !rest.contains(&0)
        && rest
            .split(|&b| b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b"..");
    fine.then(|| rest.to_vec())
}

/// A new file under a build cache's directory, or a compiled Python file.
fn is_cache(path: &[u8]) -> bool {
    let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    let Some((last, dirs)) = parts.split_last() else {
        return false;
    };
    dirs.iter()
        .any(|d| CACHE_DIRS.iter().any(|c| c.as_bytes() == *d))
        || CACHE_SUFFIXES.iter().any(|s| last.ends_with(s.as_bytes()))
}

/// A path as fast-import reads it: C-quoted, so that any byte but NUL can be in it.
fn quoted(path: &[u8]) -> Vec<u8> {
    let mut out = vec![b'"'];
    for &b in path {
        match b {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_below_the_top_and_caches_are_told_by_directory() {
        assert_eq!(relative(b"project/"), None);
        assert_eq!(relative(b"project/a/b.txt"), Some(b"a/b.txt".to_vec()));
        assert_eq!(relative(b"project/dir/"), Some(b"dir".to_vec()));
        for bad in [&b"project/../x"[..], b"project/a//b", b"project/./a", b"x"] {
            assert_eq!(relative(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert!(is_cache(b"src/__pycache__/m.cpython-312.pyc"));
        assert!(is_cache(b"target/debug/x"));
        assert!(is_cache(b"m.pyc"));
        assert!(!is_cache(b"target"));
        assert!(!is_cache(b"src/targets.rs"));
        assert_eq!(quoted(b"a \"b\"\n\\"), b"\"a \\\"b\\\"\\012\\\\\"".to_vec());
    }

    /// `git <args>` in `dir` (a test's own repository).
    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[test]
    fn a_tree_is_committed_as_git_add_all_would_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!(
            "agent-runner-tree-back-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let (user, work, scratch) = (dir.join("user"), dir.join("work"), dir.join("scratch"));
        for d in [&user, &work, &scratch] {
            std::fs::create_dir_all(d).unwrap();
        }
        git(&user, &["init", "-q"]);
        std::fs::write(user.join("keep.txt"), "kept\n").unwrap();
        std::fs::write(user.join("gone.txt"), "gone\n").unwrap();
        std::fs::write(user.join(".gitignore"), "*.log\n/build/\n").unwrap();
        std::fs::write(user.join("tracked.log"), "tracked although ignored\n").unwrap();
        git(&user, &["add", "-A"]);
        git(&user, &["add", "-f", "tracked.log"]);
        git(&user, &["commit", "-qm", "base"]);
        let base = git(&user, &["rev-parse", "HEAD"]);
        // The worker's tree: one file changed, one removed, new ones (some
        // ignored, a cache, a link out, an executable), a .git of its own.
        std::fs::write(work.join("keep.txt"), "changed\n").unwrap();
        std::fs::write(work.join(".gitignore"), "*.log\n/build/\n").unwrap();
        std::fs::write(work.join("tracked.log"), "updated\n").unwrap();
        std::fs::write(work.join("new.log"), "ignored\n").unwrap();
        std::fs::create_dir_all(work.join("build")).unwrap();
        std::fs::write(work.join("build/out.o"), "ignored\n").unwrap();
        std::fs::create_dir_all(work.join("src/__pycache__")).unwrap();
        std::fs::write(work.join("src/__pycache__/m.pyc"), "cache\n").unwrap();
        std::fs::write(work.join("src/m.py"), "print()\n").unwrap();
        std::fs::write(work.join("run.sh"), "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(work.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::os::unix::fs::symlink("/etc/passwd", work.join("passwd")).unwrap();
        std::fs::create_dir_all(work.join(".git/hooks")).unwrap();
        std::fs::write(work.join(".git/hooks/pre-commit"), "evil\n").unwrap();
        std::fs::create_dir_all(work.join("sub/.git")).unwrap();
        std::fs::write(work.join("sub/.git/config"), "evil\n").unwrap();
        let mut tar = super::super::tar::TarWriter::new(Vec::new());
        tar.tree(&work, "project/", &[]).unwrap();
        let stream = tar.finish().unwrap();
        let back = TreeBack {
            objects: user.join(".git/objects"),
            scratch: &scratch,
            task_id: "t",
            branch: "agent-runner/t",
            base: &base,
            keep_untracked: false,
            interrupt: Interrupt::never(),
        };
        let Committed::Bundle { path, commit } = back.commit(&stream[..]).unwrap() else {
            panic!("unchanged");
        };
        landing::land(
            &user,
            std::fs::File::open(&path).unwrap(),
            &commit,
            "agent-runner/t",
            &base,
            &scratch,
            false,
            Interrupt::never(),
        )
        .unwrap();
        let files = git(&user, &["ls-tree", "-r", "--name-only", "agent-runner/t"]);
        let files: Vec<&str> = files.lines().collect();
        assert_eq!(
            files,
            [
                ".gitignore",
                "keep.txt",
                "passwd",
                "run.sh",
                "src/m.py",
                "tracked.log"
            ]
        );
        assert_eq!(git(&user, &["show", "agent-runner/t:keep.txt"]), "changed");
        assert_eq!(
            git(&user, &["show", "agent-runner/t:tracked.log"]),
            "updated"
        );
        assert_eq!(
            git(&user, &["show", "agent-runner/t:passwd"]),
            "/etc/passwd"
        );
        let modes = git(&user, &["ls-tree", "agent-runner/t", "passwd", "run.sh"]);
        assert!(
            modes.contains("120000 blob") && modes.contains("100755 blob"),
            "{modes}"
        );
        assert_eq!(git(&user, &["rev-parse", "agent-runner/t^"]), base);
        git(&user, &["fsck", "--strict"]);
        // The same tree again, now the base: unchanged.
        let again = TreeBack {
            base: &commit,
            ..back
        };
        std::fs::remove_dir_all(&scratch).unwrap();
        std::fs::create_dir_all(&scratch).unwrap();
        let mut tar = super::super::tar::TarWriter::new(Vec::new());
        tar.tree(&work, "project/", &[]).unwrap();
        let stream = tar.finish().unwrap();
        assert_eq!(again.commit(&stream[..]).unwrap(), Committed::Unchanged);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
