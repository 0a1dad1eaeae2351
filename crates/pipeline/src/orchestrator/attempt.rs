//! One attempt of a claimed job, start to end (SPEC §12 steps 2–4): prepare where it
//! runs (root_dir, or a clone), build the TaskConfig, run `agent-runner run --json`,
//! bring an isolated attempt's branch back, and record the outcome. Every way this
//! can end is recorded as an attempt, with an error that says what went wrong.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;

use super::child;
use super::task_config::{self, Invariants};
use super::test_choice;
use crate::Workspace;
use crate::builder::{self, BuildRequest, DependencySummary};
use crate::clones::background::Background;
use crate::clones::bundler::Bundlers;
use crate::clones::spare::Spares;
use crate::clones::{self, AttemptClone};
use crate::ended::{self, Tell};
use crate::queue::jobs;
use crate::queue::status::TaskStatus;
use crate::store::attempt_files::KEPT_DIR_NAME;
use crate::store::pinned_test::{NO_TEST, TestSource};
use crate::store::task_file::{Attempt, AttemptStatus, TaskRecord, TaskView};
use crate::store::task_store::TaskStore;
use agent_runner_core::fs::atomic;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;
use agent_runner_core::process::Ending;
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::{cut, one_line};
use agent_runner_core::timestamp::{Timestamp, human};
use agent_runner_core::usage::{Account, ModelUsage};
use agent_runner_settings::task::WorkerSettings;

/// What every attempt of one orchestrator shares.
#[derive(Clone)]
pub(crate) struct Setup {
    pub(crate) ws: Workspace,
    /// The agent-runner binary (this one).
    pub(crate) exe: PathBuf,
    /// Run each attempt in its own clone.
    pub(crate) isolated: bool,
    pub(crate) interrupt: Interrupt,
    /// Clean-ups that outlive their attempt.
    pub(crate) background: Background,
    /// Bundle isolated attempts' branches.
    pub(crate) bundlers: Bundlers,
    /// Isolated attempts' clones, made ahead.
    pub(crate) spares: Spares,
}

/// A claimed job, ready to become an attempt.
pub(crate) struct Claimed {
    pub(crate) job_id: String,
    pub(crate) task: TaskView,
    /// Set when the job must fail without running (a dependency failed).
    pub(crate) refusal: Option<String>,
    /// The job whose attempt this one continues (`run --resume`, SPEC §19).
    pub(crate) resume_from: Option<String>,
    /// The job whose clone a resumed attempt goes on in.
    pub(crate) clone_job: Option<String>,
    /// One try of a best of N run (SPEC §23).
    pub(crate) try_of: Option<crate::store::tries::TryOf>,
    /// The user's message (SPEC §23): a follow-up for the resumed runner, or with
    /// `restart` why the plan was rejected.
    pub(crate) message: Option<String>,
    /// Run `resume_from`'s TaskConfig from the start (a rejected plan, or one
    /// approved with the user's criteria) instead of resuming its runner.
    pub(crate) restart: bool,
    /// With `restart`: a follow-up after a success, in a new clone that starts from
    /// the task's branch (SPEC §23).
    pub(crate) on_branch: bool,
    /// Re-queued after its attempt lost this host (SPEC §22).
    pub(crate) lost_host: Option<String>,
    /// Where its runner runs, when the orchestrator has hosts (`placement`).
    pub(crate) host: Option<super::placement::Placed>,
}

/// An attempt's place among the `--jobs` at once. It goes back as soon as the
/// attempt's runner has ended: what follows (bringing a branch back, one attempt at
/// a time in the bundler, and recording) runs alongside the next runner. Dropping
/// it gives it back too, so every way an attempt ends does.
pub(crate) struct Place(Option<Box<dyn FnOnce() + Send>>);

impl Place {
    /// A place that calls `free` when given back.
    pub(crate) fn new(free: impl FnOnce() + Send + 'static) -> Place {
        Place(Some(Box::new(free)))
    }

    fn free(&mut self) {
        if let Some(free) = self.0.take() {
            free();
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.free();
    }
}

/// What the attempt did, before it is recorded.
struct Ran {
    status: AttemptStatus,
    error: Option<String>,
    result: Option<Box<serde_json::value::RawValue>>,
    branch: Option<String>,
    /// Where the test came from, once chosen.
    test_source: Option<TestSource>,
    /// The runner's `verified`, when it ran.
    verified: Option<bool>,
}

/// How an attempt ended, for the orchestrator's tally.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finished {
    pub status: AttemptStatus,
    /// The run's and the Task Builder's tokens (None: not recorded).
    pub(crate) tokens: Option<u64>,
    /// Their cost (None: not known).
    pub(crate) cost_usd: Option<f64>,
    /// The pool's index of the host this attempt lost (SPEC §22).
    pub(crate) lost_host: Option<usize>,
    /// Its job, to queue again once the pool knows the host is lost: queued
    /// before, it could be placed on that host again in the meantime.
    pub(crate) requeue: Option<Requeue>,
}

/// The job of an attempt that lost its host, to queue again (`Requeue::run`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Requeue {
    job_id: String,
    task_id: String,
    /// The host it lost.
    host: String,
    /// The host its job had lost before, if it was itself re-queued.
    before: Option<String>,
    /// The host was not lost but busy (a cluster that scheduled the Pod nowhere in
    /// time, SPEC §25): still healthy, but not where the job goes again.
    busy: bool,
}

/// Runs the attempt and records it; returns its status, failed when it could not be
/// recorded (whatever the runner said: nobody can see it succeeded), and what it
/// spent.
pub(crate) fn run(setup: &Setup, claimed: Claimed, mut place: Place) -> Finished {
    let ws = &setup.ws;
    let job_id = &claimed.job_id;
    let task = &claimed.task.record;
    let started = Timestamp::now();
    let clock = Instant::now();
    let log_dir = ws.job_log_dir(job_id);
    let config_path = log_dir.join("task-config.yaml");
    let mut builder_usage = None;
    let ran = match &claimed.refusal {
        Some(reason) => failed(reason.clone()),
        None => match crate::store::workspace::create_dir(&log_dir) {
            Ok(()) => attempt(
                setup,
                &claimed,
                &log_dir,
                &config_path,
                &mut place,
                &mut builder_usage,
            ),
            Err(e) => failed(format!("cannot create {}: {e}", log_dir.display())),
        },
    };
    let mut ran = ran;
    let lost = claimed.host.as_ref().and_then(|host| {
        let detail = lost_detail(ran.error.as_deref()?)?;
        ran.status = AttemptStatus::Failed;
        ran.branch = None;
        ran.verified = Some(false);
        ran.error = Some(format!("host lost: {}: {detail}", host.name));
        Some(host)
    });
    let (usage, budget) = spent(ran.result.as_deref());
    let mut attempt = Attempt {
        error: ran.error,
        result: ran.result,
        branch: ran.branch,
        resumed_from: claimed.resume_from.clone(),
        clone_job: claimed.clone_job.clone(),
        test_source: ran.test_source,
        // Only a succeeded attempt is verified (bringing its branch back can still fail it).
        verified: ran
            .verified
            .map(|v| v && ran.status == AttemptStatus::Succeeded),
        usage,
        budget,
        builder_usage,
        try_of: claimed.try_of.clone(),
        message: claimed.message.clone(),
        host: claimed.host.as_ref().map(|h| h.name.clone()),
        ..Attempt::ended(
            job_id,
            &task.id,
            ran.status,
            started.to_string(),
            clock.elapsed().as_millis() as u64,
            &log_dir,
        )
    };
    let busy = match (lost, claimed.host.as_ref(), attempt.error.as_deref()) {
        (None, Some(host), Some(error)) if error.contains("host busy: ") => Some(host),
        _ => None,
    };
    let requeue = lost.or(busy).map(|host| Requeue {
        job_id: job_id.clone(),
        task_id: task.id.clone(),
        host: host.name.clone(),
        before: claimed.lost_host.clone(),
        busy: busy.is_some(),
    });
    let status = settle(setup, &claimed, &mut attempt, clock);
    Finished {
        status,
        tokens: attempt.total_tokens(),
        cost_usd: attempt.cost_usd(),
        lost_host: lost.map(|h| h.index),
        requeue,
    }
}

/// The ended `attempt` through `ended::settle`, its outcome logged; the status it
/// counts as, failed when it could not be recorded (whatever the runner said:
/// nobody can see it succeeded).
fn settle(
    setup: &Setup,
    claimed: &Claimed,
    attempt: &mut Attempt,
    clock: Instant,
) -> AttemptStatus {
    let (job_id, task) = (&claimed.job_id, &claimed.task.record);
    let status = attempt.status.as_str();
    let reason = attempt
        .error
        .as_deref()
        .map_or(String::new(), |e| format!(": {}", cut(&one_line(e), 300)));
    let settled = ended::settle(
        &setup.ws,
        &task.title,
        attempt,
        Tell::Now,
        setup.interrupt,
        |attempt, path| {
            let spend = spend_line(attempt);
            let took = human(clock.elapsed());
            if let Some(try_of) = &attempt.try_of {
                log::info!(
                    "job {job_id}: finished try {} of {} of task {}: {status} in {took}{spend}{reason}",
                    try_of.k,
                    try_of.n,
                    task.id,
                );
                return;
            }
            let on = attempt
                .host
                .as_deref()
                .map_or(String::new(), |h| format!(" on host {h}"));
            log::info!(
                "job {job_id}: finished task {}{on}: {status} in {took}{spend}{reason}; result {}",
                task.id,
                path.display()
            );
        },
    );
    match settled {
        Ok(status) => status,
        Err(e) => {
            log::error!(
                "job {job_id}: finished task {}: {status}{reason}; but cannot record it: {e}",
                task.id
            );
            AttemptStatus::Failed
        }
    }
}

/// What a runner's error says of a lost host (SPEC §22): the `host lost: …` of
/// the sandbox, or a daemon that could not be reached.
fn lost_detail(error: &str) -> Option<String> {
    if let Some(at) = error.find("host lost: ") {
        return Some(error[at + "host lost: ".len()..].to_string());
    }
    [
        "Cannot connect to the Docker daemon",
        "error during connect",
    ]
    .iter()
    .find_map(|words| error.find(words).map(|at| error[at..].to_string()))
}

impl Requeue {
    /// Queues the job again, once: a job that was itself re-queued is not.
    pub(crate) fn run(&self, ws: &crate::Workspace) {
        let (job_id, host) = (&self.job_id, &self.host);
        let what = if self.busy { "busy" } else { "lost" };
        if let Some(before) = &self.before {
            log::warn!(
                "job {job_id}: {what} host {host} after it was re-queued from host {before}: not re-queued again"
            );
            return;
        }
        match jobs::requeue_lost(ws, &self.task_id, host) {
            Ok(next) => log::warn!(
                "job {job_id}: {what} host {host}; re-queued as job {next} for another host"
            ),
            Err(e) => log::error!("job {job_id}: {what} host {host}; cannot re-queue it: {e}"),
        }
    }
}

/// Whether the runner ended because the user stopped it: a stop was asked for, and
/// the runner did not succeed but ended interrupted (or was killed before it could
/// say). A runner that finished by itself first keeps its own outcome.
fn stopped_by_user(stop_requested: bool, child: &child::ChildRun) -> bool {
    stop_requested
        && child.status.as_deref() != Some("succeeded")
        && (child.result.is_none()
            || child
                .error
                .as_deref()
                .is_some_and(|e| e.starts_with("interrupted")))
}

/// A failed attempt keeping the runner's result.
fn failed_with(result: Option<Box<RawValue>>) -> Ran {
    Ran {
        result,
        ..failed(String::new())
    }
}

/// The runner's `usage` and `budget`, from its result.
fn spent(result: Option<&RawValue>) -> (Option<Account>, Option<serde_json::Value>) {
    #[derive(serde::Deserialize)]
    struct Spent {
        usage: Option<serde_json::Value>,
        budget: Option<serde_json::Value>,
    }
    let Some(spent) = result.and_then(|r| serde_json::from_str::<Spent>(r.get()).ok()) else {
        return (None, None);
    };
    let usage = spent.usage.and_then(|u| serde_json::from_value(u).ok());
    (usage, spent.budget.filter(serde_json::Value::is_object))
}

/// `, 1234 tokens, $0.05` for the log line, when known.
fn spend_line(attempt: &Attempt) -> String {
    let tokens = attempt
        .total_tokens()
        .map_or(String::new(), |t| format!(", {t} tokens"));
    let cost = attempt.cost_usd().map_or(String::new(), |c| {
        format!(", ${}", agent_runner_core::usage::usd(c))
    });
    format!("{tokens}{cost}")
}

fn failed(error: String) -> Ran {
    Ran {
        status: AttemptStatus::Failed,
        error: Some(error),
        result: None,
        branch: None,
        test_source: None,
        verified: None,
    }
}

fn attempt(
    setup: &Setup,
    claimed: &Claimed,
    log_dir: &Path,
    config_path: &Path,
    place: &mut Place,
    builder_usage: &mut Option<ModelUsage>,
) -> Ran {
    let ws = &setup.ws;
    // A resumed attempt goes on where the one it continues ran.
    let run_dir = match (&claimed.resume_from, &claimed.clone_job) {
        (Some(_), Some(clone_job)) => ws.clones_dir().join(clone_job),
        (Some(_), None) if claimed.on_branch => ws.clones_dir().join(&claimed.job_id),
        (Some(_), None) => ws.root_dir.clone(),
        (None, _) if setup.isolated || claimed.try_of.is_some() => {
            ws.clones_dir().join(&claimed.job_id)
        }
        (None, _) => ws.root_dir.clone(),
    };
    let steps = (|| {
        let (yaml, builder, took, test_source) = match &claimed.resume_from {
            Some(from) => resumed_config(setup, claimed, from, &run_dir, log_dir)?,
            None => build(setup, claimed, log_dir, &run_dir, builder_usage)?,
        };
        // From here on, a failed attempt still says where its test came from.
        let sourced = |ran: Ran| Ran {
            test_source: Some(test_source),
            ..ran
        };
        let clone = match (&claimed.resume_from, &claimed.clone_job) {
            (Some(_), Some(clone_job)) => Some(
                AttemptClone::kept(
                    &ws.clones_dir(),
                    &ws.job_log_dir(clone_job),
                    clone_job,
                    &claimed.task.record.id,
                )
                .map_err(|e| sourced(failed(format!("cannot resume in the clone: {e}"))))?,
            ),
            (Some(_), None) if !claimed.on_branch => None,
            _ => clone(setup, claimed, log_dir).map_err(sourced)?,
        };
        let config = checked(&yaml, log_dir, config_path).map_err(sourced)?;
        log::info!(
            "job {}: built the TaskConfig with the {} builder in {} (test: {}): {}",
            claimed.job_id,
            builder,
            human(took),
            test_source.as_str(),
            config_path.display()
        );
        // The bundler (shared by all attempts) starts alongside the first runner.
        if setup.interrupt.is_set() {
            return Err(sourced(failed("interrupted".into())));
        }
        if clone.is_some() {
            setup
                .bundlers
                .start(&config.worker)
                .map_err(|e| sourced(failed(e.to_string())))?;
        }
        Ok((yaml, clone, config, test_source))
    })();
    match steps {
        Ok((yaml, clone, config, test_source)) => {
            let kept = clone.as_ref().map(|c| c.dir.clone());
            let mut ran = run_and_bring_back(
                setup,
                claimed,
                &yaml,
                &run_dir,
                clone,
                &config.worker,
                place,
            );
            let stopped = ran.error.as_deref() == Some(jobs::STOPPED_BY_USER);
            if let (AttemptStatus::Failed, Some(dir), false) = (ran.status, kept, stopped) {
                let error = ran.error.take().unwrap_or_default();
                ran.error = Some(format!("{error} ({})", kept_clone(&dir)));
            }
            ran.test_source = Some(test_source);
            ran
        }
        Err(ran) => ran,
    }
}

/// What a failed attempt's error says about its clone, which is kept for the user
/// and is all the worker's: git there would run what its `.git/config` or a nested
/// repository's says (`core.fsmonitor` on a `git status`).
pub(crate) fn kept_clone(dir: &Path) -> String {
    format!(
        "its clone is kept in {}: the worker wrote all of it, .git included; look at its files, but run no git command in it",
        dir.display()
    )
}

/// The Task Builder's draft for the claimed task, completed with the invariants
/// (the attempt runs in `run_dir`) and the test chosen (`test_choice`): the
/// TaskConfig YAML, the builder (for messages), how long it took, and where the test
/// came from. With no test from any source where the workspace requires one, the
/// attempt fails here, before anything else starts.
fn build(
    setup: &Setup,
    claimed: &Claimed,
    log_dir: &Path,
    run_dir: &Path,
    builder_usage: &mut Option<ModelUsage>,
) -> Result<(String, String, Duration, TestSource), Ran> {
    let ws = &setup.ws;
    let task = &claimed.task.record;
    // Another program may have pinned it (an update line): checked as `task new
    // --test` checks it, before any paid call or container.
    if let Some(test) = &task.plan.test {
        test.check("the task's test").map_err(|e| Ran {
            test_source: Some(TestSource::Task),
            ..failed(e.to_string())
        })?;
    }
    let request = BuildRequest {
        kind: "build_task_config",
        task_id: task.id.clone(),
        title: task.title.clone(),
        raw_prompt: task.raw_prompt.clone(),
        root_dir: ws.root_dir.display().to_string(),
        repo_overview: builder::overview::repo_overview(&ws.root_dir),
        depends_on: dependency_summaries(ws, &claimed.task),
        pinned_test: task
            .plan
            .test
            .as_ref()
            .or(ws.defaults.pinned_test())
            .map(|t| t.command.clone()),
    };
    let var = |name: &str| std::env::var(name).ok();
    let builder::Build {
        config,
        builder,
        duration,
        mut log,
        usage,
    } = match &task.eval {
        // An evaluation's run: the case's prd is the whole task, no LLM writes it.
        Some(_) => builder::Build {
            config: Ok(crate::store::eval_task::draft(&task.raw_prompt)),
            builder: "evaluation suite's (no LLM)".into(),
            duration: Duration::ZERO,
            log: "an evaluation run (SPEC §26): no Task Builder asked\n".into(),
            usage: None,
        },
        None => builder::build(&ws.defaults, &request, &var, setup.interrupt, log_dir),
    };
    *builder_usage = usage.map(|u| ModelUsage::of(&u, &ws.defaults.pricing()));
    let choice = config.as_ref().ok().map(|draft| {
        test_choice::choose(task.plan.test.as_ref(), ws.defaults.pinned_test(), draft)
    });
    if let Some(choice) = &choice {
        log.push_str(&choice.log);
    }
    let _ = atomic::write(&log_dir.join("builder.log"), log.as_bytes());
    let (draft, choice) = match (config, choice) {
        (Ok(draft), Some(choice)) => (draft, choice),
        (Err(_), _) if setup.interrupt.is_set() => return Err(failed("interrupted".into())),
        (Err(e), _) => return Err(failed(format!("the Task Builder ({builder}) failed: {e}"))),
        (Ok(_), None) => return Err(failed("internal error: no test choice".into())),
    };
    let yaml = completed(
        ws,
        task,
        run_dir,
        draft,
        &choice,
        "the Task Builder's TaskConfig is unusable",
    )?;
    let yaml = match claimed.try_of.as_ref().and_then(|t| t.kind.as_deref()) {
        Some(kind) => task_config::with_worker_kind(&yaml, kind, ws.defaults.kinds.get(kind))
            .map_err(|e| failed(format!("cannot set the try's worker kind {kind}: {e}")))?,
        None => yaml,
    };
    let yaml = match &task.eval {
        Some(eval) => task_config::with_runner(&yaml, &eval.runner).map_err(|e| {
            failed(format!(
                "the evaluation config {}'s runner settings: {e}",
                eval.config
            ))
        })?,
        None => yaml,
    };
    Ok((yaml, builder, duration, choice.source))
}

/// The TaskConfig of a resumed attempt: the one the attempt it continues ran with
/// (what a Task Builder wrote of it: the same task), completed again with today's
/// defaults and invariants, so the runner settings may have changed (a raised
/// budget or loop limit) while the task stays the same. No Task Builder is asked.
fn resumed_config(
    setup: &Setup,
    claimed: &Claimed,
    from: &str,
    run_dir: &Path,
    log_dir: &Path,
) -> Result<(String, String, Duration, TestSource), Ran> {
    let ws = &setup.ws;
    let clock = Instant::now();
    let path = ws.job_log_dir(from).join("task-config.yaml");
    let text = agent_runner_core::fs::read::whole(&path, 1 << 20)
        .map_err(|e| failed(format!("cannot resume job {from}: {}: {e}", path.display())))?;
    let config: serde_norway::Mapping = serde_norway::from_slice(&text)
        .map_err(|e| failed(format!("cannot resume job {from}: {}: {e}", path.display())))?;
    let task = &claimed.task.record;
    let mut draft = builder::reply::builder_part(&config);
    if let (true, Some(message)) = (claimed.restart, &claimed.message) {
        message_into(&mut draft, message, claimed.on_branch);
    }
    // The pins as they are today: a test changed since is a changed task, which the
    // runner then refuses to resume, naming it.
    let choice = test_choice::choose(task.plan.test.as_ref(), ws.defaults.pinned_test(), &draft);
    let log = format!(
        "resumed: no Task Builder asked; the TaskConfig of job {from} ({}), completed again with today's defaults\n{}",
        path.display(),
        choice.log
    );
    let _ = atomic::write(&log_dir.join("builder.log"), log.as_bytes());
    let unusable = format!("cannot resume job {from}: its TaskConfig");
    let yaml = completed(ws, task, run_dir, draft, &choice, &unusable)?;
    Ok((
        yaml,
        format!("earlier (job {from}'s)"),
        clock.elapsed(),
        choice.source,
    ))
}

/// The attempt's TaskConfig from a draft (the Task Builder's, or for a resumed
/// attempt the one it continues): refused without a test where the workspace
/// requires one, else completed with the task's invariants and the defaults'
/// runner settings. One place, so that a fresh and a resumed attempt cannot come
/// to differ in what they pin. `unusable` opens the error of a draft that cannot
/// be completed.
fn completed(
    ws: &Workspace,
    task: &TaskRecord,
    run_dir: &Path,
    draft: serde_norway::Mapping,
    choice: &test_choice::TestChoice,
    unusable: &str,
) -> Result<String, Ran> {
    if choice.source == TestSource::None && ws.defaults.require_test() {
        return Err(Ran {
            test_source: Some(TestSource::None),
            ..failed(NO_TEST.into())
        });
    }
    let invariants = Invariants {
        task_id: &task.id,
        title: &task.title,
        raw_prompt: &task.raw_prompt,
        root_dir: run_dir,
        acceptance_criteria: task.plan.acceptance_criteria.as_deref().unwrap_or_default(),
        test: choice.pinned.as_ref(),
        setup: ws.defaults.setup(),
    };
    task_config::complete(draft, &invariants, ws.defaults.runner.as_ref())
        .map_err(|e| failed(format!("{unusable}: {e}")))
}

/// Adds the user's message (why the plan was rejected, or a follow-up on the
/// branch) to the draft's instructions, where Meta's next `plan_task` reads it and
/// the note shows it (SPEC §23).
fn message_into(draft: &mut serde_norway::Mapping, message: &str, on_branch: bool) {
    let Some(serde_norway::Value::Mapping(task)) = draft.get_mut("task") else {
        return;
    };
    let instructions = task
        .get("instructions")
        .and_then(serde_norway::Value::as_str)
        .unwrap_or_default();
    let added = crate::queue::approval::with_message(instructions, message, on_branch);
    task.insert("instructions".into(), added.into());
}

/// The attempt's clone when attempts are isolated (from root_dir's HEAD, or for a
/// follow-up on the branch the task's branch, merged with the dependencies'
/// branches), described in `log_dir` for a later resume; starts making the next
/// claim's spare.
fn clone(setup: &Setup, claimed: &Claimed, log_dir: &Path) -> Result<Option<AttemptClone>, Ran> {
    // Each try of a best of N run is isolated, whatever `--jobs` says; so is a
    // follow-up on the branch, whose previous attempt was.
    if !setup.isolated
        && claimed.try_of.is_none()
        && !claimed.on_branch
        && claimed.task.record.eval.is_none()
    {
        return Ok(None);
    }
    let ws = &setup.ws;
    let job_id = &claimed.job_id;
    let merge = dependency_branches(ws, &claimed.task);
    let clock = Instant::now();
    let prepared = clones::prepare(
        &ws.root_dir,
        &ws.clones_dir(),
        &|base, dir| setup.spares.take(base, dir),
        job_id,
        (
            &claimed.task.record.id,
            claimed
                .try_of
                .as_ref()
                .map(|t| t.branch(&claimed.task.record.id)),
            claimed.on_branch,
            claimed.task.record.eval.as_ref().map(|e| e.base.as_str()),
        ),
        &merge,
        setup.interrupt,
    );
    log::debug!("job {job_id}: clone prepared in {}", human(clock.elapsed()));
    // The next claim's clone, made while this attempt runs.
    let queued = crate::queue::jobs::list(&ws.queue_dir()).len();
    setup.spares.refill(queued, &setup.background);
    match prepared {
        Ok(clone) => {
            if let Err(e) = clone.save(log_dir) {
                log::warn!("job {job_id}: {e}; the attempt could not be resumed in its clone");
            }
            Ok(Some(clone))
        }
        Err(_) if setup.interrupt.is_set() => Err(failed("interrupted".into())),
        Err(e) => Err(failed(format!("cannot prepare the attempt's clone: {e}"))),
    }
}

/// The TaskConfig checked as the runner will check it (in `cwd`, where it runs), and
/// written (secrets masked) to `config_path` whether it passed or not.
fn checked(
    yaml: &str,
    cwd: &Path,
    config_path: &Path,
) -> Result<agent_runner_settings::task::Task, Ran> {
    let var = |name: &str| std::env::var(name).ok();
    let validated = task_config::validate(yaml, cwd, &var);
    let redactor = match &validated {
        Ok(t) => Redactor::new(&t.secrets()),
        Err(_) => Redactor::default(),
    };
    if let Err(e) = atomic::write(config_path, redactor.redact(yaml).as_bytes()) {
        return Err(failed(format!(
            "cannot write {}: {e}",
            config_path.display()
        )));
    }
    validated.map_err(|e| failed(e.to_string()))
}

/// Runs the runner child, then brings an isolated attempt's branch back.
fn run_and_bring_back(
    setup: &Setup,
    claimed: &Claimed,
    yaml: &str,
    run_dir: &Path,
    clone: Option<AttemptClone>,
    worker: &WorkerSettings,
    place: &mut Place,
) -> Ran {
    let ws = &setup.ws;
    let job_id = &claimed.job_id;
    let log_dir = &ws.job_log_dir(job_id);
    let task = &claimed.task.record;
    let stderr_log = log_dir.join("runner.stderr.log");
    let child = match run_runner(setup, claimed, yaml, run_dir, &stderr_log, place) {
        Ok(child) => child,
        Err(ran) => return ran,
    };
    if stopped_by_user(jobs::stop_requested(ws, job_id), &child) {
        return Ran {
            error: Some(jobs::STOPPED_BY_USER.into()),
            ..failed_with(child.result)
        };
    }
    log::debug!(
        "job {job_id}: agent-runner ended ({}) after {}",
        child.exit,
        human(child.duration)
    );
    let mut ran = Ran {
        status: match child.status.as_deref() {
            Some("succeeded") => AttemptStatus::Succeeded,
            Some("awaiting_approval") => AttemptStatus::AwaitingApproval,
            _ => AttemptStatus::Failed,
        },
        error: None,
        result: child.result,
        branch: None,
        test_source: None,
        verified: Some(child.verified),
    };
    if child.ending == Ending::Interrupted {
        ran.status = AttemptStatus::Failed;
        ran.error = Some("interrupted".into());
        return ran;
    }
    if ran.result.is_none() {
        ran.error = Some(format!(
            "agent-runner printed no result ({}); see {}: {}",
            child.exit,
            stderr_log.display(),
            cut(&one_line(&stderr_tail(&stderr_log)), 400)
        ));
        return ran;
    }
    if ran.status == AttemptStatus::Failed {
        ran.error = Some(
            child
                .error
                .unwrap_or_else(|| format!("agent-runner failed ({})", child.exit)),
        );
        if let (Some(_), Some(clone)) = (&claimed.try_of, &clone) {
            keep_failed_try(setup, clone, worker, log_dir, &mut ran);
        }
        return ran;
    }
    if ran.status == AttemptStatus::AwaitingApproval {
        // Nothing ran yet: the clone (holding the runner's state) waits for the
        // approval's resume.
        log::info!(
            "job {job_id}: task {} awaits approval of its plan: `agent-runner task approve {}` or `task reject {} --message …`",
            task.id,
            task.id,
            task.id
        );
        return ran;
    }

    if let Some(clone) = clone {
        bring_back(setup, job_id, &clone, worker, log_dir, &mut ran);
    }
    ran
}

/// Starts the runner child in the job's log directory and waits for it; its place
/// is given back once it ended. A stop asked for before it started fails it here.
fn run_runner(
    setup: &Setup,
    claimed: &Claimed,
    yaml: &str,
    run_dir: &Path,
    stderr_log: &Path,
    place: &mut Place,
) -> Result<child::ChildRun, Ran> {
    let ws = &setup.ws;
    let job_id = &claimed.job_id;
    let log_dir = &ws.job_log_dir(job_id);
    let task = &claimed.task.record;
    log::info!(
        "job {job_id}: started agent-runner for task {} in {}",
        task.id,
        run_dir.display()
    );
    if jobs::stop_requested(ws, job_id) {
        return Err(failed(jobs::STOPPED_BY_USER.into()));
    }
    // The runner is named in the job's owner file for `task stop`; a stop asked for
    // before that was written is acted on here (`task stop` found no runner).
    let mut started = |pid: u32| {
        if let Some((mut claimant, _)) = jobs::read_owner(ws, job_id) {
            claimant.runner = Some(Owner::child(pid));
            if let Err(e) = jobs::write_owner(ws, job_id, &claimant) {
                log::warn!("job {job_id}: {e}; `task stop` cannot find its runner");
            }
        }
        if jobs::stop_requested(ws, job_id) {
            agent_runner_core::sys::signal_process(pid, agent_runner_core::sys::Signal::Term);
        }
    };
    // The runner runs in its log directory, which no worker can reach: never in the
    // repository or clone (`run_dir`), where a worker could plant what it looks up.
    // A restart runs afresh where the attempt it goes on from ran; only a resume
    // carries a follow-up message to the runner.
    let resume = claimed.resume_from.is_some() && !claimed.restart;
    let child = child::run(
        &setup.exe,
        yaml,
        log_dir,
        stderr_log,
        setup.interrupt,
        resume,
        claimed.message.as_deref().filter(|_| resume),
        &ws.root_dir,
        claimed.host.as_ref().map(|h| &h.target),
        &mut started,
    );
    place.free();
    child.map_err(|e| failed(format!("cannot start agent-runner: {e}")))
}

/// Brings job `job_id`'s succeeded branch back from its clone, which is then
/// cleaned up; failed when it cannot be brought back.
fn bring_back(
    setup: &Setup,
    job_id: &str,
    clone: &AttemptClone,
    worker: &WorkerSettings,
    log_dir: &Path,
    ran: &mut Ran,
) {
    let ws = &setup.ws;
    let clock = Instant::now();
    let brought = clones::bring_back(
        clone,
        &ws.root_dir,
        &setup.bundlers,
        worker,
        log_dir,
        setup.interrupt,
    );
    match brought {
        Ok(left_out) => {
            log::info!(
                "job {job_id}: branch {} brought back into {} in {}",
                clone.branch,
                ws.root_dir.display(),
                human(clock.elapsed())
            );
            ran.branch = Some(clone.branch.clone());
            clean_up(setup, job_id, clone, log_dir, ran);
            if !left_out.is_empty() {
                log::info!(
                    "job {job_id}: {} untracked build cache file(s) left out of the branch \
                     (runner.worker.keep_untracked keeps them)",
                    left_out.len()
                );
                let note = log_dir
                    .join(KEPT_DIR_NAME)
                    .join(format!("task-{}.md", clone.task_id));
                note_left_out(&note, &left_out);
            }
        }
        Err(e) => {
            ran.status = AttemptStatus::Failed;
            ran.error = Some(format!(
                "agent-runner succeeded, but branch {} could not be brought back: {e}",
                clone.branch
            ));
        }
    }
}

/// A failed try's work, brought back as its branch `agent-runner/<id>-try-<k>`
/// for review (SPEC §23: the tries that did not win are kept); it stays failed
/// and keeps its clone. Not bringing it back fails nothing more: the error says.
fn keep_failed_try(
    setup: &Setup,
    clone: &AttemptClone,
    worker: &WorkerSettings,
    log_dir: &Path,
    ran: &mut Ran,
) {
    let job_id = &clone.job_id;
    match clones::bring_back(
        clone,
        &setup.ws.root_dir,
        &setup.bundlers,
        worker,
        log_dir,
        setup.interrupt,
    ) {
        Ok(_) => {
            log::info!(
                "job {job_id}: the failed try's work kept as branch {}",
                clone.branch
            );
            ran.branch = Some(clone.branch.clone());
        }
        Err(e) => {
            log::warn!(
                "job {job_id}: the failed try's work could not be kept as branch {}: {e}",
                clone.branch
            );
            let error = ran.error.take().unwrap_or_default();
            ran.error = Some(format!(
                "{error} (its work could not be kept as branch {}: {e})",
                clone.branch
            ));
        }
    }
}

/// After a succeeded attempt's branch is back, its clone has served: the runner's
/// note and logs (`.agent-runner/`) move into the job's log directory, the result
/// is told so, and the rest of the clone is removed in the background. (Failed
/// attempts keep their clones, for inspection.)
fn clean_up(setup: &Setup, job_id: &str, clone: &AttemptClone, log_dir: &Path, ran: &mut Ran) {
    let private = clone.dir.join(agent_runner_core::private_dir::DIR_NAME);
    let kept = log_dir.join(KEPT_DIR_NAME);
    // The runner made this directory before the worker started, and the worker saw
    // it read-only; still, never move a link.
    let is_dir = std::fs::symlink_metadata(&private).is_ok_and(|m| m.is_dir());
    // The runner names the note by its canonical path.
    let canonical = std::fs::canonicalize(&private).unwrap_or_else(|_| private.clone());
    if is_dir && std::fs::rename(&private, &kept).is_ok() {
        if let Some(result) = ran.result.take() {
            ran.result = Some(moved_note(result, &[&private, &canonical], &kept));
        }
    } else {
        log::warn!(
            "job {job_id}: cannot move {} to {}; the clone is kept",
            private.display(),
            kept.display()
        );
        return;
    }
    let dir = clone.dir.clone();
    setup.background.spawn(move || {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            log::warn!("cannot remove the clone {}: {e}", dir.display());
        }
    });
}

/// Most left-out paths the note names one by one.
const LEFT_OUT_LISTED: usize = 50;

/// Adds to the Task Note what bring-back left out of the branch (SPEC §24). The
/// note is in the job's log directory by now, ours.
fn note_left_out(note: &Path, paths: &[String]) {
    let Ok(text) = agent_runner_core::fs::read::whole(note, 16 << 20) else {
        log::warn!("cannot add what was left out to {}", note.display());
        return;
    };
    let mut text = String::from_utf8_lossy(&text).into_owned();
    text.push_str(
        "\n## Left out of the branch\n\nUntracked build caches the worker wrote, not brought \
         back (`runner.worker.keep_untracked: true` keeps them):\n",
    );
    for path in paths.iter().take(LEFT_OUT_LISTED) {
        text.push_str(&format!(
            "- {}\n",
            agent_runner_core::markdown::code_span(path)
        ));
    }
    if paths.len() > LEFT_OUT_LISTED {
        text.push_str(&format!("- … and {} more\n", paths.len() - LEFT_OUT_LISTED));
    }
    if let Err(e) = agent_runner_core::fs::atomic::write(note, text.as_bytes()) {
        log::warn!("cannot add what was left out to {}: {e}", note.display());
    }
}

/// The result with its `note_path` moved from under one of `from` to under `to`.
fn moved_note(result: Box<RawValue>, from: &[&Path], to: &Path) -> Box<RawValue> {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(result.get()) else {
        return result;
    };
    let moved = value["note_path"]
        .as_str()
        .and_then(|p| from.iter().find_map(|f| Path::new(p).strip_prefix(f).ok()))
        .map(|rest| to.join(rest).display().to_string());
    let Some(moved) = moved else { return result };
    value["note_path"] = moved.into();
    serde_json::value::to_raw_value(&value).unwrap_or(result)
}

/// The last KiB of the runner's stderr log (our own file).
fn stderr_tail(path: &Path) -> String {
    let text = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    agent_runner_core::text::tail(text.trim_end(), 1024)
}

/// The task's dependencies, each with its task as the store has it (None: gone
/// or unreadable).
fn dependencies<'a>(ws: &Workspace, task: &'a TaskView) -> Vec<(&'a str, Option<TaskView>)> {
    let store = TaskStore::new(ws);
    let deps = task.record.plan.depends_on.iter().flatten();
    deps.map(|dep| (dep.as_str(), store.load(dep).ok().flatten()))
        .collect()
}

/// The branches to merge into an isolated attempt's start: those the task's
/// dependencies' latest (succeeded) attempts brought back. A dependency that ran in
/// place has no branch: its work is in root_dir already.
fn dependency_branches(ws: &Workspace, task: &TaskView) -> Vec<String> {
    dependencies(ws, task)
        .into_iter()
        .filter_map(|(_, view)| {
            let view = view?;
            let latest = view.latest()?;
            (latest.status == AttemptStatus::Succeeded)
                .then(|| latest.branch.clone())
                .flatten()
        })
        .collect()
}

/// What the builder is told about the task's dependencies.
fn dependency_summaries(ws: &Workspace, task: &TaskView) -> Vec<DependencySummary> {
    dependencies(ws, task)
        .into_iter()
        .map(|(dep, view)| match view {
            Some(view) => {
                let latest = view.latest();
                let status = match latest.map(|a| a.status) {
                    _ if view.deleted.is_some() => TaskStatus::Deleted,
                    Some(AttemptStatus::Succeeded) => TaskStatus::Succeeded,
                    Some(AttemptStatus::Failed) => TaskStatus::Failed,
                    Some(AttemptStatus::AwaitingApproval) => TaskStatus::AwaitingApproval,
                    Some(AttemptStatus::Cancelled) | None => TaskStatus::Pending,
                };
                DependencySummary {
                    id: dep.to_string(),
                    title: view.record.title.clone(),
                    status: status.as_str().into(),
                    summary: latest
                        .and_then(Attempt::result_value)
                        .and_then(|r| r["summary"].as_str().map(|s| cut(s, 300))),
                }
            }
            None => DependencySummary {
                id: dep.to_string(),
                title: String::new(),
                status: "MISSING".into(),
                summary: None,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A stop that raced the runner's own end does not relabel that end.
    #[test]
    fn only_a_runner_that_ended_interrupted_was_stopped_by_the_user() {
        let child = |status: &str, error: Option<&str>, printed: bool| child::ChildRun {
            result: printed.then(|| RawValue::from_string("{}".into()).unwrap()),
            status: printed.then(|| status.to_string()),
            error: error.map(str::to_string),
            verified: false,
            ending: agent_runner_core::process::Ending::Exited,
            exit: "exit status 130".into(),
            duration: Duration::ZERO,
        };
        let interrupted = child("failed", Some("interrupted"), true);
        assert!(stopped_by_user(true, &interrupted));
        assert!(!stopped_by_user(false, &interrupted), "no stop asked for");
        assert!(
            stopped_by_user(true, &child("", None, false)),
            "killed at once"
        );
        assert!(!stopped_by_user(true, &child("succeeded", None, true)));
        assert!(!stopped_by_user(
            true,
            &child(
                "failed",
                Some("max_loops reached (5): 0/1 criteria passed"),
                true
            )
        ));
    }

    #[test]
    fn a_place_is_given_back_once_however_the_attempt_ends() {
        let freed = Arc::new(AtomicUsize::new(0));
        let place = || {
            let freed = freed.clone();
            Place::new(move || {
                freed.fetch_add(1, Ordering::SeqCst);
            })
        };
        let mut early = place();
        early.free();
        early.free();
        drop(early);
        assert_eq!(
            freed.load(Ordering::SeqCst),
            1,
            "freed when the runner ended"
        );
        drop(place());
        assert_eq!(
            freed.load(Ordering::SeqCst),
            2,
            "freed when the attempt ended"
        );
    }
}
