//! Egress by name (SPEC §17). With `runner.worker.network: allowlist`, the default,
//! the container has no network at all (`--network none`); its one way out is an
//! HTTP proxy that agent-runner runs on the host for the task's lifetime, which lets
//! through what `runner.worker.allow` names and records every connection.
//!
//! The flow:
//! - `rules`: allow entries and how they match. The list a task gets when it names
//!   none (the worker's auth mode, its configured base URLs) is a task setting's
//!   default: `task::default_allow`.
//! - `Egress::start`: `host_dir` makes a private directory (never in the repo) with
//!   the `bridge` helper in it and a watchdog that removes it should agent-runner
//!   die; `proxy` listens on a unix socket there.
//! - The container mounts that directory read-only and runs the bridge as its
//!   keep-alive (`bridge::command`): 127.0.0.1:3128 inside, the socket outside.
//!   Worker and test runs get the proxy variables (`bridge::env`).
//! - Each connection, in `proxy`: `request` reads the head → `policy` decides
//!   (`rules`, names resolved here, `address` classes) → 403 or 502, or connect and
//!   `relay` → `journal` (egress.jsonl, a stderr line per denied destination, the
//!   tally; `record` a line of the log; `repeats` sums a destination's connections
//!   after its first lines, so a flood of connections makes a few lines, not one
//!   each).
//! - `Egress::stop` closes everything and returns the `Summary` for the note's
//!   Egress section and the result's `egress`.
//!
//! The sandbox (`worker::docker`) is the only user, so every agent that runs in it —
//! worker runs, test runs, the codex Task Builder, and the Meta `codex-cli`
//! provider of §18 when it comes (its base URL goes into
//! `task::default_allow::codex`'s `also`) — is under the same rules.

mod address;
pub mod bridge;
mod host_dir;
mod journal;
mod policy;
mod proxy;
mod record;
mod relay;
mod repeats;
mod request;
pub(crate) mod rules;

use std::os::unix::net::UnixListener;
use std::path::Path;

pub use journal::{MAX_LOG_BYTES, NO_HOST, Summary, Tally};
pub use proxy::Settings;
pub use repeats::DETAIL_LINES;
pub use rules::{AllowList, Origin, Rule};

use crate::events::Events;
use agent_runner_core::fs::Dir;
use agent_runner_core::secret::Redactor;
use host_dir::HostDir;
use journal::Journal;
use proxy::Proxy;

/// The connection log's name in the task's log directory.
pub const LOG_FILE: &str = "egress.jsonl";

/// A task's proxy and its directory; see the module documentation.
pub struct Egress {
    dir: HostDir,
    proxy: Proxy,
}

impl Egress {
    /// Starts the proxy for `allow`, logging to `egress.jsonl` in `logs` (if given),
    /// masking `redactor`'s secrets, telling `events` of each denied connection.
    pub fn start(
        allow: &AllowList,
        logs: Option<&Dir>,
        redactor: Redactor,
        settings: Settings,
        events: Events,
    ) -> std::io::Result<Egress> {
        let log = match logs.map(|logs| logs.create(LOG_FILE)) {
            None => None,
            Some(Ok(file)) => Some(file),
            Some(Err(e)) => {
                log::warn!("cannot write the egress log: {e}");
                None
            }
        };
        let dir = HostDir::create(bridge::BINARY)?;
        let listener = UnixListener::bind(dir.socket())?;
        let proxy = Proxy::start(
            listener,
            allow.clone(),
            Journal::new(log, redactor)
                .telling(events)
                .bounded(settings.max_log_bytes),
            settings,
        )?;
        Ok(Egress { dir, proxy })
    }

    /// The host directory the container mounts read-only at `bridge::MOUNT`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the proxy (closing its connections), removes its directory, and
    /// returns what it did.
    pub fn stop(self) -> Summary {
        let summary = self.proxy.stop();
        self.dir.remove();
        summary
    }
}
