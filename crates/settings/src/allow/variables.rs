//! The proxy variables of worker and test runs (SPEC §17): tools in the sandbox find
//! the proxy at `127.0.0.1:PORT` on the sandbox's own loopback, where the carrier's
//! helper listens (`backend::socket`) and carries each connection to the proxy.

/// The port the helper listens on, on the sandbox's own loopback.
pub const PORT: u16 = 3128;

/// The proxy variables of worker and test runs. `NO_PROXY` keeps a test suite's own
/// servers on the container's loopback reachable.
pub fn env() -> Vec<(&'static str, String)> {
    let url = format!("http://127.0.0.1:{PORT}");
    vec![
        ("HTTPS_PROXY", url.clone()),
        ("HTTP_PROXY", url.clone()),
        ("https_proxy", url.clone()),
        ("http_proxy", url),
        ("NO_PROXY", "localhost,127.0.0.1".into()),
        ("no_proxy", "localhost,127.0.0.1".into()),
    ]
}

/// Whether `name` is one of the variables `env` sets (a task may not set them too).
pub fn sets(name: &str) -> bool {
    env().iter().any(|(set, _)| set.eq_ignore_ascii_case(name))
}
