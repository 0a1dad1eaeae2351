//! Who owns something that must not outlive its owner (a sandbox container, a
//! claimed job): a process named so that "is it gone?" has a safe answer. A pid
//! alone is not enough: pids are reused, mean something only within one PID
//! namespace (an agent-runner in a `--network host` container shares the host name
//! but not the pids), and only within one boot. So an owner is gone only when host,
//! boot and namespace are ours and no process with that pid *and start time* exists;
//! when any of that is unknown or foreign, we cannot tell, and the answer is no.

use serde::{Deserialize, Serialize};

use crate::sys;

/// A process, named well enough to tell whether it is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: u32,
    /// Start time in clock ticks since boot (/proc/<pid>/stat field 22).
    pub start: String,
    pub host: String,
    pub boot_id: String,
    pub pid_namespace: String,
}

impl Owner {
    /// This process.
    pub fn this_process() -> Owner {
        Owner {
            pid: std::process::id(),
            start: sys::process_start_ticks("self").unwrap_or_default(),
            host: sys::hostname(),
            boot_id: sys::boot_id(),
            pid_namespace: sys::pid_namespace(),
        }
    }

    /// True only when we can be sure the owner no longer runs: it lived on this host,
    /// in this boot and this PID namespace, and its pid is free or now belongs to a
    /// process that started at another time.
    pub fn is_gone(&self) -> bool {
        let here = Owner::this_process();
        if self.host.is_empty()
            || self.boot_id.is_empty()
            || self.pid_namespace.is_empty()
            || self.start.is_empty()
            || self.host != here.host
            || self.boot_id != here.boot_id
            || self.pid_namespace != here.pid_namespace
        {
            return false;
        }
        !sys::process_alive(self.pid)
            || sys::process_start_ticks(&self.pid.to_string()).as_deref() != Some(&self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_provably_dead_owner_is_gone() {
        let me = Owner::this_process();
        assert!(!me.is_gone());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = child.id();
        child.wait().unwrap();
        let dead = Owner {
            pid: dead_pid,
            ..me.clone()
        };
        assert!(dead.is_gone(), "a reaped child is gone");
        let reused = Owner {
            start: "1".into(),
            ..me.clone()
        };
        assert!(
            reused.is_gone(),
            "our pid with another start time: a reused pid"
        );
        for foreign in [
            Owner {
                host: "elsewhere".into(),
                ..dead.clone()
            },
            Owner {
                boot_id: "another-boot".into(),
                ..dead.clone()
            },
            Owner {
                pid_namespace: "pid:[1]".into(),
                ..dead.clone()
            },
            Owner {
                pid_namespace: String::new(),
                ..dead.clone()
            },
            Owner {
                start: String::new(),
                ..dead.clone()
            },
        ] {
            assert!(!foreign.is_gone(), "{foreign:?}");
        }
    }
}
