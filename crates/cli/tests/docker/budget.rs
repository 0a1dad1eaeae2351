//! Usage, prices, budgets, the deadline and the no-progress stop (SPEC §15), end to
//! end: the real binary, the fake OpenAI server reporting chosen `usage`, the real
//! Docker daemon and the test worker image, whose fake codex reports the usage a
//! prompt's `@usage:` line chooses.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::fake_openai::{Answer, FakeOpenAi};
use support::task::*;
use support::task_yaml::TaskYaml;
use support::{Run, Scratch, git_repo};

/// Prices for the fake's models: Meta's `test-model` and the worker's `w-model`.
fn pricing() -> Value {
    json!({
        "test-model": {"input": 2, "cached_input": 0.5, "output": 8},
        "w-model": {"input": 1.5, "cached_input": 0.375, "output": 6},
    })
}

fn result(out: &support::Outcome) -> Value {
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {}", out.stdout))
}

/// The task, its worker's model `w-model`.
fn usage_task(id: &str, dir: &Scratch, server: &FakeOpenAi) -> TaskYaml {
    v1_task(id, &dir.path, server).set("runner.worker.model", "w-model")
}

#[test]
fn totals_and_cost_are_exact_in_the_result_and_the_note() {
    let dir = Scratch::new("usage-exact");
    let id = task_id("exact");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]).with_usage(1000, 200, 100),
        run_worker("@usage: 24000 12000 1200\n@run: echo ok > out.txt\n@say: wrote out.txt")
            .with_usage(2000, 0, 150),
        assess(&["AC-1"], "done").with_usage(3000, 1000, 50),
    ]);
    let yaml = usage_task(&id, &dir, &server)
        .test("grep -qx ok out.txt")
        .set("runner.pricing", pricing())
        .set(
            "runner.budget",
            json!({"max_tokens": 100000, "max_cost_usd": 1, "max_duration_sec": 600}),
        );
    let out = runner(&yaml).arg("--json").output();
    out.code(0);
    let result = result(&out);
    // Meta: plan (800 × 2 + 200 × 0.5 + 100 × 8) + next (2000 × 2 + 150 × 8) + assess
    // (2000 × 2 + 1000 × 0.5 + 50 × 8) = 2500 + 5200 + 4900 micro-dollars; the worker:
    // 12000 × 1.5 + 12000 × 0.375 + 1200 × 6 = 29700.
    assert_eq!(
        result["usage"]["meta"],
        json!({"calls": 3, "input_tokens": 6000, "cached_input_tokens": 1200, "output_tokens": 300, "unreported": 0})
    );
    assert_eq!(
        result["usage"]["worker"],
        json!({"runs": 1, "input_tokens": 24000, "cached_input_tokens": 12000, "output_tokens": 1200, "unreported": 0})
    );
    assert_eq!(result["usage"]["total_tokens"], 31500);
    assert_eq!(result["usage"]["cost_usd"], 0.0423);
    assert_eq!(
        result["budget"],
        json!({"max_tokens": 100000, "max_cost_usd": 1.0, "max_duration_sec": 600, "exhausted": null})
    );
    let models = &result["usage"]["models"];
    assert_eq!(models[0]["model"], "test-model");
    assert_eq!(models[0]["cost_usd"], 0.0126);
    assert_eq!(models[1]["model"], "w-model");
    assert_eq!(models[1]["cost_usd"], 0.0297);
    let note = note(&dir.path, &id);
    for line in [
        "- Usage: 31500 tokens, cost $0.0423 (see 4.4)",
        "Tokens: 1000 in (200 cached), 100 out; model test-model, cost $0.0025",
        "Tokens: 2000 in (0 cached), 150 out; model test-model, cost $0.0052",
        "- Tokens: 24000 in (12000 cached), 1200 out; model w-model, cost $0.0297",
        "### 4.4 Usage and Budget",
        "- Meta: 3 call(s): 6000 tokens in (1200 cached), 300 out",
        "- Worker: 1 run(s): 24000 tokens in (12000 cached), 1200 out",
        "- Total: 31500 tokens",
        "- Cost: $0.0423",
        "- Budget: max_tokens 100000, max_cost_usd 1, max_duration_sec 600",
    ] {
        assert!(note.contains(line), "missing {line:?}:\n{note}");
    }
    out.stderr_has("meta plan_task: ")
        .stderr_has(", 1100 tokens");
}

#[test]
fn a_reply_without_usage_is_unreported_and_an_unpriced_model_leaves_the_cost_unknown() {
    let dir = Scratch::new("usage-unknown");
    let id = task_id("unknown");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: done").with_usage(10, 0, 5),
        assess(&["AC-1"], "done").with_usage(10, 0, 5),
    ]);
    let out = runner(usage_task(&id, &dir, &server))
        .arg("--json")
        .output();
    out.code(0);
    let result = result(&out);
    assert_eq!(result["usage"]["meta"]["unreported"], 1);
    assert_eq!(result["usage"]["meta"]["input_tokens"], 20);
    assert_eq!(result["usage"]["total_tokens"], 20 + 10 + 1200 + 60);
    assert_eq!(result["usage"]["cost_usd"], Value::Null, "no prices at all");
    assert_eq!(
        result["budget"],
        json!({"max_tokens": null, "max_cost_usd": null, "max_duration_sec": null, "exhausted": null})
    );
    let note = note(&dir.path, &id);
    assert!(
        note.contains("Tokens: not reported; model test-model"),
        "{note}"
    );
    assert!(
        note.contains("(1 reported no usage and are not counted)"),
        "{note}"
    );
}

/// Asserts a budget failure: exit 1, the error (beginning with `error`), the note, no
/// container.
fn assert_exhausted(
    out: &support::Outcome,
    dir: &Scratch,
    id: &str,
    error: &str,
    limit: &str,
) -> Value {
    out.code(1);
    let result = result(out);
    assert_eq!(result["status"], "failed");
    let said = result["error"].as_str().unwrap_or_default();
    assert!(
        said.starts_with(error),
        "error {said:?}, expected {error:?}\n{}",
        out.stderr
    );
    assert_eq!(result["budget"]["exhausted"], limit);
    let note = note(&dir.path, id);
    assert!(note.contains(&format!("- Exhausted: {limit}")), "{note}");
    assert!(note.contains("- State: FAILED"), "{note}");
    assert_no_container(id);
    result
}

#[test]
fn max_tokens_reached_by_a_meta_call_stops_before_the_worker_runs() {
    let dir = Scratch::new("budget-meta");
    let id = task_id("budget-meta");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]).with_usage(1000, 0, 100),
        run_worker("@run: echo ran > ran.txt\n@say: ran").with_usage(1000, 0, 100),
        assess(&["AC-1"], "never asked"),
    ]);
    let out =
        runner(usage_task(&id, &dir, &server).set("runner.budget", json!({"max_tokens": 2000})))
            .arg("--json")
            .output();
    assert_exhausted(
        &out,
        &dir,
        &id,
        "budget exhausted: max_tokens (2200 of 2000)",
        "max_tokens",
    );
    assert_eq!(server.received().len(), 2, "no request after the limit");
    assert!(!dir.join("ran.txt").exists(), "the worker did not run");
    assert!(
        !dir.join(&format!(".agent-runner/logs/{id}/run-1.log"))
            .exists()
    );
}

#[test]
fn max_tokens_reached_by_a_worker_run_stops_before_the_tests_and_meta() {
    let dir = Scratch::new("budget-worker");
    let id = task_id("budget-worker");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]).with_usage(1000, 0, 100),
        run_worker("@usage: 3000 0 0\n@say: expensive").with_usage(1000, 0, 100),
        assess(&["AC-1"], "never asked"),
    ]);
    let out = runner(
        usage_task(&id, &dir, &server)
            .test("touch tested.txt")
            .set("runner.budget", json!({"max_tokens": 5000})),
    )
    .arg("--json")
    .output();
    let result = assert_exhausted(
        &out,
        &dir,
        &id,
        "budget exhausted: max_tokens (5200 of 5000)",
        "max_tokens",
    );
    assert_eq!(server.received().len(), 2);
    assert_eq!(result["validation"]["commands"], json!([]), "no test ran");
    assert!(!dir.join("tested.txt").exists());
    assert_eq!(result["usage"]["worker"]["runs"], 1);
}

#[test]
fn max_cost_reached_by_an_assessment_stops_before_the_next_loop() {
    let dir = Scratch::new("budget-cost");
    let id = task_id("budget-cost");
    // plan $0.0025, next $0.0052, worker 1000 × 1.5 → $0.0015, assess $0.0049: $0.0141.
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]).with_usage(1000, 200, 100),
        run_worker("@usage: 1000 0 0\n@say: tried").with_usage(2000, 0, 150),
        assess(&[], "not yet").with_usage(3000, 1000, 50),
        run_worker("@say: never").with_usage(1, 0, 1),
    ]);
    let out = runner(
        usage_task(&id, &dir, &server)
            .test("true")
            .set("runner.pricing", pricing())
            .set("runner.budget", json!({"max_cost_usd": 0.01})),
    )
    .arg("--json")
    .output();
    let result = assert_exhausted(
        &out,
        &dir,
        &id,
        "budget exhausted: max_cost_usd (0.0141 of 0.01)",
        "max_cost_usd",
    );
    assert_eq!(
        server.received().len(),
        3,
        "the next loop's next_action was not sent"
    );
    assert_eq!(result["usage"]["cost_usd"], 0.0141);
    assert_eq!(result["loops"], 1);
}

#[test]
fn the_deadline_stops_a_sleeping_worker_inside_the_container() {
    let dir = Scratch::new("budget-deadline");
    let id = task_id("deadline");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: sleeping\n@sleep: 120"),
        assess(&["AC-1"], "never asked"),
    ]);
    let clock = Instant::now();
    let out =
        runner(usage_task(&id, &dir, &server).set("runner.budget", json!({"max_duration_sec": 8})))
            .arg("--json")
            .output();
    let took = clock.elapsed();
    let result = assert_exhausted(
        &out,
        &dir,
        &id,
        "budget exhausted: max_duration_sec (8.",
        "max_duration_sec",
    );
    assert!(
        result["error"].as_str().unwrap().ends_with(" of 8)"),
        "{result}"
    );
    assert!(took < Duration::from_secs(20), "the task took {took:?}");
    let note = note(&dir.path, &id);
    assert!(
        note.contains("(timed_out, ExitCode=") && note.contains("Stopped at the task's deadline"),
        "{note}"
    );
    assert_eq!(server.received().len(), 2);
}

#[test]
fn the_deadline_cuts_a_meta_request_short() {
    let dir = Scratch::new("budget-meta-deadline");
    let id = task_id("meta-deadline");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"]).delayed(Duration::from_secs(20))]);
    let clock = Instant::now();
    let out =
        runner(usage_task(&id, &dir, &server).set("runner.budget", json!({"max_duration_sec": 2})))
            .arg("--json")
            .output();
    let took = clock.elapsed();
    assert_exhausted(
        &out,
        &dir,
        &id,
        "budget exhausted: max_duration_sec (2.",
        "max_duration_sec",
    );
    assert!(took < Duration::from_secs(8), "the task took {took:?}");
    assert_eq!(server.received().len(), 1, "no retry after the deadline");
    let note = note(&dir.path, &id);
    assert!(
        note.contains("#### 1. plan_task at ") && note.contains(", 1 attempt)"),
        "no attempt is made once the deadline has passed:\n{note}"
    );
}

#[test]
fn the_deadline_cuts_a_test_run_short() {
    let dir = Scratch::new("budget-test-deadline");
    let id = task_id("test-deadline");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: quick"),
        assess(&["AC-1"], "never asked"),
    ]);
    let clock = Instant::now();
    let out = runner(
        usage_task(&id, &dir, &server)
            .test("sleep 120")
            .set("runner.budget", json!({"max_duration_sec": 8})),
    )
    .arg("--json")
    .output();
    let took = clock.elapsed();
    let result = assert_exhausted(
        &out,
        &dir,
        &id,
        "budget exhausted: max_duration_sec (8.",
        "max_duration_sec",
    );
    assert!(took < Duration::from_secs(20), "the task took {took:?}");
    assert_eq!(
        result["validation"]["overall"], "failed",
        "the test was stopped"
    );
    assert_eq!(server.received().len(), 2);
}

/// A git repository whose test fails the same way every time.
fn stuck_repo(dir: &Scratch) {
    git_repo(&dir.path, "README", "stuck\n");
}

#[test]
fn loops_that_change_nothing_stop_after_exactly_n_without_asking_meta_again() {
    let dir = Scratch::new("no-progress");
    stuck_repo(&dir);
    let id = task_id("no-progress");
    let mut answers = vec![plan(&["AC-1"])];
    for _ in 0..5 {
        answers.push(run_worker("@say: I looked around"));
        answers.push(assess(&[], "still failing"));
    }
    let server = FakeOpenAi::start(answers);
    let out = runner(format!(
        "{}  max_stalled_loops: 3\n",
        v1_task(&id, &dir.path, &server)
            .test("echo 1 test failed; exit 1")
            .set("runner.meta.max_loops", 5)
    ))
    .arg("--json")
    .output();
    out.code(1);
    let result = result(&out);
    assert_eq!(result["error"], "no progress in 3 loops", "{}", out.stderr);
    assert_eq!(result["loops"], 3);
    assert_eq!(result["budget"]["exhausted"], Value::Null);
    // plan, then next_action + assessment twice, then the third next_action: the
    // third loop's assessment is not asked.
    assert_eq!(server.received().len(), 6);
    assert_no_container(&id);
    assert!(note(&dir.path, &id).contains("no progress in 3 loops"));
}

#[test]
fn loops_that_change_the_repository_are_progress() {
    let dir = Scratch::new("progress");
    stuck_repo(&dir);
    let id = task_id("progress");
    let mut answers = vec![plan(&["AC-1"])];
    for n in 0..4 {
        // A file named like a find expression, and an artefact too large to be
        // read through for a line count (listed in the status, not in the stat).
        let more = if n == 0 {
            "@run: printf 'a\\nb\\n' > ./-name; truncate -s 2M big.bin\n"
        } else {
            ""
        };
        answers.push(run_worker(&format!(
            "{more}@run: echo {n} >> work.txt\n@say: wrote {n}"
        )));
        answers.push(assess(&[], "still failing"));
    }
    let server = FakeOpenAi::start(answers);
    let out = runner(
        v1_task(&id, &dir.path, &server)
            .test("echo 1 test failed; exit 1")
            .set("runner.meta.max_loops", 4),
    )
    .arg("--json")
    .output();
    out.code(1);
    let result = result(&out);
    let error = result["error"].as_str().unwrap();
    assert!(error.starts_with("max_loops reached (4)"), "{error}");
    assert_eq!(server.received().len(), 9);
    let note = note(&dir.path, &id);
    assert!(note.contains("  - +4 −0 work.txt\n"), "{note}");
    assert!(note.contains("  - +2 −0 -name\n"), "{note}");
    assert!(!note.contains("−0 big.bin"), "{note}");
}

#[test]
fn validate_refuses_a_cost_limit_with_an_unpriced_model_and_names_it() {
    let dir = Scratch::new("validate-cost");
    let server = FakeOpenAi::start(vec![]);
    let yaml = usage_task("v", &dir, &server)
        .set("runner.budget", json!({"max_cost_usd": 2}))
        .set(
            "runner.pricing",
            json!({"test-model": {"input": 1, "output": 1}}),
        );
    Run::new(&["validate"])
        .env("OPENAI_API_KEY", KEY)
        .stdin(yaml.to_string())
        .output()
        .code(1)
        .stderr_has("runner.budget.max_cost_usd: the worker's model \"w-model\" (runner.worker.model) has no price in runner.pricing");
    let priced = yaml.set("runner.pricing.w-model", json!({"input": 1, "output": 1}));
    Run::new(&["validate"])
        .env("OPENAI_API_KEY", KEY)
        .stdin(priced.to_string())
        .output()
        .code(0)
        .stdout_has("max_cost_usd: 2.0");
    // The model given on the command line needs its price too; nothing runs.
    let out = runner(&priced)
        .args(&["--meta-model", "other-model", "--json"])
        .output();
    out.code(1);
    let error = result(&out)["error"].as_str().unwrap().to_string();
    assert!(
        error.contains(
            "--meta-model: Meta's model \"other-model\" (runner.meta.model) has no price"
        ),
        "{error}"
    );
    assert!(server.received().is_empty());
}

/// A Meta answering every request with an invalid reply: each re-ask is a paid
/// request resending the conversation, so the budget is looked at before each one.
#[test]
fn a_meta_that_keeps_answering_invalid_replies_is_stopped_by_the_budget_between_reasks() {
    let dir = Scratch::new("budget-reasks");
    let id = task_id("budget-reasks");
    let invalid =
        || Answer::chat("type: plan_task\nacceptance_criteria: []\n").with_usage(3000, 0, 100);
    let server = FakeOpenAi::start(vec![invalid(), invalid(), invalid(), invalid()]);
    let out =
        runner(usage_task(&id, &dir, &server).set("runner.budget", json!({"max_tokens": 2000})))
            .arg("--json")
            .output();
    assert_exhausted(
        &out,
        &dir,
        &id,
        "budget exhausted: max_tokens (3100 of 2000)",
        "max_tokens",
    );
    assert_eq!(server.received().len(), 1, "no re-ask after the limit");
}
