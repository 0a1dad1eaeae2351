//! The Kubernetes backend against the real test cluster: a Pod started from a
//! `Spec`, its lifeline, execs with variables on stdin, its object, its end, the
//! sweep and an unschedulable Pod.

use std::time::{Duration, Instant};

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;
use agent_runner_core::process::{Capture, Limits, Stop};
use agent_runner_sandbox::backend::sweep::{LABEL_EXPIRES, LABEL_TASK, owner_labels};
use agent_runner_sandbox::backend::{
    Backend, Confinement, Exec, Main, Net, Ready, Spec, Started, Var,
};
use agent_runner_settings::task::WorkerLimits;

use crate::support::cluster::{backend, kubectl};
use crate::support::docker::TEST_IMAGE;
use crate::support::prerequisite::needs;

const READY: &str = "k8s-test-ready ";

/// A held sandbox of the test image whose main process says it is ready and
/// reads stdin to its end (the lifeline).
fn sandbox(name: &str) -> Spec {
    let mut spec = Spec::new(
        TEST_IMAGE,
        Main::shell(&format!("echo {READY}$$; cat >/dev/null"), []),
    );
    spec.name = Some(name.to_string());
    spec.labels = vec![(LABEL_TASK.to_string(), name.to_string())];
    spec.labels
        .extend(owner_labels(&Owner::this_process()).map(|(k, v)| (k.to_string(), v)));
    spec.held = true;
    spec.ready = Some(Ready {
        prefix: READY,
        within: Duration::from_secs(120),
        interrupt: Interrupt::never(),
    });
    spec.network = Net::Isolated;
    spec.confinement = Some(Confinement { keep: &[] });
    spec
}

fn unique(what: &str) -> String {
    format!(
        "agent-runner-test-{what}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

/// The Pod's phase, or "gone".
fn phase(name: &str) -> String {
    let (ok, out, _) = kubectl(&["get", "pod", name, "-o", "jsonpath={.status.phase}"]);
    if ok {
        out.trim().to_string()
    } else {
        "gone".into()
    }
}

/// Whether the Pod is gone or being deleted (a deletion takes 7–13 s on the test
/// cluster, sometimes over a minute).
fn deleted(name: &str) -> bool {
    let (ok, out, _) = kubectl(&[
        "get",
        "pod",
        name,
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    !ok || !out.trim().is_empty()
}

/// Deletes the test's Pod when the test ends, passed or not.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        kubectl(&[
            "delete",
            "pod",
            "--wait=false",
            "--ignore-not-found",
            &self.0,
        ]);
    }
}

/// Waits until `done` holds of the Pod's phase; the phase.
fn wait_phase(name: &str, within: Duration, done: impl Fn(&str) -> bool) -> String {
    let started = Instant::now();
    loop {
        let phase = phase(name);
        if done(&phase) || started.elapsed() > within {
            return phase;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn exec(started: &Started, command: &[&str], env: Vec<Var>) -> (Option<i32>, String) {
    let mut capture = Capture::in_memory(64 * 1024);
    let finished = started
        .instance
        .exec(
            Exec {
                workdir: Some("/tmp".into()),
                env,
                command: command.iter().map(|s| s.to_string()).collect(),
                stdin: Vec::new(),
                stdin_file: None,
            },
            &Limits::wall(Duration::from_secs(60), Interrupt::never()),
            &mut capture,
            Stop::Terminate,
        )
        .unwrap();
    (finished.code(), capture.tail())
}

#[test]
#[ignore = "needs cluster"]
fn a_pod_runs_execs_with_secrets_on_stdin_and_none_in_its_object() {
    needs!(Cluster);
    let _cluster = crate::support::cluster::shared();
    let backend = backend();
    let name = unique("exec");
    let _cleanup_name = Cleanup(name.clone());
    let started = backend.start(&sandbox(&name)).unwrap();
    assert!(
        started.ready.trim().parse::<u32>().is_ok(),
        "{:?}",
        started.ready
    );
    let secret = format!("s3cr3t-{}", uuid::Uuid::new_v4().simple());
    let (code, out) = exec(
        &started,
        &[
            "/bin/sh",
            "-c",
            "echo \"$TOKEN|$(pwd)\"; cat /proc/self/status | grep CapEff",
        ],
        vec![Var::ByName("TOKEN".into(), secret.clone())],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&format!("{secret}|/tmp")), "{out}");
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");

    let (ok, yaml, err) = kubectl(&["get", "pod", &name, "-o", "yaml"]);
    assert!(ok, "{err}");
    assert!(!yaml.contains(&secret), "{yaml}");
    assert!(!yaml.contains("hostPath"), "{yaml}");
    assert!(!yaml.contains("serviceaccount"), "no token mounted: {yaml}");
    assert!(yaml.contains("allowPrivilegeEscalation: false"), "{yaml}");
    assert!(yaml.contains("- ALL"), "{yaml}");
    assert!(
        yaml.contains("automountServiceAccountToken: false"),
        "{yaml}"
    );
    assert!(yaml.contains("activeDeadlineSeconds:"), "{yaml}");
    let (ok, policy, err) = kubectl(&[
        "get",
        "networkpolicy",
        "agent-runner-sandboxes",
        "-o",
        "yaml",
    ]);
    assert!(ok, "the sandboxes' NetworkPolicy: {err}");
    assert!(
        policy.contains("Egress") && policy.contains("agent-runner.task"),
        "{policy}"
    );

    let took = started.instance.remove(Duration::from_secs(20));
    assert!(deleted(&name), "removed in {took:?}");
}

#[test]
#[ignore = "needs cluster"]
fn a_killed_lifeline_client_ends_the_pod() {
    needs!(Cluster);
    let _cluster = crate::support::cluster::shared();
    let backend = backend();
    let name = unique("lifeline");
    let _cleanup_name = Cleanup(name.clone());
    let started = backend.start(&sandbox(&name)).unwrap();
    assert_eq!(phase(&name), "Running");
    // SIGKILL of the lifeline's own client (`kubectl attach -i`): its connection
    // drops, so the Pod's stdin closes (`stdinOnce`), before anything of ours
    // deletes the Pod.
    let pids: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (cmd.contains(" attach ") && cmd.contains(&name)).then_some(pid)
        })
        .collect();
    assert!(pids.len() == 1, "the lifeline's kubectl: {pids:?}");
    // SAFETY: a child of this test process, found by its Pod's unique name.
    unsafe { libc::kill(pids[0] as i32, libc::SIGKILL) };
    let ended = wait_phase(&name, Duration::from_secs(60), |p| p != "Running");
    // Closed stdin → the main process ended → the Pod ended (or was deleted).
    assert!(
        ended == "Succeeded" || ended == "gone" || ended == "Failed",
        "the Pod is still {ended} a minute after its lifeline was killed"
    );
    started.instance.remove(Duration::from_secs(5));
}

#[test]
#[ignore = "needs cluster"]
fn the_sweep_deletes_pods_of_dead_owners_only() {
    needs!(Cluster);
    let _cluster = crate::support::cluster::shared();
    let backend = backend();
    let dead = unique("dead");
    let _cleanup_dead = Cleanup(dead.clone());
    let alive = unique("alive");
    let _cleanup_alive = Cleanup(alive.clone());
    let mut dead_spec = sandbox(&dead);
    // An owner that is provably gone: this process's identity with a pid no
    // process has here.
    for (key, value) in &mut dead_spec.labels {
        if key == "agent-runner.owner-pid" {
            *value = "4194303".into();
        }
    }
    let mut dead_spec_once = dead_spec.clone();
    dead_spec_once.held = false;
    dead_spec_once.main = Main::shell("sleep 300", []);
    dead_spec_once.ready = None;
    let mut alive_spec = sandbox(&alive);
    alive_spec.held = false;
    alive_spec.main = Main::shell("sleep 300", []);
    alive_spec.ready = None;
    // Made as another agent-runner would: created directly, not held by us.
    for spec in [&dead_spec_once, &alive_spec] {
        let manifest = agent_runner_sandbox::backend::kubernetes::pod::pod(
            spec,
            &agent_runner_sandbox::backend::kubernetes::pod::Plan {
                namespace: backend.cluster().namespace.clone(),
                expires_in_secs: 600,
                tools_image: None,
                user: None,
                claims: Vec::new(),
                seccomp: None,
            },
        )
        .unwrap();
        let out =
            agent_runner_sandbox::backend::kubernetes::Kubectl::new(backend.cluster().clone())
                .call(
                    &["create", "-f", "-"],
                    manifest.to_string().as_bytes(),
                    Duration::from_secs(30),
                    Interrupt::never(),
                )
                .unwrap();
        assert!(out.ok, "{}", out.stderr);
    }
    let swept = backend.sweep_orphans();
    assert!(swept.contains(&dead), "{swept:?}");
    assert!(!swept.contains(&alive), "{swept:?}");
    assert!(deleted(&dead), "the dead owner's Pod is being deleted");
    assert!(!deleted(&alive), "the live owner's Pod is left");
}

#[test]
#[ignore = "needs cluster"]
fn an_unschedulable_pod_is_host_busy() {
    needs!(Cluster);
    let _cluster = crate::support::cluster::shared();
    let backend = backend().with_schedule_timeout(Duration::from_secs(3));
    let name = unique("busy");
    let _cleanup_name = Cleanup(name.clone());
    let mut spec = sandbox(&name);
    spec.limits = Some(WorkerLimits {
        memory_bytes: Some(1 << 50),
        cpus: None,
        pids: 100,
    });
    let e = backend
        .start(&spec)
        .err()
        .expect("no node has a PiB")
        .to_string();
    assert!(
        e.starts_with("host busy: k8s://agent-runner-test/agent-runner-test: Unschedulable: "),
        "{e}"
    );
    assert!(e.contains("Insufficient memory"), "{e}");
    assert!(deleted(&name), "a Pod that did not start is deleted");
}

#[test]
#[ignore = "needs cluster"]
fn expired_pods_are_swept_and_labels_carry_the_expiry() {
    needs!(Cluster);
    let _cluster = crate::support::cluster::shared();
    let name = unique("expired");
    let _cleanup_name = Cleanup(name.clone());
    let mut spec = sandbox(&name);
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 20;
    spec.labels
        .push((LABEL_EXPIRES.to_string(), expires.to_string()));
    let backend = backend();
    let started = backend.start(&spec).unwrap();
    let (ok, label, _) = kubectl(&[
        "get",
        "pod",
        &name,
        "-o",
        "jsonpath={.metadata.labels.agent-runner\\.expires}",
    ]);
    assert!(ok && label.trim() == expires.to_string(), "{label}");
    let (_, deadline, _) = kubectl(&[
        "get",
        "pod",
        &name,
        "-o",
        "jsonpath={.spec.activeDeadlineSeconds}",
    ]);
    let deadline: u64 = deadline.trim().parse().unwrap();
    assert!(
        (15..=20).contains(&deadline),
        "activeDeadlineSeconds {deadline}"
    );
    assert!(!backend.sweep_orphans().contains(&name), "not expired yet");
    while std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        <= expires
    {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(backend.sweep_orphans().contains(&name));
    started.instance.remove(Duration::from_secs(5));
}

#[test]
#[ignore = "needs cluster"]
fn the_check_names_the_version_namespace_rights_and_a_missing_tools_image() {
    needs!(Cluster);
    let _cluster = crate::support::cluster::shared();
    let found = agent_runner_sandbox::backend::kubernetes::Kubernetes::new(
        crate::support::cluster::cluster(),
    )
    .check();
    let problems: Vec<_> = found.iter().filter_map(|f| f.problem.clone()).collect();
    assert_eq!(found[0].seen, "v1.20.2", "{found:?}");
    assert_eq!(problems.len(), 1, "{found:?}");
    assert!(problems[0].contains("no tools image set"), "{problems:?}");
    let elsewhere = agent_runner_sandbox::backend::kubernetes::Kubernetes::new(
        agent_runner_sandbox::backend::kubernetes::Cluster {
            namespace: "no-such-namespace".into(),
            ..crate::support::cluster::cluster()
        },
    )
    .with_tools_image("tools:1");
    let found = elsewhere.check();
    let problems: Vec<_> = found.iter().filter_map(|f| f.problem.clone()).collect();
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("namespace no-such-namespace:")),
        "{found:?}"
    );
}

/// Set in the child of `a_sigkilled_holder_ends_its_pod`: the Pod it starts and holds.
const HOLD: &str = "AGENT_RUNNER_TEST_K8S_HOLD";

#[test]
#[ignore = "needs cluster"]
fn a_sigkilled_holder_ends_its_pod() {
    needs!(Cluster);
    let _cluster = crate::support::cluster::shared();
    if let Ok(name) = std::env::var(HOLD) {
        // The child: holds the Pod as agent-runner does until it is killed.
        let started = backend().start(&sandbox(&name)).unwrap();
        use std::io::Write;
        let mut out = std::io::stdout();
        writeln!(out, "holding {}", started.instance.name()).unwrap();
        out.flush().unwrap();
        std::thread::sleep(Duration::from_secs(600));
        return;
    }
    let name = unique("sigkill");
    let _cleanup_name = Cleanup(name.clone());
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "k8s_cluster::backend::a_sigkilled_holder_ends_its_pod",
        ])
        .args(["--include-ignored", "--nocapture"])
        .env(HOLD, &name)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // It holds the Pod once it says so (its start returned: the lifeline is up).
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("holding ") {
        line.clear();
        let read = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert!(read > 0, "the child ended before holding its Pod");
    }
    assert_eq!(line.trim(), format!("holding {name}"));
    assert_eq!(phase(&name), "Running");
    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let ended = wait_phase(&name, Duration::from_secs(60), |p| p != "Running");
    assert!(
        ended == "Succeeded" || ended == "Failed" || ended == "gone",
        "the Pod is still {ended} a minute after its holder was SIGKILLed"
    );
}

#[test]
#[ignore = "needs cluster"]
fn an_api_server_that_stops_answering_is_a_lost_host() {
    needs!(Cluster);
    let _cluster = crate::support::cluster::alone();
    let backend = backend();
    let name = unique("paused");
    let _cleanup_name = Cleanup(name.clone());
    let started = backend.start(&sandbox(&name)).unwrap();
    assert!(started.instance.lost().is_none());
    // The node (API server, kubelet and all) frozen: the cluster no longer answers.
    let unpause = crate::support::cluster::pause_node();
    let lost = started.instance.lost().map(|e| e.to_string());
    drop(unpause);
    assert_eq!(
        lost.as_deref(),
        Some("host lost: k8s://agent-runner-test/agent-runner-test: no answer within 5 s")
    );
    started.instance.remove(Duration::from_secs(10));
}

#[test]
#[ignore = "needs cluster"]
fn the_tools_come_from_the_tools_image_read_only() {
    needs!(Cluster);
    let _cluster = crate::support::cluster::shared();
    let backend = backend();
    let name = unique("tools");
    let _cleanup_name = Cleanup(name.clone());
    let mut spec = sandbox(&name);
    spec.mounts = vec![agent_runner_sandbox::backend::Mount::volume(
        "agent-runner-tools",
        "/agent-runner-tools",
    )];
    let started = backend.start(&spec).unwrap();
    let (code, out) = exec(
        &started,
        &[
            "/agent-runner-tools/bin/sh",
            "-c",
            "ls /agent-runner-tools/bin; touch /agent-runner-tools/bin/x 2>&1; echo $?",
        ],
        Vec::new(),
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("sh\n"), "{out}");
    assert!(out.contains("Read-only file system"), "{out}");
    assert!(out.trim_end().ends_with('1'), "{out}");
    let (_, yaml, _) = kubectl(&["get", "pod", &name, "-o", "yaml"]);
    // Copied by a container the kubelet starts before the worker, held by its
    // postStart hook until the copy is done (no init container: one relist less).
    assert!(
        !yaml.contains("initContainers:")
            && yaml.contains("postStart")
            && yaml.contains("emptyDir"),
        "{yaml}"
    );
    assert!(!yaml.contains("hostPath"), "{yaml}");
    started.instance.remove(Duration::from_secs(10));
}

/// SPEC §25 "Resume" and "Faults and leftovers": a worker session's claim outlives
/// the run that made it (a killed run is resumed from it), so it carries no owner
/// and the sweep leaves it while its expiry is ahead, dead owner or not; once the
/// expiry passed, the sweep deletes it, by label.
#[test]
#[ignore = "needs cluster"]
fn the_sweep_deletes_expired_session_claims_and_keeps_live_ones() {
    use agent_runner_sandbox::backend::kubernetes::session_claim;
    needs!(Cluster);
    let _cluster = crate::support::cluster::shared();
    let class = crate::support::cluster::session_class(0);
    let backend = agent_runner_sandbox::backend::kubernetes::Kubernetes::new(
        agent_runner_sandbox::backend::cluster::Cluster {
            session_storage_class: Some(class.name.clone()),
            ..crate::support::cluster::cluster()
        },
    )
    .with_tools_image(crate::support::cluster::tools_image());
    let task = unique("claims");
    let key = |what: &str| format!("{what}{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let (live, expired) = (key("aaaa"), key("bbbb"));
    struct Claims(Vec<String>);
    impl Drop for Claims {
        fn drop(&mut self) {
            for name in &self.0 {
                kubectl(&["delete", "pvc", name, "--wait=false", "--ignore-not-found"]);
            }
        }
    }
    let _claims = Claims(vec![
        session_claim::name(&live),
        session_claim::name(&expired),
    ]);
    // Made as a run does (fresh): a claim of the class, mounted at the session.
    let mount = backend
        .session_volume(&task, &live, true)
        .unwrap()
        .expect("a cluster with a session class keeps sessions");
    assert_eq!(
        mount.source.to_str(),
        Some(session_claim::name(&live).as_str())
    );
    assert!(mount.volume && !mount.readonly, "{mount:?}");
    // Left by a run an hour past its expiry.
    let past = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 3600)
        .to_string();
    let manifest = session_claim::claim(
        &backend.cluster().namespace,
        &class.name,
        &task,
        &expired,
        &past,
    );
    let (ok, err) =
        crate::support::cluster::kubectl_in(&["create", "-f", "-"], &manifest.to_string());
    assert!(ok, "{err}");
    let swept = backend.sweep_orphans();
    assert!(
        swept.contains(&format!("pvc {}", session_claim::name(&expired))),
        "{swept:?}"
    );
    assert!(
        !swept.contains(&format!("pvc {}", session_claim::name(&live))),
        "{swept:?}"
    );
    let alive = |name: &str| {
        let (ok, out, _) = kubectl(&[
            "get",
            "pvc",
            name,
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ]);
        ok && out.trim().is_empty()
    };
    assert!(
        !alive(&session_claim::name(&expired)),
        "the expired claim goes"
    );
    assert!(alive(&session_claim::name(&live)), "the live claim is kept");
    // A run that resumes finds it and mounts it; another task's run is refused it.
    assert!(
        backend
            .session_volume(&task, &live, false)
            .unwrap()
            .is_some()
    );
    let e = backend
        .session_volume("another-task", &live, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is not the worker session of task another-task"),
        "{e}"
    );
    backend.forget_session_volume(&live);
    assert!(!alive(&session_claim::name(&live)), "forgotten: deleted");
}
