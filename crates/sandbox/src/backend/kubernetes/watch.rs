//! A starting Pod's status as the cluster changes it: `kubectl get pod -w`, one
//! line of JSON per change, so the backend hears that the Pod runs when the API
//! server says it, not at the next poll (each poll a kubectl process).
//!
//! The same answers as one `kubectl get` (`Kubernetes::status`): the first status
//! within the health check's 5 s, else `host lost: <cluster>: no answer within
//! 5 s`. A watch that ends (the API server closes watches now and then, a user
//! without the `watch` verb, the Pod deleted) is followed by one `kubectl get`,
//! whose errors are those of a poll (NotFound → gone, no answer → host lost); the
//! next watch starts a poll's interval later, so at worst this is the poll.
//! A watch quiet for `QUIET` is checked by one `kubectl get` as well: a watch's
//! connection can stall without ending, and a Pod must not wait out its start's
//! deadline for a change already made.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::super::BackendError;
use super::{HEALTH, Kubernetes, POLL, PodStatus};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Held, HeldWait};

/// How long a watch may stay quiet before one `kubectl get` checks it.
const QUIET: Duration = Duration::from_secs(10);

/// The Pod `name`'s status changes.
pub(super) struct Watch<'a> {
    backend: &'a Kubernetes,
    name: &'a str,
    held: Option<Held>,
    /// When the last watch ended: the next starts a poll's interval after it.
    ended_at: Option<Instant>,
    /// A status has been heard since the current watch started.
    heard: bool,
    /// When the current watch started.
    since: Instant,
    /// When the Pod's status was last heard (or checked).
    heard_at: Instant,
}

impl<'a> Watch<'a> {
    pub(super) fn new(backend: &'a Kubernetes, name: &'a str) -> Watch<'a> {
        Watch {
            backend,
            name,
            held: None,
            ended_at: None,
            heard: false,
            since: Instant::now(),
            heard_at: Instant::now(),
        }
    }

    /// The Pod's next status within `within`; None when it did not change by then.
    pub(super) fn next(
        &mut self,
        within: Duration,
        interrupt: Interrupt,
    ) -> Result<Option<PodStatus>, BackendError> {
        if self.held.is_none() {
            if let Some(ended) = self.ended_at {
                let now = Instant::now();
                let resume = ended + POLL;
                if now < resume {
                    let nap = (resume - now).min(within);
                    std::thread::sleep(nap);
                    if nap < resume - now {
                        return Ok(None);
                    }
                }
            }
            self.start()?;
        }
        let Some(held) = self.held.as_mut() else {
            return Ok(None);
        };
        // Before its first answer, the watch is a health check.
        let unanswered = HEALTH.saturating_sub(self.since.elapsed());
        let quiet = QUIET.saturating_sub(self.heard_at.elapsed());
        let wait = match self.heard {
            true => within.min(quiet),
            false => within.min(unanswered),
        };
        match held.read_line("", wait, interrupt) {
            Ok(line) => {
                let status: Value = serde_json::from_str(&line).map_err(|e| {
                    BackendError::Io(format!("kubectl get pod {} -w: {e}", self.name))
                })?;
                self.heard = true;
                self.heard_at = Instant::now();
                Ok(Some(PodStatus::of(
                    &serde_json::json!({ "status": status }),
                )))
            }
            Err(HeldWait::Interrupted) => Err(BackendError::Interrupted),
            Err(HeldWait::TimedOut) if self.heard && self.heard_at.elapsed() >= QUIET => {
                self.heard_at = Instant::now();
                // The watch answers: a check unanswered on a busy API server is
                // no lost host. A Pod gone is gone.
                match self.backend.status(self.name) {
                    Ok(status) => Ok(Some(status)),
                    Err(e @ BackendError::Gone { .. }) => Err(e),
                    Err(e) => {
                        log::debug!("the check of Pod {}'s quiet watch: {e}", self.name);
                        Ok(None)
                    }
                }
            }
            Err(HeldWait::TimedOut) if self.heard || self.since.elapsed() < HEALTH => Ok(None),
            Err(HeldWait::TimedOut) => {
                self.stop();
                Err(BackendError::Io(format!(
                    "host lost: {}: no answer within {} s",
                    self.backend.kubectl.cluster,
                    HEALTH.as_secs()
                )))
            }
            Err(HeldWait::Ended(stderr)) => {
                self.stop();
                self.ended_at = Some(Instant::now());
                log::debug!(
                    "the watch of Pod {} ended: {}",
                    self.name,
                    super::super::docker_cli::last_lines(&stderr, 2)
                );
                self.backend.status(self.name).map(Some)
            }
        }
    }

    fn start(&mut self) -> Result<(), BackendError> {
        let invocation = self.backend.kubectl.command(&[
            "get",
            "pod",
            self.name,
            "--watch",
            "-o",
            "jsonpath={.status}{\"\\n\"}",
        ]);
        let held = process::spawn_held(&invocation).map_err(|e| super::kubectl::missing(&e))?;
        self.held = Some(held);
        self.heard = false;
        self.since = Instant::now();
        self.heard_at = self.since;
        Ok(())
    }

    fn stop(&mut self) {
        if let Some(held) = self.held.take() {
            held.release(Duration::ZERO);
        }
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        self.stop();
    }
}
