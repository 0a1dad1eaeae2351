//! A task's plan fields (SPEC §13), declared once: the `task` line and `update`
//! lines carry them (`PlanFields`, flattened into both), Meta's `decompose` and
//! `plan_patch` replies set them (`plan::fields` reads each as its row says), and a
//! plan request shows those marked for it. Adding a field is one row of
//! `plan_fields_table` (and a word for Meta in `plan::request`'s reply schemas).
//!
//! The task's pinned test (SPEC §16) is one of them: `task new --test` writes it on
//! the `task` line, an `update` line or a plan_patch `update` changes it, like any
//! other field a task carries beside its prompt. (A decompose may not set it: the
//! user pins tests, `plan::decompose` refuses one.)

use serde::{Deserialize, Serialize};

use super::pinned_test::PinnedTest;

/// The table of plan fields: calls `$then!` with one row per field, in the order
/// they are written:
/// `name: Type, reader, "key in replies", shown in plan requests;`
/// where `reader` is the `plan::fields::Fields` method that reads the field from a
/// reply. Every field is optional in a task: a task made from a prompt has none.
macro_rules! plan_fields_table {
    ($then:ident) => {
        $then! {
            /// What to do, for the worker and for people.
            description: String, text, "description", false;
            /// Replaces the criteria whole; the runner checks these instead of
            /// planning its own.
            acceptance_criteria: Vec<String>, criteria, "acceptance_criteria", false;
            /// Ids of the tasks this one waits for (replaced whole; `[]` clears).
            depends_on: Vec<String>, texts, "dependencies", true;
            /// The phase (a node under the plan's root) it belongs to.
            phase: String, phase_name, "phase_name", true;
            milestone: String, text, "milestone", true;
            /// 1 concept, 2 design, 3 implementation.
            wbs_level: u32, count, "wbs_level", true;
            /// `small`, `medium` or `large`.
            estimated_effort: String, effort, "estimated_effort", false;
            /// Language, file paths, constraints: a mapping, kept as given.
            suggested_impl: serde_json::Value, mapping_json, "suggested_impl", false;
            /// The test command the user pinned on this task (SPEC §16): wins over
            /// the workspace's and the Task Builder's.
            test: PinnedTest, pinned_test, "test", false;
        }
    };
}
pub(crate) use plan_fields_table;

macro_rules! define_plan_fields {
    ($($(#[$doc:meta])* $name:ident: $ty:ty, $reader:ident, $key:literal, $in_requests:literal;)*) => {
        /// A task's plan fields; absent (None) unless a plan set it. In an `update`
        /// line, the fields it changes.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        pub struct PlanFields {
            $(
                $(#[$doc])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $name: Option<$ty>,
            )*
        }

        impl PlanFields {
            /// The fields' keys in replies, in table order.
            pub(crate) const REPLY_KEYS: [&'static str; [$($key),*].len()] = [$($key),*];

            /// These fields with `changes` applied: a field present there replaces
            /// this one.
            pub(crate) fn apply(&mut self, changes: PlanFields) {
                $(
                    if changes.$name.is_some() {
                        self.$name = changes.$name;
                    }
                )*
            }

            /// The fields of `new` that differ from `old`: the changes an `update`
            /// line records.
            pub(crate) fn changes(old: &PlanFields, new: &PlanFields) -> PlanFields {
                PlanFields {
                    $($name: if old.$name != new.$name { new.$name.clone() } else { None },)*
                }
            }

            /// The reply keys of the fields present.
            pub(crate) fn given(&self) -> Vec<&'static str> {
                let mut given = Vec::new();
                $(
                    if self.$name.is_some() {
                        given.push($key);
                    }
                )*
                given
            }

            /// Only the fields a plan request shows of each task.
            pub(crate) fn for_requests(&self) -> PlanFields {
                PlanFields {
                    $($name: if $in_requests { self.$name.clone() } else { None },)*
                }
            }
        }
    };
}
plan_fields_table!(define_plan_fields);

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> PlanFields {
        PlanFields {
            description: Some("d".into()),
            depends_on: Some(vec!["a".into()]),
            wbs_level: Some(2),
            ..PlanFields::default()
        }
    }

    #[test]
    fn changes_apply_and_are_found_again() {
        let old = fields();
        let mut new = old.clone();
        new.apply(PlanFields {
            depends_on: Some(vec![]),
            milestone: Some("m1".into()),
            ..PlanFields::default()
        });
        assert_eq!(new.depends_on, Some(vec![]), "replaced whole");
        assert_eq!(new.description.as_deref(), Some("d"), "absent: unchanged");
        let changes = PlanFields::changes(&old, &new);
        assert_eq!(changes.given(), ["dependencies", "milestone"]);
        let mut again = old.clone();
        again.apply(changes);
        assert_eq!(again, new);
        assert_eq!(PlanFields::changes(&new, &new), PlanFields::default());
    }

    #[test]
    fn the_table_names_every_field_once_in_order() {
        assert_eq!(
            PlanFields::REPLY_KEYS,
            [
                "description",
                "acceptance_criteria",
                "dependencies",
                "phase_name",
                "milestone",
                "wbs_level",
                "estimated_effort",
                "suggested_impl",
                "test"
            ]
        );
        assert_eq!(
            serde_json::to_value(fields()).unwrap(),
            serde_json::json!({"description": "d", "depends_on": ["a"], "wbs_level": 2})
        );
        assert_eq!(
            fields().for_requests(),
            PlanFields {
                depends_on: Some(vec!["a".into()]),
                wbs_level: Some(2),
                ..PlanFields::default()
            }
        );
    }
}
