//! Work off an attempt's path: removing a bundler container or a clone takes a
//! moment the next attempt need not wait for, and spare clones are made ahead. The
//! orchestrator waits for all of it before it exits, so nothing it started is left
//! behind.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Threads doing background work; `wait` joins them all.
#[derive(Clone, Default)]
pub(crate) struct Background(Arc<Mutex<Vec<JoinHandle<()>>>>);

impl Background {
    /// Runs `work` on its own thread; false if no thread could be started. Then
    /// `work` is dropped: what it holds must clean up on drop well enough (a
    /// bundler's pipe closes, and its container removes itself).
    pub(crate) fn spawn(&self, work: impl FnOnce() + Send + 'static) -> bool {
        let spawned = std::thread::Builder::new()
            .name("background".into())
            .spawn(work);
        let started = spawned.is_ok();
        let Ok(mut handles) = self.0.lock() else {
            return started;
        };
        // Join what has finished, so a long-running orchestrator keeps no dead threads.
        let (done, running): (Vec<_>, Vec<_>) = handles.drain(..).partition(|h| h.is_finished());
        for handle in done {
            let _ = handle.join();
        }
        *handles = running;
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(e) => log::warn!("cannot start a background thread: {e}"),
        }
        started
    }

    /// Waits for every clean-up started so far.
    pub(crate) fn wait(&self) {
        let handles = match self.0.lock() {
            Ok(mut handles) => std::mem::take(&mut *handles),
            Err(_) => return,
        };
        for handle in handles {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn wait_joins_everything_and_finished_threads_are_reaped() {
        let background = Background::default();
        let count = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let count = count.clone();
            background.spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                count.fetch_add(1, Ordering::SeqCst);
            });
        }
        background.wait();
        assert_eq!(count.load(Ordering::SeqCst), 3);
        background.spawn(|| {});
        std::thread::sleep(std::time::Duration::from_millis(50));
        background.spawn(|| {});
        assert!(
            background.0.lock().unwrap().len() <= 1,
            "the finished one was reaped"
        );
        background.wait();
    }
}
