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

use super::super::record::{TaskChanges, TaskRecord};
use super::edit::{Edit, Step, prompt_of};
use super::model::{PlanState, Rejection};
use super::patch::{Operation, PlanPatch, Position, TaskFields};

/// The plan after `patch`, checked against `base`; `now` is the new tasks'
/// `created_at`.
pub fn plan(patch: &PlanPatch, base: &PlanState, now: &str) -> Result<Edit, Rejection> {
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
    if base.dependency_cycle().is_none() {
        if let Some(ring) = state.dependency_cycle() {
            let names = names(&temp);
            let ring: Vec<String> = ring.iter().map(|id| names.name(id)).collect();
            return Err(Rejection::Invalid(format!(
                "the patch makes a dependency cycle: {}; tasks that wait on each other can never run",
                ring.join(" → ")
            )));
        }
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
            let default = match (parent_id, &fields.phase_name) {
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
                raw_prompt: prompt_of(&title, fields.description.as_deref()),
                title: title.clone(),
                created_at: now.to_string(),
                description: fields.description.clone(),
                acceptance_criteria: fields.acceptance_criteria.clone(),
                depends_on: Some(depends_on),
                phase: fields.phase_name.clone(),
                milestone: fields.milestone.clone(),
                wbs_level: fields.wbs_level,
                estimated_effort: fields.estimated_effort.clone(),
                suggested_impl: fields.suggested_impl.clone(),
            };
            state.add_task(record, &parent, index);
            Ok(Step::Create {
                task_id: id,
                temp_id: temp_id.clone(),
                title,
                parent_id: parent,
            })
        }
        Operation::Update { task_id, fields } => {
            let id = resolve(task_id);
            let task = match state.live(&id) {
                Some(task) => task.record.clone(),
                None => return Err(invalid(state.why_not_live(&id).unwrap_or_default())),
            };
            let depends_on = dependencies(state, fields, &id, temp)?;
            let title = fields.title.clone().unwrap_or(task.title.clone());
            let description = fields.description.clone().or(task.description.clone());
            // A planned task's prompt is made of its title and description; it
            // follows them. A prompt the user wrote stays.
            let raw_prompt = (task.raw_prompt
                == prompt_of(&task.title, task.description.as_deref()))
            .then(|| prompt_of(&title, description.as_deref()))
            .filter(|p| *p != task.raw_prompt);
            state.change(
                &id,
                TaskChanges {
                    title: fields.title.clone(),
                    raw_prompt,
                    description: fields.description.clone(),
                    acceptance_criteria: fields.acceptance_criteria.clone(),
                    depends_on,
                    phase: fields.phase_name.clone(),
                    milestone: fields.milestone.clone(),
                    wbs_level: fields.wbs_level,
                    estimated_effort: fields.estimated_effort.clone(),
                    suggested_impl: fields.suggested_impl.clone(),
                },
            );
            Ok(Step::Update {
                task_id: id,
                fields: fields.given(),
            })
        }
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

/// The dependencies `fields` give task `id`, resolved to task ids: each a live
/// task or a task this patch creates, and not `id` itself. None when not given.
fn dependencies(
    state: &PlanState,
    fields: &TaskFields,
    id: &str,
    temp: &HashMap<String, String>,
) -> Result<Option<Vec<String>>, Rejection> {
    let Some(deps) = &fields.dependencies else {
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
        if !created_here {
            if let Some(why) = state.why_not_live(&resolved) {
                return Err(Rejection::Invalid(format!(
                    "dependencies[{n}]: {why}; a dependency is an existing task or a temp_id of this patch"
                )));
            }
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
/// `id` does not go under itself.
fn place(
    state: &PlanState,
    id: &str,
    given: Option<String>,
    position: Option<&Position>,
    default: Option<String>,
    resolve: &dyn Fn(&str) -> String,
) -> Result<(String, usize), String> {
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
