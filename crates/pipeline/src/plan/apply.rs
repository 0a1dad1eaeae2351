//! Writing a checked plan edit, all or nothing.
//!
//! An edit touches many files: a new task file per created task, an `update` or
//! `deleted` line in each changed task file, and `wbs.json`. Files cannot all be
//! replaced in one step, so one step is made to decide: the rename of the new
//! `wbs.json` over the old one is the commit, and it is written last.
//!
//! 1. The edit has an id (`p-<12 hex>`, new each time) and takes the next
//!    revision, n + 1.
//! 2. Every task line is written with the stamp `"plan_patch": id, "plan_revision":
//!    n + 1`: new task files are created (`O_EXCL`), other lines appended (one
//!    `write` each, as every TaskStore writer does).
//! 3. The new `wbs.json` (revision n + 1, and `aborted` as below) is written to a
//!    temp file and renamed over the old one.
//!
//! Readers count a stamped line only if its revision is at most `wbs.json`'s and
//! its edit is not listed as aborted (`store::commits`). Until step 3 every line of step 2
//! is invisible, so a crash (or a failed write) anywhere before the rename leaves
//! the old plan, exactly; after it, the whole new plan is there. Such a crash
//! leaves lines stamped with revision n + 1 behind; the next edit also takes n + 1,
//! so before committing it finds them (every task file is read under the plan lock)
//! and lists their edit in `aborted` in the same rename: they stay invisible for
//! good. A torn line is skipped by every reader, and the next append starts on a
//! fresh line. A reader takes the commit record once, before its first task file,
//! so it sees an edit whole or not at all even while one is being written.
//!
//! Crashes here are process deaths (or errors); like the rest of the TaskStore,
//! nothing is fsynced, so a power loss is not covered. Edits are serialized by the
//! plan lock (`lock`).

use std::collections::BTreeSet;
use std::io;
use std::path::Path;

use super::super::{PipelineError, Workspace};
use super::model::PlanState;
use super::wbs::Wbs;
use crate::store::commits::Stamp;
use crate::store::plan_fields::PlanFields;
use crate::store::task_file::{Deleted, Line, TaskChanges, TaskRecord};
use crate::store::task_store::TaskStore;
use agent_runner_core::fs::atomic;
use agent_runner_core::fs::jsonl;
use agent_runner_core::timestamp::Timestamp;

/// Where an edit's writes go: the files, or a test's stand-in that fails on cue.
pub(crate) trait PlanWrites {
    /// Creates the file `path` with `line`; fails if it exists.
    fn create(&mut self, path: &Path, line: &[u8]) -> io::Result<()>;
    /// Appends `line` to the existing file `path`.
    fn append(&mut self, path: &Path, line: &[u8]) -> io::Result<()>;
    /// Replaces `path` with `bytes` in one step: the commit.
    fn replace(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()>;
}

/// The real files.
pub(crate) struct Files;

impl PlanWrites for Files {
    fn create(&mut self, path: &Path, line: &[u8]) -> io::Result<()> {
        jsonl::create(path, line)
    }

    fn append(&mut self, path: &Path, line: &[u8]) -> io::Result<()> {
        jsonl::append(path, line)
    }

    fn replace(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        atomic::write(path, bytes)
    }
}

/// What an edit writes: the difference between two plans.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    pub(crate) created: Vec<TaskRecord>,
    pub(crate) updated: Vec<(String, TaskChanges)>,
    pub(crate) deleted: Vec<String>,
    pub(crate) wbs: Wbs,
}

impl Change {
    /// From the plan `old` to the plan `new`. A task made and deleted by the same
    /// edit is not written at all.
    pub(crate) fn between(old: &PlanState, new: &PlanState) -> Change {
        let mut change = Change {
            created: Vec::new(),
            updated: Vec::new(),
            deleted: Vec::new(),
            wbs: new.wbs.clone(),
        };
        for (id, task) in &new.tasks {
            let Some(before) = old.tasks.get(id) else {
                if !task.deleted {
                    change.created.push(task.record.clone());
                }
                continue;
            };
            if before.deleted {
                continue;
            }
            // Changes first: an updated task that is then deleted gets both lines.
            let changes = difference(&before.record, &task.record);
            if changes != TaskChanges::default() {
                change.updated.push((id.clone(), changes));
            }
            if task.deleted {
                change.deleted.push(id.clone());
            }
        }
        change
    }

    /// Whether the edit changes nothing.
    pub(crate) fn is_empty(&self, old: &Wbs) -> bool {
        self.created.is_empty()
            && self.updated.is_empty()
            && self.deleted.is_empty()
            && self.wbs.root_node_id == old.root_node_id
            && self.wbs.nodes == old.nodes
    }
}

/// The fields of `new` that differ from `old`.
fn difference(old: &TaskRecord, new: &TaskRecord) -> TaskChanges {
    fn diff<T: PartialEq + Clone>(old: &T, new: &T) -> Option<T> {
        (old != new).then(|| new.clone())
    }
    TaskChanges {
        title: diff(&old.title, &new.title),
        raw_prompt: diff(&old.raw_prompt, &new.raw_prompt),
        plan: PlanFields::changes(&old.plan, &new.plan),
    }
}

/// A committed edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The edit's id, in its lines' stamps.
    pub edit_id: String,
    /// The plan's revision now.
    pub revision: u64,
}

/// Writes `change` over the plan whose tree is `old` in workspace `ws`, through
/// `writes`, as edit `edit_id` (new for every attempt); `uncommitted` are edits
/// found not to have committed (`Loaded`). `reason` goes into the `deleted` lines.
pub(crate) fn apply(
    ws: &Workspace,
    old: &Wbs,
    change: &Change,
    uncommitted: &BTreeSet<String>,
    edit_id: &str,
    reason: &str,
    writes: &mut dyn PlanWrites,
) -> Result<Committed, PipelineError> {
    // The checks should have made a tree; a file that is not one would stop
    // every later plan command, so it is never written.
    change.wbs.check().map_err(|e| {
        PipelineError::Invalid(format!(
            "the edited plan tree is invalid ({e}); nothing was written (a bug: please report it)"
        ))
    })?;
    let store = TaskStore::new(ws);
    let stamp = Stamp {
        plan_patch: edit_id.to_string(),
        plan_revision: old.revision + 1,
    };
    let at = Timestamp::now().to_string();
    for record in &change.created {
        let path = store.path(&record.id);
        let line = Line::Task(record.clone()).to_json_stamped(Some(&stamp));
        writes
            .create(&path, &line)
            .map_err(PipelineError::io("create", path))?;
    }
    for (id, changes) in &change.updated {
        let line = Line::Update(crate::store::task_file::Update {
            at: at.clone(),
            changes: changes.clone(),
        });
        let path = store.path(id);
        writes
            .append(&path, &line.to_json_stamped(Some(&stamp)))
            .map_err(PipelineError::io("append to", path))?;
    }
    for id in &change.deleted {
        let line = Line::Deleted(Deleted {
            at: at.clone(),
            reason: reason.to_string(),
        });
        let path = store.path(id);
        writes
            .append(&path, &line.to_json_stamped(Some(&stamp)))
            .map_err(PipelineError::io("append to", path))?;
    }
    let mut tree = change.wbs.clone();
    tree.revision = stamp.plan_revision;
    let aborted: BTreeSet<String> = old.aborted.iter().chain(uncommitted).cloned().collect();
    tree.aborted = aborted.into_iter().collect();
    let path = ws.wbs_path();
    writes
        .replace(&path, &tree.to_json())
        .map_err(PipelineError::io("write", path))?;
    Ok(Committed {
        edit_id: stamp.plan_patch,
        revision: stamp.plan_revision,
    })
}
