//! A worker model server on the host's loopback (SPEC §24). Under `network:
//! allowlist` the sandbox's `127.0.0.1` and `localhost` are the container's own, and
//! the proxy variables send them there (`NO_PROXY`, so that a test suite's own
//! servers in the container stay reachable): the agent would retry against nothing
//! until its run time ran out. So `validate` refuses such a URL with the ways that
//! work. Other addresses of the host, `127.0.0.2` and up included, go through the
//! egress proxy, which runs on the host.

use super::{InputError, InputErrors, Login, WorkerSettings};

/// Refuses each URL the worker's agent would reach its model at that names the
/// host's loopback as the container sees its own.
pub(crate) fn refuse(settings: &WorkerSettings, login: &Login, problems: &mut InputErrors) {
    for need in super::default_allow::needs_of(settings.kind, settings, login) {
        let Some(host) = url_host(&need.destination) else {
            continue;
        };
        if !is_containers_own(&host) {
            continue;
        }
        let field = match need.why.as_str() {
            "base_url" => "runner.worker.base_url".to_string(),
            why if why.contains("runner.worker.env") => "runner.worker.env".to_string(),
            _ => "runner.worker.extra_args".to_string(),
        };
        problems.push(
            InputError::new(
                field,
                format!(
                    "{} ({}) is on this host's loopback, which the sandbox cannot reach with \
                     network: allowlist: `{host}` in the container is the container's own",
                    need.destination, need.why
                ),
            )
            .with_hint(
                "name the model server by another address of this host that it listens on \
                 (e.g. its LAN address, for a server on 0.0.0.0; the egress proxy carries it), \
                 or set runner.worker.network: host",
            ),
        );
    }
}

/// The host of an http(s) URL, lowercase, brackets kept off an IPv6 literal.
fn url_host(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.split(':').next()?,
    };
    Some(host.trim_end_matches('.').to_ascii_lowercase())
}

/// The names the proxy variables leave to the container's own loopback.
fn is_containers_own(host: &str) -> bool {
    host == "localhost" || host.ends_with(".localhost") || host == "127.0.0.1"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_from_urls() {
        assert_eq!(
            url_host("http://127.0.0.1:8000/v1").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            url_host("http://u:p@LocalHost./v1").as_deref(),
            Some("localhost")
        );
        assert_eq!(url_host("http://[::1]:8000/v1").as_deref(), Some("::1"));
        assert_eq!(url_host("api.openai.com"), None);
    }

    #[test]
    fn only_what_no_proxy_keeps_in_the_container_is_refused() {
        for host in ["localhost", "127.0.0.1", "ollama.localhost"] {
            assert!(is_containers_own(host), "{host}");
        }
        for host in ["127.0.0.2", "::1", "192.168.1.5", "localhost.example"] {
            assert!(!is_containers_own(host), "{host}");
        }
    }
}
