//! Event fields that name one of a fixed set (a Meta call's type, a worker run's
//! outcome, a budget limit, what a full log drops), typed for the writer and kept
//! as text for a reader: a newer writer may name one this version does not know,
//! and its line must still read and print as written.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::agent::RunOutcome;

/// The kinds of events the worker can cause in any number, which a full log stops
/// writing first (`Event::is_from_worker`).
pub const WORKER_EVENTS: &str = "worker_item, egress_denied";

/// A closed set of names, each written as its text.
pub trait Name: Copy + 'static {
    /// Every member, to read a text back.
    const ALL: &'static [Self];
    fn as_str(self) -> &'static str;
}

/// One of `T`'s names, or a text this version does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named<T> {
    Known(T),
    Other(String),
}

impl<T: Name> Named<T> {
    /// The name as written in the log.
    pub fn as_str(&self) -> &str {
        match self {
            Named::Known(known) => known.as_str(),
            Named::Other(text) => text,
        }
    }

    /// `text` as one of `T`'s names when it is one.
    pub fn parse(text: &str) -> Self {
        T::ALL
            .iter()
            .find(|known| known.as_str() == text)
            .map_or_else(|| Named::Other(text.to_string()), |&k| Named::Known(k))
    }

    /// Applies `f` to a text this version does not know (masking before a write);
    /// a known name is ours and holds nothing to mask.
    pub(super) fn map_text(&mut self, f: &dyn Fn(&str) -> String) {
        if let Named::Other(text) = self {
            *text = f(text);
        }
    }
}

impl<T> From<T> for Named<T> {
    fn from(known: T) -> Self {
        Named::Known(known)
    }
}

/// What an old line without the field reads as: the empty text it was written as.
impl<T> Default for Named<T> {
    fn default() -> Self {
        Named::Other(String::new())
    }
}

impl<T: Name> std::fmt::Display for Named<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<T: Name> Serialize for Named<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de, T: Name> Deserialize<'de> for Named<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Named::parse(&String::deserialize(deserializer)?))
    }
}

/// The message type of a Meta call (meta-protocol.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallType {
    PlanTask,
    NextAction,
    Judge,
    Decompose,
    PlanPatch,
    BuildTaskConfig,
}

impl Name for CallType {
    const ALL: &'static [Self] = &[
        CallType::PlanTask,
        CallType::NextAction,
        CallType::Judge,
        CallType::Decompose,
        CallType::PlanPatch,
        CallType::BuildTaskConfig,
    ];
    fn as_str(self) -> &'static str {
        match self {
            CallType::PlanTask => "plan_task",
            CallType::NextAction => "next_action",
            CallType::Judge => "judge",
            CallType::Decompose => "decompose",
            CallType::PlanPatch => "plan_patch",
            CallType::BuildTaskConfig => "build_task_config",
        }
    }
}

impl Name for RunOutcome {
    const ALL: &'static [Self] = &[
        RunOutcome::Completed,
        RunOutcome::Failed,
        RunOutcome::TimedOut,
        RunOutcome::Stalled,
        RunOutcome::Crashed,
        RunOutcome::Interrupted,
    ];
    fn as_str(self) -> &'static str {
        RunOutcome::as_str(self)
    }
}

/// The budget limit that ended a task (SPEC §15), named after its setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // named after the settings: budget.max_tokens, ...
pub enum BudgetLimit {
    MaxTokens,
    MaxCostUsd,
    MaxDurationSec,
}

impl Name for BudgetLimit {
    const ALL: &'static [Self] = &[
        BudgetLimit::MaxTokens,
        BudgetLimit::MaxCostUsd,
        BudgetLimit::MaxDurationSec,
    ];
    fn as_str(self) -> &'static str {
        match self {
            BudgetLimit::MaxTokens => "max_tokens",
            BudgetLimit::MaxCostUsd => "max_cost_usd",
            BudgetLimit::MaxDurationSec => "max_duration_sec",
        }
    }
}

/// What a full event log no longer writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The kinds the worker can cause in any number (`WORKER_EVENTS`).
    WorkerEvents,
    /// Every kind.
    All,
}

impl Name for Dropped {
    const ALL: &'static [Self] = &[Dropped::WorkerEvents, Dropped::All];
    fn as_str(self) -> &'static str {
        match self {
            Dropped::WorkerEvents => WORKER_EVENTS,
            Dropped::All => "all",
        }
    }
}
