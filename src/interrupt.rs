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
}

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
}
