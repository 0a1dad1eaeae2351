//! `repo_overview` for the Task Builder: the repository's top-level entries and the
//! head of its README, at most 2 KiB. The repository may have been written by an
//! untrusted worker (SPEC §9): entries are listed without following symlinks, and
//! the README is read only if it is a regular file, through `fs::read`.

use std::path::Path;

use agent_runner_core::text::{cut, escape_controls};

/// Largest overview.
pub(crate) const MAX_OVERVIEW: usize = 2 * 1024;
const MAX_ENTRIES: usize = 60;
const README_HEAD: u64 = 1200;
const README_NAMES: [&str; 6] = [
    "README.md",
    "README",
    "README.txt",
    "README.rst",
    "readme.md",
    "Readme.md",
];

/// The overview of the repository at `root` (a trusted, canonical directory).
pub(crate) fn repo_overview(root: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(root)
        .map(|read| {
            read.flatten()
                .filter_map(|entry| {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if name == ".git" || name == ".agent-runner" {
                        return None;
                    }
                    // file_type() does not follow symlinks.
                    let kind = entry.file_type().ok()?;
                    let mark = if kind.is_symlink() {
                        "@"
                    } else if kind.is_dir() {
                        "/"
                    } else {
                        ""
                    };
                    Some(format!("{}{mark}", escape_controls(&name)))
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let total = names.len();
    names.truncate(MAX_ENTRIES);
    let mut text = if total == 0 {
        "top-level entries: (none)\n".to_string()
    } else {
        let more = if total > MAX_ENTRIES {
            format!(", … ({total} in all)")
        } else {
            String::new()
        };
        format!("top-level entries: {}{more}\n", names.join(", "))
    };
    for name in README_NAMES {
        if let Some(bytes) = agent_runner_core::fs::read::head(&root.join(name), README_HEAD) {
            let head = String::from_utf8_lossy(&bytes);
            text.push_str(&format!("{name} (head):\n{}\n", head.trim_end()));
            break;
        }
    }
    cut(
        &text,
        MAX_OVERVIEW - agent_runner_core::text::ELLIPSIS.len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_entries_and_the_readme_head_within_2_kib() {
        let dir =
            std::env::temp_dir().join(format!("ar-overview-{}", crate::store::id::random_hex(8)));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(
            dir.join("README.md"),
            format!("# Demo\n\nA demo.\n{}", "x".repeat(5000)),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc", dir.join("etc-link")).unwrap();
        let overview = repo_overview(&dir);
        assert!(overview.starts_with("top-level entries: README.md, etc-link@, src/\nREADME.md (head):\n# Demo\n\nA demo.\n"), "{overview}");
        assert!(overview.len() <= MAX_OVERVIEW);
        assert!(!overview.contains(".git"));
        // A README that is a symlink out of the repo is not read.
        std::fs::remove_file(dir.join("README.md")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("README.md")).unwrap();
        let overview = repo_overview(&dir);
        assert!(!overview.contains("root:"), "{overview}");
        for n in 0..100 {
            std::fs::write(dir.join(format!("file-{n:03}-{}", "y".repeat(40))), "").unwrap();
        }
        assert!(repo_overview(&dir).len() <= MAX_OVERVIEW);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
