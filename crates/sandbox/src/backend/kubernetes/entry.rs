//! The Kubernetes engine as the code above reaches it through a target
//! (`engine::Engine`, SPEC §25): a `Cluster` read from `k8s://CONTEXT/NAMESPACE` or
//! from `hosts:`' `kubernetes:` entry, carried to a runner child in its environment;
//! its backend, health check (`kubectl version` within 5 s), sweep of its Pods and
//! claims, its rows of `hosts check|prepare` (what the backend needs there; the
//! seccomp profile installed on its nodes), and `doctor`'s checks of it.

use std::sync::Arc;
use std::time::Duration;

use super::super::engine::{Engine, EngineCheck, EntryPart, ImageAnswer, PullError};
use super::super::host::{HostError, HostSpec, SANDBOX_HOST_VAR};
use super::super::host_check::{Ask, Prepare, PrepareError, Row, Unanswered};
use super::super::sweep::Rule;
use super::super::target::{Place, Target, TargetError};
use super::super::{Backend, BackendError, tools};
use super::cluster::{self, Cluster, SCHEME};
use super::{Kubernetes, seccomp_profile};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::Invocation;
use serde::{Deserialize, Serialize};

/// The Kubernetes engine's entry in `ENGINES` (`backend/mod.rs`).
pub(crate) struct KubernetesEngine;

/// The Kubernetes engine.
pub(crate) static KUBERNETES: KubernetesEngine = KubernetesEngine;

/// `hosts[i].kubernetes`: the cluster's context and namespace, the kubeconfig
/// (default: kubectl's own), how long a Pod may wait for a node, whether a cluster
/// that does not enforce NetworkPolicy is accepted, and the StorageClass of the
/// claims that keep workers' sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClusterEntry {
    context: String,
    namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kubeconfig: Option<std::path::PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    schedule_timeout_sec: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    egress_unenforced: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session_storage_class: Option<String>,
}

/// What is wrong in a cluster's entry, besides its names (`ClusterError`).
#[derive(Debug, thiserror::Error)]
enum EntryError {
    #[error("0: must be at least 1")]
    NoTime,
    #[error("{0:?}: the only value is `accept`")]
    Egress(String),
}

impl ClusterEntry {
    /// The entry as a cluster; errors name the field under `at`.
    fn cluster(&self, at: &str) -> Result<Cluster, HostError> {
        let mut cluster = Cluster::new(&self.context, &self.namespace, self.kubeconfig.clone())
            .map_err(|e| HostError::field(at, e))?;
        if self.schedule_timeout_sec == Some(0) {
            return Err(HostError::field(
                format!("{at}.schedule_timeout_sec"),
                EntryError::NoTime,
            ));
        }
        cluster.schedule_timeout_sec = self.schedule_timeout_sec;
        cluster.egress_unenforced = match self.egress_unenforced.as_deref() {
            None => false,
            Some("accept") => true,
            Some(other) => {
                return Err(HostError::field(
                    format!("{at}.egress_unenforced"),
                    EntryError::Egress(other.to_string()),
                ));
            }
        };
        cluster.session_storage_class = self
            .session_storage_class
            .as_deref()
            .map(Cluster::storage_class)
            .transpose()
            .map_err(|e| HostError::field(format!("{at}.session_storage_class"), e))?;
        Ok(cluster)
    }
}

impl EntryPart for ClusterEntry {
    fn target(&self, at: &str) -> Result<Target, HostError> {
        Ok(Target::new(self.cluster(at)?))
    }
}

impl Place for Cluster {
    // A cluster's sandboxes are driven by kubectl: a runner started with this is
    // aimed there as by `runner.sandbox.host`; what docker calls are left (none of
    // a task's) go where the environment says.
    fn apply(&self, invocation: Invocation) -> Invocation {
        let mut invocation = invocation.env(SANDBOX_HOST_VAR, &self.to_string());
        if let Some(config) = &self.kubeconfig {
            invocation = invocation.env("KUBECONFIG", &config.display().to_string());
        }
        if let Some(secs) = self.schedule_timeout_sec {
            invocation = invocation.env(cluster::SCHEDULE_TIMEOUT_VAR, &secs.to_string());
        }
        if self.egress_unenforced {
            invocation = invocation.env(cluster::EGRESS_UNENFORCED_VAR, "accept");
        }
        if let Some(class) = &self.session_storage_class {
            invocation = invocation.env(cluster::SESSION_STORAGE_CLASS_VAR, class);
        }
        invocation
    }

    fn same(&self, other: &dyn Place) -> bool {
        other.as_any().downcast_ref::<Cluster>() == Some(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Target {
    /// The cluster, when this target is one.
    pub fn cluster(&self) -> Option<&Cluster> {
        self.place::<Cluster>()
    }
}

impl Engine for KubernetesEngine {
    type Place = Cluster;

    fn key(&self) -> &'static str {
        "kubernetes"
    }

    fn entry_form(&self) -> &'static str {
        "{context, namespace}"
    }

    fn scheme(&self) -> Option<&'static str> {
        Some(SCHEME)
    }

    fn parse(&self, text: &str) -> Result<Target, TargetError> {
        match Cluster::parse(text) {
            Some(cluster) => cluster
                .map(Target::new)
                .map_err(|e| TargetError::Engine(Box::new(e))),
            // `Target::parse` gives this engine only texts of its scheme.
            None => Err(TargetError::Engine(Box::new(cluster::ClusterError::Form(
                text.to_string(),
            )))),
        }
    }

    // The tools come from this build's tools image, which the user has put where
    // the cluster pulls (`agent-runner tools image`).
    fn open(&self, place: &Cluster) -> Arc<dyn Backend> {
        let cluster = place.clone().with_placement_env();
        let schedule = Duration::from_secs(cluster.schedule_timeout_sec.unwrap_or(300));
        Arc::new(
            Kubernetes::new(cluster)
                .with_tools_image(&tools::image_name())
                .with_schedule_timeout(schedule),
        )
    }

    // A cluster pulls its images itself and cannot be asked beforehand: its Pods
    // say it when the image is not where it pulls (SPEC §25).
    fn has_image(
        &self,
        _place: &Cluster,
        _target: &Target,
        _image: &str,
        _deadline: Duration,
        _interrupt: Interrupt,
    ) -> ImageAnswer {
        ImageAnswer::CannotTell
    }

    fn pull(
        &self,
        place: &Cluster,
        _target: &Target,
        _image: &str,
        _deadline: Duration,
        _interrupt: Interrupt,
    ) -> Result<(), PullError> {
        Err(PullError::Refused(super::pulls_itself(place)))
    }

    fn tells_images(&self) -> bool {
        false
    }

    fn pins_sessions(&self) -> bool {
        false
    }

    fn health(&self, place: &Cluster, _target: &Target) -> Option<String> {
        Kubernetes::new(place.clone()).health()
    }

    fn sweep(&self, place: &Cluster, _target: &Target, rule: Rule) -> Vec<String> {
        Kubernetes::new(place.clone()).sweep(rule)
    }

    fn check(&self, place: &Cluster, host: &HostSpec, _ask: &Ask<'_>, row: Row) -> Row {
        check_cluster(row, place, &host.target)
    }

    fn prepare(
        &self,
        place: &Cluster,
        host: &HostSpec,
        ask: &Prepare<'_>,
    ) -> Result<String, PrepareError> {
        prepare_cluster(host, place, ask.interrupt)
    }

    /// The API server, the namespace, the rights the backend needs there, the
    /// tools image, egress enforcement (a probe Pod). The worker image is the
    /// cluster's to pull: not looked at.
    fn doctor(&self, place: &Cluster) -> Option<Vec<EngineCheck>> {
        let backend = Kubernetes::new(place.clone().with_placement_env())
            .with_tools_image(&tools::image_name());
        let fix = format!("see docs/kubernetes.md (\"What a cluster needs\") for {place}");
        let checks = backend.check().into_iter().map(|finding| EngineCheck {
            what: finding.what,
            seen: finding.seen,
            problem: finding.problem.map(|problem| (problem, fix.clone())),
        });
        Some(checks.collect())
    }
}

/// A cluster's row (SPEC §25): the API server's version, or the first thing the
/// backend needs that does not hold there (namespace, rights, tools image). The
/// cluster pulls its images itself: they are not asked for here. Its sandboxes
/// are copied into by exec.
fn check_cluster(mut row: Row, cluster: &Cluster, target: &Target) -> Row {
    let backend = Kubernetes::new(cluster.clone()).with_tools_image(&tools::image_name());
    let found = backend.check();
    let mut version = found.first().map(|f| f.seen.clone()).unwrap_or_default();
    if let Some(egress) = found.iter().find(|f| f.what.starts_with("egress")) {
        version = format!("{version}, egress {}", egress.seen);
    }
    if let Some(seccomp) = found.iter().find(|f| f.what == "seccomp") {
        version = format!("{version}, seccomp: {}", seccomp.seen);
    }
    let problems: Vec<String> = found
        .iter()
        .filter_map(|f| f.problem.as_ref().map(|p| format!("{}: {p}", f.what)))
        .collect();
    row.version = match problems.is_empty() {
        true => Ok(agent_runner_core::text::escape_controls(
            &agent_runner_core::text::cut_chars(&version, 120),
        )),
        false => Err(Unanswered::Refused {
            target: target.clone(),
            why: problems.join("; "),
        }),
    };
    row.image = row.version.is_ok().then_some(true);
    row.locality = "copy (exec)";
    row
}

/// A cluster prepared (SPEC §25): agent-runner's seccomp profile installed on its
/// nodes and proven there (`kubernetes/seccomp_profile.rs`). Its images are the
/// cluster's to pull: said, not done.
fn prepare_cluster(
    host: &HostSpec,
    cluster: &Cluster,
    interrupt: Interrupt,
) -> Result<String, PrepareError> {
    let backend = Kubernetes::new(cluster.clone()).with_tools_image(&tools::image_name());
    let step = |e: BackendError| PrepareError::Step {
        what: format!("the seccomp profile on {cluster}"),
        detail: e.to_string(),
    };
    let nodes = backend.install_seccomp(interrupt).map_err(step)?;
    let verdict = backend.seccomp_verdict(true, interrupt).map_err(step)?;
    if !verdict.installed {
        return Err(PrepareError::Step {
            what: format!("hosts prepare {}", host.name),
            detail: format!(
                "the seccomp profile was written on {} but a Pod cannot run under it: {}",
                nodes.join(", "),
                verdict.detail
            ),
        });
    }
    Ok(format!(
        "seccomp profile {} installed on {} node(s) ({}), seccomp: localhost; {cluster} pulls its images itself: push the worker image and the tools image ({}) where it pulls, or load them on its nodes",
        seccomp_profile::localhost_profile(),
        nodes.len(),
        nodes.join(", "),
        tools::image_name()
    ))
}
