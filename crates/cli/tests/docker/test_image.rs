//! The test set-up itself: the worker image and its fake codex behave like the
//! recorded real codex (../shared/codex/samples), inside a real container.

use crate::support;

use support::docker::TEST_IMAGE;
use support::{Outcome, Run};

/// Runs the fake codex the way agent-runner does (prompt on stdin, then closed);
/// returns (exit code, stdout lines, stderr).
fn fake_codex(prompt: &str, create_codex_home: bool) -> (i32, Vec<serde_json::Value>, String) {
    let mkdir = if create_codex_home {
        "mkdir -p \"$HOME/.codex\" && "
    } else {
        ""
    };
    let script = format!(
        "{mkdir}exec codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -C /tmp -"
    );
    let out = image_run(&script, prompt);
    let lines = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect();
    (out.code.unwrap(), lines, out.stderr)
}

/// `sh -c script` in a throw-away container of the test image, `input` on stdin.
fn image_run(script: &str, input: &str) -> Outcome {
    Run::program(
        "docker",
        &[
            "run",
            "--rm",
            "-i",
            "--network",
            "none",
            "--label",
            "agent-runner.task=test-image",
            TEST_IMAGE,
            "sh",
            "-c",
            script,
        ],
    )
    .stdin(input)
    .output()
}

fn types(lines: &[serde_json::Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| match l["item"]["type"].as_str() {
            Some(item) => format!("{}:{item}", l["type"].as_str().unwrap()),
            None => l["type"].as_str().unwrap().to_string(),
        })
        .collect()
}

#[test]
fn success_has_command_message_and_turn_completed() {
    let (code, lines, _) = fake_codex(
        "Create it.\n@run: echo hello > hello.txt && ls\n@say: Created hello.txt\n",
        true,
    );
    assert_eq!(code, 0);
    assert_eq!(
        types(&lines),
        [
            "thread.started",
            "turn.started",
            "item.started:command_execution",
            "item.completed:command_execution",
            "item.completed:agent_message",
            "turn.completed"
        ]
    );
    assert_eq!(lines[3]["item"]["aggregated_output"], "hello.txt\n");
    assert_eq!(lines[3]["item"]["exit_code"], 0);
    assert_eq!(lines[4]["item"]["text"], "Created hello.txt");
    assert_eq!(lines[5]["usage"]["output_tokens"], 60);
}

#[test]
fn turn_failed_exits_1() {
    let (code, lines, _) = fake_codex(
        "@error: Reconnecting... 1/5 (boom)\n@fail: Quota exceeded.\n",
        true,
    );
    assert_eq!(code, 1);
    assert_eq!(
        types(&lines),
        [
            "thread.started",
            "turn.started",
            "error",
            "error",
            "turn.failed"
        ]
    );
    assert_eq!(lines[4]["error"]["message"], "Quota exceeded.");
}

#[test]
fn failed_command_still_exits_0() {
    let (code, lines, _) = fake_codex("@run: echo oops >&2; exit 3\n@say: it failed\n", true);
    assert_eq!(code, 0);
    assert_eq!(lines[3]["item"]["exit_code"], 3);
    assert_eq!(lines[3]["item"]["status"], "failed");
    assert_eq!(lines.last().unwrap()["type"], "turn.completed");
}

#[test]
fn start_up_errors_go_to_stderr_only() {
    let (code, lines, stderr) = fake_codex("@startup-error: Error loading config.toml\n", true);
    assert_eq!((code, lines.len()), (1, 0));
    assert_eq!(stderr, "Error loading config.toml\n");
    let (code, lines, stderr) = fake_codex("@say: hi\n", false);
    assert_eq!((code, lines.len()), (1, 0));
    assert!(stderr.contains("Error finding codex home"), "{stderr}");
    let (code, _, stderr) = fake_codex("", true);
    assert_eq!(code, 1);
    assert_eq!(stderr, "No prompt provided via stdin.\n");
}

#[test]
fn huge_output_and_stalls() {
    let started = std::time::Instant::now();
    let (code, lines, _) = fake_codex("@sleep: 1\n@say: after the stall\n", true);
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
    assert_eq!(code, 0);
    assert_eq!(lines[2]["item"]["text"], "after the stall");

    let out = image_run(
        "mkdir -p /root/.codex && codex exec --json -C /tmp -",
        "@spew: 5000000\n@say: done\n",
    );
    assert!(out.stdout.len() > 5_000_000, "{}", out.stdout.len());
}

/// The message of the panic `f` ends in (it must panic).
fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let payload = std::panic::catch_unwind(f).expect_err("it panics");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The ~40 "no container leaked" checks ask `docker ps`: a docker that fails must
/// fail them, not pass for an empty list.
#[test]
fn a_failing_docker_fails_the_container_checks() {
    let message = panic_message(|| {
        support::docker::containers_labelled_on(
            &["--host", "unix:///nonexistent/docker.sock"],
            "agent-runner.task",
            "any",
        );
    });
    assert!(
        message.contains("docker --host unix:///nonexistent/docker.sock ps"),
        "{message}"
    );
}

/// A program that hangs fails its test at the deadline, with what it printed,
/// instead of hanging the suite.
#[test]
fn a_hanging_program_fails_at_its_deadline_with_its_output() {
    let started = std::time::Instant::now();
    let message = panic_message(|| {
        Run::program(
            "sh",
            &["-c", "echo started; echo trouble >&2; exec sleep 60"],
        )
        .deadline(std::time::Duration::from_millis(500))
        .output();
    });
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert!(
        message.contains("still running after 500ms, killed")
            && message.contains("stdout:\nstarted\n")
            && message.contains("stderr:\ntrouble\n"),
        "{message}"
    );
}
