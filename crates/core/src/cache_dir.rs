//! Where agent-runner keeps what it may forget: `$XDG_CACHE_HOME/agent-runner/`,
//! else `~/.cache/agent-runner/` (the XDG base directory rule). Everything kept
//! there can be computed again; a lost or unreadable cache costs time only.

use std::path::PathBuf;

/// The cache directory for one kind of kept thing (`agents`, `clusters`); None when
/// neither `XDG_CACHE_HOME` nor `HOME` is set (nothing is kept then).
pub fn for_kind(kind: &str) -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let base = match (var("XDG_CACHE_HOME"), var("HOME")) {
        (Some(cache), _) => PathBuf::from(cache),
        (None, Some(home)) => PathBuf::from(home).join(".cache"),
        (None, None) => return None,
    };
    Some(base.join("agent-runner").join(kind))
}
