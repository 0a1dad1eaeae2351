//! What attempts spend, in the pipeline (SPEC §15): attempt lines carry the run's
//! `usage` and `budget` and the Task Builder's `builder_usage`; `task list`, `task
//! show`, the web view and `agent-runner usage` show them; `orchestrate
//! --max-tokens/--max-cost-usd` stops claiming once the finished attempts reach a
//! limit. Real binary, the fake OpenAI server reporting chosen usage (Task Builder
//! and Meta), the test worker image reporting chosen usage.

use crate::support;

use serde_json::{Value, json};

use support::docker::TEST_IMAGE;
use support::fake_openai::{Answer, FakeOpenAi};
use support::pipeline::{BUILDER_REPLY, Pipeline, meta_script};
use support::task::{KEY, assess, plan, run_worker};
use support::web::Served;

/// The Task Builder's reply (the scripted builder's first entry, as a chat reply).
fn builder_reply() -> Answer {
    let entry: serde_norway::Value = serde_norway::from_str(BUILDER_REPLY).unwrap();
    Answer::chat(&serde_norway::to_string(&entry[0]).unwrap())
}

const PRICING: &str = "  pricing:\n    test-model: {input: 2, cached_input: 0.5, output: 8}\n    w-model: {input: 1.5, cached_input: 0.375, output: 6}\n";

#[test]
fn attempts_record_what_they_spent_and_every_view_shows_it() {
    let p = Pipeline::new("spending", false);
    let server = FakeOpenAi::start(vec![
        builder_reply().with_usage(500, 100, 50),
        plan(&["AC-1"]).with_usage(1000, 0, 100),
        run_worker("@usage: 2000 1000 100\n@say: done").with_usage(1000, 0, 100),
        assess(&["AC-1"], "done").with_usage(1000, 0, 100),
    ]);
    p.init_with(
        "defaults.yaml",
        &format!(
            "require_test: false\nrunner:\n  meta: {{base_url: \"{}\", model: test-model}}\n  worker: {{docker_image: \"{TEST_IMAGE}\", network: none, model: w-model}}\n{PRICING}  budget: {{max_tokens: 100000}}\n",
            server.url
        ),
    );
    p.new_task("spender", "Spend some tokens.");
    p.run_tasks(&["spender"]);
    p.orchestrate_once(&[])
        .env("OPENAI_API_KEY", KEY)
        .output()
        .code(0);
    assert_eq!(server.received().len(), 4);

    // Builder: (400 × 2 + 100 × 0.5 + 50 × 8) = 1250 µ$. Meta: 3 × (1000 × 2 + 100 × 8)
    // = 8400 µ$; worker: 1000 × 1.5 + 1000 × 0.375 + 100 × 6 = 2475 µ$.
    let attempt = &p.attempts("spender")[0];
    assert_eq!(attempt["usage"]["total_tokens"], 3300 + 2100);
    assert_eq!(attempt["usage"]["cost_usd"], 0.010875);
    assert_eq!(
        attempt["builder_usage"],
        json!({"model": "test-model", "calls": 1, "input_tokens": 500, "cached_input_tokens": 100,
               "output_tokens": 50, "unreported": 0, "cost_usd": 0.00125})
    );
    assert_eq!(
        attempt["budget"],
        json!({"max_tokens": 100000, "max_cost_usd": null, "max_duration_sec": null, "exhausted": null})
    );
    let log_dir = attempt["log_dir"].as_str().unwrap();
    let builder_log = std::fs::read_to_string(format!("{log_dir}/builder.log")).unwrap();
    assert!(
        builder_log.contains("usage: test-model: 500 tokens in (100 cached), 50 out"),
        "{builder_log}"
    );

    let list = p.in_ws(&["task", "list"], &[]).output();
    list.code(0);
    let header = list.stdout.lines().next().unwrap();
    assert!(
        header.contains("TOKENS") && header.contains("COST"),
        "{}",
        list.stdout
    );
    let row = list.stdout.lines().nth(1).unwrap();
    assert!(
        row.trim_end().ends_with("5950 $0.012125"),
        "tokens and cost of run and builder: {}",
        list.stdout
    );
    let listed = p.in_ws(&["task", "list"], &["--json"]).output();
    let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
    let last = &listed["tasks"][0]["last_attempt"];
    assert_eq!(
        (last["tokens"].clone(), last["cost_usd"].clone()),
        (json!(5950), json!(0.012125))
    );
    assert_eq!(last["usage"]["worker"]["runs"], 1);

    let show = p.in_ws(&["task", "show"], &["spender"]).output();
    show.code(0);
    for line in [
        ", 5950 tokens, $0.012125 (job ",
        "  meta:        3 call(s), 3000 in (0 cached), 300 out",
        "  worker:      1 run(s), 2000 in (1000 cached), 100 out",
        "  builder:     1 call(s), 500 in (100 cached), 50 out, $0.00125",
        "  usage:       5950 tokens, cost $0.012125",
        "  budget:      max_tokens 100000, max_cost_usd none, max_duration_sec none",
    ] {
        assert!(
            show.stdout.contains(line),
            "missing {line:?}:\n{}",
            show.stdout
        );
    }

    let usage = p.in_ws(&["usage"], &["--json"]).output();
    usage.code(0);
    let usage: Value = serde_json::from_str(&usage.stdout).unwrap();
    assert_eq!(usage["total_tokens"], 5950);
    assert_eq!(usage["cost_usd"], 0.012125);
    assert_eq!(usage["attempts"], 1);
    let day = &usage["days"][0];
    assert_eq!(day["day"].as_str().unwrap().len(), 10);
    let models: Vec<(String, u64, u64)> = day["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["model"].as_str().unwrap().to_string(),
                m["calls"].as_u64().unwrap(),
                m["input_tokens"].as_u64().unwrap() + m["output_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        models,
        [("test-model".into(), 4, 3850), ("w-model".into(), 1, 2100)]
    );
    let table = p.in_ws(&["usage"], &[]).output();
    table.code(0);
    assert!(
        table
            .stdout
            .contains("total: 5950 tokens, $0.012125 over 1 attempt(s)"),
        "{}",
        table.stdout
    );
    let later = p
        .in_ws(&["usage"], &["--since", "2999-01-01", "--json"])
        .output();
    let later: Value = serde_json::from_str(&later.stdout).unwrap();
    assert_eq!(later["attempts"], 0);
    p.in_ws(&["usage"], &["--since", "yesterday"])
        .output()
        .code(2)
        .stderr_has("expected a date YYYY-MM-DD");

    let web = Served::start(&p, &[]);
    let page = web.get("/").text();
    assert!(
        page.contains("<th class=\"n\">Tokens</th><th class=\"n\">Cost</th>"),
        "{page}"
    );
    assert!(
        page.contains("<td class=\"n tokens\">5950</td><td class=\"n cost\">$0.012125</td>"),
        "{page}"
    );
    let task_page = web.get("/tasks/spender").text();
    assert!(
        task_page.contains("<dd id=\"usage\">5950 tokens · $0.012125<ul><li>Meta: 3 call(s)"),
        "{task_page}"
    );
    assert!(
        task_page
            .contains("<li>Task Builder: 1 call(s), 500 in (100 cached), 50 out, $0.00125</li>"),
        "{task_page}"
    );
    assert!(
        task_page.contains("<dd id=\"budget\">max_tokens 100000, max_cost_usd none"),
        "{task_page}"
    );
    let api = web.get("/api/tasks").json();
    assert_eq!(api["tasks"][0]["last_attempt"]["tokens"], 5950);
    web.stop();
}

/// A workspace whose every attempt's worker run reports `tokens` input tokens.
fn spenders(name: &str, tokens: u64, count: usize) -> Pipeline {
    let p = Pipeline::new(name, false);
    p.init(
        BUILDER_REPLY,
        &meta_script(&format!("@usage: {tokens} 0 0\n@say: spent")),
        &format!(
            "  worker: {{docker_image: \"{TEST_IMAGE}\", network: none, model: w-model}}\n{PRICING}"
        ),
    );
    for n in 1..=count {
        p.new_task(&format!("t{n}"), &format!("Task {n}."));
    }
    let ids: Vec<String> = (1..=count).map(|n| format!("t{n}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    p.run_tasks(&ids);
    p
}

#[test]
fn the_orchestrator_stops_claiming_once_its_finished_attempts_reach_max_tokens() {
    let p = spenders("orchestrate-tokens", 3000, 3);
    let out = p.orchestrate_once(&["--max-tokens", "5000"]).output();
    out.code(0)
        .stderr_has(
            "--max-tokens reached: 6000 tokens of 5000 over 2 attempt(s): claiming no more jobs",
        )
        .stderr_has("stopped with 1 job(s) left in the queue");
    assert_eq!(p.ipc("queue").len(), 1, "the rest stays queued");
    let statuses: Vec<usize> = (1..=3)
        .map(|n| p.attempts(&format!("t{n}")).len())
        .collect();
    assert_eq!(statuses.iter().sum::<usize>(), 2, "{statuses:?}");
    let listed = p.in_ws(&["task", "list"], &["--json"]).output();
    let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
    let queued = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "QUEUED")
        .count();
    assert_eq!(queued, 1);
}

#[test]
fn the_orchestrator_stops_claiming_once_its_finished_attempts_reach_max_cost() {
    // 1,000,000 tokens of w-model at $1.5 per million: $1.5 per attempt.
    let p = spenders("orchestrate-cost", 1_000_000, 3);
    let out = p.orchestrate_once(&["--max-cost-usd", "1"]).output();
    out.code(0)
        .stderr_has("--max-cost-usd reached: $1.5 of $1 over 1 attempt(s): claiming no more jobs");
    assert_eq!(p.ipc("queue").len(), 2);
    p.orchestrate_once(&["--max-cost-usd", "0"])
        .output()
        .code(2)
        .stderr_has("must be a positive number of USD");
}
