//! Watching a run (SPEC §19): the event log a run writes as it goes.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::Scratch;
use support::fake_openai::FakeOpenAi;
use support::pipeline::{BUILDER_REPLY, Pipeline, QUICK_META, meta_script, task_id as pipeline_task_id};
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

/// Lines of a child's stdout as they come, on a channel.
fn lines_of(running: &mut support::Running) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stdout = running.child().stdout.take().unwrap();
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// Waits for a line containing `text`; all lines seen until then.
fn until_line(lines: &std::sync::mpsc::Receiver<String>, text: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let until = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                let done = line.contains(text);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(e) => panic!("no line with {text:?} ({e}); seen: {seen:#?}"),
        }
    }
}

#[test]
fn task_logs_follows_a_queued_job_to_its_end_and_exits_with_its_status() {
    let p = Pipeline::new("watch-logs", false);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: echo hi > hi.txt\n@say: wrote hi.txt\n@sleep: 3\n@say: done"),
        "",
    );
    let id = pipeline_task_id("logs");
    p.new_task(&id, "Write hi.txt");
    p.run_tasks(&[&id]);
    // Started while the job waits in the queue: it waits, then follows.
    let mut follow = p.in_ws(&["task", "logs"], &["-f", &id]).start();
    let lines = lines_of(&mut follow);
    let orchestrator = p.orchestrate_once(&[]).start();
    let seen = until_line(&lines, "says: wrote hi.txt");
    assert!(
        seen.iter().any(|l| l.ends_with("worker run 1 started")),
        "{seen:#?}"
    );
    assert!(
        seen.iter().any(|l| l.contains("run 1 $ /bin/sh -lc 'echo hi > hi.txt' → exit 0")),
        "{seen:#?}"
    );
    assert!(
        !seen.iter().any(|l| l.contains("worker run 1 completed")),
        "seen while the worker still sleeps: {seen:#?}"
    );
    let rest = until_line(&lines, "state VALIDATING → COMPLETE");
    assert!(rest.iter().any(|l| l.contains("worker run 1 completed")), "{rest:#?}");
    let out = follow.finish();
    out.code(0).stderr_has("job ").stderr_has("succeeded in");
    orchestrator.finish().code(0);

    // Once recorded: without -f, the last attempt's events; with -f, its status.
    let again = p.in_ws(&["task", "logs"], &[&id]).output();
    again.code(0);
    assert!(again.stdout.starts_with(char::is_numeric), "{}", again.stdout);
    assert!(again.stdout.contains("state PENDING: started"), "{}", again.stdout);
    p.in_ws(&["task", "logs"], &["-f", &id]).output().code(0);
    p.in_ws(&["task", "logs"], &["-f", "no-such-task"])
        .output()
        .code(1)
        .stderr_has("task no-such-task not found");
}

#[test]
fn task_logs_f_exits_1_with_a_failed_attempt() {
    let p = Pipeline::new("watch-logs-failed", false);
    // Meta never ticks the criterion, and runs out of replies.
    p.init(BUILDER_REPLY, &QUICK_META.replace("[AC-1]", "[]"), "");
    let id = pipeline_task_id("fails");
    p.new_task(&id, "Nothing to do");
    p.in_ws(&["task", "logs"], &[&id])
        .output()
        .code(1)
        .stderr_has("has not run yet");
    p.run_tasks(&[&id]);
    let follow = p.in_ws(&["task", "logs"], &["-f", &id]).start();
    p.orchestrate_once(&[]).output().code(1);
    let out = follow.finish();
    out.code(1).stderr_has("failed in");
    assert!(out.stdout.contains("→ FAILED"), "{}", out.stdout);
}
