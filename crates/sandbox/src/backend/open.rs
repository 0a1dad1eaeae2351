//! Which engine runs this process's sandboxes: the one place that opens its
//! `Backend`, as `meta::open` chooses the Meta wire format. Everything above the
//! backend (the sandbox, the pipeline's bundler and grader, doctor's probes, `hosts`)
//! gets its `Backend` here and never names an engine.
//!
//! The engine follows from where the sandboxes run, the process's target
//! (`host::Target`): no target is the default engine's default place (the Docker
//! daemon the environment names); a target is its engine's, found by
//! `engines.rs` among `ENGINES` (`mod.rs`: a Docker daemon's URL or context,
//! `docker_engine.rs`; `k8s://CONTEXT/NAMESPACE` a cluster, `kubernetes/`, SPEC
//! §25). A new engine is its file or folder implementing `engine::Engine`, its
//! `mod` line and its line in `ENGINES`; nothing here changes.

use std::sync::Arc;

use super::Backend;
use super::host::Target;
use super::sweep::Rule;

/// The backend of the sandboxes of this process: of the host `aim` set
/// (`runner.sandbox.host`, a resumed session's host), else of the default daemon.
pub fn open() -> Arc<dyn Backend> {
    open_at(super::docker_cli::aimed())
}

/// The backend of the sandboxes on `target` (None: the default engine's default).
pub fn open_at(target: Option<&Target>) -> Arc<dyn Backend> {
    match target {
        None => super::engines::open_default(),
        Some(target) => target.open(),
    }
}

/// The target `aim` set, if any.
pub fn aimed() -> Option<&'static Target> {
    super::docker_cli::aimed()
}

/// None when the engine of `target` answers its health check within 5 s (SPEC
/// §22: `docker version`, or `kubectl version` for a cluster); else why not.
pub fn health(target: &Target) -> Option<String> {
    target.health()
}

/// Removes orphaned sandboxes of this process's engine; their names.
pub fn sweep_orphans() -> Vec<String> {
    open().sweep_orphans()
}

/// Removes what `rule` takes of the sandboxes on `target` (the orchestrator's
/// sweep of its hosts): a Docker host's containers and volumes, a cluster's Pods.
pub fn sweep_host(target: &Target, rule: Rule) -> Vec<String> {
    target.sweep(rule)
}

/// Aims every sandbox of this process at `target` (`runner.sandbox.host`, SPEC
/// §22); set once, before the first sandbox starts.
pub fn aim(target: Target) -> Result<(), super::docker_cli::AimedElsewhere> {
    super::docker_cli::aim(target)
}
