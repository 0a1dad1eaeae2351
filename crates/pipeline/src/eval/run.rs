//! `eval run`: the suite's runs as tasks of the eval workspace, worked by the
//! orchestrator, then graded, then summed up.
//!
//! 0. Preflight (`preflight.rs`): each config made into its runs' TaskConfig and
//!    read against this machine, the images found on the hosts; else nothing runs.
//! 1. The eval workspace: its root_dir is a repository of ours (`repo.rs`) holding
//!    each case's base; attempts always run in clones (`isolation: clone`), each
//!    from its case's base (the task's `eval.base`).
//! 2. Plan: each case × config × try is the task `eval-<case>-<config>-<k>`
//!    (created once, carrying the prd and the config's runner settings), enqueued
//!    as the config's `best_of` tries when more than one (SPEC §23: the judged
//!    attempt is the run's). A run with
//!    an outcome in results.jsonl is left alone unless `--rerun` names its outcome;
//!    one without is enqueued (a job already queued or running is left to run).
//! 3. `orchestrator::orchestrate::run` with `--once`: hosts, budgets, `--jobs` as
//!    for any task. A job an earlier, killed evaluation left running is recovered
//!    by it as failed ("orchestrator stopped"): an infra_error.
//! 4. Grade each run whose task's latest attempt has no line yet (`outcome.rs`
//!    classifies; a COMPLETE attempt's branch is graded in a fresh sandbox,
//!    `grade.rs`, on the host the attempt ran on, `grade_on_host.rs`), up to
//!    `--jobs` at once; append its line.
//! 5. A run whose first outcome is infra_error is enqueued once more (on another
//!    host than the one it failed on, when there is one), and 3–4 again.
//! 6. summary.json from the last line of each run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::error::EvalError;
use super::grade;
use super::grade_on_host;
use super::outcome::{self, Outcome, Verdict};
use super::preflight;
use super::repo::EvalRepo;
use super::results::{self, ResultLine, RunKey};
use super::suite::{Case, Config, Suite};
use super::summary::{self, Summary};
use crate::Workspace;
use crate::orchestrator::orchestrate::{self, Ended};
use crate::orchestrator::spend_limit::SpendLimit;
use crate::queue::run_request::{self, Refused, RunError};
use crate::store::defaults::Isolation;
use crate::store::eval_task::EvalTask;
use crate::store::task_file::{Attempt, TaskRecord};
use crate::store::task_store::TaskStore;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::timestamp::Timestamp;
use agent_runner_sandbox::backend::Backend;
use agent_runner_sandbox::backend::host::HostSpec;

/// Which runs with an outcome are run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rerun {
    InfraError,
    Unresolved,
    All,
}

/// `eval run` options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Configs to run (none: all of the suite's).
    pub configs: Vec<String>,
    pub tries: u32,
    pub jobs: usize,
    pub hosts: Vec<HostSpec>,
    pub rerun: Option<Rerun>,
}

/// What an evaluation left.
#[derive(Debug)]
pub struct Evaluated {
    /// The eval's directory: results.jsonl, summary.json.
    pub dir: PathBuf,
    pub summary: Summary,
    pub interrupted: bool,
}

/// The eval's directory of `suite` in workspace `ws`.
pub fn eval_dir(ws: &Workspace, suite: &Suite) -> PathBuf {
    ws.dir.join("evals").join(&suite.hash[..12])
}

/// Runs the suite in the eval workspace at `root` (made if new).
pub fn run(
    home: &Path,
    root: &Path,
    suite: &Suite,
    options: &Options,
    exe: PathBuf,
    interrupt: Interrupt,
) -> Result<Evaluated, EvalError> {
    let in_play = configs_in_play(suite, options)?;
    let configs: Vec<&Config> = in_play.iter().map(|(_, c)| *c).collect();
    let root = &std::path::absolute(root).map_err(EvalError::io("resolve", root))?;
    let repo = EvalRepo::open_root(root, interrupt)?;
    let ws = eval_workspace(home, root)?;
    let hosts = hosts_of(&ws, options)?;
    let backend = agent_runner_sandbox::backend::open();
    preflight::check(&ws, suite, &in_play, &hosts, &*backend, interrupt)?;
    let dir = eval_dir(&ws, suite);
    std::fs::create_dir_all(&dir).map_err(EvalError::io("create", &dir))?;
    keep_suite(&dir, suite)?;
    let results_path = dir.join("results.jsonl");
    let mut bases = BTreeMap::new();
    for case in &suite.cases {
        bases.insert(case.id.clone(), repo.import(case, interrupt)?);
    }
    let keys = run_keys(suite, &configs, options.tries);
    let enqueued = plan(&ws, suite, options, &keys, &bases, &results_path)?;
    log::info!(
        "evaluation of {} ({} case(s) × {} config(s) × {} tries): {enqueued} run(s) to do; results in {}",
        suite.name,
        suite.cases.len(),
        configs.len(),
        options.tries,
        dir.display()
    );
    let grading = Grading {
        ws: &ws,
        repo: &repo,
        suite,
        hosts: &hosts,
        exe: &exe,
        backend: &*backend,
        interrupt,
    };
    let interrupted = work(&grading, options, &keys, &results_path)?;
    let summary = write_summary(suite, options.tries, &results_path, &dir)?;
    Ok(Evaluated {
        dir,
        summary,
        interrupted,
    })
}

/// The suite's configs `--config` names (none: all), each with its place in the
/// suite; an error for a name the suite has no config of.
fn configs_in_play<'s>(
    suite: &'s Suite,
    options: &Options,
) -> Result<Vec<(usize, &'s Config)>, EvalError> {
    for name in &options.configs {
        if suite.config(name).is_none() {
            return Err(EvalError::UnknownConfig(name.clone()));
        }
    }
    Ok(suite
        .configs
        .iter()
        .enumerate()
        .filter(|(_, c)| options.configs.is_empty() || options.configs.contains(&c.name))
        .collect())
}

/// The eval workspace at `root`, its defaults set for evaluations.
fn eval_workspace(home: &Path, root: &Path) -> Result<Workspace, EvalError> {
    let mut ws = Workspace::open(home, root)?;
    // Each run from its case's base, in a clone; the test that decides is the
    // held-out grader, so none is required of the runner.
    if ws.defaults.isolation != Some(Isolation::Clone) || ws.defaults.require_test != Some(false) {
        ws.defaults.isolation = Some(Isolation::Clone);
        ws.defaults.require_test = Some(false);
        ws.save()?;
    }
    Ok(ws)
}

/// The suite as it ran, for reproducing it: copied into the eval's directory once.
fn keep_suite(dir: &Path, suite: &Suite) -> Result<(), EvalError> {
    let copy = dir.join("suite.yaml");
    if !copy.exists() {
        let text = std::fs::read(&suite.path).map_err(EvalError::io("read", &suite.path))?;
        agent_runner_core::fs::atomic::write(&copy, &text)
            .map_err(EvalError::io("write", &copy))?;
    }
    Ok(())
}

/// Every run of the evaluation: each case × config × try.
fn run_keys(suite: &Suite, configs: &[&Config], tries: u32) -> Vec<RunKey> {
    suite
        .cases
        .iter()
        .flat_map(|case| {
            configs.iter().flat_map(move |config| {
                (1..=tries).map(move |k| RunKey {
                    case: case.id.clone(),
                    config: config.name.clone(),
                    try_k: k,
                })
            })
        })
        .collect()
}

/// Plan: each run's task created where it is new, and the runs to do enqueued;
/// how many were.
fn plan(
    ws: &Workspace,
    suite: &Suite,
    options: &Options,
    keys: &[RunKey],
    bases: &BTreeMap<String, String>,
    results_path: &Path,
) -> Result<usize, EvalError> {
    let store = TaskStore::new(ws);
    let latest = results::latest(&results::read(results_path));
    let mut enqueued = 0;
    for key in keys {
        let id = key.task_id();
        let task = store.load(&id)?;
        if task.is_none() {
            create_task(&store, ws, suite, key, bases)?;
        }
        let graded = latest.get(key).map(|(line, _)| line);
        let attempt = task.as_ref().and_then(|t| t.latest());
        if wanted(graded, attempt, options.rerun) {
            enqueued += usize::from(enqueue(ws, &id, best_of(suite, key))?);
        }
    }
    Ok(enqueued)
}

/// The task of run `key`, carrying its case's prd and its config's runner
/// settings (none when the suite has no such case or config).
fn create_task(
    store: &TaskStore,
    ws: &Workspace,
    suite: &Suite,
    key: &RunKey,
    bases: &BTreeMap<String, String>,
) -> Result<(), EvalError> {
    let case = suite.cases.iter().find(|c| c.id == key.case);
    let (Some(case), Some(config)) = (case, suite.config(&key.config)) else {
        return Ok(());
    };
    let mut record = TaskRecord::new(
        key.task_id(),
        ws.id.clone(),
        format!("eval {} × {} try {}", key.case, key.config, key.try_k),
        case.prd.clone(),
    );
    record.eval = Some(EvalTask {
        case: key.case.clone(),
        config: key.config.clone(),
        try_k: key.try_k,
        base: bases[&key.case].clone(),
        runner: suite.runner_of(config),
    });
    store.create(&record)?;
    Ok(())
}

/// Whether a run is to be run (again), by its latest result line `graded` and its
/// task's latest `attempt`.
fn wanted(graded: Option<&ResultLine>, attempt: Option<&Attempt>, rerun: Option<Rerun>) -> bool {
    match (graded, attempt) {
        // Ran but not graded yet (a killed evaluation): graded below.
        (g, Some(a)) if g.map(|g| &g.attempt_id) != Some(&a.attempt_id) => false,
        (Some(g), _) => matches!(
            (rerun, g.outcome),
            (Some(Rerun::All), _)
                | (Some(Rerun::InfraError), Outcome::InfraError)
                | (Some(Rerun::Unresolved), Outcome::Unresolved)
        ),
        (None, _) => true,
    }
}

/// The orchestrator over the queue, then the gradings, twice at most: a run whose
/// first outcome is infra_error is enqueued once more. True when interrupted.
fn work(
    grading: &Grading,
    options: &Options,
    keys: &[RunKey],
    results_path: &Path,
) -> Result<bool, EvalError> {
    let Grading {
        ws,
        suite,
        exe,
        interrupt,
        ..
    } = *grading;
    let mut interrupted = false;
    for round in 0..2 {
        interrupted = orchestrate_once(ws, options, exe, interrupt);
        if interrupted {
            break;
        }
        let retry = grade_all(grading, keys, results_path, options.jobs)?;
        if retry.is_empty() || round == 1 {
            break;
        }
        log::info!(
            "{} run(s) ended in infra_error: each retried once",
            retry.len()
        );
        for (key, host) in retry {
            match (host, best_of(suite, &key)) {
                // Elsewhere: the orchestrator places it on another host when there is one.
                (Some(host), 1) => {
                    crate::queue::jobs::requeue_lost(ws, &key.task_id(), &host)?;
                }
                // A best of N's tries go where the orchestrator places each.
                (_, n) => {
                    enqueue(ws, &key.task_id(), n)?;
                }
            }
        }
    }
    Ok(interrupted)
}

/// summary.json from the last line of each run.
fn write_summary(
    suite: &Suite,
    tries: u32,
    results_path: &Path,
    dir: &Path,
) -> Result<Summary, EvalError> {
    let latest = results::latest(&results::read(results_path));
    let summary = summary::build(suite, tries, &latest);
    let json = serde_json::to_vec_pretty(&summary).map_err(|e| EvalError::Engine(e.to_string()))?;
    let path = dir.join("summary.json");
    agent_runner_core::fs::atomic::write(&path, &json).map_err(EvalError::io("write", &path))?;
    Ok(summary)
}

/// The hosts the orchestrator places runs on: `--host`, else the workspace's.
fn hosts_of(ws: &Workspace, options: &Options) -> Result<Vec<HostSpec>, EvalError> {
    if !options.hosts.is_empty() {
        return Ok(options.hosts.clone());
    }
    ws.defaults
        .hosts()
        .map_err(|e| crate::PipelineError::Invalid(format!("the workspace's hosts: {e}")).into())
}

/// The tries of one run of `key`'s config (its `best_of`).
fn best_of(suite: &Suite, key: &RunKey) -> u32 {
    suite.config(&key.config).map_or(1, |c| c.best_of)
}

/// Enqueues task `id` (as `best_of` tries judged into one attempt when more than
/// one); false when a job of it is already queued or running.
fn enqueue(ws: &Workspace, id: &str, best_of: u32) -> Result<bool, EvalError> {
    match run_request::enqueue_tries(ws, id, best_of, &[]) {
        Ok(_) => Ok(true),
        Err(RunError::Refused(Refused::Busy { .. })) => Ok(false),
        Err(RunError::Refused(e)) => Err(EvalError::Engine(e.to_string())),
        Err(RunError::Failed(e)) => Err(e.into()),
    }
}

/// The orchestrator over the queue until it is done; true when interrupted.
fn orchestrate_once(ws: &Workspace, options: &Options, exe: &Path, interrupt: Interrupt) -> bool {
    let ended = orchestrate::run(
        ws.clone(),
        orchestrate::Options {
            jobs: options.jobs,
            once: true,
            limit: SpendLimit::default(),
            hosts: options.hosts.clone(),
        },
        exe.to_path_buf(),
        interrupt,
    );
    ended == Ended::Interrupted || interrupt.is_set()
}

/// What gradings need: where the attempts are, where they ran, how to grade there.
struct Grading<'a> {
    ws: &'a Workspace,
    repo: &'a EvalRepo,
    suite: &'a Suite,
    /// The orchestrator's hosts: an attempt that ran on one is graded there.
    hosts: &'a [HostSpec],
    /// This binary, for a grading on a host (`grade_on_host`).
    exe: &'a Path,
    /// The default daemon's, for an attempt that ran on no host.
    backend: &'a dyn Backend,
    interrupt: Interrupt,
}

/// Grades every run whose task's latest attempt has no result line; returns the
/// runs to retry (their first infra_error), each with the host it failed on.
fn grade_all(
    grading: &Grading,
    keys: &[RunKey],
    results_path: &Path,
    jobs: usize,
) -> Result<Vec<(RunKey, Option<String>)>, EvalError> {
    let Grading {
        ws,
        suite,
        interrupt,
        ..
    } = *grading;
    let latest = results::latest(&results::read(results_path));
    let store = TaskStore::new(ws);
    let mut todo = Vec::new();
    for key in keys {
        let Some(task) = store.load(&key.task_id())? else {
            continue;
        };
        let Some(attempt) = task.latest().cloned() else {
            continue;
        };
        let graded = latest.get(key);
        if graded.is_some_and(|(line, _)| line.attempt_id == attempt.attempt_id) {
            continue;
        }
        let base = task
            .record
            .eval
            .as_ref()
            .map(|e| e.base.clone())
            .unwrap_or_default();
        // Attempts since the last graded one that the orchestrator itself ran again
        // (a lost host's job re-queued elsewhere): reported on this run's line.
        let since = graded
            .and_then(|(line, _)| {
                task.attempts
                    .iter()
                    .position(|a| a.attempt_id == line.attempt_id)
            })
            .map_or(0, |at| at + 1);
        let retried: Vec<String> = task.attempts[since.min(task.attempts.len())..]
            .iter()
            // A best of N's tries are judged into its attempt: not retries.
            .filter(|a| a.attempt_id != attempt.attempt_id && a.try_of.is_none())
            .filter_map(|a| match outcome::classify(a) {
                Verdict::Decided(Outcome::InfraError, why) => Some(why),
                _ => None,
            })
            .collect();
        let infra_before = graded.map_or(0, |(_, n)| *n) + retried.len() as u32;
        todo.push((key.clone(), attempt, base, infra_before, retried));
    }
    let queue = Mutex::new(todo.into_iter());
    let retry = Mutex::new(Vec::new());
    let failure: Mutex<Option<EvalError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().ok().and_then(|mut q| q.next());
                    let Some((key, attempt, base, infra_before, retried)) = next else {
                        break;
                    };
                    if interrupt.is_set() {
                        break;
                    }
                    // Every key is made of the suite's cases.
                    let Some(case) = suite.cases.iter().find(|c| c.id == key.case) else {
                        continue;
                    };
                    let mut line = grade_one(grading, case, &key, &attempt, &base);
                    line.infra_retried = retried;
                    if interrupt.is_set() && line.outcome == Outcome::InfraError {
                        // Not the run's doing, nor the engine's: graded next time.
                        break;
                    }
                    log::info!(
                        "graded {} × {} try {}: {}{}",
                        key.case,
                        key.config,
                        key.try_k,
                        line.outcome.as_str(),
                        line.reason
                            .as_deref()
                            .map_or(String::new(), |r| format!(" ({})", one_line(r)))
                    );
                    if line.outcome == Outcome::InfraError
                        && infra_before == 0
                        && let Ok(mut retry) = retry.lock()
                    {
                        retry.push((key.clone(), line.host.clone()));
                    }
                    if let Err(e) = results::append(results_path, &line)
                        && let Ok(mut failure) = failure.lock()
                    {
                        *failure = Some(EvalError::io("append to", results_path)(e));
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok(retry.into_inner().unwrap_or_default())
}

fn grade_one(
    grading: &Grading,
    case: &Case,
    key: &RunKey,
    attempt: &Attempt,
    base: &str,
) -> ResultLine {
    let Grading {
        ws,
        repo,
        interrupt,
        ..
    } = *grading;
    let loops = attempt.result_value().and_then(|r| r["loops"].as_u64());
    // A best of N's attempt: what all its tries and the judge used.
    let (tokens, cost_usd) = match &attempt.tries {
        Some(whole) => (whole.tokens, whole.cost_usd),
        None => (attempt.total_tokens(), attempt.cost_usd()),
    };
    let mut line = ResultLine {
        key: key.clone(),
        outcome: Outcome::InfraError,
        reason: None,
        attempt_id: attempt.attempt_id.clone(),
        tokens,
        cost_usd,
        wall_ms: attempt.duration_ms,
        loops,
        branch: attempt.branch.clone(),
        host: attempt.host.clone(),
        grade: None,
        infra_retried: Vec::new(),
        graded_at: Timestamp::now().to_string(),
    };
    match outcome::classify(attempt) {
        Verdict::Decided(outcome, reason) => {
            line.outcome = outcome;
            line.reason = Some(reason);
            return line;
        }
        Verdict::Grade => {}
    }
    // Graded where it ran: its host has the images its config needs.
    let host = match attempt.host.as_deref() {
        None => None,
        Some(name) => match grading.hosts.iter().find(|h| h.name == name) {
            Some(host) => Some(&host.target),
            None => {
                line.reason = Some(format!(
                    "grading: the attempt ran on the host {name}, which is not among this evaluation's hosts"
                ));
                return line;
            }
        },
    };
    // The attempt's branch as it came back; an attempt that changed nothing has the base.
    let commit = match attempt.branch.as_deref() {
        Some(branch) => repo.rev(&format!("refs/heads/{branch}"), interrupt),
        None => Ok(base.to_string()),
    };
    let archive = ws
        .dir
        .join("evals")
        .join(format!("{}.tar", uuid::Uuid::new_v4().simple()));
    let graded = commit
        .and_then(|commit| repo.archive(&commit, &archive, interrupt))
        .map_err(grade::GradeError::Commit)
        .and_then(|()| match host {
            Some(target) => grade_on_host::grade(
                grading.exe,
                target,
                &archive,
                &case.grader,
                &key.task_id(),
                interrupt,
            ),
            None => grade::grade(
                grading.backend,
                &archive,
                &case.grader,
                &key.task_id(),
                interrupt,
            ),
        });
    let _ = std::fs::remove_file(&archive);
    match graded {
        Ok(g) => {
            line.outcome = if g.passed {
                Outcome::Resolved
            } else {
                Outcome::Unresolved
            };
            if !g.passed {
                line.reason = Some(if g.timed_out {
                    format!("the grader timed out after {} s", case.grader.timeout_sec)
                } else {
                    format!(
                        "the grader failed (exit {})",
                        g.exit_code.map_or("?".into(), |c| c.to_string())
                    )
                });
            }
            line.grade = Some(g);
        }
        Err(e) => line.reason = Some(format!("grading: {e}")),
    }
    line
}

fn one_line(text: &str) -> String {
    agent_runner_core::text::cut_chars(&text.replace('\n', " "), 200)
}
