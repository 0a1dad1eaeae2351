//! The plan tree, `wbs.json` (SPEC §13): `{"root_node_id", "nodes": {id: {"title",
//! "parent", "children", "task_id"?}}}`. Phases are nodes under the root, tasks are
//! nodes under their phase (or under another task); a task's node id is its task id,
//! so operations can name either. The file also holds the plan's commit record
//! (`revision`, `aborted`: see `store::commits`), because its rename is what commits an edit.
//!
//! Trees read from disk may be anything, so every walk here is iterative (no
//! recursion a deep or cyclic file could overflow) and `check` proves the shape
//! before anything relies on it.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::super::{PipelineError, Workspace};
use crate::store::commits::MAX_WBS_FILE;

/// The root's id in a tree this program creates.
pub(crate) const ROOT: &str = "node-root";
/// The root's title in a tree this program creates.
pub(crate) const ROOT_TITLE: &str = "Plan";

/// Why a plan tree is not a tree (`Wbs::check`): a bug of the edit that made it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotATree {
    #[error("root_node_id {0:?} is not a node")]
    NoRoot(String),
    #[error("the root has a parent ({0:?})")]
    RootParent(String),
    #[error("nodes.{id}.children: {child:?} is not a node")]
    NoChild { id: String, child: String },
    #[error("nodes.{child}.parent is {parent:?}, but it is a child of {id:?}")]
    WrongParent {
        child: String,
        parent: Option<String>,
        id: String,
    },
    #[error("node {0:?} appears twice in the tree")]
    Twice(String),
    #[error("node {orphan:?} is not reachable from the root (parent {parent:?})")]
    Unreachable {
        orphan: String,
        parent: Option<String>,
    },
    #[error("nodes.{id}.task_id is {task_id:?}; a task's node id is its task id")]
    TaskId { id: String, task_id: Option<String> },
}

/// The plan tree and its commit record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wbs {
    pub(crate) root_node_id: String,
    pub nodes: BTreeMap<String, WbsNode>,
    /// Plan edits committed so far.
    #[serde(default)]
    pub revision: u64,
    /// Plan edits that wrote lines but never committed (`store::commits`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) aborted: Vec<String>,
}

/// One node of the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WbsNode {
    pub title: String,
    /// None for the root only.
    pub(crate) parent: Option<String>,
    #[serde(default)]
    pub(crate) children: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) task_id: Option<String>,
}

impl Default for Wbs {
    fn default() -> Self {
        Wbs::new()
    }
}

impl Wbs {
    /// A tree with only its root: no plan yet.
    pub(crate) fn new() -> Wbs {
        let root = WbsNode {
            title: ROOT_TITLE.into(),
            parent: None,
            children: Vec::new(),
            task_id: None,
        };
        Wbs {
            root_node_id: ROOT.into(),
            nodes: [(ROOT.to_string(), root)].into(),
            revision: 0,
            aborted: Vec::new(),
        }
    }

    /// The tree of `ws` (a new one if there is no `wbs.json`), checked.
    pub(crate) fn load(ws: &Workspace) -> Result<Wbs, PipelineError> {
        Ok(Wbs::read(ws)?.unwrap_or_default())
    }

    /// The tree of `ws`, checked; None if there is no `wbs.json` (no plan yet).
    pub(crate) fn read(ws: &Workspace) -> Result<Option<Wbs>, PipelineError> {
        let path = ws.wbs_path();
        let mut bytes = Vec::new();
        match agent_runner_core::fs::read::whole_into(&path, &mut bytes, MAX_WBS_FILE) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(PipelineError::io("read", path)(e)),
        }
        let invalid = |why: String| {
            PipelineError::Invalid(format!(
                "{}: {why}; fix or remove the file (removing it hides every planned task)",
                path.display()
            ))
        };
        let wbs: Wbs = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
        wbs.check().map_err(|e| invalid(e.to_string()))?;
        Ok(Some(wbs))
    }

    /// `wbs.json` as written: pretty JSON and a newline.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        let mut json = serde_json::to_vec_pretty(self).unwrap_or_default();
        json.push(b'\n');
        json
    }

    /// Proves the shape: the root exists and has no parent; every other node is the
    /// child of exactly one node, its `parent`, and reachable from the root; a task
    /// node's id is its task id.
    pub(crate) fn check(&self) -> Result<(), NotATree> {
        let root = self
            .nodes
            .get(&self.root_node_id)
            .ok_or_else(|| NotATree::NoRoot(self.root_node_id.clone()))?;
        if let Some(parent) = &root.parent {
            return Err(NotATree::RootParent(parent.clone()));
        }
        let mut seen: HashSet<&str> = HashSet::new();
        seen.insert(&self.root_node_id);
        let mut queue = VecDeque::from([self.root_node_id.as_str()]);
        while let Some(id) = queue.pop_front() {
            for child in &self.nodes[id].children {
                let node = self.nodes.get(child).ok_or_else(|| NotATree::NoChild {
                    id: id.to_string(),
                    child: child.clone(),
                })?;
                if node.parent.as_deref() != Some(id) {
                    return Err(NotATree::WrongParent {
                        child: child.clone(),
                        parent: node.parent.clone(),
                        id: id.to_string(),
                    });
                }
                if !seen.insert(child) {
                    return Err(NotATree::Twice(child.clone()));
                }
                queue.push_back(child);
            }
        }
        if let Some(orphan) = self.nodes.keys().find(|id| !seen.contains(id.as_str())) {
            return Err(NotATree::Unreachable {
                orphan: orphan.clone(),
                parent: self.nodes[orphan].parent.clone(),
            });
        }
        for (id, node) in &self.nodes {
            if node.task_id.as_ref().is_some_and(|task| task != id) {
                return Err(NotATree::TaskId {
                    id: id.clone(),
                    task_id: node.task_id.clone(),
                });
            }
        }
        Ok(())
    }

    /// Whether `id` is a node.
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.nodes.contains_key(id)
    }

    /// The parent of `id`, and `id`'s place among its children.
    pub(crate) fn place_of(&self, id: &str) -> Option<(String, usize)> {
        let parent = self.nodes.get(id)?.parent.clone()?;
        let index = self
            .nodes
            .get(&parent)?
            .children
            .iter()
            .position(|c| c == id)?;
        Some((parent, index))
    }

    /// The children of `id` (none if it is not a node).
    pub(crate) fn children(&self, id: &str) -> &[String] {
        self.nodes.get(id).map_or(&[], |n| n.children.as_slice())
    }

    /// Adds a new node `id` as child `index` of `parent` (both checked by the caller).
    pub(crate) fn insert(&mut self, id: &str, title: &str, task: bool, parent: &str, index: usize) {
        self.nodes.insert(
            id.to_string(),
            WbsNode {
                title: title.to_string(),
                parent: Some(parent.to_string()),
                children: Vec::new(),
                task_id: task.then(|| id.to_string()),
            },
        );
        self.link(id, parent, index);
    }

    /// Takes node `id` (with its subtree) out of its parent's children; it stays in
    /// `nodes` until `attach`ed again or removed.
    pub(crate) fn detach(&mut self, id: &str) {
        if let Some((parent, index)) = self.place_of(id)
            && let Some(p) = self.nodes.get_mut(&parent)
        {
            p.children.remove(index);
        }
        if let Some(node) = self.nodes.get_mut(id) {
            node.parent = None;
        }
    }

    /// Makes the detached node `id` child `index` of `parent`.
    pub(crate) fn attach(&mut self, id: &str, parent: &str, index: usize) {
        self.link(id, parent, index);
    }

    fn link(&mut self, id: &str, parent: &str, index: usize) {
        if let Some(node) = self.nodes.get_mut(id) {
            node.parent = Some(parent.to_string());
        }
        if let Some(p) = self.nodes.get_mut(parent) {
            let at = index.min(p.children.len());
            p.children.insert(at, id.to_string());
        }
    }

    /// Removes node `id` and puts its children in its place, in their order.
    pub(crate) fn splice_out(&mut self, id: &str) {
        let Some((parent, index)) = self.place_of(id) else {
            return;
        };
        let Some(node) = self.nodes.remove(id) else {
            return;
        };
        for child in &node.children {
            if let Some(c) = self.nodes.get_mut(child) {
                c.parent = Some(parent.clone());
            }
        }
        if let Some(p) = self.nodes.get_mut(&parent) {
            p.children.splice(index..=index, node.children);
        }
    }

    /// Removes node `id` and its whole subtree; returns the removed ids, `id` first.
    pub(crate) fn remove_subtree(&mut self, id: &str) -> Vec<String> {
        let removed = self.subtree(id);
        self.detach(id);
        for gone in &removed {
            self.nodes.remove(gone);
        }
        removed
    }

    /// `id` and its descendants, in pre-order.
    pub(crate) fn subtree(&self, id: &str) -> Vec<String> {
        let mut out = Vec::new();
        if !self.contains(id) {
            return out;
        }
        let mut seen: HashSet<String> = HashSet::new();
        let mut stack = vec![id.to_string()];
        while let Some(next) = stack.pop() {
            if !seen.insert(next.clone()) {
                continue;
            }
            stack.extend(self.children(&next).iter().rev().cloned());
            out.push(next);
        }
        out
    }

    /// Whether `node` is `ancestor` or below it.
    pub(crate) fn is_within(&self, node: &str, ancestor: &str) -> bool {
        let mut at = Some(node.to_string());
        let mut steps = 0;
        while let Some(id) = at {
            if id == ancestor {
                return true;
            }
            steps += 1;
            if steps > self.nodes.len() {
                return false;
            }
            at = self.nodes.get(&id).and_then(|n| n.parent.clone());
        }
        false
    }

    /// Every node id, breadth-first from the root (siblings in their order).
    pub(crate) fn breadth_first(&self) -> Vec<&str> {
        let mut out = Vec::with_capacity(self.nodes.len());
        let mut seen: HashSet<&str> = HashSet::new();
        let mut queue = VecDeque::from([self.root_node_id.as_str()]);
        while let Some(id) = queue.pop_front() {
            if !self.nodes.contains_key(id) || !seen.insert(id) {
                continue;
            }
            out.push(id);
            queue.extend(self.children(id).iter().map(String::as_str));
        }
        out
    }

    /// The phase node named `name` (a node under the root that is not a task).
    pub(crate) fn phase_named(&self, name: &str) -> Option<&str> {
        self.children(&self.root_node_id)
            .iter()
            .find(|id| {
                self.nodes
                    .get(id.as_str())
                    .is_some_and(|node| node.task_id.is_none() && node.title == name)
            })
            .map(String::as_str)
    }

    /// The task ids in the tree.
    pub(crate) fn task_ids(&self) -> BTreeSet<&str> {
        self.nodes
            .values()
            .filter_map(|n| n.task_id.as_deref())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// root → [a → [a1, a2], b]
    fn tree() -> Wbs {
        let mut wbs = Wbs::new();
        wbs.insert("a", "A", false, ROOT, 0);
        wbs.insert("b", "B", false, ROOT, 1);
        wbs.insert("a1", "A1", true, "a", 0);
        wbs.insert("a2", "A2", true, "a", 1);
        wbs.check().unwrap();
        wbs
    }

    /// The one reader of `wbs.json` (the plan command and the web view): none is
    /// no plan, a bad one is refused naming the file, a symlink is not followed.
    #[test]
    fn the_file_is_read_checked_and_never_through_a_symlink() {
        let (ws, base) = crate::store::workspace::scratch("wbs-read");
        assert_eq!(Wbs::read(&ws).unwrap(), None);
        assert_eq!(Wbs::load(&ws).unwrap(), Wbs::new());
        std::fs::write(ws.wbs_path(), tree().to_json()).unwrap();
        assert_eq!(Wbs::read(&ws).unwrap(), Some(tree()));
        let mut cyclic = tree();
        cyclic
            .nodes
            .get_mut("a1")
            .unwrap()
            .children
            .push("a".into());
        std::fs::write(ws.wbs_path(), cyclic.to_json()).unwrap();
        let e = Wbs::read(&ws).unwrap_err().to_string();
        assert!(
            e.contains("wbs.json: ") && e.contains("fix or remove the file"),
            "{e}"
        );
        std::fs::remove_file(ws.wbs_path()).unwrap();
        let elsewhere = base.join("elsewhere.json");
        std::fs::write(&elsewhere, tree().to_json()).unwrap();
        std::os::unix::fs::symlink(&elsewhere, ws.wbs_path()).unwrap();
        assert!(Wbs::read(&ws).is_err(), "a symlink is not followed");
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn splice_puts_the_children_in_the_parents_place() {
        let mut wbs = tree();
        wbs.splice_out("a");
        assert_eq!(wbs.children(ROOT), ["a1", "a2", "b"]);
        assert_eq!(wbs.nodes["a1"].parent.as_deref(), Some(ROOT));
        assert!(!wbs.contains("a"));
        wbs.check().unwrap();
    }

    #[test]
    fn subtrees_move_and_go_whole() {
        let mut wbs = tree();
        wbs.detach("a");
        wbs.attach("a", "b", 0);
        assert_eq!(wbs.children(ROOT), ["b"]);
        assert_eq!(wbs.breadth_first(), [ROOT, "b", "a", "a1", "a2"]);
        assert!(wbs.is_within("a2", "b") && !wbs.is_within("b", "a"));
        wbs.check().unwrap();
        assert_eq!(wbs.remove_subtree("a"), ["a", "a1", "a2"]);
        assert_eq!(wbs.nodes.len(), 2);
        wbs.check().unwrap();
    }

    #[test]
    fn check_names_what_is_wrong() {
        let mut wbs = tree();
        wbs.nodes.get_mut("a1").unwrap().parent = Some("b".into());
        assert!(
            wbs.check()
                .unwrap_err()
                .to_string()
                .contains("nodes.a1.parent")
        );
        let mut wbs = tree();
        wbs.nodes.get_mut("a").unwrap().children.push("a1".into());
        assert!(
            wbs.check()
                .unwrap_err()
                .to_string()
                .contains("appears twice")
        );
        let mut wbs = tree();
        wbs.nodes.get_mut("a").unwrap().children.clear();
        assert!(
            wbs.check()
                .unwrap_err()
                .to_string()
                .contains("not reachable")
        );
        let mut wbs = tree();
        wbs.nodes.get_mut("a1").unwrap().task_id = Some("x".into());
        assert!(wbs.check().unwrap_err().to_string().contains("task_id"));
        let mut wbs = tree();
        wbs.root_node_id = "nope".into();
        assert!(wbs.check().is_err());
        // A cycle cut off from the root is caught, and walks over it end.
        let mut wbs = tree();
        wbs.nodes
            .get_mut(ROOT)
            .unwrap()
            .children
            .retain(|c| c != "a");
        wbs.nodes.get_mut("a").unwrap().parent = Some("a1".into());
        wbs.nodes.get_mut("a1").unwrap().children.push("a".into());
        assert!(wbs.check().is_err());
        assert!(!wbs.is_within("a", ROOT));
    }

    #[test]
    fn the_file_format_is_the_specs() {
        let json: serde_json::Value = serde_json::from_slice(&tree().to_json()).unwrap();
        assert_eq!(json["root_node_id"], ROOT);
        assert_eq!(
            json["nodes"]["a1"],
            serde_json::json!({"title": "A1", "parent": "a", "children": [], "task_id": "a1"})
        );
        assert_eq!(
            json["nodes"][ROOT],
            serde_json::json!({"title": "Plan", "parent": null, "children": ["a", "b"]})
        );
        assert_eq!(json["revision"], 0);
        assert!(json.get("aborted").is_none());
    }
}
