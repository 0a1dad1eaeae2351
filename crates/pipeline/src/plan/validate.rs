//! What a `plan_patch` means for the plan, checked whole before anything is
//! written. The operations are carried out in reply order on a copy of the plan;
//! each is checked against the plan as the ones before it left it: ids exist (a
//! `temp_id` of this patch may stand for its new task anywhere a task id may), a
//! `temp_id` is used once and is no existing id, `position` agrees with
//! `parent_id`, nothing moves under itself, a RUNNING task is not deleted. Then the
//! whole: no dependency ring, no dependency on a task that is gone. Any failure
//! rejects the patch; the copy is written only if all passed (`apply`).
//!
//! Semantics (meta-protocol.md §10.5): `create` goes under `parent_id`, else under
//! the phase named `phase_name` (made if new), else under the root, at `position`
//! or last. `update` changes only the fields given; `acceptance_criteria` and
//! `dependencies` are replaced whole. `move` puts the task (with its subtree) under
//! `parent_id` (default: where it is) at `position` (default: last); a task not in
//! the tree yet is placed there. `delete` is soft: see `PlanState::delete`.

use std::collections::HashMap;

use super::edit::{Edit, Step, prompt_of};
use super::model::{PlanState, Rejection};
use super::patch::{Operation, PlanPatch, Position, TaskFields};
use crate::store::plan_fields::PlanFields;
use crate::store::task_file::{TaskChanges, TaskRecord};
use agent_runner_meta::reply::Reask;

/// The plan after `patch`, checked against `base`; `now` is the new tasks'
/// `created_at`.
pub(crate) fn plan(patch: &PlanPatch, base: &PlanState, now: &str) -> Result<Edit, Rejection> {
    let mut state = base.clone();
    let temp = temp_ids(patch, base)?;
    let mut steps = Vec::new();
    for (n, op) in patch.operations.iter().enumerate() {
        let step = apply(&mut state, op, &temp, now).map_err(|r| {
            let at = |m: String| format!("payload.operations[{n}] ({}): {m}", op.name());
            match r {
                Rejection::Invalid(m) => Rejection::Invalid(at(m)),
                Rejection::Refused(m) => Rejection::Refused(at(m)),
            }
        })?;
        steps.push(step);
    }
    // A task made and deleted by this patch is never written: forget it.
    state
        .tasks
        .retain(|id, task| !task.deleted || base.tasks.contains_key(id));
    if base.dependency_cycle().is_none()
        && let Some(ring) = state.dependency_cycle()
    {
        let names = names(&temp);
        let ring: Vec<String> = ring.iter().map(|id| names.name(id)).collect();
        return Err(Rejection::Invalid(format!(
            "the patch makes a dependency cycle: {}; tasks that wait on each other can never run",
            ring.join(" → ")
        )));
    }
    Ok(Edit {
        understanding: patch.understanding.clone(),
        potential_conflicts: patch.potential_conflicts.clone(),
        state,
        steps,
    })
}

/// The new task id for each `temp_id`; a `temp_id` used twice, or one that is an
/// existing id, is invalid.
fn temp_ids(patch: &PlanPatch, base: &PlanState) -> Result<HashMap<String, String>, Rejection> {
    let creates: Vec<(usize, &str)> = patch
        .operations
        .iter()
        .enumerate()
        .filter_map(|(n, op)| match op {
            Operation::Create { temp_id, .. } => Some((n, temp_id.as_str())),
            _ => None,
        })
        .collect();
    let mut first: HashMap<&str, usize> = HashMap::new();
    let mut temp = HashMap::new();
    for ((n, temp_id), id) in creates.iter().zip(base.new_task_ids(creates.len())) {
        if let Some(earlier) = first.get(temp_id) {
            return Err(Rejection::Invalid(format!(
                "payload.operations[{n}].temp_id: {temp_id:?} is used twice (first in operations[{earlier}]); give every new task its own temp_id"
            )));
        }
        if base.tasks.contains_key(*temp_id) || base.wbs.contains(temp_id) {
            return Err(Rejection::Invalid(format!(
                "payload.operations[{n}].temp_id: {temp_id:?} is the id of an existing task or node; a temp_id must be new"
            )));
        }
        first.insert(temp_id, *n);
        temp.insert(temp_id.to_string(), id);
    }
    Ok(temp)
}

/// Task ids shown as the reply named them (`temp-1 (t-1a2b3c4d)`).
struct Names(HashMap<String, String>);

fn names(temp: &HashMap<String, String>) -> Names {
    Names(temp.iter().map(|(t, id)| (id.clone(), t.clone())).collect())
}

impl Names {
    fn name(&self, id: &str) -> String {
        match self.0.get(id) {
            Some(temp) => format!("{temp} ({id})"),
            None => id.to_string(),
        }
    }
}

/// Carries out one operation on `state`.
fn apply(
    state: &mut PlanState,
    op: &Operation,
    temp: &HashMap<String, String>,
    now: &str,
) -> Result<Step, Rejection> {
    let invalid = Rejection::Invalid;
    let resolve = |id: &str| temp.get(id).cloned().unwrap_or_else(|| id.to_string());
    match op {
        Operation::Create {
            temp_id,
            fields,
            parent_id,
            position,
        } => {
            let id = resolve(temp_id);
            let depends_on = dependencies(state, fields, &id, temp)?.unwrap_or_default();
            let anchored = matches!(position, Some(Position::Before(_) | Position::After(_)));
            let default = match (parent_id, &fields.plan.phase) {
                (Some(_), _) => None,
                _ if anchored => None,
                (None, Some(phase)) => Some(state.ensure_phase(phase)),
                (None, None) => Some(state.wbs.root_node_id.clone()),
            };
            let (parent, index) = place(
                state,
                &id,
                parent_id.as_deref().map(resolve),
                position.as_ref(),
                default,
                &resolve,
            )
            .map_err(invalid)?;
            let title = fields.title.clone().unwrap_or_default();
            let record = TaskRecord {
                id: id.clone(),
                workspace_id: state.workspace_id.clone(),
                raw_prompt: prompt_of(&title, fields.plan.description.as_deref()),
                title: title.clone(),
                created_at: now.to_string(),
                eval: None,
                plan: PlanFields {
                    depends_on: Some(depends_on),
                    ..fields.plan.clone()
                },
            };
            state.add_task(record, &parent, index);
            Ok(Step::Create {
                task_id: id,
                temp_id: temp_id.clone(),
                title,
                parent_id: parent,
            })
        }
        Operation::Update { task_id, fields } => update(state, resolve(task_id), fields, temp),
        Operation::Move {
            task_id,
            parent_id,
            position,
        } => {
            let id = resolve(task_id);
            if let Some(why) = state.why_not_live(&id) {
                return Err(invalid(why));
            }
            let current = state.wbs.place_of(&id).map(|(parent, _)| parent);
            let (parent, index) = place(
                state,
                &id,
                parent_id.as_deref().map(resolve),
                position.as_ref(),
                current,
                &resolve,
            )
            .map_err(invalid)?;
            if state.wbs.contains(&id) {
                state.wbs.detach(&id);
                state.wbs.attach(&id, &parent, index);
            } else {
                let title = state.tasks[&id].record.title.clone();
                state.wbs.insert(&id, &title, true, &parent, index);
            }
            Ok(Step::Move {
                task_id: id,
                parent_id: parent,
                index,
            })
        }
        Operation::Delete { task_id, cascade } => {
            let id = resolve(task_id);
            let gone = state.delete(&id, *cascade)?;
            Ok(Step::Delete {
                task_id: id,
                with: gone.into_iter().skip(1).collect(),
            })
        }
    }
}

/// Carries out an update of task `id` with `fields`.
fn update(
    state: &mut PlanState,
    id: String,
    fields: &TaskFields,
    temp: &HashMap<String, String>,
) -> Result<Step, Rejection> {
    let task = match state.live(&id) {
        Some(task) => task.record.clone(),
        None => {
            return Err(Rejection::Invalid(
                state.why_not_live(&id).unwrap_or_default(),
            ));
        }
    };
    let depends_on = dependencies(state, fields, &id, temp)?;
    let title = fields.title.clone().unwrap_or(task.title.clone());
    let description = fields
        .plan
        .description
        .clone()
        .or(task.plan.description.clone());
    // A planned task's prompt is made of its title and description; it
    // follows them. A prompt the user wrote stays.
    let raw_prompt = (task.raw_prompt == prompt_of(&task.title, task.plan.description.as_deref()))
        .then(|| prompt_of(&title, description.as_deref()))
        .filter(|p| *p != task.raw_prompt);
    state.change(
        &id,
        TaskChanges {
            title: fields.title.clone(),
            raw_prompt,
            plan: PlanFields {
                depends_on,
                ..fields.plan.clone()
            },
        },
    );
    Ok(Step::Update {
        task_id: id,
        fields: fields.given(),
    })
}

/// The dependencies `fields` give task `id`, resolved to task ids: each a live
/// task or a task this patch creates, and not `id` itself. None when not given.
fn dependencies(
    state: &PlanState,
    fields: &TaskFields,
    id: &str,
    temp: &HashMap<String, String>,
) -> Result<Option<Vec<String>>, Rejection> {
    let Some(deps) = &fields.plan.depends_on else {
        return Ok(None);
    };
    let mut out: Vec<String> = Vec::with_capacity(deps.len());
    for (n, dep) in deps.iter().enumerate() {
        let resolved = temp.get(dep).cloned().unwrap_or_else(|| dep.clone());
        if resolved == id {
            return Err(Rejection::Invalid(format!(
                "dependencies[{n}]: the task depends on itself"
            )));
        }
        let created_here = temp.values().any(|t| *t == resolved);
        if !created_here && let Some(why) = state.why_not_live(&resolved) {
            return Err(Rejection::Invalid(format!(
                "dependencies[{n}]: {why}; a dependency is an existing task or a temp_id of this patch"
            )));
        }
        if !out.contains(&resolved) {
            out.push(resolved);
        }
    }
    Ok(Some(out))
}

/// Where node `id` goes: under `given` (a `parent_id`), else under the node
/// `position` is before or after, else under `default`; at `position` among the
/// parent's other children, else last. Checks that these exist and agree, and that
/// `id` does not go under itself. The error is the re-ask text for Meta.
fn place(
    state: &PlanState,
    id: &str,
    given: Option<String>,
    position: Option<&Position>,
    default: Option<String>,
    resolve: &dyn Fn(&str) -> String,
) -> Result<(String, usize), Reask> {
    let wbs = &state.wbs;
    let anchor = match position {
        Some(Position::Before(a) | Position::After(a)) => {
            let a = resolve(a);
            if a == id {
                return Err(format!("position: {a:?} is the task itself"));
            }
            let Some((anchor_parent, _)) = wbs.place_of(&a) else {
                return Err(if wbs.contains(&a) {
                    format!("position: {a:?} is the root; nothing goes before or after it")
                } else {
                    format!("position: {a:?} is not a node of the plan tree")
                });
            };
            Some((a, anchor_parent))
        }
        _ => None,
    };
    let parent = match (given, &anchor) {
        (Some(p), Some((a, anchor_parent))) if p != *anchor_parent => {
            return Err(format!(
                "conflicting position: {a:?} is under {anchor_parent:?}, not under parent_id {p:?}"
            ));
        }
        (Some(p), _) => p,
        (None, Some((_, anchor_parent))) => anchor_parent.clone(),
        (None, None) => {
            default.ok_or_else(|| format!("task {id} is not in the plan tree; give parent_id"))?
        }
    };
    if !wbs.contains(&parent) {
        return Err(format!(
            "parent_id: {parent:?} is not a node of the plan tree"
        ));
    }
    if let Some((a, _)) = anchor.as_ref().filter(|(a, _)| wbs.is_within(a, id)) {
        return Err(format!(
            "position: {a:?} is below {id}; a task cannot move next to its own descendant"
        ));
    }
    if wbs.contains(id) && wbs.is_within(&parent, id) {
        return Err(if parent == id {
            format!("parent_id: a task cannot go under itself ({id})")
        } else {
            format!(
                "parent_id: {parent:?} is below {id}; a task cannot move under its own descendant"
            )
        });
    }
    // Indexes count the parent's children without the node itself.
    let siblings: Vec<&String> = wbs.children(&parent).iter().filter(|c| *c != id).collect();
    let index = match (position, &anchor) {
        (Some(Position::Index(i)), _) if *i > siblings.len() => {
            return Err(format!(
                "position.index: {i} is past the end ({parent:?} has {} other children)",
                siblings.len()
            ));
        }
        (Some(Position::Index(i)), _) => *i,
        (Some(Position::After(_)), Some((a, _))) => siblings
            .iter()
            .position(|c| *c == a)
            .map_or(siblings.len(), |at| at + 1),
        (_, Some((a, _))) => siblings
            .iter()
            .position(|c| *c == a)
            .unwrap_or(siblings.len()),
        (_, None) => siblings.len(),
    };
    Ok((parent, index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::edit::prompt_of;
    use crate::plan::model::tests::state;
    use crate::queue::status::TaskStatus;
    use agent_runner_meta::reply::parse_reply;

    /// Phase P: [a → [b, c], d]; u is outside the tree; b depends on a, d on c.
    fn base() -> PlanState {
        let mut s = state(
            &[
                ("a", &[]),
                ("b", &["a"]),
                ("c", &[]),
                ("d", &["c"]),
                ("u", &[]),
            ],
            4,
        );
        for id in ["b", "c"] {
            s.wbs.detach(id);
            let end = s.wbs.children("a").len();
            s.wbs.attach(id, "a", end);
        }
        s.wbs.check().unwrap();
        s
    }

    fn phase(s: &PlanState) -> String {
        s.wbs.phase_named("P").unwrap().to_string()
    }

    fn patch(base: &PlanState, ops: &str) -> Result<Edit, Rejection> {
        let text = format!(
            "{{\"type\": \"plan_patch\", \"version\": 1, \"payload\": {{\"understanding\": \"u\", \"operations\": {}}}}}",
            ops.replace("PHASE", &phase(base))
        );
        let reply: PlanPatch = parse_reply(&text).map_err(Rejection::Invalid)?;
        plan(&reply, base, "now")
    }

    fn invalid(base: &PlanState, ops: &str) -> String {
        match patch(base, ops) {
            Err(Rejection::Invalid(m)) => m,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    fn created(edit: &Edit, n: usize) -> String {
        match &edit.steps[n] {
            Step::Create { task_id, .. } => task_id.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn create_goes_where_it_is_told() {
        let s = base();
        let p = phase(&s);
        let edit = patch(
            &s,
            r#"[
            {"op": "create", "temp_id": "n1", "title": "In a new phase", "phase_name": "Later", "dependencies": ["n2"]},
            {"op": "create", "temp_id": "n2", "title": "After d", "position": {"after": "d"}},
            {"op": "create", "temp_id": "n3", "title": "First of P", "parent_id": "PHASE", "position": {"before": "a"}},
            {"op": "create", "temp_id": "n4", "title": "Under the root", "parent_id": "node-root", "position": {"index": 1}},
            {"op": "create", "temp_id": "n5", "title": "Under n3", "parent_id": "n3", "acceptance_criteria": ["x"]},
            {"op": "create", "temp_id": "n6", "title": "Root, last", "description": "why"}
        ]"#,
        )
        .unwrap();
        let id = |n| created(&edit, n);
        let wbs = &edit.state.wbs;
        let later = wbs.phase_named("Later").unwrap().to_string();
        assert_eq!(
            wbs.children("node-root"),
            [p.clone(), id(3), later.clone(), id(5)]
        );
        assert_eq!(wbs.children(&later), [id(0)]);
        assert_eq!(wbs.children(&p), [id(2), "a".into(), "d".into(), id(1)]);
        assert_eq!(wbs.children(&id(2)), [id(4)]);
        let n1 = &edit.state.tasks[&id(0)].record;
        assert_eq!(
            n1.plan.depends_on,
            Some(vec![id(1)]),
            "a later temp_id resolves"
        );
        assert_eq!(n1.plan.phase.as_deref(), Some("Later"));
        assert_eq!(
            edit.state.tasks[&id(5)].record.raw_prompt,
            "Root, last\n\nwhy"
        );
        wbs.check().unwrap();
    }

    #[test]
    fn create_rejects_reused_and_unknown_ids_and_conflicting_positions() {
        let s = base();
        assert_eq!(
            invalid(
                &s,
                r#"[{"op": "create", "temp_id": "x", "title": "1"}, {"op": "create", "temp_id": "x", "title": "2"}]"#
            ),
            "payload.operations[1].temp_id: \"x\" is used twice (first in operations[0]); give every new task its own temp_id"
        );
        assert!(
            invalid(&s, r#"[{"op": "create", "temp_id": "a", "title": "1"}]"#)
                .contains("is the id of an existing task")
        );
        assert!(
            invalid(&s, r#"[{"op": "create", "temp_id": "u", "title": "1"}]"#)
                .contains("is the id of an existing task")
        );
        assert_eq!(
            invalid(
                &s,
                r#"[{"op": "create", "temp_id": "x", "title": "1", "parent_id": "node-root", "position": {"after": "b"}}]"#
            ),
            "payload.operations[0] (create): conflicting position: \"b\" is under \"a\", not under parent_id \"node-root\""
        );
        assert_eq!(
            invalid(
                &s,
                r#"[{"op": "create", "temp_id": "x", "title": "1", "parent_id": "nope"}]"#
            ),
            "payload.operations[0] (create): parent_id: \"nope\" is not a node of the plan tree"
        );
        assert_eq!(
            invalid(
                &s,
                r#"[{"op": "create", "temp_id": "x", "title": "1", "parent_id": "a", "position": {"index": 3}}]"#
            ),
            "payload.operations[0] (create): position.index: 3 is past the end (\"a\" has 2 other children)"
        );
        assert!(invalid(&s, r#"[{"op": "create", "temp_id": "x", "title": "1", "position": {"after": "node-root"}}]"#).contains("is the root"));
        assert!(
            invalid(
                &s,
                r#"[{"op": "create", "temp_id": "x", "title": "1", "position": {"after": "u"}}]"#
            )
            .contains("\"u\" is not a node")
        );
        assert_eq!(
            invalid(
                &s,
                r#"[{"op": "create", "temp_id": "x", "title": "1", "dependencies": ["zz"]}]"#
            ),
            "payload.operations[0] (create): dependencies[0]: task \"zz\" does not exist; a dependency is an existing task or a temp_id of this patch"
        );
        // A later create may go under an earlier one, not the other way round.
        assert!(invalid(&s, r#"[{"op": "create", "temp_id": "x", "title": "1", "parent_id": "y"}, {"op": "create", "temp_id": "y", "title": "2"}]"#).contains("is not a node"));
    }

    #[test]
    fn update_replaces_what_it_gives() {
        let mut s = base();
        {
            let b = &mut s.tasks.get_mut("b").unwrap().record;
            b.plan.description = Some("old".into());
            b.raw_prompt = prompt_of(&b.title, Some("old"));
            b.plan.acceptance_criteria = Some(vec!["one".into(), "two".into()]);
        }
        let edit = patch(
            &s,
            r#"[
            {"op": "update", "task_id": "b", "title": "Renamed", "acceptance_criteria": ["three"], "dependencies": ["c", "u"]},
            {"op": "update", "task_id": "d", "dependencies": []},
            {"op": "update", "task_id": "u", "title": "User task, renamed", "wbs_level": 1}
        ]"#,
        )
        .unwrap();
        let t = |id: &str| &edit.state.tasks[id].record;
        assert_eq!(t("b").title, "Renamed");
        assert_eq!(edit.state.wbs.nodes["b"].title, "Renamed");
        assert_eq!(t("b").plan.acceptance_criteria, Some(vec!["three".into()]));
        assert_eq!(t("b").plan.depends_on, Some(vec!["c".into(), "u".into()]));
        assert_eq!(t("b").plan.description.as_deref(), Some("old"));
        assert_eq!(
            t("b").raw_prompt,
            "Renamed\n\nold",
            "a planned prompt follows"
        );
        assert_eq!(t("d").plan.depends_on, Some(vec![]));
        assert_eq!(
            t("u").raw_prompt,
            "TODO アプリを作成して",
            "the user's prompt stays"
        );
        assert_eq!(t("u").plan.wbs_level, Some(1));
        assert_eq!(
            edit.steps[0],
            Step::Update {
                task_id: "b".into(),
                fields: vec!["title", "acceptance_criteria", "dependencies"]
            }
        );
        assert_eq!(
            invalid(&s, r#"[{"op": "update", "task_id": "zz", "title": "x"}]"#),
            "payload.operations[0] (update): task \"zz\" does not exist"
        );
        assert_eq!(
            invalid(
                &s,
                r#"[{"op": "delete", "task_id": "c"}, {"op": "update", "task_id": "c", "title": "x"}]"#
            ),
            "payload.operations[1] (update): task \"c\" is deleted"
        );
        assert!(
            invalid(
                &s,
                r#"[{"op": "update", "task_id": "c", "dependencies": ["c"]}]"#
            )
            .contains("depends on itself")
        );
        assert_eq!(
            invalid(
                &s,
                r#"[{"op": "update", "task_id": "c", "dependencies": ["d"]}]"#
            ),
            "the patch makes a dependency cycle: c → d → c; tasks that wait on each other can never run"
        );
        // A new task in the ring is named by its temp_id too.
        let ring = invalid(
            &s,
            r#"[{"op": "create", "temp_id": "n", "title": "N", "dependencies": ["d"]}, {"op": "update", "task_id": "c", "dependencies": ["n"]}]"#,
        );
        assert!(
            ring.starts_with("the patch makes a dependency cycle: c → n (t-"),
            "{ring}"
        );
        assert!(ring.contains(") → d → c;"), "{ring}");
    }

    #[test]
    fn move_puts_a_subtree_in_place() {
        let s = base();
        let p = phase(&s);
        let edit = patch(
            &s,
            r#"[
            {"op": "move", "task_id": "d", "position": {"before": "b"}},
            {"op": "move", "task_id": "c", "parent_id": "node-root", "position": {"index": 0}},
            {"op": "move", "task_id": "a", "position": {"after": "c"}},
            {"op": "move", "task_id": "u", "parent_id": "d"}
        ]"#,
        )
        .unwrap();
        let wbs = &edit.state.wbs;
        assert_eq!(
            wbs.children("node-root"),
            ["c".to_string(), "a".into(), p.clone()]
        );
        assert_eq!(wbs.children("a"), ["d", "b"]);
        assert_eq!(
            wbs.children("d"),
            ["u"],
            "a task outside the tree is placed"
        );
        assert!(wbs.children(&p).is_empty());
        wbs.check().unwrap();
        assert_eq!(
            edit.steps[1],
            Step::Move {
                task_id: "c".into(),
                parent_id: "node-root".into(),
                index: 0
            }
        );
        // Moving within the same parent counts the other children.
        let edit = patch(
            &s,
            r#"[{"op": "move", "task_id": "b", "position": {"index": 1}}]"#,
        )
        .unwrap();
        assert_eq!(edit.state.wbs.children("a"), ["c", "b"]);
        let edit = patch(
            &s,
            r#"[{"op": "move", "task_id": "c", "position": {"before": "b"}}]"#,
        )
        .unwrap();
        assert_eq!(edit.state.wbs.children("a"), ["c", "b"]);
    }

    #[test]
    fn move_rejects_cycles_in_the_tree_and_conflicts() {
        let s = base();
        assert_eq!(
            invalid(&s, r#"[{"op": "move", "task_id": "a", "parent_id": "b"}]"#),
            "payload.operations[0] (move): parent_id: \"b\" is below a; a task cannot move under its own descendant"
        );
        assert!(
            invalid(&s, r#"[{"op": "move", "task_id": "a", "parent_id": "a"}]"#)
                .contains("cannot go under itself")
        );
        assert!(
            invalid(
                &s,
                r#"[{"op": "move", "task_id": "a", "position": {"after": "a"}}]"#
            )
            .contains("is the task itself")
        );
        assert_eq!(
            invalid(
                &s,
                r#"[{"op": "move", "task_id": "a", "position": {"after": "c"}}]"#
            ),
            "payload.operations[0] (move): position: \"c\" is below a; a task cannot move next to its own descendant"
        );
        assert!(invalid(&s, r#"[{"op": "move", "task_id": "d", "parent_id": "PHASE", "position": {"after": "b"}}]"#).contains("conflicting position"));
        assert_eq!(
            invalid(
                &s,
                r#"[{"op": "move", "task_id": "u", "position": {"index": 0}}]"#
            ),
            "payload.operations[0] (move): task u is not in the plan tree; give parent_id"
        );
        assert!(
            invalid(&s, r#"[{"op": "move", "task_id": "zz", "parent_id": "a"}]"#)
                .contains("does not exist")
        );
    }

    #[test]
    fn delete_splices_in_order_or_cascades() {
        let s = base();
        let p = phase(&s);
        let edit = patch(&s, r#"[{"op": "delete", "task_id": "a"}]"#).unwrap();
        assert_eq!(edit.state.wbs.children(&p), ["b", "c", "d"]);
        assert_eq!(edit.state.tasks["b"].record.plan.depends_on, Some(vec![]));
        assert!(edit.state.tasks["a"].deleted);
        let edit = patch(&s, r#"[{"op": "delete", "task_id": "a", "cascade": true}]"#).unwrap();
        assert_eq!(edit.state.wbs.children(&p), ["d"]);
        assert_eq!(edit.state.tasks["d"].record.plan.depends_on, Some(vec![]));
        assert_eq!(
            edit.steps,
            [Step::Delete {
                task_id: "a".into(),
                with: vec!["b".into(), "c".into()]
            }]
        );
        assert_eq!(
            invalid(
                &s,
                r#"[{"op": "delete", "task_id": "a"}, {"op": "delete", "task_id": "a"}]"#
            ),
            "payload.operations[1] (delete): task \"a\" is deleted"
        );
        // A task made and deleted in one patch leaves no trace.
        let edit = patch(
            &s,
            r#"[{"op": "create", "temp_id": "x", "title": "X"}, {"op": "delete", "task_id": "x"}]"#,
        )
        .unwrap();
        assert_eq!(edit.state.wbs, s.wbs);
    }

    #[test]
    fn deleting_a_running_task_is_refused_naming_it() {
        let mut s = base();
        let c = s.tasks.get_mut("c").unwrap();
        c.status = TaskStatus::Running;
        c.job = Some("j-42".into());
        assert_eq!(
            patch(&s, r#"[{"op": "update", "task_id": "d", "title": "fine"}, {"op": "delete", "task_id": "c"}]"#).unwrap_err(),
            Rejection::Refused("payload.operations[1] (delete): task c is RUNNING (job j-42); a running task cannot be deleted: wait for it to finish (or stop the orchestrator), then ask again".into())
        );
        assert!(matches!(
            patch(&s, r#"[{"op": "delete", "task_id": "a", "cascade": true}]"#),
            Err(Rejection::Refused(m)) if m.contains("task c is RUNNING (job j-42), below a")
        ));
        // Splicing it out from under a deleted parent is fine.
        assert!(patch(&s, r#"[{"op": "delete", "task_id": "a"}]"#).is_ok());
    }
}
