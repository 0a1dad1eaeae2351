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

/// A suite elsewhere than the current directory: its paths are read against its
/// own directory, and a config whose runs could not run (a script that is not
/// there) is named with its field before anything runs.
#[test]
fn a_suites_paths_are_its_directorys_and_a_config_that_cannot_run_is_named() {
    let dir = Scratch::new("eval-config");
    let repo = dir.join("suites/one/repo");
    support::git_repo(&repo, "calc.sh", "add() { echo $(($1 - $2)); }\n");
    let base = Run::program("git", &["rev-parse", "HEAD"])
        .cwd(&repo)
        .output()
        .stdout
        .trim()
        .to_string();
    dir.file("suites/one/grader/grade.sh", "true\n");
    dir.file("suites/one/prd.md", "Fix add.\n");
    dir.file("suites/one/meta.yaml", "[]\n");
    let suite = |script: &str| {
        format!(
            "cases:\n  - id: c1\n    repo: repo\n    base: {base}\n    prd: {{path: prd.md}}\n    grader: {{files: grader, command: sh grade.sh, timeout_sec: 5}}\nconfigs:\n  - name: good\n    runner: {{meta: {{kind: scripted, script: meta.yaml}}}}\n  - name: bad\n    runner: {{meta: {{kind: scripted, script: {script}}}}}\n"
        )
    };
    dir.file("suites/one/suite.yaml", suite("scripts/missing.yaml"));
    let home = dir.join("home");
    // Run from the scratch directory: every path of the suite is under suites/one
    // (read elsewhere, the repo, prd and grader would not exist: an invalid suite).
    let out = Run::new(&["eval", "run", "suites/one/suite.yaml", "-w", "ws"])
        .cwd(&dir.path)
        .env("AGENT_RUNNER_HOME", &home)
        .output();
    let missing = dir.join("suites/one/scripts/missing.yaml");
    out.code(1)
        .stderr_has("cannot run as it is; nothing was run")
        .stderr_has(&format!(
            "error: config bad: configs[1].runner.meta.script: file {} not found",
            missing.display()
        ));
    assert!(!out.stderr.contains("config good"), "{}", out.stderr);
    assert!(
        !out.stderr.contains("\\n"),
        "one problem a line: {}",
        out.stderr
    );
    // Nothing planned: no task, no eval directory.
    for workspace in std::fs::read_dir(home.join("workspaces"))
        .unwrap()
        .flatten()
    {
        for made in ["evals", "tasks"] {
            let entries = std::fs::read_dir(workspace.path().join(made)).map_or(0, |d| d.count());
            assert_eq!(entries, 0, "{made}");
        }
    }
}

#[test]
fn swebench_instances_become_a_suite_with_the_test_patch_as_the_grader() {
    let dir = Scratch::new("eval-import");
    let repo = dir.join("repos/acme__calc");
    support::git_repo(&repo, "calc.py", "def add(a, b):\n    return a - b\n");
    dir.file(
        "repos/acme__calc/tests/test_calc.py",
        "from calc import add\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
    );
    Run::program("git", &["add", "-A"])
        .cwd(&repo)
        .output()
        .code(0);
    Run::program(
        "git",
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "tests",
        ],
    )
    .cwd(&repo)
    .output()
    .code(0);
    let base = Run::program("git", &["rev-parse", "HEAD"])
        .cwd(&repo)
        .output()
        .stdout
        .trim()
        .to_string();
    let test_patch = "--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n@@ -2,3 +2,6 @@ from calc import add\n \n def test_zero():\n     assert add(0, 0) == 0\n+\n+def test_add():\n+    assert add(2, 3) == 5\n--- /dev/null\n+++ b/tests/test_more.py\n@@ -0,0 +1,1 @@\n+HELD_OUT = True\n";
    let present = serde_json::json!({
        "instance_id": "acme__calc-1", "repo": "acme/calc", "base_commit": &base[..10],
        "problem_statement": "add() subtracts.\nMake it add.", "test_patch": test_patch,
        "FAIL_TO_PASS": "[\"tests/test_calc.py::test_add\"]", "PASS_TO_PASS": ["tests/test_calc.py::test_zero"],
        "patch": "the reference fix, never the grader's"
    });
    let missing = serde_json::json!({
        "instance_id": "other__gone-2", "repo": "other/gone", "base_commit": "0123456789",
        "problem_statement": "x", "test_patch": "", "FAIL_TO_PASS": "[\"t::a\"]", "PASS_TO_PASS": "[]"
    });
    dir.file("instances.jsonl", format!("{present}\n{missing}\n"));
    let out = Run::new(&[
        "eval",
        "import",
        "swebench",
        "instances.jsonl",
        "--repos",
        "repos",
        "-o",
        "suite",
        "--image",
        "python:3.12",
    ])
    .cwd(&dir.path)
    .output();
    out.code(0)
        .stdout_has("1 case(s) imported, 1 skipped")
        .stderr_has("skipped other__gone-2: repository other/gone is not under /");
    let text = std::fs::read_to_string(dir.join("suite/suite.yaml")).unwrap();
    let suite: serde_json::Value = serde_norway::from_str(&text).unwrap();
    let case = &suite["cases"][0];
    assert_eq!(case["id"], "acme__calc-1");
    assert_eq!(case["base"], base.as_str(), "the full commit");
    assert_eq!(case["prd"], "add() subtracts.\nMake it add.");
    assert_eq!(
        case["grader"]["command"],
        "python -m pytest -q -p no:cacheprovider 'tests/test_calc.py::test_add' 'tests/test_calc.py::test_zero'"
    );
    assert_eq!(suite["image"], "python:3.12");
    let grader = dir
        .join("suite")
        .join(case["grader"]["files"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(grader.join("tests/test_calc.py")).unwrap(),
        "from calc import add\n\ndef test_zero():\n    assert add(0, 0) == 0\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    );
    assert_eq!(
        std::fs::read_to_string(grader.join("tests/test_more.py")).unwrap(),
        "HELD_OUT = True\n"
    );
    assert!(
        !text.contains("reference fix"),
        "the solution patch is no grader"
    );
    // The repository is untouched, and the suite reads (nothing runs: no such config).
    assert_eq!(
        Run::program("git", &["status", "--porcelain"])
            .cwd(&repo)
            .output()
            .stdout,
        ""
    );
    Run::new(&["eval", "run", "suite/suite.yaml", "--config", "nope"])
        .cwd(&dir.path)
        .env("AGENT_RUNNER_HOME", dir.join("home"))
        .output()
        .code(1)
        .stderr_has("--config nope: the suite has no config of that name");
}
