//! The real Claude Code CLI in the real worker image agent-runner-codex:latest
//! (sandbox/build.sh installs it beside codex) against the fake Anthropic Messages API
//! on 127.0.0.1 (support/fake_anthropic.rs) through `--network host`, run the way
//! testdata/claude/README.md records: `claude -p --output-format stream-json
//! --verbose --dangerously-skip-permissions`, prompt on stdin, the key by name. They
//! check the image and the fake that the claude-code-cli worker builds on, not the
//! product. The tests need that image (support/prerequisite.rs).

use crate::support;

use std::path::Path;

use serde_json::Value;
use support::docker::{containers_labelled, docker};
use support::fake_anthropic::{FakeAnthropic, Received, Reply};
use support::prerequisite::{Needs, SANDBOX_IMAGE, needs, require};
use support::{Outcome, Run, Scratch};

/// The version sandbox/build.sh pins (CLAUDE_VERSION).
const PINNED: &str = "2.1.330";
const KEY: &str = "sk-ant-fake-real-claude-0123456789";
/// Label of the containers these tests start, to find leftovers.
const LABEL: &str = "agent-runner.test";

/// The image, with the pinned claude in it: an image built from an older recipe
/// (without claude) fails here, saying so, instead of in the middle of a test.
fn image() -> &'static str {
    require(Needs::SandboxImage);
    let (ok, stdout, stderr) = docker(&["run", "--rm", SANDBOX_IMAGE, "claude", "--version"]);
    assert!(
        ok && stdout.starts_with(&format!("{PINNED} ")),
        "{SANDBOX_IMAGE} has no claude {PINNED} (`make sandbox-image` rebuilds it): {stdout}{stderr}"
    );
    SANDBOX_IMAGE
}

/// One claude run: `env` on top of the key, the fake's URL and non-essential traffic
/// off; `repo` mounted at /workspace/project. The stream's events, parsed.
fn claude(
    fake: &FakeAnthropic,
    repo: Option<&Path>,
    env: &[(&str, &str)],
    args: &[&str],
    prompt: &str,
) -> (Outcome, Vec<Value>) {
    let image = image();
    let run_id = format!("real-claude-{}", support::short_id());
    let label = format!("{LABEL}={run_id}");
    let mut docker_args = vec!["run", "--rm", "-i", "--network", "host", "--label", &label];
    let mount = repo.map(|r| format!("{}:/workspace/project", r.display()));
    if let Some(mount) = &mount {
        docker_args.extend(["-v", mount]);
    }
    let mut run = Run::program("docker", &docker_args)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ANTHROPIC_BASE_URL", &fake.url)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    // By name only: the key's value never appears in argv.
    for name in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    ] {
        run = run.args(&["-e", name]);
    }
    for (name, value) in env {
        run = run.args(&["-e", name]).env(name, value);
    }
    let out = run
        .args(&[image, "claude", "-p", "--output-format", "stream-json"])
        .args(&["--verbose", "--dangerously-skip-permissions"])
        .args(args)
        .stdin(prompt)
        .output();
    assert_eq!(
        containers_labelled(LABEL, &run_id),
        Vec::<String>::new(),
        "the container is gone"
    );
    let events = out
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    (out, events)
}

/// The `result` event, which ends the stream.
fn result(events: &[Value]) -> &Value {
    let last = events.last().expect("claude printed events");
    assert_eq!(last["type"], "result", "the stream ends with its result");
    last
}

/// The `tool_result` blocks claude sent back to the model, from `user` events.
fn tool_results(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "user")
        .flat_map(|e| e["message"]["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == "tool_result")
        .collect()
}

fn assert_authenticated(requests: &[Received]) {
    for request in requests {
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/v1/messages?beta=true")
        );
        assert_eq!(request.header("x-api-key"), Some(KEY));
        assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    }
}

#[test]
#[ignore = "needs sandbox-image"]
fn claude_runs_bash_tool_calls_and_ends_with_a_successful_result() {
    needs!(SandboxImage);
    let dir = Scratch::new("real-claude-bash");
    let repo = dir.join("repo");
    support::git_repo(&repo, "notes.txt", "one\n");
    let fake = FakeAnthropic::start(vec![
        Reply::bash("echo hello > hello.txt && ls"),
        Reply::bash("ls /nonexistent"),
        Reply::Text("Created hello.txt.".into()),
    ]);
    let (out, events) = claude(
        &fake,
        Some(&repo),
        &[("IS_SANDBOX", "1")],
        &["--model", "claude-fake-model"],
        "Create hello.txt saying hello.",
    );
    out.code(0);
    let hello = std::fs::read_to_string(repo.join("hello.txt")).unwrap_or_else(|e| {
        panic!(
            "no hello.txt ({e}): the command did not run\n{}",
            out.stdout
        )
    });
    assert_eq!(hello, "hello\n");

    let init = &events[0];
    assert_eq!(
        (&init["type"], &init["subtype"]),
        (&"system".into(), &"init".into())
    );
    assert_eq!(init["model"], "claude-fake-model");
    assert_eq!(init["permissionMode"], "bypassPermissions");
    assert_eq!(init["apiKeySource"], "ANTHROPIC_API_KEY");
    assert_eq!(init["claude_code_version"], PINNED);
    let session = init["session_id"].as_str().unwrap();
    assert!(
        events.iter().all(|e| e["session_id"] == session),
        "{events:?}"
    );

    // A command's exit code is only in the tool result: is_error and "Exit code N".
    let results = tool_results(&events);
    assert_eq!(results.len(), 2, "{events:?}");
    assert_eq!(results[0]["is_error"], false);
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("hello.txt")
    );
    assert_eq!(results[1]["is_error"], true);
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Exit code 2\n"),
        "{}",
        results[1]
    );

    let result = result(&events);
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["result"], "Created hello.txt.");
    assert_eq!(result["num_turns"], 3);
    // The fake's usage summed over its three replies: 100 in (40 cached), 10 out each.
    assert_eq!(result["usage"]["input_tokens"], 300);
    assert_eq!(result["usage"]["cache_read_input_tokens"], 120);
    assert_eq!(result["usage"]["output_tokens"], 30);
    assert!(result["total_cost_usd"].as_f64().unwrap() > 0.0, "{result}");

    let requests = fake.received();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert_authenticated(&requests);
    for request in &requests {
        assert_eq!(request.json()["model"], "claude-fake-model");
        assert_eq!(request.json()["stream"], true);
    }
    assert!(requests[0].body.contains("Create hello.txt saying hello."));
    let sent = requests[1].tool_results();
    assert_eq!(sent[0]["tool_use_id"], "toolu_fake_1");
    assert_eq!(sent[0]["is_error"], false);
    assert_eq!(requests[2].tool_results()[0]["is_error"], true);
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_server_error_is_retried_then_ends_with_an_error_result() {
    needs!(SandboxImage);
    let fake = FakeAnthropic::start(vec![Reply::Status(500)]);
    // One retry instead of ten (about three minutes): CLAUDE_CODE_MAX_RETRIES.
    let (out, events) = claude(
        &fake,
        None,
        &[("IS_SANDBOX", "1"), ("CLAUDE_CODE_MAX_RETRIES", "1")],
        &[],
        "Say hello.",
    );
    out.code(1);
    let retries: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "system" && e["subtype"] == "api_retry")
        .collect();
    assert_eq!(retries.len(), 1, "{events:?}");
    assert_eq!(retries[0]["error_status"], 500);
    let result = result(&events);
    // subtype stays "success": is_error is what tells.
    assert_eq!(result["is_error"], true, "{result}");
    assert_eq!(result["api_error_status"], 500);
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .starts_with("API Error: 500 fake server: status 500"),
        "{result}"
    );
    let requests = fake.received();
    assert_eq!(requests.len(), 2, "one request and one retry: {requests:?}");
    assert_authenticated(&requests);
}

#[test]
#[ignore = "needs sandbox-image"]
fn as_root_claude_refuses_to_skip_permissions_without_is_sandbox() {
    needs!(SandboxImage);
    let fake = FakeAnthropic::start(vec![Reply::Text("Hello.".into())]);
    let (out, events) = claude(&fake, None, &[], &[], "Say hello.");
    out.code(1).stderr_has(
        "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons",
    );
    assert!(events.is_empty(), "{events:?}");
    assert!(fake.received().is_empty());
}
