//! The TaskStore: one append-only JSON Lines file per task, `tasks/<task-id>.jsonl`
//! (SPEC §11). The current task is the fold of its lines (`task_file::fold`);
//! status comes from the fold plus the IPC directories (`queue::board`). Which plan
//! lines count comes from the plan's commit record (`commits`), read once per store
//! before its first task file, so a store sees every plan edit whole or not at all.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::commits::Commits;
use super::id;
use super::task_file::{Depth, Line, TaskRecord, TaskView, fold};
use crate::{PipelineError, Workspace};
use agent_runner_core::fs::jsonl;

/// Largest task file read (a task with very many attempts).
const MAX_TASK_FILE: u64 = 64 << 20;

/// The tasks of one workspace.
#[derive(Debug, Clone)]
pub struct TaskStore {
    dir: PathBuf,
    wbs: PathBuf,
    commits: OnceLock<Commits>,
}

impl TaskStore {
    /// The TaskStore of `ws` (nothing is read yet).
    pub fn new(ws: &Workspace) -> Self {
        TaskStore {
            dir: ws.tasks_dir(),
            wbs: ws.wbs_path(),
            commits: OnceLock::new(),
        }
    }

    /// A store that takes `commits` as the plan's commit record (a plan command that
    /// read `wbs.json` itself).
    pub(crate) fn with_commits(ws: &Workspace, commits: Commits) -> Self {
        TaskStore {
            dir: ws.tasks_dir(),
            wbs: ws.wbs_path(),
            commits: OnceLock::from(commits),
        }
    }

    /// The plan's commit record as this store sees it.
    pub(crate) fn commits(&self) -> &Commits {
        self.commits.get_or_init(|| Commits::read(&self.wbs))
    }

    /// The file of task `id`.
    pub fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }

    /// Creates a task file with its `task` line; fails if the id is taken.
    pub(crate) fn create(&self, record: &TaskRecord) -> Result<(), PipelineError> {
        if !id::is_valid(&record.id) {
            return Err(PipelineError::Invalid(id::invalid("task id", &record.id)));
        }
        let path = self.path(&record.id);
        jsonl::create(&path, &Line::Task(record.clone()).to_json()).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                PipelineError::TaskExists(record.id.clone())
            } else {
                PipelineError::io("create", path)(e)
            }
        })
    }

    /// Appends a line to the existing task `id`.
    pub(crate) fn append(&self, id: &str, line: &Line) -> Result<(), PipelineError> {
        let path = self.path(id);
        jsonl::append(&path, &line.to_json()).map_err(PipelineError::io("append to", path))
    }

    /// Task `id` as its lines say now; None if there is no such task (or its file has
    /// no valid first line). A file whose `task` line names another task is an error
    /// that says so.
    pub fn load(&self, id: &str) -> Result<Option<TaskView>, PipelineError> {
        if !id::is_valid(id) {
            return Ok(None);
        }
        let commits = self.commits();
        let path = self.path(id);
        let mut bytes = Vec::new();
        match agent_runner_core::fs::read::whole_into(&path, &mut bytes, MAX_TASK_FILE) {
            Ok(()) => {
                let name = format!("tasks/{id}.jsonl");
                fold(&name, &bytes, Depth::Full, commits)
                    .map(|view| {
                        own(&name, id, view).map_err(|e| PipelineError::Invalid(e.to_string()))
                    })
                    .transpose()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(PipelineError::io("read", path)(e)),
        }
    }

    /// Task `id` of `ws`, or the error that there is none.
    pub fn existing(ws: &Workspace, id: &str) -> Result<TaskView, PipelineError> {
        let store = TaskStore::new(ws);
        store.load(id)?.ok_or_else(|| PipelineError::TaskNotFound {
            id: id.to_string(),
            workspace: ws.id.clone(),
            path: store.path(id),
        })
    }

    /// Every task, in no particular order, each with its latest attempt only
    /// (`Depth::Latest`). Unreadable files are skipped with a warning.
    pub(crate) fn load_all(&self) -> Result<Vec<TaskView>, PipelineError> {
        let read = std::fs::read_dir(&self.dir).map_err(PipelineError::io("list", &self.dir))?;
        let mut tasks = Vec::new();
        let mut bytes = Vec::new();
        for entry in read.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str().filter(|n| is_task_file(n)) else {
                continue;
            };
            tasks.extend(self.brief(name, &entry.path(), &mut bytes));
        }
        Ok(tasks)
    }

    /// The ids of plan edits whose stamped lines do not count (edits that never
    /// committed, or were recorded aborted), over every task file.
    pub(crate) fn uncommitted_edits(&self) -> Result<BTreeSet<String>, PipelineError> {
        let commits = self.commits();
        let mut edits = BTreeSet::new();
        self.each_file(|_, bytes| {
            for (_, line, _) in jsonl::lines(bytes) {
                let stamp = Commits::stamp_of(line);
                if let Some(patch) = &stamp.plan_patch
                    && !commits.counts(&stamp)
                {
                    edits.insert(patch.clone());
                }
            }
        })?;
        Ok(edits)
    }

    /// Calls `each` with the name and bytes of every task file; unreadable files are
    /// skipped with a warning.
    fn each_file(&self, mut each: impl FnMut(&str, &[u8])) -> Result<(), PipelineError> {
        let read = std::fs::read_dir(&self.dir).map_err(PipelineError::io("list", &self.dir))?;
        let mut bytes = Vec::new();
        for entry in read.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str().filter(|n| is_task_file(n)) else {
                continue;
            };
            match agent_runner_core::fs::read::whole_into(&entry.path(), &mut bytes, MAX_TASK_FILE)
            {
                Ok(()) => each(name, &bytes),
                Err(e) => log::warn!("tasks/{name}: skipped ({e})"),
            }
        }
        Ok(())
    }

    /// The task in the file `name` at `path`, with its latest attempt only
    /// (`Depth::Latest`); None, with a warning, if it cannot be read. `bytes` is a
    /// buffer to reuse. What it says depends on the plan's commit record too
    /// (`commits`), not only on the file.
    pub(crate) fn brief(&self, name: &str, path: &Path, bytes: &mut Vec<u8>) -> Option<TaskView> {
        let commits = self.commits();
        let shown = format!("tasks/{name}");
        match agent_runner_core::fs::read::whole_into(path, bytes, MAX_TASK_FILE) {
            Ok(()) => {
                let view = fold(&shown, bytes, Depth::Latest, commits)?;
                let id = name.strip_suffix(".jsonl").unwrap_or(name);
                own(&shown, id, view)
                    .map_err(|e| log::warn!("{e}; skipped"))
                    .ok()
            }
            Err(e) => {
                log::warn!("{shown}: skipped ({e})");
                None
            }
        }
    }
}

/// `view`, if the file `name` of task `id` holds that task: a task is found by its
/// file name, so a file whose `task` line names another id cannot be its task.
fn own(name: &str, id: &str, view: TaskView) -> Result<TaskView, NotItsTask> {
    if view.record.id == id {
        return Ok(view);
    }
    Err(NotItsTask {
        file: name.to_string(),
        named: agent_runner_core::text::cut_chars(
            &agent_runner_core::text::escape_controls(&view.record.id),
            80,
        ),
        id: id.to_string(),
    })
}

/// A task file whose `task` line names another task than its file name does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{file}: its `task` line names task {named:?}, not {id:?}; a task's file is named after its id"
)]
struct NotItsTask {
    file: String,
    /// The id the line names, cut and its controls escaped.
    named: String,
    id: String,
}

/// Whether `name` in `tasks/` is a task file: `<valid id>.jsonl`.
pub(crate) fn is_task_file(name: &str) -> bool {
    name.strip_suffix(".jsonl").is_some_and(id::is_valid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::task_file::AttemptStatus;
    use crate::store::task_file::tests::{attempt, record};

    #[test]
    fn create_append_load() {
        let (ws, base) = crate::store::workspace::scratch("store");
        let store = TaskStore::new(&ws);
        store.create(&record("t-1")).unwrap();
        assert!(matches!(
            store.create(&record("t-1")),
            Err(PipelineError::TaskExists(_))
        ));
        assert!(matches!(
            store.create(&record("../x")),
            Err(PipelineError::Invalid(_))
        ));
        store
            .append(
                "t-1",
                &Line::Attempt(Box::new(attempt("j-1", AttemptStatus::Succeeded))),
            )
            .unwrap();
        assert!(
            store
                .append(
                    "t-2",
                    &Line::Attempt(Box::new(attempt("j-1", AttemptStatus::Failed)))
                )
                .is_err(),
            "no such task"
        );
        let view = store.load("t-1").unwrap().unwrap();
        assert_eq!(view.attempts.len(), 1);
        assert!(store.load("t-2").unwrap().is_none());
        assert!(store.load("../etc/passwd").unwrap().is_none());
        // A file whose first line names another task is neither task, and says so.
        std::fs::copy(store.path("t-1"), store.path("t-9")).unwrap();
        assert_eq!(
            store.load("t-9").unwrap_err().to_string(),
            "tasks/t-9.jsonl: its `task` line names task \"t-1\", not \"t-9\"; a task's file is named after its id"
        );
        assert_eq!(store.load_all().unwrap().len(), 1);
        std::fs::remove_file(store.path("t-9")).unwrap();
        let board = crate::queue::board::Board::load(&ws).unwrap();
        assert_eq!(
            board.status("t-1"),
            Some(crate::queue::status::TaskStatus::Succeeded)
        );
        std::fs::remove_dir_all(base).unwrap();
    }
}
