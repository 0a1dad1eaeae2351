//! The user's prices (`runner.pricing`): USD per million tokens per model. There is
//! no built-in table: prices change, and a stale table would report a wrong cost
//! with confidence.

use std::collections::BTreeMap;

use super::tokens::{Tokens, Usage};

/// A model's price in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    /// Input read from the provider's cache; defaults to `input` when the user
    /// gives none.
    pub cached_input: f64,
    /// Input written to the provider's cache; defaults to `input`.
    pub cache_write: f64,
    pub output: f64,
}

impl Price {
    /// ((input − cached − cache_write) × input + cached × cached_input +
    /// cache_write × cache_write + output × output) / 10⁶.
    pub(crate) fn cost(&self, tokens: &Tokens) -> f64 {
        let cached = tokens.cached_input_tokens.min(tokens.input_tokens);
        let written = tokens
            .cache_write_input_tokens
            .min(tokens.input_tokens - cached);
        let uncached = tokens.input_tokens - cached - written;
        (uncached as f64 * self.input
            + cached as f64 * self.cached_input
            + written as f64 * self.cache_write
            + tokens.output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// Prices by model name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pricing {
    pub models: BTreeMap<String, Price>,
}

impl Pricing {
    pub fn price(&self, model: &str) -> Option<&Price> {
        self.models.get(model)
    }

    /// What `usage` cost; None when that cannot be known: its model has no price and
    /// its CLI reported no cost. A call that used no tokens cost nothing whatever its
    /// model; a priced call whose tokens were not reported counts 0 (and is counted
    /// as unreported where totals are shown).
    pub fn cost(&self, usage: &Usage) -> Option<f64> {
        let price = usage.model.as_deref().and_then(|m| self.price(m));
        match (price, usage.tokens) {
            (Some(price), Some(tokens)) => Some(price.cost(&tokens)),
            (Some(_), None) => Some(usage.reported_cost_usd.unwrap_or(0.0)),
            (None, tokens) => usage
                .reported_cost_usd
                .or_else(|| tokens.filter(Tokens::is_zero).map(|_| 0.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(input: u64, cached: u64, output: u64) -> Tokens {
        Tokens {
            input_tokens: input,
            cached_input_tokens: cached,
            output_tokens: output,
            ..Tokens::default()
        }
    }

    #[test]
    fn the_formula_of_the_spec() {
        let price = Price {
            input: 2.0,
            cached_input: 0.5,
            cache_write: 2.5,
            output: 8.0,
        };
        // (800 × 2 + 200 × 0.5 + 100 × 8) / 10⁶
        assert_eq!(price.cost(&tokens(1000, 200, 100)), 0.0025);
        // More cached than input (a forged count) costs no less than all cached.
        assert_eq!(price.cost(&tokens(10, 50, 0)), 10.0 * 0.5 / 1e6);
        // (600 × 2 + 200 × 0.5 + 200 × 2.5 + 100 × 8) / 10⁶
        let written = Tokens {
            cache_write_input_tokens: 200,
            ..tokens(1000, 200, 100)
        };
        assert_eq!(price.cost(&written), 0.0026);
        // Forged: more written than the input left, counted as the input left.
        let forged = Tokens {
            cache_write_input_tokens: 5000,
            ..tokens(1000, 200, 0)
        };
        assert_eq!(price.cost(&forged), (200.0 * 0.5 + 800.0 * 2.5) / 1e6);
    }

    #[test]
    fn unpriced_models_have_no_cost_unless_reported_or_unused() {
        let pricing = Pricing {
            models: [(
                "m".to_string(),
                Price {
                    input: 1.0,
                    cached_input: 1.0,
                    cache_write: 1.0,
                    output: 1.0,
                },
            )]
            .into(),
        };
        let used = |model: Option<&str>, t: Option<Tokens>| Usage::of(model, t);
        assert_eq!(
            pricing.cost(&used(Some("m"), Some(tokens(1_000_000, 0, 0)))),
            Some(1.0)
        );
        assert_eq!(pricing.cost(&used(Some("m"), None)), Some(0.0));
        assert_eq!(
            pricing.cost(&used(Some("other"), Some(tokens(1, 0, 0)))),
            None
        );
        assert_eq!(pricing.cost(&used(None, Some(tokens(1, 0, 0)))), None);
        assert_eq!(pricing.cost(&used(None, None)), None);
        assert_eq!(pricing.cost(&Usage::free()), Some(0.0));
        let reported = Usage {
            reported_cost_usd: Some(0.25),
            ..used(Some("other"), Some(tokens(9, 0, 9)))
        };
        assert_eq!(pricing.cost(&reported), Some(0.25));
        // The user's price wins over the CLI's own figure.
        let priced = Usage {
            reported_cost_usd: Some(0.25),
            ..used(Some("m"), Some(tokens(1_000_000, 0, 0)))
        };
        assert_eq!(pricing.cost(&priced), Some(1.0));
    }
}
