//! Work beside the critical path that nothing waits for (the sweep beside a task's
//! start) yields the CPU to the path: on a machine of two cores its docker CLIs
//! (~15 ms of CPU each) otherwise take turns with the path's own. Not work whose end
//! the path awaits (the agent's check beside a run): at nice 10 among many busy
//! threads (a fork chain in the sandbox) it starves, and the path with it.

/// The nice value of background work: below the path, never stopped by it.
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's CPU priority to `BACKGROUND_NICE`, and so that of
/// every process it starts from now on (a child takes its creating thread's nice
/// value). For a thread of its own: a thread cannot raise it back without
/// `CAP_SYS_NICE`. Best effort: a refusal leaves the priority as it was.
pub fn background() {
    // SAFETY: gettid, getpriority and setpriority take no pointers; on Linux the
    // nice value is a thread's, named by its id.
    let lowered = unsafe {
        let tid = libc::gettid() as libc::id_t;
        // Never raised (root could): a thread already lower stays so. (-1 is also
        // getpriority's error; it is then lowered all the same.)
        if libc::getpriority(libc::PRIO_PROCESS, tid) >= BACKGROUND_NICE {
            return;
        }
        libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICE)
    };
    if lowered != 0 {
        log::debug!(
            "background work keeps its priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Field 19 of /proc/<pid>/stat: the nice value.
    fn nice_of(stat: &str) -> i32 {
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        fields[16].parse().unwrap()
    }

    #[test]
    fn a_background_thread_and_what_it_starts_run_at_the_lower_priority_and_others_do_not() {
        let own = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let before = nice_of(&own);
        let (thread, child) = std::thread::spawn(|| {
            background();
            let thread = nice_of(&std::fs::read_to_string("/proc/thread-self/stat").unwrap());
            let out = std::process::Command::new("/bin/cat")
                .arg("/proc/self/stat")
                .output()
                .unwrap();
            (thread, nice_of(&String::from_utf8(out.stdout).unwrap()))
        })
        .join()
        .unwrap();
        assert_eq!(thread, BACKGROUND_NICE.max(before));
        assert_eq!(child, BACKGROUND_NICE.max(before));
        // The rest of the process keeps its priority.
        let after = nice_of(&std::fs::read_to_string("/proc/thread-self/stat").unwrap());
        assert_eq!(after, before);
        let out = std::process::Command::new("/bin/cat")
            .arg("/proc/self/stat")
            .output()
            .unwrap();
        assert_eq!(nice_of(&String::from_utf8(out.stdout).unwrap()), before);
    }
}
