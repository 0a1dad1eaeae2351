//! Who claimed a running job: `ipc/running/<job-id>.owner.json`, written right after
//! the claim. A pid alone is not an identity (pids are reused, and mean something
//! only on one host, in one boot and one PID namespace), so the owner is pid + start
//! time + boot id + host + PID namespace. A job is orphaned only when we can tell for
//! sure that its owner is gone.

use serde::{Deserialize, Serialize};

use crate::sys;
use crate::timestamp::Timestamp;

/// The process that claimed a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: u32,
    /// Clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_time: String,
    pub boot_id: String,
    pub host: String,
    #[serde(default)]
    pub pid_namespace: String,
    #[serde(default)]
    pub claimed_at: String,
}

impl Owner {
    /// This process, claiming now.
    pub fn this_process() -> Owner {
        Owner {
            pid: std::process::id(),
            start_time: sys::process_start_ticks("self").unwrap_or_default(),
            boot_id: sys::boot_id(),
            host: sys::hostname(),
            pid_namespace: sys::pid_namespace(),
            claimed_at: Timestamp::now().to_string(),
        }
    }

    /// True only when this owner is certainly gone: same host, and either another
    /// boot, or (same PID namespace) no process with its pid and start time.
    pub fn is_gone(&self) -> bool {
        self.is_gone_from(&Owner::this_process(), |pid| {
            sys::process_alive(pid).then(|| sys::process_start_ticks(&pid.to_string()))
        })
    }

    /// `is_gone` as seen by `me`; `probe(pid)` is None when no such process lives,
    /// else its start time if known.
    fn is_gone_from(&self, me: &Owner, probe: impl Fn(u32) -> Option<Option<String>>) -> bool {
        if self.host != me.host || self.boot_id.is_empty() {
            return false;
        }
        if self.boot_id != me.boot_id {
            return true;
        }
        if self.pid_namespace != me.pid_namespace {
            return false;
        }
        match probe(self.pid) {
            None => true,
            Some(start) => start.is_some_and(|s| s != self.start_time),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gone_only_when_certain() {
        let me = Owner::this_process();
        let other = |f: &dyn Fn(&mut Owner)| {
            let mut o = me.clone();
            o.pid = 4242;
            f(&mut o);
            o
        };
        let alive = |_| Some(Some("100".to_string()));
        let dead = |_| None;
        let same = other(&|o| o.start_time = "100".into());
        assert!(!same.is_gone_from(&me, alive));
        assert!(same.is_gone_from(&me, dead));
        assert!(
            other(&|o| o.start_time = "99".into()).is_gone_from(&me, alive),
            "pid reused"
        );
        assert!(other(&|o| o.boot_id = "earlier-boot".into()).is_gone_from(&me, alive));
        assert!(!other(&|o| o.host = "elsewhere".into()).is_gone_from(&me, dead));
        assert!(!other(&|o| o.pid_namespace = "pid:[1]".into()).is_gone_from(&me, dead));
        assert!(!me.is_gone(), "this process is alive");
    }
}
