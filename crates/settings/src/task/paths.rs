//! Files and directories the task names: made absolute against the current directory
//! (only when relative: a deleted current directory must not fail an all-absolute
//! task), checked to exist, and read without ever blocking.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use super::host::Host;
use super::input_error::InputError;
use super::{Prd, PrdSource};
use crate::Error;
use agent_runner_core::text::cut_chars;

/// Largest PRD file we load; PRDs are prose, and the whole text goes to Meta.
pub(crate) const MAX_PRD_BYTES: u64 = 4 << 20;

/// The repository directory: absolute, symlinks resolved, and safe to name in a
/// docker `--mount` value (no control characters, which would end or split it).
/// The worker gets the repository read-write (and the sweep rewrites modes in it):
/// the filesystem root or the home directory (or a directory holding it) would hand
/// it the host's own files, `~/.ssh` and the codex credentials among them. A `repo:
/// .` run from `/`, as many CI jobs start, must not do that.
fn refuse_host_directory(
    resolved: &Path,
    path: &str,
    field: &str,
    host: &Host,
) -> Result<(), InputError> {
    let home = match host.var("HOME") {
        crate::task::host::Var::Set(home) => std::fs::canonicalize(home).ok(),
        _ => None,
    };
    let what = if resolved.parent().is_none() {
        Some("is the filesystem root".to_string())
    } else {
        home.filter(|home| home.starts_with(resolved))
            .map(|home| format!("holds your home directory {}", home.display()))
    };
    match what {
        None => Ok(()),
        Some(what) => Err(InputError::new(
            field,
            format!(
                "{path} resolves to {}, which {what}; the worker would get it read-write",
                resolved.display()
            ),
        )
        .with_hint("point it at the project's own directory")
        .environment()),
    }
}

pub(crate) fn repo_dir(path: &str, field: &str, host: &Host) -> Result<PathBuf, InputError> {
    if path.chars().any(char::is_control) {
        return Err(InputError::new(
            field,
            format!(
                "must not contain control characters (got {:?})",
                cut_chars(path, 60)
            ),
        ));
    }
    let joined = host
        .absolute(path)
        .map_err(|why| InputError::new(field, why.to_string()).environment())?;
    let resolved = std::fs::canonicalize(&joined).map_err(|e| {
        InputError::new(
            field,
            format!(
                "directory {path} not found (resolved to {}): {}",
                joined.display(),
                io_reason(&e)
            ),
        )
        .environment()
    })?;
    if !resolved.is_dir() {
        return Err(InputError::new(
            field,
            format!(
                "{path} is not a directory (resolved to {})",
                resolved.display()
            ),
        )
        .environment());
    }
    refuse_host_directory(&resolved, path, field, host)?;
    match resolved.to_str() {
        Some(text) if !text.chars().any(char::is_control) => Ok(resolved),
        _ => Err(InputError::new(
            field,
            format!(
                "{path} resolves to {:?}, which is not UTF-8 text without control characters; \
                 docker cannot mount it safely",
                resolved.display()
            ),
        )
        .environment()),
    }
}

/// The PRD file at `path`: a regular UTF-8 file, not empty, at most `MAX_PRD_BYTES`.
/// `repo` (canonical), when known, is worker-written (SPEC §9): a path into it must
/// not leave it through a symlink in it. An earlier run's worker could have made
/// `docs/TASK.md` a link to `~/.ssh/id_rsa`, which this run would send to Meta and
/// write into the note, where the next worker reads it.
pub(crate) fn prd_file(path: &str, host: &Host, repo: Option<&Path>) -> Result<Prd, InputError> {
    let field = "task.prd.path";
    let resolved = host
        .absolute(path)
        .map_err(|why| InputError::new(field, why.to_string()).environment())?;
    let problem = |message: String| InputError::new(field, message).environment();
    let read_error = |e: Error| match e {
        Error::TooLarge(len) => problem(format!(
            "{path} is {len} bytes; the limit is {MAX_PRD_BYTES} bytes"
        )),
        Error::NotAFile => problem(format!(
            "{path} is not a file (resolved to {})",
            resolved.display()
        )),
        Error::Read(e) => problem(format!(
            "file {path} not readable (resolved to {}): {}",
            resolved.display(),
            io_reason(&e)
        ))
        .with_hint("relative paths resolve against the current directory, not the repo"),
        other => problem(format!("{path}: {other}")),
    };
    let file = open_regular(&resolved).map_err(read_error)?;
    if let Some(repo) = repo
        && let Err(why) = stays_in_repo(&file, &resolved, repo)
    {
        return Err(problem(format!("{path} {why}")).with_hint(
            "a worker may have planted the link; check it, then give the file's own path",
        ));
    }
    let bytes = read_all(file, MAX_PRD_BYTES).map_err(read_error)?;
    let text = String::from_utf8(bytes).map_err(|e| {
        problem(format!(
            "{path} is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    if text.trim().is_empty() {
        return Err(problem(format!("{path} is empty")));
    }
    Ok(Prd {
        source: PrdSource::File(std::fs::canonicalize(&resolved).unwrap_or(resolved)),
        text,
    })
}

/// Checks that `file`, opened at `path`, did not come out of `repo` through a link
/// in it. The file is judged as opened (its `/proc/self/fd` path), so a link swapped
/// in or out between the check and the open is caught too.
fn stays_in_repo(file: &std::fs::File, path: &Path, repo: &Path) -> Result<(), Error> {
    use std::os::fd::AsRawFd;
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .or_else(|_| std::fs::canonicalize(path))
        .map_err(|e| Error::Uncheckable(io_reason(&e)))?;
    if opened.starts_with(repo) {
        return Ok(());
    }
    match walk(path, repo) {
        Ok(end) if end == opened => Ok(()),
        Ok(_) => Err(Error::ChangedWhileRead(opened)),
        Err(link) => Err(Error::LeavesRepo(link)),
    }
}

/// Follows `path` one component at a time, each step made canonical: where it
/// leads, or (as the error) the link in `repo` through which it leaves `repo`.
/// `..` may leave the repository: that is the path as written, not a link.
fn walk(path: &Path, repo: &Path) -> Result<PathBuf, PathBuf> {
    let mut at = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(name) => {
                let next = at.join(name);
                let Ok(real) = std::fs::canonicalize(&next) else {
                    return Ok(next);
                };
                if at.starts_with(repo) && !real.starts_with(repo) {
                    return Err(next);
                }
                at = real;
            }
            Component::ParentDir => {
                at.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok(at)
}

/// The Meta script file at `path` (read later, by the scripted backend).
pub(crate) fn script_file(path: &str, field: &str, host: &Host) -> Result<PathBuf, InputError> {
    let resolved = host
        .absolute(path)
        .map_err(|why| InputError::new(field, why.to_string()).environment())?;
    let shown = resolved.display();
    let why = match std::fs::metadata(&resolved) {
        Ok(meta) if meta.is_file() => None,
        Ok(_) => Some(format!(
            "{path} (resolved to {shown}) is not a regular file (a directory, FIFO, device or socket)"
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some(format!("file {path} not found (resolved to {shown})"))
        }
        Err(e) => Some(format!("cannot read {path} (resolved to {shown}): {e}")),
    };
    if let Some(why) = why {
        return Err(InputError::new(field, why).environment());
    }
    Ok(std::fs::canonicalize(&resolved).unwrap_or(resolved))
}

/// A directory inside the repo, as a normalised relative path (`/`-separated, empty
/// for the repo itself).
pub(crate) fn relative_dir(path: &str, field: &str) -> Result<String, InputError> {
    if path.chars().any(char::is_control) {
        return Err(InputError::new(field, "contains control characters"));
    }
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(InputError::new(
                    field,
                    format!(
                        "must be a directory inside the repo, relative to it (got {:?})",
                        cut_chars(path, 60)
                    ),
                ));
            }
        }
    }
    Ok(parts.join("/"))
}

/// The contents of the regular file at `path`, at most `max` bytes. Opened
/// non-blocking, so a FIFO put in its place cannot hang us; the checks are made on the
/// opened file, so it cannot be swapped between check and read.
pub(crate) fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, Error> {
    read_all(open_regular(path)?, max)
}

/// The regular file at `path`, opened for reading without blocking.
fn open_regular(path: &Path) -> Result<std::fs::File, Error> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(Error::Read)?;
    let meta = file.metadata().map_err(Error::Read)?;
    if !meta.is_file() {
        return Err(Error::NotAFile);
    }
    Ok(file)
}

/// The rest of `file`, at most `max` bytes.
fn read_all(file: std::fs::File, max: u64) -> Result<Vec<u8>, Error> {
    let len = file.metadata().map_err(Error::Read)?.len();
    if len > max {
        return Err(Error::TooLarge(len));
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(Error::Read)?;
    if bytes.len() as u64 > max {
        return Err(Error::TooLarge(bytes.len() as u64));
    }
    Ok(bytes)
}

/// A short reason for an I/O error.
pub(crate) fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_are_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("agent-runner-fifo-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("prd.md");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        // Opening a FIFO without O_NONBLOCK waits for a writer forever: bound the wait,
        // so a regression fails instead of hanging the suite.
        let (sender, receiver) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || sender.send(read_regular(&path, 10)));
        let result = receiver
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("read_regular blocked on a FIFO");
        assert!(matches!(result, Err(Error::NotAFile)));
        assert!(matches!(read_regular(&dir, 10), Err(Error::NotAFile)));
        std::fs::write(dir.join("f"), b"12345").unwrap();
        assert!(matches!(
            read_regular(&dir.join("f"), 4),
            Err(Error::TooLarge(5))
        ));
        assert_eq!(read_regular(&dir.join("f"), 5).unwrap(), b"12345");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_prd_may_not_leave_the_repository_through_a_link_in_it() {
        use std::os::unix::fs::symlink;
        let top = std::env::temp_dir().join(format!("agent-runner-prd-{}", uuid::Uuid::new_v4()));
        let top = {
            std::fs::create_dir_all(top.join("repo/docs")).unwrap();
            std::fs::create_dir_all(top.join("outside")).unwrap();
            std::fs::canonicalize(top).unwrap()
        };
        let repo = top.join("repo");
        std::fs::write(repo.join("docs/TASK.md"), "in the repo").unwrap();
        std::fs::write(top.join("outside/secret.md"), "outside").unwrap();
        symlink(repo.join("docs/TASK.md"), repo.join("docs/alias.md")).unwrap();
        symlink(top.join("outside/secret.md"), repo.join("docs/out.md")).unwrap();
        symlink(top.join("outside"), repo.join("outdir")).unwrap();
        symlink("../docs/out.md", repo.join("docs/chain.md")).unwrap();
        symlink(&repo, top.join("repo-alias")).unwrap();
        symlink(top.join("outside/secret.md"), top.join("outside/link.md")).unwrap();
        let no_vars = |_: &str| None;
        let host = Host {
            var: &no_vars,
            cwd: Ok(repo.clone()),
        };
        let read = |path: &str| prd_file(path, &host, Some(&repo)).map(|prd| prd.text);
        assert_eq!(read("docs/TASK.md").unwrap(), "in the repo");
        assert_eq!(
            read("docs/alias.md").unwrap(),
            "in the repo",
            "a link within the repo"
        );
        assert_eq!(
            read("../outside/secret.md").unwrap(),
            "outside",
            "`..` as written"
        );
        assert_eq!(
            read("../outside/link.md").unwrap(),
            "outside",
            "a link outside the repo"
        );
        let repo_alias = top.join("repo-alias/docs/TASK.md");
        assert_eq!(read(repo_alias.to_str().unwrap()).unwrap(), "in the repo");
        let via_alias = top.join("repo-alias/docs/out.md");
        for path in [
            "docs/out.md",
            "outdir/secret.md",
            "docs/chain.md",
            via_alias.to_str().unwrap(),
        ] {
            let e = read(path).unwrap_err();
            assert!(
                e.message
                    .contains("leaves the repository through the symlink"),
                "{path}: {e}"
            );
            // Without a repository to keep to (an invalid task.repo), it is read.
            assert!(prd_file(path, &host, None).is_ok());
        }
        // The file is judged as opened: a link put back to a plain file between the
        // open and the check does not make an outside file pass.
        let file = open_regular(&repo.join("docs/out.md")).unwrap();
        std::fs::remove_file(repo.join("docs/out.md")).unwrap();
        std::fs::write(repo.join("docs/out.md"), "harmless").unwrap();
        let why = stays_in_repo(&file, &repo.join("docs/out.md"), &repo)
            .unwrap_err()
            .to_string();
        assert!(why.starts_with("changed while it was read"), "{why}");
        let _ = std::fs::remove_dir_all(top);
    }
}
