//! Which engine runs this process's sandboxes: the one place that chooses it, as
//! `meta::open` chooses the Meta wire format. Everything above the backend (the
//! sandbox, the pipeline's bundler and grader, doctor's probes, `hosts`) gets its
//! `Backend` here and never names an engine.
//!
//! The engine follows from where the sandboxes run: no target, a `DOCKER_HOST` URL
//! or a docker context is a Docker daemon; `k8s://CONTEXT/NAMESPACE` a cluster
//! (`kubernetes/`, SPEC §25). A new engine is its file beside `docker.rs`, its kind
//! of target in `host::Target`, and its arm here.

use std::sync::Arc;
use std::time::Duration;

use super::host::Target;
use super::kubernetes::Kubernetes;
use super::sweep::Rule;
use super::{Backend, Docker};

/// The backend of the sandboxes of this process: of the host `aim` set
/// (`runner.sandbox.host`, a resumed session's host), else of the default daemon.
pub fn open() -> Arc<dyn Backend> {
    open_at(super::docker_cli::aimed())
}

/// The backend of the sandboxes on `target` (None: the engine's default).
pub fn open_at(target: Option<&Target>) -> Arc<dyn Backend> {
    match target {
        // The docker CLI reads the target from its environment (`Target::apply`).
        None | Some(Target::Url(_) | Target::Context(_)) => Arc::new(Docker::default()),
        // The tools come from this build's tools image, which the user has put
        // where the cluster pulls (`agent-runner tools image`).
        Some(Target::Kubernetes(cluster)) => {
            let cluster = cluster.clone().with_placement_env();
            let schedule = Duration::from_secs(cluster.schedule_timeout_sec.unwrap_or(300));
            Arc::new(
                Kubernetes::new(cluster)
                    .with_tools_image(&super::tools::image_name())
                    .with_schedule_timeout(schedule),
            )
        }
    }
}

/// The target `aim` set, if any.
pub fn aimed() -> Option<&'static Target> {
    super::docker_cli::aimed()
}

/// None when the engine of `target` answers its health check within 5 s (SPEC
/// §22: `docker version`, or `kubectl version` for a cluster); else why not.
pub fn health(target: &Target) -> Option<String> {
    match target {
        Target::Kubernetes(cluster) => Kubernetes::new(cluster.clone()).health(),
        _ => target.health(),
    }
}

/// Removes orphaned sandboxes of this process's engine; their names.
pub fn sweep_orphans() -> Vec<String> {
    open().sweep_orphans()
}

/// Removes what `rule` takes of the sandboxes on `target` (the orchestrator's
/// sweep of its hosts): a Docker host's containers and volumes, a cluster's Pods.
pub fn sweep_host(target: &Target, rule: Rule) -> Vec<String> {
    match target {
        Target::Kubernetes(cluster) => Kubernetes::new(cluster.clone()).sweep(rule),
        _ => super::sweep::sweep_host(target, rule),
    }
}

/// Aims every sandbox of this process at `target` (`runner.sandbox.host`, SPEC
/// §22); set once, before the first sandbox starts.
pub fn aim(target: Target) -> Result<(), super::docker_cli::AimedElsewhere> {
    super::docker_cli::aim(target)
}
