//! The proxy's directory on the host: created new and private (0700) under the temp
//! directory, never in the repository (the worker writes there); it holds the
//! proxy's unix socket and the bridge helper and is mounted read-only into the
//! container, so the socket is the container's only way out.
//!
//! It goes when the task ends. If agent-runner dies without removing it (SIGKILL),
//! its proxy threads die with it, so nothing listens on the socket any more, and a
//! watchdog removes the directory: a small `sh` that holds a pipe of ours, like the
//! container's watchdog, and runs `rm -rf` when the pipe closes without `done`.

use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_runner_core::process::{self, Held, Invocation};

/// The socket's file name in the directory.
pub(crate) const SOCKET: &str = "proxy.sock";
/// The file name of the socket on which the bridge takes agent-runner's requests
/// (`socket.rs`).
pub(crate) const CONTROL: &str = "control.sock";
/// The bridge's file name in the directory.
pub(crate) const BRIDGE: &str = "bridge";
/// Longest directory path that leaves room for the socket's name in `sun_path`
/// (108 bytes with its NUL).
const MAX_DIR: usize = 90;

/// Removes the directory (`$1`) with the `rm` at `$2` (the path agent-runner found,
/// not one the shell would look up) when stdin closes without a `done` line.
const WATCHDOG_SCRIPT: &str = include_str!("host_dir.sh");

/// The directory; removed on `remove` or drop.
pub(crate) struct HostDir {
    path: PathBuf,
    watchdog: Option<Held>,
    removed: bool,
}

impl HostDir {
    /// A new private directory with the bridge helper in it, and its watchdog.
    pub(crate) fn create(bridge: &[u8]) -> std::io::Result<HostDir> {
        let path = base().join(format!(
            "agent-runner-egress-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..16]
        ));
        DirBuilder::new().mode(0o700).create(&path)?;
        let mut dir = HostDir {
            path,
            watchdog: None,
            removed: false,
        };
        let rm = process::program::resolve("rm")
            .map_err(|e| std::io::Error::other(format!("rm: {e}")))?;
        let invocation = Invocation::new("sh").args([
            "-c".to_string(),
            WATCHDOG_SCRIPT.to_string(),
            "agent-runner-egress-watchdog".to_string(),
            dir.path.display().to_string(),
            rm.display().to_string(),
        ]);
        dir.watchdog = Some(process::spawn_held(&invocation).map_err(|e| {
            std::io::Error::other(format!("cannot start the egress watchdog: {e}"))
        })?);
        agent_runner_core::fs::atomic::create_new_with_mode(&dir.path.join(BRIDGE), bridge, 0o555)?;
        Ok(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Where the proxy listens.
    pub(crate) fn socket(&self) -> PathBuf {
        self.path.join(SOCKET)
    }

    /// Where agent-runner listens for the bridge.
    pub(crate) fn control(&self) -> PathBuf {
        self.path.join(CONTROL)
    }

    /// Removes the directory and dismisses the watchdog.
    pub(crate) fn remove(mut self) {
        self.clean_up();
    }

    fn clean_up(&mut self) {
        self.removed = true;
        if let Err(e) = std::fs::remove_dir_all(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            log::warn!("cannot remove {}: {e}", self.path.display());
        }
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.send_line("done");
            watchdog.release(Duration::from_secs(2));
        }
    }
}

impl Drop for HostDir {
    fn drop(&mut self) {
        if !self.removed {
            self.clean_up();
        }
    }
}

/// The temp directory, if it is a plain absolute path short enough for a socket
/// below it (docker mounts it by path); else `/tmp`.
fn base() -> PathBuf {
    let temp = std::env::temp_dir();
    let usable = temp.is_absolute()
        && temp
            .to_str()
            .is_some_and(|t| t.len() <= MAX_DIR - 40 && !t.chars().any(char::is_control));
    if usable { temp } else { PathBuf::from("/tmp") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_directory_is_private_holds_the_bridge_and_goes_away() {
        let dir = HostDir::create(b"#!/bin/sh\n").unwrap();
        let path = dir.path().to_path_buf();
        assert!(path.to_str().unwrap().len() + SOCKET.len().max(CONTROL.len()) < 107);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(std::fs::read(path.join(BRIDGE)).unwrap(), b"#!/bin/sh\n");
        dir.remove();
        assert!(!path.exists());
    }

    #[test]
    fn the_watchdog_removes_the_directory_when_its_pipe_closes_without_done() {
        let mut dir = HostDir::create(b"x").unwrap();
        let path = dir.path().to_path_buf();
        // As if agent-runner died: the pipe closes, no `done`.
        let watchdog = dir.watchdog.take().unwrap();
        watchdog.release(Duration::from_secs(5));
        assert!(!path.exists(), "the watchdog removed {}", path.display());
        dir.remove();
    }
}
