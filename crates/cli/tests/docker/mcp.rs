//! What the worker can use (SPEC §28), where the daemon and the test image are
//! enough: a stdio MCP server whose command is not in the image, a runtime the
//! daemon does not know, and gVisor where PID 1 speaks over its stdio, each stop the
//! task before any paid call. The MCP servers
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

#[test]
fn doctor_says_whether_the_runtime_is_known_and_the_mcp_command_there() {
    let dir = Scratch::new("mcp-doctor");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let server = FakeOpenAi::start(vec![plan(&["AC-1"])]);
    let doctor = |runtime: &str, command: &str| {
        let yaml = v1_task("doctor", &repo, &server)
            .remove("task.id")
            .set("runner.worker.network", "none")
            .set("runner.sandbox.runtime", runtime)
            .set("runner.worker.mcp_servers.notes.command", command);
        support::Run::new(&["doctor"])
            .env("HOME", &dir.path)
            .env("OPENAI_API_KEY", "sk-doctor")
            .stdin(yaml.to_string())
            .output()
    };
    let good = doctor("runc", "sh");
    for line in [
        "container runtime: runtime runc: registered with the daemon",
        "MCP server notes: `sh` is in image",
    ] {
        assert!(
            good.stdout.contains(line),
            "{line}:\n{}\n{}",
            good.stdout,
            good.stderr
        );
    }
    // "<status> <what>: <detail>" of the check `what`.
    let line = |out: &support::Outcome, what: &str| {
        out.stdout
            .lines()
            .find(|l| {
                l.split_once(' ')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with(what))
            })
            .unwrap_or_default()
            .to_string()
    };
    let bad = doctor("no-such-runtime", "no-such-mcp-server");
    let runtime = line(&bad, "container runtime:");
    assert!(
        runtime.starts_with("FAIL")
            && runtime.contains("runner.sandbox.runtime: the Docker daemon does not know the runtime `no-such-runtime`"),
        "{}",
        bad.stdout
    );
    assert!(
        line(&bad, "MCP server notes").starts_with("skip"),
        "the image checks need the runtime: {}",
        bad.stdout
    );
    let missing = doctor("runc", "no-such-mcp-server");
    let mcp = line(&missing, "MCP server notes:");
    assert!(
        mcp.starts_with("FAIL")
            && mcp.contains(
                "runner.worker.mcp_servers.notes.command: `no-such-mcp-server` not found in image"
            ),
        "{}",
        missing.stdout
    );
}

/// Under gVisor the worker can reopen PID 1's pipes: a sandbox whose PID 1 talks to
/// agent-runner over its stdio (here the copy transport's) is refused under it,
/// before any paid call; a runtime that is not gVisor is not.
#[test]
fn gvisor_where_pid_1_speaks_over_its_stdio_is_refused_before_any_paid_call() {
    let dir = Scratch::new("runtime-stdio");
    support::git_repo(&dir.path, "README", "one\n");
    let id = task_id("runtime-stdio");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"])]);
    let yaml = v1_task(&id, &dir.path, &server)
        .set("runner.sandbox.transport", "copy")
        .set("runner.sandbox.runtime", "runsc");
    let out = runner(&yaml).output();
    out.code(1).stdout_has(
        "runner.sandbox.runtime: `runsc` (gVisor) runs only on this machine's Docker daemon with the bind transport",
    );
    assert_eq!(server.received().len(), 0, "no Meta call");
    assert_no_container(&id);
    let volumes = support::docker::docker_ok(&[
        "volume",
        "ls",
        "-q",
        "--filter",
        &format!("label=agent-runner.task={id}"),
    ]);
    assert_eq!(volumes.trim(), "", "no volume left");
}

/// The refusal above knows gVisor under any name by what the daemon runs for it,
/// and the daemon's default runtime when the task names none: the daemon's own
/// `docker info` says both.
#[test]
#[ignore = "needs runsc"]
fn the_daemon_names_what_a_runtime_runs_and_its_default() {
    crate::support::prerequisite::needs!(Runsc);
    use agent_runner_sandbox::backend::runtime::resolve;
    let deadline = std::time::Duration::from_secs(30);
    let (name, programs) = resolve(Some("runsc"), deadline).expect("docker info answers");
    assert_eq!(name, "runsc");
    assert!(
        programs.iter().any(|p| p.ends_with("/runsc")),
        "{programs:?}"
    );
    let (default, _) = resolve(None, deadline).expect("docker info answers");
    assert_eq!(default, "runc", "the test daemon's default");
    let (_, none) = resolve(Some("no-such-runtime"), deadline).expect("docker info answers");
    assert!(none.is_empty(), "{none:?}");
}
