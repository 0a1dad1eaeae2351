//! A tar stream read as hostile data (the copy transport's way back where the
//! image has no git, `tree_back.rs`): what `docker cp <container>:<dir> -` writes
//! of a volume the worker wrote. The format is the `tar` crate's to read (ustar
//! and its prefix, pax records, GNU long names); nothing is written anywhere and
//! no name is used as a path here: entries are handed over as bytes, links as
//! their target's text. What the crate does not bound is bounded here, around it:
//! it reads a pax record or a long name whole into memory whatever size its header
//! states, so the stream it reads gives it at most `HEADERS` bytes between one
//! entry and the next beyond what the entries' own sizes account for. A stream
//! cannot make this hold more than that.

use std::cell::Cell;
use std::io::{Read, Write};
use std::rc::Rc;

use tar::EntryType;

const BLOCK: u64 = 512;
/// Most bytes of headers read for one entry: its own, and the pax records and GNU
/// long names before it.
const HEADERS: u64 = 256 * 1024;

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file: its bytes follow (`Content::copy_to`).
    File,
    Dir,
    /// A symbolic link: its target's text.
    Symlink(Vec<u8>),
    /// A hard link to an earlier entry of the stream: that entry's name.
    Hardlink(Vec<u8>),
    /// A FIFO, device, socket or an entry of a type not known here: its tar type.
    Other(u8),
}

impl Kind {
    /// The entry's tar type (`typeflag`), as a header says it.
    pub(crate) fn type_byte(&self) -> u8 {
        match self {
            Kind::File => b'0',
            Kind::Dir => b'5',
            Kind::Symlink(_) => b'2',
            Kind::Hardlink(_) => b'1',
            Kind::Other(byte) => *byte,
        }
    }
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

/// A file entry's content, to be read (or not: it is skipped then).
pub(crate) struct Content<'a>(&'a mut dyn Read, u64);

impl Content<'_> {
    /// The whole content written to `out` as it is read.
    pub(crate) fn copy_to(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        let size = self.1;
        let copied = std::io::copy(&mut self.0.take(size), out)?;
        if copied != size {
            return Err(bad("the tar stream ends in a file's content".into()));
        }
        self.1 = 0;
        Ok(())
    }
}

fn bad(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// Reads the tar stream `tar`, calling `visit` with each entry in order (a file's
/// content for it to read or leave); the first error (the stream's, turned into
/// `E` by `fault`, or `visit`'s) ends it. A stream cut short, even between two
/// entries, is an error.
pub(crate) fn read_entries<R: Read, E>(
    tar: R,
    fault: impl Fn(std::io::Error) -> E,
    visit: &mut dyn FnMut(Entry, &mut Content<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let left = Rc::new(Cell::new(0u64));
    let ended = Rc::new(Cell::new(false));
    let mut archive = tar::Archive::new(Bounded {
        inner: tar,
        left: left.clone(),
        ended: ended.clone(),
    });
    let mut entries = archive.entries().map_err(&fault)?;
    loop {
        left.set(left.get().saturating_add(HEADERS));
        let Some(entry) = entries.next() else {
            // The crate takes the end of the input for the end of the archive.
            return match ended.get() {
                true => Err(fault(bad("the tar stream ends in the middle".into()))),
                false => Ok(()),
            };
        };
        let mut entry = entry.map_err(&fault)?;
        let size = entry.size();
        // Its content and padding, read by `visit` or skipped by the crate.
        left.set(
            left.get()
                .saturating_add(size.div_ceil(BLOCK).saturating_mul(BLOCK)),
        );
        let header = entry.header();
        let link = || entry.link_name_bytes().unwrap_or_default().into_owned();
        let kind = match header.entry_type() {
            EntryType::Regular | EntryType::Continuous => Kind::File,
            EntryType::Directory => Kind::Dir,
            EntryType::Symlink => Kind::Symlink(link()),
            EntryType::Link => Kind::Hardlink(link()),
            other => Kind::Other(other.as_byte()),
        };
        let mode = header.mode().map_err(&fault)? & 0o7777;
        let size = if kind == Kind::File { size } else { 0 };
        let found = Entry {
            name: entry.path_bytes().into_owned(),
            mode,
            size,
            kind,
        };
        visit(found, &mut Content(&mut entry, size))?;
    }
}

/// The stream as the crate reads it: at most `left` more bytes, refused past
/// them; `ended` once the input ended.
struct Bounded<R> {
    inner: R,
    left: Rc<Cell<u64>>,
    ended: Rc<Cell<bool>>,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.left.get();
        if left == 0 && !buf.is_empty() {
            return Err(bad(format!(
                "a tar entry's headers are larger than {} KiB",
                HEADERS >> 10
            )));
        }
        let most = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..most])?;
        if n == 0 && most > 0 {
            self.ended.set(true);
        }
        self.left.set(left - n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry as read: (name, kind, mode, content).
    type ReadEntry = (Vec<u8>, Kind, u32, Vec<u8>);

    /// Everything `read_entries` reads of `stream`.
    fn entries(stream: &[u8]) -> std::io::Result<Vec<ReadEntry>> {
        let mut out = Vec::new();
        read_entries(stream, |e| e, &mut |entry, content| {
            let mut bytes = Vec::new();
            if entry.kind == Kind::File {
                content.copy_to(&mut bytes)?;
            }
            out.push((entry.name, entry.kind, entry.mode, bytes));
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn what_the_writer_writes_reads_back_long_names_and_links_kept() {
        let dir = agent_runner_core::fs::testing::scratch("untar");
        let long = "d".repeat(150);
        std::fs::create_dir_all(dir.join(&long)).unwrap();
        std::fs::write(dir.join(&long).join("f"), "deep\n").unwrap();
        std::fs::write(dir.join("a.txt"), "a\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("link")).unwrap();
        let far = format!("{}//x/", "t".repeat(200));
        std::os::unix::fs::symlink(&far, dir.join("far")).unwrap();
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
        assert_eq!(
            named("project/far").1,
            Kind::Symlink(far.into_bytes()),
            "a long target, byte for byte"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cut_or_forged_stream_is_an_error_not_a_guess() {
        let dir = agent_runner_core::fs::testing::scratch("untar-cut");
        std::fs::write(dir.join("a.txt"), "x".repeat(3000)).unwrap();
        let mut tar = super::super::tar::TarWriter::new(Vec::new());
        tar.tree(&dir, "p/", &[]).unwrap();
        let stream = tar.finish().unwrap();
        assert!(entries(&stream[..1500]).is_err());
        // Cut between two entries: no end of archive.
        assert!(entries(&stream[..512]).is_err());
        let mut forged = stream.clone();
        forged[0] ^= 1;
        assert!(entries(&forged).is_err());
        assert!(entries(&[]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The crate reads a pax header whole, whatever size it states: a stream of
    /// one such header is refused after `HEADERS` bytes, not held.
    #[test]
    fn a_header_larger_than_the_bound_is_refused_before_it_is_held() {
        let records = "17 comment=xxxxx\n".repeat(1 << 16);
        let mut pax = tar::Header::new_ustar();
        pax.set_path("PaxHeader").unwrap();
        pax.set_entry_type(EntryType::XHeader);
        pax.set_size(records.len() as u64);
        pax.set_cksum();
        let mut stream = pax.as_bytes().to_vec();
        stream.extend_from_slice(records.as_bytes());
        let mut file = tar::Header::new_ustar();
        file.set_path("p/f").unwrap();
        file.set_size(0);
        file.set_cksum();
        stream.extend_from_slice(file.as_bytes());
        stream.extend_from_slice(&[0; 1024]);
        struct Counting<'a>(&'a [u8], usize);
        impl Read for Counting<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.read(buf)?;
                self.1 += n;
                Ok(n)
            }
        }
        let mut source = Counting(&stream, 0);
        let e = read_entries(&mut source, |e| e, &mut |_, _| Ok(())).unwrap_err();
        assert!(e.to_string().contains("larger than 256 KiB"), "{e}");
        assert!(source.1 as u64 <= HEADERS, "{} bytes read", source.1);
    }
}
