//! Best of N (SPEC §23): a task run as N tries at once, as the job files and the
//! attempt lines say it. Each try is a job of its own carrying `TryOf` (its number,
//! how many, the kind it runs with, and the group: the job id of the judged line
//! that ends them); the judged line carries the `Comparison`.
//!
//! Budgets: each try runs with the task's own budget (its runner knows no other);
//! the whole is bounded by N × that budget, and what the tries spent together is
//! recorded on the judged line.

use super::field_error::FieldError;
use serde::{Deserialize, Serialize};

use super::id;

/// Most tries of one task: each is a clone, a container and a paid run.
pub const MAX_TRIES: u32 = 8;

/// A job's (and its attempt's) place among the tries of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TryOf {
    /// The job id of the judged attempt line that ends the tries.
    pub group: String,
    /// This try's number, 1 to `n`.
    pub k: u32,
    pub n: u32,
    /// The worker kind it runs with (`--kinds`), when not the workspace's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// What is wrong with a `try_of` read from a job file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TryOfError {
    /// `try_of.group` is no id (`id::invalid`'s words).
    #[error("{0}")]
    Group(String),
    #[error(transparent)]
    Field(#[from] FieldError),
    #[error("try_of.k: {k} is not between 1 and try_of.n ({n})")]
    K { k: u32, n: u32 },
}

impl TryOf {
    /// What is wrong with a `try_of` read from a job file, if anything.
    pub(crate) fn check(&self) -> Result<(), TryOfError> {
        if !id::is_valid(&self.group) {
            return Err(TryOfError::Group(id::invalid("try_of.group", &self.group)));
        }
        check_count(self.n, "try_of.n")?;
        if self.k == 0 || self.k > self.n {
            return Err(TryOfError::K {
                k: self.k,
                n: self.n,
            });
        }
        if let Some(kind) = &self.kind {
            check_kinds(std::slice::from_ref(kind), "try_of.kind")?;
        }
        Ok(())
    }

    /// The branch this try's work comes back as: `agent-runner/<id>-try-<k>` (git
    /// cannot hold `agent-runner/<id>` and refs below it).
    pub(crate) fn branch(&self, task_id: &str) -> String {
        format!("agent-runner/{task_id}-try-{}", self.k)
    }
}

/// `n` as a number of tries (`field` names where it was given).
pub fn check_count(n: u32, field: &str) -> Result<(), FieldError> {
    if (1..=MAX_TRIES).contains(&n) {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!(
                "{n} is not between 1 and {MAX_TRIES} (each try is a clone, a container and a paid run)"
            ),
        ))
    }
}

/// `kinds` as worker kinds (`field` names where they were given).
pub fn check_kinds(kinds: &[String], field: &str) -> Result<(), FieldError> {
    let known: Vec<&str> = agent_runner_settings::agent::KINDS
        .iter()
        .map(|k| k.name())
        .collect();
    if kinds.is_empty() {
        return Err(FieldError::new(
            field,
            format!("empty; name one of {}", known.join(", ")),
        ));
    }
    for kind in kinds {
        if !known.contains(&kind.as_str()) {
            return Err(FieldError::new(
                field,
                format!(
                    "{:?} is no worker kind (one of {})",
                    agent_runner_core::text::cut_chars(kind, 60),
                    known.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// `defaults.kinds.<kind>`: a worker kind's own model and endpoint. A try of
/// another kind than the workspace's gets these instead of `runner.worker.model`
/// and `runner.worker.base_url`, which are the workspace's kind's (codex's base
/// URL ends in `/v1`, claude's does not; their models are not each other's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindSettings {
    /// The agent's model (none: the agent's own default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The agent's model API base URL (none: the agent's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

impl KindSettings {
    /// What is wrong with it, `field` naming where it was given.
    pub(crate) fn check(&self, field: &str) -> Result<(), FieldError> {
        if let Some(model) = &self.model
            && model.trim().is_empty()
        {
            return Err(FieldError::new(
                format!("{field}.model"),
                "empty (leave it out for the agent's own)",
            ));
        }
        if let Some(url) = &self.base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(FieldError::new(
                format!("{field}.base_url"),
                format!(
                    "{:?} is no http:// or https:// URL",
                    agent_runner_core::text::cut_chars(url, 80)
                ),
            ));
        }
        Ok(())
    }
}

/// The `n` tries of one run, `kinds` cycled over them.
pub(crate) fn plan(n: u32, kinds: &[String]) -> Vec<TryOf> {
    let group = id::new_job_id();
    (1..=n)
        .map(|k| TryOf {
            group: group.clone(),
            k,
            n,
            kind: (!kinds.is_empty()).then(|| kinds[(k as usize - 1) % kinds.len()].clone()),
        })
        .collect()
}

/// The judged line's comparison of the tries, and why the winner won.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The winning try's number; None when no try succeeded.
    pub winner: Option<u32>,
    /// The rule that chose it: `only`, `verified`, `criteria`, `judge`, `diff`,
    /// `cost`, or `none`.
    pub rule: String,
    /// Why, in words (the judge's own when it chose).
    pub why: String,
    /// A judge asked and not followed: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_error: Option<String>,
    pub rows: Vec<Row>,
    /// The whole's bound: N × each try's budget (the task's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<serde_json::Value>,
    /// What all tries and the judge used together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// One try in the comparison table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub k: u32,
    /// The worker kind it ran with.
    pub kind: String,
    pub job_id: String,
    pub status: String,
    pub verified: bool,
    /// Acceptance criteria passed, of how many (None: the runner did not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<[u32; 2]>,
    /// Its change against the start: files, lines added, lines removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<[u64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    pub duration_ms: u64,
    /// Its branch: `agent-runner/<id>` for the winner, `...-try-<k>` for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

impl Comparison {
    /// The table as text lines (`task show`): a header, one line per try, then who
    /// won and why. Texts are the caller's to escape.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "{:<4} {:<16} {:<9} {:<8} {:<10} {:<22} {:<9} {:<8} {}",
            "try", "kind", "status", "verified", "criteria", "diff", "cost", "time", "branch"
        )];
        for row in &self.rows {
            lines.push(format!(
                "{:<4} {:<16} {:<9} {:<8} {:<10} {:<22} {:<9} {:<8} {}",
                row.k,
                row.kind,
                row.status,
                if row.verified { "yes" } else { "no" },
                row.criteria_line(),
                row.diff_line(),
                row.cost_usd.map_or("?".into(), |c| format!(
                    "${}",
                    agent_runner_core::usage::usd(c)
                )),
                agent_runner_core::timestamp::human(std::time::Duration::from_millis(
                    row.duration_ms
                )),
                row.branch.as_deref().unwrap_or("-"),
            ));
        }
        lines.push(match self.winner {
            Some(k) => format!("winner: try {k} ({}): {}", self.rule, self.why),
            None => format!("no winner: {}", self.why),
        });
        if let Some(e) = &self.judge_error {
            lines.push(format!("judge not followed: {e}"));
        }
        lines
    }
}

impl Row {
    /// `3 files +10 -2`, or `?`.
    pub fn diff_line(&self) -> String {
        match self.diff {
            Some([files, added, removed]) => format!("{files} files +{added} -{removed}"),
            None => "?".into(),
        }
    }

    /// `2/3`, or `?`.
    pub fn criteria_line(&self) -> String {
        match self.criteria {
            Some([passed, total]) => format!("{passed}/{total}"),
            None => "?".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tries_are_bounded_and_kinds_cycle() {
        assert!(
            check_count(0, "--tries")
                .unwrap_err()
                .to_string()
                .starts_with("--tries: 0 is not")
        );
        assert!(check_count(MAX_TRIES + 1, "defaults.tries").is_err());
        assert_eq!(check_count(3, "--tries"), Ok(()));
        let kinds = vec!["codex-cli".to_string(), "claude-code-cli".to_string()];
        assert_eq!(check_kinds(&kinds, "--kinds"), Ok(()));
        let e = check_kinds(&["cursor".into()], "--kinds")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"cursor\" is no worker kind"), "{e}");
        let tries = plan(3, &kinds);
        let named: Vec<_> = tries.iter().map(|t| t.kind.as_deref().unwrap()).collect();
        assert_eq!(named, ["codex-cli", "claude-code-cli", "codex-cli"]);
        assert!(tries.iter().all(|t| t.group == tries[0].group && t.n == 3));
        assert_eq!(tries[1].branch("t-1"), "agent-runner/t-1-try-2");
        let mut bad = tries[0].clone();
        bad.k = 4;
        assert!(
            bad.check()
                .unwrap_err()
                .to_string()
                .starts_with("try_of.k: 4")
        );
        bad.k = 1;
        bad.group = "../x".into();
        assert!(bad.check().is_err());
    }
}
