//! JSON Lines files that several processes append to (the TaskStore). An append is
//! one `write` of whole lines on an `O_APPEND` file, so concurrent appends never
//! interleave. A crash mid-append can leave a torn last line: readers skip it with a
//! warning, and the next append starts on a fresh line so the torn bytes never glue
//! onto a good record.
//!
//! `Capped`: a run's log that one process appends to as things happen
//! (`events.jsonl`, `egress.jsonl`), bounded in size: what the worker can cause in
//! any number must not fill the host's disk.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// An append-only log of whole lines that stops at a size: each line is one
/// `write` (a reader following the file never sees half of one), and a line that
/// would take the file past the limit given is not written. Its owner decides what
/// to write instead (one line saying the log was cut).
#[derive(Debug)]
pub struct Capped {
    file: File,
    len: u64,
}

impl Capped {
    /// A log appending to `file` (opened with `O_APPEND`); what it holds counts.
    pub fn new(file: File) -> Capped {
        let len = file.metadata().map_or(0, |m| m.len());
        Capped { file, len }
    }

    /// The bytes in the file.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes `line` (newline included) when the file then holds at most `limit`
    /// bytes; false when it would hold more (nothing is written).
    pub fn append(&mut self, line: &[u8], limit: u64) -> std::io::Result<bool> {
        let after = self.len.saturating_add(line.len() as u64);
        if after > limit {
            return Ok(false);
        }
        // A line this short is written at once to a regular file.
        let written = self.file.write(line)?;
        self.len += written as u64;
        if written != line.len() {
            return Err(std::io::Error::other(format!(
                "short write: {written} of {} bytes",
                line.len()
            )));
        }
        Ok(true)
    }
}

/// Creates `path` with `json` as its first line, whole or not at all; fails if it
/// exists.
pub fn create(path: &Path, json: &[u8]) -> std::io::Result<()> {
    super::atomic::create_new(path, &line(json, false))
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

/// `append`, creating the file if it is missing (by whoever comes first).
pub fn append_or_create(path: &Path, json: &[u8]) -> std::io::Result<()> {
    match append(path, json) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match create(path, json) {
            // Someone else created it just now.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => append(path, json),
            other => other,
        },
        other => other,
    }
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

/// The non-empty lines of `bytes` with their 1-based numbers, and whether each is
/// the last one (where a torn write would be).
pub fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8], bool)> {
    let mut rest = bytes;
    let mut number = 0;
    std::iter::from_fn(move || {
        loop {
            if rest.is_empty() {
                return None;
            }
            number += 1;
            let (line, after) = match find_newline(rest) {
                Some(at) => (&rest[..at], &rest[at + 1..]),
                None => (rest, &rest[rest.len()..]),
            };
            rest = after;
            if !blank(line) {
                return Some((number, line, blank(rest)));
            }
        }
    })
}

fn blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

/// The index of the first `\n` in `bytes`. Eight bytes at a time: listing a
/// workspace splits tens of megabytes into lines.
fn find_newline(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const NEWLINES: u64 = ONES * b'\n' as u64;
    let mut chunks = bytes.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let v = u64::from_le_bytes(word) ^ NEWLINES;
        // Non-zero when some byte of v is zero (that byte was a newline).
        if v.wrapping_sub(ONES) & !v & HIGHS != 0 {
            return chunk.iter().position(|&b| b == b'\n').map(|at| offset + at);
        }
        offset += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == b'\n')
        .map(|at| offset + at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_start_on_a_fresh_line_after_a_torn_one() {
        let dir = crate::fs::testing::scratch("jsonl");
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
        let buf = crate::fs::read::whole(&path, 1 << 20).unwrap();
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
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_capped_log_writes_whole_lines_up_to_its_limit_and_counts_what_it_held() {
        let dir = crate::fs::testing::scratch("jsonl-capped");
        let path = dir.join("log.jsonl");
        std::fs::write(&path, b"{\"old\":1}\n").unwrap();
        let open = || {
            std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap()
        };
        let mut log = Capped::new(open());
        assert_eq!(log.len(), 10, "what the file held counts");
        assert!(log.append(b"{\"a\":1}\n", 18).unwrap());
        assert!(!log.append(b"{\"b\":2}\n", 25).unwrap(), "26 > 25");
        assert!(log.append(b"{}\n", 25).unwrap());
        assert!(log.append(b"{\"c\":3}\n", 29).unwrap(), "a larger limit");
        assert_eq!(log.len(), 29);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"{\"old\":1}\n{\"a\":1}\n{}\n{\"c\":3}\n"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn newlines_are_found_at_every_offset() {
        for len in 0..40 {
            for at in 0..len {
                let mut bytes = vec![b'x'; len];
                bytes[at] = b'\n';
                assert_eq!(find_newline(&bytes), Some(at), "{len} {at}");
            }
            assert_eq!(find_newline(&vec![0x8a; len]), None);
        }
    }

    quickcheck::quickcheck! {
        fn the_word_search_finds_the_first_newline(bytes: Vec<u8>, at: Vec<u8>) -> bool {
            // Newlines only where `at` puts (up to two of) them, so that cases
            // without one, with the first in any word or in the tail all come up.
            let mut bytes: Vec<u8> = bytes.into_iter().map(|b| b.max(b'\n' + 1)).collect();
            let len = bytes.len();
            for i in at.into_iter().take(2) {
                if let Some(b) = bytes.get_mut(usize::from(i) % len.max(1)) {
                    *b = b'\n';
                }
            }
            find_newline(&bytes) == bytes.iter().position(|&b| b == b'\n')
        }

        fn lines_are_the_non_blank_pieces_between_newlines(text: String) -> bool {
            let bytes = text.as_bytes();
            let pieces: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
            let expected: Vec<(usize, &[u8], bool)> = pieces
                .iter()
                .enumerate()
                .filter(|(_, p)| !blank(p))
                .map(|(i, p)| (i + 1, *p, pieces[i + 1..].iter().all(|q| blank(q))))
                .collect();
            lines(bytes).collect::<Vec<_>>() == expected
        }
    }

    /// Whole records appended around torn writes (a crash mid-append) all read back,
    /// in order, each a line of its own.
    #[test]
    fn records_survive_torn_writes() {
        fn prop(records: Vec<(String, Option<String>)>) -> bool {
            let dir = crate::fs::testing::scratch("jsonl-prop");
            let path = dir.join("t.jsonl");
            let clean = |s: &str| s.replace(['\n', '\r'], " ").trim().to_string();
            let mut wanted = Vec::new();
            for (record, torn) in &records {
                let record = format!("{{{}}}", clean(record));
                append_or_create(&path, record.as_bytes()).unwrap();
                wanted.push(record);
                if let Some(torn) = torn {
                    let mut file = std::fs::OpenOptions::new()
                        .append(true)
                        .open(&path)
                        .unwrap();
                    file.write_all(clean(torn).as_bytes()).unwrap();
                }
            }
            let bytes = std::fs::read(&path).unwrap_or_default();
            std::fs::remove_dir_all(dir).unwrap();
            let mut got = lines(&bytes).map(|(_, l, _)| l.to_vec());
            wanted.iter().all(|w| got.any(|l| l == w.as_bytes()))
        }
        quickcheck::quickcheck(prop as fn(Vec<(String, Option<String>)>) -> bool);
    }

    #[test]
    fn an_unterminated_last_line_is_marked_last() {
        let got: Vec<_> = lines(b"{}\n{\"x").map(|(n, _, last)| (n, last)).collect();
        assert_eq!(got, [(1, false), (2, true)]);
    }
}
