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
