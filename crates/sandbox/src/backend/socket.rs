//! The carrier of today: a keep-alive whose stdin is our pipe, and the egress link as
//! a socket mount (SPEC §17).
//!
//! Without egress the main process is `keepalive.sh` (`/bin/sh` of the image): it
//! prepares the agent's home, says it is ready with its pid, and reads stdin until
//! end-of-file. With egress (`network: allowlist`, the container has no network) it
//! is the bridge (`helper/bridge.c`, built static by the build script and embedded
//! here), which needs nothing from the image: it does the same, listens on
//! 127.0.0.1:`egress::PORT` inside, and carries each connection to the proxy's unix
//! socket in a private host directory (`host_dir.rs`), mounted read-only with the
//! bridge in it. The proxy (`egress::Egress`) listens on that socket.
//!
//! Files (the agent's login) are mounted read-only.

use std::os::unix::net::UnixListener;
use std::path::Path;

use super::host_dir::{BRIDGE, HostDir, SOCKET};
use super::{Carrier, Main, Mount};
use crate::egress;

/// The helper, a static executable for this machine's architecture.
pub(crate) const BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/egress-bridge"));
/// Where the proxy's directory is mounted in the container.
pub(crate) const MOUNT: &str = "/run/agent-runner/egress";

/// The keep-alive without egress; see the module documentation.
const KEEPALIVE_SCRIPT: &str = include_str!("keepalive.sh");

/// See the module documentation.
pub struct SocketLink {
    /// The proxy's directory, with egress.
    dir: Option<HostDir>,
    delivered: Vec<Mount>,
}

impl SocketLink {
    /// The link of a sandbox; with `egress`, the proxy's directory made and the
    /// listener the proxy is to serve on it (removed by `close`, or when dropped).
    pub fn open(egress: bool) -> std::io::Result<(SocketLink, Option<UnixListener>)> {
        let mut link = SocketLink {
            dir: None,
            delivered: Vec::new(),
        };
        if !egress {
            return Ok((link, None));
        }
        let dir = HostDir::create(BINARY)?;
        let listener = UnixListener::bind(dir.socket())?;
        link.dir = Some(dir);
        Ok((link, Some(listener)))
    }
}

impl Carrier for SocketLink {
    fn main(&self, links: &[(String, String)]) -> Main {
        let links = links
            .iter()
            .flat_map(|(file, link)| [file.clone(), link.clone()]);
        match self.dir {
            Some(_) => Main {
                entrypoint: format!("{MOUNT}/{BRIDGE}"),
                args: [egress::PORT.to_string(), format!("{MOUNT}/{SOCKET}")]
                    .into_iter()
                    .chain(links)
                    .collect(),
            },
            None => Main::shell(
                KEEPALIVE_SCRIPT,
                std::iter::once("agent-runner-keepalive".to_string()).chain(links),
            ),
        }
    }

    fn mounts(&self) -> Vec<Mount> {
        let mut mounts = self.delivered.clone();
        if let Some(dir) = &self.dir {
            mounts.push(Mount::new(dir.path(), MOUNT, true));
        }
        mounts
    }

    fn deliver(&mut self, file: &Path, target: &str) {
        self.delivered.push(Mount::new(file, target, true));
    }

    fn exec_env(&self) -> Vec<(&'static str, String)> {
        match self.dir {
            Some(_) => egress::variables::env(),
            None => Vec::new(),
        }
    }

    fn start_hint(&self, detail: &str) -> Option<String> {
        let dir = self.dir.as_ref()?;
        detail.contains(MOUNT).then(|| {
            format!(
                " (the egress bridge could not run from {}: if that file system is mounted noexec, \
                 point TMPDIR at one that is not)",
                dir.path().display()
            )
        })
    }

    fn close(self: Box<Self>) {
        if let Some(dir) = self.dir {
            dir.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links() -> Vec<(String, String)> {
        vec![(
            "/run/agent-runner/auth.json".into(),
            ".codex/auth.json".into(),
        )]
    }

    #[test]
    fn without_egress_the_keepalive_is_the_main_process_and_nothing_is_mounted() {
        let (mut link, listener) = SocketLink::open(false).unwrap();
        assert!(listener.is_none());
        let main = link.main(&links());
        assert_eq!(main.entrypoint, "/bin/sh");
        assert_eq!(
            main.args[2..],
            [
                "agent-runner-keepalive",
                "/run/agent-runner/auth.json",
                ".codex/auth.json"
            ]
        );
        assert_eq!(link.mounts(), []);
        assert_eq!(link.exec_env(), []);
        link.deliver(Path::new("/h/auth.json"), "/run/agent-runner/auth.json");
        assert_eq!(
            link.mounts(),
            [Mount::new(
                "/h/auth.json",
                "/run/agent-runner/auth.json",
                true
            )]
        );
        assert_eq!(link.start_hint(MOUNT), None);
    }

    #[test]
    fn with_egress_the_bridge_runs_from_the_mounted_directory_whose_socket_is_served() {
        let (link, listener) = SocketLink::open(true).unwrap();
        let dir = link.dir.as_ref().unwrap().path().to_path_buf();
        let main = link.main(&links());
        assert_eq!(main.entrypoint, "/run/agent-runner/egress/bridge");
        assert_eq!(
            main.args,
            [
                "3128",
                "/run/agent-runner/egress/proxy.sock",
                "/run/agent-runner/auth.json",
                ".codex/auth.json"
            ]
        );
        assert_eq!(link.mounts(), [Mount::new(&dir, MOUNT, true)]);
        assert!(dir.join(SOCKET).exists() && listener.is_some());
        assert_eq!(link.exec_env()[0].1, "http://127.0.0.1:3128");
        assert!(
            link.start_hint("exec /run/agent-runner/egress/bridge: permission denied")
                .is_some()
        );
        Box::new(link).close();
        assert!(!dir.exists(), "the directory goes with the link");
    }
}
