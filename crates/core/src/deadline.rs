//! The task's deadline (`runner.budget.max_duration_sec`, SPEC §15): every step's own
//! limit (a Meta request's timeout and backoff, a worker run's `max_run_time_sec`, a
//! test's `timeout_sec`) is cut to the time left, so a step still going at the
//! deadline is stopped like one that ran out of its own time. Fixed when the task
//! starts and copied freely, like `Interrupt`.

use std::time::{Duration, Instant};

/// A point in time after which nothing more of the task may run, or none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// No deadline.
    pub fn none() -> Deadline {
        Deadline(None)
    }

    /// `limit` from now; None: no deadline.
    pub fn after(limit: Option<Duration>) -> Deadline {
        Deadline(limit.and_then(|l| Instant::now().checked_add(l)))
    }

    /// Time left; None without a deadline.
    pub(crate) fn left(&self) -> Option<Duration> {
        self.0
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// True once the deadline has passed.
    pub fn passed(&self) -> bool {
        self.left() == Some(Duration::ZERO)
    }

    /// A step's own `limit`, cut to the time left, and whether it was cut.
    pub fn cut(&self, limit: Duration) -> (Duration, bool) {
        match self.left() {
            Some(left) if left < limit => (left, true),
            _ => (limit, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_cut_to_the_time_left() {
        let none = Deadline::none();
        assert_eq!(
            none.cut(Duration::from_secs(5)),
            (Duration::from_secs(5), false)
        );
        assert!(!none.passed());
        let soon = Deadline::after(Some(Duration::from_secs(60)));
        let (limit, cut) = soon.cut(Duration::from_secs(600));
        assert!(cut && limit <= Duration::from_secs(60) && limit > Duration::from_secs(50));
        assert_eq!(
            soon.cut(Duration::from_secs(1)),
            (Duration::from_secs(1), false)
        );
        let gone = Deadline::after(Some(Duration::ZERO));
        assert!(gone.passed());
        assert_eq!(gone.cut(Duration::from_secs(1)), (Duration::ZERO, true));
    }
}
