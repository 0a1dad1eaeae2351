//! A bundle of the worker's branch landed in the user's repository (SPEC §12, §22):
//! the copy transport's way back. The bundle came from a container that read what
//! the worker wrote, so nothing of it is trusted: its header must name exactly the
//! branch and commit the bundler said, its pack is indexed and checked (`index-pack
//! --strict`, the commit a commit, every object of the branch there) in a landing
//! repository of ours that borrows the user's objects as data, and only then is the
//! pack copied into the user's object store and the branch written as a ref file.
//!
//! No git runs in the user's repository (its config, hooks and attributes are never
//! read, SPEC §9); its `.git` is read as data (HEAD, a ref), and only the pack and
//! the ref `agent-runner/<id>` are added to it. A branch checked out there, or one
//! that moved elsewhere since, is left as it is; the working tree is never touched.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use agent_runner_core::git::GitError;
use agent_runner_core::interrupt::Interrupt;

/// Why a bundle was not landed, or the user's repository not read.
#[derive(Debug, thiserror::Error)]
pub enum LandingError {
    #[error("cannot read the bundle: {0}")]
    ReadBundle(std::io::Error),
    #[error("the bundle's header does not end")]
    HeaderUnended,
    #[error("not a git bundle: {0:?}")]
    NotABundle(String),
    #[error("the bundle's header has the line {0:?}")]
    HeaderLine(String),
    #[error("{} is not a directory (a link or a worktree's file): the copy transport needs a repository of its own", .0.display())]
    GitDirNotADirectory(PathBuf),
    #[error("{}: {source}: the copy transport needs a git repository", .path.display())]
    NoGitDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("HEAD names {0}, which has no commit yet")]
    UnbornHead(String),
    #[error("HEAD says {0:?}")]
    Head(String),
    #[error("{name} says {text:?}")]
    Ref { name: String, text: String },
    /// A file or directory of `.git` not read or made.
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot add {name} to {}: {source}", .to.display())]
    AddPack {
        name: String,
        to: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {name}: {source}")]
    WriteRef {
        name: String,
        source: std::io::Error,
    },
    #[error("{0:?} is not a branch's ref")]
    NotABranchRef(String),
    #[error("the bundle lists {listed:?}, not {wanted} at {commit}: refused")]
    OtherRefs {
        listed: Vec<(String, String)>,
        wanted: String,
        commit: String,
    },
    #[error("{branch} is checked out in {}: it is left as it is", .repo.display())]
    CheckedOut { branch: String, repo: PathBuf },
    #[error("git index-pack answered {0:?}")]
    IndexPack(String),
    #[error("the bundle's {commit} is a {kind}, not a commit")]
    NotACommit { commit: String, kind: String },
    #[error(
        "the branch {branch} is at {before}, which the work does not build on: it is left as it is"
    )]
    Moved { branch: String, before: String },
    #[error(transparent)]
    Git(#[from] GitError),
}

/// Largest bundle header read (a few refs and prerequisites).
const MAX_HEADER: u64 = 64 * 1024;

/// The refs a bundle's header lists (`(id, name)`), and the file at its pack.
pub fn past_header(file: File) -> Result<(File, Vec<(String, String)>), LandingError> {
    let mut reader = BufReader::new(Read::take(file, MAX_HEADER));
    let mut offset = 0u64;
    let mut refs = Vec::new();
    let mut line = Vec::new();
    let mut first = true;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(LandingError::ReadBundle)?;
        if read == 0 || line.last() != Some(&b'\n') {
            return Err(LandingError::HeaderUnended);
        }
        offset += read as u64;
        let text = String::from_utf8_lossy(&line[..read - 1]).into_owned();
        if first {
            if text != "# v2 git bundle" && text != "# v3 git bundle" {
                return Err(LandingError::NotABundle(text));
            }
            first = false;
            continue;
        }
        if text.is_empty() {
            break;
        }
        if text.starts_with('-') || text.starts_with('@') {
            continue;
        }
        match text.split_once(' ') {
            Some((id, name)) if is_object_id(id) => refs.push((id.to_string(), name.to_string())),
            _ => return Err(LandingError::HeaderLine(text)),
        }
    }
    let mut file = reader.into_inner().into_inner();
    file.seek(SeekFrom::Start(offset))
        .map_err(LandingError::ReadBundle)?;
    Ok((file, refs))
}

/// A full object id (SHA-1 or SHA-256), lower-case hex.
pub fn is_object_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The user's repository, read as data.
pub(crate) struct UserRepo {
    git_dir: PathBuf,
}

impl UserRepo {
    /// `repo`'s `.git`, a plain directory (not a link, not a worktree's file).
    pub(crate) fn open(repo: &Path) -> Result<UserRepo, LandingError> {
        let git_dir = repo.join(".git");
        match std::fs::symlink_metadata(&git_dir) {
            Ok(m) if m.is_dir() => Ok(UserRepo { git_dir }),
            Ok(_) => Err(LandingError::GitDirNotADirectory(git_dir)),
            Err(source) => Err(LandingError::NoGitDir {
                path: git_dir,
                source,
            }),
        }
    }

    pub(crate) fn objects(&self) -> PathBuf {
        self.git_dir.join("objects")
    }

    /// What HEAD names: `(ref, commit)`; ref None when HEAD is a commit.
    pub(crate) fn head(&self) -> Result<(Option<String>, String), LandingError> {
        let text = small(&self.git_dir.join("HEAD"))?;
        let text = text.trim();
        if let Some(name) = text.strip_prefix("ref: ") {
            let commit = self
                .resolve(name)?
                .ok_or_else(|| LandingError::UnbornHead(name.to_string()))?;
            return Ok((Some(name.to_string()), commit));
        }
        if is_object_id(text) {
            return Ok((None, text.to_string()));
        }
        Err(LandingError::Head(text.to_string()))
    }

    /// The commit of ref `name` (loose, else packed), if there is one.
    pub(crate) fn resolve(&self, name: &str) -> Result<Option<String>, LandingError> {
        check_ref(name)?;
        let loose = self.git_dir.join(name);
        if loose.exists() {
            let text = small(&loose)?;
            let id = text.trim();
            return match is_object_id(id) {
                true => Ok(Some(id.to_string())),
                false => Err(LandingError::Ref {
                    name: name.to_string(),
                    text: id.to_string(),
                }),
            };
        }
        let packed = self.git_dir.join("packed-refs");
        if !packed.exists() {
            return Ok(None);
        }
        let text = small(&packed)?;
        Ok(text.lines().find_map(|line| {
            let (id, n) = line.split_once(' ')?;
            (n == name && is_object_id(id)).then(|| id.to_string())
        }))
    }

    /// Adds the pack `hash` of `from` to the object store: the pack first, its index
    /// last (git only sees a pack through its index).
    fn add_pack(&self, from: &Path, hash: &str) -> Result<(), LandingError> {
        let to = self.objects().join("pack");
        std::fs::create_dir_all(&to).map_err(|source| LandingError::Io {
            path: to.clone(),
            source,
        })?;
        for ext in ["pack", "idx"] {
            let name = format!("pack-{hash}.{ext}");
            let tmp = to.join(format!(".agent-runner-{name}"));
            std::fs::copy(from.join(&name), &tmp)
                .and_then(|_| std::fs::rename(&tmp, to.join(&name)))
                .map_err(|source| LandingError::AddPack {
                    name,
                    to: to.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// Sets branch ref `name` to `commit`, under git's lock file, no link in its
    /// path followed.
    fn set_ref(&self, name: &str, commit: &str) -> Result<(), LandingError> {
        check_ref(name)?;
        let io = |source: std::io::Error| LandingError::WriteRef {
            name: name.to_string(),
            source,
        };
        let mut parts: Vec<&str> = name.split('/').collect();
        let last = parts.pop().unwrap_or_default();
        let mut dir = agent_runner_core::fs::Dir::open(&self.git_dir).map_err(io)?;
        for part in parts {
            dir = dir.subdir(part).map_err(io)?;
        }
        dir.replace_locked(last, format!("{commit}\n").as_bytes())
            .map_err(io)
    }
}

/// `refs/heads/...` without a way out of the ref store.
fn check_ref(name: &str) -> Result<(), LandingError> {
    let ok = name.starts_with("refs/heads/")
        && name.split('/').all(|part| {
            !part.is_empty() && part != "." && part != ".." && !part.ends_with(".lock")
        });
    match ok {
        true => Ok(()),
        false => Err(LandingError::NotABranchRef(name.to_string())),
    }
}

/// A small file of `.git`, not followed through a link.
fn small(path: &Path) -> Result<String, LandingError> {
    agent_runner_core::fs::read::whole(path, 1 << 20)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|source| LandingError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Lands `bundle`, which must hold exactly `branch` (`agent-runner/<id>`) at
/// `commit` on top of `base`, in the user's repository `repo`, checked in a landing
/// repository under `scratch` (a directory of ours, removed after). With
/// `check_only` nothing is added to `repo` (its branch is checked out: the caller
/// keeps the bundle).
#[allow(clippy::too_many_arguments)]
pub(crate) fn land(
    repo: &Path,
    bundle: File,
    commit: &str,
    branch: &str,
    base: &str,
    scratch: &Path,
    check_only: bool,
    interrupt: Interrupt,
) -> Result<(), LandingError> {
    let user = UserRepo::open(repo)?;
    let wanted = format!("refs/heads/{branch}");
    let (pack, refs) = past_header(bundle)?;
    if refs != [(commit.to_string(), wanted.clone())] {
        return Err(LandingError::OtherRefs {
            listed: refs,
            wanted,
            commit: commit.to_string(),
        });
    }
    if !check_only && user.head()?.0.as_deref() == Some(wanted.as_str()) {
        return Err(LandingError::CheckedOut {
            branch: branch.to_string(),
            repo: repo.to_path_buf(),
        });
    }
    let landing = scratch.join("landing");
    let _ = std::fs::remove_dir_all(&landing);
    let git = Git {
        git_dir: &landing,
        borrow: user.objects(),
        interrupt,
    };
    git.run(&["init", "-q", "--bare", "--template="], None, scratch)?;
    let indexed = git.run(
        &["index-pack", "--stdin", "--fix-thin", "--strict"],
        Some(pack),
        &landing,
    )?;
    let hash = indexed
        .split_whitespace()
        .nth(1)
        .filter(|h| is_object_id(h))
        .ok_or_else(|| LandingError::IndexPack(indexed.clone()))?
        .to_string();
    let kind = git.run(&["cat-file", "-t", commit], None, &landing)?;
    if kind.trim() != "commit" {
        return Err(LandingError::NotACommit {
            commit: commit.to_string(),
            kind: kind.trim().to_string(),
        });
    }
    git.run(
        &["rev-list", "--objects", "--quiet", commit, "--not", base],
        None,
        &landing,
    )?;
    if let Some(before) = user.resolve(&wanted)? {
        let descends = git.run(
            &["merge-base", "--is-ancestor", &before, commit],
            None,
            &landing,
        );
        if before != commit && descends.is_err() {
            return Err(LandingError::Moved {
                branch: branch.to_string(),
                before,
            });
        }
    }
    if check_only {
        let _ = std::fs::remove_dir_all(&landing);
        return Ok(());
    }
    user.add_pack(&landing.join("objects/pack"), &hash)?;
    let set = user.set_ref(&wanted, commit);
    let _ = std::fs::remove_dir_all(&landing);
    set
}

/// Whether `repo` has `branch` or another of agent-runner's branches checked out
/// (its HEAD read as data): a pipeline's clone (`agent-runner/<id>`, a try's
/// `-try-<k>`), or a result the user is looking at. The work is then kept as a
/// bundle, never a branch moved beside the one checked out.
pub(crate) fn checked_out(repo: &Path, branch: &str) -> Result<bool, LandingError> {
    let head = UserRepo::open(repo)?.head()?.0.unwrap_or_default();
    Ok(head == format!("refs/heads/{branch}") || head.starts_with("refs/heads/agent-runner/"))
}

/// Host git on a repository of ours, none of the user's configuration read.
struct Git<'a> {
    git_dir: &'a Path,
    /// An object store read as data (the user's).
    borrow: PathBuf,
    interrupt: Interrupt,
}

impl Git<'_> {
    fn run(&self, args: &[&str], stdin: Option<File>, cwd: &Path) -> Result<String, GitError> {
        let mut invocation = clean(cwd, args)
            .env("GIT_DIR", &self.git_dir.display().to_string())
            .env(
                "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                &agent_runner_core::git::quoted(&self.borrow),
            );
        if let Some(file) = stdin {
            invocation = invocation.stdin_file(file);
        }
        run(&invocation, self.interrupt)
    }
}

/// `git <args>` in `cwd` without the user's git configuration or `GIT_*` variables
/// (`agent_runner_core::git`, the pipeline's clones' too).
pub(crate) use agent_runner_core::git::clean;

/// Runs a git invocation; its stdout, or the command and its stderr's tail.
pub(crate) use agent_runner_core::git::run;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_header_is_read_as_data() {
        let dir = std::env::temp_dir().join(format!(
            "agent-runner-landing-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let id = "a".repeat(40);
        let path = dir.join("b");
        std::fs::write(
            &path,
            format!("# v2 git bundle\n-{id} base\n{id} refs/heads/agent-runner/t\n\nPACK"),
        )
        .unwrap();
        let (mut file, refs) = past_header(File::open(&path).unwrap()).unwrap();
        assert_eq!(
            refs,
            [(id.clone(), "refs/heads/agent-runner/t".to_string())]
        );
        let mut rest = String::new();
        file.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "PACK");
        for bad in [
            "# v9 git bundle\n\n",
            "# v2 git bundle\nnot-an-id x\n\n",
            "# v2 git bundle\n",
        ] {
            std::fs::write(&path, bad).unwrap();
            assert!(past_header(File::open(&path).unwrap()).is_err(), "{bad:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `git <args>` in `dir` (a test's own repositories).
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

    /// The user's repository (one commit) and a worker's clone of it under `dir`.
    fn repos(name: &str) -> (PathBuf, PathBuf, PathBuf, String) {
        let dir = std::env::temp_dir().join(format!(
            "agent-runner-{name}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let (user, work) = (dir.join("user"), dir.join("work"));
        std::fs::create_dir_all(&user).unwrap();
        git(&user, &["init", "-q"]);
        std::fs::write(user.join("a.txt"), "a\n").unwrap();
        git(&user, &["add", "a.txt"]);
        git(&user, &["commit", "-qm", "base"]);
        let base = git(&user, &["rev-parse", "HEAD"]);
        git(&dir, &["clone", "-q", "--no-local", "user", "work"]);
        git(&work, &["checkout", "-q", "-b", "agent-runner/t"]);
        (dir, user, work, base)
    }

    fn bundle(work: &Path, refs: &[&str], base: &str) -> File {
        let mut args = vec!["bundle", "create", "-q", "../b.bundle"];
        args.extend(refs);
        let not = format!("^{base}");
        args.push(&not);
        git(work, &args);
        File::open(work.join("../b.bundle")).unwrap()
    }

    #[test]
    fn a_checked_bundle_lands_as_the_branch_and_only_that() {
        let (dir, user, work, base) = repos("land");
        std::fs::write(work.join("a.txt"), "b\n").unwrap();
        git(&work, &["commit", "-qam", "work"]);
        let commit = git(&work, &["rev-parse", "HEAD"]);
        let file = bundle(&work, &["agent-runner/t"], &base);
        land(
            &user,
            file,
            &commit,
            "agent-runner/t",
            &base,
            &dir,
            false,
            Interrupt::never(),
        )
        .unwrap();
        assert_eq!(git(&user, &["rev-parse", "agent-runner/t"]), commit);
        assert_eq!(git(&user, &["rev-parse", "HEAD"]), base, "HEAD untouched");
        assert_eq!(std::fs::read_to_string(user.join("a.txt")).unwrap(), "a\n");
        git(&user, &["fsck", "--strict"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bundle_with_a_ref_beside_the_branch_is_refused() {
        let (dir, user, work, base) = repos("land-refs");
        git(&work, &["commit", "-q", "--allow-empty", "-m", "work"]);
        git(&work, &["branch", "main-evil"]);
        let commit = git(&work, &["rev-parse", "HEAD"]);
        let file = bundle(&work, &["agent-runner/t", "main-evil"], &base);
        let e = land(
            &user,
            file,
            &commit,
            "agent-runner/t",
            &base,
            &dir,
            false,
            Interrupt::never(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("refs/heads/main-evil") && e.contains("refused"),
            "{e}"
        );
        assert_eq!(
            git(&user, &["for-each-ref", "--format=%(refname)"])
                .lines()
                .count(),
            1
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_tree_with_a_git_directory_fails_the_strict_check() {
        let (dir, user, work, base) = repos("land-dotgit");
        // A tree that would write `.git/config` on checkout: fsck's hasDotgit.
        let blob = git(&work, &["hash-object", "-w", "--stdin"]);
        let inner = std::process::Command::new("git")
            .args(["mktree"])
            .current_dir(&work)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write as _;
                c.stdin
                    .take()
                    .unwrap()
                    .write_all(format!("100644 blob {blob}\tconfig\n").as_bytes())?;
                c.wait_with_output()
            })
            .unwrap();
        let inner = String::from_utf8_lossy(&inner.stdout).trim().to_string();
        let outer = std::process::Command::new("git")
            .args(["mktree"])
            .current_dir(&work)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write as _;
                c.stdin
                    .take()
                    .unwrap()
                    .write_all(format!("040000 tree {inner}\t.git\n").as_bytes())?;
                c.wait_with_output()
            })
            .unwrap();
        let outer = String::from_utf8_lossy(&outer.stdout).trim().to_string();
        let commit = git(&work, &["commit-tree", &outer, "-p", &base, "-m", "evil"]);
        git(&work, &["update-ref", "refs/heads/agent-runner/t", &commit]);
        let file = bundle(&work, &["agent-runner/t"], &base);
        let e = land(
            &user,
            file,
            &commit,
            "agent-runner/t",
            &base,
            &dir,
            false,
            Interrupt::never(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("index-pack"), "{e}");
        assert!(git(&user, &["for-each-ref", "refs/heads/agent-runner"]).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_branch_checked_out_or_moved_elsewhere_is_left_as_it_is() {
        let (dir, user, work, base) = repos("land-moved");
        git(&work, &["commit", "-q", "--allow-empty", "-m", "work"]);
        let commit = git(&work, &["rev-parse", "HEAD"]);
        // Elsewhere: the branch exists here at a commit the work does not build on.
        git(&user, &["commit", "-q", "--allow-empty", "-m", "other"]);
        git(&user, &["branch", "agent-runner/t"]);
        let other = git(&user, &["rev-parse", "agent-runner/t"]);
        let e = land(
            &user,
            bundle(&work, &["agent-runner/t"], &base),
            &commit,
            "agent-runner/t",
            &base,
            &dir,
            false,
            Interrupt::never(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("left as it is"), "{e}");
        assert_eq!(git(&user, &["rev-parse", "agent-runner/t"]), other);
        git(&user, &["checkout", "-q", "agent-runner/t"]);
        let e = land(
            &user,
            bundle(&work, &["agent-runner/t"], &base),
            &commit,
            "agent-runner/t",
            &base,
            &dir,
            false,
            Interrupt::never(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("checked out"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_branch_refs_inside_the_ref_store() {
        assert!(check_ref("refs/heads/agent-runner/t").is_ok());
        for bad in [
            "refs/heads/../../config",
            "HEAD",
            "refs/heads/a//b",
            "refs/heads/x.lock",
            "refs/tags/v1",
        ] {
            assert!(check_ref(bad).is_err(), "{bad}");
        }
    }
}
