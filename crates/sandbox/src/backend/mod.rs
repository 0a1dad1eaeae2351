//! The mechanism under the sandbox (`worker::Sandbox`): how a sandbox is started,
//! reached, fed and removed, apart from what a run does in it (SPEC §6, §9, §17,
//! §22). Three questions, each behind a trait, so that another answer is one file
//! plus its tests:
//!
//! - `Backend` (with the `Instance` it starts): which engine runs the sandbox.
//!   `docker.rs`, the docker CLI against a daemon: a `Spec` (`spec.rs`, the policy
//!   in words every engine can render) becomes `docker run -i --rm --init ...` with
//!   our pipe as the main process's stdin; an `Exec` becomes `docker exec -i` with
//!   secrets by name; the instance knows whether it is alive (its held `docker run`
//!   ended?), why an exec failed in docker itself, and how to go (stdin closed →
//!   `--rm`; `docker rm -f` as the fallback; `watchdog.sh` should we be killed while
//!   its main process is frozen). `sweep.rs`: its labels, and the orphans of dead
//!   owners (or expired) removed at start; on a host while the orchestrator runs,
//!   only what is both (`sweep::Rule`). `docker_cli.rs`: the one place every docker call is
//!   made, each with a deadline. `endpoint.rs`: which daemon the CLI reaches, named
//!   in messages, and plain `tcp://` beyond the loopback refused (SPEC §22).
//!   `Instance::lost`: a `docker version` within 5 s when an exec reached its limit
//!   or failed without a word, and on a daemon off this machine beside every call,
//!   exec or start that runs longer than 10 s (`daemon::watched`); no answer → `host lost: …`,
//!   remembered, and the rest of the end (the stop, the removal, the bring-back)
//!   no longer waits on that host.
//! - `Transport`: how the repository gets in and the work out, and where the checks
//!   of what the worker wrote run. `bind.rs`: the repository bind-mounted read-write,
//!   `.agent-runner/` read-only over it, `.git`'s configuration read-only
//!   (`git_dir.rs`), the agent's session directory; the work is in place, so after
//!   each run and once more when the sandbox is gone the repository is swept on the
//!   host (`privileges.rs`: set-id bits, device nodes; `git_dir`'s redirect).
//!   Before the first mount (`Transport::prepare`), `locality.rs` proves the daemon
//!   sees this machine's files (a random token read back by a container of its), or
//!   refuses. `copy.rs` (the default for a daemon off this machine's unix socket,
//!   `copy::chosen`): nothing of the host mounted; a clone of ours and the working
//!   tree copied into a per-attempt volume on the daemon's host (one tar stream,
//!   `tar.rs`, into one `docker cp -a -` through a created container); `after_run`
//!   has nothing to sweep here; `finish` runs the
//!   bundler (`bundler.sh`, the pipeline's too) on that host with the volume
//!   read-only, reads the bundle out (`bundle_out.rs`, bounded as it streams) and lands it (`landing.rs`: checked in a
//!   landing repository of ours, then the pack and the ref written) as the branch
//!   `agent-runner/<id>`, told by `brought_back`; an image without git gets its
//!   tree read out as a tar stream (`untar.rs`) and committed here (`tree_back.rs`). Its volumes carry the sandbox's
//!   labels; `sweep.rs` removes those of dead owners. The worker's session there
//!   is a volume of the task on the daemon's host (`session_volume.rs`), kept
//!   across runs and removed when the task is COMPLETE (`forget_session`) or by
//!   the sweeps once it expired. A named volume (that session, a cache) is
//!   mounted only when its labels say it is the one meant (`volume_labels.rs`).
//! - `Carrier`: the link between agent-runner and the running sandbox: its main
//!   process (the keep-alive that ends it when our pipe closes), the way out to the
//!   egress proxy, and how host files (the agent's login) reach it. `lifeline.rs`
//!   (on a remote daemon, `Backend::remote`, or the copy transport): the static helper from
//!   the tools volume (`helper/lifeline.c`) is the main process and its
//!   stdin/stdout one framed stream (`Spec::stream`, `Started::stream`, served by
//!   `Carrier::attach`): the egress connections as channels to the proxy's door
//!   (`lifeline/mux.rs`, frames read as hostile in `lifeline/frame.rs`), the login
//!   files into the private tmpfs, the expiry. `socket.rs` otherwise (locally its
//!   egress is far faster): the static helper (`helper/bridge.c`) from a private
//!   host directory (`host_dir.rs`) mounted read-only, with the proxy's unix socket
//!   when there is egress (`keepalive.sh` only where no host directory can be
//!   mounted); login files mounted read-only. Either helper is the sandbox's PID 1,
//!   with no engine's init (`Main::own_init`, `helper/init.c`): non-dumpable, so
//!   the worker can neither take it over nor hide in it, and after each command
//!   it kills every other process when agent-runner asks (`Carrier::quiet`,
//!   `quiet.rs`).
//!
//! Which engine: each is a `Backend` plus an `engine::Engine` beside it (the Docker
//! engine's `docker_engine.rs`, over its target `docker_target.rs`; the
//! Kubernetes engine's `kubernetes/entry.rs`, over `kubernetes/cluster.rs`): its
//! kind of target (`target::Place`) read from a target's text and from its
//! `hosts:` entry, its backend opened there, its health check, its sweep of a host,
//! its rows of `hosts check|prepare` and, where `doctor` cannot check it as a Docker
//! daemon, its own checks. `ENGINES` below lists the engines once (the default
//! first), and `engines.rs` hands each question about a `host::Target` to the
//! engine whose place it is (`Target::parse`, `health`, `sweep`, `doctor_checks`,
//! `HostSpec`'s rows). `open.rs` (`backend::open`) opens the process's backend from
//! its target; everything above this module gets its `Backend` there and asks a
//! `Target`, never an engine by name. A new engine is its file (or folder) here,
//! implementing `Backend` and `Engine`, its `mod` line and its line in `ENGINES`,
//! and its setting: its key of a `hosts:` entry, a field of `HostEntry`.
//!
//! Remote hosts (`host.rs`): a host by name, where its sandboxes run a `Target`
//! carried in every call's environment (`Target::apply`: a Docker daemon's
//! `DOCKER_HOST`/`DOCKER_CONTEXT`, a cluster's `AGENT_RUNNER_SANDBOX_HOST`); the
//! orchestrator's placement gives each attempt's runner its host that way.
//! `host_entry.rs`: a workspace's `hosts:` entry, `{name, <engine>: …, slots}`,
//! each engine's key a field typed as its engine reads it.
//! `host_check.rs`: the use case of `hosts check|prepare`, each host's row by its
//! engine, all at once (a Docker daemon's: health, image, tools volume, runtimes,
//! locality; the image and the tools loaded where missing).
//!
//! Beside them, `tools.rs`: the tools volume of the engine's host (the pinned agents
//! and the static helper, SPEC §21), which `Backend::tools_volume` has filled on
//! first use and every sandbox mounts read-only at `/agent-runner-tools`
//! (`Mount::volume`); a fill's container carries owner labels and an expiry, so a
//! killed fill's is swept by the next fill.
//!
//! The sandbox (`worker::sandbox`) asks the transport for its mounts and the carrier
//! for its main process, mounts and variables, adds the policy of its own
//! (capabilities, limits, labels, the private tmpfs, which variables go by name),
//! and hands the `Spec` to the backend; each run is an `Exec` on the instance; after
//! each run the transport checks what the worker wrote; at the end the instance is
//! removed, the egress proxy stopped, the carrier's directory removed, and the
//! transport finishes. The pipeline's bundler and `doctor`'s probes start their
//! containers through the same backend.
//!
//! Kubernetes (`kubernetes/`, SPEC §25) is the second engine: `start` renders the
//! `Spec` as a Pod (`kubernetes/pod.rs`) and holds `kubectl attach -i` as the
//! lifeline; `exec` is `kubectl exec -i` with the variables on stdin;
//! `sweep_orphans` lists Pods by label. Its sandboxes keep no volume of ours
//! (`Backend::files_by_exec`), so its transport is `exec_copy.rs`: the repository
//! in by an exec once the sandbox runs (`Transport::started`), the work out by an
//! exec before it goes (`Transport::before_removal`); its carrier the lifeline.

mod bind;
mod bundle_out;
mod carrier;
mod control;
pub mod copy;
pub(crate) mod daemon;
mod docker;
pub mod docker_cli;
mod docker_engine;
pub mod docker_target;
pub(crate) mod elf;
pub mod endpoint;
pub mod engine;
mod engines;
mod error;
mod exec_copy;
mod file_sink;
mod git_dir;
pub mod host;
pub mod host_check;
mod host_dir;
pub mod host_entry;
pub mod kubernetes;
pub(crate) mod main_exec;
/// The Kubernetes engine's target, where it was before the engine had its folder.
pub use kubernetes::cluster;
pub mod landing;
pub mod lifeline;
mod locality;
mod open;
pub(crate) mod outside;
pub mod privileges;
pub(crate) mod pulled;
mod quiet;
pub mod runtime;
pub mod seccomp;
mod session_volume;
mod socket;
mod spec;
pub mod sweep;
mod tar;
pub mod target;
pub mod tools;
pub mod tools_image;
mod tree_back;
pub(crate) mod untar;
mod volume_labels;

use std::path::Path;
use std::time::Duration;

pub(crate) use bind::Bind;
pub use copy::{BUNDLER_SCRIPT, BroughtBack};
pub(crate) use copy::{Copy, CopyTask};
pub use docker::Docker;
pub use docker_cli::Output;
pub use error::{BackendError, CLUSTER_IMAGE, DOCKER_IMAGE};
pub(crate) use exec_copy::ExecCopy;
pub use lifeline::Lifeline;
pub use open::{aim, aimed, health, open, open_at, sweep_host, sweep_orphans};
pub use quiet::Quiet;
pub use socket::SocketLink;
pub use spec::{Confinement, Exec, Main, Mount, Net, Ready, Spec, Tmpfs, Var, Volume};
pub use tar::TarWriter;

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{Capture, Finished, Held, HeldWait, Limits, Stop};
use privileges::Finding;

/// Every engine of sandboxes (`engine::Engine`, asked through `engines.rs`), the
/// default first (Docker: no target, or a text no other engine's scheme claims).
/// A new engine is its `mod` line above and its line here.
static ENGINES: &[&dyn engine::AnyEngine] = &[
    // The default: no target, a URL or a docker context (`docker:` in `hosts:`).
    &docker_engine::DOCKER,
    // `k8s://CONTEXT/NAMESPACE` (`kubernetes:` in `hosts:`, SPEC §25).
    &kubernetes::entry::KUBERNETES,
];

/// Where the repository is in every sandbox, whatever the transport.
pub(crate) const PROJECT_DIR: &str = "/workspace/project";
/// Where the agent's session directory is in the sandbox (`worker::session`).
pub(crate) const SESSION_DIR: &str = "/run/agent-runner/session";

/// A container engine, driven through its CLI; see the module documentation.
pub trait Backend: Send + Sync {
    /// Starts a sandbox from `spec`. With `spec.ready`, returns once its main process
    /// said so (anything left of a failed start removed); else at once.
    fn start(&self, spec: &Spec) -> Result<Started, BackendError>;
    /// Fetches `image`, which is missing where sandboxes start.
    fn pull(&self, image: &str, interrupt: Interrupt) -> Result<(), BackendError>;
    /// Whether `image` is where sandboxes start, without fetching it (an
    /// evaluation's configs are checked before any run). An engine that cannot
    /// tell says true: its sandboxes' start says it then.
    fn has_image(&self, _image: &str, _interrupt: Interrupt) -> Result<bool, BackendError> {
        Ok(true)
    }
    /// The ID of `image` where sandboxes start, when the engine can say it at once
    /// (a sandbox may then be started from that ID, so that it is the one named);
    /// None: not there, or not known.
    fn image_id(&self, _image: &str, _interrupt: Interrupt) -> Option<String> {
        None
    }
    /// Runs `spec` to its end within `wall` (nothing held): what it printed. Only an
    /// engine that cannot be run is an error.
    fn run_once(
        &self,
        spec: &Spec,
        wall: Duration,
        interrupt: Interrupt,
    ) -> Result<Output, BackendError>;
    /// Removes the sandboxes whose owner is provably gone (by their labels, never by
    /// name); their names.
    fn sweep_orphans(&self) -> Vec<String>;
    /// Whether a sandbox's files can be read from outside it, by its name, with no
    /// process inside involved (`docker cp`, `docker diff`): the agent's files are
    /// then pinned and checked before each run (`worker::agent_files`).
    fn reads_from_outside(&self) -> bool {
        false
    }

    /// The tools volume on this engine's host (`tools.rs`), filled first if it is
    /// not there yet: its name, to mount read-only at `tools::TOOLS_DIR`. None: this
    /// engine has none.
    fn tools_volume(&self, _interrupt: Interrupt) -> Result<Option<String>, BackendError> {
        Ok(None)
    }
    /// The file `path` as a container of `spec` would see it, read without running
    /// anything in it (an image with no programs): its content, or why not. Only an
    /// engine that `reads_from_outside` can.
    fn read_unstarted(&self, _spec: &Spec, _path: &str) -> Result<Output, BackendError> {
        Err(BackendError::Io(
            "this engine cannot read a container's files from outside".into(),
        ))
    }
    /// What the task's note must say of this engine's sandboxes so far (a
    /// cluster that does not enforce egress, accepted by its entry).
    fn notices(&self) -> Vec<String> {
        Vec::new()
    }
    /// Whether the engine's sandboxes keep no volume of ours once they are gone
    /// (a Pod's `emptyDir`s go with it): the repository then goes in, and the
    /// work comes out, through execs in the running sandbox (`exec_copy.rs`).
    fn files_by_exec(&self) -> bool {
        false
    }
    /// Whether the engine keeps a task's worker session across its sandboxes
    /// although they keep no volume of ours (`files_by_exec`): a cluster whose
    /// entry names `session_storage_class` (SPEC §25 "Resume").
    fn keeps_sessions(&self) -> bool {
        false
    }
    /// The worker session of task `task_id` (`key`: the digest that tells it from
    /// every other, `session_volume.rs`) kept by the engine, made ready before a
    /// sandbox starts: with `fresh`, a new one (what a run before left removed);
    /// else the one the runs before left, checked to be this task's, or a new one.
    /// Its mount at `SESSION_DIR`; None: the engine keeps none (`keeps_sessions`).
    fn session_volume(
        &self,
        _task_id: &str,
        _key: &str,
        _fresh: bool,
    ) -> Result<Option<Mount>, BackendError> {
        Ok(None)
    }
    /// Removes the worker session `key` that `session_volume` made: the task is
    /// finished.
    fn forget_session_volume(&self, _key: &str) {}
    /// Whether the engine's daemon may be on another machine, where nothing of
    /// this host can be mounted (the carrier is then the lifeline).
    fn remote(&self) -> bool {
        false
    }
    /// The runtime `name` (`runner.sandbox.runtime`; None: the engine's default)
    /// as the engine has it, where it says: its name and what it runs for it (a
    /// Docker daemon's registered path or shim, `/usr/bin/runsc` under any name; a
    /// RuntimeClass's handler), so that gVisor is known by what it is, not by what
    /// it is called.
    fn resolve_runtime(&self, _name: Option<&str>) -> Option<(String, Vec<String>)> {
        None
    }
    /// The engine's daemon in words a message can name (`DOCKER_HOST=…`, the
    /// context).
    fn daemon(&self) -> String {
        "the container engine".into()
    }
    /// The named volumes that carry the label `key`, each with the values of its
    /// labels `values` (empty where it lacks one): the caches (`worker::caches`).
    fn labelled_volumes(
        &self,
        _key: &str,
        _values: &[&str],
    ) -> Result<Vec<LabelledVolume>, BackendError> {
        Err(BackendError::Io(
            "this engine keeps no named volumes".into(),
        ))
    }
    /// Removes the named volume `name`.
    fn remove_volume(&self, _name: &str) -> Result<(), BackendError> {
        Err(BackendError::Io(
            "this engine keeps no named volumes".into(),
        ))
    }
}

/// A named volume as `Backend::labelled_volumes` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelledVolume {
    pub name: String,
    /// The values of the labels asked for, in their order.
    pub values: Vec<String>,
}

/// A sandbox just started.
pub struct Started {
    pub instance: Box<dyn Instance>,
    /// The rest of the ready line (`Spec::ready`); empty without one.
    pub ready: String,
    /// With `Spec::stream`: the main process's stdin and stdout (the lifeline).
    pub stream: Option<lifeline::Stream>,
}

/// The held main process of an instance, in a mutex so that the instance's execs
/// can run beside each other (`Instance: Sync`).
fn held_mut(held: &mut std::sync::Mutex<Held>) -> &mut Held {
    held.get_mut().unwrap_or_else(|e| e.into_inner())
}

/// The last of what the held main process wrote on stderr.
fn held_stderr(held: &std::sync::Mutex<Held>) -> String {
    held.lock().unwrap_or_else(|e| e.into_inner()).stderr()
}

/// A running sandbox; `Sync`, so that independent execs can run beside each
/// other (the copy's stream in and the program's probe).
pub trait Instance: Send + Sync {
    /// Its name in the engine.
    fn name(&self) -> &str;
    /// Runs `exec` in it under `limits` (stopped by `stop` when one is reached), its
    /// output into `capture`.
    fn exec(
        &self,
        exec: Exec,
        limits: &Limits,
        capture: &mut Capture,
        stop: Stop,
    ) -> Result<Finished, BackendError>;
    /// False once it is gone or the engine's connection dropped.
    fn is_alive(&mut self) -> bool;
    /// The error for a sandbox that is gone, with the engine's last words.
    fn gone(&self) -> BackendError;
    /// The error of a lost host when the engine does not answer a health check
    /// within seconds (SPEC §22); remembered, so the rest of the sandbox's end does
    /// not wait on it.
    fn lost(&self) -> Option<BackendError> {
        None
    }
    /// Why an exec failed in the engine itself, not in the command (`stderr`: the
    /// exec's): the sandbox gone, the engine down, an `image` unable to run it.
    fn diagnose(&mut self, image: &str, stderr: &str) -> BackendError;
    /// Sends a line to the main process's stdin.
    fn send_line(&mut self, line: &str) -> std::io::Result<()>;
    /// Waits for a line of the main process that starts with `prefix`; its rest.
    fn read_line(
        &mut self,
        prefix: &str,
        within: Duration,
        interrupt: Interrupt,
    ) -> Result<String, HeldWait>;
    /// The last of what the main process (or the engine) wrote on stderr.
    fn stderr(&self) -> String;
    /// Ends it: our pipe closed, so its main process ends and the engine removes
    /// it; removed by force when that takes longer than `within`.
    fn remove(self: Box<Self>, within: Duration) -> Removal;
}

/// How an instance's removal went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removal {
    pub took: Duration,
    /// The engine may still have it: it did not confirm the removal in time (a
    /// Docker daemon: "no such container"), or did not accept it (a cluster's
    /// delete, which is not waited for), or its host did not answer. A sweep of
    /// its owner's leftovers takes it later.
    pub left: bool,
}

/// How the repository gets into the sandbox and the work out of it; see the module
/// documentation.
pub(crate) trait Transport: Send {
    /// Before the first start of a sandbox of `image` on `backend`: what must hold
    /// there (for the bind mount: the daemon sees this machine's files; proven by
    /// `carrier`'s main process as it starts where it can). Called again before
    /// each start; what is done is not done twice. Without a carrier: what needs
    /// none, ahead of the start (the copy's filling, beside the tools volume's
    /// lookup).
    fn prepare(
        &mut self,
        backend: &dyn Backend,
        image: &str,
        interrupt: Interrupt,
        carrier: Option<&mut dyn Carrier>,
    ) -> Result<(), BackendError>;
    /// The sandbox `instance` started; its main process said `said` after its
    /// pid. An error: what `prepare` left to the start does not hold, or what
    /// goes in through an exec (`exec_copy.rs`) did not (the sandbox must go).
    fn started(
        &mut self,
        _backend: &dyn Backend,
        _said: Option<&str>,
        _instance: &dyn Instance,
    ) -> Result<(), BackendError> {
        Ok(())
    }
    /// The sandbox `instance` is about to go, still running, quiet after the
    /// last run: what comes out through an exec comes out now (`exec_copy.rs`).
    fn before_removal(&mut self, _instance: &dyn Instance) {}
    /// The start failed with `detail`: the error to report instead, if the
    /// failure says what `prepare` left to the start does not hold.
    fn start_failed(&mut self, _backend: &dyn Backend, _detail: &str) -> Option<BackendError> {
        None
    }
    /// What the sandbox mounts for the repository and the agent's session, made
    /// ready on the host; an error when the repository cannot be protected.
    fn mounts(&mut self) -> Result<Vec<Mount>, BackendError>;
    /// After each run, the sandbox quiet: makes what the worker wrote safe for the
    /// host. What was found (and fixed, or not).
    fn after_run(&mut self) -> Vec<Finding>;
    /// Once the sandbox is gone, so nothing inside can undo it: the work comes back.
    fn finish(&mut self) -> Vec<Finding>;
    /// Where `finish` left the work, for a transport that brings it back (copy).
    fn brought_back(&mut self) -> Option<BroughtBack> {
        None
    }
    /// The task is finished for good: the worker's session it kept on the
    /// sandbox's host (copy) goes. (The bind mount's is the runner's directory.)
    fn forget_session(&mut self) {}
    /// A run's agent was found changed (SPEC §27): nothing of the work is brought
    /// back. (The bind mount's work is in the working tree already.)
    fn discard(&mut self) {}
}

/// The link between agent-runner and a running sandbox; see the module
/// documentation.
pub trait Carrier: Send {
    /// The sandbox's main process. It prepares the agent's home first: for each
    /// `(file, link)` of `links`, `link` (under HOME) made a link to `file` when it
    /// is there, its directory either way. Then it prints `<ready prefix><pid>` and
    /// ends the sandbox when our end of its stdin closes.
    fn main(&self, links: &[(String, String)]) -> Main;
    /// What it mounts: its own pieces, and the files delivered.
    fn mounts(&self) -> Vec<Mount>;
    /// Makes the host's `file` readable at `target` in the sandbox.
    fn deliver(&mut self, file: &Path, target: &str);
    /// The variables every exec gets (the proxy's, with egress).
    fn exec_env(&self) -> Vec<(&'static str, String)>;
    /// What to add to the message of a start that failed with `detail`.
    fn start_hint(&self, detail: &str) -> Option<String>;
    /// Removes what it made on the host, once the sandbox and the proxy are gone.
    fn close(self: Box<Self>);
    /// Labels of the sandbox (its expiry).
    fn labels(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Whether its main process speaks on its stdio once ready (`Spec::stream`),
    /// which `attach` then serves.
    fn streams(&self) -> bool {
        false
    }
    /// Serves the started sandbox's stream (and delivers its files through it).
    fn attach(&mut self, _stream: lifeline::Stream) -> Result<(), BackendError> {
        Ok(())
    }
    /// Why it ended the sandbox itself (the stream broke the protocol), if it did.
    fn fault(&self) -> Option<String> {
        None
    }
    /// Has the main process read the file at `path` in the sandbox as it starts
    /// and say the token in it after its pid in the ready line (`locality.rs`).
    /// False: this carrier's main process cannot (the bridge can; the image's
    /// keep-alive and the lifeline are not asked).
    fn prove_locality(&mut self, _path: &str) -> bool {
        false
    }
    /// Has the main process look `program` up as the image's `/bin/sh` would (SPEC
    /// §21's preflight of the test command) and end its ready line in
    /// `program=found` when it found it for certain (`program=unknown` otherwise:
    /// the shell is asked then). False: this carrier's main process cannot (the
    /// bridge can).
    fn find_program(&mut self, _program: &str) -> bool {
        false
    }
    /// Has the main process of the started sandbox `instance` kill every other
    /// process in it (`quiet.rs`). None: this carrier's main process cannot (the
    /// image's keep-alive under the engine's init).
    fn quiet(&mut self, _instance: &mut dyn Instance) -> Option<Result<Quiet, BackendError>> {
        None
    }
    /// Where commands are started by the main process instead of the engine's
    /// exec (`main_exec.rs`). None: this carrier's main process cannot (the lifeline,
    /// the image's keep-alive).
    fn main_exec(&self) -> Option<main_exec::MainExec> {
        None
    }
}

/// The line the keep-alive (or the helper) prints once ready, before its pid.
pub(crate) const READY: &str = "agent-runner-ready ";
/// The word that ends the ready line when the main process found the program it
/// was asked to (`Carrier::find_program`).
pub(crate) const PROGRAM_FOUND: &str = "program=found";
