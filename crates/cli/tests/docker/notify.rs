//! Notifications (SPEC §23): a signed webhook POST to a receiver on 127.0.0.2, one
//! answering 500 tried 3 times and never failing the attempt, a command with the
//! JSON on its stdin; the key in none of what agent-runner writes or logs.

use crate::support;

use serde_json::{Value, json};
use support::pipeline::{BUILDER_REPLY, Pipeline, QUICK_META, read, task_id};
use support::webhook::{Receiver, signed_by};

/// Every file under `dir`, read.
fn all_text(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.push_str(&all_text(&path));
        } else {
            out.push_str(&String::from_utf8_lossy(
                &std::fs::read(&path).unwrap_or_default(),
            ));
        }
    }
    out
}

#[test]
fn a_succeeded_attempt_is_posted_signed_and_a_failing_receiver_is_tried_three_times_never_fatal() {
    let good = Receiver::start("127.0.0.2", 200);
    let broken = Receiver::start("127.0.0.2", 500);
    let on_failed = Receiver::start("127.0.0.2", 200);
    let key = format!("hook-key-{}", support::random_hex(16));
    let p = Pipeline::new("notify", false);
    let told = p.scratch.join("told.json");
    p.init(
        BUILDER_REPLY,
        QUICK_META,
        &format!(
            "notify:\n  - {{on: [succeeded, budget], url: \"{}\", secret: \"env:HOOK_KEY\"}}\n  - {{on: [succeeded, failed], url: \"{}\"}}\n  - {{on: [failed], url: \"{}\"}}\n  - {{on: [succeeded], command: \"cat > '{}'\"}}\n",
            good.url(),
            broken.url(),
            on_failed.url(),
            told.display()
        ),
    );
    let id = task_id("notify");
    p.new_task(&id, "Nothing to do");
    p.run_tasks(&[&id]);
    let out = p.orchestrate_once(&[]).env("HOOK_KEY", &key).output();
    out.code(0);
    let attempts = p.attempts(&id);
    assert_eq!(attempts[0]["status"], "succeeded", "a 500 is not fatal");

    let posts = good.received();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].method, "POST");
    assert_eq!(posts[0].path, "/hooks/T0K3N");
    assert!(signed_by(&posts[0], &key), "{:?}", posts[0].headers);
    assert!(!signed_by(&posts[0], "another key"));
    let body = posts[0].json();
    let expected = json!({
        "event": "succeeded", "task_id": id, "title": "Nothing to do", "status": "succeeded",
        "verified": false, "branch": null, "cost_usd": body["cost_usd"], "pr": null,
    });
    assert_eq!(body, expected);
    assert!(
        body["cost_usd"].is_number() || body["cost_usd"].is_null(),
        "{body}"
    );

    assert_eq!(broken.received().len(), 3, "3 tries");
    assert!(
        broken
            .received()
            .iter()
            .all(|r| r.header("X-Agent-Runner-Signature").is_none()),
        "unsigned without a secret"
    );
    assert!(on_failed.received().is_empty(), "not on its events");
    let origin = format!("webhook http://{}", broken.authority());
    assert!(
        out.stderr.contains(&origin) && out.stderr.contains("HTTP 500"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("T0K3N"), "a hook's path is its secret");
    let piped: Value = serde_json::from_str(&read(&told)).expect("the command's stdin");
    assert_eq!(piped, body);
    for (what, text) in [
        ("the orchestrator's log", out.stderr.clone()),
        ("the workspace", all_text(&p.ws())),
    ] {
        assert!(!text.contains(&key), "the key is in {what}");
    }
}

#[test]
fn a_failed_attempt_is_told_and_a_webhook_without_its_key_is_not_sent() {
    let hook = Receiver::start("127.0.0.2", 200);
    let keyed = Receiver::start("127.0.0.2", 200);
    let p = Pipeline::new("notify-failed", false);
    // No test anywhere and one required: the attempt fails before it runs.
    p.init(
        BUILDER_REPLY,
        QUICK_META,
        &format!(
            "require_test: true\nnotify:\n  - {{on: [failed], url: \"{}\"}}\n  - {{on: [failed], url: \"{}\", secret: \"env:UNSET_HOOK_KEY_{}\"}}\n",
            hook.url(),
            keyed.url(),
            support::random_hex(6)
        ),
    );
    let id = task_id("notify-failed");
    p.new_task(&id, "Nothing to do");
    p.run_tasks(&[&id]);
    let out = p.orchestrate_once(&[]).output();
    assert_eq!(p.attempts(&id)[0]["status"], "failed");
    let posts = hook.received();
    assert_eq!(posts.len(), 1, "{}", out.stderr);
    assert_eq!(posts[0].json()["event"], "failed");
    assert_eq!(posts[0].json()["status"], "failed");
    assert!(keyed.received().is_empty(), "never sent unsigned");
    assert!(
        out.stderr.contains("is not set; not sent"),
        "{}",
        out.stderr
    );
}
