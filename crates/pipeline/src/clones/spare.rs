//! Spare clones: an isolated attempt's clone made ahead of its claim, while other
//! attempts run, so that a claimed job starts its runner at once. Making a clone is
//! a few host git processes (~0.05–0.1 s on a small repository, ~0.2 s with 36,000
//! objects, growing with the history: the objects of HEAD's history are copied) on
//! the path from claim to runner; a spare takes it off that path.
//!
//! A spare is a clone of root_dir as it was when made (`clones/.spare-<maker>/`,
//! HEAD checked out). It is taken only if root_dir's HEAD is still that commit, and
//! only for an attempt with no dependency branches to merge (those may have come
//! back after the spare was made); otherwise the attempt clones as before. It is a
//! repository of ours (`clone`) no worker has been in, so host git may still set
//! it up after it is taken. Unused spares are removed when
//! the orchestrator ends (or by the next one, if it was killed: `leftover`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::background::Background;
use crate::clones;

/// How spares' names start (`clones/.spare-…`).
pub(crate) const PREFIX: &str = ".spare-";

/// The spares of one orchestrator.
#[derive(Clone)]
pub(crate) struct Spares(Arc<Mutex<State>>);

struct State {
    root: PathBuf,
    clones: PathBuf,
    /// How many to keep ready (or in the making).
    wanted: usize,
    making: usize,
    ready: Vec<Spare>,
    stopped: bool,
}

struct Spare {
    dir: PathBuf,
    /// The commit it has checked out.
    base: String,
}

impl Spares {
    /// Spares of `root`'s clones, made in `clones`; up to `wanted` at a time (0: none).
    pub(crate) fn new(root: &Path, clones: &Path, wanted: usize) -> Spares {
        Spares(Arc::new(Mutex::new(State {
            root: root.to_path_buf(),
            clones: clones.to_path_buf(),
            wanted,
            making: 0,
            ready: Vec::new(),
            stopped: false,
        })))
    }

    /// Moves a spare made from `base` to `dir`; false if there is none. Spares of an
    /// older HEAD are removed.
    pub(crate) fn take(&self, base: &str, dir: &Path) -> bool {
        let Ok(mut state) = self.0.lock() else {
            return false;
        };
        let (fresh, stale): (Vec<Spare>, Vec<Spare>) =
            state.ready.drain(..).partition(|s| s.base == base);
        state.ready = fresh;
        for spare in stale {
            let _ = std::fs::remove_dir_all(&spare.dir);
        }
        while let Some(spare) = state.ready.pop() {
            if std::fs::rename(&spare.dir, dir).is_ok() {
                return true;
            }
            let _ = std::fs::remove_dir_all(&spare.dir);
        }
        false
    }

    /// Starts making spares in the background until `wanted` (at most `queued`, the
    /// jobs waiting) are ready or being made.
    pub(crate) fn refill(&self, queued: usize, background: &Background) {
        let Ok(mut state) = self.0.lock() else { return };
        let wanted = state.wanted.min(queued);
        while !state.stopped && state.ready.len() + state.making < wanted {
            state.making += 1;
            let (root, clones) = (state.root.clone(), state.clones.clone());
            let spares = self.clone();
            let started = background.spawn(move || {
                let dir = clones.join(super::leftover::name(PREFIX));
                let made = clones::spare_clone(&root, &dir);
                let Ok(mut state) = spares.0.lock() else {
                    return;
                };
                state.making -= 1;
                match made {
                    Ok(base) if !state.stopped => state.ready.push(Spare { dir, base }),
                    Ok(_) => {
                        let _ = std::fs::remove_dir_all(&dir);
                    }
                    Err(e) => {
                        log::debug!("no spare clone: {e}");
                        let _ = std::fs::remove_dir_all(&dir);
                    }
                }
            });
            if !started {
                // Attempts clone for themselves; try again at the next refill.
                state.making -= 1;
                break;
            }
        }
    }

    /// Removes the spares; none are made from now on. (Spares still being made
    /// remove themselves when done.)
    pub(crate) fn stop(&self) {
        let Ok(mut state) = self.0.lock() else { return };
        state.stopped = true;
        for spare in state.ready.drain(..) {
            let _ = std::fs::remove_dir_all(&spare.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[test]
    fn a_spare_of_the_current_head_is_taken_and_others_are_dropped() {
        let base =
            std::env::temp_dir().join(format!("ar-spare-{}", crate::store::id::random_hex(8)));
        let (root, clones) = (base.join("root"), base.join("clones"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&clones).unwrap();
        git(&root, &["init", "-q"]);
        std::fs::write(root.join("a.txt"), "one\n").unwrap();
        git(&root, &["add", "a.txt"]);
        git(
            &root,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@l",
                "commit",
                "-qm",
                "one",
            ],
        );
        let one = git(&root, &["rev-parse", "HEAD"]);
        let spares = Spares::new(&root, &clones, 2);
        let background = Background::default();
        spares.refill(1, &background);
        background.wait();
        assert_eq!(
            std::fs::read_dir(&clones).unwrap().count(),
            1,
            "one job queued: one spare"
        );
        assert!(!spares.take(
            "0000000000000000000000000000000000000000",
            &clones.join("x")
        ));
        assert_eq!(
            std::fs::read_dir(&clones).unwrap().count(),
            0,
            "a spare of another HEAD is dropped"
        );
        spares.refill(5, &background);
        background.wait();
        assert_eq!(
            std::fs::read_dir(&clones).unwrap().count(),
            2,
            "at most `wanted`"
        );
        let job = clones.join("j-1");
        assert!(spares.take(&one, &job));
        assert_eq!(git(&job, &["rev-parse", "HEAD"]), one);
        assert_eq!(std::fs::read_to_string(job.join("a.txt")).unwrap(), "one\n");
        spares.stop();
        spares.refill(5, &background);
        background.wait();
        let left: Vec<_> = std::fs::read_dir(&clones)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(
            left,
            ["j-1"],
            "stop removed the spare left and makes no more"
        );
        std::fs::remove_dir_all(base).unwrap();
    }
}
