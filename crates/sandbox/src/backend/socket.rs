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
//! agent-runner's requests to the bridge (`quiet`) and its answers go over a unix
//! socket of that directory (`CONTROL`), which the bridge connects to before it says
//! it is ready, so before anything of the worker's runs; the first connection
//! accepted there is the bridge's, and the listener goes with it. Not over its
//! stdin and stdout: under gVisor (`runner.sandbox.runtime: runsc`) a pipe PID 1
//! holds can be opened again through `/proc/1/fd/N`, so the worker could read a
//! request away or write a forged answer; a socket cannot be opened that way.
//!
//! Where no host directory can be mounted (a remote daemon, or the copy transport,
//! without the tools volume) the keep-alive is `keepalive.sh` (`/bin/sh` of the
//! image) under the engine's init, which it cannot protect: the lifeline is the
//! carrier there whenever the tools volume is at hand.
//!
//! Files (the agent's login) are mounted read-only.

use std::os::unix::net::UnixListener;
use std::path::Path;

#[cfg(test)]
use super::control::AskError;
use super::control::Control;
use super::host_dir::{BRIDGE, CONTROL, HostDir, SOCKET};
use super::quiet::Quiet;
use super::{BackendError, Carrier, Instance, Main, Mount};

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
    /// The program the bridge is to look up (`Carrier::find_program`).
    find: Option<String>,
    /// The bridge's requests: its connection, shared with its starts of commands (`main_exec.rs`).
    control: std::sync::Arc<std::sync::Mutex<Control>>,
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
            find: None,
            control: Default::default(),
        };
        if !egress && !mountable {
            return Ok((link, None));
        }
        let dir = HostDir::create(BINARY)?;
        let listener = match egress {
            true => Some(UnixListener::bind(dir.socket())?),
            false => None,
        };
        let control = UnixListener::bind(dir.control())?;
        // The bridge connected before it said it was ready: never waited for.
        control.set_nonblocking(true)?;
        link.control = std::sync::Arc::new(std::sync::Mutex::new(Control::new(control)));
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
                    .chain([format!("control={MOUNT}/{CONTROL}")])
                    .chain(self.find.iter().map(|program| format!("find={program}")))
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

    fn find_program(&mut self, program: &str) -> bool {
        if self.dir.is_none() {
            return false;
        }
        self.find = Some(program.to_string());
        true
    }

    /// The request a line on the control socket, the answer a line back.
    fn quiet(&mut self, instance: &mut dyn Instance) -> Option<Result<Quiet, BackendError>> {
        self.dir.as_ref()?;
        let failed = |detail: String| BackendError::Failed {
            command: format!(
                "the sandbox's main process, asked to stop the others ({})",
                instance.name()
            ),
            detail,
        };
        let mut control = self.control.lock().unwrap_or_else(|e| e.into_inner());
        Some(control.ask().map_err(|e| failed(e.to_string())))
    }

    fn main_exec(&self) -> Option<super::main_exec::MainExec> {
        self.dir.as_ref()?;
        Some(super::main_exec::MainExec::new(self.control.clone()))
    }
}

impl SocketLink {
    /// "quiet" asked on the bridge's connection (`Control::ask`).
    #[cfg(test)]
    fn ask(&mut self) -> Result<Quiet, AskError> {
        self.control.lock().unwrap_or_else(|e| e.into_inner()).ask()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    fn links() -> Vec<(String, String)> {
        vec![(
            "/run/agent-runner/auth.json".into(),
            ".codex/auth.json".into(),
        )]
    }

    fn scratch() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "agent-runner-bridge-find-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// What the bridge says at the end of its ready line asked to find `program`,
    /// run on this machine in `cwd` with `path` as its PATH (stdin at its end: it
    /// exits). Its /bin/sh is this machine's.
    fn bridge_finds(program: &str, path: &str, cwd: &std::path::Path) -> String {
        let args = [format!("find={program}"), "0".into(), "-".into()];
        helper_finds(&args, path, cwd)
    }

    /// The same of the lifeline (`helper lifeline find=PROGRAM 0 0`).
    fn lifeline_finds(program: &str, path: &str) -> String {
        let args = [
            "lifeline".into(),
            format!("find={program}"),
            "0".into(),
            "0".into(),
        ];
        helper_finds(&args, path, std::path::Path::new("/"))
    }

    /// The helper, written once per test process.
    fn helper() -> &'static std::path::Path {
        static HELPER: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
        HELPER.get_or_init(|| {
            let helper = scratch().join("helper");
            std::fs::write(&helper, BINARY).unwrap();
            std::fs::set_permissions(&helper, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            helper
        })
    }

    fn helper_finds(args: &[String], path: &str, cwd: &std::path::Path) -> String {
        let out = loop {
            let run = std::process::Command::new(helper())
                .args(args)
                .current_dir(cwd)
                .env_clear()
                .env("PATH", path)
                .stdin(std::process::Stdio::null())
                .output();
            match run {
                // A child forked elsewhere may still hold the file's write end
                // (ETXTBSY) until it execs.
                Err(e) if e.raw_os_error() == Some(26) => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                run => break run.unwrap(),
            }
        };
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(said.starts_with(super::super::READY), "{said:?}");
        said.split_whitespace().last().unwrap().to_string()
    }

    #[test]
    fn the_bridge_says_found_only_for_what_the_shell_finds_for_certain() {
        let dir = scratch();
        let bin = dir.join("bin");
        let odd = dir.join("p%func");
        for folder in [&bin, &odd] {
            std::fs::create_dir(folder).unwrap();
        }
        let mode = |file: std::path::PathBuf, mode: u32| {
            std::fs::write(&file, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(mode))
                .unwrap();
        };
        mode(bin.join("tool"), 0o755);
        mode(bin.join("plain"), 0o644);
        mode(odd.join("tool"), 0o755);
        std::fs::create_dir(bin.join("dir")).unwrap();
        let root = std::path::Path::new("/");
        let bin_path = bin.display().to_string();
        let found = super::super::PROGRAM_FOUND;
        assert_eq!(
            bridge_finds("tool", &format!("/nowhere:{bin_path}"), root),
            found
        );
        // Builtins of every POSIX shell, whatever PATH holds.
        assert_eq!(bridge_finds("true", "/nowhere", root), found);
        assert_eq!(bridge_finds("cd", "", root), found);
        // Left to the shell: not there, not executable, a directory, a relative
        // entry (here the folder it is run in), a path, an entry with a `%` (an
        // option to dash and ash), a builtin of some shells only.
        let unknown = "program=unknown";
        assert_eq!(bridge_finds("tool", "/nowhere", root), unknown);
        assert_eq!(bridge_finds("plain", &bin_path, root), unknown);
        assert_eq!(bridge_finds("dir", &bin_path, root), unknown);
        assert_eq!(bridge_finds("tool", ".", &bin), unknown);
        assert_eq!(bridge_finds("tool", "bin", &dir), unknown);
        assert_eq!(
            bridge_finds(&format!("{bin_path}/tool"), "/", root),
            unknown
        );
        assert_eq!(
            bridge_finds("tool", &odd.display().to_string(), root),
            unknown
        );
        assert_eq!(bridge_finds("source", &bin_path, root), unknown);
        assert_eq!(bridge_finds("test", "/nowhere", root), unknown);
        assert_eq!(bridge_finds("", &bin_path, root), unknown);
        // The lifeline, the main process where nothing of this machine is mounted,
        // says the same.
        assert_eq!(lifeline_finds("tool", &bin_path), found);
        assert_eq!(lifeline_finds("plain", &bin_path), unknown);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn asked_to_find_the_test_program_the_bridge_is_named_it_before_its_port() {
        let (mut link, _) = SocketLink::open(false, true).unwrap();
        assert!(link.find_program("pytest"));
        assert_eq!(
            link.main(&[]).args,
            [
                "control=/run/agent-runner/egress/control.sock",
                "find=pytest",
                "0",
                "-"
            ]
        );
        let (mut keepalive, _) = SocketLink::open(false, false).unwrap();
        assert!(
            !keepalive.find_program("pytest"),
            "the image's keep-alive cannot"
        );
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
            [
                "control=/run/agent-runner/egress/control.sock",
                "0",
                "-",
                "/run/agent-runner/auth.json",
                ".codex/auth.json"
            ]
        );
        assert!(main.own_init);
        assert_eq!(link.mounts(), [Mount::new(&dir, MOUNT, true)]);
        assert!(!dir.join(SOCKET).exists());
        assert_eq!(link.exec_env(), []);
        Box::new(link).close();
        assert!(!dir.exists(), "the directory goes with the link");
    }

    /// The bridge's side of the control socket, as `helper/bridge.c` does it: it
    /// connects, then answers each line "quiet" with `answer`.
    fn bridge_answering(link: &SocketLink, answer: &'static str) -> std::thread::JoinHandle<()> {
        let path = link.dir.as_ref().unwrap().control();
        let mut stream = UnixStream::connect(path).unwrap();
        std::thread::spawn(move || {
            let mut line = [0u8; 6];
            while stream.read_exact(&mut line).is_ok() {
                assert_eq!(&line, b"quiet\n");
                if stream.write_all(answer.as_bytes()).is_err() {
                    break;
                }
            }
        })
    }

    #[test]
    fn the_answer_comes_on_the_control_socket_from_its_first_connection_only() {
        let (mut link, _) = SocketLink::open(false, true).unwrap();
        let bridge = bridge_answering(&link, "agent-runner-quiet 2 0\n");
        assert_eq!(
            link.ask().map_err(|e| e.to_string()),
            Ok(Quiet { found: 2, left: 0 })
        );
        assert_eq!(
            link.ask().map_err(|e| e.to_string()),
            Ok(Quiet { found: 2, left: 0 })
        );
        // A later connection (the worker's) is not taken: the listener is gone.
        let control = link.dir.as_ref().unwrap().control();
        assert!(UnixStream::connect(&control).is_err());
        Box::new(link).close();
        bridge.join().unwrap();
    }

    #[test]
    fn no_connection_or_a_wrong_answer_fails_and_is_not_asked_again() {
        let (mut link, _) = SocketLink::open(true, true).unwrap();
        assert_eq!(
            link.ask().map_err(|e| e.to_string()),
            Err("it never connected to agent-runner's control socket".into())
        );
        assert_eq!(
            link.ask().map_err(|e| e.to_string()),
            Err("its control connection was lost before".into())
        );
        let (mut link, _) = SocketLink::open(false, true).unwrap();
        let _bridge = bridge_answering(&link, "agent-runner-quiet 0 0 0\n");
        assert_eq!(
            link.ask().map_err(|e| e.to_string()),
            Err("it answered \"agent-runner-quiet 0 0 0\"".into())
        );
        assert!(link.ask().is_err(), "the connection was dropped");
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
                "control=/run/agent-runner/egress/control.sock",
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
