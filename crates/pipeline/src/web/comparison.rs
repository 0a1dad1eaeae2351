//! A best of N run's comparison (SPEC §23) on the task page: one row per try
//! (kind, verified, criteria, diff stat, cost, time, branch), then who won, by which
//! rule, and the judge's why. Every text is escaped.

use std::fmt::Write as _;

use super::html::{push_text, text};
use crate::store::tries::Comparison;

/// The `<section id="tries">` of the judged attempt's comparison.
pub(crate) fn section(out: &mut String, comparison: &Comparison) {
    out.push_str("<section id=\"tries\">\n<h2>Tries</h2>\n<table id=\"tries-table\">\n<thead><tr><th class=\"n\">Try</th><th>Kind</th><th>Status</th><th>Verified</th><th class=\"n\">Criteria</th><th>Diff</th><th class=\"n\">Cost</th><th class=\"n\">Time</th><th>Branch</th></tr></thead>\n<tbody>\n");
    for row in &comparison.rows {
        let won = comparison.winner == Some(row.k);
        let _ = write!(
            out,
            "<tr{}><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td><code>",
            if won { " class=\"winner\"" } else { "" },
            row.k,
            text(&row.kind),
            text(&row.status),
            if row.verified { "yes" } else { "no" },
            text(&row.criteria_line()),
            text(&row.diff_line()),
            text(&row.cost_usd.map_or("—".into(), |c| format!(
                "${}",
                agent_runner_core::usage::usd(c)
            ))),
            text(&agent_runner_core::timestamp::human(
                std::time::Duration::from_millis(row.duration_ms)
            )),
        );
        push_text(out, row.branch.as_deref().unwrap_or("—"));
        out.push_str("</code></td></tr>\n");
    }
    out.push_str("</tbody>\n</table>\n<p id=\"tries-why\">");
    match comparison.winner {
        Some(k) => {
            let _ = write!(out, "Winner: try {k} ({}): ", text(&comparison.rule));
        }
        None => out.push_str("No winner: "),
    }
    push_text(out, &comparison.why);
    out.push_str("</p>\n");
    if let Some(e) = &comparison.judge_error {
        out.push_str("<p class=\"muted\">The judge was not followed: ");
        push_text(out, e);
        out.push_str("</p>\n");
    }
    out.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tries::Row;

    #[test]
    fn every_text_is_escaped_and_the_winner_marked() {
        let comparison = Comparison {
            winner: Some(2),
            rule: "judge".into(),
            why: "<script>alert(1)</script>".into(),
            judge_error: None,
            rows: (1..=2)
                .map(|k| Row {
                    k,
                    kind: "codex-cli".into(),
                    job_id: format!("j-{k}"),
                    status: "succeeded".into(),
                    verified: true,
                    criteria: Some([1, 1]),
                    diff: Some([1, 2, 0]),
                    cost_usd: None,
                    duration_ms: 1500,
                    branch: Some(format!("agent-runner/<t>-try-{k}")),
                })
                .collect(),
            budget: None,
            tokens: None,
            cost_usd: None,
        };
        let mut out = String::new();
        section(&mut out, &comparison);
        assert!(!out.contains("<script>"), "{out}");
        assert!(out.contains("&lt;script&gt;"), "{out}");
        assert!(out.contains("agent-runner/&lt;t&gt;-try-1"), "{out}");
        assert_eq!(out.matches("class=\"winner\"").count(), 1);
        assert!(out.contains("Winner: try 2 (judge)"), "{out}");
    }
}
