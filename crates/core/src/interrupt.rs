//! How a long-running command learns that it should stop: SIGINT, SIGTERM or SIGHUP
//! (SPEC §2, §10), or, in tests, a flag set by hand. Waiting loops take an
//! `Interrupt` and look at it; nothing reads a process global directly, so every
//! interrupt path can be unit-tested.
//!
//! Semantics: any of the three signals asks for an orderly stop (clean up, write the
//! note, exit 130). Only a *second SIGINT* exits at once, skipping clean-up; a
//! SIGTERM or SIGHUP never does, so a supervisor that sends SIGTERM twice still gets
//! its note.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// Exit status after an interrupt.
pub const EXIT_INTERRUPTED: i32 = 130;

static SIGNALLED: AtomicBool = AtomicBool::new(false);
static SIGINTS: AtomicUsize = AtomicUsize::new(0);
static NEVER: AtomicBool = AtomicBool::new(false);

/// A stop request that can be checked cheaply and copied freely.
#[derive(Debug, Clone, Copy)]
pub struct Interrupt(&'static AtomicBool);

impl Interrupt {
    /// Installs the signal handlers (once per process) and returns the flag they set.
    pub fn from_signals() -> Self {
        install_handlers();
        Interrupt(&SIGNALLED)
    }

    /// A flag that is never set (for code paths that cannot be interrupted).
    pub fn never() -> Self {
        Interrupt(&NEVER)
    }

    /// A flag set only by `trigger` (tests, or a parent deciding to stop).
    pub fn manual() -> Self {
        // One small allocation per flag, kept for the process lifetime, so the
        // handle stays `Copy` like the signal one.
        Interrupt(Box::leak(Box::new(AtomicBool::new(false))))
    }

    /// Asks for a stop.
    pub fn trigger(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// True once a stop was asked for.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// `work`'s result, or None as soon as a stop is asked for: `work` runs on a
    /// thread named `name` (or here, if no thread can start) and is left to finish
    /// on its own after an interrupt; the process is about to end anyway. For work
    /// that cannot look at the flag itself, such as parsing a large text.
    pub fn unless_stopped<T: Send + 'static>(
        self,
        name: &str,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (sender, receiver) = mpsc::channel();
        let work = std::sync::Arc::new(std::sync::Mutex::new(Some(work)));
        let shared = std::sync::Arc::clone(&work);
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let work = shared.lock().ok().and_then(|mut w| w.take());
                if let Some(work) = work {
                    let _ = sender.send(work());
                }
            });
        let Ok(thread) = spawned else {
            let work = work.lock().ok().and_then(|mut w| w.take())?;
            return Some(work());
        };
        loop {
            if self.is_set() {
                return None;
            }
            match receiver.recv_timeout(TICK) {
                Ok(done) => return Some(done),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // The work panicked: as if it had run here.
                Err(mpsc::RecvTimeoutError::Disconnected) => match thread.join() {
                    Err(panic) => std::panic::resume_unwind(panic),
                    Ok(()) => return None,
                },
            }
        }
    }
}

/// How often `unless_stopped` looks at the flag.
const TICK: Duration = Duration::from_millis(20);

extern "C" fn on_signal(sig: libc::c_int) {
    // Async-signal-safe only: atomics, and _exit on the second SIGINT.
    SIGNALLED.store(true, Ordering::SeqCst);
    if sig == libc::SIGINT && SIGINTS.fetch_add(1, Ordering::SeqCst) >= 1 {
        // SAFETY: _exit is async-signal-safe. The sandbox's keep-alive pipe closes
        // with this process, so the container still goes away.
        unsafe { libc::_exit(EXIT_INTERRUPTED) }
    }
}

fn install_handlers() {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the
        // handler only touches atomics. No SA_RESTART: a blocking call returns EINTR,
        // and every loop that waits checks the flag within a short tick anyway.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_flags_are_independent() {
        let a = Interrupt::manual();
        let b = Interrupt::manual();
        a.trigger();
        assert!(a.is_set() && !b.is_set());
        assert!(!Interrupt::never().is_set());
    }

    #[test]
    fn work_is_given_up_when_a_stop_is_asked_for() {
        assert_eq!(Interrupt::never().unless_stopped("t", || 42), Some(42));
        let stop = Interrupt::manual();
        let (release, wait) = mpsc::channel::<()>();
        let trigger = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            stop.trigger();
        });
        let started = std::time::Instant::now();
        // Work that would never end by itself.
        let got = stop.unless_stopped("t", move || wait.recv().is_ok());
        assert_eq!(got, None);
        assert!(started.elapsed() < Duration::from_secs(5));
        trigger.join().unwrap();
        drop(release);
    }
}
