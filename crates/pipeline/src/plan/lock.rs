//! One plan edit at a time per workspace: two edits made from the same old plan
//! would each write a `wbs.json` without the other's changes, and an edit must see
//! the lines of a crashed one before it commits (`apply`). The lock is an `flock`
//! on `plan.lock` in the workspace's metadata directory, held for the whole command
//! (the Meta exchange included, since the request describes the plan it edits),
//! released by the kernel however the holder ends. A second command waits for it.

use std::fs::File;
use std::time::Duration;

use super::super::{PipelineError, Workspace};
use agent_runner_core::fs::lock::{self, Mode};
use agent_runner_core::interrupt::Interrupt;

/// How often a waiting command tries again.
const RETRY: Duration = Duration::from_millis(100);

/// Holds the lock while it lives.
#[derive(Debug)]
pub(crate) struct PlanLock {
    _file: File,
}

/// Why no lock.
#[derive(Debug)]
pub(crate) enum LockError {
    Interrupted,
    Io(PipelineError),
}

impl PlanLock {
    /// Takes the plan lock of `ws`, waiting (and saying so once) while another
    /// command holds it, until `interrupt`.
    pub(crate) fn acquire(ws: &Workspace, interrupt: Interrupt) -> Result<PlanLock, LockError> {
        let path = ws.dir.join("plan.lock");
        let io = |action| {
            let path = path.clone();
            move |e| LockError::Io(PipelineError::io(action, path)(e))
        };
        let file = lock::open(&path).map_err(io("open"))?;
        let mut said = false;
        while !lock::try_lock(&file, Mode::Exclusive).map_err(io("lock"))? {
            if !said {
                log::info!(
                    "waiting for another plan command in this workspace ({})",
                    lock::holder(&file, 256)
                );
                said = true;
            }
            if interrupt.is_set() {
                return Err(LockError::Interrupted);
            }
            std::thread::sleep(RETRY);
        }
        lock::write_holder(&file).map_err(io("write"))?;
        Ok(PlanLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_and_gives_up_when_interrupted() {
        let (ws, base) = crate::store::workspace::scratch("planlock");
        let first = PlanLock::acquire(&ws, Interrupt::never()).unwrap();
        let interrupt = Interrupt::manual();
        let stop = interrupt;
        let waiter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            stop.trigger();
        });
        assert!(matches!(
            PlanLock::acquire(&ws, interrupt),
            Err(LockError::Interrupted)
        ));
        waiter.join().unwrap();
        drop(first);
        PlanLock::acquire(&ws, Interrupt::never()).unwrap();
        let holder = std::fs::read_to_string(ws.dir.join("plan.lock")).unwrap();
        assert!(
            holder.starts_with(&format!("pid {} on ", std::process::id())),
            "{holder}"
        );
        std::fs::remove_dir_all(base).unwrap();
    }
}
