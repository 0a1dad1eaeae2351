//! The work's bundle read out of its volume under the copy transport: `docker cp
//! <carrier>:<file> -` writes a tar stream of that one file, read here as it comes
//! and written to a file of ours, bounded while it streams. A header that says more
//! than the bound is refused before a byte of the file is written, and nothing past
//! the bound is ever written (the rest of the stream is dropped as it comes), so
//! the bundle's host cannot fill this machine's disk; only a regular file is taken.

use std::fs::File;
use std::io::Write;

use super::pulled::{Pulled, StreamReader};
use super::untar::{self, Kind};

/// Why the stream was not one whole regular file within the bound.
#[derive(Debug, thiserror::Error)]
pub(super) enum BundleOutError {
    /// The tar stream itself (its framing, a read).
    #[error("{0}")]
    Stream(std::io::Error),
    #[error("the bundle is not a regular file (tar type {0:?})")]
    NotAFile(char),
    #[error("the bundle is {size} bytes, more than the {} brought back", agent_runner_core::text::bytes(*.max))]
    TooLarge { size: u64, max: u64 },
    #[error("cannot write the bundle: {0}")]
    Write(std::io::Error),
    #[error("the stream ended after {written} of the bundle's {size} bytes")]
    Cut { written: u64, size: u64 },
    #[error("the stream held no file")]
    NoFile,
    #[error("the reader of the bundle's tar stream failed")]
    ReaderFailed,
}

/// See the module documentation: a `StreamFilter` that passes nothing on, reading
/// the stream through the `tar` crate on a thread of its own as it comes, writing
/// its one file into `file`, at most `max` bytes.
pub(super) fn reader(file: File, max: u64) -> Pulled<Result<u64, BundleOutError>> {
    Pulled::new(move |stream| one_file(stream, file, max))
}

/// The bytes written, or why the stream was not one whole file within the bound.
pub(super) fn result(reader: Pulled<Result<u64, BundleOutError>>) -> Result<u64, BundleOutError> {
    reader.result().unwrap_or(Err(BundleOutError::ReaderFailed))
}

/// Why the reading stops: the one file is whole (its size), or it failed.
enum Stop {
    Whole(u64),
    Failed(BundleOutError),
}

/// The stream's first entry, a regular file, into `file`; what follows it (its
/// padding, the end blocks, anything else) is not read.
fn one_file(stream: StreamReader, mut file: File, max: u64) -> Result<u64, BundleOutError> {
    let read = untar::read_entries(
        stream,
        |e| Stop::Failed(BundleOutError::Stream(e)),
        &mut |entry, content| {
            if entry.kind != Kind::File {
                return Err(Stop::Failed(BundleOutError::NotAFile(char::from(
                    entry.kind.type_byte(),
                ))));
            }
            if entry.size > max {
                return Err(Stop::Failed(BundleOutError::TooLarge {
                    size: entry.size,
                    max,
                }));
            }
            let mut out = Counted {
                file: &mut file,
                written: 0,
                failed: false,
            };
            let copied = content.copy_to(&mut out).and_then(|()| out.flush());
            let (written, failed) = (out.written, out.failed);
            match copied {
                Ok(()) => {}
                Err(e) if failed => {
                    return Err(Stop::Failed(BundleOutError::Write(e)));
                }
                Err(_) => {
                    return Err(Stop::Failed(BundleOutError::Cut {
                        written,
                        size: entry.size,
                    }));
                }
            }
            Err(Stop::Whole(entry.size))
        },
    );
    match read {
        Ok(()) => Err(BundleOutError::NoFile),
        Err(Stop::Whole(size)) => Ok(size),
        Err(Stop::Failed(why)) => Err(why),
    }
}

/// The bundle's file, counting what it took; `failed` once a write failed.
struct Counted<'a> {
    file: &'a mut File,
    written: u64,
    failed: bool,
}

impl Write for Counted<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(bytes).inspect_err(|_| self.failed = true)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush().inspect_err(|_| self.failed = true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_core::process::StreamFilter;

    const BLOCK: usize = 512;

    fn header(name: &str, kind: u8, size: u64) -> Vec<u8> {
        let mut h = vec![0u8; BLOCK];
        h[..name.len()].copy_from_slice(name.as_bytes());
        let size = format!("{size:011o}\0");
        h[124..136].copy_from_slice(size.as_bytes());
        h[156] = kind;
        h[100..108].copy_from_slice(b"0000644\0");
        h[108..116].copy_from_slice(b"0000000\0");
        h[116..124].copy_from_slice(b"0000000\0");
        h[136..148].copy_from_slice(b"00000000000\0");
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        checksum(&mut h);
        h
    }

    /// The header's checksum, as a tar writer sets it.
    fn checksum(h: &mut [u8]) {
        h[148..156].fill(b' ');
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    }

    fn tar(entries: &[(&str, u8, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, kind, data) in entries {
            out.extend(header(name, *kind, data.len() as u64));
            out.extend_from_slice(data);
            out.resize(out.len().div_ceil(BLOCK) * BLOCK, 0);
        }
        out.extend(vec![0u8; 2 * BLOCK]);
        out
    }

    /// The bytes written or the error's text, and the file.
    fn read(stream: &[u8], max: u64, chunk: usize) -> (Result<u64, Box<str>>, Vec<u8>) {
        let dir = agent_runner_core::fs::testing::scratch("bundle-out");
        let path = dir.join("work.bundle");
        let mut out = reader(File::create(&path).unwrap(), max);
        for piece in stream.chunks(chunk) {
            assert!(out.push(piece).is_empty());
        }
        out.finish();
        let result = super::result(out).map_err(|e| e.to_string().into());
        let written = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_dir_all(dir);
        (result, written)
    }

    #[test]
    fn the_one_file_is_written_whatever_the_chunks() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        let stream = tar(&[
            ("pax", b'x', b"30 path=work.bundle\n"),
            ("work.bundle", b'0', &data),
        ]);
        for chunk in [1, 7, 512, 513, 100_000] {
            let (result, written) = read(&stream, 1 << 20, chunk);
            assert_eq!(result, Ok(3000), "{chunk}");
            assert_eq!(written, data, "{chunk}");
        }
    }

    /// Issue 41 (attack round 5, finding 4): the bound was checked after `docker
    /// cp` had written the whole bundle here.
    #[test]
    fn a_bundle_past_the_bound_is_refused_with_nothing_written() {
        let data = vec![7u8; 5000];
        let (result, written) = read(&tar(&[("work.bundle", b'0', &data)]), 4096, 512);
        let e = result.unwrap_err();
        assert!(e.contains("5000 bytes, more than the 4.0 KiB"), "{e}");
        assert!(written.is_empty());
        // A header that lies low: nothing past its size is taken either.
        let mut lying = tar(&[("work.bundle", b'0', &data)]);
        lying[124..136].copy_from_slice(format!("{:011o}\0", 100).as_bytes());
        checksum(&mut lying[..BLOCK]);
        let (result, written) = read(&lying, 4096, 512);
        assert_eq!(result, Ok(100));
        assert_eq!(written.len(), 100);
    }

    #[test]
    fn anything_but_one_whole_regular_file_is_refused() {
        let link = tar(&[("work.bundle", b'2', b"")]);
        assert!(
            read(&link, 4096, 512)
                .0
                .unwrap_err()
                .contains("not a regular file")
        );
        assert!(
            read(&tar(&[]), 4096, 512)
                .0
                .unwrap_err()
                .contains("no file")
        );
        let whole = tar(&[("work.bundle", b'0', &[1u8; 600])]);
        let cut = &whole[..BLOCK + 100];
        assert!(
            read(cut, 4096, 512)
                .0
                .unwrap_err()
                .contains("ended after 100")
        );
    }
}
