//! Each host's leftovers (SPEC §22): containers and volumes of agent-runner's there
//! (`backend::sweep`, by label only). At orchestrator start, what a provably dead
//! owner left or whose expiry passed; then, each time a health re-check finds a
//! host healthy (every 30 s, `placement`), only what is both expired and left by a
//! dead owner, so a run never loses its sandbox to a sweep. The re-check's sweeps
//! run in the background, one at a time per host: placing attempts never waits on
//! a slow host.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::placement::Pool;
use agent_runner_sandbox::backend::host::Target;
use agent_runner_sandbox::backend::sweep::Rule;
use agent_runner_sandbox::backend::sweep_host;

/// The start's sweep of every healthy host, in turn.
pub(crate) fn at_start(pool: &Pool) {
    for (name, target) in pool.healthy_targets() {
        report(&name, &sweep_host(&target, Rule::AtStart));
    }
}

/// The sweeps while the orchestrator runs: the hosts being swept now.
#[derive(Default)]
pub(crate) struct Sweeps {
    running: Arc<Mutex<HashSet<String>>>,
}

impl Sweeps {
    /// Sweeps `hosts` (just found healthy) in the background, but not one whose
    /// last sweep still runs.
    pub(crate) fn start(&self, hosts: Vec<(String, Target)>) {
        for (name, target) in hosts {
            let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
            if !running.insert(name.clone()) {
                continue;
            }
            drop(running);
            let running = self.running.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("sweep {name}"))
                .spawn({
                    let name = name.clone();
                    move || {
                        report(&name, &sweep_host(&target, Rule::WhileRunning));
                        running
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&name);
                    }
                });
            if let Err(e) = spawned {
                log::warn!("host {name}: cannot start its sweep: {e}");
                self.running
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&name);
            }
        }
    }
}

fn report(name: &str, removed: &[String]) {
    if !removed.is_empty() {
        log::info!(
            "host {name}: removed {} leftover(s): {}",
            removed.len(),
            removed.join(", ")
        );
    }
}
