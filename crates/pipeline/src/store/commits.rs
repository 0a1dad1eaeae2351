//! Which plan lines count: the commit record of the plan (SPEC §13).
//!
//! A plan edit writes task lines first and `wbs.json` last; the rename of the new
//! `wbs.json` is its commit (see `apply` for the whole protocol). Every line an edit
//! writes carries a stamp, `"plan_patch": <edit id>, "plan_revision": <n>`, and
//! `wbs.json` carries the plan's `revision` and the ids of edits that never committed
//! (`aborted`). A stamped line counts only when its revision is at most the plan's
//! and its edit is not aborted; unstamped lines (`task new`, attempts) always count.
//! So whatever an edit wrote before a crash stays invisible, before and after later
//! edits: the next edit finds those lines and records their edit as aborted in the
//! same rename that commits it.

use std::collections::HashSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Largest `wbs.json` read (here and by `plan::wbs`).
pub(crate) const MAX_WBS_FILE: u64 = 64 << 20;

/// The stamp on a line written by a plan edit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stamp {
    pub(crate) plan_patch: String,
    pub(crate) plan_revision: u64,
}

/// A line's stamp fields as read: absent, or (if another writer got them wrong) partial.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ReadStamp {
    #[serde(default)]
    pub(crate) plan_patch: Option<String>,
    #[serde(default)]
    pub(crate) plan_revision: Option<u64>,
}

/// The commit record: which stamped lines count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Commits {
    /// The plan's revision: the number of edits committed.
    pub(crate) revision: u64,
    /// Edits that wrote lines and never committed.
    pub(crate) aborted: HashSet<String>,
    /// `wbs.json` could not be read: count every line rather than hide every planned task.
    pub(crate) unknown: bool,
}

/// The commit fields of `wbs.json`; its nodes are skipped unparsed.
#[derive(Deserialize)]
struct CommitFields {
    #[serde(default)]
    revision: u64,
    #[serde(default)]
    aborted: Vec<String>,
}

impl Commits {
    /// No edit committed yet (no `wbs.json`).
    pub(crate) fn none() -> Commits {
        Commits {
            revision: 0,
            aborted: HashSet::new(),
            unknown: false,
        }
    }

    /// The commit record in `wbs.json` at `path`. A missing file is no plan; an
    /// unreadable one is warned about, and then every line counts.
    pub(crate) fn read(path: &Path) -> Commits {
        let bytes = match agent_runner_core::fs::read::whole(path, MAX_WBS_FILE) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Commits::none(),
            Err(e) => return Commits::unreadable(path, &e.to_string()),
        };
        match serde_json::from_slice::<CommitFields>(&bytes) {
            Ok(fields) => Commits {
                revision: fields.revision,
                aborted: fields.aborted.into_iter().collect(),
                unknown: false,
            },
            Err(e) => Commits::unreadable(path, &e.to_string()),
        }
    }

    fn unreadable(path: &Path, error: &str) -> Commits {
        log::warn!(
            "{}: unreadable ({error}); every plan line is taken as committed",
            path.display()
        );
        Commits {
            revision: u64::MAX,
            aborted: HashSet::new(),
            unknown: true,
        }
    }

    /// Whether a line with these stamp fields counts.
    pub(crate) fn counts(&self, stamp: &ReadStamp) -> bool {
        match (&stamp.plan_patch, stamp.plan_revision) {
            (None, None) => true,
            (Some(patch), Some(revision)) => {
                revision <= self.revision && !self.aborted.contains(patch)
            }
            // Half a stamp is no writer of ours: not a committed plan line.
            _ => self.unknown,
        }
    }

    /// The stamp fields of a JSON line, parsed only when the line may have some.
    pub(crate) fn stamp_of(line: &[u8]) -> ReadStamp {
        if !contains(line, b"\"plan_") {
            return ReadStamp::default();
        }
        // A stamp of the wrong shape is no writer of ours: half a stamp, not counted.
        serde_json::from_slice(line).unwrap_or(ReadStamp {
            plan_patch: None,
            plan_revision: Some(u64::MAX),
        })
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(patch: &str, revision: u64) -> ReadStamp {
        ReadStamp {
            plan_patch: Some(patch.into()),
            plan_revision: Some(revision),
        }
    }

    #[test]
    fn stamped_lines_count_once_committed_and_never_when_aborted() {
        let commits = Commits {
            revision: 3,
            aborted: ["p-dead".to_string()].into(),
            unknown: false,
        };
        assert!(commits.counts(&ReadStamp::default()), "unstamped");
        assert!(commits.counts(&stamp("p-a", 3)));
        assert!(commits.counts(&stamp("p-b", 1)));
        assert!(!commits.counts(&stamp("p-c", 4)), "not committed yet");
        assert!(!commits.counts(&stamp("p-dead", 2)), "aborted");
        let half = ReadStamp {
            plan_patch: Some("p-a".into()),
            plan_revision: None,
        };
        assert!(!commits.counts(&half));
        assert!(!Commits::none().counts(&stamp("p-a", 1)));
    }

    #[test]
    fn the_record_is_read_from_wbs_json() {
        let dir =
            std::env::temp_dir().join(format!("ar-commit-{}", crate::store::id::random_hex(8)));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("wbs.json");
        assert_eq!(Commits::read(&path), Commits::none());
        std::fs::write(
            &path,
            r#"{"root_node_id":"node-root","nodes":{"node-root":{"title":"Plan","parent":null,"children":[]}},"revision":7,"aborted":["p-x"]}"#,
        )
        .unwrap();
        let commits = Commits::read(&path);
        assert_eq!((commits.revision, commits.unknown), (7, false));
        assert!(commits.aborted.contains("p-x"));
        std::fs::write(&path, "{").unwrap();
        let commits = Commits::read(&path);
        assert!(commits.unknown && commits.counts(&stamp("p-x", 9)));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn stamps_are_parsed_only_from_lines_that_may_have_them() {
        let s = Commits::stamp_of(
            br#"{"type":"update","at":"x","plan_patch":"p-1","plan_revision":2}"#,
        );
        assert_eq!(
            (s.plan_patch.as_deref(), s.plan_revision),
            (Some("p-1"), Some(2))
        );
        let s = Commits::stamp_of(br#"{"type":"update","at":"x","title":"a"}"#);
        assert!(s.plan_patch.is_none() && s.plan_revision.is_none());
    }
}
