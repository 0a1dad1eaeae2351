//! `runner.worker.mcp_servers` and `runner.sandbox.runtime` (SPEC §28).

use super::*;

const V1: &str = "version: 1\ntask:\n  prd: {text: x}\nrunner:\n";

fn with_token(yaml: &str) -> Result<Task, InputErrors> {
    let dir = Scratch::new();
    parse_in(
        &dir.0,
        &[
            KEY,
            ("NOTES_TOKEN", "tok-0123456789"),
            ("DOCS_AUTH", "Bearer zz-987654"),
        ],
        yaml,
    )
}

#[test]
fn stdio_and_remote_servers_are_read_their_values_secrets() {
    let task = with_token(&format!(
        "{V1}  worker:\n    mcp_servers:\n      notes:\n        command: python3\n        args: [/srv/notes.py]\n        env: {{TOKEN: 'env:NOTES_TOKEN', MODE: fast}}\n      docs:\n        url: http://127.0.0.2:9/mcp\n        headers: {{Authorization: 'env:DOCS_AUTH'}}\n"
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = task
        .worker
        .mcp_servers
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["docs", "notes"]);
    let secrets: Vec<String> = task
        .secrets()
        .iter()
        .map(|s| s.expose().to_string())
        .collect();
    assert!(
        secrets.contains(&"tok-0123456789".to_string()),
        "{secrets:?}"
    );
    assert!(
        secrets.contains(&"Bearer zz-987654".to_string()),
        "{secrets:?}"
    );
    // The remote server's host joins the default allow list, and says why.
    let entries = task.worker.allow.entries();
    assert!(entries.contains(&"127.0.0.2:9".to_string()), "{entries:?}");
    let out = resolved_yaml(&task);
    assert!(out.contains("MCP server docs"), "{out}");
    assert!(
        out.contains("notes: stdio `python3 /srv/notes.py` (env MODE=***, TOKEN=env:NOTES_TOKEN)"),
        "{out}"
    );
    assert!(
        out.contains("docs: http://127.0.0.2:9/mcp (headers Authorization=env:DOCS_AUTH)"),
        "{out}"
    );
    assert!(!out.contains("tok-0123456789") && !out.contains("zz-987654"));
}

#[test]
fn a_written_allow_list_gets_the_remote_servers_host_too() {
    let task = ok(&format!(
        "{V1}  worker:\n    allow: [api.openai.com]\n    mcp_servers:\n      docs: {{url: 'https://mcp.example.com/mcp'}}\n"
    ));
    assert_eq!(
        task.worker.allow.entries(),
        ["api.openai.com", "mcp.example.com"]
    );
}

#[test]
fn a_server_is_either_stdio_or_remote_with_its_own_keys() {
    let yaml = |server: &str| format!("{V1}  worker:\n    mcp_servers:\n      s: {server}\n");
    assert_error(
        &err(&yaml("{command: a, url: 'http://h/'}")),
        "runner.worker.mcp_servers.s",
        "exactly one of `command`",
    );
    assert_error(
        &err(&yaml("{args: [x]}")),
        "runner.worker.mcp_servers.s",
        "give `command`",
    );
    assert_error(
        &err(&yaml("{url: 'http://h/', env: {A: b}}")),
        "runner.worker.mcp_servers.s.env",
        "only used with `command`",
    );
    assert_error(
        &err(&yaml("{command: a, headers: {A: b}}")),
        "runner.worker.mcp_servers.s.headers",
        "only used with `url`",
    );
    assert_error(
        &err(&yaml("{command: 'python3 server.py'}")),
        "runner.worker.mcp_servers.s.command",
        "must be one program",
    );
    assert_error(
        &err(&yaml("{url: 'ftp://h/'}")),
        "runner.worker.mcp_servers.s.url",
        "http:// or https://",
    );
    assert_error(
        &err(&yaml("{command: a, env: {'1X': b}}")),
        "runner.worker.mcp_servers.s.env.1X",
        "not a valid variable name",
    );
    assert_error(
        &err(&yaml("{command: a, bogus: 1}")),
        "runner.worker.mcp_servers.s.bogus",
        "unknown key",
    );
    assert_error(
        &err(&format!(
            "{V1}  worker:\n    mcp_servers:\n      'a.b': {{command: a}}\n"
        )),
        "runner.worker.mcp_servers.a.b",
        "a server's name",
    );
    let e = err(&yaml("{command: a, env: {T: 'env:UNSET_VAR_X'}}"));
    assert_eq!(e.category, Category::Environment);
    assert_error(
        &e,
        "runner.worker.mcp_servers.s.env.T",
        "UNSET_VAR_X is not set",
    );
}

#[test]
fn the_runtime_is_a_name_and_shown() {
    let task = ok(&format!("{V1}  sandbox: {{runtime: runsc}}\n"));
    assert_eq!(task.worker.runtime.as_deref(), Some("runsc"));
    assert!(resolved_yaml(&task).contains("sandbox:\n    runtime: runsc\n"));
    assert_error(
        &err(&format!("{V1}  sandbox: {{runtime: '--privileged'}}\n")),
        "runner.sandbox.runtime",
        "a runtime's name",
    );
}
