//! Defence in depth against leaked containers: at start-up, remove containers
//! labelled `agent-runner.task` whose owning agent-runner is provably gone (SPEC
//! §6.1, §9). The keep-alive pipe normally removes a container when its owner ends;
//! this catches what that missed (e.g. the daemon was restarting). Never by name
//! (that would kill other users' runs), and a container whose owner labels are
//! missing or name another host, boot or PID namespace is left alone.
//!
//! The labels are every backend's (a Pod carries them too); the listing is
//! Docker's (`Docker::sweep_orphans`).

use std::time::Duration;

use super::docker_cli::{call, remove_container};
use super::{Backend, Docker};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;

pub const LABEL_TASK: &str = "agent-runner.task";
pub(crate) const LABEL_OWNER_PID: &str = "agent-runner.owner-pid";
pub(crate) const LABEL_OWNER_START: &str = "agent-runner.owner-start";
pub(crate) const LABEL_OWNER_HOST: &str = "agent-runner.owner-host";
pub(crate) const LABEL_OWNER_BOOT: &str = "agent-runner.owner-boot";
pub(crate) const LABEL_OWNER_PIDNS: &str = "agent-runner.owner-pidns";

/// The owner labels of a container started by `owner`.
pub fn owner_labels(owner: &Owner) -> [(&'static str, String); 5] {
    [
        (LABEL_OWNER_PID, owner.pid.to_string()),
        (LABEL_OWNER_START, owner.start_time.clone()),
        (LABEL_OWNER_HOST, owner.host.clone()),
        (LABEL_OWNER_BOOT, owner.boot_id.clone()),
        (LABEL_OWNER_PIDNS, owner.pid_namespace.clone()),
    ]
}

/// Removes orphaned containers of the local Docker; returns their names.
pub fn sweep_orphans() -> Vec<String> {
    Docker::default().sweep_orphans()
}

/// Removes orphaned containers, each docker call within `deadline`; their names.
pub(crate) fn remove_orphans(deadline: Duration) -> Vec<String> {
    let labels = [
        LABEL_OWNER_PID,
        LABEL_OWNER_START,
        LABEL_OWNER_HOST,
        LABEL_OWNER_BOOT,
        LABEL_OWNER_PIDNS,
    ];
    let mut format = "{{.ID}}\t{{.Names}}".to_string();
    for label in labels {
        format.push_str(&format!("\t{{{{.Label \"{label}\"}}}}"));
    }
    let filter = format!("label={LABEL_TASK}");
    let Ok(out) = call(
        &["ps", "-a", "--filter", &filter, "--format", &format],
        deadline,
        Interrupt::never(),
    ) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for line in out.stdout.lines() {
        if let Some((id, name)) = orphan(line)
            && remove_container(id, deadline)
        {
            removed.push(name.to_string());
        }
    }
    removed
}

/// `(id, name)` of a `docker ps` line whose owner is gone.
fn orphan(line: &str) -> Option<(&str, &str)> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [id, name, pid, start, host, boot, pidns] = fields[..] else {
        return None;
    };
    let owner = Owner {
        pid: pid.parse().ok()?,
        start_time: start.to_string(),
        host: host.to_string(),
        boot_id: boot.to_string(),
        pid_namespace: pidns.to_string(),
    };
    owner.is_gone().then_some((id, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(owner: &Owner) -> String {
        format!(
            "id1\tname1\t{}\t{}\t{}\t{}\t{}",
            owner.pid, owner.start_time, owner.host, owner.boot_id, owner.pid_namespace
        )
    }

    #[test]
    fn only_lines_naming_a_dead_owner_of_ours_are_orphans() {
        let me = Owner::this_process();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = Owner {
            pid: gone.id(),
            ..me.clone()
        };
        gone.wait().unwrap();
        assert_eq!(orphan(&line(&dead)), Some(("id1", "name1")));
        assert_eq!(orphan(&line(&me)), None);
        let other_ns = Owner {
            pid_namespace: "pid:[4026532999]".into(),
            ..dead.clone()
        };
        assert_eq!(orphan(&line(&other_ns)), None);
        // Labels of an older agent-runner (no boot or namespace): left alone.
        assert_eq!(
            orphan(&format!("id1\tname1\t{}\t\t{}\t\t", dead.pid, dead.host)),
            None
        );
        assert_eq!(orphan("garbage"), None);
    }
}
