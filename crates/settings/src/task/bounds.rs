//! `runner.pricing`, `runner.budget` and `runner.max_stalled_loops` → `Bounds`
//! (SPEC §15): prices checked as numbers a bill can have, limits in range, and a
//! cost limit refused when a model that will run has no price (the limit could not
//! be kept). Every problem is recorded.

use std::collections::BTreeMap;

use super::fields::seconds;
use super::input_error::{InputError, InputErrors};
use super::raw::{RawBudget, RawPrice};
use super::settings::MAX_LOOPS;
use super::{Bounds, Budget, MetaBackend, MetaSettings, WorkerSettings};
use agent_runner_core::text::cut_chars;
use agent_runner_core::usage::{Price, Pricing};

/// Default `runner.max_stalled_loops`.
pub const DEFAULT_MAX_STALLED_LOOPS: u32 = 3;
/// Highest price accepted, in USD per million tokens: far above any model's, low
/// enough that a cost stays an exact-enough float.
pub(crate) const MAX_PRICE: f64 = 1_000_000.0;

/// The raw `runner:` keys of this module.
pub(crate) struct RawBounds {
    pub(crate) pricing: Option<BTreeMap<String, RawPrice>>,
    pub(crate) budget: Option<RawBudget>,
    pub(crate) max_stalled_loops: Option<u64>,
}

/// `Bounds`, or None after recording a problem.
pub(crate) fn bounds(raw: RawBounds, problems: &mut InputErrors) -> Option<Bounds> {
    let pricing = pricing(raw.pricing.unwrap_or_default(), problems);
    let budget = budget(raw.budget.unwrap_or_default(), problems);
    let stalled = raw
        .max_stalled_loops
        .unwrap_or(u64::from(DEFAULT_MAX_STALLED_LOOPS));
    let max_stalled_loops = match u32::try_from(stalled) {
        Ok(n) if stalled <= MAX_LOOPS => Some(n),
        _ => problems.take(Err(InputError::new(
            "runner.max_stalled_loops",
            format!("must be between 0 (off) and {MAX_LOOPS} (got {stalled})"),
        ))),
    };
    Some(Bounds {
        pricing: pricing?,
        budget: budget?,
        max_stalled_loops: max_stalled_loops?,
    })
}

fn pricing(raw: BTreeMap<String, RawPrice>, problems: &mut InputErrors) -> Option<Pricing> {
    let mut models = BTreeMap::new();
    let mut complete = true;
    for (model, raw) in raw {
        let path = format!("runner.pricing.{}", cut_chars(&model, 60));
        if model.trim().is_empty() {
            problems.push(InputError::new(path, "the model name is empty"));
            complete = false;
            continue;
        }
        let mut amount = |value: Option<f64>, key: &str, fallback: Option<f64>| {
            let field = format!("{path}.{key}");
            match value.or(fallback) {
                None => problems.take(Err(InputError::new(
                    field,
                    "required: USD per million tokens",
                )
                .with_hint(format!(
                    "runner:\n  pricing:\n    {model}: {{input: 1.25, cached_input: 0.125, output: 10.0}}"
                )))),
                Some(v) if !(0.0..=MAX_PRICE).contains(&v) => problems.take(Err(InputError::new(
                    field,
                    format!("must be between 0 and {MAX_PRICE} USD per million tokens (got {v})"),
                ))),
                Some(v) => Some(v),
            }
        };
        let input = amount(raw.input, "input", None);
        let cached_input = amount(raw.cached_input, "cached_input", input);
        let cache_write = amount(raw.cache_write, "cache_write", input);
        let output = amount(raw.output, "output", None);
        match (input, cached_input, cache_write, output) {
            (Some(input), Some(cached_input), Some(cache_write), Some(output)) => {
                models.insert(
                    model,
                    Price {
                        input,
                        cached_input,
                        cache_write,
                        output,
                    },
                );
            }
            _ => complete = false,
        }
    }
    complete.then_some(Pricing { models })
}

fn budget(raw: RawBudget, problems: &mut InputErrors) -> Option<Budget> {
    let max_tokens = match raw.max_tokens {
        Some(0) => problems.take(Err(InputError::new(
            "runner.budget.max_tokens",
            "must be at least 1 (leave it out for no limit)",
        ))),
        tokens => Some(tokens),
    };
    let max_cost_usd = match raw.max_cost_usd {
        Some(cost) if !(cost > 0.0 && cost <= MAX_PRICE) => problems.take(Err(InputError::new(
            "runner.budget.max_cost_usd",
            format!("must be more than 0 and at most {MAX_PRICE} (got {cost})"),
        ))),
        cost => Some(cost),
    };
    let max_duration = match raw.max_duration_sec {
        None => Some(None),
        Some(secs) => problems
            .take(seconds(Some(secs), 0, "runner.budget.max_duration_sec"))
            .map(Some),
    };
    Some(Budget {
        max_tokens: max_tokens?,
        max_cost_usd: max_cost_usd?,
        max_duration: max_duration?,
    })
}

/// With `max_cost_usd`, every model that will run needs a price: Meta's (unless
/// scripted, which costs nothing; with `codex-cli` codex's `-m`, which must then be
/// known) and the worker's, which must then be named (the agent picks its own
/// default otherwise, whose price nobody can know). A cost the agent reports itself
/// (claude) does not stand in for a price: a run stopped before its end reports
/// none, and the limit would go blind.
pub fn unpriced(
    bounds: &Bounds,
    meta: &MetaSettings,
    worker: &WorkerSettings,
) -> Option<InputError> {
    bounds.budget.max_cost_usd?;
    let hint = |model: &str| {
        format!(
            "add its price in USD per million tokens, e.g.\nrunner:\n  pricing:\n    {model}: {{input: 1.25, cached_input: 0.125, output: 10.0}}"
        )
    };
    let field = "runner.budget.max_cost_usd";
    let priced = |model: &str| bounds.pricing.price(model).is_some();
    if let MetaBackend::CodexCli(codex) = &meta.backend {
        match codex.model_next_to(worker) {
            None => {
                return Some(
                    InputError::new(
                        field,
                        "Meta's codex model is not set (runner.meta.model), so codex runs its own default, whose price cannot be known",
                    )
                    .with_hint("set runner.meta.model and give its price in runner.pricing"),
                );
            }
            Some(model) if !priced(&model) => {
                return Some(
                    InputError::new(
                        field,
                        format!(
                            "Meta's codex model {:?} (runner.meta.model) has no price in runner.pricing, so the cost cannot be known",
                            cut_chars(&model, 80)
                        ),
                    )
                    .with_hint(hint(&model)),
                );
            }
            Some(_) => {}
        }
    }
    if matches!(meta.backend, MetaBackend::Api(_)) && !priced(&meta.model) {
        return Some(
            InputError::new(
                field,
                format!(
                    "Meta's model {:?} (runner.meta.model) has no price in runner.pricing, so the cost cannot be known",
                    cut_chars(&meta.model, 80)
                ),
            )
            .with_hint(hint(&meta.model)),
        );
    }
    match &worker.model {
        None => Some(
            InputError::new(
                field,
                format!(
                    "the worker's model is not set (runner.worker.model), so {} runs its own default, whose price cannot be known",
                    worker.kind.program()
                ),
            )
            .with_hint("set runner.worker.model and give its price in runner.pricing"),
        ),
        Some(model) if !priced(model) => Some(
            InputError::new(
                field,
                format!(
                    "the worker's model {:?} (runner.worker.model) has no price in runner.pricing, so the cost cannot be known",
                    cut_chars(model, 80)
                ),
            )
            .with_hint(hint(model)),
        ),
        Some(_) => None,
    }
}

impl Budget {
    /// No limit at all.
    pub fn is_unlimited(&self) -> bool {
        self.max_tokens.is_none() && self.max_cost_usd.is_none() && self.max_duration.is_none()
    }
}
