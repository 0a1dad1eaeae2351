//! A task end to end against the fake OpenAI server: Meta replies, Task YAML, running
//! the binary, and reading what it left.

use std::path::Path;
use std::time::{Duration, Instant};

use super::docker::{TEST_IMAGE, containers_labelled};
use super::fake_openai::{Answer, FakeOpenAi};
use super::task_yaml::TaskYaml;
use super::{Run, Running, Scratch};

pub const KEY: &str = "sk-e2e-test-key-0123456789abcdef";

pub fn plan(ids: &[&str]) -> Answer {
    let criteria: String = ids
        .iter()
        .map(|id| format!("  - id: {id}\n    description: criterion {id}\n"))
        .collect();
    Answer::chat(&format!(
        "type: plan_task\nacceptance_criteria:\n{criteria}"
    ))
}

pub fn run_worker(prompt: &str) -> Answer {
    let prompt: String = prompt.lines().map(|l| format!("    {l}\n")).collect();
    Answer::chat(&format!(
        "type: next_action\ndecision:\n  action: run_worker\n  reason: work to do\nworker_call:\n  worker_type: codex-cli\n  mode: exec\n  prompt: |\n{prompt}"
    ))
}

pub fn mark_complete() -> Answer {
    Answer::chat(
        "type: next_action\ndecision:\n  action: mark_complete\n  reason: looks done to me\n",
    )
}

pub fn assess(passed: &[&str], summary: &str) -> Answer {
    Answer::chat(&format!(
        "type: completion_assessment\nsummary: {summary}\ndetails:\n  passed_criteria: [{}]\n  remaining_risks: [none known]\n",
        passed.join(", ")
    ))
}

/// Task `id` in `repo` ("Make out.txt say ok."), its worker in the test image
/// without network; Meta is for the caller to set (`TaskYaml::openai`).
pub fn e2e_task(id: &str, repo: &Path) -> TaskYaml {
    TaskYaml::new(id, repo, "Make out.txt say ok.")
        .set("task.title", format!("E2E {id}"))
        .image(TEST_IMAGE)
        .set("runner.worker.network", "none")
}

/// `e2e_task` with Meta over the OpenAI API at `server`.
pub fn v1_task(id: &str, repo: &Path, server: &FakeOpenAi) -> TaskYaml {
    e2e_task(id, repo).openai(server)
}

/// `agent-runner run` on `yaml`, with Meta's key.
pub fn runner(yaml: impl std::fmt::Display) -> Run {
    Run::new(&["run"])
        .env("OPENAI_API_KEY", KEY)
        .env("AGENT_RUNNER_META_BACKOFF_MS", "10")
        .stdin(yaml.to_string())
}

pub fn task_id(name: &str) -> String {
    format!("e2e-{name}-{}", super::short_id())
}

pub fn note(repo: &Path, id: &str) -> String {
    std::fs::read_to_string(repo.join(format!(".agent-runner/task-{id}.md")))
        .expect("the Task Note is written")
}

pub fn assert_no_container(id: &str) {
    assert_eq!(
        containers_labelled("agent-runner.task", id),
        Vec::<String>::new(),
        "container left behind"
    );
}

/// Every file agent-runner wrote under `.agent-runner/`, concatenated.
pub fn everything_written(repo: &Path) -> String {
    fn walk(dir: &Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push_str(&String::from_utf8_lossy(
                    &std::fs::read(&path).unwrap_or_default(),
                ));
            }
        }
    }
    let mut out = String::new();
    walk(&repo.join(".agent-runner"), &mut out);
    out
}

/// Starts `agent-runner run` on a task whose worker says "working" and then keeps busy
/// with `busy`; returns once the worker is at it (the server must stay alive too).
pub fn busy_worker(dir: &Scratch, id: &str, busy: &str, json: bool) -> (FakeOpenAi, Running) {
    busy_worker_with(dir, id, busy, json, &[])
}

/// `busy_worker` with more `runner.worker` settings: (key, value) pairs.
pub fn busy_worker_with(
    dir: &Scratch,
    id: &str,
    busy: &str,
    json: bool,
    worker: &[(&str, serde_json::Value)],
) -> (FakeOpenAi, Running) {
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(&format!("@say: working\n{busy}")),
    ]);
    let mut yaml = v1_task(id, &dir.path, &server);
    for (key, value) in worker {
        yaml = yaml.set(&format!("runner.worker.{key}"), value);
    }
    let mut run = runner(yaml);
    if json {
        run = run.arg("--json");
    }
    let child = run.start();
    let log = dir.join(&format!(".agent-runner/logs/{id}/run-1.log"));
    wait_for(Duration::from_secs(30), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("working"))
    });
    (server, child)
}

pub fn send(signal: &str, child: &Running) {
    let status = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal}");
}

pub fn wait_for(limit: Duration, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < until, "timed out waiting");
        std::thread::sleep(Duration::from_millis(20));
    }
}
