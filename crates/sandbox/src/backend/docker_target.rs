//! A Docker daemon as a target (SPEC §22 "Hosts"): `hosts:` `docker:`, `orchestrate
//! --host NAME=URL[:SLOTS]`, `runner.sandbox.host`. It is a URL (`unix://`, `tcp://`,
//! `ssh://`) or a docker context's name; every docker call made for it carries that
//! in its environment (`DOCKER_HOST` or `DOCKER_CONTEXT`), never in an argv. Plain
//! `tcp://` beyond the loopback is refused as `endpoint.rs` refuses it: a TLS daemon
//! is named by a context that carries the certificates. What the engine does with
//! one is `docker_engine.rs`.

use std::time::Duration;

use super::docker_cli::{self, Output, last_lines};
use super::endpoint::{Endpoint, Source};
use super::host::HEALTH;
use super::target::{Place, Target};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{Ending, Invocation};

/// Why a text names no Docker daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("empty: a URL (unix://, tcp://, ssh://) or a docker context")]
    Empty,
    #[error("{0:?} is neither a URL (unix://, tcp://, ssh://) nor a docker context name")]
    Neither(String),
    #[error("{0:?}: the scheme must be unix://, tcp:// or ssh:// (TLS: a docker context)")]
    Scheme(String),
    #[error(
        "{0:?}: plain tcp:// without TLS to an address that is not this machine's \
         loopback, where the secrets in exec requests would cross the network readable; \
         use ssh://user@host, or a docker context with TLS (`docker context create NAME \
         --docker host=tcp://…:2376,ca=…,cert=…,key=…`) and name the context"
    )]
    PlainTcp(String),
}

/// Where a Docker host's sandboxes run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DockerDaemon {
    /// A Docker daemon at `DOCKER_HOST=<url>`.
    Url(String),
    /// A Docker daemon by `DOCKER_CONTEXT=<name>`.
    Context(String),
}

impl DockerDaemon {
    /// `docker` of a host entry: a URL with a scheme docker knows, or a context name.
    /// Plain `tcp://` beyond the loopback is refused (the fix in the message).
    pub fn parse(docker: &str) -> Result<DockerDaemon, DaemonError> {
        if docker.is_empty() {
            return Err(DaemonError::Empty);
        }
        let Some((scheme, rest)) = docker.split_once("://") else {
            let context_name = docker
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            if !context_name || docker.starts_with(['.', '-']) {
                return Err(DaemonError::Neither(docker.to_string()));
            }
            return Ok(DockerDaemon::Context(docker.to_string()));
        };
        if !matches!(scheme, "unix" | "tcp" | "ssh") || rest.is_empty() {
            return Err(DaemonError::Scheme(docker.to_string()));
        }
        let endpoint = Endpoint {
            url: docker.to_string(),
            source: Source::DockerHost,
            tls: false,
        };
        if endpoint.refusal().is_some() {
            return Err(DaemonError::PlainTcp(docker.to_string()));
        }
        Ok(DockerDaemon::Url(docker.to_string()))
    }
}

impl Place for DockerDaemon {
    fn apply(&self, invocation: Invocation) -> Invocation {
        match self {
            DockerDaemon::Url(url) => invocation
                .env("DOCKER_HOST", url)
                .env_remove("DOCKER_CONTEXT"),
            DockerDaemon::Context(name) => invocation
                .env("DOCKER_CONTEXT", name)
                .env_remove("DOCKER_HOST"),
        }
    }

    fn same(&self, other: &dyn Place) -> bool {
        other.as_any().downcast_ref::<DockerDaemon>() == Some(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl std::fmt::Display for DockerDaemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DockerDaemon::Url(url) => write!(f, "{url}"),
            DockerDaemon::Context(name) => write!(f, "docker context {name}"),
        }
    }
}

impl Target {
    /// The Docker daemon at `DOCKER_HOST=<url>`.
    pub fn docker_url(url: impl Into<String>) -> Target {
        Target::new(DockerDaemon::Url(url.into()))
    }

    /// The Docker daemon of the docker context `name`.
    pub fn docker_context(name: impl Into<String>) -> Target {
        Target::new(DockerDaemon::Context(name.into()))
    }

    /// The URL of a Docker daemon named by one.
    pub fn daemon_url(&self) -> Option<&str> {
        match self.place::<DockerDaemon>()? {
            DockerDaemon::Url(url) => Some(url),
            DockerDaemon::Context(_) => None,
        }
    }

    /// `docker <args>` against this daemon within `deadline`.
    pub fn docker(
        &self,
        args: &[&str],
        deadline: Duration,
        interrupt: Interrupt,
    ) -> Result<Output, agent_runner_core::Error> {
        let invocation = self.apply(docker_cli::command().args(args.iter().copied()));
        docker_cli::run_invocation(&invocation, deadline, interrupt)
    }
}

/// None when the daemon of `target` answers `docker version` within `HEALTH`; else
/// why not.
pub(crate) fn health(target: &Target) -> Option<String> {
    match target.docker(
        &["version", "--format", "{{.Server.Version}}"],
        HEALTH,
        Interrupt::never(),
    ) {
        Ok(out) if out.ok => None,
        Ok(out) if out.ending == Ending::TimedOut => {
            Some(format!("no answer within {} s", HEALTH.as_secs()))
        }
        Ok(out) => Some(last_lines(&out.stderr, 2)),
        Err(e) => Some(e.to_string()),
    }
}
