//! A small filesystem that can be filled: a tmpfs mounted over a directory (root
//! only), to see what agent-runner does when writes fail for want of space.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted at `path`, unmounted on drop.
pub struct SmallDisk {
    pub path: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (`4m`) at `path` (created). None, with a message,
    /// when not root; under CI, where the suite runs as root, that is a failure.
    pub fn mount(path: &Path, size: &str) -> Option<SmallDisk> {
        std::fs::create_dir_all(path).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .output()
            .is_ok_and(|o| o.status.success());
        if !mounted {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "this test needs root to mount a tmpfs, and CI=true"
            );
            eprintln!("skipped: needs root to mount a tmpfs");
            return None;
        }
        Some(SmallDisk {
            path: path.to_path_buf(),
        })
    }

    /// Fills the space left.
    pub fn fill(&self) {
        let mut filler = std::fs::File::create(self.filler()).unwrap();
        let block = vec![0u8; 64 << 10];
        while filler.write_all(&block).is_ok() {}
        // Whatever is left is smaller than a block: take it byte by byte.
        while filler.write_all(&[0]).is_ok() {}
    }

    /// Frees what `fill` took.
    pub fn free(&self) {
        std::fs::remove_file(self.filler()).unwrap();
    }

    fn filler(&self) -> PathBuf {
        self.path.join(".filler")
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}
