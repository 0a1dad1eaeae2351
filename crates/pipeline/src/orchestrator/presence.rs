//! Whether an orchestrator runs for a workspace, for other programs to show (the web
//! view): each running `orchestrate` keeps a marker `ipc/orchestrators/<name>.json`
//! (its pid, host, start) and holds an exclusive `flock` on it for as long as it
//! lives. The lock is the answer, not the file: the kernel drops it when the process
//! ends, even by SIGKILL, and a pid that was reused holds no lock. A file whose lock
//! is free is a leftover; the next orchestrator removes it.
//!
//! The marker is written under a temp name, locked, then renamed into place, so a
//! reader never finds a live marker unlocked.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::store::id;
use crate::{PipelineError, Workspace};
use agent_runner_core::fs::lock::{self, Mode};
use agent_runner_core::fs::read;
use agent_runner_core::owner::Owner;
use agent_runner_core::timestamp::Timestamp;

/// Largest marker read.
const MAX_MARKER: u64 = 64 * 1024;

/// What a marker says: the orchestrator process and when it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Marker {
    #[serde(flatten)]
    pub(crate) owner: Owner,
    pub(crate) started_at: String,
}

/// This process's marker, held while it orchestrates; dropping it removes the
/// marker (and closing the file releases the lock).
#[derive(Debug)]
pub(crate) struct Presence {
    path: PathBuf,
    _locked: File,
}

/// `ipc/orchestrators/`.
pub(crate) fn dir(ws: &Workspace) -> PathBuf {
    ws.dir.join("ipc/orchestrators")
}

impl Presence {
    /// Writes and locks this process's marker; removes leftovers of dead ones.
    pub(crate) fn announce(ws: &Workspace) -> Result<Presence, PipelineError> {
        let dir = dir(ws);
        crate::store::workspace::create_dir(&dir).map_err(PipelineError::io("create", &dir))?;
        for (path, file) in markers(&dir) {
            if try_lock(&file, Mode::Exclusive) {
                let _ = std::fs::remove_file(path);
            }
        }
        let name = format!("{}-{}", std::process::id(), id::random_hex(8));
        let path = dir.join(format!("{name}.json"));
        let marker = Marker {
            owner: Owner::this_process(),
            started_at: Timestamp::now().to_string(),
        };
        let json = serde_json::to_vec(&marker).unwrap_or_default();
        match lock::publish(&path, &json) {
            Ok(file) => Ok(Presence {
                path,
                _locked: file,
            }),
            Err(e) => Err(PipelineError::io("write", path)(e)),
        }
    }
}

impl Drop for Presence {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The orchestrators running for `ws` now (whose markers are locked).
pub(crate) fn running(ws: &Workspace) -> Vec<Marker> {
    let mut live: Vec<Marker> = markers(&dir(ws))
        .into_iter()
        .filter_map(|(_, mut file)| {
            if try_lock(&file, Mode::Shared) {
                return None;
            }
            let mut bytes = Vec::new();
            (&mut file).take(MAX_MARKER).read_to_end(&mut bytes).ok()?;
            serde_json::from_slice(&bytes).ok()
        })
        .collect();
    live.sort_by(|a, b| a.started_at.cmp(&b.started_at));
    live
}

/// The marker files in `dir`, opened for reading (never through a symlink, never a
/// FIFO).
fn markers(dir: &Path) -> Vec<(PathBuf, File)> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    read.flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            !name.starts_with('.') && name.ends_with(".json")
        })
        .filter_map(|e| {
            let (file, _) = read::open_regular(&e.path(), u64::MAX).ok()?;
            Some((e.path(), file))
        })
        .collect()
}

/// Takes a lock of `mode` without waiting; true if taken. The lock goes with the
/// file.
fn try_lock(file: &File, mode: Mode) -> bool {
    lock::try_lock(file, mode).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_counts_while_it_is_held_and_leftovers_are_swept() {
        let (ws, base) = crate::store::workspace::scratch("presence");
        assert_eq!(running(&ws), vec![], "no directory yet");
        let held = Presence::announce(&ws).unwrap();
        let live = running(&ws);
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].owner.pid, std::process::id());
        // A second reader at the same time sees the same.
        assert_eq!(running(&ws), live);
        // A marker left by a process killed outright: its lock is gone.
        std::fs::write(dir(&ws).join("999-dead.json"), b"{\"pid\":999}").unwrap();
        assert_eq!(
            running(&ws).len(),
            1,
            "an unlocked marker is not an orchestrator"
        );
        drop(held);
        assert_eq!(running(&ws), vec![]);
        let again = Presence::announce(&ws).unwrap();
        let names: Vec<String> = std::fs::read_dir(dir(&ws))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "the leftover was swept: {names:?}");
        drop(again);
        std::fs::remove_dir_all(base).unwrap();
    }
}
