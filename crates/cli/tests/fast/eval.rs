//! `eval run` and `eval validate` on a suite that is not valid: every problem named
//! with its field path and position, and nothing made or run.

use crate::support;

use support::{Run, Scratch};

#[test]
fn an_invalid_suite_is_refused_with_field_paths_and_nothing_runs() {
    let dir = Scratch::new("eval-invalid");
    dir.file("repo/README.md", "x\n");
    dir.file("grader/t.sh", "true\n");
    dir.file(
        "suite.yaml",
        "cases:\n  - id: c1\n    repo: repo\n    base: 0123456\n    prd: Fix it.\n    grader: {files: grader, comand: sh t.sh, timeout_sec: 5}\nconfigs: [{name: a}]\n",
    );
    let home = dir.join("home");
    for words in [&["run"][..], &["validate"]] {
        let mut args = vec!["eval"];
        args.extend(words);
        args.push("suite.yaml");
        let out = Run::new(&args)
            .cwd(&dir.path)
            .env("AGENT_RUNNER_HOME", &home)
            .output();
        out.code(1)
            .stderr_has("the suite suite.yaml is invalid; nothing was run")
            .stderr_has("cases[0].grader: unknown field `comand`")
            .stderr_has("(line 6, column");
        assert!(!home.exists(), "no workspace made");
        assert!(!dir.join("suite.eval").exists(), "no eval workspace made");
    }
    dir.file(
        "suite.yaml",
        "cases:\n  - id: c1\n    repo: nowhere\n    base: main\n    prd: Fix it.\n    grader: {files: grader, command: sh t.sh, timeout_sec: 5}\nconfigs: [{name: a}, {name: a}]\n",
    );
    let out = Run::new(&["eval", "run", "suite.yaml"])
        .cwd(&dir.path)
        .env("AGENT_RUNNER_HOME", &home)
        .output();
    out.code(1)
        .stderr_has("cases[0].repo: ")
        .stderr_has("nowhere does not exist (line 3, column 11)")
        .stderr_has(
            "cases[0].base: \"main\" is not a commit id (7 to 40 hex digits) (line 4, column 11)",
        )
        .stderr_has("configs[1].name: \"a\" is the name of an earlier config");
    assert!(!home.exists(), "no workspace made");
}
