//! What every request handler of one server shares: the workspace, the security
//! checks (with the token), the children it started.

use std::sync::Mutex;

use super::super::Workspace;
use super::children::Children;
use super::guard::Guard;

/// The state of one `agent-runner serve`.
pub struct App {
    pub ws: Workspace,
    pub guard: Guard,
    pub children: Children,
    /// Held while a run request checks and enqueues (see `api::run_task`).
    pub run_lock: Mutex<()>,
}
