//! A walk of a whole tree that untrusted code wrote (the repository after a worker
//! ran), for the privilege sweep. It never follows a symlink and never leaves the
//! root's filesystem: every directory is opened from its parent's descriptor with
//! `O_NOFOLLOW`, and mount points below the root are not entered. It holds at most
//! `HELD_LEVELS` descriptors whatever the depth (a worker can nest directories past
//! any descriptor limit): deeper directories are reopened from the root, component
//! by component, each with `O_NOFOLLOW`. A directory it cannot open or list is
//! reported, never skipped in silence.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::rc::Rc;

use super::fd;

/// Directory levels whose descriptors are kept open during the walk.
pub const HELD_LEVELS: usize = 128;

/// What a non-directory entry is (a symlink is `Other`, never followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    CharDevice,
    BlockDevice,
    Other,
}

/// What the walk found: an entry that is not a directory, or a directory it could
/// not read.
pub enum Found<'a> {
    Entry(Entry<'a>),
    /// `path` relative to the root (`.` for the root itself), and why.
    Unreadable {
        path: String,
        why: String,
    },
}

/// A non-directory entry, reached through its directory's descriptor.
pub struct Entry<'a> {
    dir: &'a OwnedFd,
    name: &'a CStr,
    /// Relative to the root.
    pub path: String,
    pub kind: Kind,
}

impl Entry<'_> {
    /// The permission bits (`0o7777`) of the entry itself.
    pub fn mode(&self) -> std::io::Result<u32> {
        Ok(fd::stat_at(self.dir, self.name)?.st_mode & 0o7777)
    }

    /// Removes the entry.
    pub fn remove(&self) -> std::io::Result<()> {
        fd::unlink_at(self.dir, self.name)
    }

    /// The regular file itself, opened for reading (never a symlink swapped in
    /// meanwhile, never blocking): changes made through it reach only this file.
    pub fn open_regular(&self) -> std::io::Result<File> {
        let file = File::from(fd::open_at(
            self.dir,
            self.name,
            libc::O_RDONLY | libc::O_NONBLOCK,
            0,
        )?);
        if !file.metadata()?.is_file() {
            return Err(std::io::Error::other("changed while being checked"));
        }
        Ok(file)
    }
}

/// Where a directory is: its name and its parent's place (shared, so a pending
/// directory costs one node whatever its depth).
struct Place {
    name: CString,
    up: Option<Rc<Place>>,
    depth: usize,
}

impl Place {
    /// The components from the root down to this directory.
    fn components(&self) -> Vec<&CStr> {
        let mut out = vec![self.name.as_c_str()];
        let mut at = self.up.as_deref();
        while let Some(place) = at {
            out.push(place.name.as_c_str());
            at = place.up.as_deref();
        }
        out.reverse();
        out
    }

    fn shown(&self) -> String {
        self.components()
            .iter()
            .map(|c| c.to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// A directory still to be read: its place, and its parent's descriptor while the
/// parent is shallow enough to be kept open.
struct Pending {
    parent: Option<Rc<OwnedFd>>,
    place: Rc<Place>,
}

/// Walks the tree at `root`, calling `visit` with every entry that is not a
/// directory and every directory that could not be read. An error only when the
/// root itself cannot be opened.
pub fn walk(root: &Path, visit: &mut dyn FnMut(Found<'_>)) -> std::io::Result<()> {
    let root = Rc::new(fd::open_path(root, libc::O_RDONLY | libc::O_DIRECTORY)?);
    let device = fd::stat(&root)?.st_dev;
    let mut stack = Vec::new();
    read_dir(&root, None, &mut stack, visit);
    while let Some(dir) = stack.pop() {
        let opened = match &dir.parent {
            Some(parent) => open_dir(parent, &dir.place.name),
            None => open_from(&root, &dir.place.components()),
        };
        let unreadable = |why: String| Found::Unreadable {
            path: dir.place.shown(),
            why,
        };
        let fd = match opened {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(e) => {
                visit(unreadable(format!("cannot open the directory: {e}")));
                continue;
            }
        };
        match fd::stat(&fd) {
            Ok(st) if st.st_dev == device => {}
            // Another filesystem mounted below the root: not the tree's.
            Ok(_) => continue,
            Err(e) => {
                visit(unreadable(format!("cannot check the directory: {e}")));
                continue;
            }
        }
        read_dir(&Rc::new(fd), Some(&dir.place), &mut stack, visit);
    }
    Ok(())
}

fn open_dir(parent: &OwnedFd, name: &CStr) -> std::io::Result<OwnedFd> {
    fd::open_at(parent, name, libc::O_RDONLY | libc::O_DIRECTORY, 0)
}

/// Opens the directory at `components` below `root`, one component at a time.
fn open_from(root: &OwnedFd, components: &[&CStr]) -> std::io::Result<OwnedFd> {
    let mut current: Option<OwnedFd> = None;
    for component in components {
        let parent = current.as_ref().unwrap_or(root);
        current = Some(open_dir(parent, component)?);
    }
    current.ok_or_else(|| std::io::Error::other("no directory to open"))
}

/// Visits the entries of one directory; pushes its subdirectories.
fn read_dir(
    dir: &Rc<OwnedFd>,
    place: Option<&Rc<Place>>,
    stack: &mut Vec<Pending>,
    visit: &mut dyn FnMut(Found<'_>),
) {
    let path = place.map(|p| p.shown()).unwrap_or_default();
    let listed = match fd::list(dir) {
        Ok(listed) => listed,
        Err(e) => {
            visit(Found::Unreadable {
                path: if path.is_empty() { ".".into() } else { path },
                why: format!("cannot list the directory: {e}"),
            });
            return;
        }
    };
    let depth = place.map_or(0, |p| p.depth);
    // Children of a shallow directory open from its descriptor; deeper ones reopen
    // from the root, so no more than HELD_LEVELS descriptors are ever held.
    let held = (depth < HELD_LEVELS).then(|| dir.clone());
    for (name, d_type) in listed {
        let Some(d_type) = fd::known_type(dir, &name, d_type) else {
            continue;
        };
        let kind = match d_type {
            libc::DT_DIR => {
                stack.push(Pending {
                    parent: held.clone(),
                    place: Rc::new(Place {
                        name,
                        up: place.cloned(),
                        depth: depth + 1,
                    }),
                });
                continue;
            }
            libc::DT_REG => Kind::File,
            libc::DT_CHR => Kind::CharDevice,
            libc::DT_BLK => Kind::BlockDevice,
            _ => Kind::Other,
        };
        let shown = if path.is_empty() {
            name.to_string_lossy().into_owned()
        } else {
            format!("{path}/{}", name.to_string_lossy())
        };
        visit(Found::Entry(Entry {
            dir,
            name: &name,
            path: shown,
            kind,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::testing::{mkfifo, scratch};
    use std::os::unix::fs::symlink;

    /// Every entry the walk reports, `path kind`, sorted.
    fn walked(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        walk(root, &mut |found| {
            out.push(match found {
                Found::Entry(e) => format!("{} {:?}", e.path, e.kind),
                Found::Unreadable { path, why } => format!("{path} unreadable: {why}"),
            })
        })
        .unwrap();
        out.sort();
        out
    }

    #[test]
    fn the_walk_reports_what_is_there_and_follows_no_symlink() {
        let root = scratch("walk");
        let outside = scratch("walk-outside");
        std::fs::write(outside.join("host-file"), "x").unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/file"), "x").unwrap();
        mkfifo(&root.join("a/fifo"));
        symlink(&outside, root.join("a/link-dir")).unwrap();
        symlink(outside.join("host-file"), root.join("link-file")).unwrap();
        assert_eq!(
            walked(&root),
            [
                "a/b/file File",
                "a/fifo Other",
                "a/link-dir Other",
                "link-file Other"
            ]
        );
        symlink(&root, outside.join("root-link")).unwrap();
        assert!(
            walk(&outside.join("root-link"), &mut |_| {}).is_err(),
            "a symlinked root is refused"
        );
        std::fs::remove_dir_all(root).unwrap();
        std::fs::remove_dir_all(outside).unwrap();
    }

    #[test]
    fn entries_deeper_than_the_held_levels_are_found() {
        let root = scratch("walk-deep");
        let mut deep = root.clone();
        for _ in 0..HELD_LEVELS + 40 {
            std::fs::create_dir_all(deep.join("sibling")).unwrap();
            deep = deep.join("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("file"), "x").unwrap();
        let found = walked(&root);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].ends_with("/d/file File"), "{found:?}");
        std::fs::remove_dir_all(root).unwrap();
    }
}
