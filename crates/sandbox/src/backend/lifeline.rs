//! The lifeline carrier (SPEC §22): the sandbox's main process is the static helper
//! from the tools volume (`helper/lifeline.c`, run as `agent-runner-helper
//! lifeline`, PID 1 itself with no engine's init: `helper/init.c`), and its
//! stdin/stdout are the one stream between agent-runner and the
//! sandbox. Nothing of this machine is mounted, so it works on a remote daemon,
//! where it is the carrier with egress (`worker::sandbox`); locally the socket stays,
//! as `docker run -i`'s stdio carries far less than a unix socket
//! (`bench/lifeline.py`).
//!
//! - Closing the stream ends the sandbox, as the keep-alive's pipe does: the backend
//!   closes it first when it removes the sandbox (`Down::close`), and the kernel
//!   does when agent-runner dies.
//! - Egress: the helper listens on 127.0.0.1:`agent_runner_settings::allow::PORT` inside; each connection
//!   is a channel of the stream (`mux.rs`), handed on the host to the task's egress
//!   proxy (the door) as any connection, so the same rules and log apply; a channel
//!   names no address and can reach nothing else.
//! - Files (the agent's login, `deliver`) go down the stream once the sandbox is up
//!   (`attach`), into the sandbox's private tmpfs with mode 0600, owned by the
//!   worker's user (the helper runs as that user): never an image layer, a volume or
//!   a mount. The agent's home links point there.
//! - Expiry: the helper exits (ending the sandbox) when the expiry passed at start
//!   passes (the task's wall budget, or `DEFAULT_LIFE` without one, plus `MARGIN`);
//!   the container carries it as `agent-runner.expires` (unix seconds) for the sweep.
//!
//! The frames: `frame.rs` (and the C file's comment, the protocol's reference).

mod frame;
mod mux;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use mux::{Door, Down};

use super::tools::HELPER;
use super::{BackendError, Carrier, Instance, Main, Mount, Quiet};
use mux::Mux;

/// The label of a container's expiry, in unix seconds (read by the host sweep).
pub use super::sweep::LABEL_EXPIRES;
/// A sandbox's life when the task has no wall budget.
pub const DEFAULT_LIFE: Duration = Duration::from_secs(24 * 3600);
/// Added to the task's budget: its end (the Task Note, the removal) takes a while.
pub const MARGIN: Duration = Duration::from_secs(10 * 60);
/// Where delivered files go: the sandbox's private tmpfs (`worker::envelope`).
const FILES_DIR: &str = "/run/agent-runner/private";

/// The stream of a started sandbox whose main process is the lifeline: what it
/// writes (after its ready line) and the way down to its stdin.
pub struct Stream {
    pub up: Box<dyn Read + Send>,
    pub down: Down,
}

/// See the module documentation.
pub struct Lifeline {
    door: Option<Door>,
    expires: u64,
    /// (host file, path in the sandbox, the target the sandbox asked for).
    files: Vec<(PathBuf, String, String)>,
    mux: Option<Mux>,
    /// The program it is to look up (`Carrier::find_program`).
    find: Option<String>,
}

impl Lifeline {
    /// A lifeline whose channels go through `door` (None: no egress), ending at
    /// `expires`.
    pub fn new(door: Option<Door>, expires: SystemTime) -> Lifeline {
        Lifeline {
            door,
            expires: expires
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_secs().max(1)),
            files: Vec::new(),
            mux: None,
            find: None,
        }
    }

    /// The expiry of a sandbox of a task with `left` of its wall budget.
    pub fn expiry(left: Option<Duration>) -> SystemTime {
        SystemTime::now() + left.unwrap_or(DEFAULT_LIFE) + MARGIN
    }
}

impl Carrier for Lifeline {
    fn main(&self, links: &[(String, String)]) -> Main {
        let port = if self.door.is_some() {
            agent_runner_settings::allow::PORT
        } else {
            0
        };
        let mut args = vec!["lifeline".to_string()];
        args.extend(self.find.iter().map(|program| format!("find={program}")));
        args.extend([port.to_string(), self.expires.to_string()]);
        for (file, link) in links {
            let file = self
                .files
                .iter()
                .find(|(_, _, target)| target == file)
                .map_or(file, |(_, inside, _)| inside);
            args.extend([file.clone(), link.clone()]);
        }
        Main {
            entrypoint: HELPER.to_string(),
            args,
            own_init: true,
        }
    }

    fn mounts(&self) -> Vec<Mount> {
        Vec::new()
    }

    fn find_program(&mut self, program: &str) -> bool {
        self.find = Some(program.to_string());
        true
    }

    fn deliver(&mut self, file: &Path, target: &str) {
        let name = target.rsplit('/').next().unwrap_or("file");
        let inside = format!("{FILES_DIR}/login-{name}");
        self.files
            .push((file.to_path_buf(), inside, target.to_string()));
    }

    fn exec_env(&self) -> Vec<(&'static str, String)> {
        match self.door {
            Some(_) => agent_runner_settings::allow::variables::env(),
            None => Vec::new(),
        }
    }

    fn start_hint(&self, detail: &str) -> Option<String> {
        detail.contains(HELPER).then(|| {
            " (the lifeline helper could not run from the tools volume: `agent-runner doctor` \
             checks it)"
                .to_string()
        })
    }

    fn labels(&self) -> Vec<(String, String)> {
        vec![(LABEL_EXPIRES.to_string(), self.expires.to_string())]
    }

    fn streams(&self) -> bool {
        true
    }

    fn attach(&mut self, stream: Stream) -> Result<(), BackendError> {
        let mux = Mux::start(stream.up, stream.down, self.door.clone())
            .map_err(|e| BackendError::Io(format!("lifeline: cannot serve the stream: {e}")))?;
        let mux = self.mux.insert(mux);
        for (file, inside, _) in &self.files {
            // The user's own login file, never one the worker can reach.
            let content = std::fs::read(file).map_err(|e| {
                BackendError::Io(format!("lifeline: cannot read {}: {e}", file.display()))
            })?;
            mux.deliver(inside, &content).map_err(|why| {
                BackendError::Io(format!(
                    "lifeline: cannot deliver {} into the sandbox: {why}",
                    file.display()
                ))
            })?;
        }
        Ok(())
    }

    fn fault(&self) -> Option<String> {
        self.mux.as_ref().and_then(Mux::fault)
    }

    /// A QUIET frame, answered by QUIETED.
    fn quiet(&mut self, instance: &mut dyn Instance) -> Option<Result<Quiet, BackendError>> {
        let mux = self.mux.as_ref()?;
        Some(
            mux.quiet()
                .map_err(|e| e.to_string())
                .and_then(|answer| {
                    Quiet::parse(&answer).ok_or_else(|| format!("it answered {answer:?}"))
                })
                .map_err(|detail| BackendError::Failed {
                    command: format!(
                        "the sandbox's main process, asked to stop the others ({})",
                        instance.name()
                    ),
                    detail,
                }),
        )
    }

    fn close(self: Box<Self>) {
        if let Some(mux) = &self.mux {
            mux.stop();
        }
    }
}

#[cfg(test)]
mod microbench;
#[cfg(test)]
mod tests;
