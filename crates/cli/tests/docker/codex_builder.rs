//! The codex Task Builder (SPEC §12 `builder.kind: codex`): `codex exec
//! --output-schema --output-last-message` in the sandbox image, through the worker's
//! own machinery. The test worker image's fake codex answers with the last `@say:`
//! line of its prompt (the task's raw prompt is in it, verbatim); one test runs the
//! real codex image against the fake Responses API. Real binary, real daemon.

use crate::support;

use serde_json::Value;
use support::docker::{TEST_IMAGE, containers_labelled};
use support::fake_responses::{FakeResponses, Reply};
use support::pipeline::{BUILDER_REPLY, Pipeline, meta_script, read, task_id};
use support::prerequisite::{SANDBOX_IMAGE, needs};

const CODEX_KEY: &str = "ck-builder-0123456789abcdef";

/// A TaskConfig as codex answers with `--output-schema`: JSON, nulls for what it
/// leaves out, and ids the orchestrator replaces.
const CONFIG: &str = r#"{"task": {"id": "codex-chose", "title": "Codex title", "instructions": "Create hello.txt saying hello.", "project": {"root_dir": "/elsewhere"}, "test": {"command": "grep -qx hello hello.txt", "cwd": null, "timeout_sec": null}, "acceptance_criteria": null}, "runner": {"meta": {"model": "gpt-4.1", "temperature": null}, "worker": {"type": "docker_codex_cli", "model": null}}}"#;

/// A workspace with the codex builder over `image` and `extra` worker settings.
fn workspace(name: &str, image: &str, extra_worker: &str) -> Pipeline {
    let p = Pipeline::new(name, false);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: echo hello > hello.txt\n@say: wrote hello.txt"),
        "",
    );
    // The same defaults with the codex builder (init again replaces them).
    let defaults = read(&p.scratch.join("defaults.yaml"))
        .replace(
            "builder: {kind: scripted, script: builder.yaml}",
            "builder: {kind: codex}",
        )
        .replace(
            &format!("docker_image: \"{TEST_IMAGE}\", network: none"),
            &format!("docker_image: \"{image}\"{extra_worker}"),
        );
    p.init_with("defaults-codex.yaml", &defaults);
    p
}

/// Runs task `id` (raw prompt `prompt`) with `env`; the exit code and the attempt.
fn run(p: &Pipeline, id: &str, prompt: &str, env: &[(&str, &str)]) -> (i32, Value) {
    p.new_task(id, prompt);
    p.run_tasks(&[id]);
    let mut orchestrate = p.orchestrate_once(&[]).env("HOME", &p.scratch.path);
    for (name, value) in env {
        orchestrate = orchestrate.env(name, value);
    }
    let out = orchestrate.output();
    let attempts = p.attempts(id);
    assert_eq!(attempts.len(), 1, "{}", out.stderr);
    assert_eq!(
        containers_labelled("agent-runner.task", id),
        Vec::<String>::new()
    );
    (out.code.unwrap_or(-1), attempts.into_iter().next().unwrap())
}

fn builder_log(attempt: &Value) -> String {
    read(&std::path::Path::new(attempt["log_dir"].as_str().unwrap()).join("builder.log"))
}

#[test]
fn codex_builds_the_taskconfig_and_the_invariants_hold() {
    let p = workspace("codex-builder-ok", TEST_IMAGE, ", network: none");
    let id = task_id("codex-ok");
    let prompt = format!("Create hello.txt saying hello\n@say: {CONFIG}");
    let (code, attempt) = run(&p, &id, &prompt, &[("CODEX_API_KEY", CODEX_KEY)]);
    assert_eq!(
        (code, attempt["status"].as_str()),
        (0, Some("succeeded")),
        "{attempt}"
    );
    let config: serde_norway::Value = serde_norway::from_str(&read(std::path::Path::new(
        attempt["task_config"].as_str().unwrap(),
    )))
    .unwrap();
    assert_eq!(
        config["task"]["id"],
        id.as_str(),
        "the orchestrator's, not codex's"
    );
    assert_eq!(config["task"]["title"], "Create hello.txt saying hello");
    assert_eq!(
        config["task"]["project"]["root_dir"],
        p.root.to_str().unwrap()
    );
    let instructions = config["task"]["instructions"].as_str().unwrap();
    assert!(
        instructions.starts_with(&prompt),
        "the raw prompt, verbatim: {instructions}"
    );
    assert_eq!(
        config["task"]["test"]["command"],
        "grep -qx hello hello.txt"
    );
    assert!(config["task"]["test"].get("cwd").is_none(), "nulls dropped");
    assert_eq!(attempt["result"]["validation"]["overall"], "passed");
    assert_eq!(read(&p.root.join("hello.txt")), "hello\n");
    let log = builder_log(&attempt);
    assert!(log.starts_with("builder: codex\n"), "{log}");
    assert!(log.contains("--- reply ---\n{\"task\""), "{log}");
    assert!(log.contains("completed in "), "{log}");
    assert!(!log.contains(CODEX_KEY));
}

#[test]
fn without_a_codex_session_the_attempt_fails_at_once() {
    let p = workspace("codex-builder-nosession", TEST_IMAGE, ", network: none");
    let id = task_id("codex-nosession");
    let (code, attempt) = run(&p, &id, &format!("Do it\n@say: {CONFIG}"), &[]);
    assert_eq!(code, 1);
    let error = attempt["error"].as_str().unwrap();
    assert!(
        error.starts_with("the Task Builder (codex) failed: no codex session: there is no ~/.codex/auth.json and CODEX_API_KEY is not set"),
        "{error}"
    );
    assert!(!p.root.join(".agent-runner").exists(), "nothing ran");
}

#[test]
fn a_reply_that_is_no_taskconfig_fails_the_attempt_naming_the_problem() {
    let p = workspace("codex-builder-invalid", TEST_IMAGE, ", network: none");
    let id = task_id("codex-invalid");
    let (code, attempt) = run(
        &p,
        &id,
        "Do it\n@say: {\"task\": {\"title\": \"no instructions\"}, \"runner\": {}}",
        &[("CODEX_API_KEY", CODEX_KEY)],
    );
    assert_eq!(code, 1);
    assert_eq!(
        attempt["error"],
        "the Task Builder (codex) failed: codex's reply is not a TaskConfig: task.instructions is missing or empty"
    );
    // A reply the parser refuses after the invariants: named by its field.
    let id = task_id("codex-badfield");
    let bad = CONFIG.replace("\"temperature\": null", "\"temperature\": 7");
    let (_, attempt) = run(
        &p,
        &id,
        &format!("Do it\n@say: {bad}"),
        &[("CODEX_API_KEY", CODEX_KEY)],
    );
    let error = attempt["error"].as_str().unwrap();
    assert!(
        error.starts_with("invalid TaskConfig: runner.meta.temperature"),
        "{error}"
    );
}

#[test]
fn a_failing_codex_fails_the_attempt_with_its_message() {
    let p = workspace("codex-builder-fails", TEST_IMAGE, ", network: none");
    let id = task_id("codex-fails");
    let (code, attempt) = run(
        &p,
        &id,
        "Do it\n@fail: You exceeded your current quota",
        &[("CODEX_API_KEY", CODEX_KEY)],
    );
    assert_eq!(code, 1);
    assert_eq!(
        attempt["error"],
        "the Task Builder (codex) failed: codex failed: You exceeded your current quota"
    );
    // An image without codex, and the agent from the image only: the sandbox says so.
    let p = workspace(
        "codex-builder-nocodex",
        "agent-runner-test-worker:nocodex",
        ", network: none, agent_from: image",
    );
    let id = task_id("codex-nocodex");
    let (_, attempt) = run(&p, &id, "Do it", &[("CODEX_API_KEY", CODEX_KEY)]);
    let error = attempt["error"].as_str().unwrap();
    assert!(
        error.starts_with("the Task Builder (codex) failed: codex could not run: "),
        "{error}"
    );
}

#[test]
#[ignore = "needs sandbox-image"]
fn real_codex_builds_the_taskconfig_with_the_output_schema() {
    needs!(SandboxImage);
    let image = SANDBOX_IMAGE;
    // No test command: the runner's Meta below does not run a worker.
    let config = CONFIG.replace(
        r#"{"command": "grep -qx hello hello.txt", "cwd": null, "timeout_sec": null}"#,
        "null",
    );
    let model = FakeResponses::start(vec![Reply::Message(config)]);
    let provider = model.provider("fake", "FAKE_OPENAI_KEY", 1);
    let extra = format!(
        ", network: host, model: some-model, extra_args: ['-c', '{provider}', '-c', 'model_provider=fake'], env: {{FAKE_OPENAI_KEY: sk-fake-responses-0123456789}}"
    );
    let p = workspace("codex-builder-real", image, &extra);
    let id = task_id("codex-real");
    // The runner's worker is the real codex too; Meta only marks the task complete.
    let meta = "- type: plan_task\n  acceptance_criteria: [{id: AC-1, description: nothing to do}]\n- type: next_action\n  decision: {action: mark_complete, reason: nothing to do}\n- type: completion_assessment\n  summary: Nothing needed doing.\n  details: {passed_criteria: [AC-1]}\n";
    std::fs::write(p.scratch.join("meta.yaml"), meta).unwrap();
    let (code, attempt) = run(
        &p,
        &id,
        "Create hello.txt saying hello",
        &[("CODEX_API_KEY", CODEX_KEY)],
    );
    let requests = model.received();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let body = requests[0].json();
    // codex sends the schema as the response format of a strict JSON schema.
    let format = &body["text"]["format"];
    assert_eq!(format["type"], "json_schema", "{}", requests[0].body);
    assert_eq!(format["strict"], true);
    assert_eq!(
        format["schema"],
        agent_runner_settings::task::task_config_schema(),
        "the schema generated from the parser's tables"
    );
    assert!(requests[0].body.contains("Create hello.txt saying hello"));
    assert_eq!(
        (code, attempt["status"].as_str()),
        (0, Some("succeeded")),
        "{attempt}"
    );
    let config: serde_norway::Value = serde_norway::from_str(&read(std::path::Path::new(
        attempt["task_config"].as_str().unwrap(),
    )))
    .unwrap();
    assert_eq!(
        config["task"]["instructions"], "Create hello.txt saying hello.",
        "it holds the raw prompt: kept as written"
    );
    assert!(config["task"].get("test").is_none());
    assert_eq!(config["task"]["id"], id.as_str());
}

#[test]
fn the_builder_s_codex_sees_only_its_scratch_and_may_write_only_builder_fields() {
    let p = workspace("codex-builder-view", TEST_IMAGE, ", network: none");
    std::fs::write(p.root.join("private.txt"), "in the project\n").unwrap();
    let meta_key = "sk-meta-key-not-for-the-builder-0123";
    let id = task_id("codex-view");
    let evil = CONFIG.replace(
        "\"type\": \"docker_codex_cli\"",
        "\"type\": \"docker_codex_cli\", \"docker_image\": \"evil:latest\", \"extra_args\": [\"--privileged\"]",
    );
    let prompt = format!(
        "Look around\n@run: cat /proc/self/mountinfo > mounts.txt; env > env.txt; ls -a > ls.txt; cat private.txt ../private.txt > seen.txt 2>&1\n@say: {evil}"
    );
    let (code, attempt) = run(
        &p,
        &id,
        &prompt,
        &[("CODEX_API_KEY", CODEX_KEY), ("OPENAI_API_KEY", meta_key)],
    );
    assert_eq!(code, 1);
    let error = attempt["error"].as_str().unwrap();
    assert!(
        error.starts_with("the Task Builder (codex) failed: codex's reply is not a TaskConfig: runner.worker.docker_image, runner.worker.extra_args: not for the Task Builder to set"),
        "{error}"
    );
    assert!(!p.root.join(".agent-runner").exists(), "nothing ran");
    let scratch = std::path::Path::new(attempt["log_dir"].as_str().unwrap()).join("codex-builder");
    let listed = read(&scratch.join("ls.txt"));
    assert!(
        listed.contains("mounts.txt") && !listed.contains("README.md"),
        "{listed}"
    );
    assert!(!read(&scratch.join("seen.txt")).contains("in the project"));
    let project = p.root.display().to_string();
    let project_tail = &project[project.rfind("/agent-runner-").unwrap()..];
    let mounts = read(&scratch.join("mounts.txt"));
    assert!(mounts.contains("/codex-builder "), "{mounts}");
    assert!(
        !mounts.contains(project_tail),
        "the project is not mounted: {mounts}"
    );
    let env = read(&scratch.join("env.txt"));
    assert!(env.contains("CODEX_API_KEY="), "codex has its key");
    assert!(!env.contains(meta_key), "Meta's key stays out: {env}");
}

#[test]
#[ignore = "needs sandbox-image"]
fn real_codex_builder_reaches_its_model_only_through_the_egress_proxy() {
    needs!(SandboxImage);
    let image = SANDBOX_IMAGE;
    let config = CONFIG.replace(
        r#"{"command": "grep -qx hello hello.txt", "cwd": null, "timeout_sec": null}"#,
        "null",
    );
    // 127.0.0.2 stands for the internet: only the proxy reaches it.
    let model = FakeResponses::start_on("127.0.0.2", vec![Reply::Message(config)]);
    let provider = model.provider("fake", "FAKE_OPENAI_KEY", 1);
    // The workspace names no network: the default, allowlist.
    let extra = format!(
        ", model: some-model, extra_args: ['-c', '{provider}', '-c', 'model_provider=fake'], env: {{FAKE_OPENAI_KEY: sk-fake-responses-0123456789}}"
    );
    let p = workspace("codex-builder-egress", image, &extra);
    let id = task_id("codex-egress");
    let meta = "- type: plan_task\n  acceptance_criteria: [{id: AC-1, description: nothing to do}]\n- type: next_action\n  decision: {action: mark_complete, reason: nothing to do}\n- type: completion_assessment\n  summary: Nothing needed doing.\n  details: {passed_criteria: [AC-1]}\n";
    std::fs::write(p.scratch.join("meta.yaml"), meta).unwrap();
    let (code, attempt) = run(
        &p,
        &id,
        "Create hello.txt saying hello",
        &[("CODEX_API_KEY", CODEX_KEY)],
    );
    assert_eq!(
        (code, attempt["status"].as_str()),
        (0, Some("succeeded")),
        "{attempt}"
    );
    assert_eq!(model.received().len(), 1);
    let logs = std::path::Path::new(attempt["log_dir"].as_str().unwrap()).join(format!(
        "codex-builder/.agent-runner/logs/{id}/egress.jsonl"
    ));
    let log = read(&logs);
    let model_host = model
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/v1");
    assert!(
        log.lines().any(|l| l.contains(&format!(
            "\"host\":\"127.0.0.2\",\"port\":{},\"allowed\":true",
            model_host.rsplit(':').next().unwrap()
        ))),
        "{log}"
    );
}
