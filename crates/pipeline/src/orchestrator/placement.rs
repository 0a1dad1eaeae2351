//! Where an attempt runs (SPEC §22 "Placement and faults"): the healthy host with
//! the most free slots. Health is `docker version` within 5 s (`Target::health`),
//! checked at start, again every 30 s, and at once after an attempt lost its host;
//! a host found unhealthy gets nothing until a check passes. Without `hosts` the
//! pool is the local daemon with `--jobs` slots, never checked: today's behaviour.

use std::time::{Duration, Instant};

use agent_runner_sandbox::backend::host::{HostSpec, Target};

/// How often every host's health is looked at again.
const RECHECK: Duration = Duration::from_secs(30);

/// The host an attempt was placed on, as its runner gets it.
#[derive(Debug, Clone)]
pub(crate) struct Placed {
    /// Its index in the pool.
    pub(crate) index: usize,
    pub(crate) name: String,
    pub(crate) target: Target,
}

struct Slot {
    spec: HostSpec,
    used: usize,
    /// Why it is not healthy (None: healthy).
    unhealthy: Option<String>,
    checked: Instant,
}

/// The hosts and their slots.
pub(crate) struct Pool {
    hosts: Vec<Slot>,
    /// False for the local daemon of `--jobs` (never checked, no target).
    named: bool,
}

impl Pool {
    /// The local daemon with `jobs` slots.
    pub(crate) fn local(jobs: usize) -> Pool {
        Pool {
            hosts: vec![Slot {
                spec: HostSpec {
                    name: "local".into(),
                    target: Target::docker_context("default"),
                    slots: jobs.max(1),
                },
                used: 0,
                unhealthy: None,
                checked: Instant::now(),
            }],
            named: false,
        }
    }

    /// `hosts`, each checked now (in parallel).
    pub(crate) fn of(hosts: Vec<HostSpec>) -> Pool {
        let mut pool = Pool {
            hosts: hosts
                .into_iter()
                .map(|spec| Slot {
                    spec,
                    used: 0,
                    unhealthy: None,
                    checked: Instant::now(),
                })
                .collect(),
            named: true,
        };
        let all: Vec<usize> = (0..pool.hosts.len()).collect();
        pool.check(&all);
        pool
    }

    /// Whether attempts go to named hosts.
    pub(crate) fn is_named(&self) -> bool {
        self.named
    }

    /// All slots, healthy or not.
    pub(crate) fn capacity(&self) -> usize {
        self.hosts.iter().map(|h| h.spec.slots).sum()
    }

    /// Slots free on healthy hosts.
    pub(crate) fn free(&self) -> usize {
        self.hosts
            .iter()
            .filter(|h| h.unhealthy.is_none())
            .map(|h| h.spec.slots - h.used)
            .sum()
    }

    /// Checks again the hosts whose last check is `RECHECK` old; the names and
    /// daemons of those found healthy (their leftovers are swept then).
    pub(crate) fn recheck(&mut self) -> Vec<(String, Target)> {
        if !self.named {
            return Vec::new();
        }
        let due: Vec<usize> = (0..self.hosts.len())
            .filter(|&i| self.hosts[i].checked.elapsed() >= RECHECK)
            .collect();
        if due.is_empty() {
            return Vec::new();
        }
        self.check(&due);
        due.into_iter()
            .map(|i| &self.hosts[i])
            .filter(|h| h.unhealthy.is_none())
            .map(|h| (h.spec.name.clone(), h.spec.target.clone()))
            .collect()
    }

    fn check(&mut self, which: &[usize]) {
        let results: Vec<(usize, Option<String>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = which
                .iter()
                .map(|&i| {
                    let target = self.hosts[i].spec.target.clone();
                    (
                        i,
                        scope.spawn(move || agent_runner_sandbox::backend::health(&target)),
                    )
                })
                .collect();
            handles
                .into_iter()
                .map(|(i, h)| (i, h.join().unwrap_or(Some("its check panicked".into()))))
                .collect()
        });
        for (i, unhealthy) in results {
            let host = &mut self.hosts[i];
            match (&host.unhealthy, &unhealthy) {
                (None, Some(why)) => {
                    log::warn!(
                        "host {}: unhealthy: {why}; nothing is placed there",
                        host.spec.name
                    )
                }
                (Some(_), None) => log::info!("host {}: healthy again", host.spec.name),
                _ => {}
            }
            host.unhealthy = unhealthy;
            host.checked = Instant::now();
        }
    }

    /// Takes a slot on the healthy host with the most free slots (the first named on
    /// a tie), other than `avoid` when another host is in the pool. `want`: the host
    /// of the worker's session a resumed attempt goes on with (SPEC §22): only there
    /// while it is in the pool and healthy; else anywhere (its runner then refuses
    /// the other host, naming both). None: nowhere now.
    pub(crate) fn take(&mut self, avoid: Option<&str>, want: Option<&str>) -> Option<Placed> {
        let want = want.filter(|name| {
            self.hosts
                .iter()
                .any(|h| h.unhealthy.is_none() && h.spec.name == *name)
        });
        let others = self
            .hosts
            .iter()
            .any(|h| h.unhealthy.is_none() && Some(h.spec.name.as_str()) != avoid);
        let index = (0..self.hosts.len())
            .filter(|&i| {
                let h = &self.hosts[i];
                h.unhealthy.is_none()
                    && h.used < h.spec.slots
                    && !(others && Some(h.spec.name.as_str()) == avoid)
                    && want.is_none_or(|name| h.spec.name == name)
            })
            .max_by_key(|&i| {
                (
                    self.hosts[i].spec.slots - self.hosts[i].used,
                    usize::MAX - i,
                )
            })?;
        let host = &mut self.hosts[index];
        host.used += 1;
        Some(Placed {
            index,
            name: host.spec.name.clone(),
            target: host.spec.target.clone(),
        })
    }

    /// The names and daemons of the hosts that answered their last check.
    pub(crate) fn healthy_targets(&self) -> Vec<(String, Target)> {
        self.hosts
            .iter()
            .filter(|h| h.unhealthy.is_none())
            .map(|h| (h.spec.name.clone(), h.spec.target.clone()))
            .collect()
    }

    /// Gives a slot back.
    pub(crate) fn give_back(&mut self, index: usize) {
        if let Some(host) = self.hosts.get_mut(index) {
            host.used = host.used.saturating_sub(1);
        }
    }

    /// An attempt lost host `index`: nothing more goes there until it answers.
    pub(crate) fn lost(&mut self, index: usize) {
        if self.named && index < self.hosts.len() {
            self.check(&[index]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(hosts: &[(&str, usize)]) -> Pool {
        Pool {
            hosts: hosts
                .iter()
                .map(|(name, slots)| Slot {
                    spec: HostSpec::new("t", name, "unix:///x.sock", *slots).unwrap(),
                    used: 0,
                    unhealthy: None,
                    checked: Instant::now(),
                })
                .collect(),
            named: true,
        }
    }

    #[test]
    fn the_host_with_most_free_slots_gets_the_attempt() {
        let mut p = pool(&[("a", 2), ("b", 3)]);
        let names: Vec<String> = (0..5).map(|_| p.take(None, None).unwrap().name).collect();
        assert_eq!(names, ["b", "a", "b", "a", "b"]);
        assert!(p.take(None, None).is_none());
        p.give_back(0);
        assert_eq!(p.take(None, None).unwrap().name, "a");
    }

    #[test]
    fn a_resumed_attempt_goes_to_the_host_of_its_session_while_it_is_there() {
        let mut p = pool(&[("a", 1), ("b", 3)]);
        assert_eq!(p.take(None, Some("a")).unwrap().name, "a");
        assert!(
            p.take(None, Some("a")).is_none(),
            "waits for a slot there, though b has three"
        );
        assert_eq!(p.take(None, None).unwrap().name, "b");
        // Gone from the pool, or unhealthy: anywhere (its runner says why not).
        assert_eq!(p.take(None, Some("c")).unwrap().name, "b");
        p.hosts[0].unhealthy = Some("down".into());
        p.give_back(0);
        assert_eq!(p.take(None, Some("a")).unwrap().name, "b");
    }

    #[test]
    fn an_unhealthy_or_avoided_host_gets_nothing() {
        let mut p = pool(&[("a", 2), ("b", 1)]);
        p.hosts[0].unhealthy = Some("down".into());
        assert_eq!(p.free(), 1);
        assert_eq!(p.take(None, None).unwrap().name, "b");
        assert!(p.take(None, None).is_none());
        let mut p = pool(&[("a", 2), ("b", 1)]);
        assert_eq!(p.take(Some("a"), None).unwrap().name, "b");
        assert!(p.take(Some("a"), None).is_none(), "waits for another host");
        // A pool of one host: the avoided host is all there is.
        let mut p = pool(&[("a", 1)]);
        assert_eq!(p.take(Some("a"), None).unwrap().name, "a");
    }
}
