//! What the worker changed where the image has no git (SPEC §21, git-free
//! snapshots): the static helper of the tools volume lists the repository's files
//! (`helper snapshot`, `backend/helper/snapshot.c`: path, size, content hash; `.git`
//! and `.agent-runner` skipped) before and after each run, through the envelope;
//! this module reads its lists and compares them. The lists' digests decide the
//! no-progress stop (SPEC §15) as git's status does with git.

use std::collections::BTreeMap;

/// Lines of changes kept per run.
const MAX_CHANGES: usize = 200;

/// One listing of the repository's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileList {
    /// Path → (content hash, size), for the files listed.
    entries: BTreeMap<String, (String, i64)>,
    /// Files in the repository (the list may be cut).
    count: u64,
    /// The helper's digest of every file, listed or not.
    digest: String,
}

impl FileList {
    /// The helper's output (after the envelope's `files` line and before its
    /// `exit N`); None when it is incomplete (no `total` line).
    pub(crate) fn parse(output: &str) -> Option<FileList> {
        let mut entries = BTreeMap::new();
        let mut total = None;
        for line in output.lines() {
            if let Some(rest) = line.strip_prefix("total ") {
                let (count, digest) = rest.split_once(' ')?;
                total = Some((count.parse().ok()?, digest.to_string()));
                continue;
            }
            let mut fields = line.splitn(3, ' ');
            let (Some(hash), Some(size), Some(path)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let Ok(size) = size.parse() else { continue };
            entries.insert(unescape(path), (hash.to_string(), size));
        }
        let (count, digest) = total?;
        Some(FileList {
            entries,
            count,
            digest,
        })
    }

    /// What decides whether two listings are of the same repository: every file's
    /// path, size and content, through the helper's digest.
    pub(crate) fn digest(&self) -> &str {
        &self.digest
    }

    fn cut(&self) -> bool {
        self.count > self.entries.len() as u64
    }
}

/// The paths that differ between two listings, git-status style: `A ` added, ` M`
/// modified, ` D` deleted.
pub(crate) fn changes(before: &FileList, after: &FileList) -> Vec<String> {
    let mut out = Vec::new();
    for (path, entry) in &after.entries {
        match before.entries.get(path) {
            None if !before.cut() => out.push(format!("A  {path}")),
            Some(was) if was != entry => out.push(format!(" M {path}")),
            _ => {}
        }
    }
    if !after.cut() {
        for path in before.entries.keys() {
            if !after.entries.contains_key(path) {
                out.push(format!(" D {path}"));
            }
        }
    }
    out.truncate(MAX_CHANGES);
    if before.cut() || after.cut() {
        out.push(format!(
            "(the repository has {} files: only the first listed are compared, the digest covers all)",
            after.count
        ));
    }
    out
}

/// Undoes the helper's escapes (`\\`, `\n`, `\r`).
fn unescape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "aaaa 3 a.txt\nbbbb 5 dir/b\\nc\ncccc 1 gone\ntotal 3 1111\n";
    const AFTER: &str = "aaaa 3 a.txt\nbbbc 6 dir/b\\nc\ndddd 2 new\ntotal 3 2222\n";

    #[test]
    fn listings_compare_by_path_and_content() {
        let before = FileList::parse(BEFORE).unwrap();
        let after = FileList::parse(AFTER).unwrap();
        assert_eq!(
            changes(&before, &after),
            [" M dir/b\nc", "A  new", " D gone"]
        );
        assert_eq!(changes(&before, &before), Vec::<String>::new());
        assert_ne!(before.digest(), after.digest());
    }

    #[test]
    fn a_listing_without_its_total_is_not_believed() {
        assert_eq!(FileList::parse("aaaa 3 a.txt\n"), None);
        assert_eq!(FileList::parse("total x y\n"), None);
    }

    #[test]
    fn a_cut_listing_says_so_and_claims_no_deletions() {
        let before = FileList::parse("aaaa 3 a\ntotal 5 1\n").unwrap();
        let after = FileList::parse("aaab 3 a\ntotal 5 2\n").unwrap();
        let lines = changes(&before, &after);
        assert_eq!(lines[0], " M a");
        assert!(lines[1].contains("5 files"), "{lines:?}");
        assert_eq!(lines.len(), 2);
    }
}
