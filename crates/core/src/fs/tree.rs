//! A whole tree read entry by entry, in order, to be copied elsewhere (the copy
//! transport's tar stream, SPEC §22): each directory before what it holds, names
//! as bytes (whatever their encoding), each entry with the status of the entry
//! itself. Nothing outside the tree is ever read: every directory is opened from
//! its parent's descriptor with `O_NOFOLLOW`, a symlink is read as its target's
//! text (never followed), a regular file is opened with `O_NOFOLLOW | O_NONBLOCK`
//! and its status taken from the open descriptor (what is read is what was
//! checked), and anything else (a FIFO, a socket, a device) is reported as
//! `Other`, never opened. An entry swapped for something else while the tree is
//! read is an error, never followed.

use std::ffi::CStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::Path;

use super::fd;

/// Directory levels below the root: one descriptor is held per level.
pub const MAX_DEPTH: usize = 256;

/// An entry's own status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The permission bits (`0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Seconds since the epoch.
    pub mtime: i64,
    /// Bytes, for a regular file (the open descriptor's).
    pub size: u64,
}

/// What an entry is.
#[derive(Debug)]
pub enum Node {
    Dir,
    /// A regular file, open for reading.
    File(File),
    /// A symlink: its target's text.
    Link(Vec<u8>),
    /// A FIFO, socket or device: never opened.
    Other,
}

/// One entry of the tree.
#[derive(Debug)]
pub struct Item {
    /// Relative to the root, components joined by `/`; empty for the root.
    pub path: Vec<u8>,
    pub status: Status,
    pub node: Node,
}

/// Reads the tree at `root` (not a symlink itself), calling `visit` with the root
/// first, then every entry, each directory before its entries, names sorted.
/// Entries of the root named in `skip` are left out. The first error (of the
/// tree, or `visit`'s) ends the walk.
pub fn read_tree(
    root: &Path,
    skip: &[&str],
    visit: &mut dyn FnMut(Item) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let said =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", root.display()));
    let top = fd::open_path(root, libc::O_RDONLY | libc::O_DIRECTORY).map_err(said)?;
    visit(Item {
        path: Vec::new(),
        status: status(&fd::stat(&top).map_err(said)?),
        node: Node::Dir,
    })?;
    let mut walk = Walk { root, skip, visit };
    walk.descend(&top, &mut Vec::new(), 0)
}

struct Walk<'a> {
    root: &'a Path,
    skip: &'a [&'a str],
    visit: &'a mut dyn FnMut(Item) -> std::io::Result<()>,
}

impl Walk<'_> {
    /// The entries of `dir` (at `path`, `depth` levels below the root).
    fn descend(&mut self, dir: &OwnedFd, path: &mut Vec<u8>, depth: usize) -> std::io::Result<()> {
        let mut listed = fd::list(dir).map_err(|e| self.error(path, e))?;
        listed.sort();
        for (name, d_type) in listed {
            if depth == 0 && self.skip.iter().any(|s| s.as_bytes() == name.to_bytes()) {
                continue;
            }
            let len = path.len();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(name.to_bytes());
            let done = self.entry(dir, &name, d_type, path, depth);
            path.truncate(len);
            done?;
        }
        Ok(())
    }

    /// The entry `name` of `dir`, at `path`.
    fn entry(
        &mut self,
        dir: &OwnedFd,
        name: &CStr,
        d_type: u8,
        path: &mut Vec<u8>,
        depth: usize,
    ) -> std::io::Result<()> {
        // Gone since the listing: nothing to copy.
        let Some(kind) = fd::known_type(dir, name, d_type) else {
            return Ok(());
        };
        match kind {
            libc::DT_DIR => {
                if depth + 1 > MAX_DEPTH {
                    return Err(self.error(
                        path,
                        std::io::Error::other(format!("more than {MAX_DEPTH} directories deep")),
                    ));
                }
                let sub = match fd::open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0) {
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
                    opened => opened.map_err(|e| self.error(path, changed(e)))?,
                };
                let st = fd::stat(&sub).map_err(|e| self.error(path, e))?;
                (self.visit)(Item {
                    path: path.clone(),
                    status: status(&st),
                    node: Node::Dir,
                })?;
                self.descend(&sub, path, depth + 1)
            }
            libc::DT_REG => {
                let file = match fd::open_at(dir, name, libc::O_RDONLY | libc::O_NONBLOCK, 0) {
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
                    opened => opened.map_err(|e| self.error(path, changed(e)))?,
                };
                let st = fd::stat(&file).map_err(|e| self.error(path, e))?;
                if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                    return Err(self.error(
                        path,
                        std::io::Error::other("changed while being read (no longer a file)"),
                    ));
                }
                (self.visit)(Item {
                    path: path.clone(),
                    status: status(&st),
                    node: Node::File(File::from(file)),
                })
            }
            libc::DT_LNK => {
                let target = match fd::read_link_at(dir, name) {
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
                    read => read.map_err(|e| self.error(path, e))?,
                };
                let st = fd::stat_at(dir, name).map_err(|e| self.error(path, e))?;
                (self.visit)(Item {
                    path: path.clone(),
                    status: status(&st),
                    node: Node::Link(target),
                })
            }
            _ => {
                let st = match fd::stat_at(dir, name) {
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
                    st => st.map_err(|e| self.error(path, e))?,
                };
                (self.visit)(Item {
                    path: path.clone(),
                    status: status(&st),
                    node: Node::Other,
                })
            }
        }
    }

    fn error(&self, path: &[u8], e: std::io::Error) -> std::io::Error {
        let shown = self
            .root
            .join(String::from_utf8_lossy(path).as_ref())
            .display()
            .to_string();
        std::io::Error::new(e.kind(), format!("{shown}: {e}"))
    }
}

/// An open that met a symlink or a non-directory where the listing said otherwise.
fn changed(e: std::io::Error) -> std::io::Error {
    match e.raw_os_error() {
        Some(libc::ELOOP | libc::ENOTDIR) => std::io::Error::new(
            e.kind(),
            "changed while being read (now a symlink or another kind of file); not followed",
        ),
        _ => e,
    }
}

fn status(st: &libc::stat) -> Status {
    Status {
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
        mtime: st.st_mtime,
        size: u64::try_from(st.st_size).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::testing::{mkfifo, scratch, within};
    use std::io::Read;
    use std::os::unix::fs::{PermissionsExt, symlink};

    /// `path kind [content or target]` of every entry.
    fn read(root: &Path, skip: &'static [&'static str]) -> Vec<String> {
        let mut out = Vec::new();
        read_tree(root, skip, &mut |item| {
            let path = String::from_utf8_lossy(&item.path).into_owned();
            out.push(match item.node {
                Node::Dir => format!("{path}/ {:o}", item.status.mode),
                Node::File(mut f) => {
                    let mut s = String::new();
                    f.read_to_string(&mut s)?;
                    format!("{path} {s} {}", item.status.size)
                }
                Node::Link(t) => format!("{path} -> {}", String::from_utf8_lossy(&t)),
                Node::Other => format!("{path} other"),
            });
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn the_tree_is_read_in_order_and_nothing_outside_it() {
        let root = scratch("tree");
        let outside = scratch("tree-outside");
        std::fs::write(outside.join("secret"), "host data").unwrap();
        std::fs::create_dir_all(root.join("a/empty")).unwrap();
        std::fs::set_permissions(root.join("a/empty"), std::fs::Permissions::from_mode(0o750))
            .unwrap();
        std::fs::write(root.join("a/f"), "x").unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "c").unwrap();
        symlink(&outside, root.join("dir-link")).unwrap();
        symlink(outside.join("secret"), root.join("file-link")).unwrap();
        mkfifo(&root.join("fifo"));
        let root2 = root.clone();
        let read = within(move || read(&root2, &[".git"]));
        assert_eq!(
            read,
            [
                "/ 755".to_string(),
                "a/ 755".into(),
                "a/empty/ 750".into(),
                "a/f x 1".into(),
                format!("dir-link -> {}", outside.display()),
                "fifo other".into(),
                format!("file-link -> {}/secret", outside.display()),
            ]
        );
        let mut link_root = outside.clone();
        link_root.push("root-link");
        symlink(&root, &link_root).unwrap();
        assert!(
            read_tree(&link_root, &[], &mut |_| Ok(())).is_err(),
            "a symlinked root is refused"
        );
        std::fs::remove_dir_all(root).unwrap();
        std::fs::remove_dir_all(outside).unwrap();
    }

    #[test]
    fn a_tree_too_deep_is_an_error_naming_where() {
        let root = scratch("tree-deep");
        let mut deep = root.clone();
        for _ in 0..=MAX_DEPTH {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        let e = read_tree(&root, &[], &mut |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("directories deep"), "{e}");
        std::fs::remove_dir_all(root).unwrap();
    }
}
