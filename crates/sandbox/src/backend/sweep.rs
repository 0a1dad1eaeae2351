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
use super::host::{HEALTH, Target};
use super::{Backend, Docker};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;

pub const LABEL_TASK: &str = "agent-runner.task";
pub(crate) const LABEL_OWNER_PID: &str = "agent-runner.owner-pid";
pub(crate) const LABEL_OWNER_START: &str = "agent-runner.owner-start";
pub(crate) const LABEL_OWNER_HOST: &str = "agent-runner.owner-host";
pub(crate) const LABEL_OWNER_BOOT: &str = "agent-runner.owner-boot";
pub(crate) const LABEL_OWNER_PIDNS: &str = "agent-runner.owner-pidns";
/// Unix seconds after which a container or volume of ours is a leftover whoever
/// owns it (SPEC §22); the lifeline's helper ends its sandbox then too.
pub const LABEL_EXPIRES: &str = "agent-runner.expires";
/// How long a sandbox may live: far beyond any run's bounds.
pub const LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// The expiry label of something made now that lives at most `within`.
pub fn expiry_label(within: Duration) -> (&'static str, String) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (LABEL_EXPIRES, (now + within).as_secs().to_string())
}

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
        LABEL_EXPIRES,
    ];
    let mut format = "{{.Id}}\t{{.Name}}".to_string();
    for label in labels {
        format.push_str(&format!("\t{{{{index .Config.Labels \"{label}\"}}}}"));
    }
    format
}

/// `(id, name)` of an `inspect_format` line whose owner is gone or whose expiry
/// passed.
fn orphan(line: &str) -> Option<(&str, &str)> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [id, name, pid, start, host, boot, pidns, expires] = fields[..] else {
        return None;
    };
    if expired(expires) {
        return Some((id, name));
    }
    let owner = Owner {
        pid: pid.parse().ok()?,
        start_time: start.to_string(),
        host: host.to_string(),
        boot_id: boot.to_string(),
        pid_namespace: pidns.to_string(),
    };
    owner.is_gone().then_some((id, name))
}

/// Whether an `agent-runner.expires` value is in the past.
fn expired(expires: &str) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    expires.parse::<u64>().is_ok_and(|at| at < now)
}

/// Removes the leftovers on host `target` (SPEC §22): containers and volumes
/// labelled `agent-runner.task` whose owner is provably gone from this machine or
/// whose expiry passed. Only ours, by label; their names.
pub fn sweep_host(target: &Target) -> Vec<String> {
    let deadline = HEALTH;
    let call = |args: &[&str]| {
        target
            .docker(args, deadline, Interrupt::never())
            .ok()
            .filter(|o| o.ok)
    };
    let filter = format!("label={LABEL_TASK}");
    let format = inspect_format();
    let mut removed = Vec::new();
    let listed = call(&["ps", "-a", "-q", "--no-trunc", "--filter", &filter]);
    let ids: Vec<String> = listed
        .map(|o| o.stdout.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    if !ids.is_empty() {
        let mut args = vec!["inspect", "--type", "container", "--format", &format];
        args.extend(ids.iter().map(String::as_str));
        let out = target.docker(&args, deadline, Interrupt::never());
        for line in out.map(|o| o.stdout).unwrap_or_default().lines() {
            if let Some((id, name)) = orphan(line)
                && call(&["rm", "-f", id]).is_some()
            {
                removed.push(name.trim_start_matches('/').to_string());
            }
        }
    }
    let listed = call(&["volume", "ls", "-q", "--filter", &filter]);
    let names: Vec<String> = listed
        .map(|o| o.stdout.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    if !names.is_empty() {
        // A volume's inspect has .Name, not .Id: the name stands for both.
        let format = format.replacen("{{.Id}}\t{{.Name}}", "{{.Name}}\t{{.Name}}", 1);
        let format = format.replace(".Config.Labels", ".Labels");
        let mut args = vec!["volume", "inspect", "--format", &format];
        args.extend(names.iter().map(String::as_str));
        let out = target.docker(&args, deadline, Interrupt::never());
        for line in out.map(|o| o.stdout).unwrap_or_default().lines() {
            if let Some((name, _)) = orphan(line)
                && call(&["volume", "rm", name]).is_some()
            {
                removed.push(name.to_string());
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(owner: &Owner) -> String {
        format!(
            "id1\tname1\t{}\t{}\t{}\t{}\t{}\t",
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
            orphan(&format!("id1\tname1\t{}\t\t{}\t\t\t", dead.pid, dead.host)),
            None
        );
        // Expired: a leftover whoever owns it; not yet expired: the owner decides.
        assert_eq!(orphan(&format!("{}1", line(&me))), Some(("id1", "name1")));
        let later = expiry_label(Duration::from_secs(3600)).1;
        assert_eq!(orphan(&format!("{}{later}", line(&me))), None);
        assert_eq!(orphan("garbage"), None);
        // A task's session volume (no owner: it outlives its run) goes at its expiry
        // only.
        assert_eq!(orphan(&format!("v\tv\t\t\t\t\t\t{later}")), None);
        assert_eq!(orphan("v\tv\t\t\t\t\t\t1"), Some(("v", "v")));
    }
}
