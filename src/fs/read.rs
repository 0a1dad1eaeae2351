//! Reading files inside a repository that an untrusted worker may have written
//! (SPEC §9): never follow a symlink, never block on a FIFO or device, read only
//! regular files, and only a bounded amount.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The first `max` bytes of the regular file `path`, or None if it is anything else
/// (a symlink, a directory, a FIFO) or cannot be read. The last component must not
/// be a symlink; the caller makes sure the directories above it are trusted.
pub fn head(path: &Path, max: u64) -> Option<Vec<u8>> {
    let (file, _) = open_regular(path, u64::MAX).ok()?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The regular file `path` opened for reading (not through a symlink at its end,
/// never blocking on a FIFO), with its metadata; an error if it is anything else or
/// larger than `max` bytes.
pub fn open_regular(path: &Path, max: u64) -> std::io::Result<(File, Metadata)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > max {
        return Err(std::io::Error::other(format!(
            "{} bytes; the limit is {max}",
            meta.len()
        )));
    }
    Ok((file, meta))
}

/// Copies the regular file `from` (not a symlink, not a FIFO) to the new file `to`,
/// at most `max` bytes; an error names what was wrong.
pub fn copy_regular(from: &Path, to: &Path, max: u64) -> std::io::Result<u64> {
    let (file, _) = open_regular(from, max)?;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(to)?;
    std::io::copy(&mut file.take(max), &mut out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_regular_files_and_never_follows_links() {
        let dir =
            std::env::temp_dir().join(format!("ar-safe-{}", crate::pipeline::id::random_hex(8)));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("README.md"), "hello world").unwrap();
        assert_eq!(head(&dir.join("README.md"), 5).unwrap(), b"hello");
        std::os::unix::fs::symlink("/etc/hostname", dir.join("link")).unwrap();
        assert_eq!(head(&dir.join("link"), 100), None);
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(head(&fifo, 100), None, "a FIFO neither blocks nor is read");
        assert_eq!(head(&dir, 100), None);
        assert!(copy_regular(&dir.join("link"), &dir.join("copy"), 100).is_err());
        assert!(copy_regular(&fifo, &dir.join("copy"), 100).is_err());
        assert_eq!(
            copy_regular(&dir.join("README.md"), &dir.join("copy"), 100).unwrap(),
            11
        );
        assert!(copy_regular(&dir.join("README.md"), &dir.join("copy2"), 5).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
