//! Egress by name (SPEC §17). With `runner.worker.network: allowlist`, the default,
//! the container has no network at all (`--network none`); its one way out is an
//! HTTP proxy that agent-runner runs on the host for the task's lifetime, which lets
//! through what `runner.worker.allow` names and records every connection.
//!
//! The flow:
//! - The allow entries and how they match are a setting (`agent_runner_settings::
//!   allow::rules`); the list a task gets when it names none (the worker's auth
//!   mode, its configured base URLs) is `task::default_allow`'s.
//! - The way in is the sandbox's carrier (`backend::Carrier`): locally a socket in a
//!   private host directory, mounted read-only into the container together with the
//!   helper that bridges 127.0.0.1:`PORT` inside to it (`backend::socket`), whose
//!   listener `Egress::start` takes; on a remote daemon the lifeline
//!   (`backend::lifeline`), whose helper carries each connection over the sandbox's
//!   stdio to the proxy's `door`. Worker and test runs get the proxy
//!   variables (`agent_runner_settings::allow::variables`).
//! - Each connection, in `proxy`: `request` reads the head → `policy` decides
//!   (the allow rules, names resolved here, `address` classes) → 403 or 502, or connect and
//!   `relay` → `journal` (egress.jsonl, a stderr line per denied destination, the
//!   tally; `record` a line of the log; `repeats` sums a destination's connections
//!   after its first lines, so a flood of connections makes a few lines, not one
//!   each).
//! - `Egress::stop` closes everything and returns the `Summary` for the note's
//!   Egress section and the result's `egress`.
//!
//! The sandbox (`worker::sandbox`) is the only user, so every agent that runs in it —
//! worker runs, test runs, the codex Task Builder, and the Meta `codex-cli`
//! provider of §18 when it comes (its base URL goes into
//! `task::default_allow::codex`'s `also`) — is under the same rules.

mod address;
mod journal;
mod policy;
mod proxy;
mod record;
mod relay;
mod repeats;
mod request;

use std::os::unix::net::UnixListener;

pub use journal::{MAX_LOG_BYTES, NO_HOST, Summary, Tally};
pub use policy::list_in;
pub use proxy::Settings;
pub use repeats::DETAIL_LINES;

use agent_runner_core::fs::Dir;
use agent_runner_core::secret::Redactor;
use agent_runner_settings::allow::AllowList;
use agent_runner_settings::events::Events;
use journal::Journal;
use proxy::Proxy;

/// The connection log's name in the task's log directory.
pub const LOG_FILE: &str = "egress.jsonl";

/// A task's proxy; see the module documentation.
pub struct Egress {
    proxy: Proxy,
}

impl Egress {
    /// Starts the proxy on `listener` (if any; else its `door` alone) for `allow`, logging to `egress.jsonl` in
    /// `logs` (if given), masking `redactor`'s secrets, telling `events` of each
    /// denied connection.
    pub fn start(
        listener: Option<UnixListener>,
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
        let proxy = Proxy::start(
            listener,
            allow.clone(),
            Journal::new(log, redactor)
                .telling(events)
                .bounded(settings.max_log_bytes)
                .quiet_about(settings.background.clone()),
            settings,
        )?;
        Ok(Egress { proxy })
    }

    /// Where a connection carried by the sandbox's lifeline comes in
    /// (`backend::lifeline`), under the same rules and log.
    pub fn door(&self) -> std::sync::Arc<dyn Fn(std::os::unix::net::UnixStream) + Send + Sync> {
        self.proxy.door()
    }

    /// Allows `also` besides the task's list for new connections (`task.setup.allow`
    /// while setup runs); None: the task's list alone again. Either way, every
    /// connection let through while the list until now was in force is closed: what
    /// setup opened does not outlive it.
    pub fn allow_also(&self, also: Option<AllowList>) {
        self.proxy.allow_also(also);
    }

    /// What the proxy did so far.
    pub fn summary(&self) -> Summary {
        self.proxy.summary()
    }

    /// Stops the proxy (closing its connections) and returns what it did.
    pub fn stop(self) -> Summary {
        self.proxy.stop()
    }
}
