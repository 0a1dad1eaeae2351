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
