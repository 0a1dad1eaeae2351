//! The Pod (and the NetworkPolicy) of a sandbox, rendered from the engine-neutral
//! `Spec` by pure functions (SPEC §25): what the cluster is asked for is decided
//! here and nowhere else, so the unit tests compare whole manifests.
//!
//! Refused rather than rendered: a host path (a Pod never gets a `hostPath`), the
//! host's network, a secret (variables never go into the object: they travel on
//! an exec's stdin, `kubectl.rs`). Named volumes (the caches, the project) and
//! tmpfs become `emptyDir`s; the worker's session, where the backend keeps it, is
//! its PersistentVolumeClaim (`session_claim.rs`); the tools volume becomes an
//! `emptyDir` filled from the tools image and mounted read-only.
//!
//! A held sandbox's tools are copied by a container of the Pod listed before the
//! worker, whose `postStart` hook returns once the copy is done: the kubelet starts
//! a Pod's containers one after another in one pass, each after its hook, so the
//! worker starts with its tools and in the same pass. An init container would
//! cost a kubelet relist (its period is 1 s) before the worker starts: the
//! kubelet learns that an init container ended only from its next relist. A Pod
//! run once (a probe) keeps the init container: it must end when its one process
//! does.

use serde_json::{Value, json};

use super::super::spec::{Mount, Net, Spec};
use super::super::sweep::LABEL_TASK;
use super::super::tools::TOOLS_DIR;
use agent_runner_settings::task::WorkerLimits;

/// The worker's container: a sandbox Pod's main process, and where every exec runs.
pub const CONTAINER: &str = "worker";
/// Where the tools' copy writes them before the worker starts.
const TOOLS_STAGE: &str = "/agent-runner-tools-stage";
/// The `emptyDir` the tools go into.
const TOOLS_VOLUME: &str = "agent-runner-tools";
/// The name of the container (or init container) that copies the tools.
pub const TOOLS_CONTAINER: &str = "tools";
/// Written into the tools' `emptyDir` once the copy is complete: the copying
/// container's hook waits for it, and the worker's gate (`mod.rs`) starts nothing
/// without it. The kubelet starts the worker whatever the hook said (a failed
/// hook, a hook cut short by a kubelet's restart): so a copy that failed halfway
/// ends the worker at its gate instead of giving it part of its agent.
pub const COPIED: &str = "/agent-runner-tools/.copied";
/// How long the hook waits for the copy, in its 10 ms looks: a kubelet of 1.20
/// enforces no `activeDeadlineSeconds` while a hook runs, so a copy that hangs (a
/// stalled disk) must not hold the Pod for ever.
const COPY_LOOKS: u32 = 30_000;
/// How long the copying container stays after the copy: its hook must find it
/// running (a hook that cannot run is only a warning event); then it ends, so that
/// the Pod ends with its worker.
const COPIER_STAYS_SECS: u32 = 10;
/// The annotation that makes `kubectl exec` and `kubectl logs` without `-c` go to
/// the worker rather than to the container listed first.
const DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";

/// What the Pod needs beside the `Spec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub namespace: String,
    /// `activeDeadlineSeconds`: the sandbox's expiry (SPEC §22), so a Pod whose
    /// agent-runner vanished ends on the cluster's own clock.
    pub expires_in_secs: u64,
    /// The image holding the tools tree at `TOOLS_DIR` (`agent-runner tools image`);
    /// needed when the `Spec` mounts the tools volume.
    pub tools_image: Option<String>,
    /// The user and group of `Spec::as_user` (None: the image's user).
    pub user: Option<(u32, u32)>,
    /// The named volumes of the `Spec` that are PersistentVolumeClaims of that
    /// name (the worker's session, `session_claim.rs`), not `emptyDir`s.
    pub claims: Vec<String>,
    /// agent-runner's seccomp profile as the nodes' kubelets name it
    /// (`seccomp_profile.rs`: `hosts prepare` installed it); None: the runtime's
    /// default.
    pub seccomp: Option<String>,
}

/// Why a `Spec` cannot become a Pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("a Pod never mounts a host path ({path} at {target}): use the copy transport")]
    HostPath { path: String, target: String },
    #[error("a Pod never joins the node's network: runner.sandbox.network host is Docker only")]
    HostNetwork,
    #[error("the sandbox needs a name to become a Pod")]
    NoName,
    #[error(
        "the tools volume is mounted but no tools image is set (build one with `agent-runner tools image`)"
    )]
    NoToolsImage,
}

/// A label value Kubernetes accepts: at most 63 of `[A-Za-z0-9._-]`, starting and
/// ending with a letter or digit; other characters become `_` (the exact value is
/// kept in an annotation of the same key).
pub fn label_safe(value: &str) -> String {
    let mut safe: String = value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    while safe.ends_with(|c: char| !c.is_ascii_alphanumeric()) {
        safe.pop();
    }
    while safe.starts_with(|c: char| !c.is_ascii_alphanumeric()) {
        safe.remove(0);
    }
    safe
}

/// The Pod of `spec`.
pub fn pod(spec: &Spec, plan: &Plan) -> Result<Value, RenderError> {
    let name = spec.name.clone().ok_or(RenderError::NoName)?;
    if spec.network == Net::Host {
        return Err(RenderError::HostNetwork);
    }
    let mut labels = serde_json::Map::new();
    let mut annotations = serde_json::Map::new();
    for (key, value) in &spec.labels {
        labels.insert(key.clone(), Value::String(label_safe(value)));
        annotations.insert(key.clone(), Value::String(value.clone()));
    }
    let Volumes {
        volumes,
        mounts,
        init,
        mut before,
        named,
    } = Volumes::of(spec, plan)?;
    let claimed = named.iter().any(|(name, _)| plan.claims.contains(name));
    if !before.is_empty() {
        annotations.insert(DEFAULT_CONTAINER.into(), Value::String(CONTAINER.into()));
    }
    before.push(container(spec, plan, mounts));
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": plan.namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": pod_spec(spec, plan, before, volumes, init, claimed),
    }))
}

/// The Pod's volumes, the worker's mounts of them, and the container that fills
/// the tools' volume: an init container, or one started before the worker.
#[derive(Default)]
struct Volumes {
    volumes: Vec<Value>,
    mounts: Vec<Value>,
    init: Vec<Value>,
    before: Vec<Value>,
    /// Each named volume of the `Spec` and the Pod's volume it became.
    named: Vec<(String, String)>,
}

impl Volumes {
    /// Those of `spec`: its mounts, its volumes, its tmpfs, in that order.
    fn of(spec: &Spec, plan: &Plan) -> Result<Volumes, RenderError> {
        let mut pod = Volumes::default();
        for mount in &spec.mounts {
            pod.mount(mount, spec, plan)?;
        }
        for named in &spec.volumes {
            let volume = format!("vol-{}", pod.volumes.len());
            pod.volumes.push(json!({"name": volume, "emptyDir": {}}));
            pod.mounts
                .push(json!({"name": volume, "mountPath": named.target}));
        }
        for tmpfs in &spec.tmpfs {
            let volume = format!("vol-{}", pod.volumes.len());
            pod.volumes.push(json!({"name": volume,
                "emptyDir": {"medium": "Memory", "sizeLimit": quantity(tmpfs.size)}}));
            pod.mounts
                .push(json!({"name": volume, "mountPath": tmpfs.target}));
        }
        Ok(pod)
    }

    /// One mount of the `Spec`: the tools volume, or a named volume; a host path
    /// is refused.
    fn mount(&mut self, mount: &Mount, spec: &Spec, plan: &Plan) -> Result<(), RenderError> {
        let Mount {
            source,
            target,
            readonly,
            volume,
        } = mount;
        if !volume {
            return Err(RenderError::HostPath {
                path: source.display().to_string(),
                target: target.clone(),
            });
        }
        if target == TOOLS_DIR {
            return self.tools(spec, plan);
        }
        let volume = self.named_volume(source.display().to_string(), plan);
        self.mounts
            .push(json!({"name": volume, "mountPath": target, "readOnly": readonly}));
        Ok(())
    }

    /// The tools volume: an `emptyDir` mounted read-only, filled from the tools
    /// image with the parts the sandbox uses (see the module's documentation for
    /// the container that copies them).
    fn tools(&mut self, spec: &Spec, plan: &Plan) -> Result<(), RenderError> {
        let image = plan.tools_image.clone().ok_or(RenderError::NoToolsImage)?;
        self.volumes
            .push(json!({"name": TOOLS_VOLUME, "emptyDir": {}}));
        self.mounts
            .push(json!({"name": TOOLS_VOLUME, "mountPath": TOOLS_DIR, "readOnly": true}));
        // Only the parts the sandbox uses (the agents' builds are ~1 GB, copied at
        // every Pod's start), those the image has (`tools image --without-agents`
        // has none of the agents).
        let copy = match &spec.tools_parts {
            Some(parts) => format!(
                "cd {TOOLS_DIR} && for part in {}; do if [ -e \"$part\" ]; then cp -a \"$part\" {TOOLS_STAGE}/ || exit 1; fi; done",
                parts.join(" ")
            ),
            None => format!("cp -a {TOOLS_DIR}/. {TOOLS_STAGE}/"),
        };
        let shell = format!("{TOOLS_DIR}/bin/sh");
        if !spec.held {
            self.init.push(json!({
                "name": TOOLS_CONTAINER,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": [shell, "-c", copy],
                "volumeMounts": [{"name": TOOLS_VOLUME, "mountPath": TOOLS_STAGE}],
                "securityContext": security_context(spec, plan),
            }));
            return Ok(());
        }
        // A failed copy ends the container (its hook with it) with no mark: the
        // worker's gate ends the worker, and the Pod's status names this
        // container's exit (`PodStatus`). TERM (the Pod's deletion) ends the stay.
        let copied = COPIED.replacen(TOOLS_DIR, TOOLS_STAGE, 1);
        let copy = format!(
            "{copy} || exit 1; : > {copied} || exit 1; trap 'exit 0' TERM; sleep {COPIER_STAYS_SECS} & wait"
        );
        let hook = format!(
            "i=0; until [ -e {copied} ]; do i=$((i+1)); [ $i -le {COPY_LOOKS} ] || exit 1; sleep 0.01; done"
        );
        self.before.push(json!({
            "name": TOOLS_CONTAINER,
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": [shell, "-c", copy],
            "lifecycle": {"postStart": {"exec": {"command": [shell, "-c", hook]}}},
            "volumeMounts": [{"name": TOOLS_VOLUME, "mountPath": TOOLS_STAGE}],
            "securityContext": security_context(spec, plan),
        }));
        Ok(())
    }

    /// The Pod's volume of the named volume `name`: its claim when the plan says
    /// so, else an `emptyDir`.
    fn named_volume(&mut self, name: String, plan: &Plan) -> String {
        // A named volume mounted twice (the work, and the same read-only for its
        // bundler: `exec_copy.rs`) is one `emptyDir`.
        if let Some((_, volume)) = self.named.iter().find(|(n, _)| *n == name) {
            return volume.clone();
        }
        let volume = format!("vol-{}", self.volumes.len());
        if plan.claims.contains(&name) {
            self.volumes.push(json!({"name": volume,
                "persistentVolumeClaim": {"claimName": name}}));
        } else {
            self.volumes.push(json!({"name": volume, "emptyDir": {}}));
        }
        self.named.push((name, volume.clone()));
        volume
    }
}

/// The worker's container, with its `mounts`.
fn container(spec: &Spec, plan: &Plan, mounts: Vec<Value>) -> Value {
    let mut container = json!({
        "name": CONTAINER,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": [literal(&spec.main.entrypoint)],
        "args": spec.main.args.iter().map(|a| literal(a)).collect::<Vec<_>>(),
        "stdin": spec.held,
        "stdinOnce": spec.held,
        "tty": false,
        "securityContext": security_context(spec, plan),
        "volumeMounts": mounts,
    });
    if let Some(dir) = &spec.workdir {
        container["workingDir"] = json!(dir);
    }
    if let (true, Some((uid, _))) = (spec.as_user, plan.user)
        && uid != 0
    {
        container["env"] = json!([{"name": "HOME", "value": "/tmp/agent-runner-home"}]);
    }
    if let Some(resources) = spec.limits.as_ref().and_then(resources) {
        container["resources"] = resources;
    }
    container
}

/// The container's `resources` of the task's limits, None when they limit
/// neither memory nor CPUs.
fn resources(limits: &WorkerLimits) -> Option<Value> {
    let mut amounts = serde_json::Map::new();
    if let Some(bytes) = limits.memory_bytes {
        amounts.insert("memory".into(), json!(bytes.to_string()));
    }
    if let Some(cpus) = limits.cpus {
        amounts.insert(
            "cpu".into(),
            json!(format!("{}m", (cpus * 1000.0).round() as u64)),
        );
    }
    // Requests = limits: what the task asked for is what it is scheduled by.
    (!amounts.is_empty()).then(|| json!({"requests": amounts, "limits": amounts}))
}

/// The Pod's `spec`: its `containers` (the worker last) and `init` containers over
/// `volumes`; `claimed`: a volume of them is a claim.
fn pod_spec(
    spec: &Spec,
    plan: &Plan,
    containers: Vec<Value>,
    volumes: Vec<Value>,
    init: Vec<Value>,
    claimed: bool,
) -> Value {
    let mut pod_spec = json!({
        "restartPolicy": "Never",
        "activeDeadlineSeconds": plan.expires_in_secs.max(1),
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "hostNetwork": false,
        "hostPID": false,
        "hostIPC": false,
        "terminationGracePeriodSeconds": 2,
        "containers": containers,
        "volumes": volumes,
    });
    if !init.is_empty() {
        pod_spec["initContainers"] = json!(init);
    }
    if let Some(runtime) = &spec.runtime {
        pod_spec["runtimeClassName"] = json!(runtime);
    }
    if let (true, true, Some((uid, gid))) = (claimed, spec.as_user, plan.user)
        && uid != 0
    {
        // A claim's volume is root's when new: the task's group may write it
        // (where its volume type applies the group; an emptyDir needs none).
        pod_spec["securityContext"] = json!({"fsGroup": gid});
    }
    pod_spec
}

/// `arg` as Kubernetes passes it on unchanged: it expands `$(NAME)` in a
/// container's command and arguments, and `$$` is its escape for `$`.
pub(super) fn literal(arg: &str) -> String {
    arg.replace('$', "$$")
}

/// The container's `securityContext` (the same for the tools' copy).
fn security_context(spec: &Spec, plan: &Plan) -> Value {
    let seccomp = match &plan.seccomp {
        Some(path) => json!({"type": "Localhost", "localhostProfile": path}),
        None => json!({"type": "RuntimeDefault"}),
    };
    let mut context = json!({
        "allowPrivilegeEscalation": false,
        "privileged": false,
        "seccompProfile": seccomp,
    });
    if let Some(confinement) = &spec.confinement {
        context["capabilities"] = json!({"drop": ["ALL"], "add": confinement.keep});
    }
    if let (true, Some((uid, gid))) = (spec.as_user, plan.user)
        && uid != 0
    {
        context["runAsUser"] = json!(uid);
        context["runAsGroup"] = json!(gid);
    }
    context
}

/// A size as docker writes it (`1m`, `64k`) as a Kubernetes quantity (`1Mi`).
fn quantity(size: &str) -> String {
    match size.strip_suffix(['k', 'm', 'g']) {
        Some(number) => {
            let unit = match size.chars().last() {
                Some('k') => "Ki",
                Some('m') => "Mi",
                _ => "Gi",
            };
            format!("{number}{unit}")
        }
        None => size.to_string(),
    }
}

/// The NetworkPolicy of a namespace's sandboxes: Pods labelled `agent-runner.task`
/// get no ingress and no egress at all (allowed egress goes over the lifeline).
pub fn network_policy(namespace: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "agent-runner-sandboxes", "namespace": namespace},
        "spec": {
            "podSelector": {"matchExpressions": [{"key": LABEL_TASK, "operator": "Exists"}]},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::super::super::spec::{Confinement, Main, Tmpfs, Volume};
    use super::*;
    use agent_runner_settings::task::WorkerLimits;

    fn plan() -> Plan {
        Plan {
            namespace: "team".into(),
            expires_in_secs: 3600,
            tools_image: Some("registry.example/agent-runner-tools:abc".into()),
            user: Some((1000, 1000)),
            claims: Vec::new(),
            seccomp: None,
        }
    }

    fn sandbox() -> Spec {
        let mut spec = Spec::new(
            "worker:1",
            Main {
                entrypoint: "/agent-runner-tools/bin/agent-runner-helper".into(),
                args: vec!["lifeline".into(), "0".into(), "99".into()],
                own_init: true,
            },
        );
        spec.name = Some("agent-runner-t1".into());
        spec.labels = vec![
            ("agent-runner.task".into(), "t1".into()),
            ("agent-runner.owner-start".into(), "12 34".into()),
        ];
        spec.held = true;
        spec.stream = true;
        spec.network = Net::Isolated;
        spec.confinement = Some(Confinement {
            keep: &["CHOWN", "SETUID"],
        });
        spec.limits = Some(WorkerLimits {
            memory_bytes: Some(1 << 30),
            cpus: Some(1.5),
            pids: 256,
        });
        spec.as_user = true;
        spec.mounts = vec![Mount::volume("agent-runner-tools-x", TOOLS_DIR)];
        spec.volumes = vec![Volume {
            name: "cache".into(),
            target: "/root/.npm".into(),
            labels: vec![],
            whose: "a cache".into(),
        }];
        spec.tmpfs = vec![Tmpfs {
            target: "/run/agent-runner/private".into(),
            size: "1m",
        }];
        spec.workdir = Some("/workspace/project".into());
        spec
    }

    #[test]
    fn a_held_sandbox_becomes_this_whole_pod() {
        let security = json!({
            "allowPrivilegeEscalation": false,
            "privileged": false,
            "seccompProfile": {"type": "RuntimeDefault"},
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "SETUID"]},
            "runAsUser": 1000,
            "runAsGroup": 1000,
        });
        let expected = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "agent-runner-t1",
                "namespace": "team",
                "labels": {"agent-runner.task": "t1", "agent-runner.owner-start": "12_34"},
                "annotations": {"agent-runner.task": "t1", "agent-runner.owner-start": "12 34",
                    "kubectl.kubernetes.io/default-container": "worker"},
            },
            "spec": {
                "restartPolicy": "Never",
                "activeDeadlineSeconds": 3600,
                "automountServiceAccountToken": false,
                "enableServiceLinks": false,
                "hostNetwork": false,
                "hostPID": false,
                "hostIPC": false,
                "terminationGracePeriodSeconds": 2,
                "containers": [{
                    "name": "tools",
                    "image": "registry.example/agent-runner-tools:abc",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/agent-runner-tools/bin/sh", "-c",
                        "cp -a /agent-runner-tools/. /agent-runner-tools-stage/ || exit 1; \
                         : > /agent-runner-tools-stage/.copied || exit 1; \
                         trap 'exit 0' TERM; sleep 10 & wait"],
                    "lifecycle": {"postStart": {"exec": {"command": [
                        "/agent-runner-tools/bin/sh", "-c",
                        "i=0; until [ -e /agent-runner-tools-stage/.copied ]; do i=$((i+1)); \
                         [ $i -le 30000 ] || exit 1; sleep 0.01; done"]}}},
                    "volumeMounts": [
                        {"name": "agent-runner-tools", "mountPath": "/agent-runner-tools-stage"},
                    ],
                    "securityContext": security,
                }, {
                    "name": "worker",
                    "image": "worker:1",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/agent-runner-tools/bin/agent-runner-helper"],
                    "args": ["lifeline", "0", "99"],
                    "stdin": true,
                    "stdinOnce": true,
                    "tty": false,
                    "workingDir": "/workspace/project",
                    "env": [{"name": "HOME", "value": "/tmp/agent-runner-home"}],
                    "resources": {
                        "requests": {"memory": "1073741824", "cpu": "1500m"},
                        "limits": {"memory": "1073741824", "cpu": "1500m"},
                    },
                    "securityContext": security,
                    "volumeMounts": [
                        {"name": "agent-runner-tools", "mountPath": "/agent-runner-tools",
                            "readOnly": true},
                        {"name": "vol-1", "mountPath": "/root/.npm"},
                        {"name": "vol-2", "mountPath": "/run/agent-runner/private"},
                    ],
                }],
                "volumes": [
                    {"name": "agent-runner-tools", "emptyDir": {}},
                    {"name": "vol-1", "emptyDir": {}},
                    {"name": "vol-2", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
                ],
            },
        });
        assert_eq!(pod(&sandbox(), &plan()).unwrap(), expected);
    }

    #[test]
    fn a_probe_as_root_with_no_confinement_has_no_stdin_and_no_extras() {
        let mut spec = Spec::new("img", Main::shell("true", []));
        spec.name = Some("probe".into());
        let plan = Plan {
            user: Some((0, 0)),
            ..plan()
        };
        let expected = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "namespace": "team", "labels": {}, "annotations": {}},
            "spec": {
                "restartPolicy": "Never",
                "activeDeadlineSeconds": 3600,
                "automountServiceAccountToken": false,
                "enableServiceLinks": false,
                "hostNetwork": false,
                "hostPID": false,
                "hostIPC": false,
                "terminationGracePeriodSeconds": 2,
                "containers": [{
                    "name": "worker",
                    "image": "img",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/bin/sh"],
                    "args": ["-c", "true"],
                    "stdin": false,
                    "stdinOnce": false,
                    "tty": false,
                    "securityContext": {
                        "allowPrivilegeEscalation": false,
                        "privileged": false,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "volumeMounts": [],
                }],
                "volumes": [],
            },
        });
        assert_eq!(pod(&spec, &plan).unwrap(), expected);
    }

    #[test]
    fn dollars_reach_the_process_unexpanded() {
        let mut spec = Spec::new("img", Main::shell("echo $$ $(HOME) $", []));
        spec.name = Some("p".into());
        let pod = pod(&spec, &plan()).unwrap();
        assert_eq!(
            pod["spec"]["containers"][0]["args"],
            json!(["-c", "echo $$$$ $$(HOME) $$"])
        );
    }

    #[test]
    fn a_volume_mounted_twice_is_one_empty_dir_read_only_where_asked() {
        let mut spec = sandbox();
        spec.mounts = vec![
            Mount {
                readonly: false,
                ..Mount::volume("work", "/workspace/project")
            },
            Mount::volume("work", "/agent-runner-clones/work"),
            Mount::volume("other", "/other"),
        ];
        let pod = pod(&spec, &plan()).unwrap();
        assert_eq!(
            pod["spec"]["volumes"],
            json!([
                {"name": "vol-0", "emptyDir": {}},
                {"name": "vol-1", "emptyDir": {}},
                {"name": "vol-2", "emptyDir": {}},
                {"name": "vol-3", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
            ])
        );
        assert_eq!(
            pod["spec"]["containers"][0]["volumeMounts"],
            json!([
                {"name": "vol-0", "mountPath": "/workspace/project", "readOnly": false},
                {"name": "vol-0", "mountPath": "/agent-runner-clones/work", "readOnly": true},
                {"name": "vol-1", "mountPath": "/other", "readOnly": true},
                {"name": "vol-2", "mountPath": "/root/.npm"},
                {"name": "vol-3", "mountPath": "/run/agent-runner/private"},
            ])
        );
    }

    #[test]
    fn the_kept_session_is_its_claim_mounted_read_write_with_the_users_group() {
        let mut spec = sandbox();
        let claim = "agent-runner-session-0123abcd";
        spec.mounts = vec![
            Mount {
                readonly: false,
                ..Mount::volume("agent-runner-project", "/workspace/project")
            },
            Mount {
                readonly: false,
                ..Mount::volume(claim, "/run/agent-runner/session")
            },
        ];
        spec.volumes.clear();
        spec.tmpfs.clear();
        let plan = Plan {
            claims: vec![claim.into()],
            ..plan()
        };
        let pod = pod(&spec, &plan).unwrap();
        assert_eq!(
            pod["spec"]["volumes"],
            json!([
                {"name": "vol-0", "emptyDir": {}},
                {"name": "vol-1", "persistentVolumeClaim": {"claimName": claim}},
            ])
        );
        assert_eq!(
            pod["spec"]["containers"][0]["volumeMounts"],
            json!([
                {"name": "vol-0", "mountPath": "/workspace/project", "readOnly": false},
                {"name": "vol-1", "mountPath": "/run/agent-runner/session", "readOnly": false},
            ])
        );
        assert_eq!(pod["spec"]["securityContext"], json!({"fsGroup": 1000}));
        assert!(!pod.to_string().contains("hostPath"));
        // Not a claim the backend made: an emptyDir like any named volume.
        let unclaimed = super::pod(
            &spec,
            &super::Plan {
                claims: Vec::new(),
                ..plan.clone()
            },
        )
        .unwrap();
        assert_eq!(
            unclaimed["spec"]["volumes"][1],
            json!({"name": "vol-1", "emptyDir": {}})
        );
        assert!(unclaimed["spec"].get("securityContext").is_none());
        // As root: no group to give.
        let root = super::pod(
            &spec,
            &super::Plan {
                user: Some((0, 0)),
                ..plan
            },
        )
        .unwrap();
        assert!(root["spec"].get("securityContext").is_none());
    }

    #[test]
    fn the_tools_copy_takes_only_the_tools_parts_the_sandbox_uses() {
        let mut spec = sandbox();
        spec.tools_parts = Some(vec!["bin".into(), "ready".into(), "codex".into()]);
        let pod = pod(&spec, &plan()).unwrap();
        let copy = "cd /agent-runner-tools && for part in bin ready codex; do if [ -e \"$part\" ]; \
                    then cp -a \"$part\" /agent-runner-tools-stage/ || exit 1; fi; done";
        assert_eq!(
            pod["spec"]["containers"][0]["command"],
            json!([
                "/agent-runner-tools/bin/sh",
                "-c",
                format!(
                    "{copy} || exit 1; : > /agent-runner-tools-stage/.copied || exit 1; \
                     trap 'exit 0' TERM; sleep 10 & wait"
                )
            ])
        );
        // A Pod run once copies them in an init container, so that it ends with
        // its one process.
        spec.held = false;
        let once = super::pod(&spec, &plan()).unwrap();
        assert_eq!(
            once["spec"]["initContainers"][0]["command"],
            json!(["/agent-runner-tools/bin/sh", "-c", copy])
        );
        assert_eq!(once["spec"]["containers"].as_array().unwrap().len(), 1);
        assert_eq!(once["spec"]["containers"][0]["name"], "worker");
        assert_eq!(
            once["spec"]["volumes"][0],
            json!({"name": "agent-runner-tools", "emptyDir": {}})
        );
        assert!(!once.to_string().contains(".copied"));
        assert!(
            once["metadata"]["annotations"]
                .get(DEFAULT_CONTAINER)
                .is_none()
        );
    }

    #[test]
    fn the_worker_of_a_held_pod_starts_after_the_tools_copy_and_kubectl_goes_to_it() {
        let pod = pod(&sandbox(), &plan()).unwrap();
        let containers = pod["spec"]["containers"].as_array().unwrap();
        let names: Vec<_> = containers.iter().map(|c| c["name"].clone()).collect();
        // The kubelet starts them in this order, each after its postStart hook.
        assert_eq!(names, [json!("tools"), json!("worker")]);
        assert!(pod["spec"].get("initContainers").is_none());
        let hook = containers[0]["lifecycle"]["postStart"]["exec"]["command"][2].to_string();
        assert!(
            hook.contains("until [ -e /agent-runner-tools-stage/.copied ]"),
            "{hook}"
        );
        assert_eq!(
            pod["metadata"]["annotations"][DEFAULT_CONTAINER],
            json!("worker")
        );
        let worker = containers[1]["volumeMounts"].to_string();
        assert!(
            worker.contains(
                r#"{"mountPath":"/agent-runner-tools","name":"agent-runner-tools","readOnly":true}"#
            ),
            "{worker}"
        );
    }

    #[test]
    fn with_the_profile_installed_every_container_runs_under_it() {
        let plan = Plan {
            seccomp: Some("agent-runner/0123abcd.json".into()),
            ..plan()
        };
        let pod = pod(&sandbox(), &plan).unwrap();
        let profile =
            json!({"type": "Localhost", "localhostProfile": "agent-runner/0123abcd.json"});
        for container in pod["spec"]["containers"].as_array().unwrap() {
            assert_eq!(container["securityContext"]["seccompProfile"], profile);
        }
        assert_eq!(pod["spec"]["containers"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn a_host_path_is_never_rendered() {
        let mut spec = sandbox();
        spec.mounts
            .push(Mount::new("/home/u/repo", "/workspace/project", false));
        let e = pod(&spec, &plan()).unwrap_err();
        assert_eq!(
            e,
            RenderError::HostPath {
                path: "/home/u/repo".into(),
                target: "/workspace/project".into()
            }
        );
        assert!(e.to_string().contains("never mounts a host path"), "{e}");
    }

    #[test]
    fn no_rendered_pod_holds_host_paths_tokens_or_variables() {
        let text = pod(&sandbox(), &plan()).unwrap().to_string();
        for absent in ["hostPath", "serviceAccountName", "secretKeyRef", "envFrom"] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
    }

    #[test]
    fn the_host_network_and_a_missing_tools_image_are_refused() {
        let mut spec = sandbox();
        spec.network = Net::Host;
        assert_eq!(pod(&spec, &plan()), Err(RenderError::HostNetwork));
        let plan = Plan {
            tools_image: None,
            ..plan()
        };
        assert_eq!(pod(&sandbox(), &plan), Err(RenderError::NoToolsImage));
    }

    #[test]
    fn label_values_are_made_safe() {
        assert_eq!(label_safe("abc-1.2_3"), "abc-1.2_3");
        assert_eq!(label_safe("12 34"), "12_34");
        assert_eq!(label_safe("-x-"), "x");
        assert_eq!(label_safe(&"a".repeat(80)).len(), 63);
        assert_eq!(label_safe("host.example.org."), "host.example.org");
    }

    #[test]
    fn the_policy_denies_all_traffic_of_sandboxes() {
        assert_eq!(
            network_policy("team"),
            json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {"name": "agent-runner-sandboxes", "namespace": "team"},
                "spec": {
                    "podSelector": {"matchExpressions": [
                        {"key": "agent-runner.task", "operator": "Exists"}]},
                    "policyTypes": ["Ingress", "Egress"],
                    "ingress": [],
                    "egress": [],
                },
            })
        );
    }
}
