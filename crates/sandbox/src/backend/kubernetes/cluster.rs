//! A cluster by name (SPEC §25 "Targets"): `k8s://CONTEXT/NAMESPACE` in
//! `runner.sandbox.host` and `orchestrate --host NAME=k8s://CONTEXT/NAMESPACE[:SLOTS]`,
//! or `{context, namespace, kubeconfig?}` in a `hosts:` entry. Every `kubectl` call
//! for it names its context and namespace; the kubeconfig goes in `KUBECONFIG`.

use std::path::PathBuf;

/// The scheme of a cluster target.
pub const SCHEME: &str = "k8s://";

/// Where a cluster's sandboxes go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// The kubeconfig context.
    pub context: String,
    pub namespace: String,
    /// None: kubectl's own (`KUBECONFIG`, `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// How long a Pod may wait for a node (`schedule_timeout_sec`); None: 300 s.
    pub schedule_timeout_sec: Option<u64>,
    /// The entry accepts a cluster that does not enforce NetworkPolicy
    /// (`egress_unenforced: accept`).
    pub egress_unenforced: bool,
    /// The StorageClass of the PersistentVolumeClaim that keeps a task's worker
    /// session across its Pods (`session_storage_class`); None: a resumed task
    /// starts the agent afresh with its history (SPEC §25 "Resume").
    pub session_storage_class: Option<String>,
}

/// Why a cluster's target, or a name in its entry, is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    #[error("context {0:?}: a kubeconfig context's name, without spaces or /")]
    Context(String),
    #[error("namespace {0:?}: 1 to 63 of a-z 0-9 -, not starting or ending with -")]
    Namespace(String),
    #[error(
        "{0:?}: a StorageClass's name, 1 to 253 of a-z 0-9 - . (`kubectl get storageclass` lists them)"
    )]
    StorageClass(String),
    /// A `k8s://` target without both parts.
    #[error("{0:?}: expected k8s://CONTEXT/NAMESPACE (both named)")]
    Form(String),
}

/// Carries a cluster entry's `schedule_timeout_sec` to the runner the
/// orchestrator starts for it (`host::Target::apply`).
pub const SCHEDULE_TIMEOUT_VAR: &str = "AGENT_RUNNER_K8S_SCHEDULE_TIMEOUT_SEC";
/// Carries `egress_unenforced: accept` the same way.
pub const EGRESS_UNENFORCED_VAR: &str = "AGENT_RUNNER_K8S_EGRESS_UNENFORCED";
/// Carries `session_storage_class` the same way (and names it for `run`).
pub const SESSION_STORAGE_CLASS_VAR: &str = "AGENT_RUNNER_K8S_SESSION_STORAGE_CLASS";

impl Cluster {
    /// A cluster entry, checked: a context kubectl can name, a namespace Kubernetes
    /// accepts (a DNS label).
    pub fn new(
        context: &str,
        namespace: &str,
        kubeconfig: Option<PathBuf>,
    ) -> Result<Cluster, ClusterError> {
        if context.is_empty()
            || context
                .chars()
                .any(|c| c.is_control() || c.is_whitespace() || c == '/')
        {
            return Err(ClusterError::Context(context.to_string()));
        }
        let label = !namespace.is_empty()
            && namespace.len() <= 63
            && namespace
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !namespace.starts_with('-')
            && !namespace.ends_with('-');
        if !label {
            return Err(ClusterError::Namespace(namespace.to_string()));
        }
        Ok(Cluster {
            context: context.to_string(),
            namespace: namespace.to_string(),
            kubeconfig,
            schedule_timeout_sec: None,
            egress_unenforced: false,
            session_storage_class: None,
        })
    }

    /// `class` as a StorageClass name Kubernetes accepts (a DNS subdomain: 1 to
    /// 253 of a-z 0-9 - ., each dot-separated part starting and ending with a
    /// letter or digit).
    pub fn storage_class(class: &str) -> Result<String, ClusterError> {
        let part_ok = |part: &str| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        };
        if class.len() > 253 || !class.split('.').all(part_ok) {
            return Err(ClusterError::StorageClass(class.to_string()));
        }
        Ok(class.to_string())
    }

    /// What a runner the orchestrator started for this cluster was told beside
    /// its target (`SCHEDULE_TIMEOUT_VAR`, `EGRESS_UNENFORCED_VAR`).
    pub fn with_placement_env(mut self) -> Cluster {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        if self.schedule_timeout_sec.is_none() {
            self.schedule_timeout_sec = var(SCHEDULE_TIMEOUT_VAR).and_then(|v| v.parse().ok());
        }
        self.egress_unenforced |= var(EGRESS_UNENFORCED_VAR).as_deref() == Some("accept");
        if self.session_storage_class.is_none() {
            match var(SESSION_STORAGE_CLASS_VAR).map(|v| Cluster::storage_class(&v)) {
                Some(Ok(class)) => self.session_storage_class = Some(class),
                Some(Err(e)) => log::warn!("{SESSION_STORAGE_CLASS_VAR}: {e}; not used"),
                None => {}
            }
        }
        self
    }

    /// `k8s://CONTEXT/NAMESPACE`; None when `target` is not of that scheme.
    pub fn parse(target: &str) -> Option<Result<Cluster, ClusterError>> {
        let rest = target.strip_prefix(SCHEME)?;
        Some(match rest.split_once('/') {
            Some((context, namespace)) => Cluster::new(context, namespace, None),
            None => Err(ClusterError::Form(target.to_string())),
        })
    }
}

impl std::fmt::Display for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.context, self.namespace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_names_context_and_namespace() {
        let cluster = Cluster::parse("k8s://prod-eu/agents").unwrap().unwrap();
        assert_eq!(cluster.context, "prod-eu");
        assert_eq!(cluster.namespace, "agents");
        assert_eq!(cluster.to_string(), "k8s://prod-eu/agents");
        assert!(Cluster::parse("ssh://h").is_none());
    }

    #[test]
    fn bad_targets_say_what_is_wrong() {
        let e = Cluster::parse("k8s://ctx")
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected k8s://CONTEXT/NAMESPACE"), "{e}");
        let e = Cluster::parse("k8s://ctx/Agents")
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(e.contains("namespace \"Agents\""), "{e}");
        let e = Cluster::parse("k8s:///ns")
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(e.contains("context \"\""), "{e}");
        let e = Cluster::parse("k8s://a b/ns")
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(e.contains("context \"a b\""), "{e}");
    }

    #[test]
    fn a_storage_class_is_a_dns_subdomain() {
        for good in ["standard", "fast-ssd", "ebs.gp3", "a"] {
            assert_eq!(Cluster::storage_class(good).as_deref(), Ok(good));
        }
        for bad in [
            "",
            "Fast",
            "-x",
            "x-",
            "a..b",
            "a_b",
            "a b",
            &"a".repeat(254),
        ] {
            let e = Cluster::storage_class(bad).unwrap_err().to_string();
            assert!(e.contains("a StorageClass's name"), "{bad}: {e}");
        }
    }
}
