//! The budget of a task (SPEC §15, `runner.budget`): looked at before and after
//! every paid call. Once a limit is reached no further paid call starts and the
//! task fails naming the limit: `budget exhausted: max_tokens (100412 of 100000)`.
//! A call in flight is never cut short for tokens or cost (its usage is known only
//! when it ends), so those limits can be passed by at most that one call; the
//! deadline cuts every step to the time left (`agent_runner_core::deadline`).

use std::time::Duration;

use agent_runner_core::usage::{Account, usd};
use agent_runner_settings::events::named::Name as _;
use agent_runner_settings::task::Budget;

/// The limit that ended a task, as `budget.exhausted` and the event name it.
pub(crate) use agent_runner_settings::events::BudgetLimit as Limit;

/// A limit reached, and the task's failure reason.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Exhausted {
    pub(crate) limit: Limit,
    /// `budget exhausted: <limit> (<used> of <max>)`.
    pub(crate) reason: String,
}

/// The first limit of `budget` that `account` and `elapsed` have reached (tokens,
/// then cost, then time); `deadline_passed` counts as the time limit reached.
pub(crate) fn exhausted(
    budget: &Budget,
    account: &Account,
    elapsed: Duration,
    deadline_passed: bool,
) -> Option<Exhausted> {
    let reached = |limit: Limit, used: String, max: String| {
        Some(Exhausted {
            limit,
            reason: format!("budget exhausted: {} ({used} of {max})", limit.as_str()),
        })
    };
    if let Some(max) = budget.max_tokens
        && account.total_tokens >= max
    {
        return reached(
            Limit::MaxTokens,
            account.total_tokens.to_string(),
            max.to_string(),
        );
    }
    if let (Some(max), Some(used)) = (budget.max_cost_usd, account.cost_usd)
        && used >= max
    {
        return reached(Limit::MaxCostUsd, usd(used), usd(max));
    }
    if let Some(max) = budget.max_duration
        && (deadline_passed || elapsed >= max)
    {
        let used = elapsed.max(max);
        return reached(
            Limit::MaxDurationSec,
            format!("{:.1}", used.as_secs_f64()),
            max.as_secs().to_string(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(tokens: u64, cost: Option<f64>) -> Account {
        Account {
            total_tokens: tokens,
            cost_usd: cost,
            ..Account::default()
        }
    }

    #[test]
    fn each_limit_is_reached_at_its_value_and_named() {
        let budget = Budget {
            max_tokens: Some(100_000),
            max_cost_usd: Some(1.0),
            max_duration: Some(Duration::from_secs(60)),
        };
        let second = Duration::from_secs(1);
        assert_eq!(
            exhausted(&budget, &account(99_999, Some(0.99)), second, false),
            None
        );
        assert_eq!(
            exhausted(&budget, &account(100_412, Some(0.5)), second, false).map(|e| e.reason),
            Some("budget exhausted: max_tokens (100412 of 100000)".into())
        );
        assert_eq!(
            exhausted(&budget, &account(100_000, None), second, false).map(|e| e.limit),
            Some(Limit::MaxTokens)
        );
        assert_eq!(
            exhausted(&budget, &account(5, Some(1.0412)), second, false).map(|e| e.reason),
            Some("budget exhausted: max_cost_usd (1.0412 of 1)".into())
        );
        assert_eq!(
            exhausted(
                &budget,
                &account(5, Some(0.1)),
                Duration::from_millis(60_250),
                false
            )
            .map(|e| e.reason),
            Some("budget exhausted: max_duration_sec (60.2 of 60)".into())
        );
        assert_eq!(
            exhausted(&budget, &account(5, Some(0.1)), second, true).map(|e| e.limit),
            Some(Limit::MaxDurationSec)
        );
        assert_eq!(
            exhausted(
                &Budget::default(),
                &account(u64::MAX, Some(9e9)),
                second,
                true
            ),
            None
        );
    }
}
