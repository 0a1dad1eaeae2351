//! Which Docker daemon the docker CLI talks to, in words a message can name
//! (`DOCKER_HOST=…` or the docker context), and the one refusal that comes before
//! any call (SPEC §22): plain `tcp://` to an address that is not the loopback,
//! without TLS, carries secrets (exec requests' variables) readable on the network.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::BackendError;
use super::docker_cli::{cli_missing, command, last_lines, run_invocation};
use agent_runner_core::interrupt::Interrupt;

/// The daemon the docker CLI reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Its address: `unix:///…`, `tcp://…`, `ssh://…`.
    pub url: String,
    /// Where that address was chosen: `DOCKER_HOST` or a docker context.
    pub source: Source,
    /// TLS is on for it (`DOCKER_TLS_VERIFY`, or the context's TLS material).
    pub tls: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The local default: no `DOCKER_HOST`, no context chosen.
    Default,
    DockerHost,
    Context(String),
    /// `runner.sandbox.host`.
    SandboxHost,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            Source::Default => write!(f, "the local docker daemon ({})", self.url),
            Source::DockerHost => write!(f, "the docker daemon at DOCKER_HOST={}", self.url),
            Source::SandboxHost => {
                write!(f, "the docker daemon at runner.sandbox.host {}", self.url)
            }
            Source::Context(name) => {
                write!(
                    f,
                    "the docker daemon of docker context {name:?} ({})",
                    self.url
                )
            }
        }
    }
}

impl Endpoint {
    /// The daemon the environment chooses: `DOCKER_HOST`, else the context
    /// (`DOCKER_CONTEXT` or the CLI configuration's current one, read with `docker
    /// context inspect`), else the local default (no call made).
    pub fn current(deadline: Duration) -> Result<Endpoint, BackendError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        // `runner.sandbox.host` wins over the environment (`docker_cli::aim`).
        let aimed = super::docker_cli::aimed();
        if let Some(url) = aimed.and_then(|target| target.daemon_url()) {
            return Ok(Endpoint {
                url: url.to_string(),
                source: Source::SandboxHost,
                tls: var("DOCKER_TLS_VERIFY").is_some(),
            });
        }
        let context_aimed = aimed.is_some();
        if let Some(url) = var("DOCKER_HOST").filter(|_| !context_aimed) {
            return Ok(Endpoint {
                url,
                source: Source::DockerHost,
                tls: var("DOCKER_TLS_VERIFY").is_some(),
            });
        }
        if !context_aimed && var("DOCKER_CONTEXT").is_none() && !has_current_context() {
            return Ok(Endpoint {
                url: "unix:///var/run/docker.sock".into(),
                source: Source::Default,
                tls: false,
            });
        }
        // Not a watched call (`daemon`): which daemon it is comes first, and the CLI
        // answers this from its own configuration.
        let inspect = command().args([
            "context",
            "inspect",
            "--format",
            "{{.Name}} {{.Endpoints.docker.Host}} {{len .TLSMaterial}}",
        ]);
        let out = run_invocation(&inspect, deadline, Interrupt::never()).map_err(cli_missing)?;
        if !out.ok {
            return Err(BackendError::Failed {
                command: "docker context inspect".into(),
                detail: last_lines(&out.stderr, 2),
            });
        }
        parse_context(out.stdout.trim()).ok_or_else(|| BackendError::Failed {
            command: "docker context inspect".into(),
            detail: format!("unexpected answer {:?}", last_lines(&out.stdout, 1)),
        })
    }

    /// Whether the daemon is on another machine as far as files go: anything but a
    /// unix socket (a tcp:// or ssh:// daemon may run anywhere, even behind the
    /// loopback, as the emulated hosts of the tests do).
    pub fn is_remote(&self) -> bool {
        !self.url.starts_with("unix://")
    }

    /// An error when secrets would cross the network in clear: `tcp://` to an
    /// address other than the loopback, without TLS.
    pub fn refusal(&self) -> Option<BackendError> {
        let rest = self.url.strip_prefix("tcp://")?;
        if self.tls || is_loopback(host_of(rest)) {
            return None;
        }
        let chosen = match &self.source {
            Source::Context(name) => format!("docker context {name:?}"),
            Source::SandboxHost => "runner.sandbox.host".into(),
            _ => "DOCKER_HOST".into(),
        };
        Some(BackendError::Refused(format!(
            "refusing {self}: plain tcp:// without TLS to an address that is not this \
             machine's loopback, where the secrets in exec requests would cross the \
             network readable. Use TLS (DOCKER_TLS_VERIFY=1 with DOCKER_CERT_PATH, or a \
             context made with `docker context create --docker \
             host=tcp://…:2376,ca=…,cert=…,key=…`) or ssh (DOCKER_HOST=ssh://user@host) \
             in {chosen}"
        )))
    }
}

/// `name url tls-count` of `docker context inspect`.
fn parse_context(line: &str) -> Option<Endpoint> {
    let mut words = line.split(' ');
    let name = words.next()?.to_string();
    let url = words.next()?.to_string();
    let tls = words.next()?.parse::<usize>().ok()? > 0;
    if url.is_empty() || words.next().is_some() {
        return None;
    }
    Some(Endpoint {
        url,
        source: Source::Context(name),
        tls,
    })
}

/// Whether the docker CLI's configuration names a current context.
fn has_current_context() -> bool {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker")));
    let Some(config) = dir.map(|d| d.join("config.json")) else {
        return false;
    };
    let Ok(text) = std::fs::read_to_string(config) else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("currentContext")?.as_str().map(str::to_string))
        .is_some_and(|name| !name.is_empty() && name != "default")
}

/// The host of `host:port/path` (IPv6 in brackets).
fn host_of(rest: &str) -> &str {
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host)
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(url: &str, source: Source, tls: bool) -> Endpoint {
        Endpoint {
            url: url.into(),
            source,
            tls,
        }
    }

    #[test]
    fn plain_tcp_beyond_the_loopback_is_refused_with_the_fix() {
        let refused = at("tcp://10.1.2.3:2375", Source::DockerHost, false)
            .refusal()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            refused.contains("DOCKER_HOST=tcp://10.1.2.3:2375"),
            "{refused}"
        );
        assert!(refused.contains("DOCKER_TLS_VERIFY=1"), "{refused}");
        assert!(refused.contains("ssh://"), "{refused}");
        let by_context = at(
            "tcp://build.example:2375",
            Source::Context("ci".into()),
            false,
        )
        .refusal()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(by_context.contains("docker context \"ci\""), "{by_context}");
        assert!(
            at("tcp://[2001:db8::1]:2375", Source::DockerHost, false)
                .refusal()
                .is_some()
        );
        assert!(
            at("tcp://127.0.0.1.example:2375", Source::DockerHost, false)
                .refusal()
                .is_some()
        );
    }

    #[test]
    fn tls_the_loopback_ssh_and_unix_sockets_pass() {
        for (url, tls) in [
            ("tcp://10.1.2.3:2376", true),
            ("tcp://127.0.0.7:2375", false),
            ("tcp://localhost:2375", false),
            ("tcp://[::1]:2375", false),
            ("ssh://me@build.example", false),
            ("unix:///var/run/docker.sock", false),
        ] {
            assert_eq!(at(url, Source::DockerHost, tls).refusal(), None, "{url}");
        }
    }

    #[test]
    fn a_context_is_read_from_docker_context_inspect() {
        assert_eq!(
            parse_context("ci tcp://10.0.0.1:2376 3"),
            Some(at(
                "tcp://10.0.0.1:2376",
                Source::Context("ci".into()),
                true
            ))
        );
        assert_eq!(
            parse_context("default unix:///var/run/docker.sock 0"),
            Some(at(
                "unix:///var/run/docker.sock",
                Source::Context("default".into()),
                false
            ))
        );
        assert_eq!(parse_context("garbage"), None);
    }

    #[test]
    fn the_host_of_an_address() {
        assert_eq!(host_of("10.0.0.1:2375"), "10.0.0.1");
        assert_eq!(host_of("[::1]:2375/"), "::1");
        assert_eq!(host_of("example"), "example");
    }
}
