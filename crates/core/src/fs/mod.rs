//! Every host-side open of a file that untrusted code can reach or swap goes
//! through this module, so the rule lives in one place (SPEC §9): never follow a
//! symlink, never block on a FIFO or device, never leave the directory, read only a
//! bounded amount of a regular file, and write so that no reader sees half a file
//! and no planted name is written through. The worker is root in its container and
//! agent-runner often root on the host: a path below the repository may be a
//! symlink to a host file by the time we open it.
//!
//! - `dir`: `Dir`, a directory opened once and reached only through its descriptor
//!   (`openat`); the way into a tree someone else writes (the repository and its
//!   `.agent-runner/`, clones, `root_dir`'s git store, attempt logs).
//! - `walk`: a bounded walk of such a tree (the privilege sweep).
//! - `tree`: such a tree read whole, in order, to be copied elsewhere (the copy
//!   transport's tar stream): links read as text, files opened without following.
//! - `read`: one file by path, below directories of ours: bounded, non-blocking,
//!   regular files only, not through a symlink at its end (`head`, `whole`, `tail`).
//! - `atomic`: whole-file writes by path: a temp file with an unpredictable name,
//!   then `rename` (replace) or `link` (create new, never replace).
//! - `jsonl`: JSON Lines: appends of whole lines in one `write`, reads that tolerate
//!   a torn last line.
//! - `lock`: file locks (std's `File::lock`, `flock`), which the kernel drops however
//!   their holder ends.
//! - `fd`: the system calls the others are built from, each `O_NOFOLLOW`.
//!
//! No other module opens with `O_NOFOLLOW`, calls `openat`, creates with `O_EXCL`
//! or takes a file lock (crates/cli/tests/architecture.rs and clippy.toml check it).

pub mod atomic;
pub mod dir;
mod fd;
pub mod jsonl;
pub mod lock;
pub mod read;
pub mod tree;
pub mod walk;

pub use dir::Dir;

/// Helpers for unit tests, here and in other crates (with the `testing` feature).
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub mod testing {
    #[cfg(test)]
    use std::path::Path;
    use std::path::PathBuf;

    /// A new empty directory under the system's temp directory.
    pub fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "agent-runner-fs-{name}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// `f`'s result, run on a thread of its own: what blocks (on a FIFO) fails the
    /// test after 10 s instead of hanging the suite.
    pub fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || sender.send(f()));
        receiver
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("blocked (on a FIFO?)")
    }

    /// A FIFO at `path`: what opens it blocking would wait for a writer forever.
    #[cfg(test)]
    pub(crate) fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }
}
