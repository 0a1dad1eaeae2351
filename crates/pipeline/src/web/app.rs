//! What every request handler of one server shares: the workspace, the security
//! checks (with the token), the children it started.

use super::super::{PipelineError, Workspace};
use super::children::Children;
use super::guard::Guard;
use crate::queue::board::Board;
use crate::queue::board_cache::BoardCache;
use crate::store::task_file::TaskView;

/// The state of one `agent-runner serve`.
pub struct App {
    pub ws: Workspace,
    pub guard: Guard,
    pub children: Children,
    pub boards: BoardCache,
}

impl App {
    /// Every task and job of the workspace, as the files are now.
    pub fn board(&self) -> Result<Board, PipelineError> {
        self.boards.load(&self.ws)
    }

    /// The board needed for `task`'s status (as `Board::around`, from the cache
    /// when every task is needed).
    pub fn board_around(&self, task: &TaskView) -> Result<Board, PipelineError> {
        match &task.record.plan.depends_on {
            Some(deps) if !deps.is_empty() => self.board(),
            _ => Board::around(&self.ws, task),
        }
    }
}
