//! A directory opened once and reached only through its descriptor: the way into
//! a tree that untrusted code writes (the repository and its `.agent-runner/`, a
//! clone, the object store of `root_dir`, an attempt's logs).
//!
//! Any path below such a directory could have been swapped for a symlink to a host
//! file, a FIFO that blocks `open(2)` forever, or a directory elsewhere. So:
//! - the directory is opened once, and everything below it is reached with
//!   `openat`/`mkdirat`/`renameat`/`unlinkat` from that descriptor, every component
//!   with `O_NOFOLLOW`: a symlink anywhere is an error, never followed;
//! - files are created new (`O_CREAT | O_EXCL`) after removing whatever entry had the
//!   name, so no existing symlink, FIFO or hard link is ever written through;
//! - atomic writes go to a temp file with an unpredictable name, then `renameat`;
//! - reads open with `O_NONBLOCK` and insist on a regular file, so a FIFO or device
//!   cannot block or feed us.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::fd;

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
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl Dir {
    /// An existing directory: nothing is created, and a symlink as its last
    /// component is an error. Below it, walk down with `existing` or `subdir`.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let fd = fd::open_path(path, libc::O_RDONLY | libc::O_DIRECTORY).map_err(|e| {
            let e = not_a_directory(e);
            std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
        })?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The existing subdirectory `name`, never created; a symlink or a non-directory
    /// is an error.
    pub fn existing(&self, name: &str) -> std::io::Result<Dir> {
        let c = fd::name(name)?;
        let fd = fd::open_at(&self.fd, &c, libc::O_RDONLY | libc::O_DIRECTORY, 0)
            .map_err(|e| self.context(name, self.explain(&c, e)))?;
        Ok(Dir {
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
    pub fn subdir(&self, name: &str) -> std::io::Result<Dir> {
        self.subdir_with_mode(name, 0o755)
    }

    /// `subdir` that only its owner may enter (made so, or made so now if it was
    /// there): for what should not be shared, such as a worker's unmasked session.
    pub fn private_subdir(&self, name: &str) -> std::io::Result<Dir> {
        let dir = self.subdir_with_mode(name, 0o700)?;
        // SAFETY: fchmod on a descriptor we own.
        if unsafe { libc::fchmod(dir.fd.as_raw_fd(), 0o700) } != 0 {
            return Err(self.context(name, std::io::Error::last_os_error()));
        }
        Ok(dir)
    }

    fn subdir_with_mode(&self, name: &str, mode: libc::mode_t) -> std::io::Result<Dir> {
        let c = fd::name(name)?;
        if let Err(e) = fd::mkdir_at(&self.fd, &c, mode)
            && e.raw_os_error() != Some(libc::EEXIST)
        {
            return Err(self.context(name, e));
        }
        self.existing(name)
    }

    /// A new, empty file `name`, replacing whatever entry had that name.
    pub fn create(&self, name: &str) -> std::io::Result<File> {
        let c = fd::name(name)?;
        self.remove_entry(&c).map_err(|e| self.context(name, e))?;
        let fd = fd::open_at(
            &self.fd,
            &c,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            0o644,
        )
        .map_err(|e| self.context(name, e))?;
        Ok(File::from(fd))
    }

    /// The regular file `name` opened for appending (created if missing), never
    /// through a symlink, never blocking on a FIFO: a log that a later run goes on
    /// writing (a resumed task's events).
    pub fn append(&self, name: &str) -> std::io::Result<File> {
        self.open_regular(
            name,
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_NONBLOCK,
            0o644,
        )
    }

    /// Replaces `name` with `bytes` atomically: readers see the old or the new file,
    /// never half of one.
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        self.write_atomic_from(name, &mut &bytes[..])
    }

    /// `write_atomic` of what `from` reads, streamed.
    pub fn write_atomic_from(&self, name: &str, from: &mut dyn Read) -> std::io::Result<()> {
        let target = fd::name(name)?;
        let temp_name = super::atomic::temp_name(name);
        let temp = fd::name(&temp_name)?;
        let fd = fd::open_at(
            &self.fd,
            &temp,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            0o644,
        )
        .map_err(|e| self.context(&temp_name, e))?;
        let written = std::io::copy(from, &mut File::from(fd)).map(|_| ());
        let renamed = written.and_then(|()| fd::rename_at(&self.fd, &temp, &target));
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
        let target = fd::name(name)?;
        let lock_name = format!("{name}.lock");
        let lock = fd::name(&lock_name)?;
        let fd = fd::open_at(
            &self.fd,
            &lock,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            0o644,
        )
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
        let renamed = written.and_then(|()| fd::rename_at(&self.fd, &lock, &target));
        if let Err(e) = renamed {
            let _ = self.remove_entry(&lock);
            return Err(self.context(name, e));
        }
        Ok(())
    }

    /// Removes the directory `name` and everything in it, if it is there; a symlink
    /// in its place is removed, never followed. (std's `remove_dir_all` opens each
    /// level from its parent with `O_NOFOLLOW`, so nothing in a tree someone else
    /// writes can lead it elsewhere.)
    pub fn remove_tree(&self, name: &str) -> std::io::Result<()> {
        let c = fd::name(name)?;
        let is_dir = match fd::stat_at(&self.fd, &c) {
            Ok(st) => st.st_mode & libc::S_IFMT == libc::S_IFDIR,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Err(e) => return Err(self.context(name, e)),
        };
        if !is_dir {
            return self.remove(name);
        }
        match std::fs::remove_dir_all(self.path.join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.context(name, e)),
            _ => Ok(()),
        }
    }

    /// Removes `name` if it is there and not a directory.
    pub fn remove(&self, name: &str) -> std::io::Result<()> {
        let c = fd::name(name)?;
        self.remove_entry(&c).map_err(|e| self.context(name, e))
    }

    /// The regular file `name` opened for reading (never blocking on a FIFO); a
    /// symlink, FIFO, device or directory is an error.
    pub fn open_file(&self, name: &str) -> std::io::Result<File> {
        self.open_regular(name, libc::O_RDONLY | libc::O_NONBLOCK, 0)
    }

    /// Up to `max` bytes of the regular file `name`; a symlink, FIFO, device or
    /// directory is an error.
    pub fn read(&self, name: &str, max: u64) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.open_file(name)?.take(max).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// Opens `name` for locking (created if missing, never through a symlink).
    pub(crate) fn open_lock(&self, name: &str) -> std::io::Result<File> {
        self.open_regular(name, libc::O_RDWR | libc::O_CREAT | libc::O_NONBLOCK, 0o644)
    }

    fn open_regular(
        &self,
        name: &str,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> std::io::Result<File> {
        let c = fd::name(name)?;
        let fd = fd::open_at(&self.fd, &c, flags, mode).map_err(|e| self.context(name, e))?;
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
        let listed = fd::list(&self.fd).map_err(|e| self.context(".", e))?;
        Ok(listed
            .into_iter()
            .map(|(name, d_type)| {
                let kind = match fd::known_type(&self.fd, &name, d_type) {
                    Some(libc::DT_REG) => Kind::File,
                    Some(libc::DT_DIR) => Kind::Dir,
                    _ => Kind::Other,
                };
                (name.to_string_lossy().into_owned(), kind)
            })
            .collect())
    }

    /// True if an entry `name` exists (of any type; symlinks not followed).
    pub fn exists(&self, name: &str) -> std::io::Result<bool> {
        let c = fd::name(name)?;
        match fd::stat_at(&self.fd, &c) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(self.context(name, e)),
        }
    }

    /// An open error said in words: a symlink or another non-directory where a
    /// directory was expected.
    fn explain(&self, name: &CString, e: std::io::Error) -> std::io::Error {
        let kind = fd::stat_at(&self.fd, name)
            .ok()
            .map(|st| st.st_mode & libc::S_IFMT);
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
        match fd::unlink_at(&self.fd, name) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            other => other,
        }
    }

    fn context(&self, name: &str, e: std::io::Error) -> std::io::Error {
        std::io::Error::new(e.kind(), format!("{}: {e}", self.path.join(name).display()))
    }
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
    use crate::fs::testing::{mkfifo, scratch, within};
    use std::os::unix::fs::symlink;

    #[test]
    fn files_are_created_new_never_written_through_a_symlink_or_fifo() {
        let top = scratch("links");
        let outside = scratch("links-outside").join("host-file");
        std::fs::write(&outside, "host data").unwrap();
        let dir = Dir::open(&top).unwrap();
        let logs = dir.subdir("logs").unwrap();
        symlink(&outside, logs.join("run-1.log")).unwrap();
        mkfifo(&logs.join("test-1.log"));
        let logs = within(move || {
            logs.create("run-1.log").unwrap().write_all(b"log").unwrap();
            logs.create("test-1.log")
                .unwrap()
                .write_all(b"log")
                .unwrap();
            logs
        });
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "host data");
        assert_eq!(
            std::fs::read_to_string(logs.join("run-1.log")).unwrap(),
            "log"
        );
        // An atomic write replaces a symlink instead of following it.
        symlink(&outside, dir.join("task-x.md")).unwrap();
        dir.write_atomic("task-x.md", b"note").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "host data");
        assert_eq!(dir.read("task-x.md", 100).unwrap(), b"note");
        let _ = std::fs::remove_dir_all(top);
        let _ = std::fs::remove_dir_all(outside.parent().unwrap());
    }

    #[test]
    fn the_read_only_walk_creates_nothing_and_follows_no_symlink() {
        let repo = scratch("walk");
        let outside = scratch("walk-outside");
        std::fs::write(outside.join("secret"), "host data").unwrap();
        let root = Dir::open(&repo).unwrap();
        assert!(root.existing("private").is_err(), "missing: not created");
        assert!(!repo.join("private").exists());
        std::fs::create_dir_all(repo.join("private/logs/t-1")).unwrap();
        std::fs::write(repo.join("private/logs/t-1/run-1.log"), "log").unwrap();
        let logs = root.existing("private").unwrap().existing("logs").unwrap();
        assert_eq!(
            logs.existing("t-1").unwrap().read("run-1.log", 10).unwrap(),
            b"log"
        );
        symlink(&outside, repo.join("private/logs/t-2")).unwrap();
        let e = logs.existing("t-2").unwrap_err();
        assert!(e.to_string().contains("is a symlink"), "{e}");
        assert!(logs.existing("..").is_err());
        symlink(&outside, repo.join("link")).unwrap();
        assert!(Dir::open(&repo.join("link")).is_err());
        let _ = std::fs::remove_dir_all(repo);
        let _ = std::fs::remove_dir_all(outside);
    }

    #[test]
    fn reads_refuse_fifos_and_symlinks_without_blocking() {
        let top = scratch("reads");
        let dir = Dir::open(&top).unwrap();
        mkfifo(&dir.join("fifo"));
        symlink("/etc/hostname", dir.join("link")).unwrap();
        let dir = within(move || {
            assert!(dir.read("fifo", 10).is_err());
            assert!(dir.read("link", 10).is_err());
            assert!(dir.open_lock("fifo").is_err());
            assert!(dir.open_file("link").is_err());
            dir
        });
        assert!(dir.subdir("link").is_err(), "a symlinked subdir is refused");
        let dir = within(move || {
            assert!(dir.append("fifo").is_err(), "no append to a FIFO");
            assert!(dir.append("link").is_err(), "no append through a symlink");
            dir
        });
        dir.append("log").unwrap().write_all(b"one\n").unwrap();
        dir.append("log").unwrap().write_all(b"two\n").unwrap();
        assert_eq!(dir.read("log", 100).unwrap(), b"one\ntwo\n");
        assert!(dir.create("../escape").is_err());
        let _ = std::fs::remove_dir_all(top);
    }

    #[test]
    fn entries_are_listed_as_they_are() {
        let top = scratch("entries");
        let dir = Dir::open(&top).unwrap();
        std::fs::write(top.join("file"), "x").unwrap();
        std::fs::create_dir(top.join("sub")).unwrap();
        symlink(top.join("sub"), top.join("link")).unwrap();
        mkfifo(&top.join("fifo"));
        let mut listed = dir.entries().unwrap();
        listed.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            listed,
            [
                ("fifo".to_string(), Kind::Other),
                ("file".to_string(), Kind::File),
                ("link".to_string(), Kind::Other),
                ("sub".to_string(), Kind::Dir),
            ]
        );
        assert!(dir.exists("link").unwrap() && !dir.exists("none").unwrap());
        dir.remove("link").unwrap();
        assert!(top.join("sub").is_dir(), "the link went, not its target");
        let _ = std::fs::remove_dir_all(top);
    }

    #[test]
    fn a_tree_is_removed_without_following_its_links() {
        let top = scratch("tree");
        let outside = scratch("tree-outside");
        std::fs::write(outside.join("keep"), "host data").unwrap();
        std::fs::create_dir_all(top.join("t/a/b")).unwrap();
        std::fs::write(top.join("t/a/b/f"), "x").unwrap();
        symlink(&outside, top.join("t/a/link")).unwrap();
        symlink(&outside, top.join("alias")).unwrap();
        let dir = Dir::open(&top).unwrap();
        dir.remove_tree("t").unwrap();
        dir.remove_tree("alias").unwrap();
        dir.remove_tree("none").unwrap();
        assert_eq!(std::fs::read_dir(&top).unwrap().count(), 0);
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).unwrap(),
            "host data"
        );
        let _ = std::fs::remove_dir_all(top);
        let _ = std::fs::remove_dir_all(outside);
    }

    #[test]
    fn a_held_lock_file_is_not_replaced() {
        let top = scratch("replace");
        let dir = Dir::open(&top).unwrap();
        dir.replace_locked("HEAD", b"one\n").unwrap();
        std::fs::write(top.join("HEAD.lock"), "git").unwrap();
        let e = dir.replace_locked("HEAD", b"two\n").unwrap_err();
        assert!(e.to_string().contains("another process"), "{e}");
        assert_eq!(dir.read("HEAD", 10).unwrap(), b"one\n");
        assert_eq!(
            std::fs::read_to_string(top.join("HEAD.lock")).unwrap(),
            "git"
        );
        let _ = std::fs::remove_dir_all(top);
    }
}
