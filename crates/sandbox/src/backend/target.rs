//! Where a host's sandboxes run, as a value: what `docker_cli` aims every call at and
//! `endpoint` reads back, or what another engine opens. Each engine has its own kind
//! of place (`docker_target::DockerDaemon`, `kubernetes::Cluster`), behind `Place`;
//! what an engine does with one (open, health, sweep, `hosts check|prepare`) is its
//! `engine::Engine`, chosen in `engines.rs`. Nothing here names an engine.

use std::any::Any;
use std::sync::Arc;

use agent_runner_core::process::Invocation;

/// Why a target's text (`--host NAME=…`, `runner.sandbox.host`, a `hosts:`
/// entry's `docker:`) names no place.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("{0:?} has a space or control character")]
    Space(String),
    #[error("{0:?}: no engine of this build takes it")]
    NoEngine(String),
    /// What its engine found wrong in it, in the engine's words.
    #[error(transparent)]
    Engine(Box<dyn std::error::Error + Send + Sync>),
}

/// An engine's kind of target: shown in messages, carried to a runner child.
pub trait Place: std::fmt::Debug + std::fmt::Display + Send + Sync + 'static {
    /// `invocation` (a docker call, or a runner child the orchestrator starts) aimed
    /// at this place, in its environment, never in its argv.
    fn apply(&self, invocation: Invocation) -> Invocation;
    /// Whether `other` is the same place.
    fn same(&self, other: &dyn Place) -> bool;
    /// For the engine that made it to find its own kind again.
    fn as_any(&self) -> &dyn Any;
}

/// Where a host's sandboxes run.
#[derive(Clone)]
pub struct Target(Arc<dyn Place>);

impl Target {
    /// The target at `place`.
    pub fn new(place: impl Place) -> Target {
        Target(Arc::new(place))
    }

    /// Its place, when it is of the kind `P`.
    pub fn place<P: Place>(&self) -> Option<&P> {
        self.0.as_any().downcast_ref::<P>()
    }

    /// `invocation` aimed at this target (`Place::apply`).
    pub fn apply(&self, invocation: Invocation) -> Invocation {
        self.0.apply(invocation)
    }
}

impl PartialEq for Target {
    fn eq(&self, other: &Target) -> bool {
        self.0.same(&*other.0)
    }
}

impl Eq for Target {}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}
