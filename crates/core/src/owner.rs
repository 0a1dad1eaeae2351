//! Who owns something that must not outlive its owner (a sandbox container, a
//! claimed job): a process named so that "is it gone?" has a safe answer. A pid
//! alone is not enough: pids are reused, mean something only within one PID
//! namespace (an agent-runner in a `--network host` container shares the host name
//! but not the pids), and only within one boot. So an owner is gone only when we can
//! tell for sure; when the host, namespace or start time is unknown or foreign, the
//! answer is no.

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::sys;

/// A process, named well enough to tell whether it is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: u32,
    /// Start time in clock ticks since boot (/proc/<pid>/stat field 22).
    pub start_time: String,
    pub host: String,
    pub boot_id: String,
    #[serde(default)]
    pub pid_namespace: String,
}

/// Whether a process with a pid lives, and when it started.
type Probe<'a> = &'a dyn Fn(u32) -> Option<Option<String>>;

impl Owner {
    /// This process.
    pub fn this_process() -> Owner {
        Owner {
            pid: std::process::id(),
            start_time: sys::process_start_ticks("self").unwrap_or_default(),
            host: sys::hostname(),
            boot_id: sys::boot_id(),
            pid_namespace: sys::pid_namespace(),
        }
    }

    /// The running child `pid` of this process, named like an owner.
    pub fn child(pid: u32) -> Owner {
        Owner {
            pid,
            start_time: sys::process_start_ticks(&pid.to_string()).unwrap_or_default(),
            ..Owner::this_process()
        }
    }

    /// Sends SIGTERM to the owner, if it is a process on this host, in this boot and
    /// PID namespace that still runs with the start time recorded (never a process
    /// that took its pid since).
    pub fn terminate(&self) -> Result<(), Error> {
        let me = Owner::this_process();
        if self.host != me.host || self.boot_id != me.boot_id {
            return Err(Error::OwnerElsewhere {
                pid: self.pid,
                host: self.host.clone(),
                boot_id: self.boot_id.clone(),
            });
        }
        if self.pid_namespace != me.pid_namespace {
            return Err(Error::OtherPidNamespace {
                pid: self.pid,
                theirs: self.pid_namespace.clone(),
                ours: me.pid_namespace,
            });
        }
        sys::terminate_started_at(self.pid, &self.start_time)
    }

    /// True only when the owner provably no longer runs: it lived on this host, in
    /// this boot and this PID namespace, and its pid is free or now belongs to a
    /// process that started at another time. (The rule for containers, SPEC §9.)
    pub fn is_gone(&self) -> bool {
        self.gone_as_seen_by(&Owner::this_process(), &probe, false)
    }

    /// `is_gone`, and also when this host has rebooted since: every process of an
    /// earlier boot is gone. (The rule for claimed jobs, whose files outlive a boot.)
    pub fn is_gone_or_rebooted(&self) -> bool {
        self.gone_as_seen_by(&Owner::this_process(), &probe, true)
    }

    fn gone_as_seen_by(&self, me: &Owner, probe: Probe, reboot_counts: bool) -> bool {
        if self.host.is_empty() || self.boot_id.is_empty() || self.host != me.host {
            return false;
        }
        if self.boot_id != me.boot_id {
            return reboot_counts;
        }
        if self.pid_namespace.is_empty()
            || self.start_time.is_empty()
            || self.pid_namespace != me.pid_namespace
        {
            return false;
        }
        match probe(self.pid) {
            None => true,
            Some(start) => start.is_some_and(|s| s != self.start_time),
        }
    }
}

/// The live process with `pid`, and its start time when known.
fn probe(pid: u32) -> Option<Option<String>> {
    sys::process_alive(pid).then(|| sys::process_start_ticks(&pid.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_provably_dead_owner_is_gone() {
        let me = Owner::this_process();
        let owner = |f: &dyn Fn(&mut Owner)| {
            let mut o = Owner {
                pid: 4242,
                start_time: "100".into(),
                ..me.clone()
            };
            f(&mut o);
            o
        };
        let alive: Probe = &|_| Some(Some("100".to_string()));
        let dead: Probe = &|_| None;
        let gone = |o: &Owner, probe: Probe| o.gone_as_seen_by(&me, probe, false);
        assert!(!gone(&owner(&|_| {}), alive));
        assert!(gone(&owner(&|_| {}), dead));
        assert!(
            gone(&owner(&|o| o.start_time = "99".into()), alive),
            "pid reused"
        );
        for foreign in [
            owner(&|o| o.host = "elsewhere".into()),
            owner(&|o| o.pid_namespace = "pid:[1]".into()),
            owner(&|o| o.pid_namespace = String::new()),
            owner(&|o| o.start_time = String::new()),
            owner(&|o| o.boot_id = "earlier-boot".into()),
        ] {
            assert!(!gone(&foreign, dead), "{foreign:?}");
        }
        let rebooted = owner(&|o| o.boot_id = "earlier-boot".into());
        assert!(
            rebooted.gone_as_seen_by(&me, alive, true),
            "a reboot ends every owner"
        );
        assert!(
            !owner(&|o| o.host = "elsewhere".into()).gone_as_seen_by(&me, dead, true),
            "another host's boots say nothing"
        );
        assert!(!me.is_gone() && !me.is_gone_or_rebooted());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let reaped = Owner {
            pid: child.id(),
            ..me.clone()
        };
        child.wait().unwrap();
        assert!(reaped.is_gone(), "a reaped child is gone");
    }
}
