//! The end of a best of N run (SPEC §23): once every try of a group is recorded,
//! the one that records last judges them, under the group's lock, and `super`
//! settles the judged attempt line (job id: the group). In order: only succeeded
//! tries (their branches are back) compete; verified ones (the pinned test passed)
//! win over the rest; then the most criteria passed; then Meta's `judge`
//! (`judge.rs`); then the smaller diff; then the lower cost; then the lower try
//! number. The winner's branch becomes `agent-runner/<id>`, the others stay
//! `agent-runner/<id>-try-<k>` for review; only the judged line is delivered and
//! notified.

use std::path::Path;

use super::judge::{self, Shown};
use crate::Workspace;
use crate::clones::{self, compare};
use crate::store::task_file::{Attempt, AttemptStatus, TaskView};
use crate::store::task_store::TaskStore;
use crate::store::tries::{Comparison, Row, TryOf};
use agent_runner_core::fs::lock;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::text::{cut, one_line};

/// One competing try, as the rules see it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate {
    pub(crate) k: u32,
    pub(crate) verified: bool,
    pub(crate) criteria: Option<[u32; 2]>,
    pub(crate) diff: Option<[u64; 3]>,
    pub(crate) cost_usd: Option<f64>,
}

/// Who won, by which rule, why; and a judge asked but not followed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Choice {
    pub(crate) winner: Option<u32>,
    pub(crate) rule: &'static str,
    pub(crate) why: String,
    pub(crate) judge_error: Option<String>,
}

/// The rules in order over the succeeded tries `candidates`; `judge` is asked with
/// the numbers of the tries still tied, and must name one of them. Its error is
/// the text recorded as `judge_error`.
pub(crate) fn choose(
    candidates: &[Candidate],
    judge: impl FnOnce(&[u32]) -> Result<(u32, String), String>,
) -> Choice {
    let choice = |winner: u32, rule, why: String| Choice {
        winner: Some(winner),
        rule,
        why,
        judge_error: None,
    };
    match candidates {
        [] => {
            return Choice {
                winner: None,
                rule: "none",
                why: "no try succeeded".into(),
                judge_error: None,
            };
        }
        [only] => return choice(only.k, "only", "the only try that succeeded".into()),
        _ => {}
    }
    let mut left: Vec<&Candidate> = candidates.iter().collect();
    if left.iter().any(|c| c.verified) {
        left.retain(|c| c.verified);
        if let [only] = left[..] {
            return choice(
                only.k,
                "verified",
                "the only try whose pinned test passed".into(),
            );
        }
    }
    let passed = |c: &Candidate| c.criteria.map_or(0, |[p, _]| p);
    let most = left.iter().map(|c| passed(c)).max().unwrap_or(0);
    left.retain(|c| passed(c) == most);
    if let [only] = left[..] {
        return choice(
            only.k,
            "criteria",
            format!("passed the most acceptance criteria ({most})"),
        );
    }
    let numbers: Vec<u32> = left.iter().map(|c| c.k).collect();
    let judge_error = match judge(&numbers) {
        Ok((winner, why)) if numbers.contains(&winner) => return choice(winner, "judge", why),
        Ok((winner, _)) => Some(format!(
            "the judge named try {winner}, which was not among those shown"
        )),
        Err(e) => Some(e),
    };
    let with_error = |mut c: Choice| {
        c.judge_error = judge_error.clone();
        c
    };
    let lines = |c: &Candidate| c.diff.map_or(u64::MAX, |[_, a, r]| a.saturating_add(r));
    let least = left.iter().map(|c| lines(c)).min().unwrap_or(u64::MAX);
    left.retain(|c| lines(c) == least);
    if let [only] = left[..] {
        return with_error(choice(
            only.k,
            "diff",
            format!("the smallest change ({least} lines)"),
        ));
    }
    let cost = |c: &Candidate| c.cost_usd.unwrap_or(f64::INFINITY);
    let cheapest = left.iter().map(|c| cost(c)).fold(f64::INFINITY, f64::min);
    left.retain(|c| cost(c) == cheapest);
    if let [only] = left[..] {
        return with_error(choice(only.k, "cost", "the lowest cost".into()));
    }
    with_error(choice(
        left[0].k,
        "order",
        "tied on every rule: the first".into(),
    ))
}

/// The judged line of a group, not yet recorded, and the group's lock, held until
/// it is (two tries ending at once: one judges, the other finds the line written).
pub(crate) struct Judged {
    pub(crate) whole: Attempt,
    /// The task's title.
    pub(crate) title: String,
    _held: std::fs::File,
}

/// After try `try_of` of task `task_id` was recorded: when it was the last of its
/// group, judges them; None while tries still run, once judged already, or when
/// the group cannot be looked at (logged).
pub(crate) fn after_try(
    ws: &Workspace,
    task_id: &str,
    try_of: &TryOf,
    interrupt: Interrupt,
) -> Option<Judged> {
    let dir = ws.job_log_dir(&try_of.group);
    if let Err(e) = crate::store::workspace::create_dir(&dir) {
        log::error!(
            "tries {}: cannot create {}: {e}",
            try_of.group,
            dir.display()
        );
        return None;
    }
    let path = dir.join("judge.lock");
    let held = match lock::open(&path).and_then(|f| lock::lock(&f).map(|()| f)) {
        Ok(file) => file,
        Err(e) => {
            log::error!(
                "tries {}: cannot lock {}: {e}",
                try_of.group,
                path.display()
            );
            return None;
        }
    };
    let view = match TaskStore::new(ws).load(task_id) {
        Ok(Some(view)) => view,
        Ok(None) => return None,
        Err(e) => {
            log::error!("tries {}: task {task_id}: {e}", try_of.group);
            return None;
        }
    };
    if view.attempts.iter().any(|a| a.job_id == try_of.group) {
        return None;
    }
    let tries = tries_of(&view, &try_of.group);
    if tries.len() < try_of.n as usize {
        log::info!(
            "tries {}: {} of {} recorded",
            try_of.group,
            tries.len(),
            try_of.n
        );
        return None;
    }
    Some(Judged {
        whole: judged(ws, &view, try_of, &tries, &dir, interrupt),
        title: view.record.title.clone(),
        _held: held,
    })
}

/// The group's tries, one per number (the first line of each).
fn tries_of<'a>(view: &'a TaskView, group: &str) -> Vec<&'a Attempt> {
    let mut tries: Vec<&Attempt> = Vec::new();
    for attempt in &view.attempts {
        if let Some(t) = attempt.try_of.as_ref().filter(|t| t.group == group)
            && !tries
                .iter()
                .any(|o| o.try_of.as_ref().is_some_and(|x| x.k == t.k))
        {
            tries.push(attempt);
        }
    }
    tries.sort_by_key(|a| a.try_of.as_ref().map_or(0, |t| t.k));
    tries
}

/// The tries side by side: a row of the comparison for each, and for each that
/// competes (succeeded, its branch back) what the rules and the judge see.
struct Field {
    rows: Vec<Row>,
    candidates: Vec<Candidate>,
    shown: Vec<Shown>,
}

fn field(ws: &Workspace, try_of: &TryOf, tries: &[&Attempt], interrupt: Interrupt) -> Field {
    let mut field = Field {
        rows: Vec::new(),
        candidates: Vec::new(),
        shown: Vec::new(),
    };
    for attempt in tries {
        let k = attempt.try_of.as_ref().map_or(0, |t| t.k);
        let result = attempt.result_value().unwrap_or_default();
        let criteria = match (
            result["criteria"]["passed"].as_u64(),
            result["criteria"]["total"].as_u64(),
        ) {
            (Some(p), Some(t)) => Some([p as u32, t as u32]),
            _ => None,
        };
        let diff = attempt.branch.as_ref().and_then(|branch| {
            compare::diff_stat(
                &ws.root_dir,
                branch,
                Path::new(&attempt.log_dir),
                &ws.bundles_dir().join(format!("diff-{}", attempt.job_id)),
                interrupt,
            )
            .map_err(|e| log::warn!("tries {}: try {k}: no diff stat: {e}", try_of.group))
            .ok()
        });
        let row = Row {
            k,
            kind: kind_of(attempt),
            job_id: attempt.job_id.clone(),
            status: attempt.status.as_str().into(),
            verified: attempt.is_verified(),
            criteria,
            diff,
            cost_usd: attempt.cost_usd(),
            duration_ms: attempt.duration_ms,
            branch: attempt.branch.clone(),
        };
        if attempt.status == AttemptStatus::Succeeded && attempt.branch.is_some() {
            field.candidates.push(Candidate {
                k,
                verified: row.verified,
                criteria,
                diff,
                cost_usd: row.cost_usd,
            });
            field.shown.push(Shown {
                k,
                kind: row.kind.clone(),
                verified: row.verified,
                criteria: row.criteria_line(),
                diff: row.diff_line(),
                summary: cut(result["summary"].as_str().unwrap_or_default(), 2000),
                test_tail: judge::test_tail(
                    result["validation"]["test_tail"]
                        .as_str()
                        .unwrap_or_default(),
                ),
            });
        }
        field.rows.push(row);
    }
    field
}

/// The judged line of `tries`: the winner's outcome, branch and note, and the
/// comparison.
fn judged(
    ws: &Workspace,
    view: &TaskView,
    try_of: &TryOf,
    tries: &[&Attempt],
    dir: &Path,
    interrupt: Interrupt,
) -> Attempt {
    let task_id = &view.record.id;
    let Field {
        mut rows,
        candidates,
        shown,
    } = field(ws, try_of, tries, interrupt);
    let mut judge_tokens = None;
    let mut choice = choose(&candidates, |numbers| {
        let shown: Vec<Shown> = shown
            .iter()
            .filter(|s| numbers.contains(&s.k))
            .cloned()
            .collect();
        let (verdict, tokens) = judge::ask(ws, &view.record, &shown, dir, interrupt);
        judge_tokens = tokens;
        // The judge's error is recorded as its text (`judge_error`).
        verdict
            .map(|v| (v.winner, v.why))
            .map_err(|e| e.to_string())
    });
    let started_at = tries
        .iter()
        .map(|a| a.started_at.clone())
        .min()
        .unwrap_or_default();
    let duration_ms = tries.iter().map(|a| a.duration_ms).max().unwrap_or(0);
    let mut whole = Attempt::ended(
        &try_of.group,
        task_id,
        AttemptStatus::Failed,
        started_at,
        duration_ms,
        dir,
    );
    // The group ran no TaskConfig of its own: the winner's, when there is one.
    whole.task_config = String::new();
    let winner = choice.winner.and_then(|k| {
        tries
            .iter()
            .find(|a| a.try_of.as_ref().is_some_and(|t| t.k == k))
            .map(|w| (k, *w))
    });
    match winner {
        Some((k, w)) => crown(ws, &mut whole, k, w, &mut rows),
        None => {
            let errors: Vec<String> = tries
                .iter()
                .map(|a| {
                    format!(
                        "try {}: {}",
                        a.try_of.as_ref().map_or(0, |t| t.k),
                        cut(&one_line(a.error.as_deref().unwrap_or("failed")), 200)
                    )
                })
                .collect();
            whole.error = Some(format!("no try succeeded: {}", errors.join("; ")));
        }
    }
    let tokens: Option<u64> = tries
        .iter()
        .filter_map(|a| a.total_tokens())
        .chain(judge_tokens)
        .reduce(|a, b| a.saturating_add(b));
    let costs: Vec<Option<f64>> = tries.iter().map(|a| a.cost_usd()).collect();
    let cost_usd = costs
        .iter()
        .all(Option::is_some)
        .then(|| agent_runner_core::usage::account::round(costs.iter().flatten().sum()));
    if choice.winner.is_none() {
        choice.why = whole.error.clone().unwrap_or(choice.why);
    }
    whole.tries = Some(Comparison {
        winner: choice.winner,
        rule: choice.rule.into(),
        why: choice.why,
        judge_error: choice.judge_error,
        rows,
        budget: whole_budget(tries, try_of.n),
        tokens,
        cost_usd,
    });
    whole
}

/// The judged line takes try `k`'s (`winner`'s) outcome and note, and its branch
/// becomes the task's: succeeded, or failed saying why it could not.
fn crown(ws: &Workspace, whole: &mut Attempt, k: u32, winner: &Attempt, rows: &mut [Row]) {
    whole.result = winner.result.clone();
    whole.task_config = winner.task_config.clone();
    whole.log_dir = winner.log_dir.clone();
    whole.test_source = winner.test_source;
    whole.verified = winner.verified;
    let to = clones::branch_name(&whole.task_id);
    match winner
        .branch
        .as_deref()
        .map(|from| compare::promote(&ws.root_dir, from, &to))
    {
        Some(Ok(_)) => {
            whole.status = AttemptStatus::Succeeded;
            whole.branch = Some(to.clone());
            if let Some(row) = rows.iter_mut().find(|r| r.k == k) {
                row.branch = Some(to);
            }
        }
        Some(Err(e)) => {
            whole.error = Some(format!(
                "try {k} won, but its branch could not become {to}: {e}"
            ));
            whole.branch = winner.branch.clone();
        }
        None => whole.error = Some(format!("try {k} won, but has no branch")),
    }
}

/// The worker kind a try ran with: its `--kinds` entry, else the workspace's.
fn kind_of(attempt: &Attempt) -> String {
    attempt
        .try_of
        .as_ref()
        .and_then(|t| t.kind.clone())
        .unwrap_or_else(|| "default".into())
}

/// The whole's bound: each try's budget (the task's) times the number of tries.
fn whole_budget(tries: &[&Attempt], n: u32) -> Option<serde_json::Value> {
    let per_try = tries.iter().find_map(|a| a.budget.clone())?;
    let times = |key: &str| -> serde_json::Value {
        match per_try.get(key) {
            Some(v) if v.is_u64() => (v.as_u64().unwrap_or(0).saturating_mul(n as u64)).into(),
            Some(v) if v.is_f64() => {
                agent_runner_core::usage::account::round(v.as_f64().unwrap_or(0.0) * n as f64)
                    .into()
            }
            _ => serde_json::Value::Null,
        }
    };
    Some(serde_json::json!({
        "tries": n,
        "per_try": per_try,
        "max_tokens": times("max_tokens"),
        "max_cost_usd": times("max_cost_usd"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(k: u32, verified: bool, passed: u32, lines: u64, cost: f64) -> Candidate {
        Candidate {
            k,
            verified,
            criteria: Some([passed, 2]),
            diff: Some([1, lines, 0]),
            cost_usd: Some(cost),
        }
    }

    #[test]
    fn the_rules_in_order() {
        let never = |_: &[u32]| -> Result<(u32, String), String> { panic!("not asked") };
        assert_eq!(choose(&[], never).winner, None);
        let only_verified = choose(&[c(1, false, 2, 1, 0.1), c(2, true, 1, 9, 0.9)], never);
        assert_eq!(
            (only_verified.winner, only_verified.rule),
            (Some(2), "verified")
        );
        let criteria = choose(&[c(1, true, 1, 1, 0.1), c(2, true, 2, 9, 0.9)], never);
        assert_eq!((criteria.winner, criteria.rule), (Some(2), "criteria"));
        let tied = [
            c(1, true, 2, 1, 0.1),
            c(2, true, 2, 9, 0.9),
            c(3, false, 2, 0, 0.0),
        ];
        let judged = choose(&tied, |shown| {
            assert_eq!(shown, [1, 2], "only the verified are shown");
            Ok((2, "cleaner".into()))
        });
        assert_eq!(
            (judged.winner, judged.rule, judged.why.as_str()),
            (Some(2), "judge", "cleaner")
        );
        let unknown = choose(&tied, |_| Ok((7, "?".into())));
        assert_eq!((unknown.winner, unknown.rule), (Some(1), "diff"));
        assert!(unknown.judge_error.unwrap().contains("try 7"));
        let failed = choose(&tied, |_| Err("no reply".into()));
        assert_eq!((failed.winner, failed.rule), (Some(1), "diff"));
        let cost = choose(&[c(1, true, 2, 3, 0.5), c(2, true, 2, 3, 0.2)], |_| {
            Err("x".into())
        });
        assert_eq!((cost.winner, cost.rule), (Some(2), "cost"));
        let order = choose(&[c(1, true, 2, 3, 0.5), c(2, true, 2, 3, 0.5)], |_| {
            Err("x".into())
        });
        assert_eq!((order.winner, order.rule), (Some(1), "order"));
    }
}
