//! Meta `decompose` (meta-protocol.md §9): a request in the user's words becomes
//! phases of new tasks. The reply's shape is checked as it is parsed (`Reply`);
//! then `plan` checks it against the plan (dependencies on existing tasks, rings)
//! and works out the new plan: temporary ids become task ids, dependencies are
//! rewritten to them, each phase becomes (or reuses) a node under the root and its
//! tasks go under it, in order.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::edit::{Edit, Step, prompt_of};
use super::fields::{Fields, conflicts};
use super::model::{PlanState, Rejection};
use crate::store::plan_fields::PlanFields;
use crate::store::task_file::TaskRecord;
use crate::store::{cycle, new_task};
use agent_runner_core::text::one_line;
use agent_runner_meta::reply::Reask;
use agent_runner_meta::reply::Reply;

/// Most tasks one reply may create.
pub(crate) const MAX_NEW_TASKS: usize = 500;

/// A `decompose` reply, its shape checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decomposition {
    pub(crate) understanding: String,
    pub(crate) phases: Vec<Phase>,
    pub(crate) potential_conflicts: Vec<Value>,
}

/// A phase of the reply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Phase {
    pub(crate) name: String,
    pub(crate) milestone: String,
    pub(crate) tasks: Vec<DecomposedTask>,
}

/// A task of the reply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DecomposedTask {
    /// The temporary id.
    pub(crate) id: String,
    pub(crate) title: String,
    /// Its plan fields as the reply gave them, `REQUIRED` ones present;
    /// `depends_on` names temporary ids of this reply, or ids of existing tasks.
    pub(crate) plan: PlanFields,
    /// Where it is in the reply (`phases[0].tasks[1]`), for messages.
    pub(crate) path: String,
}

/// The plan fields every task of a `decompose` reply must give (its phase and
/// milestone are its phase's).
const REQUIRED: [&str; 4] = [
    "description",
    "acceptance_criteria",
    "wbs_level",
    "estimated_effort",
];

impl DecomposedTask {
    /// The tasks it depends on.
    pub(crate) fn dependencies(&self) -> &[String] {
        self.plan.depends_on.as_deref().unwrap_or_default()
    }
}

impl Reply for Decomposition {
    const KIND: &'static str = "decompose";

    fn schema() -> serde_json::Value {
        super::schema::decompose()
    }

    fn from_value(value: serde_norway::Value) -> Result<Self, Reask> {
        let top = Fields::of(&value, "")?;
        let understanding = top.required_text("understanding")?;
        let phases = top.list("phases")?.ok_or("phases: missing")?;
        if phases.is_empty() {
            return Err("phases: empty; give at least one phase with tasks".into());
        }
        let mut first_use: HashMap<String, String> = HashMap::new();
        let mut count = 0;
        let mut out = Vec::new();
        for (p, phase) in phases.iter().enumerate() {
            let f = Fields::of(phase, format!("phases[{p}]"))?;
            let items = f
                .list("tasks")?
                .ok_or_else(|| format!("{}: missing", f.at("tasks")))?;
            if items.is_empty() {
                return Err(format!("{}: empty; a phase has tasks", f.at("tasks")));
            }
            let mut tasks = Vec::new();
            for (n, item) in items.iter().enumerate() {
                let task = task(&Fields::of(item, format!("{}[{n}]", f.at("tasks")))?)?;
                if let Some(first) = first_use.get(&task.id) {
                    return Err(format!(
                        "{}.id: {:?} is used twice (first at {first}); give every task its own id",
                        task.path, task.id
                    ));
                }
                first_use.insert(task.id.clone(), task.path.clone());
                tasks.push(task);
            }
            count += tasks.len();
            if count > MAX_NEW_TASKS {
                return Err(format!(
                    "more than {MAX_NEW_TASKS} tasks; plan in larger steps"
                ));
            }
            out.push(Phase {
                name: one_line(&f.required_text("name")?),
                milestone: f
                    .text("milestone")?
                    .ok_or_else(|| format!("{}: missing", f.at("milestone")))?,
                tasks,
            });
        }
        Ok(Decomposition {
            understanding,
            phases: out,
            potential_conflicts: conflicts(&top)?,
        })
    }
}

fn task(f: &Fields) -> Result<DecomposedTask, Reask> {
    let plan = f.plan_fields()?;
    if plan.test.is_some() {
        // What proves a task done is the user's to pin, not the planner's to invent.
        return Err(format!(
            "{}: a decompose does not set tests; leave it out (the user pins them)",
            f.at("test")
        ));
    }
    let given = plan.given();
    if let Some(key) = REQUIRED.iter().find(|key| !given.contains(key)) {
        return Err(format!("{}: missing", f.at(key)));
    }
    if plan.acceptance_criteria.as_ref().is_some_and(Vec::is_empty) {
        return Err(format!(
            "{}: empty; give at least one",
            f.at("acceptance_criteria")
        ));
    }
    Ok(DecomposedTask {
        id: f.required_text("id")?,
        title: new_task::title(&f.required_text("title")?, &f.at("title"))?,
        plan,
        path: f.path.clone(),
    })
}

/// The plan after `reply`, checked against `base`: dependencies name tasks of the
/// reply or live tasks, no temporary id is an existing task's id, no ring. `now`
/// is the new tasks' `created_at`.
pub(crate) fn plan(reply: &Decomposition, base: &PlanState, now: &str) -> Result<Edit, Rejection> {
    let invalid = Rejection::Invalid;
    let mut state = base.clone();
    let tasks: Vec<&DecomposedTask> = reply.phases.iter().flat_map(|p| &p.tasks).collect();
    let mut real: BTreeMap<&str, String> = BTreeMap::new();
    for (task, id) in tasks.iter().zip(base.new_task_ids(tasks.len())) {
        if base.tasks.contains_key(&task.id) || base.wbs.contains(&task.id) {
            return Err(invalid(format!(
                "{}.id: {:?} is the id of an existing task or node; give new tasks temporary ids of their own",
                task.path, task.id
            )));
        }
        real.insert(&task.id, id);
    }
    let mut ring: HashMap<&str, Vec<&str>> = HashMap::new();
    for task in &tasks {
        for (n, dep) in task.dependencies().iter().enumerate() {
            if dep == &task.id {
                return Err(invalid(format!(
                    "{}.dependencies[{n}]: the task depends on itself",
                    task.path
                )));
            }
            if !real.contains_key(dep.as_str())
                && let Some(why) = base.why_not_live(dep)
            {
                return Err(invalid(format!(
                    "{}.dependencies[{n}]: {why}: a dependency is a task of this reply or an existing task",
                    task.path
                )));
            }
        }
        let deps = task.dependencies().iter().map(String::as_str);
        ring.insert(&task.id, deps.filter(|d| real.contains_key(d)).collect());
    }
    if let Some(cycle) = cycle::find_cycle(&ring) {
        return Err(invalid(format!(
            "dependency cycle: {}; tasks that wait on each other can never run",
            cycle.join(" → ")
        )));
    }
    let mut steps = Vec::new();
    for phase in &reply.phases {
        let node = state.ensure_phase(&phase.name);
        for task in &phase.tasks {
            let id = real[task.id.as_str()].clone();
            let depends_on = task
                .dependencies()
                .iter()
                .map(|d| real.get(d.as_str()).cloned().unwrap_or_else(|| d.clone()))
                .collect();
            let record = TaskRecord {
                id: id.clone(),
                workspace_id: base.workspace_id.clone(),
                title: task.title.clone(),
                raw_prompt: prompt_of(&task.title, task.plan.description.as_deref()),
                created_at: now.to_string(),
                eval: None,
                plan: PlanFields {
                    depends_on: Some(depends_on),
                    phase: Some(phase.name.clone()),
                    milestone: Some(phase.milestone.clone()),
                    ..task.plan.clone()
                },
            };
            let end = state.wbs.children(&node).len();
            state.add_task(record, &node, end);
            steps.push(Step::Create {
                task_id: id,
                temp_id: task.id.clone(),
                title: task.title.clone(),
                parent_id: node.clone(),
            });
        }
    }
    Ok(Edit {
        understanding: reply.understanding.clone(),
        potential_conflicts: reply.potential_conflicts.clone(),
        state,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::model::tests::state;
    use agent_runner_meta::reply::parse_reply;

    const REPLY: &str = "type: decompose
understanding: A product list page.
phases:
  - name: Design
    milestone: design
    tasks:
      - id: temp-task-1
        title: Component design
        description: Design the card's props.
        acceptance_criteria: [Props are defined]
        wbs_level: 2
        estimated_effort: small
        suggested_impl: {language: typescript, file_paths: [src/Card.svelte]}
  - name: P
    milestone: impl
    tasks:
      - id: temp-task-2
        title: Component implementation
        description: Build it.
        acceptance_criteria: [It renders, It is tested]
        dependencies: [temp-task-1, a]
        wbs_level: 3
        estimated_effort: Medium
potential_conflicts:
  - {file: src/routes/+page.svelte, tasks: [a], warning: busy}
";

    fn decompose(reply: &str, base: &PlanState) -> Result<Edit, Rejection> {
        let reply: Decomposition = parse_reply(reply).map_err(Rejection::Invalid)?;
        plan(&reply, base, "2026-01-01T00:00:00.000Z")
    }

    #[test]
    fn a_title_the_runner_would_refuse_is_refused_here() {
        let reply = REPLY.replace(
            "title: Component design",
            "title: \"Component\\x1b[2J design\"",
        );
        let e = parse_reply::<Decomposition>(&reply).unwrap_err();
        assert!(
            e.contains("phases[0].tasks[0].title: ") && e.contains("control characters"),
            "{e}"
        );
        let reply = REPLY.replace("title: Component design", "title: \"Component\\n  design\"");
        let made = decompose(&reply, &state(&[("a", &[])], 1)).unwrap();
        assert!(
            made.state
                .tasks
                .values()
                .any(|t| t.record.title == "Component design"),
            "line breaks become spaces"
        );
    }

    #[test]
    fn temporary_ids_become_task_ids_and_phases_become_nodes() {
        let base = state(&[("a", &[])], 1);
        let edit = decompose(REPLY, &base).unwrap();
        let ids: Vec<&str> = edit
            .steps
            .iter()
            .map(|s| match s {
                Step::Create { task_id, .. } => task_id.as_str(),
                _ => panic!("{s:?}"),
            })
            .collect();
        assert_eq!(ids.len(), 2);
        assert!(ids.iter().all(|id| id.starts_with("t-") && id.len() == 10));
        let second = &edit.state.tasks[ids[1]].record;
        assert_eq!(
            second.plan.depends_on,
            Some(vec![ids[0].to_string(), "a".to_string()])
        );
        assert_eq!(second.raw_prompt, "Component implementation\n\nBuild it.");
        assert_eq!(second.plan.estimated_effort.as_deref(), Some("medium"));
        assert_eq!(second.plan.milestone.as_deref(), Some("impl"));
        assert_eq!(second.plan.phase.as_deref(), Some("P"));
        assert_eq!(second.plan.wbs_level, Some(3));
        assert_eq!(
            second.plan.acceptance_criteria,
            Some(vec!["It renders".into(), "It is tested".into()])
        );
        let first = &edit.state.tasks[ids[0]].record;
        assert_eq!(
            first.plan.suggested_impl,
            Some(serde_json::json!({"language": "typescript", "file_paths": ["src/Card.svelte"]}))
        );
        // "Design" is a new phase after the existing "P", which gets the second task.
        let wbs = &edit.state.wbs;
        let root = wbs.children(&wbs.root_node_id);
        assert_eq!(root.len(), 2);
        assert_eq!(wbs.nodes[&root[1]].title, "Design");
        assert_eq!(wbs.children(&root[1]), [ids[0]]);
        assert_eq!(wbs.children(&root[0]), ["a", ids[1]]);
        wbs.check().unwrap();
        assert_eq!(edit.potential_conflicts[0]["warning"], "busy");
    }

    #[test]
    fn rings_unknown_dependencies_and_reused_ids_are_invalid() {
        let base = state(&[("a", &[]), ("gone", &[])], 2);
        let ring = REPLY.replace(
            "        wbs_level: 2\n",
            "        dependencies: [temp-task-2]\n        wbs_level: 2\n",
        );
        assert_eq!(
            decompose(&ring, &base).unwrap_err(),
            Rejection::Invalid(
                "dependency cycle: temp-task-1 → temp-task-2 → temp-task-1; tasks that wait on each other can never run".into()
            )
        );
        let unknown = REPLY.replace("[temp-task-1, a]", "[temp-task-9]");
        assert_eq!(
            decompose(&unknown, &base).unwrap_err(),
            Rejection::Invalid(
                "phases[1].tasks[0].dependencies[0]: task \"temp-task-9\" does not exist: a dependency is a task of this reply or an existing task".into()
            )
        );
        let mut with_deleted = base.clone();
        with_deleted.delete("gone", false).unwrap();
        let deleted = REPLY.replace("[temp-task-1, a]", "[gone]");
        assert!(
            matches!(decompose(&deleted, &with_deleted), Err(Rejection::Invalid(m)) if m.contains("is deleted"))
        );
        let itself = REPLY.replace("[temp-task-1, a]", "[temp-task-2]");
        assert!(
            matches!(decompose(&itself, &base), Err(Rejection::Invalid(m)) if m.contains("depends on itself"))
        );
        let twice = REPLY.replace("id: temp-task-2", "id: temp-task-1");
        assert_eq!(
            decompose(&twice, &base).unwrap_err(),
            Rejection::Invalid(
                "phases[1].tasks[0].id: \"temp-task-1\" is used twice (first at phases[0].tasks[0]); give every task its own id".into()
            )
        );
        let existing = REPLY
            .replace("id: temp-task-1", "id: a")
            .replace("[temp-task-1, a]", "[a]");
        assert!(
            matches!(decompose(&existing, &base), Err(Rejection::Invalid(m)) if m.contains("existing task"))
        );
    }

    #[test]
    fn the_shape_is_checked_with_paths() {
        let base = state(&[("a", &[])], 1);
        let err = |from: &str, to: &str| match decompose(&REPLY.replace(from, to), &base) {
            Err(Rejection::Invalid(m)) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            err("        wbs_level: 3\n", ""),
            "phases[1].tasks[0].wbs_level: missing"
        );
        assert_eq!(
            err("Medium", "huge"),
            "phases[1].tasks[0].estimated_effort: \"huge\"; expected one of small, medium, large"
        );
        assert_eq!(
            err("[Props are defined]", "[]"),
            "phases[0].tasks[0].acceptance_criteria: empty; give at least one"
        );
        assert_eq!(
            err("understanding: A product list page.\n", ""),
            "understanding: missing"
        );
        assert_eq!(
            err("    milestone: design\n", ""),
            "phases[0].milestone: missing"
        );
    }
}
