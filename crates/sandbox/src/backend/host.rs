//! A Docker host by name (SPEC §22 "Hosts"): `hosts:` in workspace defaults,
//! `orchestrate --host NAME=URL[:SLOTS]`, `runner.sandbox.host`. Its `docker` is a
//! URL (`unix://`, `tcp://`, `ssh://`) or a docker context's name; every docker call
//! made for it carries that in its environment (`DOCKER_HOST` or `DOCKER_CONTEXT`),
//! never in an argv. Plain `tcp://` beyond the loopback is refused as `endpoint.rs`
//! refuses it: a TLS daemon is named by a context that carries the certificates.

use std::time::Duration;

use super::docker_cli::{self, Output, last_lines};
use super::endpoint::{Endpoint, Source};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{Ending, Invocation};

/// The health check of a host: `docker version` within this (SPEC §22).
pub const HEALTH: Duration = Duration::from_secs(5);
/// Most slots a host may have.
const MAX_SLOTS: usize = 64;

pub use super::target::Target;

/// A runner's host when its task names none (`runner.sandbox.host`): set by the
/// orchestrator for a cluster, whose target no docker variable can carry.
pub const SANDBOX_HOST_VAR: &str = "AGENT_RUNNER_SANDBOX_HOST";

impl Target {
    /// `docker` of a host entry: a URL with a scheme docker knows, or a context name.
    /// Plain `tcp://` beyond the loopback is refused (the fix in the message).
    pub fn parse(docker: &str) -> Result<Target, String> {
        if docker.is_empty() {
            return Err("empty: a URL (unix://, tcp://, ssh://) or a docker context".into());
        }
        if docker.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(format!("{docker:?} has a space or control character"));
        }
        if let Some(cluster) = super::cluster::Cluster::parse(docker) {
            return cluster.map(Target::Kubernetes);
        }
        let Some((scheme, rest)) = docker.split_once("://") else {
            let context_name = docker
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            if !context_name || docker.starts_with(['.', '-']) {
                return Err(format!(
                    "{docker:?} is neither a URL (unix://, tcp://, ssh://) nor a docker context name"
                ));
            }
            return Ok(Target::Context(docker.to_string()));
        };
        if !matches!(scheme, "unix" | "tcp" | "ssh") || rest.is_empty() {
            return Err(format!(
                "{docker:?}: the scheme must be unix://, tcp:// or ssh:// (TLS: a docker context)"
            ));
        }
        let endpoint = Endpoint {
            url: docker.to_string(),
            source: Source::DockerHost,
            tls: false,
        };
        if endpoint.refusal().is_some() {
            return Err(format!(
                "{docker:?}: plain tcp:// without TLS to an address that is not this machine's \
                 loopback, where the secrets in exec requests would cross the network readable; \
                 use ssh://user@host, or a docker context with TLS (`docker context create NAME \
                 --docker host=tcp://…:2376,ca=…,cert=…,key=…`) and name the context"
            ));
        }
        Ok(Target::Url(docker.to_string()))
    }

    /// `invocation` (a docker call) aimed at this daemon.
    pub fn apply(&self, invocation: Invocation) -> Invocation {
        match self {
            Target::Url(url) => invocation
                .env("DOCKER_HOST", url)
                .env_remove("DOCKER_CONTEXT"),
            Target::Context(name) => invocation
                .env("DOCKER_CONTEXT", name)
                .env_remove("DOCKER_HOST"),
            // A cluster's sandboxes are driven by kubectl: a runner started with
            // this is aimed there as by `runner.sandbox.host`; what docker calls
            // are left (none of a task's) go where the environment says.
            Target::Kubernetes(cluster) => {
                let mut invocation = invocation.env(SANDBOX_HOST_VAR, &cluster.to_string());
                if let Some(config) = &cluster.kubeconfig {
                    invocation = invocation.env("KUBECONFIG", &config.display().to_string());
                }
                if let Some(secs) = cluster.schedule_timeout_sec {
                    invocation =
                        invocation.env(super::cluster::SCHEDULE_TIMEOUT_VAR, &secs.to_string());
                }
                if cluster.egress_unenforced {
                    invocation = invocation.env(super::cluster::EGRESS_UNENFORCED_VAR, "accept");
                }
                if let Some(class) = &cluster.session_storage_class {
                    invocation = invocation.env(super::cluster::SESSION_STORAGE_CLASS_VAR, class);
                }
                invocation
            }
        }
    }

    /// The cluster, when this target is one.
    pub fn cluster(&self) -> Option<&super::cluster::Cluster> {
        match self {
            Target::Kubernetes(cluster) => Some(cluster),
            _ => None,
        }
    }

    /// `docker <args>` against this daemon within `deadline`.
    pub fn docker(
        &self,
        args: &[&str],
        deadline: Duration,
        interrupt: Interrupt,
    ) -> Result<Output, String> {
        let invocation = self.apply(docker_cli::command().args(args.iter().copied()));
        docker_cli::run_invocation(&invocation, deadline, interrupt).map_err(|e| e.to_string())
    }

    /// None when the daemon answers `docker version` within `HEALTH`; else why not.
    pub fn health(&self) -> Option<String> {
        if let Target::Kubernetes(cluster) = self {
            // A cluster's health is its engine's (`backend::health`).
            return Some(format!("{cluster} is a cluster, not a Docker daemon"));
        }
        match self.docker(
            &["version", "--format", "{{.Server.Version}}"],
            HEALTH,
            Interrupt::never(),
        ) {
            Ok(out) if out.ok => None,
            Ok(out) if out.ending == Ending::TimedOut => {
                Some(format!("no answer within {} s", HEALTH.as_secs()))
            }
            Ok(out) => Some(last_lines(&out.stderr, 2)),
            Err(e) => Some(e),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Url(url) => write!(f, "{url}"),
            Target::Context(name) => write!(f, "docker context {name}"),
            Target::Kubernetes(cluster) => write!(f, "{cluster}"),
        }
    }
}

/// A host of the pool: its name, its daemon, how many attempts it runs at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    pub name: String,
    pub target: Target,
    pub slots: usize,
}

impl HostSpec {
    /// A host entry, checked; errors name the field (`at` is the entry's path).
    pub fn new(at: &str, name: &str, docker: &str, slots: usize) -> Result<HostSpec, String> {
        check_name(name).map_err(|e| format!("{at}.name: {e}"))?;
        let target = Target::parse(docker).map_err(|e| format!("{at}.docker: {e}"))?;
        if !(1..=MAX_SLOTS).contains(&slots) {
            return Err(format!(
                "{at}.slots: {slots}: must be between 1 and {MAX_SLOTS}"
            ));
        }
        Ok(HostSpec {
            name: name.to_string(),
            target,
            slots,
        })
    }

    /// A cluster entry (`kubernetes:`), checked as `new` checks a Docker host's.
    pub fn of_cluster(
        at: &str,
        name: &str,
        cluster: super::cluster::Cluster,
        slots: usize,
    ) -> Result<HostSpec, String> {
        check_name(name).map_err(|e| format!("{at}.name: {e}"))?;
        if !(1..=MAX_SLOTS).contains(&slots) {
            return Err(format!(
                "{at}.slots: {slots}: must be between 1 and {MAX_SLOTS}"
            ));
        }
        Ok(HostSpec {
            name: name.to_string(),
            target: Target::Kubernetes(cluster),
            slots,
        })
    }

    /// `NAME=URL[:SLOTS]` of `--host`. SLOTS is the number after the last colon when
    /// the address still reads whole without it: after a tcp:// or ssh:// address's
    /// port, a unix socket's path or a context's name. Default 1.
    pub fn parse_flag(flag: &str) -> Result<HostSpec, String> {
        let at = format!("--host {flag}");
        let Some((name, address)) = flag.split_once('=') else {
            return Err(format!("{at}: expected NAME=URL[:SLOTS]"));
        };
        let (docker, slots) = split_slots(address).map_err(|e| format!("{at}: {e}"))?;
        HostSpec::new(&at, name, docker, slots)
    }
}

/// `(address, slots)` of `URL[:SLOTS]`.
fn split_slots(address: &str) -> Result<(&str, usize), String> {
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
        .map_err(|_| format!("slots {last:?}: not a number"))?;
    Ok((before, slots))
}

/// A host's name: [A-Za-z0-9][A-Za-z0-9._-]{0,63}, shown in lines and tables.
fn check_name(name: &str) -> Result<(), String> {
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
        Err(format!(
            "{name:?}: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"
        ))
    }
}

/// Checks a pool: names unique (the second of two is named by `at(index)`).
pub fn check_pool(hosts: &[HostSpec], at: impl Fn(usize) -> String) -> Result<(), String> {
    for (i, host) in hosts.iter().enumerate() {
        if hosts[..i].iter().any(|h| h.name == host.name) {
            return Err(format!("{}.name: {:?} is named twice", at(i), host.name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_target_names_its_context_and_namespace() {
        let target = Target::parse("k8s://prod/agents").unwrap();
        let cluster = target.cluster().unwrap();
        assert_eq!((&*cluster.context, &*cluster.namespace), ("prod", "agents"));
        assert_eq!(target.to_string(), "k8s://prod/agents");
        let h = HostSpec::parse_flag("c=k8s://prod/agents:3").unwrap();
        assert_eq!((h.target.cluster().is_some(), h.slots), (true, 3));
        let e = HostSpec::parse_flag("c=k8s://prod/Agents:2").unwrap_err();
        assert!(e.contains("namespace \"Agents\": 1 to 63"), "{e}");
    }

    #[test]
    fn a_cluster_runner_is_told_its_entrys_settings_in_its_environment() {
        use agent_runner_core::process::{self, Capture, Limits, Stop};
        let mut cluster = super::super::cluster::Cluster::new("c", "n", None).unwrap();
        cluster.schedule_timeout_sec = Some(7);
        cluster.session_storage_class = Some("fast-ssd".into());
        let invocation = Target::Kubernetes(cluster).apply(Invocation::new("/bin/sh").args([
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
        assert_eq!(h.target, Target::Url("tcp://127.0.0.5:2375".into()));
        assert_eq!(h.slots, 3);
        let h = HostSpec::parse_flag("b=tcp://127.0.0.5:2375").unwrap();
        assert_eq!(
            (h.target, h.slots),
            (Target::Url("tcp://127.0.0.5:2375".into()), 1)
        );
        let h = HostSpec::parse_flag("c=ssh://me@build.example:2").unwrap();
        assert_eq!(
            (h.target, h.slots),
            (Target::Url("ssh://me@build.example:2".into()), 1),
            "one number after an ssh host is its port"
        );
        let h = HostSpec::parse_flag("c=ssh://me@build.example:22:4").unwrap();
        assert_eq!(h.slots, 4);
        let h = HostSpec::parse_flag("l=unix:///var/run/docker.sock:2").unwrap();
        assert_eq!(h.target, Target::Url("unix:///var/run/docker.sock".into()));
        assert_eq!(h.slots, 2);
        let h = HostSpec::parse_flag("ci=ci-box:5").unwrap();
        assert_eq!((h.target, h.slots), (Target::Context("ci-box".into()), 5));
    }

    #[test]
    fn bad_host_flags_say_what_is_wrong() {
        let err = |flag: &str| HostSpec::parse_flag(flag).unwrap_err();
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
        let err = check_pool(&[a.clone(), a], |i| format!("hosts[{i}]")).unwrap_err();
        assert_eq!(err, "hosts[1].name: \"a\" is named twice");
    }

    #[test]
    fn a_target_goes_in_the_environment() {
        let inv =
            Target::Url("tcp://127.0.0.9:2375".into()).apply(Invocation::new("docker").arg("ps"));
        let shown = format!("{inv:?}");
        assert!(shown.contains("DOCKER_HOST"), "{shown}");
        assert_eq!(
            inv.display(),
            "docker ps",
            "nothing of the host in the argv"
        );
    }
}
