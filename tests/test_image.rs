//! The test set-up itself: the worker image and its fake codex behave like the
//! recorded real codex (../shared/codex/samples), inside a real container.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};

use support::docker::TEST_IMAGE;

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
    let mut child = Command::new("docker")
        .args([
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
            &script,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(prompt.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect();
    (
        out.status.code().unwrap(),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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

    let mut child = Command::new("docker")
        .args([
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
            "mkdir -p /root/.codex && codex exec --json -C /tmp -",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"@spew: 5000000\n@say: done\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.stdout.len() > 5_000_000, "{}", out.stdout.len());
}
