//! The worker's session on a cluster (SPEC §25 "Resume"): where the cluster's
//! entry names `session_storage_class`, the directory that keeps the agent's
//! session across sandboxes (`worker::session`) is a PersistentVolumeClaim of the
//! task in the namespace, of that class, mounted read-write at `SESSION_DIR`, as
//! the Docker engine keeps it in a volume on the daemon's host
//! (`session_volume.rs`). A resumed run's Pod mounts the claim the runs before
//! left, so its worker goes on with its session; elsewhere the worker of a resumed
//! task starts afresh with its history.
//!
//! Its name is the session's digest (of this machine, the repository and the task
//! id): another task's claim never has it. Its labels (and, exact, annotations)
//! say whose it is (`agent-runner.task`, the digest in `agent-runner.session`), and
//! a claim of that name whose annotations say otherwise is refused, never mounted.
//! Like the session volume it has no owner labels, since it must outlive a killed
//! run to be resumed, but an expiry: the sweep deletes it once that passed. A new
//! run of the task starts with a new claim; it is deleted when the task ends
//! COMPLETE (`forget`).

use std::time::Duration;

use serde_json::{Value, json};

use super::super::sweep::{LABEL_EXPIRES, LABEL_TASK, LIFETIME, expiry_label};
use super::super::{BackendError, Mount, SESSION_DIR};
use super::Kubernetes;
use super::pod::label_safe;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_settings::labels::{ROLE, SESSION};

/// What a claim asks of its class: a session is the agent's transcript, small.
pub const SIZE: &str = "1Gi";
/// The longest a claim of a run before may take to go (a Pod of it still ending).
const DELETION: Duration = Duration::from_secs(90);

/// The claim of the session `key`.
pub fn name(key: &str) -> String {
    format!(
        "agent-runner-session-{}",
        label_safe(&key.to_ascii_lowercase())
    )
}

/// The PersistentVolumeClaim of the session `key` of task `task_id` in
/// `namespace`, of `class`, expiring at `expires_at` (Unix seconds).
pub fn claim(namespace: &str, class: &str, task_id: &str, key: &str, expires_at: &str) -> Value {
    let exact = [
        (LABEL_TASK, task_id),
        (SESSION, key),
        (ROLE, "session"),
        (LABEL_EXPIRES, expires_at),
    ];
    let labels: serde_json::Map<String, Value> = exact
        .iter()
        .map(|(k, v)| (k.to_string(), json!(label_safe(v))))
        .collect();
    let annotations: serde_json::Map<String, Value> = exact
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name(key),
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "storageClassName": class,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": SIZE}},
        },
    })
}

/// Why the claim `pvc` (as `kubectl get -o json` prints it) is not the session
/// `key` of task `task_id`, if it is not.
fn not_ours(pvc: &Value, task_id: &str, key: &str) -> Option<String> {
    let annotation = |k: &str| pvc["metadata"]["annotations"][k].as_str().unwrap_or("");
    let (task, session) = (annotation(LABEL_TASK), annotation(SESSION));
    (task != task_id || session != key).then(|| {
        format!(
            "the claim {} is not the worker session of task {task_id} (its annotations say task {task:?}, session {session:?}): not mounted",
            name(key)
        )
    })
}

impl Kubernetes {
    /// See `Backend::session_volume`.
    pub(super) fn session_claim(
        &self,
        task_id: &str,
        key: &str,
        fresh: bool,
    ) -> Result<Option<Mount>, BackendError> {
        let Some(class) = self.kubectl.cluster.session_storage_class.clone() else {
            return Ok(None);
        };
        let claim_name = name(key);
        let mut exists = false;
        if fresh {
            self.kubectl.checked(
                &[
                    "delete",
                    "pvc",
                    &claim_name,
                    "--ignore-not-found",
                    "--wait=true",
                    &format!("--timeout={}s", DELETION.as_secs()),
                ],
                &[],
                DELETION + Duration::from_secs(10),
            )?;
        } else {
            let out = self.kubectl.call(
                &[
                    "get",
                    "pvc",
                    &claim_name,
                    "-o",
                    "json",
                    "--ignore-not-found",
                ],
                &[],
                self.short,
                Interrupt::never(),
            )?;
            if !out.ok {
                return Err(self.kubectl.failed(&["get", "pvc"], &out, self.short));
            }
            if !out.stdout.trim().is_empty() {
                let pvc: Value = serde_json::from_str(&out.stdout)
                    .map_err(|e| BackendError::Io(format!("kubectl get pvc {claim_name}: {e}")))?;
                if let Some(refusal) = not_ours(&pvc, task_id, key) {
                    return Err(BackendError::Refused(refusal));
                }
                exists = true;
            }
        }
        if !exists {
            let (_, at) = expiry_label(LIFETIME);
            let manifest = claim(&self.kubectl.cluster.namespace, &class, task_id, key, &at);
            self.kubectl.checked(
                &["create", "-f", "-"],
                manifest.to_string().as_bytes(),
                self.short,
            )?;
            log::info!("the worker's session claim {claim_name} ({class}) created");
        }
        if let Ok(mut claims) = self.claims.lock()
            && !claims.contains(&claim_name)
        {
            claims.push(claim_name.clone());
        }
        Ok(Some(Mount {
            readonly: false,
            ..Mount::volume(&claim_name, SESSION_DIR)
        }))
    }

    /// See `Backend::forget_session_volume`: deleted, not waited for (a Pod that
    /// still ends holds it until then).
    pub(super) fn forget_claim(&self, key: &str) {
        let claim_name = name(key);
        let deleted = self.kubectl.call(
            &[
                "delete",
                "pvc",
                &claim_name,
                "--ignore-not-found",
                "--wait=false",
            ],
            &[],
            self.short,
            Interrupt::never(),
        );
        match deleted {
            Ok(out) if out.ok => log::info!("the worker's session claim {claim_name} deleted"),
            Ok(out) => log::warn!(
                "cannot delete the worker's session claim {claim_name}: {}",
                super::super::docker_cli::last_lines(&out.stderr, 2)
            ),
            Err(e) => log::warn!("cannot delete the worker's session claim {claim_name}: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_becomes_this_whole_claim() {
        let key = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            claim("team", "fast-ssd", "Fix bug/1", key, "1900000000"),
            json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": "agent-runner-session-0123456789abcdef0123456789abcdef",
                    "namespace": "team",
                    "labels": {
                        "agent-runner.task": "Fix_bug_1",
                        "agent-runner.session": key,
                        "agent-runner.role": "session",
                        "agent-runner.expires": "1900000000",
                    },
                    "annotations": {
                        "agent-runner.task": "Fix bug/1",
                        "agent-runner.session": key,
                        "agent-runner.role": "session",
                        "agent-runner.expires": "1900000000",
                    },
                },
                "spec": {
                    "storageClassName": "fast-ssd",
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            })
        );
    }

    #[test]
    fn a_claim_of_another_task_or_session_is_refused() {
        let key = "00ff";
        let ours = claim("n", "c", "t1", key, "1");
        assert_eq!(not_ours(&ours, "t1", key), None);
        let e = not_ours(&ours, "t2", key).unwrap();
        assert!(
            e.contains("agent-runner-session-00ff is not the worker session of task t2"),
            "{e}"
        );
        assert!(not_ours(&ours, "t1", "00fe").is_some());
        assert!(not_ours(&json!({"metadata": {}}), "t1", key).is_some());
    }
}
