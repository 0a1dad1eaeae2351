//! `agent-runner usage [-w DIR] [--since YYYY-MM-DD] [--json]`: what the workspace's
//! attempts used and cost, per day and per model (SPEC §15).

use std::path::Path;

use crate::error::{Error, exit};
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::{escape_controls, fit};
use agent_runner_core::usage::{ModelUsage, usd};
use agent_runner_pipeline::Workspace;
use agent_runner_pipeline::store::spending::{self, Spending};

use super::{report, write_json_stdout, write_stdout};

/// Runs the command; returns the exit code.
pub(crate) fn run(dir: &Path, since: Option<String>, json: bool) -> i32 {
    match usage(dir, since.as_deref(), json) {
        Ok(code) => code,
        Err(e) => report(&e, &Redactor::default()),
    }
}

fn usage(dir: &Path, since: Option<&str>, json: bool) -> Result<i32, Error> {
    let ws = Workspace::open(&super::home()?, dir)?;
    let spending = spending::report(&ws, since)?;
    if json {
        #[derive(serde::Serialize)]
        struct Document<'a> {
            workspace_id: &'a str,
            since: Option<&'a str>,
            #[serde(flatten)]
            spending: &'a Spending,
        }
        write_json_stdout(&Document {
            workspace_id: &ws.id,
            since,
            spending: &spending,
        })?;
        return Ok(exit::COMPLETE);
    }
    write_stdout(&table(&spending))?;
    Ok(exit::COMPLETE)
}

/// The report for people: a row per day and model, a total per model.
fn table(spending: &Spending) -> String {
    let mut out = format!(
        "{} {} {:>6} {:>12} {:>12} {:>12} {:>12} {:>11}\n",
        fit("DAY", 10),
        fit("MODEL", 28),
        "CALLS",
        "INPUT",
        "CACHED",
        "OUTPUT",
        "TOKENS",
        "COST"
    );
    let row = |out: &mut String, day: &str, m: &ModelUsage| {
        let model = escape_controls(m.model.as_deref().unwrap_or("(not known)"));
        out.push_str(&format!(
            "{} {} {:>6} {:>12} {:>12} {:>12} {:>12} {:>11}\n",
            fit(day, 10),
            fit(&model, 28),
            m.calls,
            m.tokens.input_tokens,
            m.tokens.cached_input_tokens,
            m.tokens.output_tokens,
            m.total_tokens(),
            cost(m.cost_usd)
        ));
    };
    for day in &spending.days {
        for m in &day.models {
            row(&mut out, &day.day, m);
        }
    }
    if spending.days.is_empty() {
        out.push_str("(no attempt with recorded usage)\n");
        return out;
    }
    for m in &spending.models {
        row(&mut out, "all", m);
    }
    out.push_str(&format!(
        "total: {} tokens, {} over {} attempt(s)\n",
        spending.total_tokens,
        cost(spending.cost_usd),
        spending.attempts
    ));
    if spending.cost_usd.is_none() {
        out.push_str("(cost: - where a model has no price in the workspace's runner.pricing)\n");
    }
    out
}

fn cost(usd_amount: Option<f64>) -> String {
    usd_amount.map_or("-".into(), |c| format!("${}", usd(c)))
}

/// `--since`: a date `YYYY-MM-DD`.
pub(crate) fn date(value: &str) -> Result<String, super::bad_value::BadValue> {
    let b = value.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let ok = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && digits(0..4)
        && digits(5..7)
        && digits(8..10)
        && (1..=12).contains(&value[5..7].parse::<u8>().unwrap_or(0))
        && (1..=31).contains(&value[8..10].parse::<u8>().unwrap_or(0));
    if ok {
        Ok(value.to_string())
    } else {
        Err(super::bad_value::BadValue::Date(value.to_string()))
    }
}
