//! A host by name (SPEC §22 "Hosts"): `hosts:` in workspace defaults (`host_entry.rs`),
//! `orchestrate --host NAME=URL[:SLOTS]`, `runner.sandbox.host`. Where its sandboxes
//! run is a `Target` of its engine (`Target::parse`, `engines.rs`): a Docker
//! daemon's URL or context (`docker_target.rs`), a cluster (`kubernetes/cluster.rs`);
//! every call made for it carries that in its environment (`Target::apply`), never
//! in an argv.

use std::time::Duration;

/// The health check of a host: `docker version` within this (SPEC §22).
pub const HEALTH: Duration = Duration::from_secs(5);
/// Most slots a host may have.
const MAX_SLOTS: usize = 64;

pub use super::target::{Target, TargetError};

/// What is wrong with a host, named by where it was written (`at`: `hosts[0]`,
/// `--host NAME=…`, or a field under them).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{at}: expected NAME=URL[:SLOTS]")]
    NoName { at: String },
    #[error("{at}.name: {name:?} is named twice")]
    NamedTwice { at: String, name: String },
    #[error("{at}.slots: {slots}: must be between 1 and {MAX_SLOTS}")]
    Slots { at: String, slots: usize },
    /// An entry with no engine's key; `engines` says each key and what it holds.
    #[error("{at}: neither {engines}")]
    NoEngine { at: String, engines: String },
    #[error("{at}: both {first} and {second}: a host is one or the other")]
    TwoEngines {
        at: String,
        first: &'static str,
        second: &'static str,
    },
    /// The field at `at` as what reads it found it wrong (a host's name, its
    /// target, an engine's entry).
    #[error("{at}: {error}")]
    Field {
        at: String,
        error: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl HostError {
    /// The field at `at`, wrong as `error` says.
    pub fn field(
        at: impl Into<String>,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> HostError {
        HostError::Field {
            at: at.into(),
            error: Box::new(error),
        }
    }
}

/// A runner's host when its task names none (`runner.sandbox.host`): set by the
/// orchestrator for a cluster, whose target no docker variable can carry.
pub const SANDBOX_HOST_VAR: &str = "AGENT_RUNNER_SANDBOX_HOST";

/// A host of the pool: its name, its daemon, how many attempts it runs at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    pub name: String,
    pub target: Target,
    pub slots: usize,
}

impl HostSpec {
    /// A host entry, checked; errors name the field (`at` is the entry's path).
    pub fn new(at: &str, name: &str, docker: &str, slots: usize) -> Result<HostSpec, HostError> {
        HostSpec::checked(at, name, slots, || {
            Target::parse(docker).map_err(|e| HostError::field(format!("{at}.docker"), e))
        })
    }

    /// A host named `name` with `slots` whose target `target` reads, checked in
    /// that order; errors name the field under `at`.
    pub(crate) fn checked(
        at: &str,
        name: &str,
        slots: usize,
        target: impl FnOnce() -> Result<Target, HostError>,
    ) -> Result<HostSpec, HostError> {
        check_name(name).map_err(|e| HostError::field(format!("{at}.name"), e))?;
        let target = target()?;
        if !(1..=MAX_SLOTS).contains(&slots) {
            return Err(HostError::Slots {
                at: at.to_string(),
                slots,
            });
        }
        Ok(HostSpec {
            name: name.to_string(),
            target,
            slots,
        })
    }

    /// `NAME=URL[:SLOTS]` of `--host`. SLOTS is the number after the last colon when
    /// the address still reads whole without it: after a tcp:// or ssh:// address's
    /// port, a unix socket's path or a context's name. Default 1.
    pub fn parse_flag(flag: &str) -> Result<HostSpec, HostError> {
        let at = format!("--host {flag}");
        let Some((name, address)) = flag.split_once('=') else {
            return Err(HostError::NoName { at });
        };
        let (docker, slots) = split_slots(address).map_err(|e| HostError::field(&at, e))?;
        HostSpec::new(&at, name, docker, slots)
    }
}

/// The SLOTS of `URL[:SLOTS]`, all digits, but too large a number.
#[derive(Debug, thiserror::Error)]
#[error("slots {0:?}: not a number")]
struct SlotsNotANumber(String);

/// A host's name that `check_name` refuses.
#[derive(Debug, thiserror::Error)]
#[error("{0:?}: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit")]
struct BadName(String);

/// `(address, slots)` of `URL[:SLOTS]`.
fn split_slots(address: &str) -> Result<(&str, usize), SlotsNotANumber> {
    let Some((before, last)) = address.rsplit_once(':') else {
        return Ok((address, 1));
    };
    if last.is_empty() || !last.chars().all(|c| c.is_ascii_digit()) {
        return Ok((address, 1));
    }
    let slots_follow = match address.split_once("://") {
        // tcp://host:PORT[:SLOTS], ssh://user@host[:PORT][:SLOTS]: a second number
        // after the authority's host is SLOTS; tcp needs its port, ssh a port only
        // when it has two numbers.
        Some(("tcp", rest)) => rest.matches(':').count() >= 2 && !rest.starts_with('['),
        Some(("ssh", rest)) => rest.matches(':').count() >= 2 && !rest.starts_with('['),
        Some(_) => true,
        None => true,
    };
    if !slots_follow || before.ends_with("//") {
        return Ok((address, 1));
    }
    let slots = last
        .parse::<usize>()
        .map_err(|_| SlotsNotANumber(last.to_string()))?;
    Ok((before, slots))
}

/// A host's name: [A-Za-z0-9][A-Za-z0-9._-]{0,63}, shown in lines and tables.
fn check_name(name: &str) -> Result<(), BadName> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(BadName(name.to_string()))
    }
}

/// Checks a pool: names unique (the second of two is named by `at(index)`).
pub fn check_pool(hosts: &[HostSpec], at: impl Fn(usize) -> String) -> Result<(), HostError> {
    for (i, host) in hosts.iter().enumerate() {
        if hosts[..i].iter().any(|h| h.name == host.name) {
            return Err(HostError::NamedTwice {
                at: at(i),
                name: host.name.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_core::interrupt::Interrupt;
    use agent_runner_core::process::Invocation;

    /// What the code above asks a target by its engine, never by its kind: a
    /// cluster cannot be asked for an image beforehand (nor makes a docker call for
    /// it) and keeps no session a resumed run must go back to; a daemon does.
    #[test]
    fn each_engine_answers_for_its_own_targets() {
        use super::super::engine::{ImageAnswer, PullError};
        let cluster = Target::parse("k8s://prod/agents").unwrap();
        let never = Interrupt::never();
        let soon = Duration::from_secs(1);
        assert_eq!(
            cluster.has_image("img", soon, never),
            ImageAnswer::CannotTell
        );
        let e = cluster.pull("img", soon, never).unwrap_err();
        assert!(
            matches!(&e, PullError::Refused(why) if why.contains("pulls images itself")),
            "{e}"
        );
        assert!(!cluster.pins_sessions());
        assert!(!cluster.tells_images());
        // A daemon is asked: one that cannot be reached proves nothing.
        let daemon = Target::parse("unix:///nonexistent/agent-runner.sock").unwrap();
        assert!(daemon.pins_sessions());
        assert!(daemon.tells_images());
        assert_eq!(daemon.has_image("img", soon, never), ImageAnswer::NoAnswer);
    }

    #[test]
    fn a_cluster_target_names_its_context_and_namespace() {
        let target = Target::parse("k8s://prod/agents").unwrap();
        let cluster = target.cluster().unwrap();
        assert_eq!((&*cluster.context, &*cluster.namespace), ("prod", "agents"));
        assert_eq!(target.to_string(), "k8s://prod/agents");
        let h = HostSpec::parse_flag("c=k8s://prod/agents:3").unwrap();
        assert_eq!((h.target.cluster().is_some(), h.slots), (true, 3));
        let e = HostSpec::parse_flag("c=k8s://prod/Agents:2")
            .unwrap_err()
            .to_string();
        assert!(e.contains("namespace \"Agents\": 1 to 63"), "{e}");
    }

    #[test]
    fn a_cluster_runner_is_told_its_entrys_settings_in_its_environment() {
        use agent_runner_core::process::{self, Capture, Limits, Stop};
        let mut cluster = super::super::kubernetes::Cluster::new("c", "n", None).unwrap();
        cluster.schedule_timeout_sec = Some(7);
        cluster.session_storage_class = Some("fast-ssd".into());
        let invocation = Target::new(cluster).apply(Invocation::new("/bin/sh").args([
            "-c",
            "echo \"$AGENT_RUNNER_SANDBOX_HOST $AGENT_RUNNER_K8S_SCHEDULE_TIMEOUT_SEC $AGENT_RUNNER_K8S_SESSION_STORAGE_CLASS\"",
        ]));
        let mut capture = Capture::in_memory(1024);
        let finished = process::run(
            &invocation,
            &Limits::wall(Duration::from_secs(10), Interrupt::never()),
            &mut capture,
            Stop::Terminate,
        )
        .unwrap();
        assert!(finished.success());
        assert_eq!(capture.tail().trim(), "k8s://c/n 7 fast-ssd");
    }

    #[test]
    fn host_flags_read_name_address_and_slots() {
        let h = HostSpec::parse_flag("a=tcp://127.0.0.5:2375:3").unwrap();
        assert_eq!(h.name, "a");
        assert_eq!(h.target, Target::docker_url("tcp://127.0.0.5:2375"));
        assert_eq!(h.slots, 3);
        let h = HostSpec::parse_flag("b=tcp://127.0.0.5:2375").unwrap();
        assert_eq!(
            (h.target, h.slots),
            (Target::docker_url("tcp://127.0.0.5:2375"), 1)
        );
        let h = HostSpec::parse_flag("c=ssh://me@build.example:2").unwrap();
        assert_eq!(
            (h.target, h.slots),
            (Target::docker_url("ssh://me@build.example:2"), 1),
            "one number after an ssh host is its port"
        );
        let h = HostSpec::parse_flag("c=ssh://me@build.example:22:4").unwrap();
        assert_eq!(h.slots, 4);
        let h = HostSpec::parse_flag("l=unix:///var/run/docker.sock:2").unwrap();
        assert_eq!(h.target, Target::docker_url("unix:///var/run/docker.sock"));
        assert_eq!(h.slots, 2);
        let h = HostSpec::parse_flag("ci=ci-box:5").unwrap();
        assert_eq!((h.target, h.slots), (Target::docker_context("ci-box"), 5));
    }

    #[test]
    fn bad_host_flags_say_what_is_wrong() {
        let err = |flag: &str| HostSpec::parse_flag(flag).unwrap_err().to_string();
        assert!(err("nohost").contains("expected NAME=URL[:SLOTS]"));
        assert!(err("=tcp://127.0.0.1:2375").contains(".name:"));
        assert!(err("a b=tcp://127.0.0.1:2375").contains(".name:"));
        assert!(err("a=tcp://127.0.0.1:2375:0").contains(".slots: 0"));
        assert!(err("a=tcp://127.0.0.1:2375:65").contains(".slots: 65"));
        assert!(err("a=http://x:1").contains("scheme"));
        let refused = err("a=tcp://10.0.0.1:2375:2");
        assert!(refused.contains("plain tcp://"), "{refused}");
        assert!(refused.contains("ssh://"), "{refused}");
        assert!(err("a=").contains("empty"));
        assert!(err("a=bad/ctx").contains("neither a URL"));
    }

    #[test]
    fn a_pool_names_each_host_once() {
        let a = HostSpec::parse_flag("a=tcp://127.0.0.1:2375").unwrap();
        let err = check_pool(&[a.clone(), a], |i| format!("hosts[{i}]"))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "hosts[1].name: \"a\" is named twice");
    }

    #[test]
    fn a_target_goes_in_the_environment() {
        let inv =
            Target::docker_url("tcp://127.0.0.9:2375").apply(Invocation::new("docker").arg("ps"));
        let shown = format!("{inv:?}");
        assert!(shown.contains("DOCKER_HOST"), "{shown}");
        assert_eq!(
            inv.display(),
            "docker ps",
            "nothing of the host in the argv"
        );
    }
}
