//! `runner.meta.kind: openai-responses` and `anthropic-messages` end to end: the real
//! binary, a fake API server on 127.0.0.1 answering with bodies of the APIs' own
//! shape, the real Docker daemon and the test worker image. Every request and every
//! scripted reply is checked against the official SDKs' types (the `openai` and
//! `anthropic` Python packages, testdata/meta-sdk/check.py, installed by
//! `make test-env`): a missing SDK fails the test.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use support::fake_openai::{Answer, FakeOpenAi, Received};
use support::task::{assert_no_container, e2e_task, everything_written, note, task_id};
use support::task_yaml::TaskYaml;
use support::{Run, Scratch};

const OPENAI_KEY: &str = "sk-responses-test-key-0123456789abcdef";
const ANTHROPIC_KEY: &str = "sk-ant-test-key-0123456789abcdef";
const TEAM_TOKEN: &str = "team-token-fedcba9876543210";

/// Checks `body` as `what` (`request` or `response`) of `kind` with the SDKs.
pub(super) fn sdk_check(kind: &str, what: &str, body: &str) {
    let error = SdkChecker::ask(kind, what, body);
    if let Some(error) = error {
        assert!(
            !error.contains("ModuleNotFoundError"),
            "the openai/anthropic SDKs are missing: `make test-env` (testdata/setup-meta-sdk.sh) installs them: {error}"
        );
        panic!("{error}\n{body}");
    }
}

/// The run's checker (`check.py --serve-socket`, started by testdata/test.sh and
/// named by `AGENT_RUNNER_TEST_SDK_CHECKS`), else one `check.py --serve` of this
/// test process, shared by its threads: importing the SDKs takes seconds, and a
/// test checks a dozen bodies.
struct SdkChecker {
    // Never waited for: it ends with this process, when its stdin closes.
    _process: Option<std::process::Child>,
    input: Box<dyn Write + Send>,
    output: BufReader<Box<dyn Read + Send>>,
}

impl SdkChecker {
    /// The checker's verdict on `body`: None when it conforms, else what is wrong.
    fn ask(kind: &str, what: &str, body: &str) -> Option<String> {
        static CHECKER: OnceLock<Mutex<SdkChecker>> = OnceLock::new();
        let mut checker = CHECKER
            .get_or_init(|| Mutex::new(SdkChecker::start()))
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let line = json!({"kind": kind, "what": what, "body": body}).to_string();
        writeln!(checker.input, "{line}").expect("testdata/meta-sdk/check.py --serve ended");
        let mut answer = String::new();
        checker.output.read_line(&mut answer).unwrap();
        let answer: Value = serde_json::from_str(&answer).unwrap_or_else(|e| {
            panic!("testdata/meta-sdk/check.py --serve ended or answered {answer:?}: {e}")
        });
        answer["error"].as_str().map(str::to_string)
    }

    fn start() -> SdkChecker {
        if let Some(socket) = std::env::var_os("AGENT_RUNNER_TEST_SDK_CHECKS") {
            let stream = std::os::unix::net::UnixStream::connect(&socket).unwrap_or_else(|e| {
                panic!("the run's SDK checker {}: {e}", socket.to_string_lossy())
            });
            return SdkChecker {
                input: Box::new(stream.try_clone().unwrap()),
                output: BufReader::new(Box::new(stream)),
                _process: None,
            };
        }
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/meta-sdk/check.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 is needed to check requests against the SDKs (`make test-env`)");
        SdkChecker {
            input: Box::new(child.stdin.take().unwrap()),
            output: BufReader::new(Box::new(child.stdout.take().unwrap())),
            _process: Some(child),
        }
    }
}

fn plan() -> Value {
    json!({"type": "plan_task", "acceptance_criteria": [{"id": "AC-1", "description": "out.txt says ok"}]})
}

fn run_worker() -> Value {
    json!({"type": "next_action",
        "decision": {"action": "run_worker", "reason": "work to do"},
        "worker_call": {"worker_type": "codex-cli", "mode": "exec",
                        "prompt": "@run: echo ok > out.txt\n@say: wrote it"}})
}

fn assess() -> Value {
    json!({"type": "completion_assessment", "summary": "out.txt says ok",
        "details": {"passed_criteria": ["AC-1"], "remaining_risks": ["none known"]}})
}

fn json_answer(status: u16, body: Value) -> Answer {
    Answer {
        status,
        body: body.to_string(),
        ..Answer::chat("")
    }
}

/// A Responses API `Response` whose message is `reply` (as JSON text), with usage:
/// 900 in (512 cached, 128 written to the cache), 300 out (256 reasoning).
pub(super) fn response(reply: &Value) -> Answer {
    let body = json!({
        "id": "resp_fake", "object": "response", "created_at": 1_767_000_000,
        "model": "gpt-5.1-codex-max", "status": "completed",
        "error": null, "incomplete_details": null, "instructions": null, "metadata": {},
        "parallel_tool_calls": true, "temperature": null, "tool_choice": "auto",
        "tools": [], "top_p": null,
        "output": [
            {"type": "reasoning", "id": "rs_fake", "summary": []},
            {"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": reply.to_string(), "annotations": []}]},
        ],
        "usage": {"input_tokens": 900,
                  "input_tokens_details": {"cached_tokens": 512, "cache_write_tokens": 128},
                  "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 256},
                  "total_tokens": 1200},
    });
    sdk_check("openai-responses", "response", &body.to_string());
    json_answer(200, body)
}

/// A Messages API `Message` calling the reply's tool with `reply`, with usage: 100
/// in after the cache, 2000 read from it, 300 written to it; 50 out (20 thinking).
pub(super) fn message(reply: &Value) -> Answer {
    let body = json!({
        "id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [
            {"type": "text", "text": "Here is my reply."},
            {"type": "tool_use", "id": "toolu_fake", "name": reply["type"], "input": reply},
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 100, "cache_read_input_tokens": 2000,
                  "cache_creation_input_tokens": 300, "output_tokens": 50,
                  "output_tokens_details": {"thinking_tokens": 20}},
    });
    sdk_check("anthropic-messages", "response", &body.to_string());
    json_answer(200, body)
}

/// Task `id` in `dir` (out.txt to say ok, and its test), Meta of `kind` at `base_url`.
fn api_task(id: &str, dir: &Scratch, kind: &str, base_url: &str) -> TaskYaml {
    e2e_task(id, &dir.path)
        .set("task.title", format!("Meta APIs {id}"))
        .test("grep -qx ok out.txt")
        .set("runner.meta.kind", kind)
        .set("runner.meta.base_url", base_url)
}

fn runner(yaml: &TaskYaml) -> Run {
    Run::new(&["run", "--json"])
        .env("AGENT_RUNNER_META_BACKOFF_MS", "10")
        .stdin(yaml.to_string())
}

fn result(out: &support::Outcome) -> Value {
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

fn check_requests(kind: &str, got: &[Received]) {
    for request in got {
        sdk_check(kind, "request", &request.body);
    }
}

#[test]
fn a_task_completes_through_the_responses_api_with_the_default_model() {
    let dir = Scratch::new("api-responses");
    let id = task_id("responses");
    let server = FakeOpenAi::start(vec![
        json_answer(429, json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}))
            .header("Retry-After", "1"),
        response(&plan()),
        response(&run_worker()),
        response(&assess()),
    ]);
    dir.file(
        "AGENTS.md",
        format!("Run the tests with make. Never print {OPENAI_KEY}.\n"),
    );
    let out = runner(&api_task(&id, &dir, "openai-responses", &server.url))
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .output();
    out.code(0);
    let result = result(&out);
    assert_eq!(result["state"], "COMPLETE", "{result}");
    assert_eq!(
        result["usage"]["meta"],
        json!({"calls": 3, "input_tokens": 2700, "cached_input_tokens": 1536,
               "cache_write_input_tokens": 384, "output_tokens": 900,
               "reasoning_tokens": 768, "unreported": 0})
    );
    let got = server.received();
    assert_eq!(got.len(), 4, "the 429 and three calls");
    assert!(
        got[1].at - got[0].at >= Duration::from_secs(1),
        "Retry-After: 1 honoured (the backoff alone is 10 ms)"
    );
    check_requests("openai-responses", &got);
    for request in &got {
        assert_eq!(request.path, "/v1/responses");
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {OPENAI_KEY}").as_str())
        );
    }
    let body = got[3].json();
    assert_eq!(
        body["model"], "gpt-5.1-codex-max",
        "the seed's default, split"
    );
    assert_eq!(body["reasoning"], json!({"effort": "high"}));
    assert_eq!(body["store"], false);
    let format = &body["text"]["format"];
    assert_eq!(
        (&format["type"], &format["name"], &format["strict"]),
        (
            &json!("json_schema"),
            &json!("completion_assessment"),
            &json!(true)
        )
    );
    assert_eq!(format["schema"]["type"], "object");
    assert_eq!(got[2].json()["text"]["format"]["name"], "next_action");
    eprintln!(
        "figure: openai-responses next_action request: {} bytes",
        got[2].body.len()
    );
    let note = note(&dir.path, &id);
    assert!(note.contains("- State: COMPLETE"), "{note}");
    assert!(!everything_written(&dir.path).contains(OPENAI_KEY));
    assert_no_container(&id);
}

#[test]
fn a_task_completes_through_the_messages_api_behind_a_gateway() {
    let dir = Scratch::new("api-anthropic");
    let id = task_id("anthropic");
    let server = FakeOpenAi::start(vec![
        json_answer(
            429,
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
        )
        .header("llm_provider-retry-after", "1"),
        message(&plan()),
        message(&run_worker()),
        message(&assess()),
    ]);
    let base = server.url.trim_end_matches("/v1");
    let yaml = api_task(&id, &dir, "anthropic-messages", base)
        .set("runner.meta.headers.X-Team", "env:TEAM_TOKEN");
    let out = runner(&yaml)
        .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        .env("TEAM_TOKEN", TEAM_TOKEN)
        .output();
    out.code(0);
    let result = result(&out);
    assert_eq!(result["state"], "COMPLETE", "{result}");
    assert_eq!(
        result["usage"]["meta"],
        json!({"calls": 3, "input_tokens": 7200, "cached_input_tokens": 6000,
               "cache_write_input_tokens": 900, "output_tokens": 150,
               "reasoning_tokens": 60, "unreported": 0})
    );
    let got = server.received();
    assert_eq!(got.len(), 4, "the 429 and three calls");
    assert!(
        got[1].at - got[0].at >= Duration::from_secs(1),
        "LiteLLM's llm_provider-retry-after: 1 honoured"
    );
    check_requests("anthropic-messages", &got);
    for request in &got {
        assert_eq!(request.path, "/v1/messages");
        assert_eq!(request.header("x-api-key"), Some(ANTHROPIC_KEY));
        assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(request.header("authorization"), None);
        assert_eq!(request.header("x-team"), Some(TEAM_TOKEN));
    }
    let body = got[2].json();
    eprintln!(
        "figure: anthropic-messages next_action request: {} bytes",
        got[2].body.len()
    );
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["tools"][0]["name"], "next_action");
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "next_action"})
    );
    let note = note(&dir.path, &id);
    assert!(
        note.contains(
            "- Meta: 3 call(s): 7200 tokens in (6000 cached, 900 written to the cache), 150 out (60 reasoning)"
        ),
        "{note}"
    );
    let written = everything_written(&dir.path);
    for secret in [ANTHROPIC_KEY, TEAM_TOKEN] {
        for (what, text) in [
            ("stdout", &out.stdout),
            ("stderr", &out.stderr),
            ("files", &written),
        ] {
            assert!(!text.contains(secret), "{secret} in {what}");
        }
    }
    assert_no_container(&id);
}

#[test]
fn a_refusal_fails_the_task_with_its_text() {
    let dir = Scratch::new("api-refusal");
    let id = task_id("refusal");
    let refused = json!({
        "id": "resp_fake", "object": "response", "created_at": 1_767_000_000,
        "model": "gpt-5.1-codex-max", "status": "completed",
        "error": null, "incomplete_details": null, "instructions": null, "metadata": {},
        "parallel_tool_calls": true, "temperature": null, "tool_choice": "auto",
        "tools": [], "top_p": null,
        "output": [{"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
                    "content": [{"type": "refusal", "refusal": "I cannot help with planning this."}]}],
        "usage": {"input_tokens": 900, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                  "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 909},
    });
    sdk_check("openai-responses", "response", &refused.to_string());
    let server = FakeOpenAi::start(vec![json_answer(200, refused)]);
    let out = runner(&api_task(&id, &dir, "openai-responses", &server.url))
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .output();
    assert_ne!(out.code, Some(0));
    assert_eq!(server.received().len(), 1, "a refusal is not asked again");
    let note = note(&dir.path, &id);
    assert!(note.contains("I cannot help with planning this."), "{note}");
    assert!(
        out.stderr.contains("I cannot help with planning this."),
        "{}",
        out.stderr
    );
    assert_no_container(&id);
}

#[test]
fn an_unknown_model_fails_at_once_naming_model_kind_and_fix() {
    let dir = Scratch::new("api-nomodel");
    let id = task_id("nomodel");
    let server = FakeOpenAi::start(vec![json_answer(
        404,
        json!({"error": {"message": "The model `gpt-9-imaginary` does not exist or you do not have access to it.",
                         "type": "invalid_request_error", "param": null, "code": "model_not_found"}}),
    )]);
    let yaml = api_task(&id, &dir, "openai-responses", &server.url)
        .set("runner.meta.model", "gpt-9-imaginary");
    let out = runner(&yaml).env("OPENAI_API_KEY", OPENAI_KEY).output();
    assert_ne!(out.code, Some(0));
    assert_eq!(server.received().len(), 1, "not retried");
    for said in [
        "the model gpt-9-imaginary is not known to the openai-responses API",
        "runner.meta.model",
    ] {
        assert!(out.stderr.contains(said), "{said}: {}", out.stderr);
        assert!(note(&dir.path, &id).contains(said), "{said} in the note");
    }
    assert_no_container(&id);
}

/// The same task through Chat Completions (the YAML protocol, and `structured:
/// true`): the request sizes beside the other kinds' (the report's figures).
#[test]
fn a_task_completes_through_chat_completions_in_yaml_and_structured() {
    use support::task::{assess as assess_yaml, plan as plan_yaml, run_worker as run_yaml};
    for structured in [false, true] {
        let dir = Scratch::new("api-chat");
        let id = task_id("chat");
        let (plan, next, done) = if structured {
            let chat = |v: Value| Answer::chat(&v.to_string());
            (chat(plan()), chat(run_worker()), chat(assess()))
        } else {
            (
                plan_yaml(&["AC-1"]),
                run_yaml("@run: echo ok > out.txt\n@say: wrote it"),
                assess_yaml(&["AC-1"], "out.txt says ok"),
            )
        };
        let server = FakeOpenAi::start(vec![plan, next, done]);
        let yaml = api_task(&id, &dir, "openai-chat", &server.url)
            .set("runner.meta.model", "gpt-4.1")
            .set("runner.meta.structured", structured);
        let out = runner(&yaml).env("OPENAI_API_KEY", OPENAI_KEY).output();
        out.code(0);
        assert_eq!(result(&out)["state"], "COMPLETE");
        let got = server.received();
        assert_eq!(got[2].path, "/v1/chat/completions");
        check_requests("openai-chat", &got);
        let format = &got[2].json()["response_format"];
        assert_eq!(format.is_null(), !structured, "{format}");
        eprintln!(
            "figure: openai-chat (structured: {structured}) next_action request: {} bytes",
            got[2].body.len()
        );
        assert_no_container(&id);
    }
}

/// With a reasoning effort the Messages request turns on extended thinking, whose
/// budget is the effort, and then lets the model choose the tool (the API refuses a
/// forced tool with thinking); a refusal there fails with its text too.
#[test]
fn extended_thinking_lets_the_model_choose_the_tool_and_a_refusal_ends_the_task() {
    let dir = Scratch::new("api-thinking");
    let id = task_id("thinking");
    let refused = json!({
        "id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "I will not plan this task."}],
        "stop_reason": "refusal", "stop_sequence": null,
        "usage": {"input_tokens": 100, "cache_read_input_tokens": 0,
                  "cache_creation_input_tokens": 0, "output_tokens": 8},
    });
    sdk_check("anthropic-messages", "response", &refused.to_string());
    let server = FakeOpenAi::start(vec![json_answer(200, refused)]);
    let yaml = api_task(
        &id,
        &dir,
        "anthropic-messages",
        server.url.trim_end_matches("/v1"),
    )
    .set("runner.meta.reasoning_effort", "low");
    let out = runner(&yaml)
        .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        .output();
    assert_ne!(out.code, Some(0));
    let got = server.received();
    assert_eq!(got.len(), 1, "a refusal is not asked again");
    check_requests("anthropic-messages", &got);
    let body = got[0].json();
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    assert_eq!(body["max_tokens"], 8192 + 2048);
    assert!(
        out.stderr.contains("I will not plan this task."),
        "{}",
        out.stderr
    );
    assert_no_container(&id);
}

/// `reply` as `kind`'s API answers it (`response` or `message`).
fn answer(kind: &str, reply: &Value) -> Answer {
    match kind {
        "openai-responses" => response(reply),
        _ => message(reply),
    }
}

/// How `kind` is configured for `server`: its `runner.meta` (Anthropic's base URL
/// has no `/v1`; Responses gets the seed's model with its effort suffix), its key's
/// variable and value.
fn endpoint(kind: &str, server: &FakeOpenAi) -> (String, &'static str, &'static str) {
    match kind {
        "openai-responses" => (
            format!(
                "{{kind: {kind}, base_url: \"{}\", model: gpt-5.1-codex-max-high",
                server.url
            ),
            "OPENAI_API_KEY",
            OPENAI_KEY,
        ),
        _ => (
            format!(
                "{{kind: {kind}, base_url: \"{}\", model: claude-sonnet-4-5",
                server.url.trim_end_matches("/v1")
            ),
            "ANTHROPIC_API_KEY",
            ANTHROPIC_KEY,
        ),
    }
}

/// The model sent (and effort) are what `endpoint` configured: the seed's model split.
fn assert_model(kind: &str, request: &Received) {
    let body = request.json();
    if kind == "openai-responses" {
        assert_eq!(body["model"], "gpt-5.1-codex-max");
        assert_eq!(body["reasoning"], json!({"effort": "high"}));
    } else {
        assert_eq!(body["model"], "claude-sonnet-4-5");
    }
}

/// The message type a request asked for: its `text.format` name (Responses) or its
/// forced tool (Messages).
fn asked_type(kind: &str, request: &Received) -> String {
    let body = request.json();
    let name = match kind {
        "openai-responses" => &body["text"]["format"]["name"],
        _ => &body["tool_choice"]["name"],
    };
    name.as_str().unwrap_or_default().to_string()
}

/// The Task Builder (`builder.kind: meta`) asks the workspace's Meta of `kind` for a
/// build_task_config with its schema; the typed reply becomes the task's config, and
/// the attempt it builds completes through the same API.
fn a_builder_reply_and_its_run_through(kind: &str) {
    use support::pipeline::{Pipeline, read};
    let p = Pipeline::new(&format!("api-builder-{kind}"), false);
    let id = support::pipeline::task_id(&format!("builder-{kind}"));
    let server = FakeOpenAi::start(vec![
        answer(
            kind,
            &json!({"type": "build_task_config",
                "task": {"id": "chosen-by-the-llm", "title": "Say ok",
                         "instructions": "Write ok into out.txt.",
                         "project": {"root_dir": "/elsewhere"},
                         "test": {"command": "grep -qx ok out.txt", "cwd": null, "timeout_sec": null},
                         "acceptance_criteria": null},
                "runner": {"meta": {"model": null, "temperature": null},
                           "worker": {"type": "docker_codex_cli", "model": null}}}),
        ),
        answer(kind, &plan()),
        answer(kind, &run_worker()),
        answer(kind, &assess()),
    ]);
    let (meta, var, key) = endpoint(kind, &server);
    p.init_with(
        "defaults.yaml",
        &format!(
            "builder: {{kind: meta}}\nrunner:\n  meta: {meta}, max_loops: 2}}\n  worker: {{docker_image: \"{}\", network: none}}\n",
            support::docker::TEST_IMAGE
        ),
    );
    p.new_task(&id, "Write ok into out.txt");
    let job = p.run_tasks(&[&id]).remove(0);
    let out = p
        .orchestrate_once(&[])
        .env(var, key)
        .env("AGENT_RUNNER_META_BACKOFF_MS", "1")
        .output();
    let attempts = p.attempts(&id);
    assert_eq!(attempts.len(), 1, "{}", out.stderr);
    assert_eq!(
        attempts[0]["status"], "succeeded",
        "{}: {}",
        attempts[0], out.stderr
    );
    let got = server.received();
    assert_eq!(got.len(), 4, "{got:?}");
    check_requests(kind, &got);
    for request in &got {
        assert_model(kind, request);
    }
    let asked: Vec<String> = got.iter().map(|r| asked_type(kind, r)).collect();
    assert_eq!(
        asked,
        [
            "build_task_config",
            "plan_task",
            "next_action",
            "completion_assessment"
        ]
    );
    assert!(
        got[0].body.contains("Write ok into out.txt"),
        "the prompt is sent"
    );
    let config: serde_norway::Value =
        serde_norway::from_str(&read(&p.ws().join(format!("logs/{job}/task-config.yaml"))))
            .unwrap();
    assert_eq!(config["task"]["id"].as_str(), Some(id.as_str()));
    assert_eq!(
        config["task"]["project"]["root_dir"].as_str(),
        Some(p.root.to_str().unwrap()),
        "the reply's root_dir is not taken"
    );
    assert_eq!(
        config["task"]["test"]["command"].as_str(),
        Some("grep -qx ok out.txt")
    );
    assert_eq!(read(&p.root.join("out.txt")), "ok\n");
    for text in [&out.stdout, &out.stderr] {
        assert!(!text.contains(key));
    }
    assert_no_container(&id);
}

#[test]
fn a_builder_reply_and_its_run_through_the_responses_api() {
    a_builder_reply_and_its_run_through("openai-responses");
}

#[test]
fn a_builder_reply_and_its_run_through_the_messages_api() {
    a_builder_reply_and_its_run_through("anthropic-messages");
}

/// `plan` asks the workspace's Meta of `kind` for a decompose with its schema; the
/// typed reply becomes the plan's tasks.
fn a_plan_through(kind: &str) {
    use support::pipeline::Pipeline;
    let p = Pipeline::new(&format!("api-plan-{kind}"), false);
    let server = FakeOpenAi::start(vec![answer(
        kind,
        &json!({"type": "decompose", "understanding": "A greeting file.",
            "phases": [{"name": "Build", "milestone": "M1", "tasks": [
                {"id": "temp-1", "title": "Write hello.txt", "description": "Create it.",
                 "acceptance_criteria": ["hello.txt says hello"], "dependencies": null,
                 "wbs_level": 3, "estimated_effort": "small", "suggested_impl": null},
                {"id": "temp-2", "title": "Check it", "description": "Read it back.",
                 "acceptance_criteria": ["it was read"], "dependencies": ["temp-1"],
                 "wbs_level": 3, "estimated_effort": "small",
                 "suggested_impl": {"language": null, "file_paths": ["hello.txt"], "constraints": null}}]}],
            "potential_conflicts": null}),
    )]);
    let (meta, var, key) = endpoint(kind, &server);
    p.init_with(
        "defaults.yaml",
        &format!("builder: {{kind: meta}}\nrunner:\n  meta: {meta}}}\n"),
    );
    let out = p
        .in_ws(&["plan"], &["Make a greeting file", "--json"])
        .env(var, key)
        .env("AGENT_RUNNER_META_BACKOFF_MS", "1")
        .output();
    out.code(0);
    let got = server.received();
    assert_eq!(got.len(), 1, "{got:?}");
    check_requests(kind, &got);
    assert_eq!(asked_type(kind, &got[0]), "decompose");
    assert_model(kind, &got[0]);
    assert!(got[0].body.contains("Make a greeting file"));
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let created: Vec<&Value> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["op"] == "create")
        .collect();
    assert_eq!(created.len(), 2, "{doc}");
    let show = p.in_ws(&["plan"], &["--show", "--json"]).output();
    show.code(0);
    for title in ["Write hello.txt", "Check it"] {
        assert!(show.stdout.contains(title), "{}", show.stdout);
    }
    assert!(!out.stdout.contains(key) && !out.stderr.contains(key));
}

#[test]
fn a_plan_through_the_responses_api() {
    a_plan_through("openai-responses");
}

#[test]
fn a_plan_through_the_messages_api() {
    a_plan_through("anthropic-messages");
}
