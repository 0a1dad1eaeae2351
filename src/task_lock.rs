//! One run per task id per repository (SPEC §9): two runs with the same id would
//! share one note and one log directory, and one history would be silently lost.
//! The lock is an `flock` on `.agent-runner/locks/<id>.lock`, released by the kernel
//! however the holder ends; the file says who holds it, for the error message.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;

use crate::private_dir::PrivateDir;
use crate::timestamp::Timestamp;

/// Holds the lock while it lives.
#[derive(Debug)]
pub struct TaskLock {
    _file: File,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "task {task_id} is already running in this repository ({holder}); wait for it to end or use another task id"
    )]
    Held { task_id: String, holder: String },
    #[error("cannot lock task {task_id}: {source}")]
    Io {
        task_id: String,
        source: std::io::Error,
    },
}

impl TaskLock {
    /// Takes the lock for `task_id` in `dir` (agent-runner's directory), or fails at
    /// once naming the process that holds it.
    pub fn acquire(dir: &PrivateDir, task_id: &str) -> Result<TaskLock, LockError> {
        let io = |source| LockError::Io {
            task_id: task_id.to_string(),
            source,
        };
        let mut file = dir
            .subdir("locks")
            .and_then(|locks| locks.open_lock(&format!("{task_id}.lock")))
            .map_err(io)?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io(e));
            }
            let mut holder = String::new();
            let _ = (&mut file).take(512).read_to_string(&mut holder);
            let holder = crate::text::one_line(&holder);
            return Err(LockError::Held {
                task_id: task_id.to_string(),
                holder: if holder.is_empty() {
                    "another agent-runner process".into()
                } else {
                    format!("agent-runner {holder}")
                },
            });
        }
        let record = format!(
            "pid {} on {} since {}\n",
            std::process::id(),
            crate::sys::hostname(),
            Timestamp::now()
        );
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(record.as_bytes()))
            .map_err(io)?;
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
        let dir = PrivateDir::open_in(&repo).unwrap();
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
