//! `builder.kind: scripted`: the Task Builder's replies come from `builder.script`,
//! a YAML list like `runner.meta.script` (SPEC §5.5), for offline demos and tests.
//! Each attempt reads the script from its start, so one reply serves every task (the
//! orchestrator sets the task's id, title and root_dir anyway).

use std::path::Path;

use agent_runner_meta::scripted::Scripted;

/// The script's replies.
pub(crate) fn backend(script: &Path) -> Result<Scripted, String> {
    Scripted::load(script).map_err(|e| format!("builder.script: {e}"))
}
