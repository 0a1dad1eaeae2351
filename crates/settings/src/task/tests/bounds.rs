//! `runner.pricing`, `runner.budget`, `runner.max_stalled_loops` (SPEC §15).

use super::*;

const V1: &str = "version: 1\ntask:\n  prd: {text: x}\n";
const TASK_CONFIG: &str = "task:\n  id: a\n  title: t\n  instructions: i\n  project: {root_dir: .}\nrunner:\n  meta: {model: m}\n  worker: {type: docker_codex_cli, model: w}\n";

#[test]
fn defaults_are_no_prices_no_limits_and_three_stalled_loops() {
    let task = ok(V1);
    assert!(task.bounds.pricing.models.is_empty());
    assert!(task.bounds.budget.is_unlimited());
    assert_eq!(task.bounds.max_stalled_loops, 3);
    let out = resolved_yaml(&task);
    assert!(
        out.contains("  pricing: {}\n  budget:\n    max_tokens: null\n    max_cost_usd: null\n    max_duration_sec: null\n  max_stalled_loops: 3\n"),
        "{out}"
    );
}

#[test]
fn prices_and_limits_in_both_shapes() {
    let runner = "  pricing:\n    m: {input: 1.25, cached_input: 0.125, output: 10}\n    w: {input: 2, output: 8}\n  budget: {max_tokens: 100000, max_cost_usd: 1.5, max_duration_sec: 1800}\n  max_stalled_loops: 0\n";
    for task in [
        ok(&format!("{TASK_CONFIG}{runner}")),
        ok(&format!(
            "{V1}runner:\n  meta: {{model: m}}\n  worker: {{model: w}}\n{runner}"
        )),
    ] {
        let m = task.bounds.pricing.price("m").unwrap();
        assert_eq!((m.input, m.cached_input, m.output), (1.25, 0.125, 10.0));
        let w = task.bounds.pricing.price("w").unwrap();
        assert_eq!(w.cached_input, 2.0, "cached_input defaults to input");
        assert_eq!(
            task.bounds.budget,
            Budget {
                max_tokens: Some(100_000),
                max_cost_usd: Some(1.5),
                max_duration: Some(std::time::Duration::from_secs(1800)),
            }
        );
        assert_eq!(task.bounds.max_stalled_loops, 0);
        let out = resolved_yaml(&task);
        assert!(out.contains("    max_cost_usd: 1.5\n"), "{out}");
        assert!(out.contains("    m:\n      input: 1.25\n"), "{out}");
    }
}

#[test]
fn a_cost_limit_needs_a_price_for_every_model_that_runs() {
    let e = err(&format!(
        "{V1}runner:\n  meta: {{model: gpt-x}}\n  budget: {{max_cost_usd: 1}}\n"
    ));
    assert_error(
        &e,
        "runner.budget.max_cost_usd",
        "\"gpt-x\" (runner.meta.model) has no price",
    );
    assert!(
        e.hint
            .as_deref()
            .unwrap_or_default()
            .contains("gpt-x: {input:"),
        "{e:?}"
    );
    let e = err(&format!(
        "{V1}runner:\n  meta: {{model: m}}\n  pricing: {{m: {{input: 1, output: 1}}}}\n  budget: {{max_cost_usd: 1}}\n"
    ));
    assert_error(
        &e,
        "runner.budget.max_cost_usd",
        "the worker's model is not set",
    );
    let e = err(&format!(
        "{V1}runner:\n  meta: {{model: m}}\n  worker: {{model: w}}\n  pricing: {{m: {{input: 1, output: 1}}}}\n  budget: {{max_cost_usd: 1}}\n"
    ));
    assert_error(
        &e,
        "runner.budget.max_cost_usd",
        "\"w\" (runner.worker.model) has no price",
    );
    // Scripted Meta costs nothing: only the worker needs a price.
    let dir = Scratch::new();
    dir.file("script.yaml", b"[]");
    let task = parse_in(
        &dir.0,
        &[],
        &format!("{V1}runner:\n  meta: {{kind: scripted, script: script.yaml}}\n  worker: {{model: w}}\n  pricing: {{w: {{input: 1, output: 1}}}}\n  budget: {{max_cost_usd: 1}}\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(task.bounds.budget.max_cost_usd, Some(1.0));
    // Token and time limits need no prices.
    ok(&format!(
        "{V1}runner:\n  budget: {{max_tokens: 5, max_duration_sec: 5}}\n"
    ));
}

#[test]
fn bad_prices_and_limits_are_each_reported_with_their_path() {
    let problems = errs(&format!(
        "{V1}runner:\n  pricing:\n    m: {{input: -1, output: 1}}\n    n: {{output: 1}}\n    o: {{input: 1, output: .nan}}\n    p: {{input: 1, output: 1, cahced_input: 1}}\n    q: 3\n  budget: {{max_tokens: 0, max_cost_usd: 0, max_duration_sec: 0}}\n  max_stalled_loops: 5000\n"
    ));
    let paths: Vec<&str> = problems.iter().map(|e| e.path.as_str()).collect();
    for path in [
        "runner.pricing.m.input",
        "runner.pricing.n.input",
        "runner.pricing.o.output",
        "runner.pricing.p.cahced_input",
        "runner.pricing.q",
        "runner.budget.max_tokens",
        "runner.budget.max_cost_usd",
        "runner.budget.max_duration_sec",
        "runner.max_stalled_loops",
    ] {
        assert!(paths.contains(&path), "{path} missing from {problems:#?}");
    }
    let typo = problems
        .iter()
        .find(|e| e.path == "runner.pricing.p.cahced_input")
        .unwrap();
    assert_eq!(typo.hint.as_deref(), Some("did you mean `cached_input`?"));
    assert_error(
        &err(&format!("{V1}runner:\n  budget: {{max_cost: 1}}\n")),
        "runner.budget.max_cost",
        "unknown key",
    );
    assert_error(
        &err(&format!("{V1}runner:\n  pricing: [m]\n")),
        "runner.pricing",
        "expected a mapping of names to mappings",
    );
}

#[test]
fn a_cost_limit_needs_the_price_of_metas_codex_and_of_a_claude_worker() {
    let priced_w = "  pricing: {w: {input: 1, output: 1}}\n  budget: {max_cost_usd: 1}\n";
    // Meta's codex runs the codex worker's model: its price is the one needed.
    let task = ok(&format!(
        "{V1}runner:\n  meta: {{kind: codex-cli}}\n  worker: {{model: w}}\n{priced_w}"
    ));
    assert_eq!(task.meta.model, "w", "named as codex will run it");
    let e = err(&format!(
        "{V1}runner:\n  meta: {{kind: codex-cli, model: o3}}\n  worker: {{model: w}}\n{priced_w}"
    ));
    assert_error(
        &e,
        "runner.budget.max_cost_usd",
        "Meta's codex model \"o3\" (runner.meta.model) has no price",
    );
    // Beside claude, codex runs its own default, whose price nobody knows.
    let e = err(&format!(
        "{V1}runner:\n  meta: {{kind: codex-cli}}\n  worker: {{kind: claude-code-cli, model: w}}\n{priced_w}"
    ));
    assert_error(
        &e,
        "runner.budget.max_cost_usd",
        "Meta's codex model is not set",
    );
    let e = err(&format!(
        "{V1}runner:\n  meta: {{kind: codex-cli, model: w}}\n  worker: {{kind: claude-code-cli}}\n{priced_w}"
    ));
    assert_error(
        &e,
        "runner.budget.max_cost_usd",
        "so claude runs its own default",
    );
    ok(&format!(
        "{V1}runner:\n  meta: {{kind: codex-cli, model: w}}\n  worker: {{kind: claude-code-cli, model: w}}\n{priced_w}"
    ));
}
