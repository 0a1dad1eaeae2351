//! Who claimed a running job: `ipc/running/<job-id>.owner.json`, written right after
//! the claim: the process (`agent_runner_core::owner::Owner`: pid, start time, host, boot id, PID
//! namespace) and when it claimed; once the runner starts, the runner too. A job is
//! orphaned only when its claimant is certainly gone; a reboot of this host since the
//! claim counts.

use serde::{Deserialize, Serialize};

use agent_runner_core::owner::Owner;
use agent_runner_core::timestamp::Timestamp;

/// The process that claimed a job, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Claimant {
    #[serde(flatten)]
    pub(crate) owner: Owner,
    #[serde(default)]
    pub(crate) claimed_at: String,
    /// The job's runner (`agent-runner run`), once started: what `task stop`
    /// signals (SPEC §19).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) runner: Option<Owner>,
}

impl Claimant {
    /// This process, claiming now.
    pub(crate) fn this_process() -> Claimant {
        Claimant {
            owner: Owner::this_process(),
            claimed_at: Timestamp::now().to_string(),
            runner: None,
        }
    }

    /// True only when the claimant certainly no longer runs.
    pub(crate) fn is_gone(&self) -> bool {
        self.owner.is_gone_or_rebooted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_file_keeps_its_field_names() {
        let claimant = Claimant::this_process();
        let json = serde_json::to_value(&claimant).unwrap();
        for field in [
            "pid",
            "start_time",
            "host",
            "boot_id",
            "pid_namespace",
            "claimed_at",
        ] {
            assert!(json.get(field).is_some(), "{field} in {json}");
        }
        assert!(!claimant.is_gone());
    }
}
