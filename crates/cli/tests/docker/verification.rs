//! SPEC §16 end to end: verification the user pins, "unverified" made visible, and
//! re-planning inside a run. The runner against the fake OpenAI server on 127.0.0.1
//! (replan, max_replans, fixed criteria, `verified`), and the pipeline with scripted
//! replies and the test worker image (which test wins, require_test, the labels).

use crate::support;

use serde_json::Value;

use support::Scratch;
use support::fake_openai::{Answer, FakeOpenAi, Received};
use support::pipeline::{BUILDER_REPLY, Pipeline, QUICK_META, meta_script, read, task_id};
use support::task::{
    assert_no_container, assess, mark_complete, note, plan, run_worker, runner, v1_task,
};
use support::task_yaml::TaskYaml;

/// The exact error of an attempt without any test where one is required.
const NO_TEST: &str = "no test command: pin one with task new --test or defaults.task.test, or set defaults.require_test: false";

fn replan(reason: &str) -> Answer {
    Answer::chat(&format!(
        "type: next_action\ndecision:\n  action: replan\n  reason: {reason}\n"
    ))
}

fn plan_of(criteria: &[(&str, &str)]) -> Answer {
    let criteria: String = criteria
        .iter()
        .map(|(id, d)| format!("  - id: {id}\n    description: {d}\n"))
        .collect();
    Answer::chat(&format!(
        "type: plan_task\nacceptance_criteria:\n{criteria}"
    ))
}

/// The request YAML (the user message) and the system prompt of a request.
fn sent(received: &Received) -> (serde_norway::Value, String) {
    (
        serde_norway::from_str(&received.message(1)).unwrap(),
        received.message(0),
    )
}

fn ids(criteria: &serde_norway::Value) -> Vec<String> {
    criteria
        .as_sequence()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect()
}

fn result_of(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn a_replan_sends_the_old_criteria_and_history_and_the_new_criteria_are_judged() {
    let dir = Scratch::new("e2e-replan");
    let id = task_id("replan");
    let reason = "AC-1 asks for hello but the PRD and the test want ok";
    let server = FakeOpenAi::start(vec![
        plan_of(&[("AC-1", "out.txt says hello")]),
        run_worker("@run: echo hello > out.txt\n@say: wrote hello"),
        assess(&[], "out.txt says hello; the test wants ok"),
        replan(reason),
        plan_of(&[("NEW-1", "out.txt says ok")]),
        run_worker("@run: echo ok > out.txt\n@say: wrote ok"),
        assess(&["NEW-1"], "out.txt says ok and the test passes"),
    ]);
    let out = runner(v1_task(&id, &dir.path, &server).test("grep -qx ok out.txt"))
        .arg("--json")
        .output();
    out.code(0)
        .stderr_has(&format!("state RUNNING → PLANNING: replan: {reason}"))
        .stderr_has("re-planned 1 acceptance criteria (version 2)");
    let result = result_of(&out.stdout);
    assert_eq!(
        (
            &result["status"],
            &result["loops"],
            &result["replans"],
            &result["verified"]
        ),
        (
            &Value::from("succeeded"),
            &Value::from(3),
            &Value::from(1),
            &Value::from(true)
        ),
        "{result}"
    );
    let received = server.received();
    assert_eq!(received.len(), 7);

    // The first next_action after a loop offers replan.
    let (request, system) = sent(&received[3]);
    assert_eq!(request["type"], "next_action");
    assert_eq!(request["replans_left"], 2);
    assert!(system.contains("or replan when the acceptance criteria themselves are wrong"));

    // The second plan_task carries the criteria so far and what loop 1 did.
    let (request, system) = sent(&received[4]);
    assert_eq!(request["type"], "plan_task");
    assert!(system.contains("This is a replan"), "{system}");
    assert_eq!(request["replan"]["reason"], reason);
    assert_eq!(request["replan"]["loop"], 2);
    let previous: serde_norway::Value =
        serde_norway::from_str("[{id: AC-1, description: out.txt says hello, passed: false}]")
            .unwrap();
    assert_eq!(request["previous_criteria"], previous);
    let history = request["history"].as_sequence().unwrap();
    assert_eq!(history.len(), 1, "{request:?}");
    let loop1 = &history[0];
    assert_eq!(loop1["loop"], 1);
    assert_eq!(loop1["action"], "run_worker");
    assert_eq!(loop1["worker"]["outcome"], "completed");
    assert!(
        loop1["worker"]["summary"]
            .as_str()
            .unwrap()
            .contains("wrote hello"),
        "{loop1:?}"
    );
    assert_eq!(loop1["test"]["passed"], false);
    assert_eq!(loop1["test"]["exit_code"], 1);

    // From then on the new criteria are the ones asked about and judged.
    let (request, _) = sent(&received[5]);
    assert_eq!(ids(&request["acceptance_criteria"]), ["NEW-1"]);
    assert_eq!(request["loop"]["current"], 3);
    assert_eq!(request["replans_left"], 1);
    let (request, _) = sent(&received[6]);
    assert_eq!(request["type"], "completion_assessment");
    assert_eq!(ids(&request["acceptance_criteria"]), ["NEW-1"]);

    // The note keeps every version, with its loop and reason.
    let note = note(&dir.path, &id);
    for line in [
        "- Replans: 1 of 2",
        &format!("Version 2 of 2 (re-planned at loop 2: {reason}):"),
        "- [x] NEW-1: out.txt says ok",
        "### Version 1 (planned by Meta)",
        "- [ ] AC-1: out.txt says hello",
        &format!("RUNNING → PLANNING: replan: {reason}"),
    ] {
        assert!(note.contains(line), "{line}:\n{note}");
    }
    assert_no_container(&id);
}

#[test]
fn beyond_max_replans_a_replan_is_an_invalid_reply_and_asked_again() {
    let dir = Scratch::new("e2e-max-replans");
    let id = task_id("max-replans");
    let server = FakeOpenAi::start(vec![
        plan_of(&[("AC-1", "one")]),
        replan("the first plan is wrong"),
        plan_of(&[("AC-2", "two")]),
        replan("and the second too"),
        mark_complete(),
        assess(&["AC-2"], "done"),
    ]);
    let out = runner(v1_task(&id, &dir.path, &server).set("runner.meta.max_replans", 1))
        .arg("--json")
        .output();
    out.code(0);
    let result = result_of(&out.stdout);
    assert_eq!(
        (&result["replans"], &result["loops"]),
        (&Value::from(1), &Value::from(2))
    );
    let received = server.received();
    assert_eq!(received.len(), 6);
    let (request, system) = sent(&received[1]);
    assert_eq!(request["replans_left"], 1);
    assert!(system.contains("1 replan(s) left"));
    // With the one replan used, next_action no longer offers it...
    let (request, system) = sent(&received[3]);
    assert_eq!(request["type"], "next_action");
    assert!(request.get("replans_left").is_none(), "{request:?}");
    assert!(!system.contains("replan"), "{system}");
    // ...and a replan answer is sent back as invalid.
    assert_eq!(received[4].roles(), ["system", "user", "assistant", "user"]);
    assert!(
        received[4].message(3).starts_with(
            "Your reply was invalid: decision.action replan is not available: runner.meta.max_replans (1) replans are used; answer run_worker or mark_complete"
        ),
        "{}",
        received[4].message(3)
    );
    assert_eq!(ids(&sent(&received[5]).0["acceptance_criteria"]), ["AC-2"]);
}

#[test]
fn criteria_the_task_fixes_are_never_replanned() {
    let dir = Scratch::new("e2e-fixed");
    let id = task_id("fixed");
    let server = FakeOpenAi::start((0..4).map(|_| replan("these criteria are wrong")).collect());
    let yaml =
        v1_task(&id, &dir.path, &server).set("task.acceptance_criteria", ["out.txt says ok"]);
    let out = runner(&yaml).arg("--json").output();
    out.code(1);
    let result = result_of(&out.stdout);
    let error = result["error"].as_str().unwrap();
    assert!(
        error.starts_with("meta next_action failed: no valid next_action reply after 3 re-asks: decision.action replan is not available: the task fixes its acceptance criteria (task.acceptance_criteria)"),
        "{error}"
    );
    assert_eq!(result["replans"], 0);
    let received = server.received();
    assert_eq!(
        received.len(),
        4,
        "the first ask and 3 re-asks; no plan_task"
    );
    for r in &received {
        assert!(r.message(1).starts_with("type: next_action"));
    }
    let (request, system) = sent(&received[0]);
    assert!(request.get("replans_left").is_none(), "{request:?}");
    assert!(!system.contains("replan"), "not offered: {system}");
    assert_no_container(&id);
}

#[test]
fn a_complete_task_is_verified_only_by_a_passing_test() {
    let dir = Scratch::new("e2e-verified");
    for (test, verified) in [(None, false), (Some("true"), true)] {
        let id = task_id("verified");
        let server = FakeOpenAi::start(vec![
            plan(&["AC-1"]),
            mark_complete(),
            assess(&["AC-1"], "nothing to do"),
        ]);
        let yaml = v1_task(&id, &dir.path, &server).test(test);
        let out = runner(&yaml).arg("--json").output();
        out.code(0);
        let result = result_of(&out.stdout);
        assert_eq!(result["state"], "COMPLETE");
        assert_eq!(result["verified"], verified, "{test:?}: {result}");
        let server = FakeOpenAi::start(vec![
            plan(&["AC-1"]),
            mark_complete(),
            assess(&["AC-1"], "nothing to do"),
        ]);
        let line = runner(v1_task(&id, &dir.path, &server).test(test)).output();
        line.code(0);
        assert_eq!(
            line.stdout.contains("(unverified)"),
            !verified,
            "{}",
            line.stdout
        );
    }
}

/// A builder reply that proposes `test -f out.txt`.
fn builder_proposing() -> String {
    BUILDER_REPLY.replace(
        "    project:\n",
        "    test:\n      command: test -f out.txt\n      cwd: .\n    project:\n",
    )
}

/// `task-config.yaml` of a job, parsed.
fn config(p: &Pipeline, job: &str) -> serde_norway::Value {
    serde_norway::from_str(&read(&p.ws().join(format!("logs/{job}/task-config.yaml")))).unwrap()
}

#[test]
fn a_pinned_test_wins_over_the_builders_and_the_attempt_says_whose_it_was() {
    let p = Pipeline::new("verify-precedence", false);
    p.init(
        &builder_proposing(),
        &meta_script("@run: echo ok > out.txt\n@say: wrote ok"),
        "require_test: true\ntask:\n  test: {command: test -s out.txt, timeout_sec: 60}\n",
    );
    let (task, ws, builder) = (task_id("pinned"), task_id("ws"), task_id("builder"));
    p.in_ws(
        &["task", "new"],
        &[
            "--id",
            &task,
            "--test",
            "grep -qx ok out.txt",
            "--test-timeout",
            "30",
            "Write ok",
        ],
    )
    .output()
    .code(0);
    p.new_task(&ws, "Write ok too");
    let jobs = p.run_tasks(&[&task, &ws]);
    p.orchestrate_once(&[]).output().code(0);
    for (id, job, source, command) in [
        (&task, &jobs[0], "task", "grep -qx ok out.txt"),
        (&ws, &jobs[1], "workspace", "test -s out.txt"),
    ] {
        let attempt = &p.attempts(id)[0];
        assert_eq!(attempt["status"], "succeeded", "{attempt}");
        assert_eq!(attempt["test_source"], source, "{attempt}");
        assert_eq!(attempt["verified"], true, "{attempt}");
        let test = &config(&p, job)["task"]["test"];
        assert_eq!(test["command"].as_str(), Some(command), "{test:?}");
        assert!(test.get("cwd").is_none(), "replaced whole: {test:?}");
        let result = p.result(job);
        assert_eq!(result["validation"]["commands"][0]["command"], command);
        assert_eq!(result["test_source"], source);
        let log = read(&p.ws().join(format!("logs/{job}/builder.log")));
        assert!(
            log.contains(&format!("test_source: {source}\ncommand: `{command}`\nthe builder's proposal `test -f out.txt` is not used: a pinned test wins (task > workspace > builder)\n")),
            "{log}"
        );
        // The builder was told a test is pinned, so it need not propose one.
        assert!(log.contains(&format!("pinned_test: {command}")), "{log}");
    }
    assert_eq!(config(&p, &jobs[0])["task"]["test"]["timeout_sec"], 30);

    // Without a pinned test, the builder's proposal runs.
    let defaults = p.scratch.file(
        "defaults-builder.yaml",
        format!(
            "builder: {{kind: scripted, script: builder.yaml}}\nrunner:\n  meta: {{kind: scripted, script: meta.yaml}}\n  worker: {{docker_image: \"{}\", network: none}}\n",
            support::docker::TEST_IMAGE
        ),
    );
    p.in_ws(
        &["workspace", "set"],
        &["--defaults", defaults.to_str().unwrap()],
    )
    .output()
    .code(0)
    .stdout_has("test: (none pinned)\nrequire_test: true\nmetadata: ");
    p.new_task(&builder, "Write ok once more");
    let job = p.run_tasks(&[&builder]).remove(0);
    p.orchestrate_once(&[]).output().code(0);
    let attempt = &p.attempts(&builder)[0];
    assert_eq!(
        (&attempt["test_source"], &attempt["verified"]),
        (&Value::from("builder"), &Value::from(true))
    );
    assert_eq!(
        config(&p, &job)["task"]["test"]["command"],
        "test -f out.txt"
    );
    let log = read(&p.ws().join(format!("logs/{job}/builder.log")));
    assert!(
        log.contains("test_source: builder\ncommand: `test -f out.txt` (the builder's proposal)"),
        "{log}"
    );
    assert!(!log.contains("pinned_test"), "{log}");
    // Verified successes are plain SUCCEEDED.
    let list = p.in_ws(&["task", "list"], &[]).output();
    list.code(0);
    assert!(!list.stdout.contains("unverified"), "{}", list.stdout);
    assert_eq!(p.show(&task)["verified"], true);
    p.in_ws(&["task", "show"], &[&task])
        .output()
        .code(0)
        .stdout_has("status:      SUCCEEDED\n")
        .stdout_has("test:        grep -qx ok out.txt\n")
        .stdout_has("verified:    yes\n")
        .stdout_has("test: task)");
}

#[test]
fn require_test_fails_an_attempt_without_any_test_before_anything_runs() {
    let p = Pipeline::new("verify-require", false);
    p.init(BUILDER_REPLY, QUICK_META, "require_test: true\n");
    let id = task_id("untested");
    p.new_task(&id, "Do something");
    let job = p.run_tasks(&[&id]).remove(0);
    p.orchestrate_once(&[]).output().code(1);
    let attempt = &p.attempts(&id)[0];
    assert_eq!(attempt["status"], "failed");
    assert_eq!(attempt["error"], NO_TEST);
    assert_eq!(attempt["test_source"], "none");
    assert_eq!(p.result(&job)["error"], NO_TEST);
    // Nothing started: no TaskConfig, no runner, no note, no container.
    let logs = p.ws().join(format!("logs/{job}"));
    assert!(read(&logs.join("builder.log")).contains("test_source: none"));
    assert!(!logs.join("task-config.yaml").exists());
    assert!(!logs.join("runner.stderr.log").exists());
    assert!(!p.root.join(".agent-runner").exists());
    assert_no_container(&id);

    // require_test: false lets it run, and the success says it is unverified.
    p.init(BUILDER_REPLY, QUICK_META, "require_test: false\n");
    p.run_tasks(&[&id]);
    p.orchestrate_once(&[]).output().code(0);
    let attempt = &p.attempts(&id)[1];
    assert_eq!(
        (
            &attempt["status"],
            &attempt["test_source"],
            &attempt["verified"]
        ),
        (
            &Value::from("succeeded"),
            &Value::from("none"),
            &Value::from(false)
        )
    );
    let list = p.in_ws(&["task", "list"], &[]).output();
    list.code(0);
    let row = list.stdout.lines().find(|l| l.contains(&id)).unwrap();
    assert!(
        row.starts_with("SUCCEEDED (unverified) "),
        "{}",
        list.stdout
    );
    let listed: Value =
        serde_json::from_str(&p.in_ws(&["task", "list"], &["--json"]).output().stdout).unwrap();
    let task = &listed["tasks"][0];
    assert_eq!(
        (&task["status"], &task["verified"]),
        (&Value::from("SUCCEEDED"), &Value::from(false))
    );
    assert_eq!(p.show(&id)["verified"], false);
    p.in_ws(&["task", "show"], &[&id])
        .output()
        .code(0)
        .stdout_has("status:      SUCCEEDED (unverified)\n")
        .stdout_has("verified:    no\n");
}

#[test]
fn pinned_tests_and_defaults_are_checked_where_they_are_given() {
    let p = Pipeline::new("verify-input", false);
    // A workspace made by this version requires a test.
    p.cmd(&["workspace", "init", p.root.to_str().unwrap()])
        .output()
        .code(0)
        .stdout_has("require_test: true\n");
    let json: Value = serde_json::from_str(&read(&p.ws().join("workspace.json"))).unwrap();
    assert_eq!(json["defaults"]["require_test"], true);
    p.in_ws(&["task", "new"], &["--test-timeout", "5", "x"])
        .output()
        .code(2);
    p.in_ws(&["task", "new"], &["--test", " ", "x"])
        .output()
        .code(1)
        .stderr_has("error: --test: empty; give a shell command");
    p.in_ws(
        &["task", "new"],
        &["--test", "make", "--test-timeout", "0", "x"],
    )
    .output()
    .code(1)
    .stderr_has("error: --test-timeout: must be between 1 and 604800 seconds (got 0)");
    let typo = p
        .scratch
        .file("typo.yaml", "task:\n  test: {command: make, timeout: 3}\n");
    p.in_ws(
        &["workspace", "set"],
        &["--defaults", typo.to_str().unwrap()],
    )
    .output()
    .code(1)
    .stderr_has("unknown field `timeout`");
    let fine = p.scratch.file(
        "fine.yaml",
        "task:\n  test: {command: cargo test, timeout_sec: 900}\nrequire_test: false\n",
    );
    p.in_ws(
        &["workspace", "set"],
        &["--defaults", fine.to_str().unwrap()],
    )
    .output()
    .code(0)
    .stdout_has("test: cargo test\nrequire_test: false\nmetadata: ");
    let json: Value = serde_json::from_str(&read(&p.ws().join("workspace.json"))).unwrap();
    assert_eq!(
        json["defaults"],
        serde_json::json!({"task": {"test": {"command": "cargo test", "timeout_sec": 900}}, "require_test": false})
    );
    let id = p
        .in_ws(&["task", "new"], &["--test", "make check", "x"])
        .output();
    id.code(0);
    let shown = p.show(id.stdout.trim());
    assert_eq!(
        shown["task"]["test"],
        serde_json::json!({"command": "make check"})
    );
}

#[test]
fn a_scripted_meta_replans_too() {
    let dir = Scratch::new("e2e-scripted-replan");
    let id = task_id("scripted-replan");
    let script = dir.file(
        "meta.yaml",
        "- type: plan_task\n  acceptance_criteria: [{id: AC-1, description: first}]\n\
         - type: next_action\n  decision: {action: replan, reason: the first plan is wrong}\n\
         - type: plan_task\n  acceptance_criteria: [{id: AC-9, description: second}]\n\
         - type: next_action\n  decision: {action: mark_complete, reason: done}\n\
         - type: completion_assessment\n  summary: done\n  details: {passed_criteria: [AC-9]}\n",
    );
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let yaml = TaskYaml::new(&id, &repo, "x")
        .set("runner.meta.kind", "scripted")
        .set("runner.meta.script", script)
        .image(support::docker::TEST_IMAGE)
        .set("runner.worker.network", "none");
    let out = support::Run::new(&["run", "--json"])
        .stdin(yaml.to_string())
        .output();
    out.code(0);
    let result = result_of(&out.stdout);
    assert_eq!(
        (&result["replans"], &result["loops"]),
        (&Value::from(1), &Value::from(2))
    );
    assert!(note(&repo, &id).contains("- [x] AC-9: second"));
}

#[test]
fn an_update_line_changes_the_test_and_an_unusable_one_fails_before_anything_runs() {
    let p = Pipeline::new("verify-update", false);
    p.init(BUILDER_REPLY, QUICK_META, "");
    let id = task_id("updated");
    p.in_ws(&["task", "new"], &["--id", &id, "--test", "true", "Do it"])
        .output()
        .code(0);
    let file = p.ws().join(format!("tasks/{id}.jsonl"));
    let append = |line: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(format!("{line}\n").as_bytes()).unwrap();
    };
    // Another program changes it with an update line.
    append(
        r#"{"type":"update","at":"2025-12-07T08:00:00.000Z","test":{"command":"grep -q ok out.txt","timeout_sec":5}}"#,
    );
    assert_eq!(
        p.show(&id)["task"]["test"],
        serde_json::json!({"command": "grep -q ok out.txt", "timeout_sec": 5})
    );
    // One the runner would refuse fails the attempt at once, saying why.
    append(r#"{"type":"update","at":"2025-12-07T08:00:01.000Z","test":{"command":"a\u0000b"}}"#);
    let job = p.run_tasks(&[&id]).remove(0);
    p.orchestrate_once(&[]).output().code(1);
    let attempt = &p.attempts(&id)[0];
    assert_eq!(
        attempt["error"],
        "the task's test.command: holds a NUL character"
    );
    assert_eq!(attempt["test_source"], "task");
    assert!(
        !p.ws()
            .join(format!("logs/{job}/runner.stderr.log"))
            .exists()
    );
    assert_no_container(&id);
}
