//! What every request handler of one server shares: the workspace, the security
//! checks (with the token), the children it started.

use super::super::{PipelineError, Workspace};
use super::children::Children;
use super::guard::Guard;
use crate::queue::board::Board;
use crate::queue::board_cache::BoardCache;
use crate::store::task_file::TaskView;

/// The state of one `agent-runner serve`.
pub(crate) struct App {
    pub(crate) ws: Workspace,
    pub(crate) guard: Guard,
    pub(crate) children: Children,
    pub(crate) boards: BoardCache,
}

impl App {
    /// Every task and job of the workspace, as the files are now.
    pub(crate) fn board(&self) -> Result<Board, PipelineError> {
        self.boards.load(&self.ws)
    }

    /// The board needed for `task`'s status (as `Board::around`, from the cache
    /// when every task is needed).
    pub(crate) fn board_around(&self, task: &TaskView) -> Result<Board, PipelineError> {
        match &task.record.plan.depends_on {
            Some(deps) if !deps.is_empty() => self.board(),
            _ => Board::around(&self.ws, task),
        }
    }
}
