//! The codex-cli Meta provider (SPEC §18): each Meta request is one `codex exec
//! --output-schema --output-last-message` in the sandbox image. The real codex in
//! agent-runner-codex:latest answers from the fake Responses API on 127.0.0.2,
//! reached only through the egress proxy; the worker is the test image's fake codex.
//! No OPENAI_API_KEY anywhere: codex logs in with a `~/.codex/auth.json` of its own.
//! The tests need that image (support/prerequisite.rs).

use crate::support;

use std::path::Path;

use serde_json::{Value, json};
use support::docker::TEST_IMAGE;
use support::fake_responses::{FakeResponses, Reply};
use support::pipeline::{Pipeline, read};
use support::prerequisite::{SANDBOX_IMAGE, needs};
use support::task::{assert_no_container, everything_written, note};
use support::task_yaml::TaskYaml;
use support::{Outcome, Run, Scratch};

/// The key the fake provider's codex sends (a literal of runner.meta.env).
const MODEL_KEY: &str = "sk-fake-responses-meta-0123456789";
/// What `codex login --with-api-key` leaves in auth.json.
const LOGIN_KEY: &str = "sk-codex-login-key-0123456789abcdef";

fn task_id(name: &str) -> String {
    format!("meta-codex-{name}-{}", support::short_id())
}

/// A HOME with a codex login and nothing else.
fn home(dir: &Scratch) -> std::path::PathBuf {
    dir.file(
        "home/.codex/auth.json",
        format!(r#"{{"auth_mode": "apikey", "OPENAI_API_KEY": "{LOGIN_KEY}"}}"#),
    );
    dir.join("home")
}

/// A task whose Meta is codex-cli in the real image, its model the fake `model`.
fn codex_meta_task(id: &str, repo: &Path, model: &FakeResponses, timeout_sec: u32) -> TaskYaml {
    let provider = model.provider("fake", "FAKE_OPENAI_KEY", 0);
    TaskYaml::hello(id, repo)
        .set("runner.meta.kind", "codex-cli")
        .set("runner.meta.docker_image", SANDBOX_IMAGE)
        .set("runner.meta.model", "some-model")
        .set("runner.meta.timeout_sec", timeout_sec)
        .set("runner.meta.max_loops", 2)
        .set(
            "runner.meta.extra_args",
            ["-c", &provider, "-c", "model_provider=fake"],
        )
        .set("runner.meta.env.FAKE_OPENAI_KEY", MODEL_KEY)
        .image(TEST_IMAGE)
}

/// Runs the task; `Run` leaves out OPENAI_API_KEY and CODEX_API_KEY.
fn run(dir: &Scratch, yaml: &TaskYaml) -> Outcome {
    Run::new(&["run"])
        .env("HOME", home(dir))
        .stdin(yaml.to_string())
        .output()
}

fn reply(value: Value) -> Reply {
    Reply::Message(value.to_string())
}

#[test]
#[ignore = "needs sandbox-image"]
fn codex_as_meta_drives_a_whole_task_without_an_openai_key() {
    needs!(SandboxImage);
    let dir = Scratch::new("meta-codex-ok");
    let repo = dir.join("repo");
    support::git_repo(&repo, "notes.txt", "one\n");
    let id = task_id("ok");
    let model = FakeResponses::start_on(
        "127.0.0.2",
        vec![
            // Invalid (no criteria): asked again, as any Meta reply would be.
            reply(json!({"type": "plan_task", "acceptance_criteria": []})),
            reply(json!({"type": "plan_task", "acceptance_criteria": [
                {"id": null, "description": "hello.txt exists"}]})),
            // A replan (SPEC §16): a second plan_task, held to the same schema.
            reply(json!({"type": "next_action",
                "decision": {"action": "replan", "reason": "the file must say hello"},
                "worker_call": null})),
            reply(json!({"type": "plan_task", "acceptance_criteria": [
                {"id": null, "description": "hello.txt says hello"}]})),
            reply(json!({"type": "next_action",
                "decision": {"action": "run_worker", "reason": "nothing done yet"},
                "worker_call": {"worker_type": null, "mode": null,
                    "prompt": "Create hello.txt.\n@run: echo hello > hello.txt\n@say: wrote hello.txt"}})),
            reply(
                json!({"type": "completion_assessment", "summary": "hello.txt says hello",
                "details": {"passed_criteria": ["AC-1"], "remaining_risks": []},
                "all_criteria_satisfied": null}),
            ),
        ],
    );
    let yaml = format!(
        "{}  pricing:\n    some-model: {{input: 1, cached_input: 0.5, output: 2}}\n",
        codex_meta_task(&id, &repo, &model, 120)
    );
    let out = Run::new(&["run", "--json"])
        .env("HOME", home(&dir))
        .stdin(&yaml)
        .output();
    out.code(0)
        .stdout_has("\"state\":\"COMPLETE\"")
        .stderr_has("meta codex-cli (some-model)")
        .stderr_has("meta plan_task: invalid reply (acceptance_criteria is empty");
    assert_eq!(read(&repo.join("hello.txt")), "hello\n");
    let result: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(result["replans"], 1, "{result}");
    // SPEC §15: codex's tokens (turn.completed, the fake's 100 in, 40 cached, 10 out
    // per response) are Meta's usage, on codex's -m model and at its price:
    // 6 requests in 5 calls (the re-ask is paid too).
    let meta = &result["usage"]["meta"];
    assert_eq!(
        (
            &meta["calls"],
            &meta["input_tokens"],
            &meta["cached_input_tokens"],
            &meta["output_tokens"],
            &meta["unreported"]
        ),
        (&json!(5), &json!(600), &json!(240), &json!(60), &json!(0)),
        "{result}"
    );
    let models = result["usage"]["models"].as_array().unwrap();
    let priced = models
        .iter()
        .find(|m| m["model"] == "some-model")
        .unwrap_or_else(|| panic!("{result}"));
    // (360 × 1 + 240 × 0.5 + 60 × 2) / 10⁶
    assert_eq!(priced["cost_usd"], json!(0.0006), "{result}");

    let requests = model.received();
    assert_eq!(requests.len(), 6, "{requests:?}");
    let schemas = [
        agent_runner_meta::messages::plan_task(),
        agent_runner_meta::messages::plan_task(),
        agent_runner_meta::messages::next_action(),
        agent_runner_meta::messages::plan_task(),
        agent_runner_meta::messages::next_action(),
        agent_runner_meta::messages::completion_assessment(),
    ];
    for (request, schema) in requests.iter().zip(&schemas) {
        assert_eq!(request.path, "/v1/responses");
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {MODEL_KEY}").as_str())
        );
        assert_eq!(
            request.json()["model"],
            "some-model",
            "runner.meta.model is -m"
        );
        let format = &request.json()["text"]["format"];
        assert_eq!(
            (&format["type"], &format["strict"]),
            (&json!("json_schema"), &json!(true))
        );
        assert_eq!(&format["schema"], schema, "the reply's schema");
    }
    assert!(
        requests[0]
            .body
            .contains("Create hello.txt containing the word hello.")
    );
    assert!(
        requests[1]
            .body
            .contains("Your reply was invalid: acceptance_criteria is empty"),
        "the re-ask carries the problem"
    );
    assert!(
        requests[3].body.contains("previous_criteria")
            && requests[3].body.contains("the file must say hello"),
        "the replan's plan_task: {}",
        requests[3].body
    );

    let note = note(&repo, &id);
    assert!(
        note.contains("- Meta: codex-cli, model some-model"),
        "{note}"
    );
    assert!(note.contains("- [x] AC-1: hello.txt says hello"), "{note}");
    // Meta's codex ran in a scratch directory of its own, through its own egress
    // proxy; its logs are beside the worker's.
    let meta_log = read(&repo.join(format!(".agent-runner/logs/{id}/meta/run-1.log")));
    assert!(
        meta_log.contains("\"type\":\"turn.completed\""),
        "{meta_log}"
    );
    let egress = read(&repo.join(format!(".agent-runner/logs/{id}/meta/egress.jsonl")));
    let port = model
        .url
        .trim_end_matches("/v1")
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    assert!(
        egress.contains(&format!(
            "\"host\":\"127.0.0.2\",\"port\":{port},\"allowed\":true"
        )),
        "{egress}"
    );
    let written = everything_written(&repo);
    for secret in [MODEL_KEY, LOGIN_KEY] {
        assert!(!written.contains(secret), "{secret} is masked");
    }
    assert_no_container(&id);
    let scratch: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(&id))
        .collect();
    assert!(
        scratch.is_empty(),
        "the scratch directory is removed: {scratch:?}"
    );
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_meta_call_past_its_timeout_is_stopped_and_fails_the_task() {
    needs!(SandboxImage);
    let dir = Scratch::new("meta-codex-stall");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let id = task_id("stall");
    let model = FakeResponses::start_on("127.0.0.2", vec![Reply::Stall]);
    let out = run(&dir, &codex_meta_task(&id, &repo, &model, 4));
    out.code(1)
        .stdout_has("FAILED")
        .stderr_has("meta plan_task failed")
        .stderr_has("codex timed_out: Timed out after 4 s");
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_meta_call_is_stopped_at_the_tasks_deadline() {
    needs!(SandboxImage);
    let dir = Scratch::new("meta-codex-deadline");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let id = task_id("deadline");
    let model = FakeResponses::start_on("127.0.0.2", vec![Reply::Stall]);
    // The call's own limit (60 s) is longer than the task's (15 s): the task's
    // wins. (The task's time runs from its start: a container start of seconds on
    // a busy machine must leave the call some of it.)
    let yaml = format!(
        "{}  budget: {{max_duration_sec: 15}}\n",
        codex_meta_task(&id, &repo, &model, 60)
    );
    let out = Run::new(&["run", "--json"])
        .env("HOME", home(&dir))
        .stdin(&yaml)
        .output();
    out.code(1)
        .stderr_has("meta plan_task failed after")
        .stderr_has("stopped at the task's deadline (runner.budget.max_duration_sec)");
    let result: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(result["state"], "FAILED", "{result}");
    assert_eq!(
        result["budget"]["exhausted"], "max_duration_sec",
        "{result}"
    );
    assert_eq!(result["usage"]["meta"]["unreported"], 1, "{result}");
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn plans_decompose_through_codex_with_the_codex_builder() {
    needs!(SandboxImage);
    let p = Pipeline::new("meta-codex-plan", false);
    let model = FakeResponses::start_on(
        "127.0.0.2",
        vec![reply(json!({
            "type": "decompose",
            "understanding": "A greeting file.",
            "phases": [{"name": "Build", "milestone": "M1", "tasks": [
                {"id": "temp-1", "title": "Write hello.txt", "description": "Create it.",
                 "acceptance_criteria": ["hello.txt says hello"], "dependencies": null,
                 "wbs_level": 3, "estimated_effort": "small", "suggested_impl": null},
                {"id": "temp-2", "title": "Check it", "description": "Read it back.",
                 "acceptance_criteria": ["it was read"], "dependencies": ["temp-1"],
                 "wbs_level": 3, "estimated_effort": "small",
                 "suggested_impl": {"language": null, "file_paths": ["hello.txt"], "constraints": null}}]}],
            "potential_conflicts": null
        }))],
    );
    let provider = model.provider("fake", "FAKE_OPENAI_KEY", 0);
    let defaults = format!(
        "builder: {{kind: codex}}\nrunner:\n  meta:\n    kind: codex-cli\n    docker_image: {SANDBOX_IMAGE}\n    extra_args: ['-c', '{provider}', '-c', 'model_provider=fake']\n    env: {{FAKE_OPENAI_KEY: {MODEL_KEY}}}\n  worker: {{docker_image: \"{TEST_IMAGE}\"}}\n"
    );
    p.init_with("defaults.yaml", &defaults);
    let out = p
        .in_ws(&["plan"], &["Make a greeting file"])
        .env("CODEX_API_KEY", "ck-plan-0123456789")
        .output();
    out.code(0);
    let requests = model.received();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(
        requests[0].json()["text"]["format"]["schema"],
        agent_runner_pipeline::plan::schema::decompose()
    );
    assert!(requests[0].body.contains("Make a greeting file"));
    let show = p.in_ws(&["plan"], &["--show", "--json"]).output();
    show.code(0);
    assert!(show.stdout.contains("Write hello.txt"), "{}", show.stdout);
    assert!(show.stdout.contains("Check it"), "{}", show.stdout);
    let chat = read(&p.ws().join("chat.jsonl"));
    assert!(chat.contains("A greeting file."), "{chat}");
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_pipeline_builds_and_runs_a_task_with_codex_as_its_only_model() {
    needs!(SandboxImage);
    let p = Pipeline::new("meta-codex-pipeline", true);
    let model = FakeResponses::start_on(
        "127.0.0.2",
        vec![
            reply(json!({"type": "build_task_config",
                "task": {"id": "chosen", "title": "T", "instructions": "Create hello.txt saying hello.",
                         "project": {"root_dir": "/elsewhere"},
                         "test": {"command": "grep -qx hello hello.txt", "cwd": null, "timeout_sec": null},
                         "acceptance_criteria": null},
                "runner": {"meta": {"model": "gpt-4.1", "temperature": 0.2},
                           "worker": {"type": "docker_codex_cli", "model": null}}})),
            reply(json!({"type": "plan_task", "acceptance_criteria": [
                {"id": "AC-1", "description": "hello.txt says hello"}]})),
            reply(json!({"type": "next_action",
                "decision": {"action": "run_worker", "reason": "start"},
                "worker_call": {"worker_type": null, "mode": null,
                    "prompt": "@run: echo hello > hello.txt\n@say: wrote hello.txt"}})),
            reply(json!({"type": "completion_assessment", "summary": "done",
                "details": {"passed_criteria": ["AC-1"], "remaining_risks": []},
                "all_criteria_satisfied": true})),
        ],
    );
    let provider = model.provider("fake", "FAKE_OPENAI_KEY", 0);
    // The default builder (kind meta) asks the workspace's Meta: codex.
    let defaults = format!(
        "runner:\n  meta:\n    kind: codex-cli\n    docker_image: {SANDBOX_IMAGE}\n    extra_args: ['-c', '{provider}', '-c', 'model_provider=fake']\n    env: {{FAKE_OPENAI_KEY: {MODEL_KEY}}}\n  worker: {{docker_image: \"{TEST_IMAGE}\"}}\n"
    );
    p.init_with("defaults.yaml", &defaults);
    let dir = Scratch::new("meta-codex-pipeline-home");
    let id = support::pipeline::task_id("codex-only");
    p.new_task(&id, "Create hello.txt saying hello");
    p.run_tasks(&[&id]);
    let out = p.orchestrate_once(&[]).env("HOME", home(&dir)).output();
    let attempts = p.attempts(&id);
    assert_eq!(attempts.len(), 1, "{}", out.stderr);
    assert_eq!(attempts[0]["status"], "succeeded", "{}", attempts[0]);
    assert_eq!(read(&p.root.join("hello.txt")), "hello\n");
    let requests = model.received();
    assert_eq!(requests.len(), 4, "{requests:?}");
    let build_schema = &requests[0].json()["text"]["format"]["schema"];
    assert_eq!(
        build_schema["properties"]["type"]["enum"],
        json!(["build_task_config"])
    );
    // The builder's model is no codex model: codex's own default is asked.
    for request in &requests[1..] {
        assert_ne!(request.json()["model"], "gpt-4.1");
    }
    let config = read(Path::new(attempts[0]["task_config"].as_str().unwrap()));
    assert!(config.contains("kind: codex-cli"), "{config}");
    assert!(
        !config.contains("gpt-4.1") && !config.contains("temperature"),
        "{config}"
    );
    assert_no_container(&id);
}
