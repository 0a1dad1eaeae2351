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

use super::docker_cli::{call, last_lines, remove_container};
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
/// The listing is `ps -q` then `inspect` with `index .Config.Labels`, formats podman
/// understands too (its `ps` knows no `.Label`). A sweep that cannot run says so in
/// the log.
pub(crate) fn remove_orphans(deadline: Duration) -> Vec<String> {
    let filter = format!("label={LABEL_TASK}");
    let listed = call(
        &["ps", "-a", "-q", "--no-trunc", "--filter", &filter],
        deadline,
        Interrupt::never(),
    );
    let ids: Vec<String> = match listed {
        Ok(out) if out.ok => out.stdout.split_whitespace().map(str::to_string).collect(),
        Ok(out) => {
            log::error!(
                "start-up sweep of orphaned containers did not run: `docker ps` failed: {}",
                last_lines(&out.stderr, 2)
            );
            return Vec::new();
        }
        Err(e) => {
            log::error!("start-up sweep of orphaned containers did not run: {e}");
            return Vec::new();
        }
    };
    if ids.is_empty() {
        return Vec::new();
    }
    let mut args = vec!["inspect", "--type", "container", "--format"];
    let format = inspect_format();
    args.push(&format);
    args.extend(ids.iter().map(String::as_str));
    let out = match call(&args, deadline, Interrupt::never()) {
        Ok(out) => out,
        Err(e) => {
            log::error!("start-up sweep of orphaned containers did not run: {e}");
            return Vec::new();
        }
    };
    // A container may go between `ps` and `inspect`: the others are still printed.
    if !out.ok && out.stdout.trim().is_empty() {
        log::error!(
            "start-up sweep of orphaned containers did not run: `docker inspect` failed: {}",
            last_lines(&out.stderr, 2)
        );
        return Vec::new();
    }
    let mut removed = Vec::new();
    for line in out.stdout.lines() {
        if let Some((id, name)) = orphan(line)
            && remove_container(id, deadline)
        {
            removed.push(name.trim_start_matches('/').to_string());
        }
    }
    removed
}

/// Removes the volumes of dead owners (the copy transport's, SPEC §22), after their
/// containers: `volume <name>` for each.
pub(crate) fn remove_orphan_volumes(deadline: Duration) -> Vec<String> {
    let filter = format!("label={LABEL_TASK}");
    let names: Vec<String> = match call(
        &["volume", "ls", "-q", "--filter", &filter],
        deadline,
        Interrupt::never(),
    ) {
        Ok(out) if out.ok => out.stdout.split_whitespace().map(str::to_string).collect(),
        Ok(out) => {
            log::error!(
                "start-up sweep of orphaned volumes did not run: {}",
                last_lines(&out.stderr, 2)
            );
            return Vec::new();
        }
        Err(e) => {
            log::error!("start-up sweep of orphaned volumes did not run: {e}");
            return Vec::new();
        }
    };
    if names.is_empty() {
        return Vec::new();
    }
    let format = inspect_format()
        .replace("{{.Id}}\t{{.Name}}", "{{.Name}}\t{{.Name}}")
        .replace(".Config.Labels", ".Labels");
    let mut args = vec!["volume", "inspect", "--format", &format];
    args.extend(names.iter().map(String::as_str));
    let Ok(out) = call(&args, deadline, Interrupt::never()) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for line in out.stdout.lines() {
        if let Some((name, _)) = orphan(line) {
            let gone = call(&["volume", "rm", "-f", name], deadline, Interrupt::never());
            if gone.is_ok_and(|o| o.ok) {
                removed.push(format!("volume {name}"));
            }
        }
    }
    removed
}

/// `ID NAME PID START HOST BOOT PIDNS`, tab-separated; a label a container lacks
/// prints empty (the zero value of `index` on a map).
fn inspect_format() -> String {
    let labels = [
        LABEL_OWNER_PID,
        LABEL_OWNER_START,
        LABEL_OWNER_HOST,
        LABEL_OWNER_BOOT,
        LABEL_OWNER_PIDNS,
    ];
    let mut format = "{{.Id}}\t{{.Name}}".to_string();
    for label in labels {
        format.push_str(&format!("\t{{{{index .Config.Labels \"{label}\"}}}}"));
    }
    format
}

/// `(id, name)` of an `inspect_format` line whose owner is gone.
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
