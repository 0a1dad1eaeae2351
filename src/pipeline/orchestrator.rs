//! `agent-runner orchestrate` (SPEC §12): processes the queue of one workspace.
//! The main thread repairs orphans, claims jobs and waits; each attempt runs on its
//! own thread (which also spawns its runner child: see `child` for why), up to
//! `--jobs` at once. On SIGINT/SIGTERM it stops claiming; the attempts forward
//! SIGTERM to their runners, which clean up, and are recorded "interrupted".

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::attempt::{self, Place, Setup};
use super::bundler::Bundlers;
use super::defaults::Isolation;
use super::presence::Presence;
use super::record::AttemptStatus;
use super::spare::{self, Spares};
use super::{Workspace, claim, isolation, leftover, recovery};
use crate::error::exit;
use crate::interrupt::Interrupt;

/// How often the queue is looked at when nothing happens (SPEC: ≤ 200 ms).
pub const POLL: Duration = Duration::from_millis(100);
/// How often orphans of other orchestrators are looked for while running.
const RECOVERY_INTERVAL: Duration = Duration::from_secs(5);

/// What an attempt's thread tells the main loop.
enum Report {
    /// Its runner has ended: its `--jobs` place is free.
    PlaceFree,
    /// It is recorded, with this status.
    Finished(AttemptStatus),
}

/// `orchestrate` options.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Attempts at once (≥ 1).
    pub jobs: usize,
    /// Stop when nothing is claimable and nothing runs.
    pub once: bool,
}

/// Runs the orchestrator until the queue is done (`once`) or a signal; returns the
/// exit code: 0 when every attempt succeeded, 1 otherwise, 130 when interrupted.
pub fn run(ws: Workspace, options: Options, exe: PathBuf, interrupt: Interrupt) -> i32 {
    let wants_clones = options.jobs > 1 || ws.defaults.isolation == Some(Isolation::Clone);
    let (isolated, limit) = if !wants_clones {
        (false, 1)
    } else if isolation::is_git_root(&ws.root_dir) {
        (true, options.jobs.max(1))
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
    let mut failures = recovery::recover(&ws);
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
    let mut claimer = claim::Claimer::default();
    // The last claim error, logged once while it repeats (a poll every 100 ms).
    let mut last_error = String::new();
    let note =
        |report: Report, active: &mut usize, placed: &mut usize, failures: &mut usize| match report
        {
            Report::PlaceFree => *placed -= 1,
            Report::Finished(status) => {
                *active -= 1;
                if status == AttemptStatus::Failed {
                    *failures += 1;
                }
            }
        };
    while !interrupt.is_set() {
        while placed < limit && !interrupt.is_set() {
            match claimer.next(&ws, &mut failures) {
                Ok(Some(claimed)) => {
                    last_error.clear();
                    active += 1;
                    placed += 1;
                    let (setup, done) = (setup.clone(), done.clone());
                    let place = {
                        let done = done.clone();
                        Place::new(move || {
                            let _ = done.send(Report::PlaceFree);
                        })
                    };
                    let spawned = std::thread::Builder::new()
                        .name(format!("job {}", claimed.job_id))
                        .spawn(move || {
                            let status = attempt::run(&setup, claimed, place);
                            let _ = done.send(Report::Finished(status));
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
        if options.once && active == 0 {
            break;
        }
        match finished.recv_timeout(POLL) {
            Ok(report) => note(report, &mut active, &mut placed, &mut failures),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        while let Ok(report) = finished.try_recv() {
            note(report, &mut active, &mut placed, &mut failures);
        }
        if last_recovery.elapsed() >= RECOVERY_INTERVAL {
            failures += recovery::recover(&ws);
            last_recovery = Instant::now();
        }
    }
    if interrupt.is_set() && active > 0 {
        log::info!("interrupted: stopping {active} attempt(s)");
    }
    while active > 0 {
        match finished.recv() {
            Ok(report) => note(report, &mut active, &mut placed, &mut failures),
            Err(_) => break,
        }
    }
    if options.once && !interrupt.is_set() {
        claim::warn_waiting(&ws);
    }
    setup.spares.stop();
    setup.bundlers.stop();
    setup.background.wait();
    if interrupt.is_set() {
        exit::INTERRUPTED
    } else if failures > 0 {
        exit::FAILED
    } else {
        exit::COMPLETE
    }
}
