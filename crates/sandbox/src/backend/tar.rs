//! Trees written as one tar stream: the copy transport's way in, one `docker cp -a
//! -` for the whole repository instead of one call per entry (SPEC §22). The
//! format is the `tar` crate's (GNU headers, GNU long names); what goes into it is
//! chosen here.
//!
//! What is written is what `fs::tree` read: directories, regular files (their
//! bytes streamed from the descriptor the walk opened, never held in memory
//! whatever their size) and symlinks (as links: their target's text, byte for
//! byte, never followed); FIFOs, sockets and devices are left out. Nothing is
//! opened by path here, so nothing outside the tree is read. Owners are kept
//! (`docker cp -a` applies them, so the worker owns its files there as here) and
//! the permission bits but the set-id and sticky ones. Names come from directory
//! listings joined by `/`, so none is absolute or holds `..`.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use agent_runner_core::fs::tree::{self, Item, Node};
use tar::{EntryType, Header};

/// A tar stream being written to `out`.
pub struct TarWriter<W: Write> {
    out: tar::Builder<W>,
    /// Entries left out (not a directory, file or link), for the log.
    pub skipped: Vec<String>,
}

impl<W: Write> TarWriter<W> {
    pub fn new(out: W) -> Self {
        TarWriter {
            out: tar::Builder::new(out),
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
            self.entry(&name, item)
        })
    }

    /// One entry named `name`.
    fn entry(&mut self, name: &[u8], item: Item) -> std::io::Result<()> {
        let Item { status, node, .. } = item;
        let mut header = Header::new_gnu();
        header.set_mode(status.mode & 0o777);
        header.set_uid(u64::from(status.uid));
        header.set_gid(u64::from(status.gid));
        header.set_mtime(u64::try_from(status.mtime).unwrap_or(0));
        header.set_size(0);
        let path = Path::new(OsStr::from_bytes(name));
        match node {
            Node::Dir => {
                header.set_entry_type(EntryType::Directory);
                self.out.append_data(&mut header, path, std::io::empty())
            }
            Node::File(file) => {
                let size = status.size;
                header.set_entry_type(EntryType::Regular);
                header.set_size(size);
                // The builder pads after what it copied: a file that shrank since
                // its status was taken would leave the stream short of its header.
                let mut content = Counted(file.take(size), 0);
                self.out.append_data(&mut header, path, &mut content)?;
                match content.1 == size {
                    true => Ok(()),
                    false => Err(std::io::Error::other(format!(
                        "{}: changed while being read ({} bytes of {size})",
                        path.display(),
                        content.1
                    ))),
                }
            }
            Node::Link(target) => {
                header.set_entry_type(EntryType::Symlink);
                self.link_name(&mut header, &target)?;
                self.out.append_data(&mut header, path, std::io::empty())
            }
            Node::Other => {
                self.skipped.push(path.display().to_string());
                Ok(())
            }
        }
    }

    /// A link's target as its text, byte for byte (the crate's `append_link` would
    /// normalise it as a path: `a//b`, `dir/`): in the header, or before it in a GNU
    /// long-link entry when longer than the header's field.
    fn link_name(&mut self, header: &mut Header, target: &[u8]) -> std::io::Result<()> {
        const FIELD: usize = 100;
        if target.len() <= FIELD {
            return header.set_link_name_literal(target);
        }
        let mut long = Header::new_gnu();
        long.set_path("././@LongLink")?;
        long.set_entry_type(EntryType::GNULongLink);
        long.set_mode(0o644);
        long.set_size(target.len() as u64 + 1);
        long.set_cksum();
        self.out.append(&long, target.chain(&[0u8][..]))?;
        header.set_link_name_literal(&target[..FIELD])
    }

    /// The end of the archive; the stream, flushed.
    pub fn finish(self) -> std::io::Result<W> {
        let mut out = self.out.into_inner()?;
        out.flush()?;
        Ok(out)
    }
}

/// A reader that counts what it gave.
struct Counted<R>(R, u64);

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        self.1 += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use agent_runner_core::fs::testing::scratch;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::process::Command;

    const BLOCK: usize = 512;

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

    /// Owners past the octal fields of a header, and a link's text as it is (not
    /// normalised as a path), as GNU tar reads them.
    #[test]
    fn owners_and_link_texts_are_kept_as_they_are() {
        let dir = scratch("tar-owners");
        std::fs::write(dir.join("f"), "hello").unwrap();
        let status = tree::Status {
            mode: 0o4644,
            uid: 4_000_000,
            gid: 1000,
            mtime: 1_700_000_000,
            size: 5,
        };
        let mut writer = TarWriter::new(Vec::new());
        let file = Item {
            path: b"f".to_vec(),
            status,
            node: Node::File(std::fs::File::open(dir.join("f")).unwrap()),
        };
        writer.entry(b"f", file).unwrap();
        for (name, target) in [
            ("near", "a//b/./c/".to_string()),
            ("far", format!("{}//x/", "t".repeat(120))),
        ] {
            let link = Item {
                path: name.as_bytes().to_vec(),
                status,
                node: Node::Link(target.clone().into_bytes()),
            };
            writer.entry(name.as_bytes(), link).unwrap();
        }
        let bytes = writer.finish().unwrap();
        let mut tar = Command::new("tar")
            .args(["-t", "-v", "--numeric-owner", "-f", "-"])
            .env("TZ", "UTC")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        tar.stdin.take().unwrap().write_all(&bytes).unwrap();
        let out = tar.wait_with_output().unwrap();
        assert!(out.status.success());
        let listing = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = listing.lines().collect();
        assert!(lines[0].starts_with("-rw-r--r-- 4000000/1000"), "{listing}");
        assert!(lines[0].ends_with(" 5 2023-11-14 22:13 f"), "{listing}");
        assert!(lines[1].ends_with(" near -> a//b/./c/"), "{listing}");
        assert!(
            lines[2].ends_with(&format!(" far -> {}//x/", "t".repeat(120))),
            "{listing}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
