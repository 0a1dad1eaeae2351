//! The work's bundle read out of its volume under the copy transport: `docker cp
//! <carrier>:<file> -` writes a tar stream of that one file, read here as it comes
//! and written to a file of ours, bounded while it streams. A header that says more
//! than the bound is refused before a byte of the file is written, and nothing past
//! the bound is ever written (the rest of the stream is dropped as it comes), so
//! the bundle's host cannot fill this machine's disk; only a regular file is taken.

use std::fs::File;
use std::io::Write;

use agent_runner_core::process::StreamFilter;

const BLOCK: usize = 512;

/// Where the reader is in the stream.
enum At {
    /// Gathering a header block.
    Header,
    /// Skipping `left` bytes (an extended header, a file's padding).
    Skip { left: u64, then_done: bool },
    /// The file's bytes: `left` of them to come, then `pad` of padding.
    Data { left: u64, pad: u64 },
    /// The file is whole (or the stream failed): the rest is dropped.
    Done,
}

/// See the module documentation; a `StreamFilter` that passes nothing on.
pub(super) struct BundleOut {
    file: File,
    max: u64,
    at: At,
    header: Vec<u8>,
    /// The file's size once its header was read.
    size: Option<u64>,
    written: u64,
    error: Option<String>,
}

impl BundleOut {
    /// Writes the stream's one file into `file`, at most `max` bytes.
    pub(super) fn new(file: File, max: u64) -> BundleOut {
        BundleOut {
            file,
            max,
            at: At::Header,
            header: Vec::with_capacity(BLOCK),
            size: None,
            written: 0,
            error: None,
        }
    }

    /// The bytes written, or why the stream was not one whole file within the bound.
    pub(super) fn result(mut self) -> Result<u64, String> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match self.size {
            Some(size) if self.written == size => {
                self.file.flush().map_err(|e| e.to_string())?;
                Ok(size)
            }
            Some(size) => Err(format!(
                "the stream ended after {} of the bundle's {size} bytes",
                self.written
            )),
            None => Err("the stream held no file".into()),
        }
    }

    fn fail(&mut self, why: String) {
        self.error.get_or_insert(why);
        self.at = At::Done;
    }

    fn take(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match &mut self.at {
                At::Done => return,
                At::Header => {
                    let n = (BLOCK - self.header.len()).min(bytes.len());
                    self.header.extend_from_slice(&bytes[..n]);
                    bytes = &bytes[n..];
                    if self.header.len() == BLOCK {
                        let header = std::mem::take(&mut self.header);
                        self.header_block(&header);
                    }
                }
                At::Skip { left, then_done } => {
                    let n = (*left).min(bytes.len() as u64);
                    *left -= n;
                    bytes = &bytes[n as usize..];
                    if *left == 0 {
                        self.at = if *then_done { At::Done } else { At::Header };
                    }
                }
                At::Data { left, pad } => {
                    let n = (*left).min(bytes.len() as u64) as usize;
                    let (left, pad) = (*left - n as u64, *pad);
                    self.at = At::Data { left, pad };
                    if let Err(e) = self.file.write_all(&bytes[..n]) {
                        return self.fail(format!("cannot write the bundle: {e}"));
                    }
                    self.written += n as u64;
                    bytes = &bytes[n..];
                    if left == 0 {
                        // The one file is whole: what follows (padding, the end
                        // blocks) is not read.
                        self.at = At::Skip {
                            left: pad,
                            then_done: true,
                        };
                        if pad == 0 {
                            self.at = At::Done;
                        }
                    }
                }
            }
        }
    }

    fn header_block(&mut self, header: &[u8]) {
        if header.iter().all(|&b| b == 0) {
            return self.fail("the stream held no file".into());
        }
        let Some(size) = super::untar::number(&header[124..136]) else {
            return self.fail("a tar header's size is not a number".into());
        };
        let padded = size.div_ceil(BLOCK as u64) * BLOCK as u64;
        match header[156] {
            // Extended headers (a name or a time too long for the old format).
            b'x' | b'g' => {
                self.at = if padded == 0 {
                    At::Header
                } else {
                    At::Skip {
                        left: padded,
                        then_done: false,
                    }
                }
            }
            b'0' | 0 if size > self.max => self.fail(format!(
                "the bundle is {} bytes, more than the {} brought back",
                size,
                agent_runner_core::text::bytes(self.max)
            )),
            b'0' | 0 => {
                self.size = Some(size);
                self.at = if size == 0 {
                    At::Done
                } else {
                    At::Data {
                        left: size,
                        pad: padded - size,
                    }
                };
            }
            other => self.fail(format!(
                "the bundle is not a regular file (tar type {:?})",
                char::from(other)
            )),
        }
    }
}

impl StreamFilter for BundleOut {
    fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.take(bytes);
        Vec::new()
    }

    fn finish(&mut self) -> Vec<u8> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, kind: u8, size: u64) -> Vec<u8> {
        let mut h = vec![0u8; BLOCK];
        h[..name.len()].copy_from_slice(name.as_bytes());
        let size = format!("{size:011o}\0");
        h[124..136].copy_from_slice(size.as_bytes());
        h[156] = kind;
        h
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

    fn read(stream: &[u8], max: u64, chunk: usize) -> (Result<u64, String>, Vec<u8>) {
        let dir = agent_runner_core::fs::testing::scratch("bundle-out");
        let path = dir.join("work.bundle");
        let mut out = BundleOut::new(File::create(&path).unwrap(), max);
        for piece in stream.chunks(chunk) {
            assert!(out.push(piece).is_empty());
        }
        out.finish();
        let result = out.result();
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
