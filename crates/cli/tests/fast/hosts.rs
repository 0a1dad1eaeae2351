//! `agent-runner hosts check|prepare` before any host is reached: which hosts it
//! is told of.

use crate::support::pipeline::Pipeline;

#[test]
fn a_workspace_file_that_does_not_parse_is_named_not_taken_for_no_workspace() {
    let p = Pipeline::new("hosts-broken-workspace", false);
    p.init_with(
        "defaults.yaml",
        "require_test: false\nhosts:\n  - {name: a, docker: 'tcp://127.0.0.5:2375'}\n",
    );
    let file = p.ws().join("workspace.json");
    std::fs::write(&file, "{ not json").unwrap();
    for command in ["check", "prepare"] {
        let out = p.in_ws(&["hosts", command], &[]).output();
        out.code(1)
            .stderr_has("no --host given and the workspace of")
            .stderr_has(&format!("{}: not a valid workspace file", file.display()));
    }
}
