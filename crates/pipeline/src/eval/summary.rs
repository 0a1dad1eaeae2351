//! `summary.json`: per config, what its runs came to (SPEC §26). Built from the
//! results' last line per run only, so the same results give the same summary:
//! with a scripted agent two evaluations differ in their times alone (the keys
//! ending in `_ms`, and `written_at`).
//!
//! The rate is over graded runs: resolved / (resolved + unresolved +
//! agent_failed); infra_error runs are out of it and counted apart. Every run an
//! infra_error: the rate is null ("n/a"), not 0.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::outcome::Outcome;
use super::pass_at_k::{mean_pass_at_k, wilson_95};
use super::results::{ResultLine, RunKey};
use super::suite::Suite;

/// The whole summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub suite: SuiteId,
    /// agent-runner's version.
    pub agent_runner: String,
    pub tries: u32,
    pub configs: Vec<ConfigSummary>,
    pub written_at: String,
}

/// Which suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteId {
    pub name: String,
    pub path: String,
    /// sha256 of the suite file.
    pub sha256: String,
    pub cases: usize,
}

/// One config's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigSummary {
    pub name: String,
    /// The agents it ran: worker kind, its pinned version, image; Meta's kind and
    /// model; `best_of`, the tries judged into each run's attempt.
    pub agents: serde_json::Value,
    /// Runs planned: cases × tries.
    pub runs: usize,
    /// Runs with an outcome, by outcome.
    pub outcomes: BTreeMap<String, usize>,
    pub resolved: usize,
    /// The denominator: graded runs that were not infra_error.
    pub total: usize,
    /// Runs still without an outcome.
    pub pending: usize,
    /// infra_errors retried (by the orchestrator or the evaluation) before the
    /// outcome that counts: out of the rate, always reported.
    #[serde(default)]
    pub infra_retried: usize,
    /// pass@1 (the mean over cases of resolved / graded tries); null: n/a.
    pub pass_at_1: Option<f64>,
    /// pass@k for k = 2..=tries, by the unbiased estimator, over cases with ≥ k graded tries.
    pub pass_at_k: BTreeMap<String, Option<f64>>,
    /// 95 % interval of the rate resolved / total.
    pub interval_95: Option<[f64; 2]>,
    /// How `interval_95` is computed.
    pub interval_method: String,
    pub tokens: Option<u64>,
    pub tokens_per_case: Option<f64>,
    pub tokens_per_resolved: Option<f64>,
    /// Null when any graded run's cost is unknown (a model without a price).
    pub cost_usd: Option<f64>,
    pub cost_per_case_usd: Option<f64>,
    pub cost_per_resolved_usd: Option<f64>,
    pub median_ms: Option<u64>,
    pub p90_ms: Option<u64>,
}

/// The summary of `latest` (each run's last result line) for `suite` with `tries`.
pub fn build(suite: &Suite, tries: u32, latest: &BTreeMap<RunKey, (ResultLine, u32)>) -> Summary {
    let configs = suite
        .configs
        .iter()
        .map(|config| {
            let lines: Vec<&ResultLine> = latest
                .iter()
                .filter(|(k, _)| k.config == config.name && k.try_k <= tries)
                .filter(|(k, _)| suite.cases.iter().any(|c| c.id == k.case))
                .map(|(_, (line, _))| line)
                .collect();
            // infra_error lines before a run's last (retried by the evaluation).
            let earlier: usize = latest
                .iter()
                .filter(|(k, _)| k.config == config.name && k.try_k <= tries)
                .map(|(_, (line, n))| {
                    *n as usize - usize::from(line.outcome == Outcome::InfraError)
                })
                .sum();
            let mut summary = of_config(
                &config.name,
                &config.runner,
                suite.cases.len(),
                tries,
                &lines,
            );
            summary.infra_retried += earlier;
            summary.agents["best_of"] = config.best_of.into();
            summary
        })
        .collect();
    Summary {
        suite: SuiteId {
            name: suite.name.clone(),
            path: suite.path.display().to_string(),
            sha256: suite.hash.clone(),
            cases: suite.cases.len(),
        },
        agent_runner: env!("CARGO_PKG_VERSION").to_string(),
        tries,
        configs,
        written_at: agent_runner_core::timestamp::Timestamp::now().to_string(),
    }
}

/// The summary.json at `path`, if there is a readable one.
pub fn read(path: &std::path::Path) -> Option<Summary> {
    let bytes = agent_runner_core::fs::read::whole(path, 16 << 20).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn of_config(
    name: &str,
    runner: &serde_json::Value,
    cases: usize,
    tries: u32,
    lines: &[&ResultLine],
) -> ConfigSummary {
    let mut outcomes = BTreeMap::new();
    for line in lines {
        *outcomes
            .entry(line.outcome.as_str().to_string())
            .or_insert(0) += 1;
    }
    let graded: Vec<&&ResultLine> = lines
        .iter()
        .filter(|l| l.outcome != Outcome::InfraError)
        .collect();
    let resolved = graded
        .iter()
        .filter(|l| l.outcome == Outcome::Resolved)
        .count();
    let total = graded.len();
    let mut per_case: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for line in &graded {
        let entry = per_case.entry(line.key.case.as_str()).or_insert((0, 0));
        entry.0 += 1;
        entry.1 += u64::from(line.outcome == Outcome::Resolved);
    }
    let per_case: Vec<(u64, u64)> = per_case.into_values().collect();
    let pass_at_k = (2..=u64::from(tries))
        .map(|k| (k.to_string(), mean_pass_at_k(&per_case, k)))
        .collect();
    let tokens = graded.iter().map(|l| l.tokens).sum::<Option<u64>>();
    let cost = graded.iter().map(|l| l.cost_usd).sum::<Option<f64>>();
    let cases_graded = per_case.len();
    let per = |x: Option<f64>, n: usize| x.filter(|_| n > 0).map(|x| x / n as f64);
    let mut times: Vec<u64> = graded.iter().map(|l| l.wall_ms).collect();
    times.sort_unstable();
    ConfigSummary {
        name: name.to_string(),
        agents: agents(runner),
        runs: cases * tries as usize,
        outcomes,
        resolved,
        total,
        pending: (cases * tries as usize).saturating_sub(lines.len()),
        infra_retried: lines.iter().map(|l| l.infra_retried.len()).sum(),
        pass_at_1: mean_pass_at_k(&per_case, 1),
        pass_at_k,
        interval_95: wilson_95(resolved as u64, total as u64).map(|(a, b)| [a, b]),
        interval_method: "wilson score over graded runs".into(),
        tokens: tokens.filter(|_| total > 0),
        tokens_per_case: per(tokens.map(|t| t as f64), cases_graded),
        tokens_per_resolved: per(tokens.map(|t| t as f64), resolved),
        cost_usd: cost.filter(|_| total > 0),
        cost_per_case_usd: per(cost, cases_graded),
        cost_per_resolved_usd: per(cost, resolved),
        median_ms: rank(&times, 0.5),
        p90_ms: rank(&times, 0.9),
    }
}

/// The nearest-rank percentile `q` of sorted `values`.
fn rank(values: &[u64], q: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let at = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[at - 1])
}

/// What a config's runner block says of its agents.
fn agents(runner: &serde_json::Value) -> serde_json::Value {
    let worker = &runner["worker"];
    let taskconfig_type = worker["type"]
        .as_str()
        .unwrap_or(agent_runner_settings::task::TASKCONFIG_WORKER_TYPE);
    let kind = agent_runner_settings::agent::KINDS
        .into_iter()
        .find(|k| k.taskconfig_type() == taskconfig_type);
    serde_json::json!({
        "worker": kind.map_or(taskconfig_type.to_string(), |k| k.name().to_string()),
        "worker_pinned_version": kind.map(|k| k.pinned().version),
        "worker_model": worker["model"],
        "image": worker["docker_image"].as_str().unwrap_or(agent_runner_settings::task::DEFAULT_DOCKER_IMAGE),
        "meta_kind": runner["meta"]["kind"],
        "meta_model": runner["meta"]["model"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(case: &str, k: u32, outcome: Outcome, tokens: u64, ms: u64) -> ResultLine {
        ResultLine {
            key: RunKey {
                case: case.into(),
                config: "a".into(),
                try_k: k,
            },
            outcome,
            reason: None,
            attempt_id: "x".into(),
            tokens: Some(tokens),
            cost_usd: Some(0.5),
            wall_ms: ms,
            loops: Some(1),
            branch: None,
            host: None,
            grade: None,
            infra_retried: Vec::new(),
            graded_at: String::new(),
        }
    }

    #[test]
    fn figures_of_a_config_by_hand() {
        use Outcome::*;
        let lines = [
            line("c1", 1, Resolved, 100, 1000),
            line("c1", 2, Unresolved, 100, 2000),
            line("c2", 1, AgentFailed, 50, 3000),
            line("c2", 2, InfraError, 0, 9000),
            line("c3", 1, Resolved, 100, 4000),
            line("c3", 2, Resolved, 100, 5000),
        ];
        let refs: Vec<&ResultLine> = lines.iter().collect();
        let s = of_config("a", &serde_json::json!({}), 3, 2, &refs);
        assert_eq!((s.resolved, s.total, s.pending), (3, 5, 0));
        assert_eq!(s.outcomes["infra_error"], 1);
        // pass@1: (1/2 + 0/1 + 2/2) / 3 = 0.5.
        assert!((s.pass_at_1.unwrap() - 0.5).abs() < 1e-12);
        // pass@2 over c1 (n=2,c=1 → 1) and c3 (→ 1); c2 has one graded try.
        assert!((s.pass_at_k["2"].unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(s.tokens, Some(450));
        assert_eq!(s.tokens_per_resolved, Some(150.0));
        assert_eq!(s.tokens_per_case, Some(150.0));
        assert_eq!(s.cost_per_resolved_usd, Some(2.5 / 3.0));
        // 5 graded runs at 0.5 over 3 cases.
        assert_eq!(s.cost_usd, Some(2.5));
        assert_eq!(s.cost_per_case_usd, Some(2.5 / 3.0));
        // Times of graded runs 1000..5000: median the 3rd, p90 the 5th.
        assert_eq!((s.median_ms, s.p90_ms), (Some(3000), Some(5000)));
    }

    #[test]
    fn every_run_an_infra_error_is_no_rate() {
        let lines = [
            line("c1", 1, Outcome::InfraError, 0, 10),
            line("c2", 1, Outcome::InfraError, 0, 10),
        ];
        let refs: Vec<&ResultLine> = lines.iter().collect();
        let s = of_config("a", &serde_json::json!({}), 2, 1, &refs);
        assert_eq!((s.resolved, s.total), (0, 0));
        assert_eq!(s.pass_at_1, None);
        assert_eq!(s.interval_95, None);
        assert_eq!(s.tokens, None);
        assert_eq!(super::super::table::rate(s.pass_at_1), "n/a");
    }
}
