//! Where a child's output goes while it runs: a log file, bounded tails, and
//! optionally each stdout line to a callback. Memory stays bounded whatever the
//! child prints.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use crate::secret::{Redactor, StreamRedactor};

use super::Stream;

/// Whether a line is no sign of progress (`Capture::with_quiet_lines`).
pub type QuietLine = dyn Fn(&[u8]) -> bool;

/// Where a child's output goes: an optional log file, a bounded tail of both streams,
/// a bounded tail of stderr alone, and optionally each stdout line to a callback (the
/// codex event parser). With `redacting`, secrets are masked in each stream before
/// any of these sees it, so no cut-off tail can show part of a secret.
pub struct Capture<'a> {
    /// Applied to stdout before anything else sees it.
    filter: Option<&'a mut dyn StreamFilter>,
    masks: Option<[StreamRedactor; 2]>,
    /// Unbuffered: each chunk is written as it arrives, so the log can be followed.
    log: Option<(File, PathBuf)>,
    log_error: Option<String>,
    tail: Tail,
    stderr: Tail,
    lines: Option<LineSplitter<'a>>,
    /// Stdout lines that are no sign of progress (an agent's retry notices): a chunk
    /// of only such lines does not reset the idle clock.
    quiet: Option<&'a QuietLine>,
    bytes: u64,
}

impl<'a> Capture<'a> {
    /// Keeps the last `tail` bytes of output in memory; writes nothing to disk.
    pub fn in_memory(tail: usize) -> Self {
        Capture {
            filter: None,
            masks: None,
            log: None,
            log_error: None,
            tail: Tail::new(tail),
            stderr: Tail::new(tail.min(16 * 1024)),
            lines: None,
            quiet: None,
            bytes: 0,
        }
    }

    /// Masks `redactor`'s secrets in everything captured.
    pub fn redacting(mut self, redactor: &Redactor) -> Self {
        if !redactor.is_empty() {
            self.masks = Some([
                StreamRedactor::new(redactor.clone()),
                StreamRedactor::new(redactor.clone()),
            ]);
        }
        self
    }

    /// Also streams all output to `log`, an open file shown as `path` in messages.
    pub fn with_log(mut self, log: File, path: PathBuf) -> Self {
        self.log = Some((log, path));
        self
    }

    /// Passes stdout through `filter` before it is masked, logged or split.
    pub fn with_filter(mut self, filter: &'a mut dyn StreamFilter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Hands each stdout line (without its newline) to `on_line`. Lines longer than
    /// `max_line` are cut to that length.
    pub fn with_lines(mut self, max_line: usize, on_line: &'a mut dyn FnMut(&[u8])) -> Self {
        self.lines = Some(LineSplitter::new(max_line, on_line));
        self
    }

    /// Lines for which `quiet` is true are no sign of progress (`take`).
    pub fn with_quiet_lines(mut self, quiet: &'a QuietLine) -> Self {
        self.quiet = Some(quiet);
        self
    }

    /// Takes a chunk of output; false when it was only quiet lines, so the idle
    /// clock goes on.
    pub(super) fn take(&mut self, stream: Stream, bytes: &[u8]) -> bool {
        let progress = match (self.quiet, stream) {
            (Some(quiet), Stream::Stdout) => !only_quiet_lines(bytes, quiet),
            _ => true,
        };
        self.take_bytes(stream, bytes);
        progress
    }

    fn take_bytes(&mut self, stream: Stream, bytes: &[u8]) {
        let filtered;
        let bytes = match (&mut self.filter, stream) {
            (Some(filter), Stream::Stdout) => {
                filtered = filter.push(bytes);
                &filtered[..]
            }
            _ => bytes,
        };
        self.bytes += bytes.len() as u64;
        match &mut self.masks {
            Some(masks) => {
                let masked = masks[stream as usize].push(bytes);
                self.store(stream, &masked);
            }
            None => self.store(stream, bytes),
        }
    }

    fn store(&mut self, stream: Stream, bytes: &[u8]) {
        if let Some((log, _)) = &mut self.log
            && let Err(e) = log.write_all(bytes)
        {
            self.log_error.get_or_insert_with(|| e.to_string());
        }
        self.tail.push(bytes);
        match stream {
            Stream::Stdout => {
                if let Some(lines) = &mut self.lines {
                    lines.push(bytes);
                }
            }
            Stream::Stderr => self.stderr.push(bytes),
        }
    }

    pub(super) fn finish(&mut self) {
        if let Some(filter) = &mut self.filter {
            let rest = filter.finish();
            self.filter = None;
            self.take_bytes(Stream::Stdout, &rest);
        }
        if let Some(masks) = &mut self.masks {
            let rest = [masks[0].finish(), masks[1].finish()];
            self.store(Stream::Stdout, &rest[0]);
            self.store(Stream::Stderr, &rest[1]);
        }
        if let Some(lines) = &mut self.lines {
            lines.finish();
        }
        if let (Some((_, path)), Some(e)) = (&self.log, &self.log_error) {
            log::warn!("log {} is incomplete: {e}", path.display());
        }
    }

    /// The last bytes of stdout and stderr together, as text.
    pub fn tail(&self) -> String {
        self.tail.text()
    }

    /// The last bytes of stderr, as text.
    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// Total bytes received on both streams.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// Whether `bytes` are whole lines, each `quiet` (what arrives in one chunk: an
/// agent prints a line at once). A chunk with a partial line counts as progress.
fn only_quiet_lines(bytes: &[u8], quiet: &QuietLine) -> bool {
    !bytes.is_empty()
        && bytes.ends_with(b"\n")
        && bytes[..bytes.len() - 1].split(|&b| b == b'\n').all(quiet)
}

/// Rewrites a stream as it arrives (e.g. takes out records meant for agent-runner).
pub trait StreamFilter {
    /// Takes a chunk; returns the bytes that pass now.
    fn push(&mut self, bytes: &[u8]) -> Vec<u8>;
    /// The stream ended; returns what was held back.
    fn finish(&mut self) -> Vec<u8>;
}

/// The last `capacity` bytes of a stream.
pub(crate) struct Tail {
    capacity: usize,
    buf: Vec<u8>,
}

impl Tail {
    pub(crate) fn new(capacity: usize) -> Self {
        Tail {
            capacity,
            buf: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if bytes.len() >= self.capacity {
            self.buf.clear();
            self.buf
                .extend_from_slice(&bytes[bytes.len() - self.capacity..]);
            return;
        }
        self.buf.extend_from_slice(bytes);
        // Trim only when twice the capacity, so trimming costs O(1) per byte.
        if self.buf.len() > 2 * self.capacity {
            self.buf.drain(..self.buf.len() - self.capacity);
        }
    }

    pub(crate) fn text(&self) -> String {
        let start = self.buf.len().saturating_sub(self.capacity);
        String::from_utf8_lossy(&self.buf[start..]).into_owned()
    }
}

/// Splits a byte stream into lines for a callback, bounding each line's length.
struct LineSplitter<'a> {
    max: usize,
    line: Vec<u8>,
    on_line: &'a mut dyn FnMut(&[u8]),
}

impl<'a> LineSplitter<'a> {
    fn new(max: usize, on_line: &'a mut dyn FnMut(&[u8])) -> Self {
        LineSplitter {
            max,
            line: Vec::new(),
            on_line,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            self.append(&bytes[..end]);
            (self.on_line)(&self.line);
            self.line.clear();
            bytes = &bytes[end + 1..];
        }
        self.append(bytes);
    }

    fn append(&mut self, bytes: &[u8]) {
        let room = self.max.saturating_sub(self.line.len());
        self.line.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn finish(&mut self) {
        if !self.line.is_empty() {
            (self.on_line)(&self.line);
            self.line.clear();
        }
    }
}
