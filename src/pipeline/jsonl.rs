//! JSON Lines files that several processes append to (the TaskStore). An append is
//! one `write` of whole lines on an `O_APPEND` file, so concurrent appends never
//! interleave. A crash mid-append can leave a torn last line: readers skip it with a
//! warning, and the next append starts on a fresh line so the torn bytes never glue
//! onto a good record.

use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Creates `path` with `json` as its first line; fails if it exists.
pub fn create(path: &Path, json: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.write_all(&line(json, false))
}

/// Appends `json` as one line to the existing file `path`, in a single `write`.
pub fn append(path: &Path, json: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut last = [b'\n'];
    if meta.len() > 0 {
        file.read_exact_at(&mut last, meta.len() - 1)?;
    }
    let bytes = line(json, last[0] != b'\n');
    let written = file.write(&bytes)?;
    if written != bytes.len() {
        return Err(std::io::Error::other(format!(
            "short write: {written} of {} bytes",
            bytes.len()
        )));
    }
    Ok(())
}

fn line(json: &[u8], fresh_line: bool) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(json.len() + 2);
    if fresh_line {
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(json);
    bytes.push(b'\n');
    bytes
}

/// Reads the whole file `path` into `buf` (cleared first), without following a
/// symlink or blocking on a FIFO; at most `max` bytes.
pub fn read(path: &Path, buf: &mut Vec<u8>, max: u64) -> std::io::Result<()> {
    buf.clear();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
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
    buf.reserve(meta.len() as usize);
    file.take(max).read_to_end(buf)?;
    Ok(())
}

/// The non-empty lines of `bytes` with their 1-based numbers, and whether each is
/// the last one (where a torn write would be).
pub fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8], bool)> {
    let blank = |l: &[u8]| l.iter().all(u8::is_ascii_whitespace);
    // The index of the line holding the last non-blank byte.
    let last = (bytes.iter())
        .rposition(|b| !b.is_ascii_whitespace())
        .map(|end| bytes[..end].iter().filter(|&&b| b == b'\n').count());
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(move |(_, l)| !blank(l))
        .map(move |(n, l)| (n + 1, l, Some(n) == last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_start_on_a_fresh_line_after_a_torn_one() {
        let dir =
            std::env::temp_dir().join(format!("ar-jsonl-{}", super::super::id::random_hex(8)));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.jsonl");
        create(&path, b"{\"a\":1}").unwrap();
        assert!(create(&path, b"{}").is_err(), "create is exclusive");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"torn")
            .unwrap();
        append(&path, b"{\"b\":2}").unwrap();
        let mut buf = Vec::new();
        read(&path, &mut buf, 1 << 20).unwrap();
        assert_eq!(buf, b"{\"a\":1}\n{\"torn\n{\"b\":2}\n");
        let got: Vec<_> = lines(&buf)
            .map(|(n, l, last)| (n, l.to_vec(), last))
            .collect();
        assert_eq!(
            got,
            [
                (1, b"{\"a\":1}".to_vec(), false),
                (2, b"{\"torn".to_vec(), false),
                (3, b"{\"b\":2}".to_vec(), true)
            ]
        );
        assert!(read(&path, &mut buf, 4).is_err(), "bounded");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_unterminated_last_line_is_marked_last() {
        let got: Vec<_> = lines(b"{}\n{\"x").map(|(n, _, last)| (n, last)).collect();
        assert_eq!(got, [(1, false), (2, true)]);
    }
}
