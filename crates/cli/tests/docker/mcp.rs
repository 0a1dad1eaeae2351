//! What the worker can use (SPEC §28), where the daemon and the test image are
//! enough: a stdio MCP server whose command is not in the image, and a runtime the
//! daemon does not know, each stop the task before any paid call. The MCP servers
//! the real agents call are `image/mcp.rs`'s.

use crate::support;

use support::Scratch;
use support::fake_openai::FakeOpenAi;
use support::task::*;

#[test]
fn a_missing_stdio_mcp_command_fails_the_task_before_any_paid_call() {
    let dir = Scratch::new("mcp-missing");
    let id = task_id("mcp-missing");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"])]);
    let yaml = v1_task(&id, &dir.path, &server).set(
        "runner.worker.mcp_servers.notes",
        serde_json::json!({"command": "no-such-mcp-server", "args": ["--stdio"]}),
    );
    let out = runner(&yaml).output();
    out.code(1).stdout_has(
        "runner.worker.mcp_servers.notes.command: `no-such-mcp-server` not found in image",
    );
    assert_eq!(server.received().len(), 0, "no Meta call");
    assert_no_container(&id);
}

#[test]
fn an_unknown_runtime_fails_the_task_before_any_paid_call() {
    let dir = Scratch::new("runtime-unknown");
    let id = task_id("runtime-unknown");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"])]);
    let yaml = v1_task(&id, &dir.path, &server).set("runner.sandbox.runtime", "no-such-runtime");
    let out = runner(&yaml).output();
    out.code(1).stdout_has(
        "runner.sandbox.runtime: the Docker daemon does not know the runtime `no-such-runtime` (it knows: ",
    );
    assert_eq!(server.received().len(), 0, "no Meta call");
    assert_no_container(&id);
}
