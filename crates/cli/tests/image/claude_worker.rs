//! The claude-code-cli worker (SPEC §18): `agent-runner run` (the real binary) with
//! scripted Meta drives the real Claude Code CLI in the real worker image
//! agent-runner-codex:latest against the fake Anthropic Messages API
//! (support/fake_anthropic.rs) on 127.0.0.1 through `network: host`, or on 127.0.0.2
//! through the egress proxy (the default network). Those tests need that image
//! (support/prerequisite.rs); the one on an image without claude does not.

use crate::support;

use std::path::Path;

use support::docker::TEST_IMAGE;
use support::fake_anthropic::{FakeAnthropic, Reply};
use support::prerequisite::{SANDBOX_IMAGE, needs};
use support::task::{assert_no_container, everything_written, note};
use support::task_yaml::TaskYaml;
use support::{Outcome, Run, Scratch};

const KEY: &str = "sk-ant-fake-worker-0123456789abcdef";
const MODEL: &str = "claude-fake-model";

fn task_id(name: &str) -> String {
    format!("claude-{name}-{}", support::short_id())
}

/// Scripted Meta: one criterion, one worker run with `prompt`, then an assessment
/// that finds the criterion met.
fn meta_script(dir: &Scratch, prompt: &str) -> String {
    support::task_yaml::one_run(dir, "claude-code-cli", prompt, &["AC-1"])
}

/// A task in `repo` whose worker is claude in `image`, its model API at `url`.
fn claude_task(id: &str, repo: &Path, script: &str, image: &str, url: &str) -> TaskYaml {
    TaskYaml::hello(id, repo)
        .scripted(script, 1)
        .set("runner.worker.kind", "claude-code-cli")
        .image(image)
        .set("runner.worker.model", MODEL)
        .set("runner.worker.base_url", url)
        .set("runner.worker.max_run_time_sec", 120)
}

/// Runs the task with HOME in the scratch directory (no login of the machine's) and
/// `env`.
fn run(dir: &Scratch, yaml: &TaskYaml, env: &[(&str, &str)]) -> Outcome {
    let mut run = Run::new(&["run"])
        .env("HOME", dir.join("home"))
        .stdin(yaml.to_string());
    for (name, value) in env {
        run = run.env(name, value);
    }
    run.output()
}

fn repo(dir: &Scratch) -> std::path::PathBuf {
    let repo = dir.join("repo");
    support::git_repo(&repo, "notes.txt", "one\n");
    repo
}

#[test]
#[ignore = "needs sandbox-image"]
fn claude_runs_a_bash_command_and_the_task_completes() {
    needs!(SandboxImage);
    let dir = Scratch::new("claude-ok");
    let repo = repo(&dir);
    let id = task_id("ok");
    let model = FakeAnthropic::start(vec![
        Reply::bash("echo hello > hello.txt && ls /nonexistent"),
        Reply::bash("echo hello > hello.txt"),
        Reply::Text("Created hello.txt.".into()),
    ]);
    let script = meta_script(&dir, "Create hello.txt saying hello.");
    let yaml = claude_task(&id, &repo, &script, SANDBOX_IMAGE, &model.url)
        .set("runner.worker.network", "host");
    let out = Run::new(&["run", "--json"])
        .env("HOME", dir.join("home"))
        .env("ANTHROPIC_API_KEY", KEY)
        .stdin(yaml.to_string())
        .output();
    out.code(0)
        .stdout_has("\"state\":\"COMPLETE\"")
        .stderr_has("worker run 1/1: completed")
        .stderr_has("worker claude-code-cli in image agent-runner-codex:latest");
    let result: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(
        std::fs::read_to_string(repo.join("hello.txt")).unwrap(),
        "hello\n"
    );

    let requests = model.received();
    assert_eq!(requests.len(), 3, "{requests:?}");
    for request in &requests {
        assert_eq!(request.path, "/v1/messages?beta=true");
        assert_eq!(request.header("x-api-key"), Some(KEY), "the key, by name");
        assert_eq!(request.json()["model"], MODEL);
    }
    assert!(requests[0].body.contains("Create hello.txt saying hello."));

    let note = note(&repo, &id);
    assert!(
        note.contains("- Worker: claude-code-cli in agent-runner-codex:latest"),
        "{note}"
    );
    assert!(
        note.contains("#### Run 1 (completed, ExitCode=0)"),
        "{note}"
    );
    assert!(note.contains("- Summary: Created hello.txt."), "{note}");
    assert!(
        note.contains("`echo hello > hello.txt && ls /nonexistent` → exit 2"),
        "the exit code from the tool result's text: {note}"
    );
    assert!(note.contains("`echo hello > hello.txt` → exit 0"), "{note}");
    // SPEC §15: the fake's usage, summed by claude over three replies (100 in plus 40
    // read from the cache each, 10 out each), on the model claude ran; the cost is
    // claude's own `total_cost_usd`, since the model has no price of the user's.
    let log =
        std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/run-1.log"))).unwrap();
    let reported: f64 = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["type"] == "result")
        .and_then(|e| e["total_cost_usd"].as_f64())
        .expect("claude's result event has total_cost_usd");
    assert!(reported > 0.0, "{reported}");
    let usage = &result["usage"];
    assert_eq!(
        (
            &usage["worker"]["runs"],
            &usage["worker"]["input_tokens"],
            &usage["worker"]["cached_input_tokens"],
            &usage["worker"]["output_tokens"],
            &usage["worker"]["unreported"],
        ),
        (
            &serde_json::json!(1),
            &serde_json::json!(420),
            &serde_json::json!(120),
            &serde_json::json!(30),
            &serde_json::json!(0)
        ),
        "{usage}"
    );
    assert_eq!(
        usage["total_tokens"], 450,
        "scripted Meta used none: {usage}"
    );
    assert_eq!(usage["cost_usd"].as_f64(), Some(reported), "{usage}");
    assert!(
        note.contains(&format!(
            "- Tokens: 420 in (120 cached), 30 out; model {MODEL}, cost ${} (the agent's own figure)",
            agent_runner_core::usage::usd(reported)
        )),
        "{note}"
    );
    assert!(note.contains("hello.txt"), "{note}");
    assert!(
        !everything_written(&repo).contains(KEY),
        "the key is masked"
    );
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn with_a_login_file_claude_reaches_its_model_only_through_the_egress_proxy() {
    needs!(SandboxImage);
    let dir = Scratch::new("claude-egress");
    let repo = repo(&dir);
    let id = task_id("egress");
    let token = "sk-ant-oat01-fake-access-token-0123456789";
    dir.file(
        "home/.claude/.credentials.json",
        format!(
            r#"{{"claudeAiOauth": {{"accessToken": "{token}", "refreshToken": "sk-ant-ort01-fake-refresh-0123456789", "expiresAt": 4102444800000, "scopes": ["user:inference"], "subscriptionType": "max"}}}}"#
        ),
    );
    // 127.0.0.2 stands for the internet: only the proxy reaches it.
    let model = FakeAnthropic::start_on(
        "127.0.0.2",
        vec![
            Reply::bash(
                "echo hello > hello.txt; cat ~/.claude/.credentials.json > /dev/null && echo readable; echo x >> ~/.claude/.credentials.json",
            ),
            Reply::Text("Created hello.txt.".into()),
        ],
    );
    let script = meta_script(&dir, "Create hello.txt saying hello.");
    // The default network: allowlist, with the default allow list.
    let yaml = claude_task(&id, &repo, &script, SANDBOX_IMAGE, &model.url);
    let validate = Run::new(&["validate"])
        .env("HOME", dir.join("home"))
        .stdin(yaml.to_string())
        .output();
    let model_host = model.url.trim_start_matches("http://");
    validate
        .code(0)
        .stdout_has(&format!(
            "allow:\n    - platform.claude.com\n    - {model_host}\n"
        ))
        .stdout_has("claude_auth: file ");
    let out = run(&dir, &yaml, &[]);
    out.code(0).stdout_has("COMPLETE");
    let requests = model.received();
    assert!(!requests.is_empty());
    for request in &requests {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {token}").as_str()),
            "the login file's token"
        );
        assert_eq!(request.header("x-api-key"), None);
    }
    let results = requests[1].tool_results();
    let output = results[0]["content"].as_str().unwrap_or_default();
    assert!(output.contains("readable"), "{output}");
    assert!(
        output.contains("Read-only file system"),
        "mounted read-only: {output}"
    );
    let egress =
        std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/egress.jsonl")))
            .unwrap();
    assert!(
        egress.contains(&format!(
            "\"host\":\"127.0.0.2\",\"port\":{},\"allowed\":true",
            model_host.rsplit(':').next().unwrap()
        )),
        "{egress}"
    );
    let written = everything_written(&repo);
    assert!(
        !written.contains(token),
        "the login file's values are masked"
    );
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn server_errors_end_the_run_failed_with_claude_s_message() {
    needs!(SandboxImage);
    let dir = Scratch::new("claude-500");
    let repo = repo(&dir);
    let id = task_id("500");
    let model = FakeAnthropic::start(vec![Reply::Status(500)]);
    let script = meta_script(&dir, "Create hello.txt saying hello.");
    // One retry instead of ten (about three minutes).
    let out = run(
        &dir,
        &claude_task(&id, &repo, &script, SANDBOX_IMAGE, &model.url)
            .set("runner.worker.network", "host")
            .set("runner.worker.env.CLAUDE_CODE_MAX_RETRIES", "1"),
        &[("ANTHROPIC_API_KEY", KEY)],
    );
    out.code(1)
        .stdout_has("FAILED")
        .stderr_has("worker run 1/1: failed in ")
        .stderr_has("API Error: 500 fake server: status 500");
    assert_eq!(model.received().len(), 2, "one request and one retry");
    let note = note(&repo, &id);
    assert!(note.contains("#### Run 1 (failed, ExitCode=1)"), "{note}");
    assert!(
        note.contains("- Last error event: API request failed with server_error (HTTP 500)")
            || note.contains("- Last error event: API Error: 500"),
        "{note}"
    );
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_stalled_stream_is_stopped_by_the_idle_timeout_inside_the_container() {
    needs!(SandboxImage);
    let dir = Scratch::new("claude-stall");
    let repo = repo(&dir);
    let id = task_id("stall");
    // claude itself would wait 5 minutes per attempt, for most of an hour.
    let model = FakeAnthropic::start(vec![Reply::Stall]);
    let script = meta_script(&dir, "Create hello.txt saying hello.");
    let out = run(
        &dir,
        &claude_task(&id, &repo, &script, SANDBOX_IMAGE, &model.url)
            .set("runner.worker.network", "host")
            .set("runner.worker.idle_timeout_sec", 4),
        &[("ANTHROPIC_API_KEY", KEY)],
    );
    out.code(1)
        .stderr_has("worker run 1/1: stalled")
        .stderr_has("Stalled: no output for 4 s (idle_timeout_sec)");
    let note = note(&repo, &id);
    assert!(note.contains("#### Run 1 (stalled"), "{note}");
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_claude_run_is_stopped_at_the_tasks_deadline() {
    needs!(SandboxImage);
    let dir = Scratch::new("claude-deadline");
    let repo = repo(&dir);
    let id = task_id("deadline");
    let model = FakeAnthropic::start(vec![Reply::Stall]);
    let script = meta_script(&dir, "Create hello.txt saying hello.");
    // Its own limits are far off; the task's deadline (SPEC §15) is not.
    let out = run(
        &dir,
        &claude_task(&id, &repo, &script, SANDBOX_IMAGE, &model.url)
            .set("runner.worker.network", "host")
            .set("runner.worker.idle_timeout_sec", 100)
            // The sandbox's start and preflight (SPEC §21) come out of it too.
            .set("runner.budget.max_duration_sec", 20),
        &[("ANTHROPIC_API_KEY", KEY)],
    );
    out.code(1)
        .stdout_has("budget exhausted: max_duration_sec")
        .stderr_has("worker run 1/1: timed_out")
        .stderr_has("Stopped at the task's deadline (runner.budget.max_duration_sec)");
    let note = note(&repo, &id);
    assert!(note.contains("#### Run 1 (timed_out"), "{note}");
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn an_error_result_fails_the_run_although_claude_s_subtype_is_no_failure() {
    needs!(SandboxImage);
    let dir = Scratch::new("claude-maxturns");
    let repo = repo(&dir);
    let id = task_id("maxturns");
    let model = FakeAnthropic::start(vec![Reply::bash("echo one"), Reply::bash("echo two")]);
    let script = meta_script(&dir, "Keep going.");
    let out = run(
        &dir,
        &claude_task(&id, &repo, &script, SANDBOX_IMAGE, &model.url)
            .set("runner.worker.network", "host")
            .set("runner.worker.extra_args", ["--max-turns", "1"]),
        &[("ANTHROPIC_API_KEY", KEY)],
    );
    out.code(1)
        .stderr_has("worker run 1/1: failed")
        .stderr_has("Reached maximum number of turns (1)");
    let note = note(&repo, &id);
    assert!(note.contains("`echo one` → exit 0"), "{note}");
    assert_no_container(&id);
}

#[test]
fn an_image_without_claude_fails_the_task_at_once_naming_it() {
    let dir = Scratch::new("claude-missing");
    let repo = repo(&dir);
    let id = task_id("missing");
    let script = meta_script(&dir, "Create hello.txt saying hello.");
    // The image's own agent, or none: not the tools volume's (`agent_from: auto`).
    let yaml = claude_task(&id, &repo, &script, TEST_IMAGE, "http://127.0.0.1:9")
        .set("runner.worker.network", "none")
        .set("runner.worker.agent_from", "image");
    let out = run(&dir, &yaml, &[("ANTHROPIC_API_KEY", KEY)]);
    out.code(1).stdout_has("FAILED").stderr_has(&format!(
        "docker image {TEST_IMAGE} cannot run the worker: it has no `claude` on PATH"
    ));
    let note = note(&repo, &id);
    assert!(note.contains("it has no \\`claude\\` on PATH"), "{note}");
    assert!(note.contains("#### 2. next_action"), "{note}");
    assert!(!note.contains("#### 3. "), "no more Meta calls: {note}");
    assert_no_container(&id);
}
