//! The approval gate for `agent-runner run` (SPEC §23): with
//! `runner.meta.approve_plan: true` a run stops after `plan_task`, AWAITING_APPROVAL
//! (exit 3, its note written), before any container starts; `run --resume` is the
//! approval and goes on with the planned criteria, no second plan. Real binary,
//! real daemon (its event stream says no container of the task was created), the
//! fake OpenAI server's request log.

use crate::support;

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use support::Scratch;
use support::docker::docker_ok;
use support::fake_openai::FakeOpenAi;
use support::task::{assert_no_container, assess, note, plan, run_worker, runner, task_id};

/// The message types the server was asked, in order.
fn asked(server: &FakeOpenAi) -> Vec<String> {
    server
        .received()
        .iter()
        .map(|r| {
            r.message(1)
                .lines()
                .find_map(|l| l.strip_prefix("type: "))
                .unwrap_or("?")
                .to_string()
        })
        .collect()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// What the daemon did to containers of task `id` between `since` and now.
fn container_events(id: &str, since: u64) -> String {
    let filter = format!("label=agent-runner.task={id}");
    docker_ok(&[
        "events",
        "--since",
        &since.to_string(),
        "--until",
        &(now() + 1).to_string(),
        "--filter",
        "type=container",
        "--filter",
        &filter,
        "--format",
        "{{.Action}}",
    ])
}

#[test]
fn a_run_with_approve_plan_stops_after_the_plan_and_resume_approves_it() {
    let dir = Scratch::new("approve-run");
    let id = task_id("approve");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        // After the approval.
        run_worker("@run: echo hello > out.txt\n@say: wrote out.txt"),
        assess(&["AC-1"], "done"),
    ]);
    let yaml =
        support::task::v1_task(&id, &dir.path, &server).set("runner.meta.approve_plan", true);
    let since = now().saturating_sub(1);
    let out = runner(&yaml).arg("--json").output();
    out.code(3);
    let result: Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        (&result["status"], &result["state"], &result["loops"]),
        (
            &Value::from("awaiting_approval"),
            &Value::from("AWAITING_APPROVAL"),
            &Value::from(0)
        )
    );
    assert_eq!(
        asked(&server),
        ["plan_task"],
        "nothing paid for after the plan"
    );
    assert_eq!(
        container_events(&id, since).trim(),
        "",
        "no container of the task was created"
    );
    assert!(
        !dir.join(&format!(".agent-runner/logs/{id}/run-1.log"))
            .exists()
    );
    let waiting = note(&dir.path, &id);
    assert!(waiting.contains("AWAITING_APPROVAL"), "{waiting}");
    assert!(
        waiting.contains("AC-1"),
        "the plan is in the note:\n{waiting}"
    );

    let out = runner(&yaml).args(&["--json", "--resume"]).output();
    out.code(0);
    assert_eq!(
        asked(&server),
        ["plan_task", "next_action", "completion_assessment"],
        "the approved plan is not asked again"
    );
    let approved = server.received()[1].message(1);
    assert!(approved.contains("AC-1"), "{approved}");
    assert!(
        approved.contains("previous_run: 'AWAITING_APPROVAL"),
        "{approved}"
    );
    assert!(dir.path.join("out.txt").exists());
    assert_no_container(&id);
}
