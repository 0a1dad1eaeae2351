//! The summary as a terminal table: one row per config.

use super::summary::Summary;

/// A rate as a percentage, or `n/a` when there is none (every run an infra_error).
pub fn rate(value: Option<f64>) -> String {
    value.map_or("n/a".into(), |v| format!("{:.1}%", v * 100.0))
}

fn seconds(ms: Option<u64>) -> String {
    ms.map_or("-".into(), |ms| format!("{:.1}s", ms as f64 / 1000.0))
}

/// The table's lines.
pub fn render(summary: &Summary) -> String {
    let k = summary.tries.max(1);
    let mut rows = vec![vec![
        "CONFIG".to_string(),
        "RESOLVED".into(),
        "PASS@1".into(),
        "95% CI".into(),
        if k == 1 {
            String::new()
        } else {
            format!("PASS@{k}")
        },
        "AGENT_FAILED".into(),
        "INFRA".into(),
        "PENDING".into(),
        "TOKENS/CASE".into(),
        "COST/RESOLVED".into(),
        "MEDIAN".into(),
        "P90".into(),
    ]];
    for c in &summary.configs {
        let count = |o: &str| c.outcomes.get(o).copied().unwrap_or(0).to_string();
        rows.push(vec![
            c.name.clone(),
            format!("{}/{}", c.resolved, c.total),
            rate(c.pass_at_1),
            c.interval_95.map_or("n/a".into(), |[a, b]| {
                format!("{:.0}-{:.0}%", a * 100.0, b * 100.0)
            }),
            if k == 1 {
                String::new()
            } else {
                rate(c.pass_at_k.get(&k.to_string()).copied().flatten())
            },
            count("agent_failed"),
            if c.infra_retried > 0 {
                format!("{} (+{} retried)", count("infra_error"), c.infra_retried)
            } else {
                count("infra_error")
            },
            c.pending.to_string(),
            c.tokens_per_case.map_or("-".into(), |t| format!("{t:.0}")),
            c.cost_per_resolved_usd
                .map_or("-".into(), |c| format!("${c:.4}")),
            seconds(c.median_ms),
            seconds(c.p90_ms),
        ]);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        // With one try, the pass@k column is empty throughout: left out.
        let cells: Vec<&str> = cells
            .iter()
            .map(String::as_str)
            .filter(|c| !c.is_empty())
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}
