//! `agent-runner orchestrate` (SPEC §12): processes the queue of one workspace.
//! The main thread repairs orphans, claims jobs and waits; each attempt runs on its
//! own thread (which also spawns its runner child: see `child` for why), up to
//! `--jobs` at once. On SIGINT/SIGTERM it stops claiming; the attempts forward
//! SIGTERM to their runners, which clean up, and are recorded "interrupted".

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::attempt::{self, Place, Setup};
use super::host_sweep::{self, Sweeps};
use super::placement::Pool;
use super::presence::Presence;
use super::spend_limit::{SpendLimit, Spent};
use super::{claim, recovery};
use crate::Workspace;
use crate::clones::bundler::Bundlers;
use crate::clones::spare::{self, Spares};
use crate::clones::{self, leftover};
use crate::store::defaults::Isolation;
use crate::store::task_file::AttemptStatus;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_sandbox::backend::host::HostSpec;

/// How often the queue is looked at when nothing happens (SPEC: ≤ 200 ms).
pub(crate) const POLL: Duration = Duration::from_millis(100);
/// How often orphans of other orchestrators are looked for while running.
const RECOVERY_INTERVAL: Duration = Duration::from_secs(5);

/// What an attempt's thread tells the main loop.
enum Report {
    /// Its runner has ended: its place (a slot of this host) is free.
    PlaceFree(usize),
    /// It is recorded, with this status and spend.
    Finished(attempt::Finished),
}

/// `orchestrate` options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Attempts at once (≥ 1).
    pub jobs: usize,
    /// Stop when nothing is claimable and nothing runs.
    pub once: bool,
    /// Claim nothing more once the finished attempts spent this much.
    pub limit: SpendLimit,
    /// `--host`: the Docker hosts (SPEC §22), over the workspace's `hosts`.
    pub hosts: Vec<HostSpec>,
}

/// How a run of the orchestrator ended (the command's exit code says it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every attempt succeeded (or there was none).
    Succeeded,
    /// Some attempt failed.
    Failed,
    /// Stopped by a signal.
    Interrupted,
}

/// Runs the orchestrator until the queue is done (`once`) or a signal.
pub fn run(ws: Workspace, options: Options, exe: PathBuf, interrupt: Interrupt) -> Ended {
    let hosts = if options.hosts.is_empty() {
        // Checked when the defaults were set; read again in case workspace.json was edited.
        match ws.defaults.hosts() {
            Ok(hosts) => hosts,
            Err(e) => {
                log::error!("workspace defaults: {e}");
                return Ended::Failed;
            }
        }
    } else {
        options.hosts.clone()
    };
    let mut pool = if hosts.is_empty() {
        Pool::local(options.jobs)
    } else {
        let pool = Pool::of(hosts);
        host_sweep::at_start(&pool);
        pool
    };
    // On hosts an attempt always runs in a clone: a lost host's attempt leaves
    // nothing in the working tree.
    let wants_clones =
        pool.capacity() > 1 || pool.is_named() || ws.defaults.isolation == Some(Isolation::Clone);
    let (isolated, limit) = if !wants_clones {
        (false, 1)
    } else if clones::is_git_root(&ws.root_dir) {
        (true, pool.capacity())
    } else if pool.is_named() {
        log::error!(
            "{} is not the top of a git work tree: attempts on hosts run in clones",
            ws.root_dir.display()
        );
        return Ended::Failed;
    } else {
        log::warn!(
            "{} is not the top of a git work tree: attempts run one at a time, in it",
            ws.root_dir.display()
        );
        (false, 1)
    };
    log::info!(
        "orchestrating workspace {} ({}): up to {limit} attempt(s) at once{}{}",
        ws.id,
        ws.root_dir.display(),
        if isolated {
            ", each in its own clone"
        } else {
            ""
        },
        if options.once {
            ", until the queue is done"
        } else {
            ""
        }
    );
    // Other programs (the web view) tell from this marker that an orchestrator runs.
    let _presence = Presence::announce(&ws)
        .map_err(|e| log::warn!("{e}; other programs cannot tell that this orchestrator runs"))
        .ok();
    let mut failures = recovery::recover(&ws, interrupt);
    leftover::sweep(&ws.clones_dir(), spare::PREFIX);
    leftover::sweep(&ws.bundles_dir(), "");
    let setup = Setup {
        ws: ws.clone(),
        exe,
        isolated,
        interrupt,
        background: Default::default(),
        bundlers: Bundlers::new(
            ws.clones_dir(),
            ws.bundles_dir().join(leftover::name("")),
            &ws.id,
        ),
        spares: Spares::new(
            &ws.root_dir,
            &ws.clones_dir(),
            if isolated { limit } else { 0 },
        ),
    };
    let (done, finished) = mpsc::channel::<Report>();
    // Attempts not yet recorded, and those of them still holding a `--jobs` place.
    let (mut active, mut placed) = (0usize, 0usize);
    let mut last_recovery = Instant::now();
    let sweeps = Sweeps::default();
    let mut claimer = claim::Claimer::default();
    // The last claim error, logged once while it repeats (a poll every 100 ms).
    let mut last_error = String::new();
    let mut spent = Spent::default();
    // Why no more jobs are claimed, once a spend limit is reached.
    let mut spent_out: Option<String> = None;
    // A claimed job that waits for a host other than the one it lost.
    let mut waiting: Option<attempt::Claimed> = None;
    let mut note = |report: Report,
                    pool: &mut Pool,
                    active: &mut usize,
                    placed: &mut usize,
                    failures: &mut usize,
                    spent_out: &mut Option<String>| match report {
        Report::PlaceFree(host) => {
            *placed -= 1;
            pool.give_back(host);
        }
        Report::Finished(finished) => {
            *active -= 1;
            if let Some(host) = finished.lost_host {
                pool.lost(host);
            }
            // Only now: the pool no longer places anything on the lost host.
            if let Some(requeue) = &finished.requeue {
                requeue.run(&ws);
            }
            if finished.status == AttemptStatus::Failed {
                *failures += 1;
            }
            spent.add(finished.tokens, finished.cost_usd);
            if finished.cost_usd.is_none() && options.limit.max_cost_usd.is_some() {
                log::warn!(
                    "--max-cost-usd: an attempt's cost is not known (a model without a price in runner.pricing); it is not counted"
                );
            }
            if spent_out.is_none()
                && let Some(why) = spent.reached(&options.limit)
            {
                log::warn!(
                    "{why}: claiming no more jobs; {} running attempt(s) finish, the rest stays queued",
                    *active
                );
                *spent_out = Some(why);
            }
        }
    };
    while !interrupt.is_set() {
        // With a spend limit, an attempt whose runner has ended is counted before
        // the next claim (it is being recorded: its usage is known in a moment).
        let counting = options.limit != SpendLimit::default() && active > placed;
        sweeps.start(pool.recheck());
        while placed < limit
            && pool.free() > 0
            && !interrupt.is_set()
            && spent_out.is_none()
            && !counting
        {
            let next = match waiting.take() {
                Some(claimed) => Ok(Some(claimed)),
                None => claimer.next(&ws, &mut failures),
            };
            match next {
                Ok(Some(mut claimed)) => {
                    last_error.clear();
                    let session = pool
                        .is_named()
                        .then(|| session_host(&ws, &claimed))
                        .flatten();
                    let Some(host) = pool.take(claimed.lost_host.as_deref(), session.as_deref())
                    else {
                        // Only the host it lost is free, or its session's host is
                        // busy: it waits.
                        waiting = Some(claimed);
                        break;
                    };
                    let index = host.index;
                    if pool.is_named() {
                        log::info!("job {}: placed on host {}", claimed.job_id, host.name);
                        claimed.host = Some(host);
                    }
                    active += 1;
                    placed += 1;
                    let (setup, done) = (setup.clone(), done.clone());
                    let place = {
                        let done = done.clone();
                        Place::new(move || {
                            let _ = done.send(Report::PlaceFree(index));
                        })
                    };
                    let spawned = std::thread::Builder::new()
                        .name(format!("job {}", claimed.job_id))
                        .spawn(move || {
                            let finished = attempt::run(&setup, claimed, place);
                            let _ = done.send(Report::Finished(finished));
                        });
                    if let Err(e) = spawned {
                        // The job stays in running/ under our name; once we have
                        // exited, the next start records it as stopped. (The
                        // place went back when the closure was dropped.)
                        log::error!("cannot start a thread for an attempt: {e}");
                        active -= 1;
                        failures += 1;
                        break;
                    }
                }
                Ok(None) => {
                    last_error.clear();
                    break;
                }
                Err(e) => {
                    let e = e.to_string();
                    if e != last_error {
                        log::error!("{e}");
                    }
                    last_error = e;
                    failures += 1;
                    break;
                }
            }
        }
        // Spent: nothing more will be claimed, so there is nothing to wait for.
        if (options.once || spent_out.is_some()) && active == 0 && waiting.is_none() {
            break;
        }
        match finished.recv_timeout(POLL) {
            Ok(report) => note(
                report,
                &mut pool,
                &mut active,
                &mut placed,
                &mut failures,
                &mut spent_out,
            ),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        while let Ok(report) = finished.try_recv() {
            note(
                report,
                &mut pool,
                &mut active,
                &mut placed,
                &mut failures,
                &mut spent_out,
            );
        }
        if last_recovery.elapsed() >= RECOVERY_INTERVAL {
            failures += recovery::recover(&ws, interrupt);
            last_recovery = Instant::now();
        }
    }
    if interrupt.is_set() && active > 0 {
        log::info!("interrupted: stopping {active} attempt(s)");
    }
    while active > 0 {
        match finished.recv() {
            Ok(report) => note(
                report,
                &mut pool,
                &mut active,
                &mut placed,
                &mut failures,
                &mut spent_out,
            ),
            Err(_) => break,
        }
    }
    if let Some(why) = &spent_out {
        let queued = crate::queue::jobs::list(&ws.queue_dir()).len();
        log::warn!("{why}: stopped with {queued} job(s) left in the queue");
    } else if options.once && !interrupt.is_set() {
        claim::warn_waiting(&ws);
    }
    setup.spares.stop();
    setup.bundlers.stop();
    setup.background.wait();
    if interrupt.is_set() {
        Ended::Interrupted
    } else if failures > 0 {
        Ended::Failed
    } else {
        Ended::Succeeded
    }
}

/// The host of the attempt a resumed job goes on from (SPEC §22: the worker's
/// session is there, and its runner refuses another); None for a job that starts
/// over (`restart`) or continues no attempt on a host.
fn session_host(ws: &Workspace, claimed: &attempt::Claimed) -> Option<String> {
    let from = claimed
        .resume_from
        .as_deref()
        .filter(|_| !claimed.restart)?;
    let host_of = |attempts: &[crate::store::task_file::Attempt]| {
        attempts
            .iter()
            .find(|a| a.job_id == from)
            .map(|a| a.host.clone())
    };
    match host_of(&claimed.task.attempts) {
        Some(host) => host,
        // Not the latest attempt: the task's whole file.
        None => crate::store::task_store::TaskStore::new(ws)
            .load(&claimed.task.record.id)
            .ok()
            .flatten()
            .and_then(|task| host_of(&task.attempts).flatten()),
    }
}
