//! The egress allow rules (SPEC §17): which destinations a task's worker may reach
//! (`rules`) and the proxy variables its runs get (`variables`). The proxy that
//! applies them is the `egress` crate.

pub mod rules;
pub mod variables;

pub use rules::{AllowList, Origin, Rule};
pub use variables::PORT;
