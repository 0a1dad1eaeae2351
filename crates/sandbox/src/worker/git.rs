//! What the worker changed, as git in the container reports it: `git status
//! --porcelain=v2 --branch` before and after each run, and `git diff --numstat`
//! against the HEAD before it. The envelope (`envelope.rs`) runs git; this module
//! only reads its output. No git ever runs on the host on the worker's repo.

/// Status lines kept per snapshot.
const MAX_STATUS_LINES: usize = 200;

/// The repository's state at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitState {
    /// None in a repository without commits.
    pub head: Option<String>,
    /// One line per changed path, `XY path` as in `git status --short`; our own
    /// `.agent-runner/` left out.
    pub status: Vec<String>,
    /// Status lines beyond `MAX_STATUS_LINES`, not kept.
    pub more: usize,
}

/// `git status` as the envelope saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Snapshot {
    /// The image has no git.
    NoGit,
    /// git ran but the repository is not a git work tree (or git failed).
    NotARepository,
    State(GitState),
    /// No git, but the tools volume's helper listed the files (`files.rs`).
    Files(super::files::FileList),
    /// No git, and the helper's listing failed or was cut short.
    Unlisted,
}

impl Snapshot {
    /// The envelope's record of `git status`: its output and `exit N`, or `nogit`.
    pub(crate) fn parse(body: &str) -> Snapshot {
        if body.trim() == "nogit" {
            return Snapshot::NoGit;
        }
        if let Some(listing) = body.strip_prefix("files\n") {
            let (listing, last) = listing
                .trim_end()
                .rsplit_once('\n')
                .unwrap_or(("", listing.trim_end()));
            return match (last, super::files::FileList::parse(listing)) {
                ("exit 0", Some(list)) => Snapshot::Files(list),
                _ => Snapshot::Unlisted,
            };
        }
        let (status, last) = match body.trim_end().rsplit_once('\n') {
            Some((status, last)) => (status, last),
            None => ("", body.trim_end()),
        };
        match last.strip_prefix("exit ") {
            Some("0") => Snapshot::State(parse_status(status)),
            _ => Snapshot::NotARepository,
        }
    }

    /// HEAD, when a state with commits.
    pub(crate) fn head(&self) -> Option<&str> {
        match self {
            Snapshot::State(state) => state.head.as_deref(),
            _ => None,
        }
    }
}

/// Parses `git status --porcelain=v2 --branch` output.
pub(crate) fn parse_status(output: &str) -> GitState {
    let mut head = None;
    let mut lines = Vec::new();
    for line in output.lines() {
        let fields: Vec<&str> = line.splitn(2, ' ').collect();
        let entry = match fields[..] {
            ["#", rest] => {
                if let Some(oid) = rest.strip_prefix("branch.oid ") {
                    head = (oid != "(initial)").then(|| oid.to_string());
                }
                continue;
            }
            // Ordinary change: 1 XY sub mH mI mW hH hI path
            ["1", rest] => rest
                .splitn(8, ' ')
                .collect::<Vec<_>>()
                .get(7)
                .map(|path| (xy(rest), path.to_string())),
            // Rename or copy: 2 XY sub mH mI mW hH hI Xscore path<TAB>orig
            ["2", rest] => rest.splitn(9, ' ').collect::<Vec<_>>().get(8).map(|paths| {
                let (path, orig) = paths.split_once('\t').unwrap_or((paths, ""));
                (xy(rest), format!("{path} (from {orig})"))
            }),
            // Unmerged: u XY sub m1 m2 m3 mW h1 h2 h3 path
            ["u", rest] => rest
                .splitn(10, ' ')
                .collect::<Vec<_>>()
                .get(9)
                .map(|path| (xy(rest), path.to_string())),
            ["?", path] => Some(("??".to_string(), path.to_string())),
            _ => None,
        };
        if let Some((xy, path)) = entry
            && !path.starts_with(".agent-runner/")
        {
            lines.push(format!("{xy} {path}"));
        }
    }
    GitState {
        head,
        more: lines.len().saturating_sub(MAX_STATUS_LINES),
        status: lines.into_iter().take(MAX_STATUS_LINES).collect(),
    }
}

/// The `XY` status of a v2 entry, with `.` (unchanged) shown as a space.
fn xy(rest: &str) -> String {
    rest.chars()
        .take(2)
        .map(|c| if c == '.' { ' ' } else { c })
        .collect()
}

/// Paths whose status differs between two snapshots, with the status after
/// (`clean` when a path's change went away).
pub(crate) fn changes(before: &GitState, after: &GitState) -> Vec<String> {
    let path = |line: &str| line.get(3..).unwrap_or(line).to_string();
    let mut out: Vec<String> = after
        .status
        .iter()
        .filter(|l| !before.status.contains(l))
        .cloned()
        .collect();
    for line in &before.status {
        let p = path(line);
        if !after.status.iter().any(|l| path(l) == p) {
            out.push(format!("clean {p}"));
        }
    }
    out
}

/// What a worker run changed in the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepoChanges {
    /// git in the container saw the repository before and after the run.
    Seen {
        before: GitState,
        after: GitState,
        /// Against the HEAD before the run; empty when no tracked file changed.
        diff: Vec<DiffStat>,
    },
    /// The image has no git, but the tools volume's helper listed the repository's
    /// files before and after the run (SPEC §21).
    Files {
        /// The helper's digests of the repository before and after.
        before: String,
        after: String,
        /// The paths that changed, git-status style (`A `, ` M`, ` D`).
        changed: Vec<String>,
    },
    /// The image has no git: only what codex itself reported.
    NoGit,
    /// The repository is not a git work tree.
    NotARepository,
    /// No snapshot after the run (it was interrupted, or the container went).
    Unknown,
}

impl RepoChanges {
    /// From the envelope's snapshots.
    pub(crate) fn from_snapshots(
        before: Option<Snapshot>,
        after: Option<Snapshot>,
        diff: Option<Vec<DiffStat>>,
    ) -> Self {
        match (before, after) {
            (Some(Snapshot::State(before)), Some(Snapshot::State(after))) => RepoChanges::Seen {
                before,
                after,
                diff: diff.unwrap_or_default(),
            },
            (Some(Snapshot::Files(before)), Some(Snapshot::Files(after))) => RepoChanges::Files {
                changed: super::files::changes(&before, &after),
                before: before.digest().to_string(),
                after: after.digest().to_string(),
            },
            (Some(Snapshot::NoGit), _) | (_, Some(Snapshot::NoGit)) => RepoChanges::NoGit,
            (Some(Snapshot::NotARepository), _) | (_, Some(Snapshot::NotARepository)) => {
                RepoChanges::NotARepository
            }
            _ => RepoChanges::Unknown,
        }
    }

    /// Changed paths, each with its status after the run (git's view), for the note
    /// and for Meta. Without git: codex's own `file_change` reports.
    pub fn lines(&self, reported: &[agent_runner_settings::agent::FileChange]) -> Vec<String> {
        match self {
            RepoChanges::Seen { before, after, .. } => changes(before, after),
            RepoChanges::Files { changed, .. } => changed.clone(),
            _ => reported
                .iter()
                .map(|f| format!("{} {}", f.kind, f.path))
                .collect(),
        }
    }
}

/// One line of `git diff --numstat`: lines added and deleted (None for binary files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffStat {
    pub added: Option<u64>,
    pub deleted: Option<u64>,
    pub path: String,
}

/// Parses `git diff --numstat` output; `.agent-runner/` left out.
pub(crate) fn parse_numstat(output: &str) -> Vec<DiffStat> {
    output
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            let (added, deleted, path) = (fields.next()?, fields.next()?, fields.next()?);
            (!path.starts_with(".agent-runner/")).then(|| DiffStat {
                added: added.parse().ok(),
                deleted: deleted.parse().ok(),
                path: path.to_string(),
            })
        })
        .take(MAX_STATUS_LINES)
        .collect()
}

/// Parses `wc -l` over the untracked files (named `./path`) into diff stats of new
/// files (lines added, none deleted); `.agent-runner/` left out. wc's totals (one per
/// batch xargs made) are the lines whose name has no `./`.
pub(crate) fn parse_untracked(output: &str) -> Vec<DiffStat> {
    output
        .lines()
        .filter_map(|line| {
            let (count, path) = line.trim_start().split_once(' ')?;
            let path = path.strip_prefix("./")?;
            (!path.starts_with(".agent-runner/")).then(|| DiffStat {
                added: count.parse().ok(),
                deleted: Some(0),
                path: path.to_string(),
            })
        })
        .take(MAX_STATUS_LINES)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untracked_files_count_as_new_lines() {
        let new = |n: u64, path: &str| DiffStat {
            added: Some(n),
            deleted: Some(0),
            path: path.into(),
        };
        assert_eq!(parse_untracked("      3 ./a b.txt\n"), [new(3, "a b.txt")]);
        // A file called total is one; the totals of two batches are not.
        assert_eq!(
            parse_untracked("  3 ./a.txt\n  0 ./total\n  3 total\n  7 ./b\n  7 total\n"),
            [new(3, "a.txt"), new(0, "total"), new(7, "b")]
        );
        assert_eq!(parse_untracked("  1 ./.agent-runner/x\n"), []);
        assert_eq!(parse_untracked(""), []);
    }

    fn state(lines: &[&str]) -> GitState {
        GitState {
            head: None,
            status: lines.iter().map(|s| s.to_string()).collect(),
            more: 0,
        }
    }

    #[test]
    fn changes_lists_new_and_cleaned_paths() {
        let before = state(&[" M a.rs", "?? old.txt"]);
        let after = state(&[" M a.rs", "?? new.txt", "M  b.rs"]);
        assert_eq!(
            changes(&before, &after),
            ["?? new.txt", "M  b.rs", "clean old.txt"]
        );
    }

    #[test]
    fn parses_porcelain_v2() {
        let output = "# branch.oid 1234abcd\n# branch.head main\n\
                      1 .M N... 100644 100644 100644 aaa bbb src/main.rs\n\
                      1 A. N... 000000 100644 100644 000 ccc new file.rs\n\
                      2 R. N... 100644 100644 100644 aaa aaa R100 b.rs\ta.rs\n\
                      u UU N... 100644 100644 100644 100644 a b c conflict.rs\n\
                      ? .agent-runner/task-x.md\n? untracked.txt";
        assert_eq!(
            parse_status(output),
            GitState {
                head: Some("1234abcd".into()),
                status: vec![
                    " M src/main.rs".into(),
                    "A  new file.rs".into(),
                    "R  b.rs (from a.rs)".into(),
                    "UU conflict.rs".into(),
                    "?? untracked.txt".into()
                ],
                more: 0,
            }
        );
        assert_eq!(parse_status("# branch.oid (initial)\n").head, None);
    }

    #[test]
    fn snapshots_say_why_there_is_no_state() {
        assert_eq!(Snapshot::parse("nogit\n"), Snapshot::NoGit);
        assert_eq!(Snapshot::parse("exit 128\n"), Snapshot::NotARepository);
        assert_eq!(
            Snapshot::parse("# branch.oid (initial)\nexit 0\n"),
            Snapshot::State(GitState::default())
        );
    }

    #[test]
    fn numstat_lines_and_binary_files() {
        assert_eq!(
            parse_numstat("3\t1\tsrc/a.rs\n-\t-\timg.png\n1\t0\t.agent-runner/x\n"),
            [
                DiffStat {
                    added: Some(3),
                    deleted: Some(1),
                    path: "src/a.rs".into()
                },
                DiffStat {
                    added: None,
                    deleted: None,
                    path: "img.png".into()
                },
            ]
        );
    }
}
