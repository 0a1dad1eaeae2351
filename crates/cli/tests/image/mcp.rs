//! MCP servers given to the worker (SPEC §28): the real codex and the real Claude Code
//! in the MCP test image (the real worker image with python3 and the official Python
//! `mcp` SDK, testdata/setup-mcp.sh) call the tool of testdata/mcp-server/server.py
//! when the fake model API asks for it. The server logs each call into the
//! repository (`mcp-calls.log`), with whether its secret variable was set and
//! whether that secret was on any command line in the container at the time.

use crate::support;

use std::path::Path;

use serde_json::{Value, json};
use support::fake_anthropic::{self, FakeAnthropic};
use support::fake_responses::{FakeResponses, Reply};
use support::prerequisite::{MCP_IMAGE, needs};
use support::task::{assert_no_container, everything_written, note};
use support::task_yaml::TaskYaml;
use support::{Outcome, Run, Scratch};

/// What the server's tool answers (server.py's ANSWER), with the topic after it.
const ANSWER: &str = "MCP-ANSWER-7f3a";
/// The secret the server gets in its environment, from the host's variable.
const SECRET: &str = "mcp-secret-5a1d0c9e77b24f3e";
const SECRET_VAR: &str = "HOST_MCP_SECRET";
const MODEL_KEY: &str = "sk-fake-responses-0123456789";
const CLAUDE_KEY: &str = "sk-ant-fake-worker-0123456789abcdef";
/// Where the server logs its calls: in the repository, so the host can read it.
const CALLS: &str = "mcp-calls.log";

fn task_id(name: &str) -> String {
    format!("mcp-{name}-{}", support::short_id())
}

/// The stdio server `notes` as a task's `runner.worker.mcp_servers` entry.
fn stdio_server() -> Value {
    json!({
        "command": "python3",
        "args": ["/opt/mcp-test/server.py"],
        "env": {
            "MCP_TEST_SECRET": format!("env:{SECRET_VAR}"),
            "MCP_TEST_LOG": format!("/workspace/project/{CALLS}"),
        },
    })
}

fn worker_log(repo: &Path, id: &str) -> String {
    std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/run-1.log")))
        .unwrap_or_default()
}

/// The server's log lines.
fn calls(repo: &Path) -> Vec<Value> {
    std::fs::read_to_string(repo.join(CALLS))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn run(dir: &Scratch, yaml: &TaskYaml, env: &[(&str, &str)]) -> Outcome {
    let mut run = Run::new(&["run"])
        .env("HOME", dir.join("home"))
        .env(SECRET_VAR, SECRET)
        .stdin(yaml.to_string());
    for (name, value) in env {
        run = run.env(name, value);
    }
    run.output()
}

/// A codex task whose model is `model`, with `servers`.
fn codex_task(
    dir: &Scratch,
    id: &str,
    repo: &Path,
    model: &FakeResponses,
    servers: Value,
) -> TaskYaml {
    let script =
        support::task_yaml::one_run(dir, "codex-cli", "Look up the word for rust.", &["AC-1"]);
    TaskYaml::new(id, repo, "Look up the word for rust.")
        .scripted(&script, 1)
        .image(MCP_IMAGE)
        .set("runner.worker.model", "some-model")
        .set("runner.worker.max_run_time_sec", 120)
        .set(
            "runner.worker.extra_args",
            [
                "-c",
                &model.provider("fake", "FAKE_OPENAI_KEY", 1),
                "-c",
                "model_provider=fake",
            ],
        )
        .set("runner.worker.env.FAKE_OPENAI_KEY", MODEL_KEY)
        .set("runner.worker.mcp_servers", servers)
}

/// What every MCP run must show: the server called once with the topic and its
/// secret, which was on no command line; the call in the note and the events; the
/// secret nowhere agent-runner wrote.
fn assert_called(repo: &Path, id: &str, server: &str) {
    let calls = calls(repo);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["topic"], "rust", "{calls:?}");
    assert_eq!(
        calls[0]["secret_set"], true,
        "the server got its secret: {calls:?}"
    );
    assert_eq!(
        calls[0]["secret_in_argv"], false,
        "no argv holds it: {calls:?}"
    );
    let note = note(repo, id);
    assert!(
        note.contains(&format!(
            "- MCP tool calls:\n  - `{server}/lookup` → completed"
        )),
        "{note}"
    );
    let events =
        std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/events.jsonl")))
            .unwrap();
    assert!(
        events.contains("\"mcp_tool_call\"") && events.contains(&format!("{server}/lookup")),
        "{events}"
    );
    assert!(
        note.contains(&format!("MCP_TEST_SECRET=env:{SECRET_VAR}")),
        "the note names the server's secret by its variable: {note}"
    );
    let written = everything_written(repo);
    assert!(
        !written.contains(SECRET),
        "the secret leaked into agent-runner's files"
    );
    assert_no_container(id);
}

#[test]
#[ignore = "needs mcp-image"]
fn codex_calls_a_stdio_mcp_server_and_the_model_gets_its_answer() {
    needs!(McpImage);
    let dir = Scratch::new("mcp-codex");
    let repo = dir.join("repo");
    support::git_repo(&repo, "notes.txt", "one\n");
    let id = task_id("codex");
    // codex starts its MCP servers beside the first request and adds their tools
    // to the requests after (it does not wait for them): the model's first answer
    // is a command that gives the server the time to come up.
    let model = FakeResponses::start(vec![
        Reply::Command("sleep 3".into()),
        Reply::Tool {
            tool: "lookup".into(),
            arguments: json!({"topic": "rust"}),
        },
        Reply::Message("The word is known.".into()),
    ]);
    let yaml = codex_task(&dir, &id, &repo, &model, json!({"notes": stdio_server()}))
        .set("runner.worker.network", "host");
    let out = run(&dir, &yaml, &[]);
    let requests = model.received();
    out.code(0).stdout_has("COMPLETE");
    assert_eq!(requests.len(), 3, "{}", worker_log(&repo, &id));
    assert!(
        requests[1].body.contains("lookup"),
        "codex offers the server's tool: {}",
        worker_log(&repo, &id)
    );
    let outputs = requests[2].inputs("function_call_output");
    assert!(
        outputs.iter().any(|o| o["output"]
            .to_string()
            .contains(&format!("{ANSWER} for rust"))),
        "the tool's answer reaches the model: {}",
        requests[2].body
    );
    assert_called(&repo, &id, "notes");
}

#[test]
#[ignore = "needs mcp-image"]
fn claude_calls_a_stdio_mcp_server_and_the_model_gets_its_answer() {
    needs!(McpImage);
    let dir = Scratch::new("mcp-claude");
    let repo = dir.join("repo");
    support::git_repo(&repo, "notes.txt", "one\n");
    let id = task_id("claude");
    let model = FakeAnthropic::start(vec![
        fake_anthropic::Reply::tool("mcp__notes__lookup", json!({"topic": "rust"})),
        fake_anthropic::Reply::Text("The word is known.".into()),
    ]);
    let script = support::task_yaml::one_run(
        &dir,
        "claude-code-cli",
        "Look up the word for rust.",
        &["AC-1"],
    );
    let yaml = TaskYaml::new(&id, &repo, "Look up the word for rust.")
        .scripted(&script, 1)
        .set("runner.worker.kind", "claude-code-cli")
        .image(MCP_IMAGE)
        .set("runner.worker.model", "claude-fake-model")
        .set("runner.worker.base_url", &model.url)
        .set("runner.worker.max_run_time_sec", 120)
        .set("runner.worker.network", "host")
        .set(
            "runner.worker.mcp_servers",
            json!({"notes": stdio_server()}),
        );
    let out = run(&dir, &yaml, &[("ANTHROPIC_API_KEY", CLAUDE_KEY)]);
    out.code(0).stdout_has("COMPLETE");
    let requests = model.received();
    // Claude Code 2.1.330 defers MCP tools: named in the first request (loaded by
    // its ToolSearch), callable by that name.
    assert!(
        requests[0].body.contains("mcp__notes__lookup"),
        "claude offers the server's tool: {}",
        worker_log(&repo, &id)
    );
    let answered = requests
        .iter()
        .any(|r| r.body.contains("tool_result") && r.body.contains(&format!("{ANSWER} for rust")));
    assert!(
        answered,
        "the tool's answer reaches the model: {requests:?}"
    );
    assert_called(&repo, &id, "notes");
}

/// The remote server: server.py over streamable HTTP on 127.0.0.2 (standing for a
/// host on the internet), in a container of the MCP image on the host's network.
struct RemoteServer {
    name: String,
    port: u16,
}

impl RemoteServer {
    fn start(log_dir: &Path) -> RemoteServer {
        // A port free a moment ago; the server binds it at once.
        let port = std::net::TcpListener::bind("127.0.0.2:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let name = format!("agent-runner-mcp-remote-{}", support::short_id());
        let (ok, _, err) = support::docker::docker(&[
            "run",
            "-d",
            "--rm",
            "--name",
            &name,
            "--network",
            "host",
            "--label",
            "agent-runner.task=mcp-remote-server",
            "--mount",
            &format!("type=bind,source={},target=/log", log_dir.display()),
            "-e",
            "MCP_TEST_LOG=/log/calls.log",
            "--entrypoint",
            "python3",
            MCP_IMAGE,
            "/opt/mcp-test/server.py",
            "--http",
            &format!("127.0.0.2:{port}"),
        ]);
        assert!(ok, "the remote MCP server starts: {err}");
        let server = RemoteServer { name, port };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.2", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the remote MCP server listens"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        server
    }
}

impl Drop for RemoteServer {
    fn drop(&mut self) {
        support::docker::docker(&["rm", "-f", &self.name]);
    }
}

#[test]
#[ignore = "needs mcp-image"]
fn a_remote_mcp_server_is_reached_through_the_allow_list_only() {
    needs!(McpImage);
    let dir = Scratch::new("mcp-remote");
    let repo = dir.join("repo");
    support::git_repo(&repo, "notes.txt", "one\n");
    let logs = dir.join("server-log");
    std::fs::create_dir_all(&logs).unwrap();
    let remote = RemoteServer::start(&logs);
    let id = task_id("remote");
    let model = FakeResponses::start_on(
        "127.0.0.2",
        vec![
            Reply::Tool {
                tool: "lookup".into(),
                arguments: json!({"topic": "rust"}),
            },
            Reply::Message("The word is known.".into()),
        ],
    );
    let url = format!("http://127.0.0.2:{}/mcp", remote.port);
    let servers =
        json!({"docs": {"url": url, "headers": {"X-Token": format!("env:{SECRET_VAR}")}}});
    // The default network: allowlist. The model's host is on the list by its base
    // URL, the MCP server's by its URL.
    let yaml = codex_task(&dir, &id, &repo, &model, servers);
    let out = run(&dir, &yaml, &[]);
    out.code(0).stdout_has("COMPLETE");
    let requests = model.received();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(
        requests[1].body.contains(&format!("{ANSWER} for rust")),
        "the remote tool's answer reaches the model: {}",
        requests[1].body
    );
    let logged = std::fs::read_to_string(logs.join("calls.log")).unwrap_or_default();
    assert!(logged.contains("\"topic\": \"rust\""), "{logged}");
    let egress =
        std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/egress.jsonl")))
            .unwrap();
    let through_proxy = egress.lines().any(|l| {
        l.contains("\"127.0.0.2\"")
            && l.contains(&format!("\"port\":{}", remote.port))
            && l.contains("\"allowed\":true")
    });
    assert!(
        through_proxy,
        "the MCP server was reached through the proxy: {egress}"
    );
    let note = note(&repo, &id);
    assert!(
        note.contains(&format!(
            "The host of MCP server docs is on it: `127.0.0.2:{}`.",
            remote.port
        )),
        "{note}"
    );
    assert!(
        note.contains("- MCP tool calls:\n  - `docs/lookup` → completed"),
        "{note}"
    );
    assert!(!everything_written(&repo).contains(SECRET));
    assert_no_container(&id);
}
