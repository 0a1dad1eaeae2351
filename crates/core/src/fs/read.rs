//! Reading a file by path where the directories above it are trusted but the file
//! may not be (another process wrote it, or swapped it): never follow a symlink at
//! its end, never block on a FIFO or device, read only regular files, and only a
//! bounded amount.

use std::fs::{File, Metadata};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

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

/// The first `max` bytes of the regular file `path`, or None if it is anything else
/// (a symlink, a directory, a FIFO) or cannot be read.
pub fn head(path: &Path, max: u64) -> Option<Vec<u8>> {
    let (file, _) = open_regular(path, u64::MAX).ok()?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The whole regular file `path`; an error if it is larger than `max` bytes.
pub fn whole(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    whole_into(path, &mut bytes, max)?;
    Ok(bytes)
}

/// `whole` into `buf` (cleared first), for readers of many files.
pub fn whole_into(path: &Path, buf: &mut Vec<u8>, max: u64) -> std::io::Result<()> {
    buf.clear();
    let (file, meta) = open_regular(path, max)?;
    buf.reserve(meta.len() as usize);
    file.take(max).read_to_end(buf)?;
    Ok(())
}

/// The last `max` bytes of the regular file `path`, from the start of a line (a
/// line cut by the limit is left out): the latest records of a log however long.
pub fn tail(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let (mut file, meta) = open_regular(path, u64::MAX)?;
    let start = meta.len().saturating_sub(max);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    if start > 0 {
        let cut = bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        bytes.drain(..cut);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::testing::{mkfifo, scratch, within};

    #[test]
    fn reads_only_regular_files_and_never_follows_links() {
        let dir = scratch("read");
        std::fs::write(dir.join("README.md"), "hello world").unwrap();
        assert_eq!(head(&dir.join("README.md"), 5).unwrap(), b"hello");
        assert_eq!(whole(&dir.join("README.md"), 11).unwrap(), b"hello world");
        assert!(whole(&dir.join("README.md"), 10).is_err(), "bounded");
        std::os::unix::fs::symlink("/etc/hostname", dir.join("link")).unwrap();
        assert_eq!(head(&dir.join("link"), 100), None);
        assert!(whole(&dir.join("link"), 100).is_err());
        assert!(tail(&dir.join("link"), 100).is_err());
        let fifo = dir.join("fifo");
        mkfifo(&fifo);
        let (h, t, w) = within(move || (head(&fifo, 100), tail(&fifo, 100), whole(&fifo, 100)));
        assert_eq!(h, None, "a FIFO neither blocks nor is read");
        assert!(t.is_err() && w.is_err());
        assert_eq!(head(&dir, 100), None);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_tail_starts_at_a_line() {
        let dir = scratch("tail");
        let path = dir.join("log");
        std::fs::write(&path, "first\nsecond\nthird\n").unwrap();
        assert_eq!(tail(&path, 100).unwrap(), b"first\nsecond\nthird\n");
        assert_eq!(
            tail(&path, 9).unwrap(),
            b"third\n",
            "the cut line is left out"
        );
        assert_eq!(tail(&path, 6).unwrap(), b"", "no whole line in the tail");
        std::fs::remove_dir_all(dir).unwrap();
    }

    quickcheck::quickcheck! {
        fn the_tail_is_whole_lines_at_the_end(lines: Vec<String>, max: u8) -> bool {
            let text: String = lines
                .iter()
                .map(|l| format!("{}\n", l.replace('\n', " ")))
                .collect();
            let dir = scratch("tail-prop");
            let path = dir.join("log");
            std::fs::write(&path, &text).unwrap();
            let got = tail(&path, u64::from(max)).unwrap();
            std::fs::remove_dir_all(dir).unwrap();
            let bytes = text.as_bytes();
            let start = bytes.len() - got.len();
            got.len() <= usize::from(max)
                && bytes.ends_with(&got)
                && (start == 0 || bytes[start - 1] == b'\n')
                // Nothing longer would fit: the line before starts before the limit.
                && (start == 0 || bytes.len() - usize::from(max) >= bytes[..start - 1]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1))
        }
    }
}
