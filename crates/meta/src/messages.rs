//! The JSON Schemas of the runner's three Meta replies (SPEC §5.3) and of the
//! pipeline's `judge` (SPEC §23), for providers
//! that hold the model to one (`runner.meta.kind: codex-cli`). They say what the
//! system prompt says; the runner's `protocol` still checks every reply. Here, with
//! the exchange, so that a backend can send them without knowing the runner.

use serde_json::Value;

use crate::schema::{boolean, integer, kind, list, nullable, object, text};

/// `plan_task`: the acceptance criteria.
pub fn plan_task() -> Value {
    object(&[
        ("type", kind("plan_task")),
        (
            "acceptance_criteria",
            list(object(&[("id", nullable(text())), ("description", text())])),
        ),
    ])
}

/// `next_action`: the decision, and the worker's prompt for `run_worker`.
pub fn next_action() -> Value {
    object(&[
        ("type", kind("next_action")),
        (
            "decision",
            object(&[("action", text()), ("reason", text())]),
        ),
        (
            "worker_call",
            nullable(object(&[
                ("worker_type", nullable(text())),
                ("mode", nullable(text())),
                ("prompt", text()),
            ])),
        ),
    ])
}

/// `completion_assessment`: the summary and the criteria met.
pub fn completion_assessment() -> Value {
    object(&[
        ("type", kind("completion_assessment")),
        ("summary", text()),
        (
            "details",
            object(&[
                ("passed_criteria", list(text())),
                ("remaining_risks", list(text())),
            ]),
        ),
        ("all_criteria_satisfied", nullable(boolean())),
    ])
}

/// `judge` (SPEC §23 best of N, asked by the pipeline): the try that is best, and
/// why.
pub fn judge() -> Value {
    object(&[
        ("type", kind("judge")),
        ("winner", integer()),
        ("why", text()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::check_strict;

    #[test]
    fn the_schemas_are_strict() {
        for schema in [plan_task(), next_action(), completion_assessment(), judge()] {
            assert_eq!(check_strict(&schema, ""), Ok(()), "{schema}");
        }
    }
}
