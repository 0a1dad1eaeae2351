//! What paid calls used and cost (SPEC §15). Every Meta exchange and worker run
//! carries a `Usage` (its model, the tokens its provider reported, or none, and a
//! cost its CLI reported); `Pricing` holds the user's prices (`runner.pricing`, no
//! built-in table); an `Account` adds a task's calls up into the result's `usage`
//! object, per side (Meta, worker) and per model. The runner, the Task Note and the
//! pipeline all count with these, so a total is the same sum wherever it is shown.

pub mod account;
pub(crate) mod price;
pub(crate) mod tokens;

pub use account::{Account, ModelUsage, usd};
pub use price::{Price, Pricing};
pub use tokens::{Tokens, Usage};
