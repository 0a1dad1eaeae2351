//! agent-runner's own directory inside the repository (`<repo>/.agent-runner/`: the
//! Task Note, logs, locks), reached only through directory file descriptors.
//!
//! The repository is written by the worker, untrusted code that is root in its
//! container, while agent-runner often runs as root on the host. Any path we open
//! under the repo could have been swapped for a symlink to a host file, a FIFO that
//! blocks `open(2)` forever, or a directory elsewhere. So (SPEC §9):
//! - the repo directory is opened once, and everything below it is reached with
//!   `openat`/`mkdirat`/`renameat`/`unlinkat` from that descriptor, every component
//!   with `O_NOFOLLOW`: a symlink anywhere is an error, never followed;
//! - files are created new (`O_CREAT | O_EXCL`) after removing whatever entry had the
//!   name, so no existing symlink, FIFO or hard link is ever written through;
//! - atomic writes go to a temp file with an unpredictable name, then `renameat`;
//! - reads open with `O_NONBLOCK` and insist on a regular file, so a FIFO or device
//!   cannot block or feed us.
//!
//! While a task runs, `.agent-runner/` is also mounted read-only into the container,
//! so the worker cannot change it under us; these rules cover everything else (a
//! worker of an earlier run, or anything written before the container started).

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Name of agent-runner's directory in a repository.
pub const DIR_NAME: &str = ".agent-runner";
/// What `.agent-runner/.gitignore` keeps out of git.
const GITIGNORE: &str = "logs/\nlocks/\n";

/// What a directory entry is, as the entry itself (a symlink is never followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    /// A symlink, FIFO, socket or device.
    Other,
}

/// A directory reached through a descriptor; see the module documentation.
#[derive(Debug)]
pub struct PrivateDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl PrivateDir {
    /// `<repo>/.agent-runner`, created (with its `.gitignore`) if missing. Fails if it
    /// is a symlink or not a directory.
    pub fn open_in(repo: &Path) -> std::io::Result<Self> {
        let repo_fd = open_path(repo, libc::O_RDONLY | libc::O_DIRECTORY)?;
        let repo = PrivateDir {
            fd: repo_fd,
            path: repo.to_path_buf(),
        };
        let dir = repo.subdir(DIR_NAME)?;
        if !dir.exists(".gitignore")? {
            dir.write_atomic(".gitignore", GITIGNORE.as_bytes())?;
        }
        Ok(dir)
    }

    /// An existing directory, for reading only: nothing is created, and a symlink as
    /// its last component is an error. Readers of files that other processes wrote
    /// (the web view) walk down from here with `existing`.
    pub fn open_existing(path: &Path) -> std::io::Result<Self> {
        Ok(PrivateDir {
            fd: open_path(path, libc::O_RDONLY | libc::O_DIRECTORY)?,
            path: path.to_path_buf(),
        })
    }

    /// The existing subdirectory `name`, never created; a symlink or a non-directory
    /// is an error.
    pub fn existing(&self, name: &str) -> std::io::Result<PrivateDir> {
        let c = entry_name(name)?;
        let fd = self
            .open_at(&c, libc::O_RDONLY | libc::O_DIRECTORY, 0)
            .map_err(|e| self.context(name, self.explain(&c, e)))?;
        Ok(PrivateDir {
            fd,
            path: self.path.join(name),
        })
    }

    /// Where this directory is, for messages and for mounting.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of an entry, for messages.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The subdirectory `name`, created if missing; fails if it is a symlink or not a
    /// directory.
    pub fn subdir(&self, name: &str) -> std::io::Result<PrivateDir> {
        let c = entry_name(name)?;
        // SAFETY: valid descriptor and NUL-terminated name.
        let made = unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), 0o755) };
        if made != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(self.context(name, e));
            }
        }
        self.existing(name)
    }

    /// A new, empty file `name`, replacing whatever entry had that name.
    pub fn create(&self, name: &str) -> std::io::Result<File> {
        let c = entry_name(name)?;
        self.remove_entry(&c).map_err(|e| self.context(name, e))?;
        let fd = self
            .open_at(&c, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644)
            .map_err(|e| self.context(name, e))?;
        Ok(File::from(fd))
    }

    /// Replaces `name` with `bytes` atomically: readers see the old or the new file,
    /// never half of one.
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        self.write_atomic_from(name, &mut &bytes[..])
    }

    /// `write_atomic` of what `from` reads, streamed.
    pub fn write_atomic_from(&self, name: &str, from: &mut dyn Read) -> std::io::Result<()> {
        let target = entry_name(name)?;
        let temp_name = format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple());
        let temp = entry_name(&temp_name)?;
        let fd = self
            .open_at(&temp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644)
            .map_err(|e| self.context(&temp_name, e))?;
        let written = std::io::copy(from, &mut File::from(fd)).map(|_| ());
        let renamed = written.and_then(|()| self.rename_entry(&temp, &target));
        if let Err(e) = renamed {
            let _ = self.remove_entry(&temp);
            return Err(self.context(name, e));
        }
        Ok(())
    }

    /// Replaces `name` with `bytes` as git updates a ref: `<name>.lock` is created
    /// exclusively, written, then renamed over `name`. A lock that exists means another
    /// process (git) is updating it: an error, and its lock is left alone.
    pub fn replace_locked(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let target = entry_name(name)?;
        let lock_name = format!("{name}.lock");
        let lock = entry_name(&lock_name)?;
        let fd = self
            .open_at(&lock, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EEXIST) => self.context(
                    &lock_name,
                    std::io::Error::new(
                        e.kind(),
                        "exists: another process is updating it (remove it if none is)",
                    ),
                ),
                _ => self.context(&lock_name, e),
            })?;
        let written = File::from(fd).write_all(bytes);
        let renamed = written.and_then(|()| self.rename_entry(&lock, &target));
        if let Err(e) = renamed {
            let _ = self.remove_entry(&lock);
            return Err(self.context(name, e));
        }
        Ok(())
    }

    /// Removes `name` if it is there and not a directory.
    pub fn remove(&self, name: &str) -> std::io::Result<()> {
        let c = entry_name(name)?;
        self.remove_entry(&c).map_err(|e| self.context(name, e))
    }

    /// The regular file `name` opened for reading (never blocking on a FIFO); a
    /// symlink, FIFO, device or directory is an error.
    pub fn open_file(&self, name: &str) -> std::io::Result<File> {
        let c = entry_name(name)?;
        let fd = self
            .open_at(&c, libc::O_RDONLY | libc::O_NONBLOCK, 0)
            .map_err(|e| self.context(name, e))?;
        let file = File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(self.context(
                name,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
            ));
        }
        Ok(file)
    }

    /// The entries of this directory (not `.` and `..`), each with its kind, as the
    /// entry itself is (a symlink is `Kind::Other`, never followed).
    pub fn entries(&self) -> std::io::Result<Vec<(String, Kind)>> {
        let mut out = Vec::new();
        // SAFETY: dup gives fdopendir a descriptor of its own, which closedir closes;
        // readdir's entries are copied before the next call; errno is cleared before
        // each readdir so its end and its failure can be told apart.
        let listed: std::io::Result<Vec<(CString, u8)>> = unsafe {
            let fd = libc::dup(self.fd.as_raw_fd());
            if fd < 0 {
                return Err(self.context(".", std::io::Error::last_os_error()));
            }
            let stream = libc::fdopendir(fd);
            if stream.is_null() {
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                return Err(self.context(".", e));
            }
            let mut names = Vec::new();
            let result = loop {
                *libc::__errno_location() = 0;
                let entry = libc::readdir(stream);
                if entry.is_null() {
                    let errno = *libc::__errno_location();
                    break if errno != 0 {
                        Err(std::io::Error::from_raw_os_error(errno))
                    } else {
                        Ok(std::mem::take(&mut names))
                    };
                }
                let name = std::ffi::CStr::from_ptr((*entry).d_name.as_ptr());
                if name.to_bytes() != b"." && name.to_bytes() != b".." {
                    names.push((name.to_owned(), (*entry).d_type));
                }
            };
            libc::closedir(stream);
            result
        };
        for (name, d_type) in listed.map_err(|e| self.context(".", e))? {
            let kind = match d_type {
                libc::DT_REG => Kind::File,
                libc::DT_DIR => Kind::Dir,
                libc::DT_UNKNOWN => self.kind_of(&name),
                _ => Kind::Other,
            };
            out.push((name.to_string_lossy().into_owned(), kind));
        }
        Ok(out)
    }

    /// The kind of entry `name`, without following a symlink.
    fn kind_of(&self, name: &CString) -> Kind {
        // SAFETY: zeroed stat is a valid out-parameter; valid descriptor and name.
        let mode = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            (libc::fstatat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            ) == 0)
                .then_some(st.st_mode & libc::S_IFMT)
        };
        match mode {
            Some(libc::S_IFREG) => Kind::File,
            Some(libc::S_IFDIR) => Kind::Dir,
            _ => Kind::Other,
        }
    }

    fn rename_entry(&self, from: &CString, to: &CString) -> std::io::Result<()> {
        // SAFETY: valid descriptors and NUL-terminated names.
        let r = unsafe {
            libc::renameat(
                self.fd.as_raw_fd(),
                from.as_ptr(),
                self.fd.as_raw_fd(),
                to.as_ptr(),
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Up to `max` bytes of the regular file `name`; a symlink, FIFO, device or
    /// directory is an error.
    pub fn read(&self, name: &str, max: u64) -> std::io::Result<Vec<u8>> {
        let c = entry_name(name)?;
        let fd = self
            .open_at(&c, libc::O_RDONLY | libc::O_NONBLOCK, 0)
            .map_err(|e| self.context(name, e))?;
        let file = File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(self.context(
                name,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
            ));
        }
        let mut bytes = Vec::new();
        file.take(max).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// Opens `name` for locking (created if missing, never through a symlink).
    pub fn open_lock(&self, name: &str) -> std::io::Result<File> {
        let c = entry_name(name)?;
        let fd = self
            .open_at(&c, libc::O_RDWR | libc::O_CREAT | libc::O_NONBLOCK, 0o644)
            .map_err(|e| self.context(name, e))?;
        let file = File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(self.context(
                name,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
            ));
        }
        Ok(file)
    }

    /// True if an entry `name` exists (of any type; symlinks not followed).
    pub fn exists(&self, name: &str) -> std::io::Result<bool> {
        let c = entry_name(name)?;
        // SAFETY: zeroed stat is a valid out-parameter; valid descriptor and name.
        let r = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(false),
            _ => Err(self.context(name, e)),
        }
    }

    fn open_at(
        &self,
        name: &CString,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> std::io::Result<OwnedFd> {
        // SAFETY: valid descriptor and NUL-terminated name; the result is checked.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                libc::c_uint::from(mode),
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// An open error said in words: a symlink or another non-directory where a
    /// directory was expected.
    fn explain(&self, name: &CString, e: std::io::Error) -> std::io::Error {
        // SAFETY: zeroed stat is a valid out-parameter; valid descriptor and name.
        let kind = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            (libc::fstatat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            ) == 0)
                .then_some(st.st_mode & libc::S_IFMT)
        };
        match kind {
            Some(libc::S_IFLNK) => std::io::Error::new(
                e.kind(),
                "is a symlink; agent-runner does not follow symlinks in the repository",
            ),
            Some(libc::S_IFDIR) | None => not_a_directory(e),
            Some(_) => std::io::Error::new(e.kind(), "is not a directory"),
        }
    }

    /// Removes a non-directory entry if there is one.
    fn remove_entry(&self, name: &CString) -> std::io::Result<()> {
        // SAFETY: valid descriptor and NUL-terminated name.
        let r = unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), 0) };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(()),
            _ => Err(e),
        }
    }

    fn context(&self, name: &str, e: std::io::Error) -> std::io::Error {
        std::io::Error::new(e.kind(), format!("{}: {e}", self.path.join(name).display()))
    }
}

/// Opens an absolute directory path as the root of a walk.
fn open_path(path: &Path, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "path contains a NUL byte")
    })?;
    // SAFETY: NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = not_a_directory(std::io::Error::last_os_error());
        return Err(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", path.display()),
        ));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A single path component: no separators, not `.` or `..`, no NUL.
fn entry_name(name: &str) -> std::io::Result<CString> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{name:?} is not a single file name"),
        ));
    }
    CString::new(name).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "name contains a NUL byte")
    })
}

/// ELOOP (a symlink met with O_NOFOLLOW) and ENOTDIR said in words.
fn not_a_directory(e: std::io::Error) -> std::io::Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) => std::io::Error::new(
            e.kind(),
            "is a symlink; agent-runner does not follow symlinks in the repository",
        ),
        Some(libc::ENOTDIR) => std::io::Error::new(e.kind(), "is not a directory"),
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::time::{Duration, Instant};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "agent-runner-private-{name}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn mkfifo(path: &Path) {
        let c = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    #[test]
    fn creates_the_directory_and_its_gitignore() {
        let repo = scratch("create");
        let dir = PrivateDir::open_in(&repo).unwrap();
        assert_eq!(dir.path(), repo.join(".agent-runner"));
        assert_eq!(
            std::fs::read_to_string(repo.join(".agent-runner/.gitignore")).unwrap(),
            GITIGNORE
        );
        dir.write_atomic("note.md", b"one").unwrap();
        dir.write_atomic("note.md", b"two").unwrap();
        assert_eq!(dir.read("note.md", 100).unwrap(), b"two");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
        let _ = std::fs::remove_dir_all(repo);
    }

    #[test]
    fn a_symlinked_private_dir_is_refused_and_its_target_untouched() {
        let repo = scratch("swap");
        let elsewhere = scratch("swap-target");
        symlink(&elsewhere, repo.join(".agent-runner")).unwrap();
        let e = PrivateDir::open_in(&repo).unwrap_err();
        assert!(e.to_string().contains("is a symlink"), "{e}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(repo);
        let _ = std::fs::remove_dir_all(elsewhere);
    }

    #[test]
    fn files_are_created_new_never_written_through_a_symlink_or_fifo() {
        let repo = scratch("links");
        let outside = scratch("links-outside").join("host-file");
        std::fs::write(&outside, "host data").unwrap();
        let dir = PrivateDir::open_in(&repo).unwrap();
        let logs = dir.subdir("logs").unwrap();
        symlink(&outside, logs.join("run-1.log")).unwrap();
        mkfifo(&logs.join("test-1.log"));
        let started = Instant::now();
        logs.create("run-1.log").unwrap().write_all(b"log").unwrap();
        logs.create("test-1.log")
            .unwrap()
            .write_all(b"log")
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "host data");
        assert_eq!(
            std::fs::read_to_string(logs.join("run-1.log")).unwrap(),
            "log"
        );
        // An atomic write replaces a symlink instead of following it.
        symlink(&outside, dir.join("task-x.md")).unwrap();
        dir.write_atomic("task-x.md", b"note").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "host data");
        let _ = std::fs::remove_dir_all(repo);
        let _ = std::fs::remove_dir_all(outside.parent().unwrap());
    }

    #[test]
    fn the_read_only_walk_creates_nothing_and_follows_no_symlink() {
        let repo = scratch("walk");
        let outside = scratch("walk-outside");
        std::fs::write(outside.join("secret"), "host data").unwrap();
        let root = PrivateDir::open_existing(&repo).unwrap();
        assert!(root.existing(DIR_NAME).is_err(), "missing: not created");
        assert!(!repo.join(DIR_NAME).exists());
        std::fs::create_dir_all(repo.join(".agent-runner/logs/t-1")).unwrap();
        std::fs::write(repo.join(".agent-runner/logs/t-1/run-1.log"), "log").unwrap();
        let logs = root.existing(DIR_NAME).unwrap().existing("logs").unwrap();
        assert_eq!(
            logs.existing("t-1").unwrap().read("run-1.log", 10).unwrap(),
            b"log"
        );
        symlink(&outside, repo.join(".agent-runner/logs/t-2")).unwrap();
        let e = logs.existing("t-2").unwrap_err();
        assert!(e.to_string().contains("is a symlink"), "{e}");
        assert!(logs.existing("..").is_err());
        symlink(&outside, repo.join("link")).unwrap();
        assert!(PrivateDir::open_existing(&repo.join("link")).is_err());
        let _ = std::fs::remove_dir_all(repo);
        let _ = std::fs::remove_dir_all(outside);
    }

    #[test]
    fn reads_refuse_fifos_and_symlinks_without_blocking() {
        let repo = scratch("reads");
        let dir = PrivateDir::open_in(&repo).unwrap();
        mkfifo(&dir.join("fifo"));
        symlink("/etc/hostname", dir.join("link")).unwrap();
        let started = Instant::now();
        assert!(dir.read("fifo", 10).is_err());
        assert!(dir.read("link", 10).is_err());
        assert!(dir.open_lock("fifo").is_err());
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(dir.subdir("link").is_err(), "a symlinked subdir is refused");
        assert!(dir.create("../escape").is_err());
        let _ = std::fs::remove_dir_all(repo);
    }
}
