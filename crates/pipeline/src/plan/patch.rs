//! Meta `plan_patch` (meta-protocol.md §10): an edit of the existing plan by
//! difference, so asking again edits the plan instead of piling up duplicates. The
//! reply is the seed's envelope `{type: plan_patch, version: 1, payload:
//! {understanding, operations, potential_conflicts}}`; this module checks its shape
//! as it is parsed. What the operations mean for the plan is `validate`.

use serde_json::Value;

use super::fields::{Fields, conflicts};
use crate::store::new_task;
use crate::store::plan_fields::PlanFields;
use agent_runner_meta::reply::Reask;
use agent_runner_meta::reply::Reply;

/// Most operations one reply may hold.
pub(crate) const MAX_OPERATIONS: usize = 500;

/// A `plan_patch` reply, its shape checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlanPatch {
    pub(crate) understanding: String,
    pub(crate) operations: Vec<Operation>,
    pub(crate) potential_conflicts: Vec<Value>,
}

/// One operation, in reply order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Operation {
    Create {
        temp_id: String,
        fields: TaskFields,
        parent_id: Option<String>,
        position: Option<Position>,
    },
    Update {
        task_id: String,
        fields: TaskFields,
    },
    Move {
        task_id: String,
        parent_id: Option<String>,
        position: Option<Position>,
    },
    Delete {
        task_id: String,
        cascade: bool,
    },
}

impl Operation {
    /// `create`, `update`, `move` or `delete`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Operation::Create { .. } => "create",
            Operation::Update { .. } => "update",
            Operation::Move { .. } => "move",
            Operation::Delete { .. } => "delete",
        }
    }
}

/// The task fields of `create` and `update`; absent means unchanged (update).
/// `plan.depends_on` names task ids or temp ids.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TaskFields {
    pub(crate) title: Option<String>,
    pub(crate) plan: PlanFields,
}

impl TaskFields {
    /// The names of the fields given.
    pub(crate) fn given(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.title.is_some() {
            out.push("title");
        }
        out.extend(self.plan.given());
        out
    }
}

/// Where among its siblings a node goes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Position {
    Index(usize),
    Before(String),
    After(String),
}

/// The fields of the seed's operation table other than the plan fields (which
/// belong to create and update), and the operations each belongs to. A field of
/// another operation is an error (an `update` with `parent_id` meant a move); keys
/// outside the table (a `reason`) are ignored.
const FIELDS: [(&str, &[&str]); 7] = [
    ("op", &["create", "update", "move", "delete"]),
    ("temp_id", &["create"]),
    ("task_id", &["update", "move", "delete"]),
    ("title", &["create", "update"]),
    ("parent_id", &["create", "move"]),
    ("position", &["create", "move"]),
    ("cascade", &["delete"]),
];

/// The operations a field belongs to, if it is one of the table's.
fn operations_of(key: &str) -> Option<&'static [&'static str]> {
    if PlanFields::REPLY_KEYS.contains(&key) {
        return Some(&["create", "update"]);
    }
    FIELDS
        .iter()
        .find(|(name, _)| *name == key)
        .map(|(_, ops)| *ops)
}

impl Reply for PlanPatch {
    const KIND: &'static str = "plan_patch";

    fn schema() -> serde_json::Value {
        super::schema::plan_patch()
    }

    fn from_value(value: serde_norway::Value) -> Result<Self, Reask> {
        let top = Fields::of(&value, "")?;
        match top.get("version") {
            Some(v) if v.as_u64() == Some(1) => {}
            Some(_) => return Err("version: only version 1 is understood".into()),
            None => return Err("version: missing (give `version: 1`)".into()),
        }
        let payload = Fields::of(top.get("payload").ok_or("payload: missing")?, "payload")?;
        let understanding = payload.required_text("understanding")?;
        let items = payload
            .list("operations")?
            .ok_or("payload.operations: missing (give [] when nothing changes)")?;
        if items.len() > MAX_OPERATIONS {
            return Err(format!(
                "payload.operations: {} operations; give at most {MAX_OPERATIONS}",
                items.len()
            ));
        }
        let operations = items
            .iter()
            .enumerate()
            .map(|(n, item)| operation(&Fields::of(item, format!("payload.operations[{n}]"))?))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PlanPatch {
            understanding,
            operations,
            potential_conflicts: conflicts(&payload)?,
        })
    }
}

fn operation(f: &Fields) -> Result<Operation, Reask> {
    let op = f.required_text("op")?;
    if !["create", "update", "move", "delete"].contains(&op.as_str()) {
        return Err(format!(
            "{}: {op:?}; expected create, update, move or delete",
            f.at("op")
        ));
    }
    for key in f.keys() {
        if let Some(ops) = operations_of(key)
            && !ops.contains(&op.as_str())
            && f.get(key).is_some()
        {
            return Err(format!(
                "{}: not a field of {op} (it belongs to {})",
                f.at(key),
                ops.join(", ")
            ));
        }
    }
    Ok(match op.as_str() {
        "create" => {
            let fields = task_fields(f)?;
            if fields.title.is_none() {
                return Err(format!(
                    "{}: missing; a new task needs a title",
                    f.at("title")
                ));
            }
            Operation::Create {
                temp_id: f.required_text("temp_id")?,
                fields,
                parent_id: f.nonblank_text("parent_id")?,
                position: position(f)?,
            }
        }
        "update" => {
            let fields = task_fields(f)?;
            if fields.given().is_empty() {
                return Err(format!(
                    "{}: an update changes nothing without fields (title, description, acceptance_criteria, dependencies, ...)",
                    f.path
                ));
            }
            Operation::Update {
                task_id: f.required_text("task_id")?,
                fields,
            }
        }
        "move" => {
            let parent_id = f.nonblank_text("parent_id")?;
            let position = position(f)?;
            if parent_id.is_none() && position.is_none() {
                return Err(format!(
                    "{}: a move needs parent_id, position or both",
                    f.path
                ));
            }
            Operation::Move {
                task_id: f.required_text("task_id")?,
                parent_id,
                position,
            }
        }
        _ => Operation::Delete {
            task_id: f.required_text("task_id")?,
            cascade: f.flag("cascade")?.unwrap_or(false),
        },
    })
}

fn task_fields(f: &Fields) -> Result<TaskFields, Reask> {
    Ok(TaskFields {
        title: f
            .nonblank_text("title")?
            .map(|t| new_task::title(&t, &f.at("title")))
            .transpose()?,
        plan: f.plan_fields()?,
    })
}

/// `position`: exactly one of `index`, `before`, `after`.
fn position(f: &Fields) -> Result<Option<Position>, Reask> {
    let Some(value) = f.get("position") else {
        return Ok(None);
    };
    let p = Fields::of(value, f.at("position"))?;
    let given: Vec<&str> = ["index", "before", "after"]
        .into_iter()
        .filter(|k| p.get(k).is_some())
        .collect();
    match given.as_slice() {
        ["index"] => {
            let index = p.count("index")?.unwrap_or(0);
            Ok(Some(Position::Index(index as usize)))
        }
        ["before"] => Ok(Some(Position::Before(p.required_text("before")?))),
        ["after"] => Ok(Some(Position::After(p.required_text("after")?))),
        [] => Err(format!("{}: give one of index, before, after", p.path)),
        several => Err(format!(
            "{}: conflicting position: {} given; give exactly one of index, before, after",
            p.path,
            several.join(" and ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_meta::reply::parse_reply;

    fn envelope(ops: &str) -> String {
        format!(
            "{{\"type\": \"plan_patch\", \"version\": 1, \"payload\": {{\"understanding\": \"tidy up\", \"operations\": {ops}}}}}"
        )
    }

    #[test]
    fn the_seeds_example_parses() {
        let text = r#"```json
{
  "type": "plan_patch",
  "version": 1,
  "payload": {
    "understanding": "ユーザーは不要タスクを削除し、順序を整理したい",
    "operations": [
      {"op": "create", "temp_id": "temp-001", "title": "新しいタスク", "description": "新規追加する作業",
       "acceptance_criteria": ["完了条件が満たされる"], "dependencies": [], "wbs_level": 2,
       "phase_name": "実装設計", "milestone": "M1-Example",
       "suggested_impl": {"language": "go", "file_paths": ["internal/example/new.go"], "constraints": ["Keep backward compatibility"]},
       "parent_id": "node-root", "position": {"after": "existing-task-id"}},
      {"op": "update", "task_id": "existing-task-id", "title": "タイトルを更新"},
      {"op": "move", "task_id": "existing-task-id", "parent_id": "node-root", "position": {"index": 0}},
      {"op": "delete", "task_id": "obsolete-task-id", "cascade": false}
    ],
    "potential_conflicts": []
  }
}
```"#;
        let patch: PlanPatch = parse_reply(text).unwrap();
        assert_eq!(patch.operations.len(), 4);
        let Operation::Create {
            temp_id,
            fields,
            parent_id,
            position,
        } = &patch.operations[0]
        else {
            panic!()
        };
        assert_eq!(temp_id, "temp-001");
        assert_eq!(fields.plan.depends_on, Some(vec![]));
        assert_eq!(fields.plan.wbs_level, Some(2));
        assert_eq!(parent_id.as_deref(), Some("node-root"));
        assert_eq!(position, &Some(Position::After("existing-task-id".into())));
        assert_eq!(
            patch.operations[1],
            Operation::Update {
                task_id: "existing-task-id".into(),
                fields: TaskFields {
                    title: Some("タイトルを更新".into()),
                    ..TaskFields::default()
                }
            }
        );
        assert_eq!(
            patch.operations[2],
            Operation::Move {
                task_id: "existing-task-id".into(),
                parent_id: Some("node-root".into()),
                position: Some(Position::Index(0))
            }
        );
        assert_eq!(
            patch.operations[3],
            Operation::Delete {
                task_id: "obsolete-task-id".into(),
                cascade: false
            }
        );
    }

    #[test]
    fn malformed_operations_say_what_and_where() {
        let err = |ops: &str| parse_reply::<PlanPatch>(&envelope(ops)).unwrap_err();
        assert_eq!(
            err(r#"[{"op": "rename", "task_id": "a"}]"#),
            "payload.operations[0].op: \"rename\"; expected create, update, move or delete"
        );
        assert_eq!(
            err(r#"[{"op": "move", "task_id": "a", "position": {"index": 0, "after": "b"}}]"#),
            "payload.operations[0].position: conflicting position: index and after given; give exactly one of index, before, after"
        );
        assert_eq!(
            err(r#"[{"op": "move", "task_id": "a"}]"#),
            "payload.operations[0]: a move needs parent_id, position or both"
        );
        assert_eq!(
            err(r#"[{"op": "update", "task_id": "a", "parent_id": "b"}]"#),
            "payload.operations[0].parent_id: not a field of update (it belongs to create, move)"
        );
        assert!(err(r#"[{"op": "update", "task_id": "a"}]"#).contains("changes nothing"));
        assert!(err(r#"[{"op": "create", "temp_id": "x"}]"#).contains("needs a title"));
        // The runner's title rule: a title it would refuse never enters the store.
        for op in [
            r#"[{"op": "create", "temp_id": "x", "title": "a\u001b[2Jb"}]"#,
            r#"[{"op": "update", "task_id": "a", "title": "bell\u0007"}]"#,
        ] {
            let e = err(op);
            assert!(
                e.starts_with("payload.operations[0].title: ") && e.contains("control characters"),
                "{e}"
            );
        }
        assert_eq!(
            err(r#"[{"op": "create", "title": "x"}]"#),
            "payload.operations[0].temp_id: missing"
        );
        assert_eq!(
            err(r#"[{"op": "delete", "task_id": "a", "cascade": "yes"}]"#),
            "payload.operations[0].cascade: expected true or false"
        );
        assert_eq!(
            err(r#"[{"op": "move", "task_id": "a", "position": {"index": -1}}]"#),
            "payload.operations[0].position.index: expected a whole number ≥ 0"
        );
        // Commentary outside the table is fine.
        let ok: PlanPatch = parse_reply(&envelope(
            r#"[{"op": "delete", "task_id": "a", "reason": "obsolete"}]"#,
        ))
        .unwrap();
        assert_eq!(ok.operations.len(), 1);
        let no_version = "{\"type\": \"plan_patch\", \"payload\": {\"understanding\": \"x\", \"operations\": []}}";
        assert!(
            parse_reply::<PlanPatch>(no_version)
                .unwrap_err()
                .starts_with("version")
        );
    }
}
