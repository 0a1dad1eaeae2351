//! The Kubernetes backend (SPEC §25): a sandbox is a Pod on a cluster the user's
//! `kubectl` reaches, driven through `kubectl` (`kubectl.rs`, where every call is
//! made, each with a deadline) as the Docker backend drives `docker`.
//! Kubernetes schedules; agent-runner never picks nodes.
//!
//! The flow of one sandbox:
//! 1. `start`: the `Spec` becomes a Pod (`pod.rs`, a pure function: no host path,
//!    no service-account token, no variable, `activeDeadlineSeconds` = the expiry,
//!    owner/task/expiry labels, the tools copied from the tools image by an init
//!    container into a read-only `emptyDir`). Sandboxes with no network get the
//!    namespace's NetworkPolicy denying all their traffic (applied once).
//!    `kubectl create -f -` (the manifest on stdin), then the Pod's status is
//!    watched until it runs (`watch.rs`): not scheduled within `schedule_timeout` → `host busy:
//!    <cluster>: <the scheduler's reason>`; an image the node cannot get → image
//!    missing.
//! 2. The lifeline: `kubectl attach -i` is held, its stdin our pipe (`stdin`,
//!    `stdinOnce`). The main process waits behind a gate for our first line, so
//!    nothing it prints is said before we listen; then it is the helper (PID 1),
//!    and its stdio the framed stream of `lifeline.rs`, egress included: the
//!    sandbox has no other way out.
//! 3. Each exec: `kubectl exec -i` of a small shell script that reads the
//!    variables from stdin (`kubectl::variables_head`) before the command's own
//!    stdin: no value in an argv or in the Pod object.
//! 4. The end: our stdin closed → the helper ends → the Pod ends
//!    (`restartPolicy: Never`); however agent-runner ends, SIGKILL included, the
//!    kernel closes that pipe. The Pod object is then deleted (`--wait=false`).
//! 5. Faults: an exec that fails asks the Pod's status within 5 s; no answer, an
//!    evicted Pod or a lost node → `host lost: <cluster>: …`. The sweep
//!    (`sweep_orphans`) deletes Pods labelled `agent-runner.task` whose owner
//!    (annotations, exact) is gone or whose expiry passed, by label only, and
//!    the worker sessions' claims whose expiry passed.
//! 6. A resumed task: where the entry names `session_storage_class`, the worker's
//!    session is a claim of the task mounted at `SESSION_DIR` (`session_claim.rs`);
//!    else the agent starts afresh with its history, said in the note.
//!
//! The transport is the copy (nothing of this machine is mounted) and the carrier
//! the lifeline.
//!
//! Before any sandbox, the engine as the code above reaches it (`entry.rs`, its
//! `engine::Engine`, listed in `ENGINES`): its target, a `Cluster`
//! (`cluster.rs`) read from `k8s://CONTEXT/NAMESPACE` or from a `hosts:` entry's
//! `kubernetes:` and carried to a runner child in its environment; the backend
//! opened there (the tools image, the entry's schedule timeout); the health check
//! (`kubectl version` within 5 s); the sweep of a host (`Kubernetes::sweep`); its
//! rows of `hosts check` (`Kubernetes::check`) and `hosts prepare` (the seccomp
//! profile on the nodes, `seccomp_profile.rs`); and `doctor`'s checks of it.

/// Its target, `k8s://CONTEXT/NAMESPACE` or a `hosts:` entry's `kubernetes:`.
pub mod cluster;
pub mod egress_probe;
/// What the code above asks of its targets (`engine::Engine`).
pub(crate) mod entry;
mod kept_verdict;
pub mod kubectl;
pub mod pod;
pub mod seccomp_profile;
pub mod session_claim;
mod watch;

use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use super::lifeline::{Down, Stream};
use super::spec::{Exec, Mount, Net, Spec, Var};
use super::sweep::{self, LABEL_EXPIRES, LABEL_TASK};
use super::tools::TOOLS_DIR;
use super::{Backend, BackendError, Instance, Output, Started};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Finished, Held, HeldWait, Limits, Stop};
use agent_runner_core::timestamp::human;
use agent_runner_settings::labels;
pub use cluster::Cluster;
pub use kubectl::Kubectl;

/// The health check of a cluster: the Pod's status within this (SPEC §22).
const HEALTH: Duration = Duration::from_secs(5);
/// How often a running exec's Pod is checked (SPEC §22: as a remote daemon's).
const WATCH_EVERY: Duration = Duration::from_secs(10);
/// How soon a starting Pod's status is read again when its watch ended.
const POLL: Duration = Duration::from_millis(250);

/// A cluster as the engine of sandboxes.
#[derive(Debug, Clone)]
pub struct Kubernetes {
    kubectl: Kubectl,
    /// Of a short call: create, get, delete.
    short: Duration,
    /// How long a Pod may wait for a node (`schedule_timeout_sec`, default 300).
    schedule_timeout: Duration,
    /// The image of the tools (`agent-runner tools image`).
    tools_image: Option<String>,
    policy: std::sync::Arc<std::sync::OnceLock<Result<(), BackendError>>>,
    /// For the task's note (`Backend::notices`).
    notices: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The claims `session_claim` made ready: a named volume of a `Spec` of one
    /// of these names is that claim, not an `emptyDir`.
    claims: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The seccomp profile the Pods carry (`seccomp_profile.rs`), asked once.
    seccomp: std::sync::Arc<std::sync::OnceLock<Option<String>>>,
}

impl Kubernetes {
    pub fn new(cluster: Cluster) -> Kubernetes {
        Kubernetes {
            kubectl: Kubectl::new(cluster),
            short: Duration::from_secs(30),
            schedule_timeout: Duration::from_secs(300),
            tools_image: None,
            policy: Default::default(),
            notices: Default::default(),
            claims: Default::default(),
            seccomp: Default::default(),
        }
    }

    /// With the tools from `image` (mounted where the `Spec` mounts the tools volume).
    pub fn with_tools_image(mut self, image: &str) -> Kubernetes {
        self.tools_image = Some(image.to_string());
        self
    }

    /// With Pods not scheduled within `within` failing `host busy`.
    pub fn with_schedule_timeout(mut self, within: Duration) -> Kubernetes {
        self.schedule_timeout = within;
        self
    }

    pub fn cluster(&self) -> &Cluster {
        &self.kubectl.cluster
    }

    /// None when the API server answers `kubectl version` within the health
    /// check's time (SPEC §22); else why not.
    pub fn health(&self) -> Option<String> {
        match self
            .kubectl
            .call(&["version", "-o", "json"], &[], HEALTH, Interrupt::never())
        {
            Ok(out) if out.ok => None,
            Ok(out) => Some(self.kubectl.failed(&["version"], &out, HEALTH).to_string()),
            Err(e) => Some(e.to_string()),
        }
    }

    /// Whether the egress proof `verdict` (None: none was asked) lets a sandbox
    /// start: a cluster that does not enforce the policy is refused unless its
    /// entry accepts it (then said in the log).
    fn egress_allowed(
        &self,
        verdict: Option<Result<egress_probe::Verdict, BackendError>>,
    ) -> Result<(), BackendError> {
        let cluster = &self.kubectl.cluster;
        match verdict {
            None => Ok(()),
            Some(Err(e)) => Err(BackendError::Io(format!(
                "{cluster}: whether it enforces egress could not be proven: {e}"
            ))),
            Some(Ok(verdict)) => match verdict.refusal(&cluster.to_string()) {
                Some(refusal) if !cluster.egress_unenforced => Err(BackendError::Refused(refusal)),
                Some(refusal) => {
                    let notice = format!("{refusal} (accepted by the host's entry)");
                    log::warn!("{notice}");
                    if let Ok(mut notices) = self.notices.lock()
                        && !notices.contains(&notice)
                    {
                        notices.push(notice);
                    }
                    Ok(())
                }
                None => Ok(()),
            },
        }
    }

    /// The namespace's NetworkPolicy for sandboxes, applied once per process.
    fn ensure_policy(&self) -> Result<(), BackendError> {
        self.policy
            .get_or_init(|| {
                let policy = pod::network_policy(&self.kubectl.cluster.namespace).to_string();
                self.kubectl
                    .checked(&["apply", "-f", "-"], policy.as_bytes(), self.short)
                    .map(drop)
            })
            .clone()
    }

    /// The Pod of `spec`, created.
    fn create(&self, spec: &Spec) -> Result<String, BackendError> {
        let name = spec
            .name
            .clone()
            .ok_or_else(|| BackendError::Io("a Pod needs a name".into()))?;
        let plan = pod::Plan {
            namespace: self.kubectl.cluster.namespace.clone(),
            expires_in_secs: expires_in(spec),
            tools_image: self.tools_image.clone(),
            user: spec.as_user.then(agent_runner_core::sys::user_and_group),
            claims: self
                .claims
                .lock()
                .map(|claims| claims.clone())
                .unwrap_or_default(),
            seccomp: self.seccomp_for_pods(),
        };
        let manifest = pod::pod(spec, &plan).map_err(|e| BackendError::Refused(e.to_string()))?;
        self.kubectl.checked(
            &["create", "-f", "-"],
            manifest.to_string().as_bytes(),
            self.short,
        )?;
        Ok(name)
    }

    /// Waits until the Pod `name` runs (or, `to_end`, has ended): its phase. Its
    /// status is watched (`watch.rs`), each change judged as it comes, and the
    /// deadlines judged when they pass.
    fn wait_for(
        &self,
        name: &str,
        image: &str,
        to_end: bool,
        within: Duration,
        interrupt: Interrupt,
    ) -> Result<String, BackendError> {
        let started = Instant::now();
        let limit = within.max(self.schedule_timeout);
        let mut watch = watch::Watch::new(self, name);
        let mut last: Option<PodStatus> = None;
        loop {
            if interrupt.is_set() {
                return Err(BackendError::Interrupted);
            }
            // Until the next moment a deadline could pass.
            let busy_at = last
                .as_ref()
                .filter(|s| s.unschedulable.is_some())
                .map(|_| self.schedule_timeout);
            let next = busy_at.map_or(limit, |at| at.min(limit));
            let left = next.saturating_sub(started.elapsed());
            if let Some(status) = watch.next(left, interrupt)? {
                last = Some(status);
            }
            let Some(status) = &last else {
                if started.elapsed() >= limit {
                    return Err(self.not_within(name, to_end, started, "", ""));
                }
                continue;
            };
            // Before the phase: a Pod whose tools' copy failed is Running all the
            // same (the kubelet starts the worker whatever the copy's hook said).
            if let Some(why) = &status.start_problem {
                if why.contains("seccomp") {
                    self.forget_seccomp_verdict();
                }
                return Err(BackendError::Failed {
                    command: format!("kubectl create pod {name}"),
                    detail: format!("the node cannot start its container: {why}"),
                });
            }
            let phase = status.phase.as_str();
            match phase {
                "Running" if !to_end => return Ok(phase.into()),
                "Succeeded" | "Failed" if to_end => return Ok(phase.into()),
                "Succeeded" | "Failed" => {
                    return Err(BackendError::Gone {
                        name: name.into(),
                        detail: format!("the Pod ended ({phase}) {}", status.reason),
                    });
                }
                _ => {}
            }
            if let Some(waiting) = &status.image_problem {
                // The tools image is the one the node lacks when the copy waits.
                let image = match (&self.tools_image, status.image_of == pod::TOOLS_CONTAINER) {
                    (Some(tools), true) => tools.as_str(),
                    _ => image,
                };
                return Err(BackendError::ImageMissing {
                    what: super::CLUSTER_IMAGE,
                    image: image.into(),
                    detail: format!(
                        "the cluster cannot run it ({waiting}): push it where the cluster pulls, or load it on the nodes"
                    ),
                });
            }
            if let Some(why) = &status.unschedulable
                && started.elapsed() >= self.schedule_timeout
            {
                return Err(BackendError::Refused(format!(
                    "host busy: {}: {why}",
                    self.kubectl.cluster
                )));
            }
            if started.elapsed() >= limit {
                return Err(self.not_within(name, to_end, started, phase, &status.waiting));
            }
        }
    }

    /// A Pod that did not run (or end) within the wait's limit, in `phase`.
    fn not_within(
        &self,
        name: &str,
        to_end: bool,
        started: Instant,
        phase: &str,
        waiting: &str,
    ) -> BackendError {
        BackendError::Failed {
            command: format!("kubectl create pod {name}"),
            detail: format!(
                "the Pod did not {} within {} ({phase}{})",
                if to_end { "end" } else { "run" },
                human(started.elapsed()),
                match waiting {
                    "" => String::new(),
                    waiting => format!("; {waiting}"),
                }
            ),
        }
    }

    /// The Pod's status as far as the backend needs it.
    fn status(&self, name: &str) -> Result<PodStatus, BackendError> {
        let out = self.kubectl.call(
            &["get", "pod", name, "-o", "json"],
            &[],
            HEALTH,
            Interrupt::never(),
        )?;
        if !out.ok {
            let detail = if out.ending == process::Ending::TimedOut {
                format!("no answer within {} s", HEALTH.as_secs())
            } else {
                super::docker_cli::last_lines(&out.stderr, 2)
            };
            // The API server's own word: "executable file not found" (a kubeconfig's
            // auth plugin) is no Pod gone.
            if out.stderr.contains("(NotFound)") {
                return Err(BackendError::Gone {
                    name: name.into(),
                    detail,
                });
            }
            return Err(BackendError::Io(format!(
                "host lost: {}: {detail}",
                self.kubectl.cluster
            )));
        }
        let pod: Value = serde_json::from_str(&out.stdout)
            .map_err(|e| BackendError::Io(format!("kubectl get pod {name}: {e}")))?;
        Ok(PodStatus::of(&pod))
    }

    /// Deletes Pods by name, not waiting for their end.
    fn delete(&self, names: &[&str]) -> bool {
        let mut args = vec!["delete", "pod", "--wait=false", "--ignore-not-found"];
        args.extend(names);
        self.kubectl
            .call(&args, &[], self.short, Interrupt::never())
            .is_ok_and(|out| out.ok)
    }
}

/// What `status` reads of a Pod.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct PodStatus {
    phase: String,
    /// `status.reason` (Evicted, NodeLost, DeadlineExceeded) and message.
    reason: String,
    /// The scheduler's reason while it has placed the Pod nowhere.
    unschedulable: Option<String>,
    /// The worker container waits for an image it cannot get.
    image_problem: Option<String>,
    /// The container whose image that is (the tools' copy, or the worker).
    image_of: String,
    /// The node cannot create a container of it (a `Localhost` seccomp profile
    /// it lacks, say).
    start_problem: Option<String>,
    /// What its containers wait for (`worker: ContainerCreating`), for the error of
    /// a Pod that did not start in time.
    waiting: String,
}

/// A string field of the Pod's JSON, empty when absent.
fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// The Pod's containers that ended (`.status`): each one's name, exit code and
/// reason.
fn ended(status: &Value) -> Vec<(String, i64, String)> {
    status["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["state"]["terminated"].is_object())
        .map(|c| {
            let state = &c["state"]["terminated"];
            let code = state["exitCode"].as_i64().unwrap_or(-1);
            (text(&c["name"]), code, text(&state["reason"]))
        })
        .collect()
}

impl PodStatus {
    fn of(pod: &Value) -> PodStatus {
        let status = &pod["status"];
        let unschedulable = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
            .map(|c| format!("{}: {}", text(&c["reason"]), text(&c["message"])));
        // Each container's waiting state: (its name, the reason, the message).
        let waiting: Vec<(String, String, String)> = ["initContainerStatuses", "containerStatuses"]
            .iter()
            .flat_map(|key| status[*key].as_array().into_iter().flatten())
            .map(|c| {
                let state = &c["state"]["waiting"];
                (
                    text(&c["name"]),
                    text(&state["reason"]),
                    text(&state["message"]),
                )
            })
            .filter(|(_, reason, _)| !reason.is_empty())
            .collect();
        let first = |reasons: &[&str]| {
            waiting
                .iter()
                .find(|(_, reason, _)| reasons.contains(&reason.as_str()))
                .map(|(_, reason, message)| format!("{reason}: {message}"))
        };
        let pulls = [
            "ErrImageNeverPull",
            "ErrImagePull",
            "ImagePullBackOff",
            "InvalidImageName",
        ];
        let image_problem = first(&pulls);
        let image_of = waiting
            .iter()
            .find(|(_, reason, _)| pulls.contains(&reason.as_str()))
            .map(|(name, _, _)| name.clone())
            .unwrap_or_default();
        let ended = ended(status);
        // The tools' copy ended badly: the worker cannot start (or has no tools).
        let start_problem = first(&[
            "CreateContainerConfigError",
            "CreateContainerError",
            "RunContainerError",
        ])
        .or_else(|| {
            ended
                .iter()
                .find(|(name, code, _)| name == pod::TOOLS_CONTAINER && *code != 0)
                .map(|(_, code, reason)| {
                    format!(
                        "the tools' copy failed ({reason}, exit {code}): see `kubectl logs -c {}`",
                        pod::TOOLS_CONTAINER
                    )
                })
        });
        // The worker's end is the sandbox's, though the tools' container (listed
        // before it, `pod.rs`) may still be running for a few seconds.
        let worker_end = ended
            .iter()
            .find(|(name, _, _)| name == pod::CONTAINER)
            .map(|(_, code, reason)| {
                let phase = if *code == 0 { "Succeeded" } else { "Failed" };
                (
                    phase,
                    format!("the worker container ended ({reason}, exit {code})"),
                )
            });
        let waiting = waiting
            .iter()
            .map(|(name, reason, _)| format!("{name}: {reason}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut phase = text(&status["phase"]);
        let mut reason = format!("{} {}", text(&status["reason"]), text(&status["message"]))
            .trim()
            .to_string();
        if let (Some((ended, why)), "Running") = (worker_end, phase.as_str()) {
            (phase, reason) = (ended.to_string(), why);
        }
        PodStatus {
            waiting,
            phase,
            reason,
            unschedulable,
            image_problem,
            image_of,
            start_problem,
        }
    }

    /// Why the Pod's node is gone, if it is (SPEC §25: `host lost`).
    fn lost(&self) -> Option<&str> {
        let lost = self.reason.starts_with("Evicted")
            || self.reason.starts_with("NodeLost")
            || self.reason.starts_with("UnexpectedAdmissionError")
            || self.reason.starts_with("Shutdown");
        lost.then_some(self.reason.as_str())
    }
}

/// `spec` with its main process behind a gate: nothing the main process says may
/// come before the lifeline listens (`kubectl attach` hears only what comes
/// after it connects), so it waits for our first line, then becomes the main
/// process (its PID). Run by `shell`. With the tools mounted, the gate starts
/// nothing unless their copy is complete (`pod::COPIED`).
fn gated(spec: &Spec, shell: &str) -> Spec {
    let mut gated = spec.clone();
    if spec.held {
        let complete = match mounts_tools(spec) {
            true => format!(
                "[ -e {} ] || {{ echo 'agent-runner: the tools were not copied whole into the Pod (kubectl logs -c {})' >&2; exit 1; }}; ",
                pod::COPIED,
                pod::TOOLS_CONTAINER
            ),
            false => String::new(),
        };
        let mut args = vec![
            "-c".to_string(),
            format!("IFS= read -r go || exit 1; {complete}exec \"$0\" \"$@\""),
            spec.main.entrypoint.clone(),
        ];
        args.extend(spec.main.args.iter().cloned());
        gated.main.entrypoint = shell.to_string();
        gated.main.args = args;
    }
    gated
}

/// The ready line of the Pod `name`'s main process and, with `Spec::stream`, the
/// lifeline's stream, read from `held` (`kubectl attach`).
fn attached(
    held: &mut Held,
    spec: &Spec,
    name: &str,
) -> Result<(String, Option<Stream>), BackendError> {
    let ready = match &spec.ready {
        None => String::new(),
        Some(ready) => held
            .read_line(ready.prefix, ready.within, ready.interrupt)
            .map_err(|wait| match wait {
                HeldWait::Interrupted => BackendError::Interrupted,
                HeldWait::TimedOut => BackendError::Failed {
                    command: format!("kubectl attach {name}"),
                    detail: format!(
                        "the Pod's main process was not ready within {}",
                        human(ready.within)
                    ),
                },
                HeldWait::Ended(stderr) => BackendError::Failed {
                    command: format!("kubectl attach {name}"),
                    detail: super::docker_cli::last_lines(&stderr, 3),
                },
            })?,
    };
    let stream = match spec.stream.then(|| held.take_stream()).flatten() {
        None => None,
        Some((input, up)) => {
            let down =
                Down::spawn(input).map_err(|e| BackendError::Io(format!("lifeline: {e}")))?;
            Some(Stream {
                up: Box::new(up),
                down,
            })
        }
    };
    Ok((ready, stream))
}

/// What a thread of `start` returned, its panic an error naming `what`.
fn joined<T>(
    handle: std::thread::ScopedJoinHandle<'_, Result<T, BackendError>>,
    what: &str,
) -> Result<T, BackendError> {
    handle
        .join()
        .unwrap_or_else(|_| Err(BackendError::Io(format!("{what}: its thread failed"))))
}

/// Seconds until the `Spec`'s expiry label, else the sweep's lifetime.
fn expires_in(spec: &Spec) -> u64 {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    spec.labels
        .iter()
        .find(|(key, _)| key == LABEL_EXPIRES)
        .and_then(|(_, at)| at.parse::<u64>().ok())
        .map_or(sweep::LIFETIME.as_secs(), |at| {
            at.saturating_sub(now).max(1)
        })
}

/// The Pod mounts the tools (`pod.rs` copies them into it).
fn mounts_tools(spec: &Spec) -> bool {
    spec.mounts
        .iter()
        .any(|m| m.volume && m.target == TOOLS_DIR)
}

/// The shell the Pod's scripts run with: the tools' busybox when mounted.
fn shell_of(spec: &Spec) -> String {
    if mounts_tools(spec) {
        format!("{TOOLS_DIR}/bin/sh")
    } else {
        "/bin/sh".into()
    }
}

/// Why `cluster` is not asked to pull an image.
pub(crate) fn pulls_itself(cluster: &Cluster) -> String {
    format!(
        "{cluster} pulls images itself: push it where the cluster pulls, or load it on the nodes"
    )
}

impl Backend for Kubernetes {
    fn start(&self, spec: &Spec) -> Result<Started, BackendError> {
        let shell = shell_of(spec);
        let gated = gated(spec, &shell);
        let (within, interrupt) = spec
            .ready
            .as_ref()
            .map_or((self.short, Interrupt::never()), |r| {
                (r.within, r.interrupt)
            });
        if !spec.held {
            return Err(BackendError::Io(
                "a Pod that is not held is run with run_once".into(),
            ));
        }
        // Beside the Pod's creation and start, neither waiting on the other: the
        // namespace's policy (the main process waits behind its gate until it is
        // there) and the proof that the cluster enforces it (`egress_probe.rs`).
        let isolated = spec.network == Net::Isolated;
        let (name, running, policy, verdict, held) = std::thread::scope(|scope| {
            let policing = isolated.then(|| scope.spawn(|| self.ensure_policy()));
            let probing = isolated.then(|| scope.spawn(|| self.egress_verdict(false, interrupt)));
            let created = self.create(&gated);
            let running = created
                .as_ref()
                .ok()
                .map(|name| self.wait_for(name, &spec.image, false, within, interrupt));
            // `kubectl attach` connects only to a running Pod.
            let held = match (&created, &running) {
                (Ok(name), Some(Ok(_))) => Some(process::spawn_held(&self.kubectl.command(&[
                    "attach",
                    "-i",
                    name,
                    "-c",
                    pod::CONTAINER,
                ]))),
                _ => None,
            };
            let policy = policing.map(|h| joined(h, "the NetworkPolicy"));
            let verdict = probing.map(|h| joined(h, "the egress probe"));
            (created, running, policy, verdict, held)
        });
        let name = name?;
        let removal = |e: BackendError| {
            self.delete(&[&name]);
            e
        };
        running.unwrap_or(Ok(String::new())).map_err(removal)?;
        let mut held = match held {
            Some(Ok(held)) => held,
            Some(Err(e)) => {
                return Err(removal(kubectl::missing(&e)));
            }
            None => {
                return Err(removal(BackendError::Io(
                    "kubectl attach did not start".into(),
                )));
            }
        };
        let checked = policy
            .unwrap_or(Ok(()))
            .and_then(|()| self.egress_allowed(verdict));
        if let Err(e) = checked {
            let _ = held.release(Duration::from_secs(2));
            return Err(removal(e));
        }
        if let Err(e) = held.send_line("go") {
            let _ = held.release(Duration::from_secs(2));
            return Err(removal(BackendError::Io(format!("kubectl attach: {e}"))));
        }
        let (ready, stream) = match attached(&mut held, spec, &name) {
            Ok(attached) => attached,
            Err(e) => {
                let _ = held.release(Duration::from_secs(2));
                return Err(removal(e));
            }
        };
        Ok(Started {
            instance: Box::new(Pod {
                name,
                shell,
                held: std::sync::Mutex::new(held),
                backend: self.clone(),
                lost: Default::default(),
                down: stream.as_ref().map(|stream| stream.down.clone()),
            }),
            ready,
            stream,
        })
    }

    fn pull(&self, image: &str, _interrupt: Interrupt) -> Result<(), BackendError> {
        Err(BackendError::ImageMissing {
            what: super::CLUSTER_IMAGE,
            image: image.to_string(),
            detail: pulls_itself(&self.kubectl.cluster),
        })
    }

    fn run_once(
        &self,
        spec: &Spec,
        wall: Duration,
        interrupt: Interrupt,
    ) -> Result<Output, BackendError> {
        let mut spec = spec.clone();
        spec.held = false;
        if spec.name.is_none() {
            spec.name = Some(format!(
                "agent-runner-once-{}",
                uuid::Uuid::new_v4().simple()
            ));
        }
        // Nothing holds this Pod's main process back: the policy first.
        if spec.network == Net::Isolated {
            self.ensure_policy()?;
        }
        let name = self.create(&spec)?;
        let ended = self.wait_for(&name, &spec.image, true, wall, interrupt);
        let logs = self.kubectl.call(
            &["logs", &name, "-c", pod::CONTAINER],
            &[],
            self.short,
            Interrupt::never(),
        );
        self.delete(&[&name]);
        let phase = ended?;
        let mut out = logs?;
        out.ok = phase == "Succeeded";
        Ok(out)
    }

    fn sweep_orphans(&self) -> Vec<String> {
        self.sweep(sweep::Rule::AtStart)
    }

    fn remote(&self) -> bool {
        true
    }

    fn resolve_runtime(&self, name: Option<&str>) -> Option<(String, Vec<String>)> {
        // A RuntimeClass says which handler the nodes run for it; the cluster's
        // default (no class) is the nodes' and not told.
        let name = name?;
        let out = self
            .kubectl
            .call(
                &["get", "runtimeclass", name, "-o", "jsonpath={.handler}"],
                &[],
                HEALTH,
                Interrupt::never(),
            )
            .ok()?;
        let handler = out.stdout.trim();
        (out.ok && !handler.is_empty()).then(|| (name.to_string(), vec![handler.to_string()]))
    }

    fn tools_volume(&self, _interrupt: Interrupt) -> Result<Option<String>, BackendError> {
        // Not a volume: its name says where the Pod's copy of the tools fills the
        // read-only `emptyDir` from (`pod.rs`).
        match &self.tools_image {
            Some(image) => Ok(Some(image.clone())),
            None => Err(BackendError::Io(format!(
                "{} has no tools image set (`agent-runner tools image` builds it)",
                self.kubectl.cluster
            ))),
        }
    }

    fn files_by_exec(&self) -> bool {
        true
    }

    fn keeps_sessions(&self) -> bool {
        self.kubectl.cluster.session_storage_class.is_some()
    }

    fn session_volume(
        &self,
        task_id: &str,
        key: &str,
        fresh: bool,
    ) -> Result<Option<Mount>, BackendError> {
        self.session_claim(task_id, key, fresh)
    }

    fn forget_session_volume(&self, key: &str) {
        self.forget_claim(key);
    }

    fn notices(&self) -> Vec<String> {
        self.notices
            .lock()
            .map(|notices| notices.clone())
            .unwrap_or_default()
    }

    fn daemon(&self) -> String {
        self.kubectl.cluster.to_string()
    }
}

impl Kubernetes {
    /// Deletes the Pods labelled `agent-runner.task` that `rule` takes (their owner
    /// gone, or their expiry past), then the worker sessions' claims it takes
    /// (their expiry past: they carry no owner), read from their annotations (the
    /// exact values the labels carry made label-safe); their names (`pvc <name>`
    /// for a claim).
    pub fn sweep(&self, rule: sweep::Rule) -> Vec<String> {
        let mut swept = Vec::new();
        for kind in ["pod", "pvc"] {
            let names = match self.leftovers(kind, rule) {
                Ok(names) => names,
                // Only a cluster whose entry keeps sessions must let us list claims.
                Err(e) if kind == "pvc" && !self.keeps_sessions() => {
                    log::debug!(
                        "the sweep of {}'s claims did not run: {e}",
                        self.kubectl.cluster
                    );
                    continue;
                }
                Err(e) => {
                    log::error!("the sweep of {} did not run: {e}", self.kubectl.cluster);
                    continue;
                }
            };
            if names.is_empty() {
                continue;
            }
            let mut args = vec!["delete", kind, "--wait=false", "--ignore-not-found"];
            args.extend(names.iter().map(String::as_str));
            let deleted = self
                .kubectl
                .call(&args, &[], self.short, Interrupt::never())
                .is_ok_and(|out| out.ok);
            if !deleted {
                log::error!("could not delete the orphaned {kind}s {}", names.join(", "));
            }
            swept.extend(names.into_iter().map(|name| match kind {
                "pod" => name,
                _ => format!("{kind} {name}"),
            }));
        }
        swept
    }

    /// The names of the objects of `kind` labelled `agent-runner.task` that `rule`
    /// takes.
    fn leftovers(&self, kind: &str, rule: sweep::Rule) -> Result<Vec<String>, BackendError> {
        let out = self.kubectl.checked(
            &["get", kind, "-l", LABEL_TASK, "-o", "json"],
            &[],
            self.short,
        )?;
        let list: Value = serde_json::from_str(&out.stdout)
            .map_err(|e| BackendError::Io(format!("kubectl get {kind}: {e}")))?;
        let mut names = Vec::new();
        for item in list["items"].as_array().into_iter().flatten() {
            let meta = &item["metadata"];
            let name = meta["name"].as_str().unwrap_or_default().to_string();
            let annotation = |key: &str| {
                meta["annotations"][key]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            };
            let line = [
                name.clone(),
                name.clone(),
                annotation(labels::OWNER_PID),
                annotation(labels::OWNER_START),
                annotation(labels::OWNER_HOST),
                annotation(labels::OWNER_BOOT),
                annotation(labels::OWNER_PIDNS),
                annotation(LABEL_EXPIRES),
            ]
            .join("\t");
            if sweep::orphan(&line, rule).is_some() {
                names.push(name);
            }
        }
        Ok(names)
    }
}

/// One finding of `Kubernetes::check` (`hosts check`, `doctor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was checked, in words (`version`, `create pods`).
    pub what: String,
    /// None: it holds; else what is wrong and the fix.
    pub problem: Option<String>,
    /// What was seen (the server's version).
    pub seen: String,
}

/// What the backend needs to be allowed in its namespace.
const NEEDED_VERBS: [(&str, &str); 7] = [
    ("create", "pods"),
    ("delete", "pods"),
    ("get", "pods"),
    ("watch", "pods"),
    ("create", "pods/exec"),
    ("create", "pods/attach"),
    ("create", "networkpolicies.networking.k8s.io"),
];

impl Kubernetes {
    /// What `hosts check` and `doctor` say of the cluster: the server answers (its
    /// version), the namespace is there, this user may do what the backend does
    /// there (`kubectl auth can-i`), and the tools image is set.
    pub fn check(&self) -> Vec<Finding> {
        let mut found = Vec::new();
        let version =
            self.kubectl
                .call(&["version", "-o", "json"], &[], HEALTH, Interrupt::never());
        let (problem, seen) = match version {
            Ok(out) if out.ok => {
                let json: Value = serde_json::from_str(&out.stdout).unwrap_or_default();
                (
                    None,
                    json["serverVersion"]["gitVersion"]
                        .as_str()
                        .unwrap_or("?")
                        .to_string(),
                )
            }
            Ok(out) => (
                Some(self.kubectl.failed(&["version"], &out, HEALTH).to_string()),
                String::new(),
            ),
            Err(e) => (Some(e.to_string()), String::new()),
        };
        let unreachable = problem.is_some();
        found.push(Finding {
            what: "the API server answers".into(),
            problem,
            seen,
        });
        if unreachable {
            return found;
        }
        let namespace = &self.kubectl.cluster.namespace;
        let problem = match self.kubectl.call(
            &["get", "namespace", namespace.as_str()],
            &[],
            self.short,
            Interrupt::never(),
        ) {
            Ok(out) if out.ok => None,
            Ok(out) => Some(format!(
                "namespace {namespace}: {}; create it (`kubectl create namespace {namespace}`)",
                super::docker_cli::last_lines(&out.stderr, 1)
            )),
            Err(e) => Some(e.to_string()),
        };
        found.push(Finding {
            what: format!("namespace {namespace}"),
            problem,
            seen: String::new(),
        });
        let claims = [
            ("create", "persistentvolumeclaims"),
            ("get", "persistentvolumeclaims"),
            ("delete", "persistentvolumeclaims"),
        ];
        let claims = if self.keeps_sessions() {
            &claims[..]
        } else {
            &[]
        };
        for &(verb, resource) in NEEDED_VERBS.iter().chain(claims) {
            let problem = match self.kubectl.call(
                &["auth", "can-i", verb, resource],
                &[],
                self.short,
                Interrupt::never(),
            ) {
                Ok(out) if out.stdout.trim() == "yes" => None,
                Ok(out) => Some(format!(
                    "this user may not {verb} {resource} in {namespace} ({}); a Role granting it is needed",
                    out.stdout.trim()
                )),
                Err(e) => Some(e.to_string()),
            };
            found.push(Finding {
                what: format!("may {verb} {resource}"),
                problem,
                seen: String::new(),
            });
        }
        found.push(Finding {
            what: "the tools image".into(),
            problem: self.tools_image.is_none().then(|| {
                "no tools image set: build it with `agent-runner tools image`, push it where the cluster pulls".into()
            }),
            seen: self.tools_image.clone().unwrap_or_default(),
        });
        if found.iter().all(|f| f.problem.is_none()) {
            // Last: it starts a Pod, which needs all of the above.
            let (problem, seen) = match self.egress_verdict(true, Interrupt::never()) {
                Ok(verdict) => (
                    verdict
                        .refusal(&self.kubectl.cluster.to_string())
                        .filter(|_| !self.kubectl.cluster.egress_unenforced),
                    match verdict.enforced() {
                        true => format!("enforced (tried {})", verdict.tried.join(", ")),
                        false => format!("NOT enforced (reached {})", verdict.reached.join(", ")),
                    },
                ),
                Err(e) => (Some(format!("the egress probe: {e}")), String::new()),
            };
            found.push(Finding {
                what: "egress enforced (NetworkPolicy)".into(),
                problem,
                seen,
            });
            // Not a problem either way: which profile the Pods will carry.
            let seen = match self.seccomp_verdict(true, Interrupt::never()) {
                Ok(verdict) => verdict.mode().to_string(),
                Err(e) => format!("runtime-default (the probe: {e})"),
            };
            found.push(Finding {
                what: "seccomp".into(),
                problem: None,
                seen,
            });
        }
        found
    }
}

/// Whether the Pod `name` is lost (no status within 5 s, evicted, its node lost):
/// the message, remembered in `slot`.
fn lost_pod(
    backend: &Kubernetes,
    name: &str,
    slot: &std::sync::Mutex<Option<String>>,
) -> Option<String> {
    let mut lost = slot.lock().unwrap_or_else(|e| e.into_inner());
    if lost.is_none() {
        // Asked twice before it counts: a busy machine can hold one kubectl (a
        // program of its own, its API request) past the 5 s; a frozen cluster
        // answers neither.
        let status = match backend.status(name) {
            Err(BackendError::Io(message)) if message.starts_with("host lost: ") => {
                backend.status(name)
            }
            answered => answered,
        };
        let message = match status {
            Ok(status) => status
                .lost()
                .map(|why| format!("host lost: {}: {why}", backend.kubectl.cluster))?,
            Err(BackendError::Io(message)) if message.starts_with("host lost: ") => message,
            Err(_) => return None,
        };
        *lost = Some(message);
    }
    lost.clone()
}

/// A running sandbox Pod.
struct Pod {
    name: String,
    /// The shell of its exec script.
    shell: String,
    /// `kubectl attach -i`: the lifeline (in a mutex: `Instance: Sync`).
    held: std::sync::Mutex<Held>,
    backend: Kubernetes,
    lost: std::sync::Mutex<Option<String>>,
    /// The lifeline's way down, closed first on removal (it holds the stdin).
    down: Option<Down>,
}

impl Instance for Pod {
    fn name(&self) -> &str {
        &self.name
    }

    fn exec(
        &self,
        exec: Exec,
        limits: &Limits,
        capture: &mut Capture,
        stop: Stop,
    ) -> Result<Finished, BackendError> {
        let vars: Vec<(&str, &str)> = exec
            .env
            .iter()
            .map(|var| match var {
                Var::ByName(name, value) | Var::Literal(name, value) => {
                    (name.as_str(), value.as_str())
                }
            })
            .collect();
        let mut stdin = kubectl::variables_head(vars)?;
        stdin.extend_from_slice(&exec.stdin);
        let mut args = vec![
            "exec".to_string(),
            "-i".into(),
            self.name.clone(),
            "-c".into(),
            pod::CONTAINER.into(),
            "--".into(),
            self.shell.clone(),
            "-c".into(),
            kubectl::EXEC_SCRIPT.into(),
            "sh".into(),
            exec.workdir.unwrap_or_default(),
        ];
        args.extend(exec.command);
        let mut invocation = self.backend.kubectl.command(&args).stdin(stdin);
        if let Some(file) = exec.stdin_file {
            invocation = invocation.stdin_shared(file);
        }
        // An exec waits on the cluster: while it runs, the Pod's status is read
        // every `WATCH_EVERY`; unanswered within 5 s, or the Pod evicted or its
        // node lost, the host is lost and the exec ends now, not at its limit.
        let watch = Interrupt::manual();
        if limits.interrupt.is_set() {
            watch.trigger();
        }
        let done = std::sync::atomic::AtomicBool::new(false);
        let watched = Limits {
            interrupt: watch,
            ..*limits
        };
        let (backend, name, slot) = (&self.backend, &self.name, &self.lost);
        let ran = std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut next = Instant::now() + WATCH_EVERY;
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    if limits.interrupt.is_set() {
                        watch.trigger();
                        return;
                    }
                    if Instant::now() >= next {
                        if lost_pod(backend, name, slot).is_some() {
                            watch.trigger();
                            return;
                        }
                        next = Instant::now() + WATCH_EVERY;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
            let ran = process::run(&invocation, &watched, capture, stop);
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            ran
        });
        let lost = self.lost.lock().ok().and_then(|lost| lost.clone());
        match (ran, lost) {
            (_, Some(lost)) if !limits.interrupt.is_set() => {
                // As `Instance::lost` says it: `host lost: <cluster>: …`.
                Err(BackendError::Io(lost))
            }
            (ran, _) => ran.map_err(|e| kubectl::missing(&e)),
        }
    }

    fn is_alive(&mut self) -> bool {
        super::held_mut(&mut self.held).is_running()
    }

    fn gone(&self) -> BackendError {
        BackendError::Gone {
            name: self.name.clone(),
            detail: super::docker_cli::last_lines(&super::held_stderr(&self.held), 2),
        }
    }

    fn lost(&self) -> Option<BackendError> {
        lost_pod(&self.backend, &self.name, &self.lost).map(BackendError::Io)
    }

    fn diagnose(&mut self, _image: &str, stderr: &str) -> BackendError {
        if let Some(lost) = self.lost() {
            return lost;
        }
        match self.backend.status(&self.name) {
            Err(e) => e,
            Ok(status) if status.phase != "Running" => BackendError::Gone {
                name: self.name.clone(),
                detail: format!("the Pod is {} {}", status.phase, status.reason),
            },
            Ok(_) => BackendError::Failed {
                command: format!("kubectl exec {}", self.name),
                detail: super::docker_cli::last_lines(stderr, 3),
            },
        }
    }

    fn send_line(&mut self, line: &str) -> std::io::Result<()> {
        super::held_mut(&mut self.held).send_line(line)
    }

    fn read_line(
        &mut self,
        prefix: &str,
        within: Duration,
        interrupt: Interrupt,
    ) -> Result<String, HeldWait> {
        super::held_mut(&mut self.held).read_line(prefix, within, interrupt)
    }

    fn stderr(&self) -> String {
        super::held_stderr(&self.held)
    }

    fn remove(self: Box<Self>, within: Duration) -> super::Removal {
        let this = *self;
        let started = Instant::now();
        // Our stdin closed: the helper ends, so the Pod does (`restartPolicy:
        // Never`); its object is deleted either way, not waited for.
        if let Some(down) = &this.down {
            down.close();
        }
        let lost = this.lost.lock().is_ok_and(|lost| lost.is_some());
        let held = this.held.into_inner().unwrap_or_else(|e| e.into_inner());
        let _ = held.release(if lost { within.min(HEALTH) } else { within });
        let deleted = !lost && this.backend.delete(&[&this.name]);
        super::Removal {
            took: started.elapsed(),
            left: !deleted,
        }
    }
}

#[cfg(test)]
mod tests;
