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
//! The tree is walked by `fs::walk`: no symlink followed, the repository's
//! filesystem never left, any depth, and a directory it cannot read reported.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use agent_runner_core::fs::walk::{self, Entry, Found, Kind};

/// Something the sweep found and fixed (or could not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Relative to the repository.
    pub(crate) path: String,
    pub(crate) what: Fix,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fix {
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

/// Sweeps `repo`; returns what was found. An error only when the repo itself cannot
/// be opened.
pub(crate) fn sweep(repo: &Path) -> std::io::Result<Vec<Finding>> {
    let mut findings = Vec::new();
    walk::walk(repo, &mut |found| {
        let finding = match found {
            Found::Unreadable { path, why } => Some(Finding {
                path,
                what: Fix::Failed(why),
            }),
            Found::Entry(entry) => check(&entry),
        };
        findings.extend(finding);
    })?;
    Ok(findings)
}

/// Makes one entry safe: a device node goes, setuid/setgid bits go.
fn check(entry: &Entry<'_>) -> Option<Finding> {
    let what = match entry.kind {
        Kind::CharDevice | Kind::BlockDevice => match entry.remove() {
            Ok(()) => Fix::RemovedDevice {
                block: entry.kind == Kind::BlockDevice,
            },
            Err(e) => Fix::Failed(e.to_string()),
        },
        Kind::File => {
            let mode = entry.mode().ok()?;
            if mode & (libc::S_ISUID | libc::S_ISGID) == 0 {
                return None;
            }
            match clear_set_id(entry, mode) {
                Ok(()) => Fix::ClearedSetId { mode },
                Err(e) => Fix::Failed(e.to_string()),
            }
        }
        Kind::Other => return None,
    };
    Some(Finding {
        path: entry.path.clone(),
        what,
    })
}

/// Removes the setuid/setgid bits through a descriptor of the file itself, so a
/// symlink swapped in meanwhile is never followed.
fn clear_set_id(entry: &Entry<'_>, mode: u32) -> std::io::Result<()> {
    entry
        .open_regular()?
        .set_permissions(std::fs::Permissions::from_mode(
            mode & !(libc::S_ISUID | libc::S_ISGID),
        ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn setid_files_deeper_than_the_held_levels_are_found() {
        let repo = std::env::temp_dir().join(format!(
            "agent-runner-priv-deep-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let mut deep = repo.clone();
        for _ in 0..walk::HELD_LEVELS + 40 {
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
