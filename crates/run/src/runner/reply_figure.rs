//! The figure "parse failures per 100 replies, structured output vs YAML" (issue 30):
//! the same 100 next_action replies, once as an LLM typically writes YAML (half of
//! them wrapped the usual wrong ways: a fence, prose before, text after, a broken
//! indent, prose around a fence) and once as structured output delivers them (the
//! API holds the model to the schema, so the text is the bare JSON document), both
//! through the one reply reader. `cargo test -p agent-runner-run reply_figure --
//! --nocapture` prints the counts.

use serde_json::json;

use agent_runner_meta::reply::parse_reply;

use super::protocol::NextAction;

/// Reply `n` as YAML, wrapped as defect `n % 10` says (0-4: clean), and its name.
fn as_llm_writes_yaml(n: usize) -> (&'static str, String) {
    let yaml = format!(
        "type: next_action\ndecision:\n  action: run_worker\n  reason: step {n} is next\nworker_call:\n  worker_type: codex-cli\n  mode: exec\n  prompt: |\n    Do step {n}: edit src/part{n}.rs.\n    Then run the tests.\n"
    );
    match n % 10 {
        5 => ("code fence", format!("```yaml\n{yaml}```")),
        6 => (
            "prose before",
            format!("Here is my decision for the next step:\n\n{yaml}"),
        ),
        7 => (
            "text after",
            format!("{yaml}\nLet me know if you need anything else."),
        ),
        8 => (
            "wrong indentation",
            yaml.replace("  mode: exec", "   mode: exec"),
        ),
        9 => (
            "prose around a fence",
            format!("Sure! Here it is:\n```yaml\n{yaml}```\nHope this helps."),
        ),
        _ => ("clean", yaml),
    }
}

/// Reply `n` as structured output delivers it: the schema's JSON, nothing around it.
fn as_structured(n: usize) -> String {
    json!({"type": "next_action",
           "decision": {"action": "run_worker", "reason": format!("step {n} is next")},
           "worker_call": {"worker_type": "codex-cli", "mode": "exec",
                           "prompt": format!("Do step {n}: edit src/part{n}.rs.\nThen run the tests.\n")}})
    .to_string()
}

#[test]
#[allow(clippy::print_stderr)]
fn parse_failures_per_100_replies_structured_vs_yaml() {
    let mut yaml_failures: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    let mut structured_failures = 0;
    for n in 0..100 {
        let (defect, text) = as_llm_writes_yaml(n);
        let entry = yaml_failures.entry(defect).or_default();
        entry.1 += 1;
        if parse_reply::<NextAction>(&text).is_err() {
            entry.0 += 1;
        }
        if parse_reply::<NextAction>(&as_structured(n)).is_err() {
            structured_failures += 1;
        }
    }
    let yaml_total: usize = yaml_failures.values().map(|(failed, _)| failed).sum();
    eprintln!(
        "figure: parse failures per 100 replies: structured output {structured_failures}, YAML {yaml_total}"
    );
    for (defect, (failed, of)) in &yaml_failures {
        eprintln!("figure:   YAML {defect}: {failed} of {of} failed");
    }
    assert_eq!(structured_failures, 0);
    let failed = |defect: &str| yaml_failures[defect].0;
    // The reader takes one fence off and nothing else. A sentence ending in a colon
    // before the document reads as one more (ignored) key, so it passes.
    assert_eq!(
        (
            failed("clean"),
            failed("code fence"),
            failed("prose before")
        ),
        (0, 0, 0)
    );
    for defect in ["text after", "wrong indentation", "prose around a fence"] {
        assert_eq!(failed(defect), 10, "{defect}");
    }
}
