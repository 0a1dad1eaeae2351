//! The carrier of today: a keep-alive whose stdin is our pipe, and the egress link as
//! a socket mount (SPEC §17).
//!
//! The main process is the bridge (`helper/bridge.c`, built static by the build
//! script and embedded here), run from a private host directory (`host_dir.rs`)
//! mounted read-only: it needs nothing from the image, prepares the agent's home,
//! says it is ready with its pid, and reads stdin until end-of-file. It is the
//! container's PID 1, non-dumpable (`helper/init.c`), so the worker can neither
//! take it over nor hide in it (SPEC §9). With egress (`network: allowlist`, the
//! container has no network) it also listens on 127.0.0.1:`agent_runner_settings::allow::PORT` inside and
//! carries each connection to the proxy's unix socket in that directory; the proxy
//! (`egress::Egress`) listens on that socket.
//!
//! Where no host directory can be mounted (a remote daemon, or the copy transport,
//! without the tools volume) the keep-alive is `keepalive.sh` (`/bin/sh` of the
//! image) under the engine's init, which it cannot protect: the lifeline is the
//! carrier there whenever the tools volume is at hand.
//!
//! Files (the agent's login) are mounted read-only.

use std::os::unix::net::UnixListener;
use std::path::Path;

use super::host_dir::{BRIDGE, HostDir, SOCKET};
use super::quiet::{self, Quiet};
use super::{BackendError, Carrier, Instance, Main, Mount};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::HeldWait;

/// The helper, a static executable for this machine's architecture.
pub(crate) const BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/egress-bridge"));
/// Where the proxy's directory is mounted in the container.
pub(crate) const MOUNT: &str = "/run/agent-runner/egress";

/// The keep-alive without egress; see the module documentation.
const KEEPALIVE_SCRIPT: &str = include_str!("keepalive.sh");

/// See the module documentation.
pub struct SocketLink {
    /// The bridge's directory (and the proxy's, with egress); None: `keepalive.sh`.
    dir: Option<HostDir>,
    egress: bool,
    delivered: Vec<Mount>,
    /// The locality token's file the bridge is to read and say (`locality.rs`).
    token: Option<String>,
}

impl SocketLink {
    /// The link of a sandbox: the bridge's directory made unless `!mountable` (then
    /// no egress either); with `egress`, the listener the proxy is to serve in it
    /// (removed by `close`, or when dropped).
    pub fn open(
        egress: bool,
        mountable: bool,
    ) -> std::io::Result<(SocketLink, Option<UnixListener>)> {
        let mut link = SocketLink {
            dir: None,
            egress,
            delivered: Vec::new(),
            token: None,
        };
        if !egress && !mountable {
            return Ok((link, None));
        }
        let dir = HostDir::create(BINARY)?;
        let listener = match egress {
            true => Some(UnixListener::bind(dir.socket())?),
            false => None,
        };
        link.dir = Some(dir);
        Ok((link, listener))
    }
}

impl Carrier for SocketLink {
    fn main(&self, links: &[(String, String)]) -> Main {
        let links = links
            .iter()
            .flat_map(|(file, link)| [file.clone(), link.clone()]);
        // Port 0: the bridge as the keep-alive alone.
        let (port, socket) = match self.egress {
            true => (
                agent_runner_settings::allow::PORT.to_string(),
                format!("{MOUNT}/{SOCKET}"),
            ),
            false => ("0".to_string(), "-".to_string()),
        };
        match self.dir {
            Some(_) => Main {
                entrypoint: format!("{MOUNT}/{BRIDGE}"),
                args: (self.token.iter().map(|file| format!("token={file}")))
                    .chain([port, socket])
                    .chain(links)
                    .collect(),
                own_init: true,
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
        match self.egress {
            true => agent_runner_settings::allow::variables::env(),
            false => Vec::new(),
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

    fn prove_locality(&mut self, path: &str) -> bool {
        if self.dir.is_none() {
            return false;
        }
        self.token = Some(path.to_string());
        true
    }

    /// The bridge's stdin is our pipe: the request a line on it, the answer a line
    /// of its stdout.
    fn quiet(&mut self, instance: &mut dyn Instance) -> Option<Result<Quiet, BackendError>> {
        self.dir.as_ref()?;
        let command = format!(
            "the sandbox's main process, asked to stop the others ({})",
            instance.name()
        );
        let failed = |detail: String| BackendError::Failed {
            command: command.clone(),
            detail,
        };
        if let Err(e) = instance.send_line(quiet::REQUEST) {
            return Some(Err(failed(e.to_string())));
        }
        Some(
            match instance.read_line(quiet::ANSWER, quiet::WITHIN, Interrupt::never()) {
                Ok(answer) => {
                    Quiet::parse(&answer).ok_or_else(|| failed(format!("it answered {answer:?}")))
                }
                Err(HeldWait::TimedOut) => Err(failed(format!(
                    "no answer within {} s",
                    quiet::WITHIN.as_secs()
                ))),
                Err(HeldWait::Interrupted) => Err(failed("interrupted".into())),
                Err(HeldWait::Ended(stderr)) => Err(failed(format!("it ended: {stderr}"))),
            },
        )
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
    fn without_egress_the_bridge_is_the_keepalive_and_pid_1() {
        let (link, listener) = SocketLink::open(false, true).unwrap();
        assert!(listener.is_none());
        let dir = link.dir.as_ref().unwrap().path().to_path_buf();
        let main = link.main(&links());
        assert_eq!(main.entrypoint, "/run/agent-runner/egress/bridge");
        assert_eq!(
            main.args,
            ["0", "-", "/run/agent-runner/auth.json", ".codex/auth.json"]
        );
        assert!(main.own_init);
        assert_eq!(link.mounts(), [Mount::new(&dir, MOUNT, true)]);
        assert!(!dir.join(SOCKET).exists());
        assert_eq!(link.exec_env(), []);
        Box::new(link).close();
        assert!(!dir.exists(), "the directory goes with the link");
    }

    #[test]
    fn where_nothing_can_be_mounted_the_keepalive_is_the_images_shell() {
        let (mut link, listener) = SocketLink::open(false, false).unwrap();
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
        let (link, listener) = SocketLink::open(true, true).unwrap();
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
        assert!(main.own_init);
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
