//! One run per task id per repository (SPEC §9): two runs with the same id would
//! share one note and one log directory, and one history would be silently lost.
//! The lock is an `flock` on `.agent-runner/locks/<id>.lock`, released by the kernel
//! however the holder ends; the file says who holds it, for the error message.

use std::fs::File;

use crate::Error;
use crate::fs::Dir;
use crate::fs::lock::{self, Mode};

/// Holds the lock while it lives.
#[derive(Debug)]
pub struct TaskLock {
    _file: File,
}

impl TaskLock {
    /// Takes the lock for `task_id` in `dir` (agent-runner's directory), or fails at
    /// once naming the process that holds it.
    pub fn acquire(dir: &Dir, task_id: &str) -> Result<TaskLock, Error> {
        let io = |source| Error::TaskLock {
            task_id: task_id.to_string(),
            source,
        };
        let file = dir
            .subdir("locks")
            .and_then(|locks| locks.open_lock(&format!("{task_id}.lock")))
            .map_err(io)?;
        if !lock::try_lock(&file, Mode::Exclusive).map_err(io)? {
            let holder = lock::holder(&file, 512);
            return Err(Error::TaskRunning {
                task_id: task_id.to_string(),
                holder: if holder.is_empty() {
                    "another agent-runner process".into()
                } else {
                    format!("agent-runner {holder}")
                },
            });
        }
        lock::write_holder(&file).map_err(io)?;
        Ok(TaskLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_id_names_the_first_holder() {
        let repo = std::env::temp_dir().join(format!(
            "agent-runner-lock-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&repo).unwrap();
        let dir = crate::private_dir::open(&repo).unwrap();
        let first = TaskLock::acquire(&dir, "T-1").unwrap();
        let e = TaskLock::acquire(&dir, "T-1").unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("task T-1 is already running in this repository (agent-runner pid ")
                && text.contains(&std::process::id().to_string()),
            "{text}"
        );
        assert!(TaskLock::acquire(&dir, "T-2").is_ok(), "other ids are free");
        drop(first);
        assert!(TaskLock::acquire(&dir, "T-1").is_ok(), "released on drop");
        let _ = std::fs::remove_dir_all(repo);
    }
}
