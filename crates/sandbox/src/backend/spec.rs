//! What a sandbox is made of and what an exec in it is given, in words every backend
//! can render: Docker into `docker run`/`docker exec` arguments (`docker.rs`), a
//! `kubectl` backend into a Pod and `kubectl exec`. The callers decide the policy
//! (which capabilities, which mounts, which variables by name); a backend only
//! renders it, so the policy is written once.

use std::path::PathBuf;
use std::time::Duration;

use agent_runner_core::interrupt::Interrupt;
use agent_runner_settings::task::{Network, WorkerLimits};

/// A sandbox to start.
#[derive(Debug, Clone)]
pub struct Spec {
    pub image: String,
    /// Its name; needed for one that is held (the fallback removal, the watchdog).
    pub name: Option<String>,
    /// Labels: the task's and its owner's, by which the sweep knows an orphan.
    pub labels: Vec<(String, String)>,
    /// Its main process (PID 1, under an init when held).
    pub main: Main,
    /// The main process's stdin is a pipe of ours: the sandbox ends when we do,
    /// however we end. False: a probe that runs to its end on its own.
    pub held: bool,
    /// A host-side watchdog removes it if we end while its main process is frozen
    /// by what runs inside (the worker is root there).
    pub watchdog: bool,
    /// What the main process prints once ready; `start` waits for it. None:
    /// `start` returns at once (`Instance::read_line` reads what it says).
    pub ready: Option<Ready>,
    /// After its ready line the main process's stdin and stdout are a stream
    /// (`Started::stream`, the lifeline), no longer lines.
    pub stream: bool,
    pub network: Net,
    /// None: the engine's default privileges.
    pub confinement: Option<Confinement>,
    pub limits: Option<WorkerLimits>,
    /// Runs as the invoking user (files it writes in a mount are theirs), with a
    /// HOME that user can write; as root when agent-runner is root.
    pub as_user: bool,
    pub mounts: Vec<Mount>,
    /// Named volumes, made with their labels if they do not exist yet.
    pub volumes: Vec<Volume>,
    pub tmpfs: Vec<Tmpfs>,
    pub workdir: Option<String>,
    /// The engine's runtime for it (`runner.sandbox.runtime`: gVisor's `runsc`);
    /// None: the engine's default.
    pub runtime: Option<String>,
    /// The parts of the tools volume it uses (`tools::parts_for`); None: all. An
    /// engine that copies the tools into every sandbox (a cluster's Pods)
    /// copies only these; one that mounts the volume mounts it whole.
    pub tools_parts: Option<Vec<String>>,
}

impl Spec {
    /// A sandbox of `image` running `main`, with nothing else asked for.
    pub fn new(image: &str, main: Main) -> Spec {
        Spec {
            image: image.to_string(),
            name: None,
            labels: Vec::new(),
            main,
            held: false,
            watchdog: false,
            ready: None,
            stream: false,
            network: Net::Default,
            confinement: None,
            limits: None,
            as_user: false,
            mounts: Vec::new(),
            volumes: Vec::new(),
            tmpfs: Vec::new(),
            workdir: None,
            runtime: None,
            tools_parts: None,
        }
    }
}

/// A sandbox's main process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Main {
    /// Its program, by absolute path.
    pub entrypoint: String,
    pub args: Vec<String>,
    /// It is its own init: PID 1, with no init of the engine's above it (which the
    /// worker could take over, SPEC §9); agent-runner's helper, non-dumpable, reaping
    /// orphans (`helper/init.c`). False: under the engine's init.
    pub own_init: bool,
}

impl Main {
    /// `/bin/sh -c <script> [args...]`.
    pub fn shell(script: &str, args: impl IntoIterator<Item = String>) -> Main {
        let mut all = vec!["-c".to_string(), script.to_string()];
        all.extend(args);
        Main {
            entrypoint: "/bin/sh".into(),
            args: all,
            own_init: false,
        }
    }
}

/// The line a main process prints once the sandbox is ready.
#[derive(Debug, Clone, Copy)]
pub struct Ready {
    pub prefix: &'static str,
    pub within: Duration,
    pub interrupt: Interrupt,
}

/// The sandbox's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    /// None but its own loopback (egress, if any, goes through the carrier).
    Isolated,
    /// The host's.
    Host,
    /// The engine's default (Docker's bridge).
    Default,
}

impl From<Network> for Net {
    fn from(network: Network) -> Net {
        match network {
            Network::Allowlist | Network::None => Net::Isolated,
            Network::Host => Net::Host,
            Network::Bridge => Net::Default,
        }
    }
}

/// Privileges taken away: every capability but `keep`, and no gaining of any
/// (`no-new-privileges`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confinement {
    pub keep: &'static [&'static str],
}

/// A host path (or the engine's named volume) seen in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// A host path; the volume's name when `volume`.
    pub source: PathBuf,
    /// Absolute, in the sandbox.
    pub target: String,
    pub readonly: bool,
    /// `source` names a volume of the engine's (the tools volume), not a host path.
    pub volume: bool,
}

impl Mount {
    pub fn new(source: impl Into<PathBuf>, target: impl Into<String>, readonly: bool) -> Mount {
        Mount {
            source: source.into(),
            target: target.into(),
            readonly,
            volume: false,
        }
    }

    /// The engine's volume `name`, read-only at `target`.
    pub fn volume(name: &str, target: impl Into<String>) -> Mount {
        Mount {
            volume: true,
            ..Mount::new(name, target, true)
        }
    }
}

/// A named volume mounted read-write (a cache, SPEC §21).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub name: String,
    /// Absolute, in the sandbox.
    pub target: String,
    /// Whose it is; a volume of this name with other labels is refused.
    pub labels: Vec<(String, String)>,
    /// What it is, in words, for that refusal (`a cache of /repo at /root/.npm`).
    pub whose: String,
}

/// A file system in memory, only the sandbox user's (mode 0700), that nothing can
/// run from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tmpfs {
    pub target: String,
    /// Its size as the engine writes it (`1m`).
    pub size: &'static str,
}

/// A command to run in a started sandbox.
#[derive(Debug, Clone, Default)]
pub struct Exec {
    /// None: the sandbox's working directory.
    pub workdir: Option<String>,
    pub env: Vec<Var>,
    pub command: Vec<String>,
    /// Written to its stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// Streamed to its stdin after `stdin`, from where the file stands: a large
    /// input (the repository's tar stream) never whole in memory.
    pub stdin_file: Option<std::sync::Arc<std::fs::File>>,
}

/// A variable of an exec, and how its value may travel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Var {
    /// Through the client's environment, by name: never in a command line, which
    /// every local user can read. Secrets, and whatever is no name the client reads.
    ByName(String, String),
    /// On the command line: a name the client itself would read from its own
    /// environment (`task::worker_env::RESERVED`: proxies, `PATH`, ...), with a
    /// value that is no secret.
    Literal(String, String),
}
