//! The evaluations of the workspace (SPEC §26): each eval's summary.json as a table
//! and, per config, a chart drawn here as SVG (no library): the runs' outcomes as a
//! stacked bar, and pass@1 with its 95 % interval on a 0–100 % axis. Every text
//! from the files is escaped; the numbers are formatted by us.

use std::fmt::Write as _;

use super::html::text;
use crate::Workspace;
use crate::eval::summary::{self, ConfigSummary, Summary};
use crate::eval::table::rate;

/// Chart geometry: the plot spans x = LEFT ..= LEFT + WIDTH.
const LEFT: f64 = 10.0;
const WIDTH: f64 = 380.0;

/// The evaluations' summaries, the newest first.
pub(crate) fn summaries(ws: &Workspace) -> Vec<(String, Summary)> {
    let mut out: Vec<(String, Summary)> = std::fs::read_dir(ws.dir.join("evals"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            Some((name, summary::read(&e.path().join("summary.json"))?))
        })
        .collect();
    out.sort_by(|a, b| b.1.written_at.cmp(&a.1.written_at));
    out
}

/// The page's main part.
pub(crate) fn main(ws: &Workspace) -> String {
    let mut out = String::from("<h1>Evaluations</h1>\n");
    let all = summaries(ws);
    if all.is_empty() {
        out.push_str("<p class=\"muted\">No evaluation in this workspace: run <code>agent-runner eval run SUITE.yaml -w DIR</code> and serve DIR.</p>\n");
    }
    for (id, s) in &all {
        let _ = writeln!(
            out,
            "<section class=\"eval\" id=\"eval-{}\">\n<h2>{} <code class=\"id\">{}</code></h2>\n<p class=\"muted\">{} case(s) × {} tr{}, suite sha256 <code>{}</code>, agent-runner {}, written {}</p>",
            text(id),
            text(&s.suite.name),
            text(id),
            s.suite.cases,
            s.tries,
            if s.tries == 1 { "y" } else { "ies" },
            text(&s.suite.sha256),
            text(&s.agent_runner),
            text(&s.written_at),
        );
        table(&mut out, s);
        for c in &s.configs {
            chart(&mut out, c);
        }
        out.push_str("</section>\n");
    }
    out
}

fn table(out: &mut String, s: &Summary) {
    out.push_str("<table class=\"eval-table\">\n<thead><tr><th>Config</th><th class=\"n\">Resolved</th><th class=\"n\">pass@1</th><th class=\"n\">95 % interval</th><th class=\"n\">Agent failed</th><th class=\"n\">Infra error</th><th class=\"n\">Pending</th><th class=\"n\">Tokens / case</th><th class=\"n\">Cost / resolved</th><th class=\"n\">Median</th><th class=\"n\">p90</th></tr></thead>\n<tbody>\n");
    for c in &s.configs {
        let count = |o: &str| c.outcomes.get(o).copied().unwrap_or(0);
        let seconds =
            |ms: Option<u64>| ms.map_or("—".into(), |ms| format!("{:.1} s", ms as f64 / 1000.0));
        let _ = writeln!(
            out,
            "<tr data-config=\"{}\"><td>{}</td><td class=\"n resolved\">{}/{}</td><td class=\"n pass1\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            text(&c.name),
            text(&c.name),
            c.resolved,
            c.total,
            text(&rate(c.pass_at_1)),
            c.interval_95.map_or("n/a".into(), |[a, b]| format!(
                "{:.0}–{:.0} %",
                a * 100.0,
                b * 100.0
            )),
            count("agent_failed"),
            count("infra_error"),
            c.pending,
            c.tokens_per_case.map_or("—".into(), |t| format!("{t:.0}")),
            c.cost_per_resolved_usd
                .map_or("—".into(), |c| format!("${c:.4}")),
            seconds(c.median_ms),
            seconds(c.p90_ms),
        );
    }
    out.push_str("</tbody>\n</table>\n");
}

/// The outcomes' colours (also named in the legend).
const OUTCOMES: [(&str, &str); 4] = [
    ("resolved", "#2e7d32"),
    ("unresolved", "#c62828"),
    ("agent_failed", "#ef6c00"),
    ("infra_error", "#9e9e9e"),
];

/// One config's chart.
fn chart(out: &mut String, c: &ConfigSummary) {
    let runs: usize = c.outcomes.values().sum::<usize>() + c.pending;
    let label = format!(
        "{}: {} of {} resolved, pass@1 {}",
        c.name,
        c.resolved,
        c.total,
        rate(c.pass_at_1)
    );
    let _ = write!(
        out,
        "<figure class=\"eval-chart\" data-config=\"{}\"><figcaption>{}</figcaption>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"84\" viewBox=\"0 0 400 84\" role=\"img\" aria-label=\"{}\">",
        text(&c.name),
        text(&c.name),
        text(&label)
    );
    // The runs, stacked by outcome.
    let mut x = LEFT;
    for (outcome, colour) in OUTCOMES {
        let n = c.outcomes.get(outcome).copied().unwrap_or(0);
        if n == 0 || runs == 0 {
            continue;
        }
        let w = WIDTH * n as f64 / runs as f64;
        let _ = write!(
            out,
            "<rect class=\"bar {outcome}\" x=\"{x:.2}\" y=\"8\" width=\"{w:.2}\" height=\"22\" fill=\"{colour}\"><title>{outcome}: {n}</title></rect>"
        );
        x += w;
    }
    if c.pending > 0 && runs > 0 {
        let w = WIDTH * c.pending as f64 / runs as f64;
        let _ = write!(
            out,
            "<rect class=\"bar pending\" x=\"{x:.2}\" y=\"8\" width=\"{w:.2}\" height=\"22\" fill=\"none\" stroke=\"#9e9e9e\"><title>pending: {}</title></rect>",
            c.pending
        );
    }
    // pass@1 and its interval on the axis.
    let at = |v: f64| LEFT + WIDTH * v.clamp(0.0, 1.0);
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"52\" x2=\"{:.2}\" y2=\"52\" stroke=\"#888\"/><text x=\"{LEFT}\" y=\"70\" font-size=\"10\">0 %</text><text x=\"{:.2}\" y=\"70\" font-size=\"10\" text-anchor=\"end\">100 %</text>",
        LEFT + WIDTH,
        LEFT + WIDTH
    );
    match (c.pass_at_1, c.interval_95) {
        (Some(p), Some([lo, hi])) => {
            let _ = write!(
                out,
                "<line class=\"interval\" x1=\"{:.2}\" y1=\"52\" x2=\"{:.2}\" y2=\"52\" stroke=\"#1565c0\" stroke-width=\"4\"><title>95 % interval {:.0}–{:.0} %</title></line><circle class=\"pass1\" cx=\"{:.2}\" cy=\"52\" r=\"5\" fill=\"#1565c0\"><title>pass@1 {}</title></circle>",
                at(lo),
                at(hi),
                lo * 100.0,
                hi * 100.0,
                at(p),
                text(&rate(Some(p)))
            );
        }
        _ => {
            out.push_str("<text class=\"na\" x=\"200\" y=\"48\" font-size=\"12\" text-anchor=\"middle\">pass@1 n/a</text>");
        }
    }
    out.push_str("</svg></figure>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str, outcomes: &[(&str, usize)], pass: Option<f64>) -> ConfigSummary {
        serde_json::from_value(serde_json::json!({
            "name": name, "agents": {}, "runs": 4,
            "outcomes": outcomes.iter().map(|(k, v)| (k.to_string(), *v)).collect::<std::collections::BTreeMap<_, _>>(),
            "resolved": 1, "total": 2, "pending": 0, "infra_retried": 0, "pass_at_1": pass, "pass_at_k": {},
            "interval_95": pass.map(|_| [0.1, 0.9]), "interval_method": "wilson",
            "tokens": null, "tokens_per_case": null, "tokens_per_resolved": null,
            "cost_usd": null, "cost_per_case_usd": null, "cost_per_resolved_usd": null,
            "median_ms": null, "p90_ms": null
        }))
        .unwrap()
    }

    #[test]
    fn the_chart_stacks_the_outcomes_and_escapes_the_name() {
        let mut out = String::new();
        chart(
            &mut out,
            &config(
                "<b>x</b>",
                &[("resolved", 1), ("unresolved", 1), ("infra_error", 2)],
                Some(0.5),
            ),
        );
        assert!(!out.contains("<b>"), "{out}");
        assert!(out.contains("&lt;b&gt;x&lt;/b&gt;"));
        assert!(
            out.contains("<rect class=\"bar resolved\" x=\"10.00\" y=\"8\" width=\"95.00\""),
            "{out}"
        );
        assert!(
            out.contains("<rect class=\"bar infra_error\" x=\"200.00\" y=\"8\" width=\"190.00\""),
            "{out}"
        );
        assert!(
            out.contains("<circle class=\"pass1\" cx=\"200.00\""),
            "{out}"
        );
        let mut out = String::new();
        chart(&mut out, &config("a", &[("infra_error", 4)], None));
        assert!(out.contains("pass@1 n/a"), "{out}");
    }
}
