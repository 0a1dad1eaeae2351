//! Trees written as one tar stream (POSIX ustar, with pax records where a field
//! does not fit): the copy transport's way in, one `docker cp -a -` for the whole
//! repository instead of one call per entry (SPEC §22).
//!
//! What is written is what `fs::tree` read: directories, regular files (their
//! bytes streamed, never held in memory whatever their size) and symlinks (as
//! links: their target's text, never followed); FIFOs, sockets and devices are
//! left out. Owners are kept (`docker cp -a` applies them, so the worker owns its
//! files there as here) and the permission bits but the set-id and sticky ones.
//! Names come from directory listings joined by `/`, so none is absolute or holds
//! `..`; long names and targets go in pax records, which Docker's reader honours.

use std::io::{Read, Write};
use std::path::Path;

use agent_runner_core::fs::tree::{self, Item, Node};

const BLOCK: usize = 512;

/// A tar stream being written to `out`.
pub struct TarWriter<W: Write> {
    out: W,
    /// Entries left out (not a directory, file or link), for the log.
    pub skipped: Vec<String>,
}

impl<W: Write> TarWriter<W> {
    pub fn new(out: W) -> Self {
        TarWriter {
            out,
            skipped: Vec::new(),
        }
    }

    /// The tree at `root` (not its root entry), under `prefix` (empty, or a
    /// directory name ending in `/`); the root's entries named in `skip` left out.
    pub fn tree(&mut self, root: &Path, prefix: &str, skip: &[&str]) -> std::io::Result<()> {
        tree::read_tree(root, skip, &mut |item| {
            if item.path.is_empty() && prefix.is_empty() {
                return Ok(());
            }
            let mut name = prefix.as_bytes().to_vec();
            name.extend_from_slice(&item.path);
            if name.ends_with(b"/") {
                name.pop();
            }
            self.entry(name, item)
        })
    }

    /// One entry named `name`.
    fn entry(&mut self, mut name: Vec<u8>, item: Item) -> std::io::Result<()> {
        let Item { status, node, .. } = item;
        let (kind, size, link) = match &node {
            Node::Dir => {
                name.push(b'/');
                (b'5', 0, Vec::new())
            }
            Node::File(_) => (b'0', status.size, Vec::new()),
            Node::Link(target) => (b'2', 0, target.clone()),
            Node::Other => {
                self.skipped
                    .push(String::from_utf8_lossy(&name).into_owned());
                return Ok(());
            }
        };
        let header = Header {
            name: &name,
            mode: u64::from(status.mode & 0o777),
            uid: u64::from(status.uid),
            gid: u64::from(status.gid),
            size,
            mtime: u64::try_from(status.mtime).unwrap_or(0),
            kind,
            link: &link,
        };
        self.header(&header)?;
        if let Node::File(file) = node {
            let copied = std::io::copy(&mut file.take(size), &mut self.out)?;
            if copied != size {
                return Err(std::io::Error::other(format!(
                    "{}: changed while being read ({copied} bytes of {size})",
                    String::from_utf8_lossy(&name)
                )));
            }
            self.pad(size)?;
        }
        Ok(())
    }

    /// The header of an entry, after a pax record of the fields that do not fit.
    fn header(&mut self, h: &Header) -> std::io::Result<()> {
        let mut records = Vec::new();
        if h.name.len() > 100 {
            records.extend(pax_record("path", h.name));
        }
        if h.link.len() > 100 {
            records.extend(pax_record("linkpath", h.link));
        }
        for (key, value, width) in [
            ("uid", h.uid, 8),
            ("gid", h.gid, 8),
            ("size", h.size, 12),
            ("mtime", h.mtime, 12),
        ] {
            if !fits(value, width) {
                records.extend(pax_record(key, value.to_string().as_bytes()));
            }
        }
        if !records.is_empty() {
            let pax = Header {
                name: b"PaxHeader",
                mode: 0o644,
                uid: 0,
                gid: 0,
                size: records.len() as u64,
                mtime: 0,
                kind: b'x',
                link: b"",
            };
            self.out.write_all(&pax.block())?;
            self.out.write_all(&records)?;
            self.pad(records.len() as u64)?;
        }
        self.out.write_all(&h.block())
    }

    /// Zeros up to the next block after `size` bytes of content.
    fn pad(&mut self, size: u64) -> std::io::Result<()> {
        let rest = (size % BLOCK as u64) as usize;
        if rest != 0 {
            self.out.write_all(&[0; BLOCK][rest..])?;
        }
        Ok(())
    }

    /// The end of the archive (two zero blocks); the stream, flushed.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.write_all(&[0; 2 * BLOCK])?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// An entry's header fields.
struct Header<'a> {
    name: &'a [u8],
    mode: u64,
    uid: u64,
    gid: u64,
    size: u64,
    mtime: u64,
    kind: u8,
    link: &'a [u8],
}

impl Header<'_> {
    /// The ustar block; a field that does not fit is cut (name, link) or zero (a
    /// number), the pax record before it carrying the whole.
    fn block(&self) -> [u8; BLOCK] {
        let mut b = [0u8; BLOCK];
        let text = |b: &mut [u8; BLOCK], at: usize, width: usize, value: &[u8]| {
            let n = value.len().min(width);
            b[at..at + n].copy_from_slice(&value[..n]);
        };
        let number = |b: &mut [u8; BLOCK], at: usize, width: usize, value: u64| {
            let value = if fits(value, width) { value } else { 0 };
            let digits = format!("{value:0w$o}", w = width - 1);
            b[at..at + width - 1].copy_from_slice(digits.as_bytes());
        };
        text(&mut b, 0, 100, self.name);
        number(&mut b, 100, 8, self.mode);
        number(&mut b, 108, 8, self.uid);
        number(&mut b, 116, 8, self.gid);
        number(&mut b, 124, 12, self.size);
        number(&mut b, 136, 12, self.mtime);
        b[148..156].copy_from_slice(b"        ");
        b[156] = self.kind;
        text(&mut b, 157, 100, self.link);
        b[257..263].copy_from_slice(b"ustar\0");
        b[263..265].copy_from_slice(b"00");
        let sum: u32 = b.iter().map(|&x| u32::from(x)).sum();
        let sum = format!("{sum:06o}\0 ");
        b[148..156].copy_from_slice(sum.as_bytes());
        b
    }
}

/// Whether `value` fits a numeric field `width` bytes wide (octal digits and a NUL).
fn fits(value: u64, width: usize) -> bool {
    let digits = u32::try_from(width - 1).unwrap_or(0) * 3;
    digits >= 64 || value < (1u64 << digits)
}

/// `"<length> <key>=<value>\n"`, the length counting itself.
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let body = key.len() + value.len() + 3;
    let mut length = body + 1;
    while (body + length.to_string().len()) != length {
        length = body + length.to_string().len();
    }
    let mut record = format!("{length} {key}=").into_bytes();
    record.extend_from_slice(value);
    record.push(b'\n');
    record
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use agent_runner_core::fs::testing::scratch;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::process::Command;

    /// The tree at `root` written as tar, then extracted by GNU tar into `into`
    /// (numeric owners kept); tar's own listing.
    fn through_tar(root: &Path, into: &Path) -> (Vec<String>, Vec<u8>) {
        let mut writer = TarWriter::new(Vec::new());
        writer.tree(root, "", &["skipped"]).unwrap();
        writer.tree(&root.join("skipped"), "moved/", &[]).unwrap();
        let skipped = writer.skipped.clone();
        let bytes = writer.finish().unwrap();
        assert_eq!(bytes.len() % BLOCK, 0);
        std::fs::create_dir_all(into).unwrap();
        let mut tar = Command::new("tar")
            .args(["-x", "--numeric-owner", "-p", "-f", "-", "-C"])
            .arg(into)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        tar.stdin.take().unwrap().write_all(&bytes).unwrap();
        assert!(tar.wait().unwrap().success());
        (skipped, bytes)
    }

    #[test]
    fn a_tree_goes_through_tar_as_it_is_links_unfollowed_long_names_kept() {
        let root = scratch("tar");
        let outside = scratch("tar-outside");
        std::fs::write(outside.join("secret"), "host data").unwrap();
        let long_dir = "d".repeat(90);
        let long_file = format!("{long_dir}/{}", "f".repeat(120));
        std::fs::create_dir_all(root.join(&long_dir)).unwrap();
        std::fs::write(root.join(&long_file), "long").unwrap();
        std::fs::create_dir_all(root.join("empty")).unwrap();
        std::fs::set_permissions(root.join("empty"), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        std::fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o4755))
            .unwrap();
        let big = vec![7u8; 3 * BLOCK + 17];
        std::fs::write(root.join("big.bin"), &big).unwrap();
        symlink(outside.join("secret"), root.join("leak")).unwrap();
        symlink("../../../etc/passwd", root.join("up")).unwrap();
        let far = format!("{}/x", "t".repeat(200));
        symlink(&far, root.join("far")).unwrap();
        std::fs::create_dir_all(root.join("skipped/objects")).unwrap();
        std::fs::write(root.join("skipped/objects/o"), "obj").unwrap();
        let made = Command::new("mkfifo")
            .arg(root.join("fifo"))
            .status()
            .unwrap();
        assert!(made.success());

        let into = scratch("tar-into");
        let (skipped, bytes) = through_tar(&root, &into);
        assert_eq!(skipped, ["fifo"]);
        assert_eq!(
            std::fs::read_to_string(into.join(&long_file)).unwrap(),
            "long"
        );
        assert_eq!(std::fs::read(into.join("big.bin")).unwrap(), big);
        let mode = |p: &str| {
            std::fs::symlink_metadata(into.join(p))
                .unwrap()
                .permissions()
                .mode()
        };
        assert_eq!(mode("empty") & 0o7777, 0o700);
        assert_eq!(mode("run.sh") & 0o7777, 0o755, "no set-id bit");
        assert_eq!(
            std::fs::read_link(into.join("leak")).unwrap(),
            outside.join("secret"),
            "a link stays a link"
        );
        assert_eq!(
            std::fs::read_link(into.join("up")).unwrap(),
            Path::new("../../../etc/passwd")
        );
        assert_eq!(
            std::fs::read_link(into.join("far")).unwrap(),
            Path::new(&far)
        );
        assert_eq!(
            std::fs::read_to_string(into.join("moved/objects/o")).unwrap(),
            "obj"
        );
        assert!(!into.join("skipped").exists());
        assert!(!into.join("fifo").exists());
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("host data"),
            "nothing outside the tree is read"
        );
        for dir in [&root, &outside, &into] {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn owners_and_large_numbers_go_in_the_header_or_a_pax_record() {
        let mut writer = TarWriter::new(Vec::new());
        let header = Header {
            name: b"f",
            mode: 0o644,
            uid: 4_000_000,
            gid: 1000,
            size: 9 << 30,
            mtime: 1_700_000_000,
            kind: b'0',
            link: b"",
        };
        writer.header(&header).unwrap();
        let bytes = writer.out;
        // A pax header, its records, then the entry's own header.
        assert_eq!(bytes[156], b'x');
        let records = String::from_utf8_lossy(&bytes[BLOCK..2 * BLOCK]);
        assert!(records.starts_with("15 uid=4000000\n"), "{records}");
        assert!(
            records.contains(&format!(" size={}\n", 9u64 << 30)),
            "{records}"
        );
        assert!(!records.contains("gid="), "{records}");
        let entry = &bytes[2 * BLOCK..3 * BLOCK];
        assert_eq!(&entry[116..123], b"0001750");
        assert_eq!(&entry[257..263], b"ustar\0");
    }

    #[test]
    fn pax_records_count_their_own_length() {
        for len in [1, 5, 90, 95, 96, 97, 990, 995, 996] {
            let record = pax_record("path", &vec![b'a'; len]);
            let (n, _) = std::str::from_utf8(&record)
                .unwrap()
                .split_once(' ')
                .unwrap();
            assert_eq!(n.parse::<usize>().unwrap(), record.len(), "{len}");
        }
    }
}
