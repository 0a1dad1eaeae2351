//! Which connections get a line of their own in `egress.jsonl` (and an event), and
//! which are summed. A worker can open connections as fast as the proxy refuses
//! them (140,000 in 10 s), so a line per connection would fill the host's disk.
//!
//! Connections are grouped by destination, whether they were allowed, and why. The
//! first `DETAIL_LINES` of a group each get their line. After that they are summed
//! into one line (`connections: n`, the bytes and durations added up, `at` the
//! first one's start and `until` the last one's), written when the sum holds as
//! many connections as the group's lines so far (so a group's lines grow with the
//! logarithm of its connections), when its first connection waited `FLUSH_AFTER`,
//! and when the proxy stops (`drain`). Every connection is in exactly one line.
//!
//! At most `MAX_GROUPS` groups are told apart; connections to others share one,
//! whose sums say `host: "*"`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::record::Record;

/// Lines of a group before its connections are summed.
pub const DETAIL_LINES: u64 = 10;
/// Longest a summed connection waits for its line.
const FLUSH_AFTER: Duration = Duration::from_secs(60);
/// Groups told apart.
const MAX_GROUPS: usize = 256;
/// The host of the group of all other destinations.
pub(crate) const OTHERS: &str = "*";

/// `(allowed, host, port, reason)`.
type Key = (bool, String, u16, String);

/// See the module documentation.
#[derive(Default)]
pub(crate) struct Repeats {
    groups: HashMap<Key, Group>,
}

#[derive(Default)]
struct Group {
    /// Connections in lines already given out.
    lines_for: u64,
    /// Connections summed since, not yet given out.
    sum: Option<Sum>,
}

struct Sum {
    since: Instant,
    record: Record,
}

impl Repeats {
    /// The line to write now for `record`, if any: `record` itself, or the sum of
    /// its group's connections since its last line.
    pub fn take(&mut self, record: Record) -> Option<Record> {
        let mut key = (
            record.allowed,
            record.host.clone(),
            record.port,
            record.reason.clone(),
        );
        if self.groups.len() >= MAX_GROUPS && !self.groups.contains_key(&key) {
            key = (record.allowed, OTHERS.into(), 0, String::new());
        }
        let others = key.1 == OTHERS;
        let group = self.groups.entry(key).or_default();
        if group.lines_for < DETAIL_LINES && group.sum.is_none() {
            group.lines_for += 1;
            return Some(record);
        }
        match &mut group.sum {
            Some(sum) => add(&mut sum.record, &record),
            None => {
                let mut first = Record {
                    connections: Some(1),
                    until: Some(record.at.clone()),
                    ..record
                };
                if others {
                    first.host = OTHERS.into();
                    first.port = 0;
                    first.reason = format!("destinations beyond the first {MAX_GROUPS}");
                }
                group.sum = Some(Sum {
                    since: Instant::now(),
                    record: first,
                });
            }
        }
        let sum = group.sum.as_ref()?;
        let count = sum.record.connections.unwrap_or(1);
        if count >= group.lines_for || sum.since.elapsed() >= FLUSH_AFTER {
            group.lines_for += count;
            return group.sum.take().map(|sum| sum.record);
        }
        None
    }

    /// The sums not yet given out (the proxy stops).
    pub fn drain(&mut self) -> Vec<Record> {
        let mut out: Vec<Record> = self
            .groups
            .values_mut()
            .filter_map(|group| {
                let sum = group.sum.take()?;
                group.lines_for += sum.record.connections.unwrap_or(1);
                Some(sum.record)
            })
            .collect();
        out.sort_by(|a, b| a.at.cmp(&b.at));
        out
    }
}

/// Adds connection `record` to the sum `into`.
fn add(into: &mut Record, record: &Record) {
    into.connections = Some(into.connections.unwrap_or(1) + 1);
    into.until = Some(record.at.clone());
    into.bytes_up = into.bytes_up.saturating_add(record.bytes_up);
    into.bytes_down = into.bytes_down.saturating_add(record.bytes_down);
    into.duration_ms = into.duration_ms.saturating_add(record.duration_ms);
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_core::timestamp::Timestamp;

    fn denied(host: &str, up: u64) -> Record {
        Record {
            reason: "not in runner.worker.allow".into(),
            bytes_up: up,
            duration_ms: 1,
            ..Record::new(Timestamp::now(), host.into(), 443)
        }
    }

    /// Connections per line for `n` connections to one destination.
    fn lines_for(n: u64) -> Vec<u64> {
        let mut repeats = Repeats::default();
        let mut lines: Vec<Record> = (0..n)
            .filter_map(|_| repeats.take(denied("a.example", 3)))
            .collect();
        lines.extend(repeats.drain());
        lines.iter().map(|r| r.connections.unwrap_or(1)).collect()
    }

    #[test]
    fn the_first_lines_are_whole_then_sums_double() {
        assert_eq!(lines_for(3), [1, 1, 1]);
        assert_eq!(lines_for(10), [1; 10]);
        let mut expected = vec![1; 10];
        expected.extend([10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 9760]);
        let got = lines_for(20_000);
        assert_eq!(got, expected);
        assert_eq!(got.iter().sum::<u64>(), 20_000, "each connection once");
    }

    #[test]
    fn a_sum_adds_up_its_connections() {
        let mut repeats = Repeats::default();
        for _ in 0..DETAIL_LINES {
            assert!(repeats.take(denied("a.example", 3)).is_some());
        }
        let first = denied("a.example", 5);
        let at = first.at.clone();
        assert!(repeats.take(first).is_none());
        assert!(
            repeats.take(denied("b.example", 1)).is_some(),
            "its own group"
        );
        for _ in 0..8 {
            assert!(repeats.take(denied("a.example", 5)).is_none());
        }
        let last = denied("a.example", 5);
        let until = last.at.clone();
        let sum = repeats.take(last).expect("ten summed");
        assert_eq!(
            (
                sum.connections,
                sum.bytes_up,
                sum.duration_ms,
                sum.host.as_str()
            ),
            (Some(10), 50, 10, "a.example")
        );
        assert_eq!((sum.at, sum.until), (at, Some(until)));
        assert!(repeats.drain().is_empty());
    }

    #[test]
    fn groups_beyond_the_bound_share_one() {
        let mut repeats = Repeats::default();
        let mut lines = Vec::new();
        for n in 0..MAX_GROUPS + 100 {
            lines.extend(repeats.take(denied(&format!("h{n}.example"), 0)));
        }
        lines.extend(repeats.drain());
        let total: u64 = lines.iter().map(|r| r.connections.unwrap_or(1)).sum();
        assert_eq!(total, (MAX_GROUPS + 100) as u64);
        // The first lines of the others still name their hosts; the sums do not.
        let summed: u64 = lines
            .iter()
            .filter(|r| r.host == OTHERS && r.port == 0)
            .map(|r| r.connections.unwrap())
            .sum();
        assert_eq!(summed, 100 - DETAIL_LINES);
        assert_eq!(lines.len(), MAX_GROUPS + DETAIL_LINES as usize + 4);
    }
}
