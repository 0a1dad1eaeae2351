//! Facts about processes and this machine that std does not offer: signalling a
//! process group, uid/gid, whether a pid is alive and when it started, the host name,
//! boot id and PID namespace. Linux only (procfs).

use std::path::Path;

/// Signals we send to children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
}

impl Signal {
    fn number(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
}

/// Sends `sig` to every process in the process group `pgid`.
pub fn signal_group(pgid: u32, sig: Signal) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill(2) has no memory effects; a negative pid addresses the group.
    unsafe {
        libc::kill(-pgid, sig.number());
    }
}

/// Sends `sig` to one process.
pub fn signal_process(pid: u32, sig: Signal) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid <= 1 {
        return;
    }
    // SAFETY: kill(2) has no memory effects.
    unsafe {
        libc::kill(pid, sig.number());
    }
}

/// Makes `command`'s child receive SIGTERM when the calling thread ends (this process
/// being killed included), and exit at once if this process is already gone by the
/// time the child starts (the signal would then never come).
pub fn terminate_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid is always safe.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (prctl, getppid, _exit); it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Raises this process's limit of open files to its hard limit: the repository
/// sweep keeps one descriptor per directory level, and a worker can nest deep.
pub fn raise_open_files_limit() {
    // SAFETY: getrlimit/setrlimit with a valid out-parameter.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// (uid, gid) of this process.
pub fn user_and_group() -> (u32, u32) {
    // SAFETY: getuid/getgid cannot fail and touch no memory.
    unsafe { (libc::getuid(), libc::getgid()) }
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
    read_trimmed("/proc/sys/kernel/hostname")
}

/// This boot's id: pids and start times are only comparable within one boot.
pub fn boot_id() -> String {
    read_trimmed("/proc/sys/kernel/random/boot_id")
}

/// This process's PID namespace (`pid:[4026531836]`): a pid means something only in
/// its namespace, and containers sharing the host name may have their own.
pub fn pid_namespace() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

fn read_trimmed(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
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
    fn knows_this_process_and_machine() {
        assert!(process_alive(std::process::id()));
        assert!(process_start_ticks("self").is_some());
        assert!(!process_alive(u32::MAX - 1));
        assert_eq!(boot_id().len(), 36, "a UUID");
        assert!(pid_namespace().starts_with("pid:["), "{}", pid_namespace());
    }
}
