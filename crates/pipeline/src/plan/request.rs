//! The `decompose` and `plan_patch` requests (meta-protocol.md §9.2, §10.2) and
//! their system prompts. What of the plan they carry is chosen by `trim`; then, so
//! that the first HTTP request stays within `MAX_REQUEST_BYTES` whatever the
//! titles, fewer tasks and nodes are kept (from the end of `trim`'s orders) until it
//! does. Texts are cut too: the message to `MAX_MESSAGE_BYTES`, titles to
//! `MAX_TITLE_CHARS`.

use serde::Serialize;

use super::chat::ChatMessage;
use super::model::{PlanState, PlannedTask};
use super::trim::{self, cut_text};
use crate::store::plan_fields::PlanFields;
use agent_runner_core::text::cut;

/// Largest first HTTP request body of a plan exchange (system prompt, request,
/// JSON framing).
pub(crate) const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// Longest user message sent, in bytes.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024;
/// Longest title (task or node) sent, in characters.
pub(crate) const MAX_TITLE_CHARS: usize = 120;
/// Longest phase or milestone name sent, in characters.
const MAX_NAME_CHARS: usize = 60;
/// What the HTTP body adds around the two messages (model, temperature, roles).
const FRAMING: usize = 1024;

/// A task as a request shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TaskSummary {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) status: &'static str,
    /// The plan fields requests show (`PlanFields::for_requests`).
    #[serde(flatten)]
    pub(crate) plan: PlanFields,
    /// Its node's parent in the tree (absent: not in the tree).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent_id: Option<String>,
}

/// A node of the tree as a request shows it, under its id in `node_index`: the
/// root, phases, and tasks with children. A task node without children shows only
/// in its parent's `children`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct NodeSummary {
    /// The root's and phases' (a task node's title is its task's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    /// In order; only nodes the request keeps.
    pub(crate) children: Vec<String>,
}

/// A message of the conversation as sent.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Said {
    pub(crate) role: super::chat::Role,
    pub(crate) text: String,
}

#[derive(Serialize)]
struct DecomposeRequest<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: &'a str,
    existing_tasks: Vec<TaskSummary>,
    #[serde(skip_serializing_if = "is_zero")]
    existing_tasks_omitted: usize,
    conversation: &'a [Said],
}

#[derive(Serialize)]
struct PatchRequest<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: &'a str,
    tasks: Vec<TaskSummary>,
    #[serde(skip_serializing_if = "is_zero")]
    tasks_omitted: usize,
    wbs: WbsOverview,
    conversation: &'a [Said],
}

#[derive(Serialize)]
struct WbsOverview {
    root_node_id: String,
    /// Node id → its entry, breadth-first (a YAML mapping keeps its order).
    node_index: serde_norway::Mapping,
    #[serde(skip_serializing_if = "is_zero")]
    nodes_omitted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The `decompose` request YAML for `message`.
pub(crate) fn decompose(message: &str, state: &PlanState, history: &[ChatMessage]) -> String {
    let message = cut(message, MAX_MESSAGE_BYTES);
    let said = conversation(history);
    let tasks = trim::tasks(state);
    let make = |keep: usize, _: usize| {
        let request = DecomposeRequest {
            kind: "decompose",
            message: &message,
            existing_tasks: tasks.iter().take(keep).map(|t| summary(state, t)).collect(),
            existing_tasks_omitted: tasks.len() - keep,
            conversation: &said,
        };
        serde_norway::to_string(&request).unwrap_or_default()
    };
    fit(
        &system_prompt_decompose(),
        tasks.len().min(trim::MAX_TASKS),
        0,
        make,
    )
}

/// The `plan_patch` request YAML for `message`.
pub(crate) fn patch(message: &str, state: &PlanState, history: &[ChatMessage]) -> String {
    let message = cut(message, MAX_MESSAGE_BYTES);
    let said = conversation(history);
    let tasks = trim::tasks(state);
    let nodes = trim::nodes(state);
    let make = |keep_tasks: usize, keep_nodes: usize| {
        let request = PatchRequest {
            kind: "plan_patch",
            message: &message,
            tasks: tasks
                .iter()
                .take(keep_tasks)
                .map(|t| summary(state, t))
                .collect(),
            tasks_omitted: tasks.len() - keep_tasks,
            wbs: WbsOverview {
                root_node_id: state.wbs.root_node_id.clone(),
                node_index: node_index(state, &nodes, keep_nodes),
                nodes_omitted: nodes.len() - keep_nodes,
            },
            conversation: &said,
        };
        serde_norway::to_string(&request).unwrap_or_default()
    };
    fit(
        &system_prompt_patch(),
        tasks.len().min(trim::MAX_TASKS),
        nodes.len().min(trim::MAX_NODES),
        make,
    )
}

/// `make(tasks, nodes)` with the most tasks and nodes (at most the given counts)
/// whose HTTP request, with `system`, stays within `MAX_REQUEST_BYTES`; each round
/// keeps a tenth fewer of each, so the result is the same for the same plan.
fn fit(
    system: &str,
    mut tasks: usize,
    mut nodes: usize,
    make: impl Fn(usize, usize) -> String,
) -> String {
    let fixed = escaped_len(system) + FRAMING;
    loop {
        let request = make(tasks, nodes);
        if fixed + escaped_len(&request) <= MAX_REQUEST_BYTES || (tasks == 0 && nodes == 0) {
            return request;
        }
        tasks -= (tasks / 10).max(1).min(tasks);
        nodes -= (nodes / 10).max(1).min(nodes);
    }
}

/// The length of `text` as a JSON string.
pub(crate) fn escaped_len(text: &str) -> usize {
    serde_json::to_string(text).map_or(text.len(), |s| s.len())
}

fn conversation(history: &[ChatMessage]) -> Vec<Said> {
    trim::conversation(history)
        .into_iter()
        .map(|m| Said {
            role: m.role,
            text: m.text,
        })
        .collect()
}

fn summary(state: &PlanState, task: &PlannedTask) -> TaskSummary {
    let r = &task.record;
    let mut plan = r.plan.for_requests();
    for name in [&mut plan.phase, &mut plan.milestone] {
        *name = name.as_deref().map(|s| cut_text(s, MAX_NAME_CHARS));
    }
    plan.depends_on = plan.depends_on.filter(|d| !d.is_empty());
    TaskSummary {
        id: r.id.clone(),
        title: cut_text(&r.title, MAX_TITLE_CHARS),
        status: task.status.as_str(),
        plan,
        parent_id: state.wbs.place_of(&r.id).map(|(parent, _)| parent),
    }
}

/// `node_index` for the first `keep` nodes of `order` (breadth-first).
fn node_index(state: &PlanState, order: &[&str], keep: usize) -> serde_norway::Mapping {
    let kept: std::collections::HashSet<&str> = order.iter().take(keep).copied().collect();
    let mut index = serde_norway::Mapping::new();
    for id in order.iter().take(keep) {
        let node = &state.wbs.nodes[*id];
        let children: Vec<String> = node
            .children
            .iter()
            .filter(|c| kept.contains(c.as_str()))
            .cloned()
            .collect();
        if node.task_id.is_some() && children.is_empty() {
            continue;
        }
        let entry = NodeSummary {
            title: node
                .task_id
                .is_none()
                .then(|| cut_text(&node.title, MAX_TITLE_CHARS)),
            children,
        };
        if let Ok(value) = serde_norway::to_value(entry) {
            index.insert(serde_norway::Value::String(id.to_string()), value);
        }
    }
    index
}

/// What both plan prompts say first.
const ROLE: &str = "You are the planner of a software project. A user talks to you in a chat; \
you turn what they ask into a plan of tasks, each of which an autonomous coding agent (Codex CLI in \
a sandbox, checked by tests) will carry out on the repository, one task per run, in dependency order. \
Make each task a unit such an agent can finish and verify in one run, with acceptance criteria that \
can be checked by reading the code or running commands. Always answer with exactly one YAML (or JSON) \
document. No code fences, no prose.";

/// The `decompose` system prompt: the role and the exact reply schema.
pub(crate) fn system_prompt_decompose() -> String {
    format!(
        "{ROLE}\n\n\
The request gives the user's message, the existing tasks (id, title, status, dependencies) and the \
latest conversation. Break the message down into phases of new tasks. Do not repeat existing tasks; \
depend on them instead.\n\n\
Reply schema:\n\
type: decompose\n\
understanding: <what the user wants, in a few sentences>\n\
phases:\n\
\x20 - name: <phase name, e.g. Design>\n\
\x20   milestone: <milestone id>\n\
\x20   tasks:\n\
\x20     - id: <temporary id, unique in this reply, e.g. temp-1>\n\
\x20       title: <one line>\n\
\x20       description: <what to do>\n\
\x20       acceptance_criteria: [<checkable requirement>, ...]   # 1 to 50\n\
\x20       dependencies: [<temporary ids of this reply or existing task ids>]   # optional; no cycles\n\
\x20       wbs_level: <1 concept, 2 design, 3 implementation>\n\
\x20       estimated_effort: <small | medium | large>\n\
\x20       suggested_impl: {{language: <..>, file_paths: [..], constraints: [..]}}   # optional\n\
potential_conflicts:   # optional\n\
\x20 - file: <path>\n\
\x20   tasks: [<task ids>]\n\
\x20   warning: <why they may collide>\n"
    )
}

/// The `plan_patch` system prompt: the role, the semantics and the exact reply schema.
pub(crate) fn system_prompt_patch() -> String {
    format!(
        "{ROLE}\n\n\
The request gives the user's message, the existing tasks (id, title, status, dependencies, phase, \
milestone, wbs_level, parent_id), the plan tree (root_node_id, and node_index: for the root, each phase \
and each task with subtasks, its title (not for tasks) and its children in order; phases are nodes \
under the root, a task's node id is its task id) and the latest conversation. Edit the plan by difference: change what exists rather than adding duplicates. \
Operations are carried out in order; the whole patch is rejected if one is invalid. A RUNNING task \
cannot be deleted.\n\
- create: a new task, under parent_id, else under the phase phase_name, else under the root; at \
position or last. temp_id names it in dependencies, parent_id and position of this patch.\n\
- update: changes only the fields given; acceptance_criteria and dependencies are replaced whole \
([] clears).\n\
- move: puts the task, with the tasks under it, under parent_id (default: where it is) at position \
(default: last).\n\
- delete: removes the task from the plan and from other tasks' dependencies; cascade: true deletes \
the tasks under it too, otherwise they take its place.\n\
position is one of {{index: <n>}}, {{before: <node id>}}, {{after: <node id>}} among the parent's \
other children.\n\n\
Reply schema:\n\
type: plan_patch\n\
version: 1\n\
payload:\n\
\x20 understanding: <what the user wants, in a few sentences>\n\
\x20 operations:\n\
\x20   - op: create\n\
\x20     temp_id: <new id, e.g. temp-1>\n\
\x20     title: <one line>\n\
\x20     description: <what to do>\n\
\x20     acceptance_criteria: [<checkable requirement>, ...]\n\
\x20     dependencies: [<task ids or temp_ids>]\n\
\x20     phase_name: <phase>\n\
\x20     milestone: <milestone id>\n\
\x20     wbs_level: <1 | 2 | 3>\n\
\x20     estimated_effort: <small | medium | large>\n\
\x20     suggested_impl: {{language: <..>, file_paths: [..], constraints: [..]}}\n\
\x20     test: {{command: <shell command>, timeout_sec: <seconds>}}   # only the command the user's message names\n\
\x20     parent_id: <node id>\n\
\x20     position: {{after: <node id>}}\n\
\x20   - op: update\n\
\x20     task_id: <task id>\n\
\x20     <any of the create fields except temp_id, parent_id, position>\n\
\x20   - op: move\n\
\x20     task_id: <task id>\n\
\x20     parent_id: <node id>\n\
\x20     position: {{index: 0}}\n\
\x20   - op: delete\n\
\x20     task_id: <task id>\n\
\x20     cascade: false\n\
\x20 potential_conflicts: []   # optional: {{file, tasks, warning}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::model::tests::state;
    use serde_norway::Value;

    #[test]
    fn a_patch_request_stays_within_its_budget_dropping_from_the_end() {
        let ids: Vec<String> = (0..300).map(|n| format!("t-{n:04}")).collect();
        let tasks: Vec<(&str, &[&str])> = ids.iter().map(|i| (i.as_str(), &[][..])).collect();
        let mut s = state(&tasks, 300);
        for task in s.tasks.values_mut() {
            task.record.title = "長いタイトル".repeat(40);
        }
        let request = patch("move things", &s, &[]);
        let size = escaped_len(&system_prompt_patch()) + escaped_len(&request) + FRAMING;
        assert!(size <= MAX_REQUEST_BYTES, "{size}");
        let value: Value = serde_norway::from_str(&request).unwrap();
        let sent = value["tasks"].as_sequence().unwrap();
        assert!(sent.len() < 200, "{}", sent.len());
        assert_eq!(
            value["tasks_omitted"].as_u64().unwrap() as usize + sent.len(),
            300
        );
        // The first ones in id order (all PENDING), titles cut to 120 characters.
        assert_eq!(sent[0]["id"].as_str(), Some("t-0000"));
        assert_eq!(sent[1]["id"].as_str(), Some("t-0001"));
        assert_eq!(
            sent[0]["title"].as_str().unwrap().chars().count(),
            MAX_TITLE_CHARS
        );
        let index = value["wbs"]["node_index"].as_mapping().unwrap();
        let root = &index["node-root"];
        assert_eq!(root["title"].as_str(), Some("Plan"));
        let phase = root["children"][0].as_str().unwrap();
        assert_eq!(index[phase]["title"].as_str(), Some("P"));
        let children = index[phase]["children"].as_sequence().unwrap();
        // The root, the phase and 198 tasks: 200 nodes at most, fewer to fit.
        assert!(children.len() <= 198, "{}", children.len());
        assert_eq!(children[0].as_str(), Some("t-0000"));
        assert!(
            index.get("t-0000").is_none(),
            "no entry for a task without children"
        );
        assert_eq!(
            value["wbs"]["nodes_omitted"].as_u64().unwrap() as usize + children.len() + 2,
            302
        );
    }
}
