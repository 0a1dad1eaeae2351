//! `orchestrate --max-cost-usd X --max-tokens N` (SPEC §15): the orchestrator adds up
//! what the attempts it finished spent (their runs and Task Builders); once a limit
//! is reached it claims nothing more. Attempts already running finish (a limit can
//! be passed by what they spend); the rest of the queue stays queued.

use agent_runner_core::usage::usd;

/// The limits given on the command line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SpendLimit {
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
}

/// What the finished attempts spent.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Spent {
    pub(crate) attempts: u32,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    /// Attempts whose cost is not known (a model without a price): not in `cost_usd`.
    pub(crate) unpriced: u32,
}

impl Spent {
    /// Adds one finished attempt's tokens and cost (None: not known).
    pub(crate) fn add(&mut self, tokens: Option<u64>, cost_usd: Option<f64>) {
        self.attempts += 1;
        self.tokens = self.tokens.saturating_add(tokens.unwrap_or(0));
        match cost_usd {
            Some(cost) => self.cost_usd += cost,
            None => self.unpriced += 1,
        }
    }

    /// Which limit is reached, said for the log; None while below both.
    pub(crate) fn reached(&self, limit: &SpendLimit) -> Option<String> {
        if let Some(max) = limit.max_tokens.filter(|max| self.tokens >= *max) {
            return Some(format!(
                "--max-tokens reached: {} tokens of {max} over {} attempt(s)",
                self.tokens, self.attempts
            ));
        }
        if let Some(max) = limit.max_cost_usd.filter(|max| self.cost_usd >= *max) {
            return Some(format!(
                "--max-cost-usd reached: ${} of ${} over {} attempt(s)",
                usd(self.cost_usd),
                usd(max),
                self.attempts
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_count_the_finished_attempts() {
        let limit = SpendLimit {
            max_tokens: Some(1000),
            max_cost_usd: Some(0.5),
        };
        let mut spent = Spent::default();
        spent.add(Some(600), Some(0.2));
        assert_eq!(spent.reached(&limit), None);
        spent.add(None, None);
        assert_eq!((spent.attempts, spent.unpriced), (2, 1));
        assert_eq!(spent.reached(&limit), None);
        spent.add(Some(400), Some(0.1));
        assert_eq!(
            spent.reached(&limit).as_deref(),
            Some("--max-tokens reached: 1000 tokens of 1000 over 3 attempt(s)")
        );
        let mut spent = Spent::default();
        spent.add(Some(1), Some(0.5));
        assert_eq!(
            spent.reached(&limit).as_deref(),
            Some("--max-cost-usd reached: $0.5 of $0.5 over 1 attempt(s)")
        );
        assert_eq!(spent.reached(&SpendLimit::default()), None);
    }
}
