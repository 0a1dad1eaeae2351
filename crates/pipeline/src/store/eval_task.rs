//! What a task that is one run of an evaluation carries (SPEC §26): the case's base
//! commit its clone starts from, and the config's runner settings. The orchestrator
//! asks no Task Builder for such a task (its instructions are the case's prd, its
//! settings the suite author's), and runs it in a clone of that commit.

use serde::{Deserialize, Serialize};

/// An evaluation run: case × config × try.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalTask {
    /// The case's id in the suite.
    pub case: String,
    /// The config's name in the suite.
    pub config: String,
    /// 1-based.
    #[serde(rename = "try")]
    pub try_k: u32,
    /// The commit (in root_dir's repository) the attempt's clone starts from.
    pub base: String,
    /// The config's `runner:` block, merged over the workspace's defaults.
    #[serde(default)]
    pub runner: serde_json::Value,
}

/// What every evaluation run's TaskConfig has under its config's `runner:`: the
/// keys a TaskConfig requires (a scripted or codex Meta ignores the model).
pub(crate) fn runner_base() -> serde_json::Value {
    serde_json::json!({
        "meta": {"model": agent_runner_settings::task::DEFAULT_META_MODEL},
        "worker": {"type": agent_runner_settings::task::TASKCONFIG_WORKER_TYPE},
    })
}

/// The draft of an evaluation run's TaskConfig: the case's prd as the instructions,
/// and what a TaskConfig needs (the config's runner settings go over it).
pub(crate) fn draft(prd: &str) -> serde_norway::Mapping {
    let draft = serde_json::json!({
        "task": {"instructions": prd},
        "runner": runner_base(),
    });
    serde_norway::to_value(draft)
        .ok()
        .and_then(|v| v.as_mapping().cloned())
        .unwrap_or_default()
}
