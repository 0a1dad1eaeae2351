//! The plan in memory: every task of the workspace with its derived status, and the
//! tree. A plan edit (decompose or plan_patch) is worked out on a copy of this, one
//! step at a time, each step checked; only a copy that passed every check is
//! written (`apply`), so a bad reply changes nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::super::{PipelineError, Workspace};
use super::wbs::Wbs;
use crate::queue::board::Board;
use crate::queue::status::TaskStatus;
use crate::store::commits::Commits;
use crate::store::cycle;
use crate::store::id;
use crate::store::task_file::{TaskChanges, TaskRecord};
use crate::store::task_store::TaskStore;

/// A task as the plan sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedTask {
    pub record: TaskRecord,
    pub(crate) deleted: bool,
    pub(crate) status: TaskStatus,
    /// The queued or running job, if any (for messages).
    pub(crate) job: Option<String>,
}

/// The tasks and the tree of one workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanState {
    pub(crate) workspace_id: String,
    /// Every task, deleted ones included, by id.
    pub tasks: BTreeMap<String, PlannedTask>,
    pub wbs: Wbs,
}

/// Why a step of an edit was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rejection {
    /// The reply is wrong (unknown id, cycle, ...): Meta is asked again, told why.
    Invalid(String),
    /// The reply is fine but cannot be done now (deleting a RUNNING task): nothing is
    /// written and the user is told why.
    Refused(String),
}

/// A snapshot for an edit: the plan, and the edits found not to have committed.
pub struct Loaded {
    pub state: PlanState,
    /// Ids of plan edits whose lines are on disk but do not count (`store::commits`).
    pub(crate) uncommitted: BTreeSet<String>,
}

impl PlanState {
    /// Reads the plan of `ws`: `wbs.json` first, then the tasks as its commit
    /// record says, so both are of the same revision.
    pub fn load(ws: &Workspace) -> Result<Loaded, PipelineError> {
        let wbs = Wbs::load(ws)?;
        let commits = Commits {
            revision: wbs.revision,
            aborted: wbs.aborted.iter().cloned().collect(),
            unknown: false,
        };
        let store = TaskStore::with_commits(ws, commits);
        let board = Board::load_from(ws, &store)?;
        let uncommitted = store.uncommitted_edits()?;
        Ok(Loaded {
            state: PlanState::of(&ws.id, &board, wbs),
            uncommitted,
        })
    }

    /// The plan of these tasks and this tree. Task nodes whose task is gone or
    /// deleted (another program's doing) are spliced out, with a warning.
    pub(crate) fn of(workspace_id: &str, board: &Board, mut wbs: Wbs) -> PlanState {
        let tasks: BTreeMap<String, PlannedTask> = board
            .tasks
            .iter()
            .map(|view| {
                let id = view.record.id.clone();
                let planned = PlannedTask {
                    record: view.record.clone(),
                    deleted: view.deleted.is_some(),
                    status: board.status(&id).unwrap_or(TaskStatus::Pending),
                    job: board.jobs.get(&id).map(|(_, job)| job.clone()),
                };
                (id, planned)
            })
            .collect();
        let stale: Vec<String> = wbs
            .nodes
            .values()
            .filter_map(|n| n.task_id.clone())
            .filter(|t| tasks.get(t).is_none_or(|p| p.deleted))
            .collect();
        for id in stale {
            log::warn!("wbs.json: task {id} is deleted or missing; its node is dropped");
            wbs.splice_out(&id);
        }
        PlanState {
            workspace_id: workspace_id.to_string(),
            tasks,
            wbs,
        }
    }

    /// Task `id` if it exists and is not deleted.
    pub(crate) fn live(&self, id: &str) -> Option<&PlannedTask> {
        self.tasks.get(id).filter(|t| !t.deleted)
    }

    /// Why `id` cannot be used as a task (None if it is a live task).
    pub(crate) fn why_not_live(&self, id: &str) -> Option<String> {
        match self.tasks.get(id) {
            None => Some(format!("task {id:?} does not exist")),
            Some(t) if t.deleted => Some(format!("task {id:?} is deleted")),
            Some(_) => None,
        }
    }

    /// `n` new task ids, distinct, that no task or node has.
    pub(crate) fn new_task_ids(&self, n: usize) -> Vec<String> {
        let mut ids: Vec<String> = Vec::with_capacity(n);
        while ids.len() < n {
            let id = id::new_task_id();
            if !self.tasks.contains_key(&id) && !self.wbs.contains(&id) && !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids
    }

    /// The phase node named `name`, created at the end of the root's children if
    /// there is none.
    pub(crate) fn ensure_phase(&mut self, name: &str) -> String {
        if let Some(id) = self.wbs.phase_named(name) {
            return id.to_string();
        }
        let id = loop {
            let id = format!("phase-{}", id::random_hex(8));
            if !self.tasks.contains_key(&id) && !self.wbs.contains(&id) {
                break id;
            }
        };
        let root = self.wbs.root_node_id.clone();
        let end = self.wbs.children(&root).len();
        self.wbs.insert(&id, name, false, &root, end);
        id
    }

    /// Adds a new task, as child `index` of node `parent` (checked by the caller).
    pub(crate) fn add_task(&mut self, record: TaskRecord, parent: &str, index: usize) {
        let id = record.id.clone();
        self.wbs.insert(&id, &record.title, true, parent, index);
        self.tasks.insert(
            id,
            PlannedTask {
                record,
                deleted: false,
                status: TaskStatus::Pending,
                job: None,
            },
        );
    }

    /// Changes the live task `id` (its node's title follows its title).
    pub(crate) fn change(&mut self, id: &str, changes: TaskChanges) {
        if let Some(title) = &changes.title
            && let Some(node) = self.wbs.nodes.get_mut(id)
        {
            node.title = title.clone();
        }
        if let Some(task) = self.tasks.get_mut(id) {
            task.record.apply(changes);
        }
    }

    /// Soft-deletes the live task `id` and, with `cascade`, the tasks below it in the
    /// tree; without, its children take its place. Every deleted task leaves the tree
    /// and the other tasks' dependencies. Returns the deleted ids, `id` first.
    pub(crate) fn delete(&mut self, id: &str, cascade: bool) -> Result<Vec<String>, Rejection> {
        if let Some(why) = self.why_not_live(id) {
            return Err(Rejection::Invalid(why));
        }
        let mut doomed = vec![id.to_string()];
        if cascade {
            doomed.extend(
                self.wbs
                    .subtree(id)
                    .into_iter()
                    .skip(1)
                    .filter(|node| self.live(node).is_some()),
            );
        }
        for gone in &doomed {
            let task = &self.tasks[gone];
            if task.status == TaskStatus::Running {
                let job = task.job.as_deref().unwrap_or("?");
                let how = if gone == id {
                    String::new()
                } else {
                    format!(", below {id} which is deleted with cascade")
                };
                return Err(Rejection::Refused(format!(
                    "task {gone} is RUNNING (job {job}){how}; a running task cannot be deleted: wait for it to finish (or stop the orchestrator), then ask again"
                )));
            }
        }
        if cascade {
            self.wbs.remove_subtree(id);
        } else {
            self.wbs.splice_out(id);
        }
        for gone in &doomed {
            if let Some(task) = self.tasks.get_mut(gone) {
                task.deleted = true;
                task.status = TaskStatus::Deleted;
            }
        }
        for task in self.tasks.values_mut().filter(|t| !t.deleted) {
            if let Some(deps) = &mut task.record.plan.depends_on {
                deps.retain(|d| !doomed.contains(d));
            }
        }
        Ok(doomed)
    }

    /// The first dependency ring among the live tasks, if any.
    pub(crate) fn dependency_cycle(&self) -> Option<Vec<String>> {
        let graph: HashMap<&str, Vec<&str>> = self
            .tasks
            .iter()
            .filter(|(_, t)| !t.deleted)
            .map(|(id, t)| {
                let deps = t
                    .record
                    .plan
                    .depends_on
                    .iter()
                    .flatten()
                    .map(String::as_str);
                (id.as_str(), deps.collect())
            })
            .collect();
        cycle::find_cycle(&graph)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::task_file::tests::record;

    /// A state with these tasks (id, deps), all PENDING, the first `in_tree` under
    /// one phase "P" in order.
    pub(crate) fn state(tasks: &[(&str, &[&str])], in_tree: usize) -> PlanState {
        let mut state = PlanState {
            workspace_id: "ws".into(),
            tasks: BTreeMap::new(),
            wbs: Wbs::new(),
        };
        let phase = state.ensure_phase("P");
        for (n, (id, deps)) in tasks.iter().enumerate() {
            let mut r = record(id);
            r.title = format!("Task {id}");
            r.plan.depends_on = Some(deps.iter().map(|d| d.to_string()).collect());
            if n < in_tree {
                state.add_task(r, &phase, n);
            } else {
                state.tasks.insert(
                    id.to_string(),
                    PlannedTask {
                        record: r,
                        deleted: false,
                        status: TaskStatus::Pending,
                        job: None,
                    },
                );
            }
        }
        state
    }

    #[test]
    fn delete_splices_or_cascades_and_cleans_dependencies() {
        let mut s = state(&[("a", &[]), ("b", &["a"]), ("c", &["a", "b"])], 3);
        let phase = s.wbs.phase_named("P").unwrap().to_string();
        // a → [b, c] under the phase
        s.wbs.detach("b");
        s.wbs.attach("b", "a", 0);
        s.wbs.detach("c");
        s.wbs.attach("c", "a", 1);
        let mut spliced = s.clone();
        assert_eq!(spliced.delete("a", false), Ok(vec!["a".to_string()]));
        assert_eq!(spliced.wbs.children(&phase), ["b", "c"]);
        assert_eq!(
            spliced.tasks["c"].record.plan.depends_on,
            Some(vec!["b".into()])
        );
        assert_eq!(spliced.tasks["b"].record.plan.depends_on, Some(vec![]));
        assert!(spliced.tasks["a"].deleted);
        spliced.wbs.check().unwrap();
        let mut cascaded = s.clone();
        assert_eq!(
            cascaded.delete("a", true),
            Ok(vec!["a".to_string(), "b".into(), "c".into()])
        );
        assert!(cascaded.wbs.children(&phase).is_empty());
        assert_eq!(cascaded.wbs.nodes.len(), 2);
        assert!(
            matches!(cascaded.delete("a", false), Err(Rejection::Invalid(m)) if m.contains("deleted"))
        );
        assert!(
            matches!(s.delete("zz", false), Err(Rejection::Invalid(m)) if m.contains("does not exist"))
        );
    }

    #[test]
    fn running_tasks_are_not_deleted_even_by_cascade() {
        let mut s = state(&[("a", &[]), ("b", &[])], 2);
        s.wbs.detach("b");
        s.wbs.attach("b", "a", 0);
        let t = s.tasks.get_mut("b").unwrap();
        t.status = TaskStatus::Running;
        t.job = Some("j-1".into());
        let before = s.clone();
        let Err(Rejection::Refused(why)) = s.delete("a", true) else {
            panic!("refused")
        };
        assert!(
            why.starts_with("task b is RUNNING (job j-1), below a"),
            "{why}"
        );
        assert_eq!(s, before, "nothing changed");
        assert!(matches!(s.delete("b", false), Err(Rejection::Refused(_))));
        assert_eq!(s.delete("a", false), Ok(vec!["a".to_string()]));
    }

    #[test]
    fn cycles_among_live_tasks_are_found() {
        let mut s = state(&[("a", &["b"]), ("b", &["a"])], 2);
        assert_eq!(
            s.dependency_cycle(),
            Some(vec!["a".into(), "b".into(), "a".into()])
        );
        s.delete("b", false).unwrap();
        assert_eq!(s.dependency_cycle(), None);
    }
}
