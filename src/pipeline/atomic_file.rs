//! Whole-file writes that readers never see half done (git's lockfile, Maildir's
//! tmp/): the bytes go to a new temp file in the same directory, created exclusively
//! under a name nobody can predict (so a planted symlink or file cannot take its
//! place), then `rename` replaces the target in one step, or `link` puts it in
//! place only if the name is free (a file that must not be replaced). The file is
//! this user's only (0600): everything written so is workspace metadata.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically (temp file + rename).
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = write_temp(path, bytes)?;
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

/// Creates `path` with `bytes`, whole or not at all (temp file + link), and fails
/// with `AlreadyExists` if `path` exists. A failed write (a full disk) leaves no
/// file behind, so the name stays free.
pub fn create_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = write_temp(path, bytes)?;
    let linked = std::fs::hard_link(&temp, path);
    let _ = std::fs::remove_file(&temp);
    linked
}

/// A new temp file next to `path` holding `bytes`; removed again if writing fails.
fn write_temp(path: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let temp = temp_path(path);
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&temp)?;
        file.write_all(bytes)
    })();
    match result {
        Ok(()) => Ok(temp),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}

/// A hidden temp name next to `path`: `.<name>.tmp-<random>`. Scanners of the IPC
/// directories skip names starting with a dot.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", super::id::random_hex(16)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temp() {
        let dir =
            std::env::temp_dir().join(format!("ar-atomic-{}", super::super::id::random_hex(8)));
        std::fs::create_dir_all(&dir).unwrap();
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
    fn a_new_file_is_never_replaced_and_leaves_no_temp() {
        let dir =
            std::env::temp_dir().join(format!("ar-create-{}", super::super::id::random_hex(8)));
        std::fs::create_dir_all(&dir).unwrap();
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
