//! Facts about processes and this machine that std does not offer: signalling a
//! process group, uid/gid, whether a pid is alive and when it started, the host name,
//! boot id and PID namespace, a file in memory handed to a child. Linux only (procfs).

use std::path::Path;

use crate::Error;

/// Signals we send to children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
}

impl Signal {
    /// Its number, as `kill(2)` takes it.
    pub fn number(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
}

/// Sends `sig` to every process in the process group `pgid`.
pub(crate) fn signal_group(pgid: u32, sig: Signal) {
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

/// Sends SIGTERM to process `pid` only if it is the process that started at
/// `start_ticks` (`process_start_ticks`). The process is held by a pidfd while its
/// start time is read, and the signal goes through that pidfd: a pid that ended and
/// was reused in between is never signalled. (Kernels before pidfds: the start time
/// is checked just before kill(2).)
pub(crate) fn terminate_started_at(pid: u32, start_ticks: &str) -> Result<(), Error> {
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return Err(Error::ProcessGone(pid));
    };
    if raw <= 1 || start_ticks.is_empty() {
        return Err(Error::ProcessGone(pid));
    }
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, raw, 0) };
    let fd = (fd >= 0).then(|| {
        // SAFETY: a fresh descriptor we own.
        unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) }
    });
    if fd.is_none() {
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::ENOSYS) {
            return Err(Error::ProcessGone(pid));
        }
    }
    match process_start_ticks(&pid.to_string()) {
        None => return Err(Error::ProcessGone(pid)),
        Some(now) if now != start_ticks => {
            return Err(Error::PidReused {
                pid,
                expected: start_ticks.to_string(),
                now,
            });
        }
        Some(_) => {}
    }
    let sent = match &fd {
        Some(fd) => {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGTERM,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            }
        }
        // SAFETY: kill(2) has no memory effects.
        None => unsafe { libc::kill(raw, libc::SIGTERM) }.into(),
    };
    if sent == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::ESRCH) => Err(Error::ProcessGone(pid)),
        _ => Err(Error::SignalFailed {
            pid,
            error: error.to_string(),
        }),
    }
}

/// Makes `command`'s child receive SIGTERM when the calling thread ends (this process
/// being killed included), and exit at once if this process is already gone by the
/// time the child starts (the signal would then never come).
pub(crate) fn terminate_with_parent(command: &mut std::process::Command) {
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

/// An anonymous file in memory holding `bytes` (`memfd_create`, close-on-exec):
/// whoever opens it through `/dev/fd/N` reads it from its start.
pub(crate) fn memory_file(bytes: &[u8]) -> std::io::Result<std::fs::File> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    // SAFETY: a NUL-terminated name and valid flags; the result is checked.
    let fd = unsafe { libc::memfd_create(c"agent-runner-input".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor that nothing else owns.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(bytes)?;
    Ok(file)
}

/// Gives the child of `command` `file` as its descriptor 3 (`/dev/fd/3`); `file`
/// must stay open until the child is spawned.
pub(crate) fn pass_as_fd3(command: &mut std::process::Command, file: &std::fs::File) {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let fd = file.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (dup2, fcntl); it allocates nothing. dup2 leaves the
    // copy without close-on-exec; a descriptor that already is 3 has it cleared.
    unsafe {
        command.pre_exec(move || {
            let done = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if done < 0 {
                return Err(std::io::Error::last_os_error());
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
pub(crate) fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(stat_field(&stat, 3).as_deref(), Some("Z") | Some("X")),
        Err(_) => false,
    }
}

/// When the process started (clock ticks since boot): with the pid, it tells a
/// process apart from a later one that reused the pid.
pub(crate) fn process_start_ticks(pid: &str) -> Option<String> {
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
pub(crate) fn hostname() -> String {
    read_trimmed("/proc/sys/kernel/hostname")
}

/// This boot's id: pids and start times are only comparable within one boot.
pub(crate) fn boot_id() -> String {
    read_trimmed("/proc/sys/kernel/random/boot_id")
}

/// This process's PID namespace (`pid:[4026531836]`): a pid means something only in
/// its namespace, and containers sharing the host name may have their own.
pub(crate) fn pid_namespace() -> String {
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
    fn only_the_process_that_started_then_is_signalled() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let started = process_start_ticks(&pid.to_string()).unwrap();
        // The same pid with another start time: a reused pid, left alone.
        let earlier = (started.parse::<u64>().unwrap() - 1).to_string();
        assert!(matches!(
            terminate_started_at(pid, &earlier),
            Err(Error::PidReused { .. })
        ));
        assert!(process_alive(pid), "not signalled");
        assert!(terminate_started_at(pid, &started).is_ok());
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGTERM));
        assert!(matches!(
            terminate_started_at(pid, &started),
            Err(Error::ProcessGone(p)) if p == pid
        ));
        assert!(matches!(
            terminate_started_at(1, "1"),
            Err(Error::ProcessGone(1))
        ));
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
