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

use super::daemon::call;
use super::docker_cli::{Output, last_lines};
use super::host::{HEALTH, Target};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;

pub const LABEL_TASK: &str = agent_runner_settings::labels::TASK;
pub(crate) const LABEL_OWNER_PID: &str = agent_runner_settings::labels::OWNER_PID;
pub(crate) const LABEL_OWNER_START: &str = agent_runner_settings::labels::OWNER_START;
pub(crate) const LABEL_OWNER_HOST: &str = agent_runner_settings::labels::OWNER_HOST;
pub(crate) const LABEL_OWNER_BOOT: &str = agent_runner_settings::labels::OWNER_BOOT;
pub(crate) const LABEL_OWNER_PIDNS: &str = agent_runner_settings::labels::OWNER_PIDNS;
/// Unix seconds after which a container or volume of ours is a leftover whoever
/// owns it (SPEC §22); the lifeline's helper ends its sandbox then too.
pub const LABEL_EXPIRES: &str = agent_runner_settings::labels::EXPIRES;
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

/// Which leftovers a sweep removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// At start: what a provably dead owner left, and anything whose expiry passed
    /// (whoever owns it: the helper has ended its sandbox by then).
    AtStart,
    /// While the orchestrator runs (a host's health re-check): only what is both
    /// expired and left by a provably dead owner, so no run can lose its sandbox.
    WhileRunning,
}

/// Removes the local daemon's orphaned containers, then volumes, each docker call
/// within `deadline`: their names (`volume <name>` for a volume). One listing call
/// each (`listing_line`). A sweep that cannot run says so in the log.
pub(crate) fn remove_orphans(deadline: Duration) -> Vec<String> {
    let docker = |args: &[&str]| call(args, deadline, Interrupt::never());
    let filter = format!("label={LABEL_TASK}");
    let (removed, failed) = sweep(&docker, &filter, Rule::AtStart);
    if let Some(why) = failed {
        log::error!("start-up sweep of orphaned containers and volumes did not run: {why}");
    }
    removed
}

/// Removes the local daemon's containers of tools-volume fills (`tools.rs`) whose
/// owner is dead or whose expiry passed: a fill killed mid-way leaves its created
/// container. Their names.
pub(crate) fn remove_fill_leftovers(deadline: Duration) -> Vec<String> {
    let docker = |args: &[&str]| call(args, deadline, Interrupt::never());
    let filter = format!(
        "label={}={}",
        agent_runner_settings::labels::TOOLS,
        agent_runner_settings::labels::TOOLS_FILL
    );
    let (removed, failed) = sweep(&docker, &filter, Rule::AtStart);
    if let Some(why) = failed {
        log::warn!("the sweep of killed tools-volume fills did not run: {why}");
    }
    removed
}

/// `ps`'s format: the ID, the name and the labels as JSON, tab-separated; a format
/// podman understands too (its `ps` knows no `.Label`, Docker's `.Labels` is no map,
/// but both print `json .Labels`). A volume's name stands for its ID.
const CONTAINERS: &str = "{{.ID}}\t{{.Names}}\t{{json .Labels}}";
const VOLUMES: &str = "{{.Name}}\t{{.Name}}\t{{json .Labels}}";

/// `inspect`'s format, as `orphan` reads it: `ID NAME PID START HOST BOOT PIDNS
/// EXPIRES` (`id`: the field that names the thing, `labels`: where its labels are;
/// a label it lacks prints empty, the zero value of `index` on a map).
fn inspect_format(id: &str, labels: &str) -> String {
    let mut format = format!("{{{{{id}}}}}\t{{{{.Name}}}}");
    for label in OWNER_LABELS {
        format.push_str(&format!("\t{{{{index {labels} \"{label}\"}}}}"));
    }
    format
}

/// The owner's labels, in the order `orphan` reads them.
const OWNER_LABELS: [&str; 6] = [
    LABEL_OWNER_PID,
    LABEL_OWNER_START,
    LABEL_OWNER_HOST,
    LABEL_OWNER_BOOT,
    LABEL_OWNER_PIDNS,
    LABEL_EXPIRES,
];

/// A listing's line (`CONTAINERS`, `VOLUMES`) as `orphan` reads it: `ID NAME PID
/// START HOST BOOT PIDNS EXPIRES`, tab-separated, a label it lacks empty. Docker
/// prints the labels as one string `k=v,k=v`, podman as an object. None when the
/// line is not one, or names one of the owner's labels twice (the string form
/// cannot tell a value's comma from the next label's): such a thing is left alone.
fn listing_line(line: &str) -> Option<String> {
    let mut fields = line.splitn(3, '\t');
    let (id, name, labels) = (fields.next()?, fields.next()?, fields.next()?);
    let labels: serde_json::Value = serde_json::from_str(labels).ok()?;
    let mut out = format!("{id}\t{name}");
    for key in OWNER_LABELS {
        let value = match &labels {
            serde_json::Value::Object(map) => map.get(key).and_then(|v| v.as_str()),
            serde_json::Value::String(joined) => {
                let mut values = joined
                    .split(',')
                    .filter_map(|pair| pair.split_once('='))
                    .filter(|(k, _)| *k == key)
                    .map(|(_, v)| v);
                let value = values.next();
                if values.next().is_some() {
                    return None;
                }
                value
            }
            _ => None,
        };
        out.push('\t');
        out.push_str(value.unwrap_or(""));
    }
    Some(out)
}

/// `(id, name)` of a `listing_line` that `rule` takes.
pub(crate) fn orphan(line: &str, rule: Rule) -> Option<(&str, &str)> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [id, name, pid, start, host, boot, pidns, expires] = fields[..] else {
        return None;
    };
    let expired = expired(expires);
    if expired && rule == Rule::AtStart {
        return Some((id, name));
    }
    if !expired && rule == Rule::WhileRunning {
        return None;
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

/// The deadline of a host's sweep's removal of one container or volume.
const SWEEP_REMOVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether an `agent-runner.expires` value is in the past.
fn expired(expires: &str) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    expires.parse::<u64>().is_ok_and(|at| at < now)
}

/// Removes the leftovers on host `target` (SPEC §22): containers and volumes
/// labelled `agent-runner.task` that `rule` takes. Only ours, by label; their
/// names (`volume <name>` for a volume).
pub fn sweep_host(target: &Target, rule: Rule) -> Vec<String> {
    // A removal gets longer than a health check: a busy daemon may take seconds
    // to remove a container, and one cut short is removed but not reported. The
    // listings keep the health check's, so that a host that stops answering holds
    // the orchestrator's start for seconds, not minutes.
    let docker = |args: &[&str]| {
        let removal = args.first() == Some(&"rm") || args.get(..2) == Some(&["volume", "rm"][..]);
        let deadline = if removal { SWEEP_REMOVAL } else { HEALTH };
        target.docker(args, deadline, Interrupt::never())
    };
    let (removed, failed) = sweep(&docker, &format!("label={LABEL_TASK}"), rule);
    if let Some(why) = failed {
        log::warn!("the sweep of {target} did not run through: {why}");
    }
    removed
}

/// Why a listing of the sweep failed: docker's call (`E`), or docker's answer.
#[derive(Debug, thiserror::Error)]
enum ListingError<E> {
    #[error("{0}")]
    Call(E),
    /// `command`: its first two arguments; `stderr`: its last lines.
    #[error("`docker {command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
}

/// One daemon's sweep through `docker` (a call to it): the containers listed by
/// `filter` that `rule` takes removed, then the volumes. Their names, and why a
/// listing failed, if one did (what could be listed is swept all the same).
fn sweep<E>(
    docker: &dyn Fn(&[&str]) -> Result<Output, E>,
    filter: &str,
    rule: Rule,
) -> (Vec<String>, Option<ListingError<E>>) {
    let listed = |args: &[&str]| -> Result<Vec<String>, ListingError<E>> {
        match docker(args) {
            Ok(out) if out.ok => Ok(out.stdout.lines().map(str::to_string).collect()),
            Ok(out) => Err(ListingError::Failed {
                command: args[..2].join(" "),
                stderr: last_lines(&out.stderr, 2),
            }),
            Err(e) => Err(ListingError::Call(e)),
        }
    };
    // The listing picks the candidates, one call whatever else runs there; each
    // candidate is read again exactly before it goes (`inspect`), since Docker's
    // joined labels cannot tell a value's comma from the next label (an image's
    // label `x,agent-runner.expires=1` would make a live container look expired).
    // What went in between is not reported as removed.
    let mut removed = Vec::new();
    let mut failed = None;
    let candidates = |lines: Vec<String>| -> Vec<String> {
        lines
            .iter()
            .filter_map(|line| listing_line(line))
            .filter_map(|line| orphan(&line, rule).map(|(id, _)| id.to_string()))
            .collect()
    };
    // `(id, name)` of the candidates that `inspect` confirms.
    let exactly = |inspect: &[&str], ids: &[String]| -> Vec<(String, String)> {
        let mut args = inspect.to_vec();
        args.extend(ids.iter().map(String::as_str));
        let out = docker(&args).map(|o| o.stdout).unwrap_or_default();
        out.lines()
            .filter_map(|line| orphan(line, rule))
            .map(|(id, name)| (id.to_string(), name.to_string()))
            .collect()
    };
    let containers = [
        "ps",
        "-a",
        "--no-trunc",
        "--filter",
        filter,
        "--format",
        CONTAINERS,
    ];
    match listed(&containers).map(candidates) {
        Ok(ids) if !ids.is_empty() => {
            let format = inspect_format(".Id", ".Config.Labels");
            for (id, name) in exactly(
                &["inspect", "--type", "container", "--format", &format],
                &ids,
            ) {
                if docker(&["rm", "-f", &id]).is_ok_and(|o| o.ok) {
                    removed.push(name.trim_start_matches('/').to_string());
                }
            }
        }
        Ok(_) => {}
        Err(e) => failed = Some(e),
    }
    match listed(&["volume", "ls", "--filter", filter, "--format", VOLUMES]).map(candidates) {
        Ok(names) if !names.is_empty() => {
            let format = inspect_format(".Name", ".Labels");
            for (name, _) in exactly(&["volume", "inspect", "--format", &format], &names) {
                if docker(&["volume", "rm", "-f", &name]).is_ok_and(|o| o.ok) {
                    removed.push(format!("volume {name}"));
                }
            }
        }
        Ok(_) => {}
        Err(e) => failed = failed.or(Some(e)),
    }
    (removed, failed)
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

    /// An owner that has ended: a child of this process, waited for.
    fn dead_owner() -> Owner {
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = Owner::child(gone.id());
        gone.wait().unwrap();
        dead
    }

    #[test]
    fn only_lines_naming_a_dead_owner_of_ours_are_orphans() {
        let me = Owner::this_process();
        let dead = dead_owner();
        assert_eq!(orphan(&line(&dead), Rule::AtStart), Some(("id1", "name1")));
        assert_eq!(orphan(&line(&me), Rule::AtStart), None);
        let other_ns = Owner {
            pid_namespace: "pid:[4026532999]".into(),
            ..dead.clone()
        };
        assert_eq!(orphan(&line(&other_ns), Rule::AtStart), None);
        // Labels of an older agent-runner (no boot or namespace): left alone.
        assert_eq!(
            orphan(
                &format!("id1\tname1\t{}\t\t{}\t\t\t", dead.pid, dead.host),
                Rule::AtStart
            ),
            None
        );
        // Expired: a leftover whoever owns it; not yet expired: the owner decides.
        assert_eq!(
            orphan(&format!("{}1", line(&me)), Rule::AtStart),
            Some(("id1", "name1"))
        );
        let later = expiry_label(Duration::from_secs(3600)).1;
        assert_eq!(
            orphan(&format!("{}{later}", line(&me)), Rule::AtStart),
            None
        );
        assert_eq!(orphan("garbage", Rule::AtStart), None);
        // A task's session volume (no owner: it outlives its run) goes at its expiry
        // only.
        assert_eq!(
            orphan(&format!("v\tv\t\t\t\t\t\t{later}"), Rule::AtStart),
            None
        );
        assert_eq!(orphan("v\tv\t\t\t\t\t\t1", Rule::AtStart), Some(("v", "v")));
    }

    #[test]
    fn a_listing_reads_dockers_joined_labels_and_podmans_object_alike() {
        let docker = "abc\tname1\t\"agent-runner.owner-host=h,agent-runner.task=t,agent-runner.owner-pid=12,agent-runner.owner-pidns=pid:[4026531836],agent-runner.expires=99\"";
        let podman = r#"abc	name1	{"agent-runner.owner-pid":"12","agent-runner.task":"t","agent-runner.owner-host":"h","agent-runner.owner-pidns":"pid:[4026531836]","agent-runner.expires":"99"}"#;
        let read = "abc\tname1\t12\t\th\t\tpid:[4026531836]\t99";
        assert_eq!(listing_line(docker).as_deref(), Some(read));
        assert_eq!(listing_line(podman).as_deref(), Some(read));
        // No labels at all: every field empty, which `orphan` leaves alone.
        for none in ["v\tv\t\"\"", "v\tv\t{}", "v\tv\tnull"] {
            assert_eq!(
                listing_line(none).as_deref(),
                Some("v\tv\t\t\t\t\t\t"),
                "{none}"
            );
        }
        // An owner's label twice in the joined form (a value with a comma in it
        // could make one): which is meant cannot be told, so it is left alone.
        let twice = "abc\tn\t\"agent-runner.owner-pid=12,x=a,agent-runner.owner-pid=13\"";
        assert_eq!(listing_line(twice), None);
        // What a candidate is read again with before it goes.
        assert!(inspect_format(".Id", ".Config.Labels").starts_with(
            "{{.Id}}\t{{.Name}}\t{{index .Config.Labels \"agent-runner.owner-pid\"}}\t"
        ));
        for garbage in ["", "abc", "abc\tn", "abc\tn\tnot json", "abc\tn\t[1]"] {
            let line = listing_line(garbage);
            assert!(
                line.as_deref()
                    .is_none_or(|l| orphan(l, Rule::AtStart).is_none()),
                "{garbage:?}: {line:?}"
            );
        }
    }

    #[test]
    fn while_running_only_what_is_expired_and_of_a_dead_owner_goes() {
        let me = Owner::this_process();
        let dead = dead_owner();
        let later = expiry_label(Duration::from_secs(3600)).1;
        let rule = Rule::WhileRunning;
        assert_eq!(
            orphan(&format!("{}1", line(&dead)), rule),
            Some(("id1", "name1"))
        );
        // Expired, but its owner runs (or is not provably gone): kept.
        assert_eq!(orphan(&format!("{}1", line(&me)), rule), None);
        let elsewhere = Owner {
            host: "another-machine".into(),
            ..dead.clone()
        };
        assert_eq!(orphan(&format!("{}1", line(&elsewhere)), rule), None);
        // A dead owner's, not expired yet, or without an expiry: kept until then.
        assert_eq!(orphan(&format!("{}{later}", line(&dead)), rule), None);
        assert_eq!(orphan(&line(&dead), rule), None);
    }
}
