//! The plan as `agent-runner plan` leaves it in the workspace (SPEC §11, §13):
//! `wbs.json`, the plan tree `{"root_node_id", "nodes": {id: {"title", "parent",
//! "children": [..], "task_id"?}}}`, and `chat.jsonl`, the conversation
//! `{"at", "role": "user"|"meta", "text"}` one message a line. Both may be missing
//! (no plan yet) or written by another version; what cannot be read is left out,
//! never an error of the page.

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;
use serde_json::Value;

use super::super::Workspace;
use crate::fs::read;

/// Largest `wbs.json` read.
const MAX_WBS: u64 = 8 << 20;
/// How much of the end of `chat.jsonl` is read.
const CHAT_TAIL: u64 = 1 << 20;
/// Deepest plan tree shown.
const MAX_DEPTH: usize = 32;

/// `wbs.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Wbs {
    pub root_node_id: String,
    #[serde(default)]
    pub nodes: BTreeMap<String, WbsNode>,
}

/// A node of the plan tree (its `parent` is not needed: the tree is walked from
/// the root through `children`).
#[derive(Debug, Clone, Deserialize)]
pub struct WbsNode {
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub children: Vec<String>,
    #[serde(default)]
    pub task_id: Option<String>,
}

/// A node placed in the tree, for showing: depth first, from the root.
#[derive(Debug, Clone)]
pub struct Placed<'a> {
    pub depth: usize,
    pub id: &'a str,
    pub node: &'a WbsNode,
}

/// `wbs.json` as JSON (for the API), if it is there and is JSON.
pub fn wbs_value(ws: &Workspace) -> Option<Value> {
    serde_json::from_slice(&read::head(&ws.dir.join("wbs.json"), MAX_WBS)?).ok()
}

/// `wbs.json`, if it is there and has the plan tree's shape.
pub fn wbs(ws: &Workspace) -> Option<Wbs> {
    serde_json::from_value(wbs_value(ws)?).ok()
}

impl Wbs {
    /// The nodes under the root, depth first in their `children` order; each node
    /// once, at most `MAX_DEPTH` deep (a cycle in the file ends there).
    pub fn walk(&self) -> Vec<Placed<'_>> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut stack: Vec<(usize, &str)> = vec![(0, self.root_node_id.as_str())];
        while let Some((depth, id)) = stack.pop() {
            let Some((key, node)) = self.nodes.get_key_value(id) else {
                continue;
            };
            if depth > MAX_DEPTH || !seen.insert(key.as_str()) {
                continue;
            }
            out.push(Placed {
                depth,
                id: key,
                node,
            });
            for child in node.children.iter().rev() {
                stack.push((depth + 1, child));
            }
        }
        out
    }
}

/// The last `n` messages of `chat.jsonl` (JSON objects; other lines skipped).
pub fn chat(ws: &Workspace, n: usize) -> Vec<Value> {
    let Ok(bytes) = read::tail(&ws.dir.join("chat.jsonl"), CHAT_TAIL) else {
        return Vec::new();
    };
    let mut messages: Vec<Value> = bytes
        .split(|b| *b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .filter(Value::is_object)
        .collect();
    let skip = messages.len().saturating_sub(n);
    messages.drain(..skip);
    messages
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (Workspace, std::path::PathBuf) {
        crate::pipeline::store::workspace::scratch("plan-files")
    }

    #[test]
    fn the_tree_is_walked_depth_first_once_per_node() {
        let (ws, base) = workspace();
        assert!(
            wbs(&ws).is_none() && chat(&ws, 10).is_empty(),
            "no plan yet"
        );
        std::fs::write(
            ws.dir.join("wbs.json"),
            r#"{"root_node_id":"r","nodes":{
              "r":{"title":"Plan","parent":null,"children":["p1","p2"]},
              "p1":{"title":"Design","parent":"r","children":["a","r"]},
              "a":{"title":"Task A","parent":"p1","children":[],"task_id":"t-a"},
              "p2":{"title":"Build","parent":"r","children":["missing"]}}}"#,
        )
        .unwrap();
        let tree = wbs(&ws).unwrap();
        let walked: Vec<(usize, &str)> = tree.walk().iter().map(|p| (p.depth, p.id)).collect();
        assert_eq!(walked, [(0, "r"), (1, "p1"), (2, "a"), (1, "p2")]);
        assert_eq!(tree.walk()[2].node.task_id.as_deref(), Some("t-a"));
        std::fs::write(ws.dir.join("wbs.json"), "{not json").unwrap();
        assert!(wbs(&ws).is_none());
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn the_chat_tail_skips_what_is_not_a_message() {
        let (ws, base) = workspace();
        let mut text = String::new();
        for n in 0..30 {
            text.push_str(&format!(
                "{{\"at\":\"{n}\",\"role\":\"user\",\"text\":\"m{n}\"}}\n"
            ));
        }
        text.push_str("torn {\"at\"\n[1,2]\n");
        std::fs::write(ws.dir.join("chat.jsonl"), text).unwrap();
        let last = chat(&ws, 3);
        let texts: Vec<&str> = last.iter().map(|m| m["text"].as_str().unwrap()).collect();
        assert_eq!(texts, ["m27", "m28", "m29"]);
        std::os::unix::fs::symlink("/etc/passwd", ws.dir.join("wbs.json")).unwrap();
        assert!(wbs_value(&ws).is_none(), "a symlink is not followed");
        std::fs::remove_dir_all(base).unwrap();
    }
}
