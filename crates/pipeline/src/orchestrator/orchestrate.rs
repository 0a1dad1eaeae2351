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

/// Runs the orchestrator until the queue is done (`once`) or a signal: set up
/// (`Orchestrator::new`), a tick at a time, then the shutdown.
pub fn run(ws: Workspace, options: Options, exe: PathBuf, interrupt: Interrupt) -> Ended {
    let mut orchestrator = match Orchestrator::new(ws, options, exe, interrupt) {
        Ok(orchestrator) => orchestrator,
        Err(ended) => return ended,
    };
    while orchestrator.tick() {}
    orchestrator.shutdown()
}

/// A running orchestrator: the hosts' pool, the attempts it started and what
/// they spent.
struct Orchestrator {
    ws: Workspace,
    options: Options,
    interrupt: Interrupt,
    pool: Pool,
    /// Attempts at once: `--jobs` and the pool, or 1 without clones.
    limit: usize,
    setup: Setup,
    done: mpsc::Sender<Report>,
    finished: mpsc::Receiver<Report>,
    /// Attempts not yet recorded, and those of them still holding a `--jobs` place.
    active: usize,
    placed: usize,
    failures: usize,
    last_recovery: Instant,
    sweeps: Sweeps,
    claimer: claim::Claimer,
    /// The last claim error, logged once while it repeats (a poll every 100 ms).
    last_error: String,
    spent: Spent,
    /// Why no more jobs are claimed, once a spend limit is reached.
    spent_out: Option<String>,
    /// A claimed job that waits for a host other than the one it lost.
    waiting: Option<attempt::Claimed>,
    /// Other programs (the web view) tell from this marker that an orchestrator runs.
    _presence: Option<Presence>,
}

impl Orchestrator {
    /// The pool of hosts, whether attempts run in clones, orphans repaired and
    /// leftovers swept; the way it ended when it cannot start.
    fn new(
        ws: Workspace,
        options: Options,
        exe: PathBuf,
        interrupt: Interrupt,
    ) -> Result<Orchestrator, Ended> {
        let hosts = if options.hosts.is_empty() {
            // Checked when the defaults were set; read again in case workspace.json was edited.
            ws.defaults.hosts().map_err(|e| {
                log::error!("workspace defaults: {e}");
                Ended::Failed
            })?
        } else {
            options.hosts.clone()
        };
        let pool = if hosts.is_empty() {
            Pool::local(options.jobs)
        } else {
            let pool = Pool::of(hosts);
            host_sweep::at_start(&pool);
            pool
        };
        let (isolated, limit) = isolation(&ws, &pool)?;
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
        let presence = Presence::announce(&ws)
            .map_err(|e| log::warn!("{e}; other programs cannot tell that this orchestrator runs"))
            .ok();
        let failures = recovery::recover(&ws, interrupt);
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
        Ok(Orchestrator {
            ws,
            options,
            interrupt,
            pool,
            limit,
            setup,
            done,
            finished,
            active: 0,
            placed: 0,
            failures,
            last_recovery: Instant::now(),
            sweeps: Sweeps::default(),
            claimer: claim::Claimer::default(),
            last_error: String::new(),
            spent: Spent::default(),
            spent_out: None,
            waiting: None,
            _presence: presence,
        })
    }

    /// One look at the queue: claims what the free places take, waits up to
    /// `POLL` for what the attempts tell, repairs orphans now and then. False once
    /// there is nothing more to do.
    fn tick(&mut self) -> bool {
        if self.interrupt.is_set() {
            return false;
        }
        // With a spend limit, an attempt whose runner has ended is counted before
        // the next claim (it is being recorded: its usage is known in a moment).
        let counting = self.options.limit != SpendLimit::default() && self.active > self.placed;
        self.sweeps.start(self.pool.recheck());
        while self.placed < self.limit
            && self.pool.free() > 0
            && !self.interrupt.is_set()
            && self.spent_out.is_none()
            && !counting
            && self.claim_one()
        {}
        // Spent: nothing more will be claimed, so there is nothing to wait for.
        if (self.options.once || self.spent_out.is_some())
            && self.active == 0
            && self.waiting.is_none()
        {
            return false;
        }
        match self.finished.recv_timeout(POLL) {
            Ok(report) => self.note(report),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return false,
        }
        while let Ok(report) = self.finished.try_recv() {
            self.note(report);
        }
        if self.last_recovery.elapsed() >= RECOVERY_INTERVAL {
            self.failures += recovery::recover(&self.ws, self.interrupt);
            self.last_recovery = Instant::now();
        }
        true
    }

    /// Claims the next job and starts its attempt on a place of the pool; false
    /// when no more is to be claimed in this tick.
    fn claim_one(&mut self) -> bool {
        let next = match self.waiting.take() {
            Some(claimed) => Ok(Some(claimed)),
            None => self.claimer.next(&self.ws, &mut self.failures),
        };
        let mut claimed = match next {
            Ok(Some(claimed)) => claimed,
            Ok(None) => {
                self.last_error.clear();
                return false;
            }
            Err(e) => {
                let e = e.to_string();
                if e != self.last_error {
                    log::error!("{e}");
                }
                self.last_error = e;
                self.failures += 1;
                return false;
            }
        };
        self.last_error.clear();
        let session = self
            .pool
            .is_named()
            .then(|| session_host(&self.ws, &claimed))
            .flatten();
        let Some(host) = self
            .pool
            .take(claimed.lost_host.as_deref(), session.as_deref())
        else {
            // Only the host it lost is free, or its session's host is busy: it waits.
            self.waiting = Some(claimed);
            return false;
        };
        let index = host.index;
        if self.pool.is_named() {
            log::info!("job {}: placed on host {}", claimed.job_id, host.name);
            claimed.host = Some(host);
        }
        self.active += 1;
        self.placed += 1;
        let (setup, done) = (self.setup.clone(), self.done.clone());
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
            // The job stays in running/ under our name; once we have exited, the
            // next start records it as stopped. (The place went back when the
            // closure was dropped.)
            log::error!("cannot start a thread for an attempt: {e}");
            self.active -= 1;
            self.failures += 1;
            return false;
        }
        true
    }

    /// What an attempt's thread told: a place free, or the attempt recorded.
    fn note(&mut self, report: Report) {
        let finished = match report {
            Report::PlaceFree(host) => {
                self.placed -= 1;
                self.pool.give_back(host);
                return;
            }
            Report::Finished(finished) => finished,
        };
        self.active -= 1;
        if let Some(host) = finished.lost_host {
            self.pool.lost(host);
        }
        // Only now: the pool no longer places anything on the lost host.
        if let Some(requeue) = &finished.requeue {
            requeue.run(&self.ws);
        }
        if finished.status == AttemptStatus::Failed {
            self.failures += 1;
        }
        self.spent.add(finished.tokens, finished.cost_usd);
        if finished.cost_usd.is_none() && self.options.limit.max_cost_usd.is_some() {
            log::warn!(
                "--max-cost-usd: an attempt's cost is not known (a model without a price in runner.pricing); it is not counted"
            );
        }
        if self.spent_out.is_none()
            && let Some(why) = self.spent.reached(&self.options.limit)
        {
            log::warn!(
                "{why}: claiming no more jobs; {} running attempt(s) finish, the rest stays queued",
                self.active
            );
            self.spent_out = Some(why);
        }
    }

    /// Waits for the attempts still running (stopped, after a signal), says what
    /// is left, stops the helpers; how the run ended.
    fn shutdown(mut self) -> Ended {
        if self.interrupt.is_set() && self.active > 0 {
            log::info!("interrupted: stopping {} attempt(s)", self.active);
        }
        while self.active > 0 {
            match self.finished.recv() {
                Ok(report) => self.note(report),
                Err(_) => break,
            }
        }
        if let Some(why) = &self.spent_out {
            let queued = crate::queue::jobs::list(&self.ws.queue_dir()).len();
            log::warn!("{why}: stopped with {queued} job(s) left in the queue");
        } else if self.options.once && !self.interrupt.is_set() {
            claim::warn_waiting(&self.ws);
        }
        self.setup.spares.stop();
        self.setup.bundlers.stop();
        self.setup.background.wait();
        if self.interrupt.is_set() {
            Ended::Interrupted
        } else if self.failures > 0 {
            Ended::Failed
        } else {
            Ended::Succeeded
        }
    }
}

/// Whether attempts run in clones, and how many at once. On hosts an attempt
/// always runs in a clone: a lost host's attempt leaves nothing in the working tree.
fn isolation(ws: &Workspace, pool: &Pool) -> Result<(bool, usize), Ended> {
    let wants_clones =
        pool.capacity() > 1 || pool.is_named() || ws.defaults.isolation == Some(Isolation::Clone);
    if !wants_clones {
        Ok((false, 1))
    } else if clones::is_git_root(&ws.root_dir) {
        Ok((true, pool.capacity()))
    } else if pool.is_named() {
        log::error!(
            "{} is not the top of a git work tree: attempts on hosts run in clones",
            ws.root_dir.display()
        );
        Err(Ended::Failed)
    } else {
        log::warn!(
            "{} is not the top of a git work tree: attempts run one at a time, in it",
            ws.root_dir.display()
        );
        Ok((false, 1))
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
