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
//! mount points below the repo are not entered.

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
            Fix::Failed(why) => write!(f, "{}: could not be made safe: {why}", self.path),
        }
    }
}

/// A directory still to be read: its parent's descriptor and its name.
struct Pending {
    parent: Rc<OwnedFd>,
    name: CString,
    path: String,
}

/// Sweeps `repo`; returns what was found. An error only when the repo itself cannot
/// be opened.
pub fn sweep(repo: &Path) -> std::io::Result<Vec<Finding>> {
    let root = open_dir_path(repo)?;
    let device = stat_fd(&root)?.st_dev;
    let mut findings = Vec::new();
    let mut stack = Vec::new();
    read_dir(Rc::new(root), "", device, &mut stack, &mut findings);
    while let Some(dir) = stack.pop() {
        let Ok(fd) = open_at(&dir.parent, &dir.name, libc::O_RDONLY | libc::O_DIRECTORY) else {
            continue;
        };
        match stat_fd(&fd) {
            Ok(st) if st.st_dev == device => {}
            // Another filesystem mounted below the repo (or unreadable): not ours.
            _ => continue,
        }
        read_dir(Rc::new(fd), &dir.path, device, &mut stack, &mut findings);
    }
    Ok(findings)
}

/// Checks the entries of one directory; pushes its subdirectories.
fn read_dir(
    dir: Rc<OwnedFd>,
    path: &str,
    device: libc::dev_t,
    stack: &mut Vec<Pending>,
    findings: &mut Vec<Finding>,
) {
    for (name, kind) in entries(&dir) {
        let shown = if path.is_empty() {
            name.to_string_lossy().into_owned()
        } else {
            format!("{path}/{}", name.to_string_lossy())
        };
        let kind = match kind {
            libc::DT_UNKNOWN => match stat_at(&dir, &name) {
                Ok(st) => type_of(st.st_mode),
                Err(_) => continue,
            },
            known => known,
        };
        match kind {
            libc::DT_DIR => stack.push(Pending {
                parent: dir.clone(),
                name,
                path: shown,
            }),
            libc::DT_CHR | libc::DT_BLK => findings.push(Finding {
                path: shown,
                what: match unlink_at(&dir, &name) {
                    Ok(()) => Fix::RemovedDevice {
                        block: kind == libc::DT_BLK,
                    },
                    Err(e) => Fix::Failed(e.to_string()),
                },
            }),
            libc::DT_REG => {
                let Ok(st) = stat_at(&dir, &name) else {
                    continue;
                };
                let _ = device;
                let mode = st.st_mode & 0o7777;
                if mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
                    findings.push(Finding {
                        path: shown,
                        what: match clear_set_id(&dir, &name, mode) {
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
fn entries(dir: &OwnedFd) -> Vec<(CString, u8)> {
    let mut out = Vec::new();
    // SAFETY: dup gives fdopendir a descriptor of its own, which closedir closes;
    // readdir's entries are copied before the next call.
    unsafe {
        let fd = libc::dup(dir.as_raw_fd());
        if fd < 0 {
            return out;
        }
        let stream = libc::fdopendir(fd);
        if stream.is_null() {
            libc::close(fd);
            return out;
        }
        loop {
            let entry = libc::readdir(stream);
            if entry.is_null() {
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
    out
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
