//! `agent-runner usage` (SPEC §15): tokens and cost per day and per model over the
//! attempts of a workspace, from their lines' `usage` (the runner's calls, by model)
//! and `builder_usage` (the Task Builder's call). Every task file counts, deleted
//! tasks too: their money was spent. Days are UTC, from the attempt's start.

use std::collections::BTreeMap;

use serde::Serialize;

use super::task_file::AttemptSpend;
use super::task_store::is_task_file;
use crate::{PipelineError, Workspace};
use agent_runner_core::fs::jsonl;
use agent_runner_core::usage::ModelUsage;

/// Largest task file read (as the TaskStore reads them).
const MAX_TASK_FILE: u64 = 64 << 20;

/// The report.
#[derive(Debug, Default, Serialize)]
pub struct Spending {
    /// Oldest first.
    pub days: Vec<Day>,
    /// Every day together, by model.
    pub models: Vec<ModelUsage>,
    pub total_tokens: u64,
    /// Null when a model without a price was used.
    pub cost_usd: Option<f64>,
    /// Attempts counted (those with usage recorded).
    pub attempts: u64,
}

/// One day's spending, by model.
#[derive(Debug, Serialize)]
pub struct Day {
    /// `YYYY-MM-DD` (UTC).
    pub day: String,
    pub models: Vec<ModelUsage>,
    pub(crate) total_tokens: u64,
    pub(crate) cost_usd: Option<f64>,
}

/// Adds up the attempts of `ws` that started on `since` (`YYYY-MM-DD`) or later.
pub fn report(ws: &Workspace, since: Option<&str>) -> Result<Spending, PipelineError> {
    let dir = ws.tasks_dir();
    let read = match std::fs::read_dir(&dir) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Spending::default()),
        Err(e) => return Err(PipelineError::io("list", &dir)(e)),
    };
    // day → model → sum
    let mut days: BTreeMap<String, BTreeMap<Option<String>, ModelUsage>> = BTreeMap::new();
    let mut attempts = 0;
    let mut bytes = Vec::new();
    for entry in read.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(is_task_file) {
            continue;
        }
        if let Err(e) =
            agent_runner_core::fs::read::whole_into(&entry.path(), &mut bytes, MAX_TASK_FILE)
        {
            log::warn!("tasks/{}: skipped ({e})", name.to_string_lossy());
            continue;
        }
        for (_, line, _) in jsonl::lines(&bytes) {
            let Some(spend) = AttemptSpend::of(line) else {
                continue;
            };
            let day = spend.started_at.get(..10).unwrap_or("unknown").to_string();
            if since.is_some_and(|since| day.as_str() < since) {
                continue;
            }
            let parts = parts(&spend);
            if parts.is_empty() {
                continue;
            }
            attempts += 1;
            let models = days.entry(day).or_default();
            for part in parts {
                models
                    .entry(part.model.clone())
                    .or_insert_with(|| ModelUsage::new(part.model.clone()))
                    .add(&part);
            }
        }
    }
    let mut all: BTreeMap<Option<String>, ModelUsage> = BTreeMap::new();
    let days: Vec<Day> = days
        .into_iter()
        .map(|(day, models)| {
            let models: Vec<ModelUsage> = models.into_values().collect();
            for m in &models {
                all.entry(m.model.clone())
                    .or_insert_with(|| ModelUsage::new(m.model.clone()))
                    .add(m);
            }
            let (total_tokens, cost_usd) = totals(&models);
            Day {
                day,
                models,
                total_tokens,
                cost_usd,
            }
        })
        .collect();
    let models: Vec<ModelUsage> = all.into_values().collect();
    let (total_tokens, cost_usd) = totals(&models);
    Ok(Spending {
        days,
        models,
        total_tokens,
        cost_usd,
        attempts,
    })
}

/// An attempt's spending by model: the runner's (by model, or its two sides when
/// the line predates the breakdown) and the Task Builder's.
fn parts(spend: &AttemptSpend) -> Vec<ModelUsage> {
    let mut parts = Vec::new();
    if let Some(usage) = &spend.usage {
        if usage.models.is_empty() && usage.total_tokens > 0 {
            let mut unknown = ModelUsage::new(None);
            unknown.calls = usage.meta.calls.saturating_add(usage.worker.runs);
            unknown.tokens = usage.meta.tokens;
            unknown.tokens.add(&usage.worker.tokens);
            unknown.cost_usd = usage.cost_usd;
            parts.push(unknown);
        }
        parts.extend(usage.models.iter().cloned());
    }
    parts.extend(spend.builder_usage.iter().cloned());
    parts
}

fn totals(models: &[ModelUsage]) -> (u64, Option<f64>) {
    let tokens = models
        .iter()
        .fold(0u64, |sum, m| sum.saturating_add(m.total_tokens()));
    let cost = models
        .iter()
        .try_fold(0.0, |sum, m| m.cost_usd.map(|c| sum + c))
        .map(agent_runner_core::usage::account::round);
    (tokens, cost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::task_file::tests::{attempt, record};
    use crate::store::task_file::{AttemptStatus, Line};
    use crate::store::task_store::TaskStore;
    use agent_runner_core::usage::{Account, Pricing, Tokens, Usage};

    fn used(model: &str, input: u64, output: u64) -> Usage {
        Usage::of(
            Some(model),
            Some(Tokens {
                input_tokens: input,
                cached_input_tokens: 0,
                output_tokens: output,
                ..Default::default()
            }),
        )
    }

    #[test]
    fn spending_is_added_up_per_day_and_model() {
        let (ws, base) = crate::store::workspace::scratch("spending");
        let store = TaskStore::new(&ws);
        store.create(&record("t-1")).unwrap();
        let pricing = Pricing {
            models: [(
                "m".to_string(),
                agent_runner_core::usage::Price {
                    input: 1.0,
                    cached_input: 1.0,
                    cache_write: 1.0,
                    output: 1.0,
                },
            )]
            .into(),
        };
        let mut a = attempt("j1", AttemptStatus::Succeeded);
        a.started_at = "2026-05-01T10:00:00.000Z".into();
        a.usage = Some(Account::of(
            &[used("m", 1_000_000, 0)],
            &[used("w", 100, 10)],
            &pricing,
        ));
        a.builder_usage = Some(ModelUsage::of(&used("m", 500_000, 500_000), &pricing));
        let mut b = attempt("j2", AttemptStatus::Failed);
        b.started_at = "2026-05-02T10:00:00.000Z".into();
        b.usage = Some(Account::of(&[used("m", 2_000_000, 0)], &[], &pricing));
        let mut c = attempt("j3", AttemptStatus::Failed);
        c.started_at = "2026-05-02T11:00:00.000Z".into();
        for line in [a, b, c] {
            store.append("t-1", &Line::Attempt(Box::new(line))).unwrap();
        }
        let all = report(&ws, None).unwrap();
        assert_eq!(all.attempts, 2, "an attempt without usage is not counted");
        assert_eq!(all.days.len(), 2);
        assert_eq!(all.days[0].day, "2026-05-01");
        let m = &all.days[0].models[0];
        assert_eq!(
            (m.model.as_deref(), m.calls, m.total_tokens()),
            (Some("m"), 2, 2_000_000)
        );
        assert_eq!(m.cost_usd, Some(2.0));
        assert_eq!(all.days[0].cost_usd, None, "w has no price");
        assert_eq!(all.days[1].cost_usd, Some(2.0));
        assert_eq!(all.total_tokens, 1_000_000 + 110 + 1_000_000 + 2_000_000);
        let since = report(&ws, Some("2026-05-02")).unwrap();
        assert_eq!((since.days.len(), since.total_tokens), (1, 2_000_000));
        std::fs::remove_dir_all(base).unwrap();
    }

    /// Another program's attempt line whose counts are near the top of their type:
    /// a line without the per-model breakdown adds its two sides' counts, which
    /// must saturate rather than wrap (or panic in a debug build).
    #[test]
    fn forged_counts_of_a_line_without_models_saturate() {
        let (ws, base) = crate::store::workspace::scratch("spending-forged");
        let store = TaskStore::new(&ws);
        store.create(&record("t-1")).unwrap();
        let mut a = attempt("j1", AttemptStatus::Failed);
        a.started_at = "2026-05-01T10:00:00.000Z".into();
        let mut usage = Account {
            total_tokens: 1,
            ..Account::default()
        };
        usage.meta.calls = u32::MAX;
        usage.worker.runs = 2;
        usage.meta.tokens.input_tokens = u64::MAX;
        usage.worker.tokens.input_tokens = u64::MAX;
        a.usage = Some(usage);
        store.append("t-1", &Line::Attempt(Box::new(a))).unwrap();
        let all = report(&ws, None).unwrap();
        let m = &all.models[0];
        assert_eq!((m.model.as_deref(), m.calls), (None, u32::MAX));
        assert_eq!(m.tokens.input_tokens, u64::MAX);
        assert_eq!(all.total_tokens, u64::MAX);
        std::fs::remove_dir_all(base).unwrap();
    }
}
