//! Whole-file writes that readers never see half done (git's lockfile, Maildir's
//! tmp/): the bytes go to a new temp file in the same directory, created exclusively
//! under a name nobody can predict (so a planted symlink or file cannot take its
//! place), then `rename` replaces the target in one step, or `link` puts it in
//! place only if the name is free (a file that must not be replaced). The file is
//! this user's only (0600): everything written so is workspace metadata.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically (temp file + rename).
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with(path, bytes, |_| Ok(())).map(drop)
}

/// `write`, with `before` run on the written file before the rename (a lock taken
/// there is held from the moment the file has its name); the file stays open.
pub(crate) fn write_with(
    path: &Path,
    bytes: &[u8],
    before: impl FnOnce(&File) -> std::io::Result<()>,
) -> std::io::Result<File> {
    let (temp, file) = write_temp(path, bytes, 0o600)?;
    match before(&file).and_then(|()| std::fs::rename(&temp, path)) {
        Ok(()) => Ok(file),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}

/// Creates `path` with `bytes`, whole or not at all (temp file + link), and fails
/// with `AlreadyExists` if `path` exists. A failed write (a full disk) leaves no
/// file behind, so the name stays free.
pub(crate) fn create_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    create_new_with_mode(path, bytes, 0o600)
}

/// `create_new` of a file with permissions `mode` (an executable, say).
pub fn create_new_with_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let (temp, _) = write_temp(path, bytes, mode)?;
    let linked = std::fs::hard_link(&temp, path);
    let _ = std::fs::remove_file(&temp);
    linked
}

/// A new temp file next to `path` holding `bytes`, with permissions `mode` (the
/// umask may take more away); removed again if writing fails.
fn write_temp(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<(PathBuf, File)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(temp_name(&name));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&temp)?;
        file.write_all(bytes)?;
        Ok(file)
    })();
    match result {
        Ok(file) => Ok((temp, file)),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}

/// The temp name a write of `name` goes through: hidden (scanners of the IPC
/// directories skip names starting with a dot) and unpredictable, so nobody can
/// plant a symlink or FIFO there in advance: `.<name>.<32 random hex digits>.tmp`.
pub(super) fn temp_name(name: &str) -> String {
    format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temp() {
        let dir = crate::fs::testing::scratch("atomic");
        let path = dir.join("x.json");
        write(&path, b"one").unwrap();
        write(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, ["x.json"]);
        // A symlink at the target is replaced, not followed.
        let outside = dir.join("outside");
        std::fs::write(&outside, "keep").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        write(&path, b"three").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert!(
            !std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn temp_names_are_hidden_and_never_repeat() {
        let names: std::collections::HashSet<String> =
            (0..1000).map(|_| temp_name("note.md")).collect();
        assert_eq!(names.len(), 1000);
        assert!(names.iter().all(|n| {
            n.starts_with(".note.md.")
                && n.ends_with(".tmp")
                && n.len() == ".note.md..tmp".len() + 32
        }));
    }

    #[test]
    fn a_lock_taken_before_the_rename_is_held_under_the_name() {
        let dir = crate::fs::testing::scratch("write-with");
        let path = dir.join("marker.json");
        let held = write_with(&path, b"{}", |file| {
            assert!(crate::fs::lock::try_lock(
                file,
                crate::fs::lock::Mode::Exclusive
            )?);
            Ok(())
        })
        .unwrap();
        let (reader, _) = crate::fs::read::open_regular(&path, 10).unwrap();
        assert!(!crate::fs::lock::try_lock(&reader, crate::fs::lock::Mode::Shared).unwrap());
        drop(held);
        assert!(crate::fs::lock::try_lock(&reader, crate::fs::lock::Mode::Shared).unwrap());
        // A failure before the rename leaves neither the file nor its temp.
        let e = write_with(&dir.join("other"), b"x", |_| {
            Err(std::io::Error::other("no"))
        });
        assert!(e.is_err());
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, ["marker.json"]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_new_file_is_never_replaced_and_leaves_no_temp() {
        let dir = crate::fs::testing::scratch("create");
        let path = dir.join("t.jsonl");
        create_new(&path, b"one\n").unwrap();
        let e = create_new(&path, b"two\n").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\n");
        // A dangling symlink at the name is not written through either.
        let link = dir.join("l.jsonl");
        std::os::unix::fs::symlink(dir.join("target"), &link).unwrap();
        assert!(create_new(&link, b"x").is_err());
        assert!(!dir.join("target").exists());
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
