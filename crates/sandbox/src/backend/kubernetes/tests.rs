use serde_json::json;

use super::*;

#[test]
fn an_unschedulable_pod_says_the_schedulers_reason() {
    let status = PodStatus::of(&json!({"status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient memory."}],
    }}));
    assert_eq!(status.phase, "Pending");
    assert_eq!(
        status.unschedulable.as_deref(),
        Some("Unschedulable: 0/1 nodes are available: 1 Insufficient memory.")
    );
    assert_eq!(status.lost(), None);
}

#[test]
fn an_image_the_node_cannot_get_is_named() {
    let status = PodStatus::of(&json!({"status": {
        "phase": "Pending",
        "containerStatuses": [{"state": {"waiting": {"reason": "ErrImageNeverPull",
            "message": "Container image \"x\" is not present with pull policy of Never"}}}],
    }}));
    assert_eq!(
        status.image_problem.as_deref(),
        Some("ErrImageNeverPull: Container image \"x\" is not present with pull policy of Never")
    );
}

#[test]
fn an_evicted_pod_or_a_lost_node_is_a_lost_host() {
    for reason in ["Evicted", "NodeLost"] {
        let status = PodStatus::of(&json!({"status": {"phase": "Failed", "reason": reason,
            "message": "The node was low on resource: memory."}}));
        assert_eq!(
            status.lost(),
            Some(format!("{reason} The node was low on resource: memory.").as_str())
        );
    }
    let ended = PodStatus::of(&json!({"status": {"phase": "Failed",
        "reason": "DeadlineExceeded"}}));
    assert_eq!(ended.lost(), None);
}

#[test]
fn the_expiry_label_becomes_the_active_deadline() {
    let mut spec = Spec::new("img", super::super::Main::shell("true", []));
    assert_eq!(expires_in(&spec), sweep::LIFETIME.as_secs());
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    spec.labels
        .push((LABEL_EXPIRES.into(), (now + 600).to_string()));
    assert!((598..=600).contains(&expires_in(&spec)));
    spec.labels[0].1 = (now - 5).to_string();
    assert_eq!(expires_in(&spec), 1);
}

#[test]
fn a_cluster_that_ignores_the_policy_is_refused_unless_its_entry_accepts_it() {
    let open = egress_probe::Verdict {
        tried: vec!["10.0.0.1:443".into()],
        reached: vec!["10.0.0.1:443".into()],
    };
    let cluster = Cluster::new("c", "n", None).unwrap();
    let strict = Kubernetes::new(cluster.clone());
    let e = strict.egress_allowed(Some(Ok(open.clone()))).unwrap_err();
    assert!(
        matches!(&e, BackendError::Refused(m) if m.starts_with("egress not enforced on k8s://c/n")),
        "{e}"
    );
    assert!(strict.notices().is_empty());
    // Not proven either way: refused too, saying why.
    let e = strict
        .egress_allowed(Some(Err(BackendError::Io("no answer".into()))))
        .unwrap_err();
    assert!(
        e.to_string().contains("could not be proven: no answer"),
        "{e}"
    );
    let accepting = Kubernetes::new(Cluster {
        egress_unenforced: true,
        ..cluster
    });
    accepting.egress_allowed(Some(Ok(open.clone()))).unwrap();
    accepting.egress_allowed(Some(Ok(open))).unwrap();
    let notices = accepting.notices();
    assert_eq!(notices.len(), 1, "said once: {notices:?}");
    assert!(
        notices[0].ends_with("(accepted by the host's entry)"),
        "{notices:?}"
    );
    let closed = egress_probe::Verdict {
        tried: vec!["10.0.0.1:443".into()],
        reached: Vec::new(),
    };
    strict.egress_allowed(Some(Ok(closed))).unwrap();
    strict.egress_allowed(None).unwrap();
}

#[test]
fn a_container_the_node_cannot_create_is_a_start_problem() {
    let status = PodStatus::of(&json!({"status": {
        "phase": "Pending",
        "containerStatuses": [{"state": {"waiting": {"reason": "CreateContainerError",
            "message": "cannot load seccomp profile \"/var/lib/kubelet/seccomp/agent-runner/x.json\""}}}],
    }}));
    assert_eq!(
        status.start_problem.as_deref(),
        Some(
            "CreateContainerError: cannot load seccomp profile \"/var/lib/kubelet/seccomp/agent-runner/x.json\""
        )
    );
    assert_eq!(status.image_problem, None);
    let creating = PodStatus::of(&json!({"status": {"phase": "Pending",
        "containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]}}));
    assert_eq!(creating.start_problem, None);
}

#[test]
fn the_worker_s_end_is_the_sandbox_s_while_the_tools_container_still_runs() {
    // The tools' copy is listed before the worker and stays a few seconds: the
    // Pod is still Running when the worker has ended.
    let status = PodStatus::of(&json!({"status": {"phase": "Running",
    "containerStatuses": [
        {"name": "tools", "state": {"running": {}}},
        {"name": "worker", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}},
    ]}}));
    assert_eq!(status.phase, "Failed");
    assert_eq!(
        status.reason,
        "the worker container ended (Error, exit 137)"
    );
    assert_eq!(status.lost(), None);
    let done = PodStatus::of(&json!({"status": {"phase": "Running",
    "containerStatuses": [
        {"name": "tools", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "worker", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
    ]}}));
    assert_eq!(done.phase, "Succeeded");
    // The tools' end alone is no end of the sandbox.
    let running = PodStatus::of(&json!({"status": {"phase": "Running",
    "containerStatuses": [
        {"name": "tools", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "worker", "state": {"running": {}}},
    ]}}));
    assert_eq!(
        (running.phase.as_str(), running.start_problem),
        ("Running", None)
    );
}

#[test]
fn a_failed_tools_copy_fails_the_start_though_the_pod_runs() {
    // As the kubelet leaves it (seen on the test cluster): the copy's hook failed,
    // the worker was started all the same, and the Pod is Running.
    let (e, _) = start_under_a_quiet_watch(
        r#"{"phase":"Running","containerStatuses":[{"name":"tools","state":{"terminated":{"exitCode":1,"reason":"Error"}}},{"name":"worker","state":{"running":{}}}]}"#,
    );
    assert_eq!(
        e.to_string(),
        "`kubectl create pod p` failed: the node cannot start its container: the tools' copy failed (Error, exit 1): see `kubectl logs -c tools`"
    );
}

#[test]
fn a_tools_image_the_node_lacks_is_named_not_the_worker_s() {
    // As the kubelet leaves it: the copy waits for its image, the worker started
    // without its tools and ended.
    let (e, _) = start_under_a_quiet_watch(
        r#"{"phase":"Pending","containerStatuses":[{"name":"tools","state":{"waiting":{"reason":"ErrImageNeverPull","message":"not present"}}},{"name":"worker","state":{"terminated":{"exitCode":127,"reason":"ContainerCannotRun"}}}]}"#,
    );
    assert!(
        e.to_string().starts_with("image agent-runner-tools:abc is not available: the cluster cannot run it (ErrImageNeverPull: not present)"),
        "{e}"
    );
}

#[test]
fn a_held_pod_s_gate_starts_nothing_without_the_whole_tools_copy() {
    let mut spec = Spec::new("img", super::super::Main::shell("true", []));
    spec.held = true;
    spec.mounts = vec![super::super::Mount::volume("t", TOOLS_DIR)];
    let held = gated(&spec, "/agent-runner-tools/bin/sh");
    let script = &held.main.args[1];
    assert!(
        script.starts_with("IFS= read -r go || exit 1; [ -e /agent-runner-tools/.copied ] || {"),
        "{script}"
    );
    assert!(
        script.ends_with("exit 1; }; exec \"$0\" \"$@\""),
        "{script}"
    );
    // Without the tools nothing is copied: no mark to wait for.
    spec.mounts.clear();
    let plain = gated(&spec, "/bin/sh");
    assert_eq!(
        plain.main.args[1],
        "IFS= read -r go || exit 1; exec \"$0\" \"$@\""
    );
}

/// `wait_for` the Pod `p` to run, within 20 s.
fn run_within_20_s(backend: &Kubernetes) -> Result<String, BackendError> {
    backend.wait_for(
        "p",
        "img",
        false,
        Duration::from_secs(20),
        Interrupt::never(),
    )
}

/// A backend whose kubectl is `script` (sh), answering `get pod … --watch` as the
/// script says; each call's arguments logged to `calls` in its directory.
fn faked(script: &str) -> (Kubernetes, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "agent-runner-fake-kubectl-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join("kubectl");
    let calls = dir.join("calls");
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >>'{}'\ncase \"$*\" in *--watch*) watch=1 ;; *) watch= ;; esac\n{script}\n",
            calls.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut backend = Kubernetes::new(Cluster::new("ctx", "ns", None).unwrap());
    backend.kubectl = backend.kubectl.with_program(&program.display().to_string());
    (backend, dir)
}

fn calls(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("calls")).unwrap_or_default()
}

#[test]
fn a_watched_pod_runs_when_the_cluster_says_so() {
    let (backend, dir) = faked(
        r#"[ -n "$watch" ] || exit 3
echo '{"phase":"Pending"}'
sleep 0.3
echo '{"phase":"Running"}'
exec sleep 30"#,
    );
    let started = Instant::now();
    let phase = backend.wait_for(
        "p",
        "img",
        false,
        Duration::from_secs(20),
        Interrupt::never(),
    );
    assert_eq!(phase.unwrap(), "Running");
    assert!(started.elapsed() < Duration::from_secs(5));
    // One watch, no poll.
    let calls = calls(&dir);
    assert_eq!(calls.lines().count(), 1, "{calls}");
    assert!(calls.contains("get pod p --watch"), "{calls}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_watch_that_never_answers_is_a_lost_host_within_the_health_check() {
    let (backend, dir) = faked("exec sleep 30");
    let started = Instant::now();
    let e = run_within_20_s(&backend).unwrap_err();
    assert_eq!(
        e.to_string(),
        "host lost: k8s://ctx/ns: no answer within 5 s"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_pod_gone_under_its_watch_is_gone_as_a_poll_says() {
    let (backend, dir) = faked(
        r#"echo 'Error from server (NotFound): pods "p" not found' >&2
exit 1"#,
    );
    let e = run_within_20_s(&backend).unwrap_err();
    assert!(matches!(e, BackendError::Gone { .. }), "{e}");
    // The watch ended, then one get said why.
    let calls = calls(&dir);
    assert!(calls.lines().next().unwrap().contains("--watch"), "{calls}");
    assert!(calls.contains("get pod p -o json"), "{calls}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The error of a start whose watch says `status` (the Pod's `.status`) once and
/// then nothing, with a schedule timeout of 1 s and the tools image
/// `agent-runner-tools:abc`; how long it took.
fn start_under_a_quiet_watch(status: &str) -> (BackendError, Duration) {
    let (backend, dir) = faked(&format!(
        "[ -n \"$watch\" ] || exit 3\necho '{status}'\nexec sleep 30"
    ));
    let backend = backend
        .with_schedule_timeout(Duration::from_secs(1))
        .with_tools_image("agent-runner-tools:abc");
    let started = Instant::now();
    let e = backend
        .wait_for(
            "p",
            "img",
            false,
            Duration::from_secs(1),
            Interrupt::never(),
        )
        .unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    (e, started.elapsed())
}

#[test]
fn an_unschedulable_pod_under_a_quiet_watch_is_host_busy_at_its_deadline() {
    let (e, took) = start_under_a_quiet_watch(
        r#"{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/1 nodes are available."}]}"#,
    );
    assert_eq!(
        e.to_string(),
        "host busy: k8s://ctx/ns: Unschedulable: 0/1 nodes are available."
    );
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

#[test]
fn a_watch_that_stalls_is_checked_by_a_get() {
    // The watch hears Pending, then nothing: its connection stalled. A get says
    // the Pod runs.
    let (backend, dir) = faked(
        r#"if [ -n "$watch" ]; then echo '{"phase":"Pending"}'; exec sleep 60; fi
echo '{"status":{"phase":"Running"}}'"#,
    );
    let started = Instant::now();
    let phase = backend.wait_for(
        "p",
        "img",
        false,
        Duration::from_secs(40),
        Interrupt::never(),
    );
    assert_eq!(phase.unwrap(), "Running");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(calls(&dir).contains("get pod p -o json"), "{}", calls(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_pod_not_running_in_time_says_what_its_containers_wait_for() {
    let (e, _) = start_under_a_quiet_watch(
        r#"{"phase":"Pending","initContainerStatuses":[{"name":"tools","state":{"running":{}}}],"containerStatuses":[{"name":"worker","state":{"waiting":{"reason":"PodInitializing"}}}]}"#,
    );
    let text = e.to_string();
    assert!(
        text.contains("the Pod did not run within")
            && text.ends_with("(Pending; worker: PodInitializing)"),
        "{text}"
    );
}

#[test]
fn a_clusters_missing_image_is_no_docker_image_in_its_words() {
    let backend = Kubernetes::new(Cluster::new("ctx", "ns", None).unwrap());
    let said = backend
        .pull("registry.example/worker:1", Interrupt::never())
        .unwrap_err()
        .to_string();
    assert!(
        said.starts_with("image registry.example/worker:1 is not available: "),
        "{said}"
    );
    assert!(!said.contains("docker"), "{said}");
}
