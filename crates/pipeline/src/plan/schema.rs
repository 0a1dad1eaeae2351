//! The JSON Schemas of the plan's Meta replies (`decompose`, `plan_patch`), for
//! providers that hold the model to one (`runner.meta.kind: codex-cli`). They say
//! what `request`'s system prompts say; `decompose` and `patch` still check every
//! reply (a null there is a field left out).

use serde_json::Value;

use super::fields::EFFORTS;
use agent_runner_meta::schema::{boolean, integer, kind, list, nullable, object, one_of, text};

/// The plan fields of a task in a reply (`store::plan_fields`), as `(key, schema)`;
/// `required_here`: those a `decompose` task must give.
fn plan_fields(required_here: bool) -> Vec<(&'static str, Value)> {
    let maybe = |schema: Value| {
        if required_here {
            schema
        } else {
            nullable(schema)
        }
    };
    vec![
        ("description", maybe(text())),
        ("acceptance_criteria", maybe(list(text()))),
        ("dependencies", nullable(list(text()))),
        ("wbs_level", maybe(integer())),
        ("estimated_effort", maybe(one_of(&EFFORTS))),
        (
            "suggested_impl",
            nullable(object(&[
                ("language", nullable(text())),
                ("file_paths", nullable(list(text()))),
                ("constraints", nullable(list(text()))),
            ])),
        ),
    ]
}

fn conflicts() -> Value {
    nullable(list(object(&[
        ("file", nullable(text())),
        ("tasks", nullable(list(text()))),
        ("warning", nullable(text())),
    ])))
}

/// `decompose`: phases of new tasks.
pub fn decompose() -> Value {
    let mut task = vec![("id", text()), ("title", text())];
    task.extend(plan_fields(true));
    object(&[
        ("type", kind("decompose")),
        ("understanding", text()),
        (
            "phases",
            list(object(&[
                ("name", text()),
                ("milestone", text()),
                ("tasks", list(object(&task))),
            ])),
        ),
        ("potential_conflicts", conflicts()),
    ])
}

/// `plan_patch`: the seed's envelope around a list of operations; each operation
/// has every field, those of other operations null.
pub(crate) fn plan_patch() -> Value {
    let mut operation = vec![
        ("op", one_of(&["create", "update", "move", "delete"])),
        ("temp_id", nullable(text())),
        ("task_id", nullable(text())),
        ("title", nullable(text())),
        ("phase_name", nullable(text())),
        ("milestone", nullable(text())),
    ];
    operation.extend(plan_fields(false));
    operation.extend([
        // The pinned test (SPEC §16): an update may set it, a decompose may not.
        (
            "test",
            nullable(object(&[
                ("command", text()),
                ("timeout_sec", nullable(integer())),
            ])),
        ),
        ("parent_id", nullable(text())),
        (
            "position",
            nullable(object(&[
                ("index", nullable(integer())),
                ("before", nullable(text())),
                ("after", nullable(text())),
            ])),
        ),
        ("cascade", nullable(boolean())),
    ]);
    object(&[
        ("type", kind("plan_patch")),
        ("version", integer()),
        (
            "payload",
            object(&[
                ("understanding", text()),
                ("operations", list(object(&operation))),
                ("potential_conflicts", conflicts()),
            ]),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::plan_fields::PlanFields;
    use agent_runner_meta::schema::check_strict;

    #[test]
    fn the_schemas_are_strict_and_name_every_plan_field() {
        for schema in [decompose(), plan_patch()] {
            assert_eq!(check_strict(&schema, ""), Ok(()), "{schema}");
        }
        let keys: Vec<&str> = plan_fields(true)
            .iter()
            .map(|(k, _)| *k)
            .chain(["phase_name", "milestone", "test"])
            .collect();
        for key in PlanFields::REPLY_KEYS {
            assert!(keys.contains(&key), "{key} is not in the schemas");
        }
        let operation = &plan_patch()["properties"]["payload"]["properties"]["operations"]["items"];
        assert!(operation["properties"]["test"].is_object(), "{operation}");
        let task = &decompose()["properties"]["phases"]["items"]["properties"]["tasks"]["items"];
        assert!(task["properties"].get("test").is_none(), "{task}");
    }
}
