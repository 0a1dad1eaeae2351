//! The bridge inside the container (`helper/bridge.c`, built static by the build
//! script and embedded here). Mounted read-only with the proxy's socket, it is the
//! container's entrypoint and keep-alive (it also prepares the agent's home, so the
//! image needs no tools) and its only way out: 127.0.0.1:`PORT` inside, the proxy's
//! unix socket outside. Worker and test runs find it through the usual proxy
//! variables.

use super::host_dir::{BRIDGE, SOCKET};

/// The helper, a static executable for this machine's architecture.
pub(crate) const BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/egress-bridge"));
/// Where the proxy's directory is mounted in the container.
pub const MOUNT: &str = "/run/agent-runner/egress";
/// The port the bridge listens on, on the container's own loopback.
pub const PORT: u16 = 3128;

/// The bridge's path in the container (the entrypoint).
pub fn entrypoint() -> String {
    format!("{MOUNT}/{BRIDGE}")
}

/// The bridge's arguments; `home_links`: pairs of where the agent's login file may be
/// mounted and where, under HOME, the agent looks for it.
pub fn args(home_links: &[(&str, &str)]) -> Vec<String> {
    let mut args = vec![PORT.to_string(), format!("{MOUNT}/{SOCKET}")];
    for (mount, link) in home_links {
        args.extend([mount.to_string(), link.to_string()]);
    }
    args
}

/// The proxy variables of worker and test runs (SPEC §17). `NO_PROXY` keeps a test
/// suite's own servers on the container's loopback reachable.
pub(crate) fn env() -> Vec<(&'static str, String)> {
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
pub(crate) fn sets(name: &str) -> bool {
    env().iter().any(|(set, _)| set.eq_ignore_ascii_case(name))
}
