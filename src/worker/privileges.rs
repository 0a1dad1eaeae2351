//! Nothing the worker leaves in the repository may raise privileges on the host
//! (SPEC §9). The worker is root in its container when agent-runner runs as root, so
//! a `chmod 4755` binary it writes is a setuid-root binary on the host, and a device
//! node (`mknod b 8 0`) would be the raw disk. The container cannot make device nodes
//! (MKNOD is dropped) and cannot use setuid bits (`no-new-privileges`), but those
//! protect the container, not the host; this sweep is what protects the host. It runs
//! on the host after every worker and test run, when the container is quiet: setuid
//! and setgid bits are removed from files, device nodes are deleted, and what it did
//! is reported in the note.
//!
//! The walk never follows a symlink and never leaves the repository's filesystem:
//! every directory is opened from its parent's descriptor with `O_NOFOLLOW`, and
//! mount points below the repo are not entered. It holds at most `HELD_LEVELS`
//! descriptors whatever the depth (a worker can nest directories past any
//! descriptor limit): deeper directories are reopened from the root, component by
//! component, each with `O_NOFOLLOW`. A directory it cannot open or list is
//! reported, never skipped in silence.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::rc::Rc;

/// Something the sweep found and fixed (or could not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Relative to the repository.
    pub path: String,
    pub what: Fix,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fix {
    /// The setuid/setgid bits were removed (the mode before, octal).
    ClearedSetId { mode: u32 },
    /// A character or block device node was deleted.
    RemovedDevice { block: bool },
    /// A `.git/commondir` was deleted (`git_dir`): git would have read its
    /// configuration from where it pointed.
    RemovedRedirect,
    /// Found but not fixed, and why.
    Failed(String),
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.what {
            Fix::ClearedSetId { mode } => {
                write!(
                    f,
                    "{}: setuid/setgid bits removed (mode was {mode:o})",
                    self.path
                )
            }
            Fix::RemovedDevice { block } => write!(
                f,
                "{}: {} device node deleted",
                self.path,
                if *block { "block" } else { "character" }
            ),
            Fix::RemovedRedirect => write!(
                f,
                "{}: deleted (git would have taken its configuration and hooks from where it pointed)",
                self.path
            ),
            Fix::Failed(why) => write!(f, "{}: could not be made safe: {why}", self.path),
        }
    }
}

/// Directory levels whose descriptors are kept open during the walk.
const HELD_LEVELS: usize = 128;

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

/// Sweeps `repo`; returns what was found. An error only when the repo itself cannot
/// be opened.
pub fn sweep(repo: &Path) -> std::io::Result<Vec<Finding>> {
    let root = Rc::new(open_dir_path(repo)?);
    let device = stat_fd(&root)?.st_dev;
    let mut findings = Vec::new();
    let mut stack = Vec::new();
    read_dir(&root, None, &mut stack, &mut findings);
    while let Some(dir) = stack.pop() {
        let opened = match &dir.parent {
            Some(parent) => open_at(parent, &dir.place.name, libc::O_RDONLY | libc::O_DIRECTORY),
            None => open_from(&root, &dir.place.components()),
        };
        let fd = match opened {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(e) => {
                findings.push(Finding {
                    path: dir.place.shown(),
                    what: Fix::Failed(format!("cannot open the directory: {e}")),
                });
                continue;
            }
        };
        match stat_fd(&fd) {
            Ok(st) if st.st_dev == device => {}
            // Another filesystem mounted below the repo: not the repository's.
            Ok(_) => continue,
            Err(e) => {
                findings.push(Finding {
                    path: dir.place.shown(),
                    what: Fix::Failed(format!("cannot check the directory: {e}")),
                });
                continue;
            }
        }
        read_dir(&Rc::new(fd), Some(&dir.place), &mut stack, &mut findings);
    }
    Ok(findings)
}

/// Opens the directory at `components` below `root`, one component at a time.
fn open_from(root: &OwnedFd, components: &[&CStr]) -> std::io::Result<OwnedFd> {
    let mut current: Option<OwnedFd> = None;
    for component in components {
        let parent = current.as_ref().unwrap_or(root);
        current = Some(open_at(
            parent,
            component,
            libc::O_RDONLY | libc::O_DIRECTORY,
        )?);
    }
    current.ok_or_else(|| std::io::Error::other("no directory to open"))
}

/// Checks the entries of one directory; pushes its subdirectories.
fn read_dir(
    dir: &Rc<OwnedFd>,
    place: Option<&Rc<Place>>,
    stack: &mut Vec<Pending>,
    findings: &mut Vec<Finding>,
) {
    let path = place.map(|p| p.shown()).unwrap_or_default();
    let listed = match entries(dir) {
        Ok(listed) => listed,
        Err(e) => {
            findings.push(Finding {
                path: if path.is_empty() { ".".into() } else { path },
                what: Fix::Failed(format!("cannot list the directory: {e}")),
            });
            return;
        }
    };
    let depth = place.map_or(0, |p| p.depth);
    // Children of a shallow directory open from its descriptor; deeper ones reopen
    // from the root, so no more than HELD_LEVELS descriptors are ever held.
    let held = (depth < HELD_LEVELS).then(|| dir.clone());
    for (name, kind) in listed {
        let shown = if path.is_empty() {
            name.to_string_lossy().into_owned()
        } else {
            format!("{path}/{}", name.to_string_lossy())
        };
        let kind = match kind {
            libc::DT_UNKNOWN => match stat_at(dir, &name) {
                Ok(st) => type_of(st.st_mode),
                Err(_) => continue,
            },
            known => known,
        };
        match kind {
            libc::DT_DIR => stack.push(Pending {
                parent: held.clone(),
                place: Rc::new(Place {
                    name,
                    up: place.cloned(),
                    depth: depth + 1,
                }),
            }),
            libc::DT_CHR | libc::DT_BLK => findings.push(Finding {
                path: shown,
                what: match unlink_at(dir, &name) {
                    Ok(()) => Fix::RemovedDevice {
                        block: kind == libc::DT_BLK,
                    },
                    Err(e) => Fix::Failed(e.to_string()),
                },
            }),
            libc::DT_REG => {
                let Ok(st) = stat_at(dir, &name) else {
                    continue;
                };
                let mode = st.st_mode & 0o7777;
                if mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
                    findings.push(Finding {
                        path: shown,
                        what: match clear_set_id(dir, &name, mode) {
                            Ok(()) => Fix::ClearedSetId { mode },
                            Err(e) => Fix::Failed(e.to_string()),
                        },
                    });
                }
            }
            _ => {}
        }
    }
}

/// Removes the setuid/setgid bits through a descriptor of the file itself, so a
/// symlink swapped in meanwhile is never followed.
fn clear_set_id(dir: &OwnedFd, name: &CStr, mode: u32) -> std::io::Result<()> {
    let fd = open_at(dir, name, libc::O_RDONLY | libc::O_NONBLOCK)?;
    let st = stat_fd(&fd)?;
    if type_of(st.st_mode) != libc::DT_REG {
        return Err(std::io::Error::other("changed while being checked"));
    }
    // SAFETY: fchmod on a descriptor we own.
    if unsafe { libc::fchmod(fd.as_raw_fd(), mode & !(libc::S_ISUID | libc::S_ISGID)) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn type_of(mode: libc::mode_t) -> u8 {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => libc::DT_DIR,
        libc::S_IFREG => libc::DT_REG,
        libc::S_IFCHR => libc::DT_CHR,
        libc::S_IFBLK => libc::DT_BLK,
        libc::S_IFLNK => libc::DT_LNK,
        _ => libc::DT_UNKNOWN,
    }
}

/// The entries of a directory (names and `d_type`), without `.` and `..`.
fn entries(dir: &OwnedFd) -> std::io::Result<Vec<(CString, u8)>> {
    let mut out = Vec::new();
    // SAFETY: dup gives fdopendir a descriptor of its own, which closedir closes;
    // readdir's entries are copied before the next call; errno is cleared before
    // each readdir so its end and its failure can be told apart.
    unsafe {
        let fd = libc::dup(dir.as_raw_fd());
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = libc::fdopendir(fd);
        if stream.is_null() {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        loop {
            *libc::__errno_location() = 0;
            let entry = libc::readdir(stream);
            if entry.is_null() {
                let errno = *libc::__errno_location();
                if errno != 0 {
                    libc::closedir(stream);
                    return Err(std::io::Error::from_raw_os_error(errno));
                }
                break;
            }
            let name = CStr::from_ptr((*entry).d_name.as_ptr());
            let bytes = name.to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            out.push((name.to_owned(), (*entry).d_type));
        }
        libc::closedir(stream);
    }
    Ok(out)
}

fn open_dir_path(path: &Path) -> std::io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::other("path contains a NUL byte"))?;
    // SAFETY: NUL-terminated path; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn open_at(dir: &OwnedFd, name: &CStr, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    // SAFETY: valid descriptor and NUL-terminated name; the result is checked.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn stat_fd(fd: &OwnedFd) -> std::io::Result<libc::stat> {
    // SAFETY: zeroed stat is a valid out-parameter.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd.as_raw_fd(), &mut st) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(st)
    }
}

fn stat_at(dir: &OwnedFd, name: &CStr) -> std::io::Result<libc::stat> {
    // SAFETY: zeroed stat is a valid out-parameter; valid descriptor and name.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(st)
    }
}

fn unlink_at(dir: &OwnedFd, name: &CStr) -> std::io::Result<()> {
    // SAFETY: valid descriptor and NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    #[test]
    fn setid_files_deeper_than_the_held_levels_are_found() {
        let repo = std::env::temp_dir().join(format!(
            "agent-runner-priv-deep-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let mut deep = repo.clone();
        for _ in 0..HELD_LEVELS + 40 {
            std::fs::create_dir_all(deep.join("sibling")).unwrap();
            deep = deep.join("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        let file = deep.join("suid");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let found = sweep(&repo).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].what, Fix::ClearedSetId { mode: 0o4755 });
        assert!(found[0].path.ends_with("/d/suid"));
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777,
            0o755
        );
        let _ = std::fs::remove_dir_all(&repo);
    }

    #[test]
    fn setid_bits_are_cleared_and_symlinks_not_followed() {
        let repo = std::env::temp_dir().join(format!(
            "agent-runner-priv-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let outside = repo.with_extension("outside");
        std::fs::create_dir_all(repo.join("a/b")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let set = |path: &Path, mode: u32| {
            std::fs::write(path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        set(&repo.join("a/b/suid"), 0o4755);
        set(&repo.join("sgid"), 0o2711);
        set(&repo.join("plain"), 0o755);
        set(&outside.join("host-suid"), 0o4755);
        symlink(&outside, repo.join("a/link-dir")).unwrap();
        symlink(outside.join("host-suid"), repo.join("link-file")).unwrap();
        let mut found = sweep(&repo).unwrap();
        found.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(
            found,
            [
                Finding {
                    path: "a/b/suid".into(),
                    what: Fix::ClearedSetId { mode: 0o4755 }
                },
                Finding {
                    path: "sgid".into(),
                    what: Fix::ClearedSetId { mode: 0o2711 }
                },
            ]
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&repo.join("a/b/suid")), 0o755);
        assert_eq!(mode(&repo.join("sgid")), 0o711);
        assert_eq!(mode(&outside.join("host-suid")), 0o4755, "not followed");
        assert!(sweep(&repo).unwrap().is_empty(), "nothing left");
        let _ = std::fs::remove_dir_all(&repo);
        let _ = std::fs::remove_dir_all(&outside);
    }
}
