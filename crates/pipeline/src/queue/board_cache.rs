//! The board (tasks and statuses) kept between looks: the web view's list is polled
//! every 2 s by every open page, and the orchestrator looks at the queue every
//! 100 ms; reading and folding every task file each time costs more than anything
//! else either does. A task file is read again only when
//! its size, times or inode changed (appends change the size; a rewrite by rename
//! changes the inode), or when a plan edit committed (which changes which lines
//! count), so the board is as fresh as the files; the job directories are read
//! every time.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;

use super::board::Board;
use super::jobs;
use crate::store::commits::Commits;
use crate::store::task_file::TaskView;
use crate::store::task_store::{TaskStore, is_task_file};
use crate::{PipelineError, Workspace};

/// What identifies a version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
    dev: u64,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
        }
    }
}

/// Task files as last read, by file name.
#[derive(Default)]
pub(crate) struct BoardCache {
    cached: Mutex<Cached>,
}

#[derive(Default)]
struct Cached {
    /// The plan's commit record the views were folded with: a plan edit commits by
    /// replacing `wbs.json`, which changes which lines count without touching the
    /// task files (`store::commits`).
    commits: Option<Commits>,
    files: HashMap<String, (Stamp, Option<TaskView>)>,
}

impl BoardCache {
    /// The board of `ws` as the files are now (like `Board::load`).
    pub(crate) fn load(&self, ws: &Workspace) -> Result<Board, PipelineError> {
        let store = TaskStore::new(ws);
        let dir = ws.tasks_dir();
        let read = std::fs::read_dir(&dir).map_err(PipelineError::io("list", &dir))?;
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        let commits = store.commits();
        if cached.commits.as_ref() != Some(commits) {
            cached.files.clear();
            cached.commits = Some(commits.clone());
        }
        let files = &mut cached.files;
        let mut seen = HashSet::new();
        let mut tasks = Vec::with_capacity(files.len());
        let mut bytes = Vec::new();
        for entry in read.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if !is_task_file(&name) {
                continue;
            }
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            let stamp = Stamp::of(&meta);
            let view = match files.get(&name) {
                Some((known, view)) if *known == stamp => view.clone(),
                _ => {
                    let view = store.brief(&name, &entry.path(), &mut bytes);
                    files.insert(name.clone(), (stamp, view.clone()));
                    view
                }
            };
            tasks.extend(view);
            seen.insert(name);
        }
        files.retain(|name, _| seen.contains(name));
        Ok(Board::of(tasks, jobs::job_states(ws)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::status::TaskStatus;
    use crate::store::task_file::Line;
    use crate::store::task_file::tests::record;

    #[test]
    fn the_cached_board_follows_the_files() {
        let (ws, base) = crate::store::workspace::scratch("board-cache");
        let store = TaskStore::new(&ws);
        let cache = BoardCache::default();
        store.create(&record("t-1")).unwrap();
        assert_eq!(
            cache.load(&ws).unwrap().status("t-1"),
            Some(TaskStatus::Pending)
        );
        // An append (another process's `task` command) is seen.
        store
            .append(
                "t-1",
                &Line::Deleted(crate::store::task_file::Deleted {
                    at: "x".into(),
                    reason: "gone".into(),
                }),
            )
            .unwrap();
        assert_eq!(
            cache.load(&ws).unwrap().status("t-1"),
            Some(TaskStatus::Deleted)
        );
        // So is a new task, a queued job, and a removed file.
        store.create(&record("t-2")).unwrap();
        jobs::enqueue(&ws, "t-2").unwrap();
        let board = cache.load(&ws).unwrap();
        assert_eq!(board.status("t-2"), Some(TaskStatus::Queued));
        std::fs::remove_file(store.path("t-1")).unwrap();
        let board = cache.load(&ws).unwrap();
        assert_eq!((board.status("t-1"), board.tasks.len()), (None, 1));
        // A plan edit's task counts once the edit commits, by replacing wbs.json
        // alone: the cached board follows that too.
        let stamp = crate::store::commits::Stamp {
            plan_patch: "p-1".into(),
            plan_revision: 1,
        };
        let line = Line::Task(record("t-3")).to_json_stamped(Some(&stamp));
        agent_runner_core::fs::jsonl::create(&store.path("t-3"), &line).unwrap();
        assert_eq!(cache.load(&ws).unwrap().status("t-3"), None);
        let mut wbs = crate::plan::wbs::Wbs::new();
        wbs.revision = 1;
        std::fs::write(ws.wbs_path(), wbs.to_json()).unwrap();
        assert_eq!(
            cache.load(&ws).unwrap().status("t-3"),
            Some(TaskStatus::Pending)
        );
        std::fs::remove_dir_all(base).unwrap();
    }
}
