//! The few operating-system calls std lacks (signals, uid), declared directly rather
//! than through a crate, each wrapped safely here. Linux/Unix only.

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};

const SIGINT: c_int = 2;
const SIGKILL: c_int = 9;
const SIGTERM: c_int = 15;

unsafe extern "C" {
    fn signal(signum: c_int, handler: usize) -> usize;
    fn kill(pid: c_int, sig: c_int) -> c_int;
    fn getuid() -> u32;
    fn getgid() -> u32;
    fn _exit(status: c_int) -> !;
}

/// Signals we send to children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
}

/// Sends `sig` to every process in the process group `pgid`.
pub fn signal_group(pgid: u32, sig: Signal) {
    let number = match sig {
        Signal::Term => SIGTERM,
        Signal::Kill => SIGKILL,
    };
    let Ok(pgid) = c_int::try_from(pgid) else {
        return;
    };
    // SAFETY: kill(2) has no memory effects; a negative pid addresses the group.
    unsafe {
        kill(-pgid, number);
    }
}

/// (uid, gid) of this process.
pub fn user_and_group() -> (u32, u32) {
    // SAFETY: getuid/getgid cannot fail and touch no memory.
    unsafe { (getuid(), getgid()) }
}

static SIGNALS_RECEIVED: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_interrupt(_sig: c_int) {
    // Only async-signal-safe work: an atomic increment, and _exit on the second signal.
    if SIGNALS_RECEIVED.fetch_add(1, Ordering::SeqCst) >= 1 {
        // SAFETY: _exit is async-signal-safe. The sandbox's keep-alive pipe closes
        // with this process, so the container still goes away.
        unsafe { _exit(130) }
    }
}

/// Routes SIGINT and SIGTERM to a flag the waiting loops check (`interrupted`).
/// A second signal exits at once with status 130.
pub fn install_interrupt_handlers() {
    // SAFETY: the handler only touches an atomic and calls _exit.
    unsafe {
        signal(SIGINT, on_interrupt as *const () as usize);
        signal(SIGTERM, on_interrupt as *const () as usize);
    }
}

/// True once SIGINT or SIGTERM has been received.
pub fn interrupted() -> bool {
    SIGNALS_RECEIVED.load(Ordering::SeqCst) > 0
}

/// True while a process with this pid exists on this host (zombies count as gone).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(stat_field(&stat, 3).as_deref(), Some("Z") | Some("X")),
        Err(_) => false,
    }
}

/// When the process started (clock ticks since boot): with the pid, it tells a
/// process apart from a later one that reused the pid.
pub fn process_start_ticks(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_field(&stat, 22)
}

/// Field `n` (1-based, as in proc(5)) of /proc/<pid>/stat. The command name (field 2)
/// may contain spaces and parentheses, so fields are counted after its last `)`.
fn stat_field(stat: &str, n: usize) -> Option<String> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace()
        .nth(n.checked_sub(3)?)
        .map(str::to_string)
}

/// This machine's host name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_after_the_command_name() {
        let stat = "123 (a b) c) S 1 123 123 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 4242 0";
        assert_eq!(stat_field(stat, 3).as_deref(), Some("S"));
        assert_eq!(stat_field(stat, 22).as_deref(), Some("4242"));
    }

    #[test]
    fn knows_this_process_is_alive() {
        assert!(process_alive(std::process::id()));
        assert!(process_start_ticks("self").is_some());
        assert!(!process_alive(u32::MAX - 1));
    }
}
