//! A task's usage added up: the result JSON's `usage` object (SPEC §15), also kept
//! on the pipeline's attempt lines, where `task list`, `orchestrate` limits and
//! `agent-runner usage` read it back.

use serde::{Deserialize, Serialize};

use super::price::Pricing;
use super::tokens::{Tokens, Usage};

/// The `usage` object of a result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Account {
    #[serde(default)]
    pub meta: MetaSide,
    #[serde(default)]
    pub worker: WorkerSide,
    /// Input plus output tokens of both sides.
    #[serde(default)]
    pub total_tokens: u64,
    /// Null when a model that was used has no price (and its CLI reported no cost).
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// The same calls by model, for reports per model.
    #[serde(default)]
    pub models: Vec<ModelUsage>,
}

/// Meta's calls added up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetaSide {
    #[serde(default)]
    pub calls: u32,
    #[serde(flatten)]
    pub tokens: Tokens,
    /// Calls whose provider reported no usage: their tokens are not in the sums.
    #[serde(default)]
    pub unreported: u32,
}

/// The worker's runs added up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerSide {
    #[serde(default)]
    pub runs: u32,
    #[serde(flatten)]
    pub tokens: Tokens,
    /// Runs that reported no usage (e.g. stopped before their turn completed).
    #[serde(default)]
    pub unreported: u32,
}

/// The calls of one model added up (the Task Builder's calls of an attempt, or a
/// model's share of a task).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelUsage {
    /// None when the model is not known (codex's own default).
    pub model: Option<String>,
    #[serde(default)]
    pub calls: u32,
    #[serde(flatten)]
    pub tokens: Tokens,
    #[serde(default)]
    pub(crate) unreported: u32,
    #[serde(default)]
    pub cost_usd: Option<f64>,
}

impl ModelUsage {
    /// Nothing yet, on `model`.
    pub fn new(model: Option<String>) -> ModelUsage {
        ModelUsage {
            model,
            cost_usd: Some(0.0),
            ..ModelUsage::default()
        }
    }

    /// One call's usage, priced by `pricing`.
    pub fn of(usage: &Usage, pricing: &Pricing) -> ModelUsage {
        let mut sum = ModelUsage::new(usage.model.clone());
        sum.add_call(usage, pricing.cost(usage));
        sum
    }

    /// Adds one call that cost `cost` (None: not known).
    pub(crate) fn add_call(&mut self, usage: &Usage, cost: Option<f64>) {
        self.calls = self.calls.saturating_add(1);
        match &usage.tokens {
            Some(tokens) => self.tokens.add(tokens),
            None => self.unreported = self.unreported.saturating_add(1),
        }
        self.cost_usd = add_cost(self.cost_usd, cost);
    }

    /// Adds another sum of the same model's calls.
    pub fn add(&mut self, other: &ModelUsage) {
        self.calls = self.calls.saturating_add(other.calls);
        self.tokens.add(&other.tokens);
        self.unreported = self.unreported.saturating_add(other.unreported);
        self.cost_usd = add_cost(self.cost_usd, other.cost_usd);
    }

    pub fn total_tokens(&self) -> u64 {
        self.tokens.total()
    }
}

impl Account {
    /// The account of a task's Meta calls and worker runs, priced by `pricing`.
    pub fn of<'a>(
        meta: impl IntoIterator<Item = &'a Usage>,
        worker: impl IntoIterator<Item = &'a Usage>,
        pricing: &Pricing,
    ) -> Account {
        let mut account = Account {
            cost_usd: Some(0.0),
            ..Account::default()
        };
        for usage in meta {
            account.meta.calls = account.meta.calls.saturating_add(1);
            match &usage.tokens {
                Some(tokens) => account.meta.tokens.add(tokens),
                None => account.meta.unreported = account.meta.unreported.saturating_add(1),
            }
            account.count(usage, pricing);
        }
        for usage in worker {
            account.worker.runs = account.worker.runs.saturating_add(1);
            match &usage.tokens {
                Some(tokens) => account.worker.tokens.add(tokens),
                None => account.worker.unreported = account.worker.unreported.saturating_add(1),
            }
            account.count(usage, pricing);
        }
        account.total_tokens = account
            .meta
            .tokens
            .total()
            .saturating_add(account.worker.tokens.total());
        account.cost_usd = account.cost_usd.map(round);
        for model in &mut account.models {
            model.cost_usd = model.cost_usd.map(round);
        }
        account
    }

    /// This account and `later` together: a resumed task's runs before and its own
    /// (SPEC §19: usage and budget count the whole task).
    pub fn plus(&self, later: &Account) -> Account {
        let mut sum = self.clone();
        sum.meta.calls = sum.meta.calls.saturating_add(later.meta.calls);
        sum.meta.tokens.add(&later.meta.tokens);
        sum.meta.unreported = sum.meta.unreported.saturating_add(later.meta.unreported);
        sum.worker.runs = sum.worker.runs.saturating_add(later.worker.runs);
        sum.worker.tokens.add(&later.worker.tokens);
        sum.worker.unreported = sum
            .worker
            .unreported
            .saturating_add(later.worker.unreported);
        sum.total_tokens = sum.total_tokens.saturating_add(later.total_tokens);
        sum.cost_usd = add_cost(sum.cost_usd, later.cost_usd).map(round);
        for model in &later.models {
            match sum.models.iter_mut().find(|m| m.model == model.model) {
                Some(mine) => mine.add(model),
                None => sum.models.push(model.clone()),
            }
        }
        for model in &mut sum.models {
            model.cost_usd = model.cost_usd.map(round);
        }
        sum
    }

    /// The account with the cost of each model that had none (no price when its
    /// calls ran) priced by `pricing` now, when it has a price: a limit on cost set
    /// for a resumed task must not be blind to the runs before. Costs known stay
    /// as they were.
    pub fn repriced(&self, pricing: &Pricing) -> Account {
        let mut account = self.clone();
        let mut known = true;
        for model in &mut account.models {
            if model.cost_usd.is_none() {
                let price = model.model.as_deref().and_then(|m| pricing.price(m));
                model.cost_usd = price.map(|p| round(p.cost(&model.tokens)));
            }
            known &= model.cost_usd.is_some();
        }
        if account.cost_usd.is_none() && known {
            account.cost_usd = Some(round(
                account.models.iter().filter_map(|m| m.cost_usd).sum(),
            ));
        }
        account
    }

    fn count(&mut self, usage: &Usage, pricing: &Pricing) {
        let cost = pricing.cost(usage);
        self.cost_usd = add_cost(self.cost_usd, cost);
        match self.models.iter_mut().find(|m| m.model == usage.model) {
            Some(sum) => sum.add_call(usage, cost),
            None => {
                let mut sum = ModelUsage::new(usage.model.clone());
                sum.add_call(usage, cost);
                self.models.push(sum);
            }
        }
    }
}

/// A sum of costs: unknown once any part is.
pub(crate) fn add_cost(sum: Option<f64>, part: Option<f64>) -> Option<f64> {
    Some(sum? + part?)
}

/// Costs to a billionth of a dollar: sums of binary fractions otherwise show noise
/// such as 0.30000000000000004.
pub fn round(cost: f64) -> f64 {
    let scaled = (cost * 1e9).round() / 1e9;
    // A sum too large to scale stays as it is, never infinite.
    if scaled.is_finite() { scaled } else { cost }
}

/// Dollars for people: up to six decimals, no trailing zeros (`0.0412`, `1`).
pub fn usd(amount: f64) -> String {
    let text = format!("{amount:.6}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() || text == "-" {
        "0".into()
    } else {
        text.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::Price;
    use quickcheck::{Arbitrary, Gen, quickcheck};

    fn tokens(input: u64, cached: u64, output: u64) -> Tokens {
        Tokens {
            input_tokens: input,
            cached_input_tokens: cached,
            output_tokens: output,
            ..Tokens::default()
        }
    }

    fn pricing() -> Pricing {
        Pricing {
            models: [
                (
                    "meta-m".to_string(),
                    Price {
                        input: 1.25,
                        cached_input: 0.125,
                        cache_write: 1.25,
                        output: 10.0,
                    },
                ),
                (
                    "worker-m".to_string(),
                    Price {
                        input: 1.5,
                        cached_input: 0.375,
                        cache_write: 1.5,
                        output: 6.0,
                    },
                ),
            ]
            .into(),
        }
    }

    #[test]
    fn dollars_read_well() {
        assert_eq!(usd(0.0412), "0.0412");
        assert_eq!(usd(1.0), "1");
        assert_eq!(usd(0.000_123_456), "0.000123");
        assert_eq!(usd(0.0), "0");
    }

    #[test]
    fn the_result_object_has_the_shape_of_the_spec() {
        let meta = [
            Usage::of(Some("meta-m"), Some(tokens(2000, 0, 200))),
            Usage::of(Some("meta-m"), Some(tokens(3120, 0, 210))),
        ];
        let worker = [Usage::of(
            Some("worker-m"),
            Some(tokens(24000, 12000, 1200)),
        )];
        let account = Account::of(&meta, &worker, &pricing());
        let json = serde_json::to_value(&account).unwrap();
        assert_eq!(
            json["meta"],
            serde_json::json!({"calls": 2, "input_tokens": 5120, "cached_input_tokens": 0,
                               "output_tokens": 410, "unreported": 0})
        );
        assert_eq!(json["worker"]["runs"], 1);
        assert_eq!(json["total_tokens"], 5120 + 410 + 24000 + 1200);
        // meta: (5120 × 1.25 + 410 × 10) / 10⁶; worker: (12000 × 1.5 + 12000 × 0.375 + 1200 × 6) / 10⁶
        assert_eq!(account.cost_usd, Some(round(0.0105 + 0.0297)));
        let back: Account = serde_json::from_value(json).unwrap();
        assert_eq!(back, account);
    }

    #[test]
    fn one_unpriced_model_makes_the_cost_unknown_and_unreported_calls_are_counted() {
        let meta = [
            Usage::of(Some("meta-m"), None),
            Usage::of(Some("meta-m"), Some(tokens(10, 0, 1))),
        ];
        let worker = [Usage::of(None, Some(tokens(100, 0, 10)))];
        let account = Account::of(&meta, &worker, &pricing());
        assert_eq!(account.cost_usd, None);
        assert_eq!((account.meta.calls, account.meta.unreported), (2, 1));
        assert_eq!(account.total_tokens, 121);
        assert_eq!(account.models.len(), 2);
        assert_eq!(account.models[1].model, None);
        assert_eq!(account.models[1].cost_usd, None);
        assert!(account.models[0].cost_usd.is_some());
    }

    /// A call as quickcheck makes it: one of three models (one unpriced), tokens
    /// reported or not.
    #[derive(Debug, Clone)]
    struct Call {
        worker: bool,
        usage: Usage,
    }

    impl Arbitrary for Call {
        fn arbitrary(g: &mut Gen) -> Self {
            let model = g
                .choose(&[Some("meta-m"), Some("worker-m"), Some("free"), None])
                .copied()
                .flatten();
            let small = |g: &mut Gen| u64::from(u32::arbitrary(g) >> 8);
            let tokens = bool::arbitrary(g).then(|| {
                let input = small(g);
                tokens(input, small(g) % (input + 1), small(g))
            });
            Call {
                worker: bool::arbitrary(g),
                usage: Usage::of(model, tokens),
            }
        }
    }

    quickcheck! {
        fn totals_are_the_sums_of_the_parts(calls: Vec<Call>) -> bool {
            let pricing = pricing();
            let meta: Vec<&Usage> = calls.iter().filter(|c| !c.worker).map(|c| &c.usage).collect();
            let worker: Vec<&Usage> = calls.iter().filter(|c| c.worker).map(|c| &c.usage).collect();
            let account = Account::of(meta.iter().copied(), worker.iter().copied(), &pricing);
            let sum = |side: &[&Usage]| side.iter().filter_map(|u| u.tokens).fold(Tokens::default(), |mut a, t| { a.add(&t); a });
            let costs: Vec<Option<f64>> = calls.iter().map(|c| pricing.cost(&c.usage)).collect();
            let cost = costs.iter().try_fold(0.0, |a, c| c.map(|c| a + c));
            let by_model_calls: u32 = account.models.iter().map(|m| m.calls).sum();
            let by_model_tokens: u64 = account.models.iter().map(|m| m.total_tokens()).sum();
            let cost_ok = match (account.cost_usd, cost) {
                (Some(a), Some(b)) => (a - b).abs() < 1e-8,
                (None, None) => true,
                _ => false,
            };
            // Adding the calls one at a time, as the runner does between calls, ends
            // at the same account.
            let mut prefix_ok = true;
            for n in 0..=calls.len() {
                let part = Account::of(
                    calls[..n].iter().filter(|c| !c.worker).map(|c| &c.usage),
                    calls[..n].iter().filter(|c| c.worker).map(|c| &c.usage),
                    &pricing,
                );
                let expected: u64 = calls[..n].iter().map(|c| c.usage.total_tokens()).sum();
                prefix_ok &= part.total_tokens == expected;
            }
            account.meta.tokens == sum(&meta)
                && account.worker.tokens == sum(&worker)
                && account.meta.calls as usize == meta.len()
                && account.worker.runs as usize == worker.len()
                && account.meta.unreported as usize == meta.iter().filter(|u| u.tokens.is_none()).count()
                && account.total_tokens == sum(&meta).total() + sum(&worker).total()
                && by_model_calls as usize == calls.len()
                && by_model_tokens == account.total_tokens
                && cost_ok
                && prefix_ok
        }

        fn an_account_split_in_two_adds_up_to_the_whole(calls: Vec<Call>, at: usize) -> bool {
            let pricing = pricing();
            let of = |calls: &[Call]| Account::of(
                calls.iter().filter(|c| !c.worker).map(|c| &c.usage),
                calls.iter().filter(|c| c.worker).map(|c| &c.usage),
                &pricing,
            );
            let at = if calls.is_empty() { 0 } else { at % (calls.len() + 1) };
            let whole = of(&calls);
            let sum = of(&calls[..at]).plus(&of(&calls[at..]));
            let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => (a - b).abs() < 1e-8,
                (None, None) => true,
                _ => false,
            };
            let models_ok = whole.models.iter().all(|m| {
                sum.models.iter().any(|s| s.model == m.model && s.calls == m.calls
                    && s.tokens == m.tokens && s.unreported == m.unreported
                    && close(s.cost_usd, m.cost_usd))
            }) && whole.models.len() == sum.models.len();
            sum.meta == whole.meta
                && sum.worker == whole.worker
                && sum.total_tokens == whole.total_tokens
                && close(sum.cost_usd, whole.cost_usd)
                && models_ok
        }
    }

    #[test]
    fn a_model_without_a_price_then_is_priced_now() {
        let earlier = Account::of(
            &[Usage::of(Some("meta-m"), Some(tokens(1000, 0, 100)))],
            &[Usage::of(Some("new-m"), Some(tokens(2000, 0, 0)))],
            &pricing(),
        );
        assert_eq!(earlier.cost_usd, None);
        let mut now = pricing();
        now.models.insert(
            "new-m".into(),
            Price {
                input: 1.0,
                cached_input: 1.0,
                cache_write: 1.0,
                output: 1.0,
            },
        );
        let repriced = earlier.repriced(&now);
        // meta-m keeps what it cost then: (1000 × 1.25 + 100 × 10) / 10⁶; new-m: 2000 × 1 / 10⁶.
        assert_eq!(repriced.cost_usd, Some(round(0.00225 + 0.002)));
        assert_eq!(
            earlier.repriced(&pricing()).cost_usd,
            None,
            "still no price"
        );
    }
}
