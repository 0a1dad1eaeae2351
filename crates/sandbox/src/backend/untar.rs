//! A tar stream read as hostile data (the copy transport's way back where the
//! image has no git, `tree_back.rs`): what `docker cp <container>:<dir> -` writes
//! of a volume the worker wrote. POSIX ustar with its prefix field, pax records
//! (`path`, `linkpath`, `size`) and GNU long names are understood; nothing is
//! written anywhere and no name is used as a path here: entries are handed over as
//! bytes, links as their target's text. Sizes and names are bounded, so a stream
//! cannot make this hold more than a name and one block in memory.

use std::io::{Read, Write};

const BLOCK: u64 = 512;
/// Longest name, link target or pax header read.
const MAX_NAME: u64 = 64 * 1024;

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file: its bytes follow (`TarReader::content`).
    File,
    Dir,
    /// A symbolic link: its target's text.
    Symlink(Vec<u8>),
    /// A hard link to an earlier entry of the stream: that entry's name.
    Hardlink(Vec<u8>),
    /// A FIFO, device, socket or an entry of a type not known here.
    Other,
}

/// One entry's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// As the stream names it (a directory's may end with `/`).
    pub(crate) name: Vec<u8>,
    pub(crate) mode: u32,
    /// Bytes of content (a file's).
    pub(crate) size: u64,
    pub(crate) kind: Kind,
}

/// A tar stream read from `inner`, entry by entry.
pub(crate) struct TarReader<R: Read> {
    inner: R,
    /// Content (and padding) of the last entry not read yet.
    unread: u64,
    padding: u64,
    ended: bool,
}

fn bad(what: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.into())
}

impl<R: Read> TarReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        TarReader {
            inner,
            unread: 0,
            padding: 0,
            ended: false,
        }
    }

    /// The next entry, its content left for `content` (skipped if not read); None
    /// at the end of the archive.
    pub(crate) fn next_entry(&mut self) -> std::io::Result<Option<Entry>> {
        self.skip_rest()?;
        let (mut long_name, mut long_link, mut pax_size) = (None, None, None);
        loop {
            if self.ended {
                return Ok(None);
            }
            let mut block = [0u8; BLOCK as usize];
            if !self.read_block(&mut block)? {
                // A stream cut short before its end blocks.
                return Err(bad("the tar stream ends in the middle"));
            }
            if block.iter().all(|&b| b == 0) {
                self.ended = true;
                return Ok(None);
            }
            check_sum(&block)?;
            let size = number_of(&block[124..136])?;
            let kind = block[156];
            match kind {
                b'x' | b'L' | b'K' | b'g' => {
                    if size > MAX_NAME {
                        return Err(bad(format!("a tar header of {size} bytes")));
                    }
                    let data = self.small(size)?;
                    match kind {
                        b'x' => {
                            for (key, value) in pax_records(&data)? {
                                match key.as_slice() {
                                    b"path" => long_name = Some(value),
                                    b"linkpath" => long_link = Some(value),
                                    b"size" => {
                                        let text = String::from_utf8_lossy(&value).into_owned();
                                        pax_size =
                                            Some(text.parse::<u64>().map_err(|_| {
                                                bad(format!("a pax size of {text:?}"))
                                            })?);
                                    }
                                    _ => {}
                                }
                            }
                        }
                        b'L' => long_name = Some(until_nul(&data).to_vec()),
                        b'K' => long_link = Some(until_nul(&data).to_vec()),
                        _ => {}
                    }
                    continue;
                }
                _ => {}
            }
            let name = match long_name {
                Some(name) => name,
                None => {
                    let mut name = Vec::new();
                    let prefix = until_nul(&block[345..500]);
                    if &block[257..262] == b"ustar" && !prefix.is_empty() {
                        name.extend_from_slice(prefix);
                        name.push(b'/');
                    }
                    name.extend_from_slice(until_nul(&block[0..100]));
                    name
                }
            };
            let link = long_link.unwrap_or_else(|| until_nul(&block[157..257]).to_vec());
            let size = pax_size.unwrap_or(size);
            let mode = u32::try_from(number_of(&block[100..108])? & 0o7777).unwrap_or(0);
            let kind = match kind {
                b'0' | 0 | b'7' => Kind::File,
                b'5' => Kind::Dir,
                b'2' => Kind::Symlink(link),
                b'1' => Kind::Hardlink(link),
                _ => Kind::Other,
            };
            // Only a file's content is its own; anything else's is skipped.
            self.unread = size;
            self.padding = (BLOCK - size % BLOCK) % BLOCK;
            let size = if kind == Kind::File { size } else { 0 };
            return Ok(Some(Entry {
                name,
                mode,
                size,
                kind,
            }));
        }
    }

    /// The last entry's content, written to `out` as it is read.
    pub(crate) fn content(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        let size = self.unread;
        let copied = std::io::copy(&mut (&mut self.inner).take(size), out)?;
        if copied != size {
            return Err(bad("the tar stream ends in a file's content"));
        }
        self.unread = 0;
        Ok(())
    }

    /// Whatever of the last entry was not read.
    fn skip_rest(&mut self) -> std::io::Result<()> {
        let rest = self.unread + self.padding;
        let skipped = std::io::copy(&mut (&mut self.inner).take(rest), &mut std::io::sink())?;
        if skipped != rest {
            return Err(bad("the tar stream ends in an entry"));
        }
        (self.unread, self.padding) = (0, 0);
        Ok(())
    }

    /// A header's data of `size` bytes (bounded by the caller), and its padding.
    fn small(&mut self, size: u64) -> std::io::Result<Vec<u8>> {
        let mut data = Vec::new();
        (&mut self.inner).take(size).read_to_end(&mut data)?;
        if data.len() as u64 != size {
            return Err(bad("the tar stream ends in a header"));
        }
        self.padding = (BLOCK - size % BLOCK) % BLOCK;
        self.skip_rest()?;
        Ok(data)
    }

    /// One block; false at the end of the stream.
    fn read_block(&mut self, block: &mut [u8; BLOCK as usize]) -> std::io::Result<bool> {
        let mut filled = 0;
        while filled < block.len() {
            match self.inner.read(&mut block[filled..]) {
                Ok(0) if filled == 0 => return Ok(false),
                Ok(0) => return Err(bad("the tar stream ends in a header")),
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

fn until_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// A tar number field: octal digits (spaces and NULs around them), or GNU's
/// base-256 for large values (the first byte's high bit); None when it is neither
/// or does not fit. The one reading of tar numbers here (the bundle's stream and
/// the agent's pinning read theirs with it).
pub(crate) fn number(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        return field[1..]
            .iter()
            .try_fold(u64::from(field[0] & 0x7f), |acc, &b| {
                acc.checked_mul(256)?.checked_add(u64::from(b))
            });
    }
    let text = std::str::from_utf8(field).ok()?;
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    if text.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(text, 8).ok()
}

/// `number`, or the stream's fault naming the field.
fn number_of(field: &[u8]) -> std::io::Result<u64> {
    number(field).ok_or_else(|| {
        bad(format!(
            "a tar number {:?}",
            String::from_utf8_lossy(until_nul(field))
        ))
    })
}

/// The header's checksum: the sum of its bytes, the checksum field as spaces.
fn check_sum(block: &[u8; BLOCK as usize]) -> std::io::Result<()> {
    let stated = number_of(&block[148..156])?;
    let sum: u64 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u64::from(b)
            }
        })
        .sum();
    match sum == stated {
        true => Ok(()),
        false => Err(bad("a tar header with a wrong checksum")),
    }
}

/// A pax header's records: `<length> <key>=<value>\n`, each.
fn pax_records(mut data: &[u8]) -> std::io::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut records = Vec::new();
    while !data.is_empty() {
        let space = data
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| bad("a pax record without its length"))?;
        let length: usize = String::from_utf8_lossy(&data[..space])
            .parse()
            .map_err(|_| bad("a pax record's length"))?;
        if length <= space + 1 || length > data.len() || data[length - 1] != b'\n' {
            return Err(bad("a pax record of the wrong length"));
        }
        let record = &data[space + 1..length - 1];
        let equals = record
            .iter()
            .position(|&b| b == b'=')
            .ok_or_else(|| bad("a pax record without '='"))?;
        records.push((record[..equals].to_vec(), record[equals + 1..].to_vec()));
        data = &data[length..];
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry as read: (name, kind, mode, content).
    type ReadEntry = (Vec<u8>, Kind, u32, Vec<u8>);

    /// Everything `TarReader` reads of `stream`.
    fn entries(stream: &[u8]) -> std::io::Result<Vec<ReadEntry>> {
        let mut reader = TarReader::new(stream);
        let mut out = Vec::new();
        while let Some(entry) = reader.next_entry()? {
            let mut content = Vec::new();
            if entry.kind == Kind::File {
                reader.content(&mut content)?;
            }
            out.push((entry.name, entry.kind, entry.mode, content));
        }
        Ok(out)
    }

    #[test]
    fn what_the_writer_writes_reads_back_long_names_and_links_kept() {
        let dir = std::env::temp_dir().join(format!(
            "agent-runner-untar-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let long = "d".repeat(150);
        std::fs::create_dir_all(dir.join(&long)).unwrap();
        std::fs::write(dir.join(&long).join("f"), "deep\n").unwrap();
        std::fs::write(dir.join("a.txt"), "a\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("link")).unwrap();
        let mut tar = super::super::tar::TarWriter::new(Vec::new());
        tar.tree(&dir, "project/", &[]).unwrap();
        let stream = tar.finish().unwrap();
        let read = entries(&stream).unwrap();
        let named = |name: &str| {
            read.iter()
                .find(|e| e.0 == name.as_bytes())
                .unwrap_or_else(|| panic!("{name} not in {read:?}"))
                .clone()
        };
        assert_eq!(named("project/a.txt").3, b"a\n");
        assert_eq!(named("project/a.txt").1, Kind::File);
        assert_eq!(named(&format!("project/{long}/f")).3, b"deep\n");
        assert_eq!(
            named("project/link").1,
            Kind::Symlink(b"/etc/passwd".to_vec())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cut_or_forged_stream_is_an_error_not_a_guess() {
        let dir = std::env::temp_dir().join(format!(
            "agent-runner-untar-cut-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.txt"), "x".repeat(3000)).unwrap();
        let mut tar = super::super::tar::TarWriter::new(Vec::new());
        tar.tree(&dir, "p/", &[]).unwrap();
        let stream = tar.finish().unwrap();
        assert!(entries(&stream[..1500]).is_err());
        let mut forged = stream.clone();
        forged[0] ^= 1;
        assert!(entries(&forged).is_err());
        assert!(entries(&[]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
