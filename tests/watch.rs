//! Watching a run (SPEC §19): the event log a run writes as it goes.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::Scratch;
use support::fake_openai::FakeOpenAi;
use support::task::{KEY, assert_no_container, assess, plan, run_worker, runner, task_id, v1_task};

fn events(repo: &std::path::Path, id: &str) -> Vec<Value> {
    std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/events.jsonl")))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let mut kind = e["kind"].as_str().unwrap().to_string();
            for detail in ["phase", "item", "to", "type"] {
                if let Some(d) = e[detail].as_str() {
                    kind = format!("{kind}:{d}");
                }
            }
            kind
        })
        .collect()
}

#[test]
fn a_reader_sees_the_worker_s_run_and_commands_before_it_ends() {
    let dir = Scratch::new("watch-live");
    let id = task_id("live");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(&format!(
            "@run: echo started > started.txt\n@say: the key is {KEY}\n@sleep: 4\n@say: slept"
        )),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server, Some("true"), "", "");
    let running = runner(&yaml).arg("--json").start();
    // While the worker sleeps: its run has started, its command finished, its first
    // message is there, and nothing says the run ended.
    let mut seen = Vec::new();
    support::task::wait_for(Duration::from_secs(60), || {
        seen = kinds(&events(&dir.path, &id));
        seen.iter().any(|k| k == "worker_item:agent_message")
    });
    assert!(
        !seen.iter().any(|k| k == "worker_run:finished"),
        "seen only after the run: {seen:?}"
    );
    assert_eq!(
        seen,
        [
            "state:PENDING",
            "state:PLANNING",
            "meta:plan_task",
            "state:RUNNING",
            "meta:next_action",
            "worker_run:started",
            "worker_item:command_started",
            "worker_item:command_finished",
            "worker_item:agent_message",
        ]
    );
    let out = running.finish();
    out.code(0);
    let all = events(&dir.path, &id);
    assert_eq!(
        kinds(&all)[9..],
        [
            "worker_item:agent_message",
            "worker_run:finished",
            "state:VALIDATING",
            "test:started",
            "test:finished",
            "meta:completion_assessment",
            "state:COMPLETE",
        ]
    );
    let text = std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/events.jsonl")))
        .unwrap();
    assert!(!text.contains(KEY), "masked: {text}");
    assert!(text.contains("the key is ***"), "{text}");
    let finished = all.iter().find(|e| e["phase"] == "finished").unwrap();
    assert_eq!(
        (
            &finished["outcome"],
            &finished["exit_code"],
            &finished["summary"]
        ),
        (
            &Value::from("completed"),
            &Value::from(0),
            &Value::from("slept")
        )
    );
    let command = &all[7];
    assert_eq!(command["exit_code"], 0);
    assert_eq!(command["text"], "/bin/sh -lc 'echo started > started.txt'");
    assert_no_container(&id);
}
