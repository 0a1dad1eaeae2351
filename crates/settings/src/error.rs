//! The worker side's error type outside the sandbox itself (whose `SandboxError` is
//! `worker`'s): a `runner.worker.allow` entry or a requested host that is not one,
//! and files the Task YAML names that cannot be read as they must. Each variant
//! carries what its message needs; the Task YAML reader puts the message under the
//! field it concerns (`task::InputError`).

use std::path::PathBuf;

/// What is wrong with an allow entry, a host, or a file the task names.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("an empty entry")]
    EmptyEntry,
    /// An allow entry written as a URL.
    #[error("{0:?} is not a host name: write the host (and port), not a URL")]
    Url(String),
    #[error("`*.{0}` would allow a whole top-level domain; name a domain (e.g. *.example.com)")]
    WholeTopLevelDomain(String),
    #[error(
        "`*` may only start an entry, as in *.example.com (to allow every host, use network: bridge)"
    )]
    MisplacedStar,
    #[error("{0:?} is not an IPv6 address")]
    NotIpv6(String),
    #[error("{0:?} is not a port (1 to 65535, or * for any)")]
    NotAPort(String),
    /// Empty or too long to be a name.
    #[error("{0:?} is not a host name")]
    NoHostName(String),
    /// Not labels of a DNS name (or an address in disguise).
    #[error(
        "{0:?} is not a host name (letters, digits, - and _ in dot-separated labels) or an IP address"
    )]
    NotAHostName(String),
    /// A relative path, and no current directory to resolve it against.
    #[error(
        "the relative path {path:?} needs the current directory, which is not available ({why})"
    )]
    NoCurrentDir { path: String, why: String },
    /// A file that cannot be read.
    #[error("{0}")]
    Read(std::io::Error),
    /// A directory, FIFO, device or socket where a file should be.
    #[error("not a regular file")]
    NotAFile,
    /// Larger than allowed: its size.
    #[error("{0} bytes")]
    TooLarge(u64),
    /// A file in the repository whose path cannot be checked.
    #[error("cannot be checked: {0}")]
    Uncheckable(String),
    /// A file in the repository that was swapped while it was opened.
    #[error("changed while it was read (opened {})", .0.display())]
    ChangedWhileRead(PathBuf),
    /// A path into the repository that leaves it through a link.
    #[error("leaves the repository through the symlink {}", .0.display())]
    LeavesRepo(PathBuf),
}
