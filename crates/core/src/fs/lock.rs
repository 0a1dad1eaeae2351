//! Advisory whole-file locks (std's `File::lock` family: `flock` on Linux), the one
//! way our processes take turns on a file: the kernel releases a lock however its
//! holder ends (SIGKILL included), and a reused pid holds none. A held lock's file
//! says who holds it, for messages. Only this module takes them (clippy.toml's
//! disallowed-methods).
#![allow(clippy::disallowed_methods)]

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::timestamp::Timestamp;

/// Shared (many readers) or exclusive (one holder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Shared,
    Exclusive,
}

/// The lock file `path` (in a directory of ours), created if missing, this user's
/// only, never through a symlink.
pub fn open(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// An exclusive lock on `file`, waited for (through EINTR).
pub fn lock(file: &File) -> std::io::Result<()> {
    loop {
        match file.lock() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            done => return done,
        }
    }
}

/// Takes a lock of `mode` on `file` without waiting: false when another holder has
/// it.
pub fn try_lock(file: &File, mode: Mode) -> std::io::Result<bool> {
    let taken = match mode {
        Mode::Shared => file.try_lock_shared(),
        Mode::Exclusive => file.try_lock(),
    };
    match taken {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// Writes `bytes` to `path` atomically with the file exclusively locked before it
/// has its name, and keeps it locked while the returned file is open: a marker that
/// says "this process lives" (readers try the lock; a free one is a leftover).
pub fn publish(path: &Path, bytes: &[u8]) -> std::io::Result<File> {
    super::atomic::write_with(path, bytes, |file| {
        if try_lock(file, Mode::Exclusive)? {
            Ok(())
        } else {
            Err(std::io::Error::other(
                "a new file is locked by another process",
            ))
        }
    })
}

/// Who holds the lock, as its holder wrote it (`write_holder`): one line, escaped,
/// at most `max` bytes read.
pub fn holder(mut file: &File, max: u64) -> String {
    let mut text = String::new();
    let _ = file.rewind();
    let _ = file.take(max).read_to_string(&mut text);
    crate::text::escape_controls(&crate::text::one_line(&text))
}

/// Says in `file` (whose lock we hold) that this process holds it.
pub fn write_holder(mut file: &File) -> std::io::Result<()> {
    let text = format!(
        "pid {} on {} since {}\n",
        std::process::id(),
        crate::sys::hostname(),
        Timestamp::now()
    );
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::testing::scratch;

    #[test]
    fn locks_exclude_each_other_as_their_modes_say() {
        let dir = scratch("lock");
        let path = dir.join("x.lock");
        let (first, second) = (open(&path).unwrap(), open(&path).unwrap());
        assert!(try_lock(&first, Mode::Shared).unwrap());
        assert!(try_lock(&second, Mode::Shared).unwrap(), "readers share");
        assert!(!try_lock(&second, Mode::Exclusive).unwrap());
        drop(first);
        assert!(try_lock(&second, Mode::Exclusive).unwrap());
        write_holder(&second).unwrap();
        let third = open(&path).unwrap();
        assert!(!try_lock(&third, Mode::Shared).unwrap());
        assert!(
            holder(&third, 256).starts_with(&format!("pid {} on ", std::process::id())),
            "{}",
            holder(&third, 256)
        );
        drop(second);
        lock(&third).unwrap();
        std::os::unix::fs::symlink(&path, dir.join("link")).unwrap();
        assert!(open(&dir.join("link")).is_err(), "not through a symlink");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
