//! agent-runner's seccomp profile on a cluster (SPEC §25 "The Pod", §9): the
//! profile the Docker engine passes with every `docker run` (`seccomp.rs`: no
//! set-id bit on any file, no `ptrace`) cannot travel in a Pod; a kubelet reads a
//! `Localhost` profile from a file under its seccomp root on the node
//! (`/var/lib/kubelet/seccomp/`). So:
//!
//! - `hosts prepare` writes it to `agent-runner/<digest>.json` there on every node:
//!   one short-lived Pod per node (`nodeName`), the tools image's shell writing the
//!   file through a `hostPath` of that directory. This admin action is the one
//!   place agent-runner renders a `hostPath`, never in a sandbox's Pod; the file's
//!   name is the digest of its content, so a build with another profile writes a
//!   file of its own.
//! - Whether it is there is proven, not assumed: a probe Pod under `Localhost` with
//!   that name tries a set-id `chmod`. A kubelet that has no such file does not
//!   start the container (its error is the verdict's detail); one that runs it
//!   under the profile has the `chmod` refused. `hosts check` says `seccomp
//!   localhost` or `runtime-default`.
//! - A sandbox's Pods carry `Localhost` with that name where the verdict says it is
//!   installed, else `RuntimeDefault`. The verdict is kept an hour beside the
//!   egress verdict (`kept_verdict.rs`), so a task pays for the probe once an hour;
//!   a probe that cannot run leaves `RuntimeDefault`.

use std::time::Duration;

use serde_json::{Value, json};

use super::super::seccomp::profile;
use super::super::spec::{Confinement, Main, Net, Spec, Tmpfs};
use super::super::sweep::{self, LABEL_TASK};
use super::super::tools::SHELL;
use super::super::{BackendError, docker_cli::last_lines};
use super::{Kubernetes, POLL, kept_verdict, pod};
use agent_runner_core::interrupt::Interrupt;

/// The kubelet's seccomp root on a node (its default `--root-dir`).
pub const SECCOMP_ROOT: &str = "/var/lib/kubelet/seccomp";
/// How long an installer or the probe may take, its image pulled included.
const WITHIN: Duration = Duration::from_secs(120);
/// The probe's answer: the exit status of a set-id `chmod`.
const ANSWER: &str = "agent-runner-setid ";

/// The profile's name under the kubelet's seccomp root: `agent-runner/<digest>.json`.
pub fn localhost_profile() -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, &profile());
    let key: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("agent-runner/{key}.json")
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Verdict {
    /// The probe ran under the profile and its set-id `chmod` was refused.
    pub installed: bool,
    /// Why not, in the kubelet's or the probe's words.
    pub detail: String,
}

impl Verdict {
    /// `localhost` or `runtime-default`, as `hosts check` shows it.
    pub fn mode(&self) -> &'static str {
        if self.installed {
            "localhost"
        } else {
            "runtime-default"
        }
    }
}

/// The installer Pod of node `node`: the tools image's shell writes the profile to
/// `SECCOMP_ROOT/<localhost_profile>` through a `hostPath` of `SECCOMP_ROOT`
/// (written aside, then renamed, so a kubelet never reads half a file). Labelled
/// as a sandbox (`labels`), so the namespace's policy takes its network and the
/// sweep its leftovers.
pub fn installer(
    namespace: &str,
    name: &str,
    node: &str,
    tools_image: &str,
    labels: &[(String, String)],
) -> Value {
    let path = localhost_profile();
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", &path));
    let script = r#"set -e; mkdir -p "/seccomp/$1"; printf '%s' "$3" > "/seccomp/$1/.$2.tmp"; mv -f "/seccomp/$1/.$2.tmp" "/seccomp/$1/$2"; echo installed"#;
    let content = String::from_utf8_lossy(&profile()).into_owned();
    let meta = |value: fn(&str) -> String| -> serde_json::Map<String, Value> {
        labels
            .iter()
            .map(|(k, v)| (k.clone(), json!(value(v))))
            .collect()
    };
    let args: Vec<String> = ["sh", dir, file, &content]
        .iter()
        .map(|a| pod::literal(a))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": meta(pod::label_safe),
            "annotations": meta(str::to_string),
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": WITHIN.as_secs(),
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "terminationGracePeriodSeconds": 2,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{
                "name": "install",
                "image": tools_image,
                "imagePullPolicy": "IfNotPresent",
                "command": [SHELL, "-c", pod::literal(script)],
                "args": args,
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "privileged": false,
                    "capabilities": {"drop": ["ALL"]},
                    "seccompProfile": {"type": "RuntimeDefault"},
                    "runAsUser": 0,
                },
                "volumeMounts": [{"name": "seccomp", "mountPath": "/seccomp"}],
            }],
            "volumes": [{"name": "seccomp",
                "hostPath": {"path": SECCOMP_ROOT, "type": "DirectoryOrCreate"}}],
        },
    })
}

/// The verdict of the probe's log `output`, or of the kubelet's refusal `refused`.
fn verdict(output: &str, refused: Option<&str>) -> Verdict {
    if let Some(why) = refused {
        return Verdict {
            installed: false,
            detail: why.to_string(),
        };
    }
    let status = output
        .lines()
        .find_map(|l| l.strip_prefix(ANSWER))
        .map(str::trim);
    match status {
        Some("0") => Verdict {
            installed: false,
            detail: "the probe ran under Localhost, but its set-id chmod was allowed".into(),
        },
        Some(_) => Verdict {
            installed: true,
            detail: String::new(),
        },
        None => Verdict {
            installed: false,
            detail: format!(
                "the probe said nothing of its chmod: {}",
                last_lines(output, 2)
            ),
        },
    }
}

/// The labels of a Pod of ours that is not a task's (`what`), expiring soon.
fn labels(what: &str) -> Vec<(String, String)> {
    let (expiry, at) = sweep::expiry_label(Duration::from_secs(600));
    let mut labels = vec![
        (LABEL_TASK.to_string(), what.to_string()),
        (expiry.to_string(), at),
    ];
    labels.extend(
        sweep::owner_labels(&agent_runner_core::owner::Owner::this_process())
            .map(|(k, v)| (k.to_string(), v)),
    );
    labels
}

fn unique(what: &str) -> String {
    format!(
        "agent-runner-{what}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

impl Kubernetes {
    /// `hosts prepare`: the profile written on every node (see the module
    /// documentation); the nodes.
    pub fn install_seccomp(&self, interrupt: Interrupt) -> Result<Vec<String>, BackendError> {
        let tools = self.tools_image.clone().ok_or_else(|| {
            BackendError::Io(
                "the seccomp profile is written by the tools image's shell, and no tools image is set".into(),
            )
        })?;
        let out = self.kubectl.checked(
            &["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
            &[],
            self.short,
        )?;
        let nodes: Vec<String> = out.stdout.split_whitespace().map(str::to_string).collect();
        if nodes.is_empty() {
            return Err(BackendError::Io(format!(
                "{}: no nodes listed",
                self.kubectl.cluster
            )));
        }
        let namespace = self.kubectl.cluster.namespace.clone();
        // Each node's installer at once, each waited for to its end.
        let results: Vec<Result<(), BackendError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = nodes
                .iter()
                .map(|node| {
                    let (namespace, tools) = (&namespace, &tools);
                    scope.spawn(move || {
                        let name = unique("seccomp-install");
                        let manifest =
                            installer(namespace, &name, node, tools, &labels("seccomp-install"));
                        self.kubectl.checked(
                            &["create", "-f", "-"],
                            manifest.to_string().as_bytes(),
                            self.short,
                        )?;
                        let ended = self.wait_for(&name, tools, true, WITHIN, interrupt);
                        let logs = self.kubectl.call(
                            &["logs", &name],
                            &[],
                            self.short,
                            Interrupt::never(),
                        );
                        self.delete(&[&name]);
                        let phase = ended?;
                        let said = logs.map(|o| o.stdout + &o.stderr).unwrap_or_default();
                        match phase.as_str() {
                            "Succeeded" if said.contains("installed") => Ok(()),
                            _ => Err(BackendError::Failed {
                                command: format!("the seccomp profile's installer on node {node}"),
                                detail: format!("{phase}: {}", last_lines(&said, 3)),
                            }),
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(BackendError::Io("an installer's thread failed".into()))
                    })
                })
                .collect()
        });
        results.into_iter().collect::<Result<Vec<()>, _>>()?;
        Ok(nodes)
    }

    /// Runs the probe Pod (see the module documentation).
    pub fn probe_seccomp(&self, interrupt: Interrupt) -> Result<Verdict, BackendError> {
        let tools = self.tools_image.clone().ok_or_else(|| {
            BackendError::Io(
                "the seccomp probe runs the tools image's shell, and no tools image is set".into(),
            )
        })?;
        let mut spec = Spec::new(
            &tools,
            Main {
                entrypoint: SHELL.into(),
                args: vec![
                    "-c".into(),
                    format!(": > /tmp/p; chmod 4755 /tmp/p 2>/dev/null; echo \"{ANSWER}$?\""),
                ],
                own_init: false,
            },
        );
        let name = unique("seccomp-probe");
        spec.name = Some(name.clone());
        spec.network = Net::Isolated;
        spec.confinement = Some(Confinement { keep: &[] });
        spec.labels = labels("seccomp-probe");
        spec.tmpfs = vec![Tmpfs {
            target: "/tmp".into(),
            size: "1m",
        }];
        let plan = pod::Plan {
            namespace: self.kubectl.cluster.namespace.clone(),
            expires_in_secs: WITHIN.as_secs(),
            tools_image: None,
            user: Some((0, 0)),
            claims: Vec::new(),
            seccomp: Some(localhost_profile()),
        };
        let manifest = pod::pod(&spec, &plan).map_err(|e| BackendError::Refused(e.to_string()))?;
        self.ensure_policy()?;
        self.kubectl.checked(
            &["create", "-f", "-"],
            manifest.to_string().as_bytes(),
            self.short,
        )?;
        let started = std::time::Instant::now();
        let seen = loop {
            if interrupt.is_set() {
                break Err(BackendError::Interrupted);
            }
            match self.status(&name) {
                Err(e) => break Err(e),
                Ok(status) if matches!(status.phase.as_str(), "Succeeded" | "Failed") => {
                    break Ok(None);
                }
                Ok(status) if status.start_problem.is_some() => {
                    break Ok(status.start_problem);
                }
                Ok(status) if status.image_problem.is_some() => {
                    break Err(BackendError::ImageMissing {
                        what: super::super::CLUSTER_IMAGE,
                        image: tools.clone(),
                        detail: status.image_problem.unwrap_or_default(),
                    });
                }
                Ok(_) if started.elapsed() > WITHIN => {
                    break Err(BackendError::Io(format!(
                        "the seccomp probe did not end within {} s",
                        WITHIN.as_secs()
                    )));
                }
                Ok(_) => std::thread::sleep(POLL),
            }
        };
        let logs = match &seen {
            Ok(None) => self
                .kubectl
                .call(&["logs", &name], &[], self.short, Interrupt::never())
                .map(|o| o.stdout)
                .unwrap_or_default(),
            _ => String::new(),
        };
        self.delete(&[&name]);
        Ok(verdict(&logs, seen?.as_deref()))
    }

    /// The probe's verdict, kept an hour (see the module documentation).
    /// `fresh`: probed now whatever is kept (`hosts check`, `hosts prepare`).
    pub fn seccomp_verdict(
        &self,
        fresh: bool,
        interrupt: Interrupt,
    ) -> Result<Verdict, BackendError> {
        let cluster = self.kubectl.cluster.to_string();
        kept_verdict::verdict(&verdict_kind(), &cluster, fresh, || {
            self.probe_seccomp(interrupt)
        })
    }

    /// Forgets the kept verdict: a node could not start a container under the
    /// profile (one added since, say), so the next sandbox asks again.
    pub(super) fn forget_seccomp_verdict(&self) {
        if let Some(file) = kept_verdict::file(&verdict_kind(), &self.kubectl.cluster.to_string()) {
            let _ = std::fs::remove_file(file);
        }
    }

    /// The profile a sandbox's Pods carry: `Localhost` where the verdict says it is
    /// installed; None (`RuntimeDefault`) else, or when it cannot be had. Asked once
    /// per backend.
    pub(super) fn seccomp_for_pods(&self) -> Option<String> {
        self.seccomp
            .get_or_init(|| match self.seccomp_verdict(false, Interrupt::never()) {
                Ok(verdict) if verdict.installed => Some(localhost_profile()),
                Ok(verdict) => {
                    log::info!(
                        "{}: agent-runner's seccomp profile is not on its nodes ({}); Pods run under RuntimeDefault (`hosts prepare` installs it)",
                        self.kubectl.cluster,
                        verdict.detail
                    );
                    None
                }
                Err(e) => {
                    log::warn!(
                        "{}: whether agent-runner's seccomp profile is on its nodes is not known ({e}); Pods run under RuntimeDefault",
                        self.kubectl.cluster
                    );
                    None
                }
            })
            .clone()
    }
}

/// The kind of the kept verdict of this build's profile (`kept_verdict`).
fn verdict_kind() -> String {
    let profile = localhost_profile();
    let digest = profile
        .trim_start_matches("agent-runner/")
        .trim_end_matches(".json");
    format!("seccomp-{digest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_named_by_its_content() {
        let name = localhost_profile();
        assert!(
            name.starts_with("agent-runner/") && name.ends_with(".json"),
            "{name}"
        );
        assert_eq!(name.len(), "agent-runner/".len() + 16 + ".json".len());
        assert_eq!(name, localhost_profile());
    }

    #[test]
    fn the_installer_writes_the_profile_through_the_seccomp_root_only() {
        let labels = vec![(
            "agent-runner.task".to_string(),
            "seccomp-install".to_string(),
        )];
        let pod = installer("team", "inst", "node-1", "tools:1", &labels);
        assert_eq!(pod["spec"]["nodeName"], "node-1");
        assert_eq!(
            pod["spec"]["volumes"],
            json!([{"name": "seccomp",
                "hostPath": {"path": "/var/lib/kubelet/seccomp", "type": "DirectoryOrCreate"}}])
        );
        let container = &pod["spec"]["containers"][0];
        assert_eq!(container["securityContext"]["privileged"], false);
        assert_eq!(
            container["securityContext"]["capabilities"],
            json!({"drop": ["ALL"]})
        );
        let path = localhost_profile();
        let (dir, file) = path.split_once('/').unwrap();
        assert_eq!(container["args"][1], dir);
        assert_eq!(container["args"][2], file);
        let content: Value = serde_json::from_str(container["args"][3].as_str().unwrap()).unwrap();
        assert_eq!(content["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(
            pod["metadata"]["labels"]["agent-runner.task"],
            "seccomp-install"
        );
        // The installer's script under this machine's shell, into a directory here.
        let root = std::env::temp_dir().join(format!("seccomp-{}", uuid::Uuid::new_v4().simple()));
        let script = container["command"][2]
            .as_str()
            .unwrap()
            .replace("$$", "$")
            .replace("/seccomp/", &format!("{}/", root.display()));
        let args: Vec<String> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().replace("$$", "$"))
            .collect();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "installed\n");
        let written = std::fs::read(root.join(&path)).unwrap();
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(written, profile().to_vec());
    }

    #[test]
    fn the_verdict_needs_the_chmod_refused() {
        assert!(verdict("agent-runner-setid 1\n", None).installed);
        let allowed = verdict("agent-runner-setid 0\n", None);
        assert!(
            !allowed.installed && allowed.detail.contains("was allowed"),
            "{allowed:?}"
        );
        let refused = verdict(
            "",
            Some("CreateContainerError: cannot load seccomp profile"),
        );
        assert_eq!(
            (refused.installed, refused.detail.as_str(), refused.mode()),
            (
                false,
                "CreateContainerError: cannot load seccomp profile",
                "runtime-default"
            )
        );
        assert!(!verdict("noise", None).installed);
        assert_eq!(verdict("agent-runner-setid 1", None).mode(), "localhost");
    }
}
