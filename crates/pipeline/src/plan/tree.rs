//! `plan --show`: the plan as a tree of phases and tasks, with each task's derived
//! status and dependencies; live tasks outside the tree (made by `task new`) are
//! listed after it. Text for people, or one JSON document whose nodes are a flat
//! list in display order with their depth (a nested document could be deeper than
//! JSON readers allow).

use serde::Serialize;
use serde_json::{Value, json};

use super::model::PlanState;
use agent_runner_core::text::{escape_controls, fit, one_line};

/// One line of the view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Row {
    pub(crate) id: String,
    /// `root`, `phase` (a node that is not a task) or `task`.
    pub(crate) kind: &'static str,
    pub(crate) depth: usize,
    pub(crate) parent: Option<String>,
    pub(crate) title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) depends_on: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) milestone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) estimated_effort: Option<String>,
    /// The queued or running job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) job: Option<String>,
}

/// The tree in display order (pre-order, siblings in order), and the live tasks
/// outside it (by creation time, then id).
pub(crate) fn rows(state: &PlanState) -> (Vec<Row>, Vec<Row>) {
    let wbs = &state.wbs;
    let mut tree = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![(wbs.root_node_id.clone(), 0usize)];
    while let Some((id, depth)) = stack.pop() {
        let Some(node) = wbs.nodes.get(&id).filter(|_| seen.insert(id.clone())) else {
            continue;
        };
        stack.extend(node.children.iter().rev().map(|c| (c.clone(), depth + 1)));
        let kind = match (&node.parent, &node.task_id) {
            (None, _) => "root",
            (_, Some(_)) => "task",
            _ => "phase",
        };
        let mut row = match state.tasks.get(&id).filter(|_| kind == "task") {
            Some(task) => task_row(task, depth),
            None => Row {
                id: id.clone(),
                kind,
                depth,
                parent: None,
                title: node.title.clone(),
                status: None,
                depends_on: Vec::new(),
                milestone: None,
                estimated_effort: None,
                job: None,
            },
        };
        row.kind = kind;
        row.parent = node.parent.clone();
        tree.push(row);
    }
    let in_tree = wbs.task_ids();
    let mut outside: Vec<&super::model::PlannedTask> = state
        .tasks
        .values()
        .filter(|t| !t.deleted && !in_tree.contains(t.record.id.as_str()))
        .collect();
    outside.sort_by(|a, b| {
        (&a.record.created_at, &a.record.id).cmp(&(&b.record.created_at, &b.record.id))
    });
    (tree, outside.into_iter().map(|t| task_row(t, 0)).collect())
}

fn task_row(task: &super::model::PlannedTask, depth: usize) -> Row {
    let r = &task.record;
    Row {
        id: r.id.clone(),
        kind: "task",
        depth,
        parent: None,
        title: r.title.clone(),
        status: Some(task.status.as_str()),
        depends_on: r.plan.depends_on.clone().unwrap_or_default(),
        milestone: r.plan.milestone.clone(),
        estimated_effort: r.plan.estimated_effort.clone(),
        job: task.job.clone(),
    }
}

/// `plan --show --json`.
pub fn json(state: &PlanState) -> Value {
    let (tree, outside) = rows(state);
    json!({
        "workspace_id": state.workspace_id,
        "revision": state.wbs.revision,
        "root_node_id": state.wbs.root_node_id,
        "nodes": tree,
        "outside_plan": outside,
    })
}

/// `plan --show`.
pub fn text(state: &PlanState) -> String {
    let (tree, outside) = rows(state);
    let e = |s: &str| escape_controls(&one_line(s));
    let mut out = String::new();
    for row in &tree {
        let indent = "  ".repeat(row.depth);
        match row.kind {
            "root" => out.push_str(&format!(
                "{} (revision {})\n",
                e(&row.title),
                state.wbs.revision
            )),
            "phase" => {
                let milestones = phase_milestones(&tree, row);
                out.push_str(&format!("{indent}{}{milestones}\n", e(&row.title)));
            }
            _ => out.push_str(&format!("{indent}{}\n", task_line(row))),
        }
    }
    if tree.len() == 1 {
        out.push_str("  (no plan yet; make one with `agent-runner plan REQUEST...`)\n");
    }
    if !outside.is_empty() {
        out.push_str("Not in the plan:\n");
        for row in &outside {
            out.push_str(&format!("  {}\n", task_line(row)));
        }
    }
    out
}

fn task_line(row: &Row) -> String {
    let e = |s: &str| escape_controls(&one_line(s));
    let deps = if row.depends_on.is_empty() {
        String::new()
    } else {
        format!("  (after {})", e(&row.depends_on.join(", ")))
    };
    format!(
        "{} {}  {}{deps}",
        fit(row.status.unwrap_or("?"), 9),
        e(&row.id),
        e(&row.title)
    )
}

/// ` [m1]` when the phase's tasks name milestones.
fn phase_milestones(tree: &[Row], phase: &Row) -> String {
    let mut names: Vec<&str> = tree
        .iter()
        .filter(|r| r.parent.as_deref() == Some(phase.id.as_str()))
        .filter_map(|r| r.milestone.as_deref())
        .collect();
    names.dedup();
    if names.is_empty() {
        String::new()
    } else {
        format!(" [{}]", escape_controls(&one_line(&names.join(", "))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::model::tests::state;
    use crate::queue::status::TaskStatus;

    #[test]
    fn the_tree_shows_phases_tasks_statuses_and_dependencies() {
        let mut s = state(&[("a", &[]), ("b", &["a"]), ("c", &[]), ("u", &[])], 3);
        s.wbs.detach("c");
        s.wbs.attach("c", "a", 0);
        s.tasks.get_mut("b").unwrap().status = TaskStatus::Blocked;
        s.tasks.get_mut("a").unwrap().record.plan.milestone = Some("m1".into());
        s.tasks.get_mut("u").unwrap().record.title = "outside\x1b[31m".into();
        let text = text(&s);
        assert_eq!(
            text,
            "Plan (revision 0)\n  P [m1]\n    PENDING   a  Task a\n      PENDING   c  Task c\n    BLOCKED   b  Task b  (after a)\nNot in the plan:\n  PENDING   u  outside\\e[31m\n"
        );
        let doc = json(&s);
        let nodes = doc["nodes"].as_array().unwrap();
        let ids: Vec<&str> = nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
        assert_eq!(ids[2..], ["a", "c", "b"]);
        assert_eq!(nodes[3]["depth"], 3);
        assert_eq!(nodes[3]["parent"], "a");
        assert_eq!(nodes[4]["depends_on"], json!(["a"]));
        assert_eq!(nodes[4]["status"], "BLOCKED");
        assert_eq!(nodes[1]["kind"], "phase");
        assert_eq!(doc["outside_plan"][0]["id"], "u");
    }
}
