//! `builder.kind: scripted`: the Task Builder's replies come from `builder.script`,
//! a YAML list like `runner.meta.script` (SPEC §5.5), for offline demos and tests.
//! Each attempt reads the script from its start, so one reply serves every task (the
//! orchestrator sets the task's id, title and root_dir anyway).

use std::path::Path;

use agent_runner_meta::scripted::{ScriptError, Scripted};

/// `builder.script` unreadable, or no script of replies.
#[derive(Debug, thiserror::Error)]
#[error("builder.script: {0}")]
pub(crate) struct ScriptUnreadable(#[from] ScriptError);

/// The script's replies.
pub(crate) fn backend(script: &Path) -> Result<Scripted, ScriptUnreadable> {
    Ok(Scripted::load(script)?)
}
