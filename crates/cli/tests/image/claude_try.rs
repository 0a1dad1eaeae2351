//! `--kinds` (SPEC §23) in a workspace whose worker is codex with its own model
//! and endpoint: a claude try never gets codex's (a codex model, a base URL ending
//! in `/v1` that made claude ask `/v1/v1/messages`). Without claude's own settings
//! in the defaults the run is refused before anything is queued, naming the fix;
//! with them, the real Claude Code in the real worker image reaches a strict fake
//! Anthropic API (support/fake_anthropic.rs: only `/v1/messages`, one model).

use crate::support;

use support::fake_anthropic::{FakeAnthropic, Reply};
use support::pipeline::{BUILDER_REPLY, Pipeline, git, task_id};
use support::prerequisite::{SANDBOX_IMAGE, needs};

const KEY: &str = "sk-ant-fake-try-0123456789abcdef";
const MODEL: &str = "claude-fake-model";

/// The workspace defaults: codex's model and endpoint for the worker (the same
/// gateway, under `/v1`, as codex's base URLs are), `kinds` after them.
fn defaults(meta: &str, gateway: &str, kinds: &str) -> String {
    format!(
        "require_test: false\nbuilder: {{kind: scripted, script: builder.yaml}}\nrunner:\n  meta: {{kind: scripted, script: {meta}}}\n  worker: {{docker_image: \"{SANDBOX_IMAGE}\", network: host, model: gpt-5-codex, base_url: \"{gateway}/v1\", max_run_time_sec: 120}}\n{kinds}"
    )
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_claude_try_in_a_codex_workspace_uses_claude_s_own_model_and_endpoint() {
    needs!(SandboxImage);
    let model = FakeAnthropic::strict(
        vec![
            Reply::bash("echo ok > out.txt"),
            Reply::Text("Wrote out.txt.".into()),
        ],
        MODEL,
    );
    let p = Pipeline::new("claude-try", true);
    p.scratch.file("builder.yaml", BUILDER_REPLY);
    let meta = support::task_yaml::one_run(
        &p.scratch,
        "claude-code-cli",
        "Write ok into out.txt.",
        &["AC-1"],
    );
    p.init_with("defaults.yaml", &defaults(&meta, &model.url, ""));
    let id = task_id("claude-try");
    p.new_task(&id, "Write ok into out.txt");

    let refused = p
        .in_ws(
            &["task", "run"],
            &[&id, "--tries", "1", "--kinds", "claude-code-cli"],
        )
        .output();
    refused.code(1);
    assert!(
        refused.stderr.contains(&format!(
            "the claude-code-cli tries would get runner.worker.model (gpt-5-codex) and runner.worker.base_url ({}/v1)",
            model.url
        )) && refused.stderr.contains("kinds: {claude-code-cli: {model: …, base_url: …}}"),
        "{}",
        refused.stderr
    );
    assert!(p.ipc("queue").is_empty(), "nothing queued");

    let file = p.scratch.file(
        "kinds.yaml",
        defaults(
            &meta,
            &model.url,
            &format!(
                "kinds:\n  claude-code-cli: {{model: {MODEL}, base_url: \"{}\"}}\n",
                model.url
            ),
        ),
    );
    p.in_ws(
        &["workspace", "set"],
        &["--defaults", file.to_str().unwrap()],
    )
    .output()
    .code(0);
    p.in_ws(
        &["task", "run"],
        &[&id, "--tries", "1", "--kinds", "claude-code-cli"],
    )
    .output()
    .code(0);
    let out = p
        .orchestrate_once(&[])
        .env("HOME", p.scratch.join("home"))
        .env("ANTHROPIC_API_KEY", KEY)
        .output();
    out.code(0);
    let requests = model.received();
    assert!(
        !requests.is_empty(),
        "claude asked its model: {}",
        out.stderr
    );
    for request in &requests {
        assert_eq!(
            request.path, "/v1/messages?beta=true",
            "claude's own endpoint"
        );
        assert_eq!(request.json()["model"], MODEL, "claude's own model");
    }
    let attempts = p.attempts(&id);
    let whole = attempts.last().unwrap();
    assert_eq!(whole["status"], "succeeded", "{whole}\n{}", out.stderr);
    assert_eq!(
        whole["tries"]["rows"][0]["kind"], "claude-code-cli",
        "{whole}"
    );
    let branch = format!("agent-runner/{id}");
    assert_eq!(
        git(&p.root, &["show", &format!("{branch}:out.txt")]),
        "ok\n"
    );
    support::task::assert_no_container(&id);
}
