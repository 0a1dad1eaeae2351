//! `results.jsonl` in the eval's directory: one line per graded run (case, config,
//! try, outcome, tokens, cost, wall time, loops, branch, the grader's exit and
//! output tail), appended whole; a run graded again (`--rerun`, an infra_error
//! retried) gets a new line, and the last line of a run is its outcome. A torn last
//! line (a kill mid-append) is skipped, so that run is graded again.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::outcome::Outcome;

/// A run of the suite: case × config × try.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RunKey {
    pub case: String,
    pub config: String,
    #[serde(rename = "try")]
    pub try_k: u32,
}

impl RunKey {
    /// The id of the task that is this run in the eval workspace.
    pub fn task_id(&self) -> String {
        format!("eval-{}-{}-{}", self.case, self.config, self.try_k)
    }
}

/// One line of results.jsonl.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultLine {
    #[serde(flatten)]
    pub key: RunKey,
    pub outcome: Outcome,
    /// Why, for every outcome but resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The attempt graded (its task's latest).
    pub attempt_id: String,
    pub tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    /// The attempt's wall time (the orchestrator's, from claim to record).
    pub wall_ms: u64,
    pub loops: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The grader's run, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grade: Option<super::grade::Graded>,
    /// Earlier attempts of this run that were infra_errors the orchestrator ran
    /// again by itself (a lost host's job re-queued elsewhere): their errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub infra_retried: Vec<String>,
    pub graded_at: String,
}

/// The lines of `path` (none if it does not exist).
pub fn read(path: &Path) -> Vec<ResultLine> {
    let Ok(bytes) = agent_runner_core::fs::read::whole(path, 256 << 20) else {
        return Vec::new();
    };
    agent_runner_core::fs::jsonl::lines(&bytes)
        .filter_map(|(number, line, _)| match serde_json::from_slice(line) {
            Ok(line) => Some(line),
            Err(e) => {
                log::warn!("{}:{number}: line ignored ({e})", path.display());
                None
            }
        })
        .collect()
}

/// Each run's last line, and how many of its lines were infra_error.
pub fn latest(lines: &[ResultLine]) -> BTreeMap<RunKey, (ResultLine, u32)> {
    let mut out: BTreeMap<RunKey, (ResultLine, u32)> = BTreeMap::new();
    for line in lines {
        let infra = u32::from(line.outcome == Outcome::InfraError);
        out.entry(line.key.clone())
            .and_modify(|(last, n)| {
                *last = line.clone();
                *n += infra;
            })
            .or_insert((line.clone(), infra));
    }
    out
}

/// Appends `line` to `path`, whole.
pub(crate) fn append(path: &Path, line: &ResultLine) -> std::io::Result<()> {
    let json = serde_json::to_vec(line).map_err(std::io::Error::other)?;
    agent_runner_core::fs::jsonl::append_or_create(path, &json)
}
