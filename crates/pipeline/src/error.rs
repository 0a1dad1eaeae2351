//! The pipeline's one error type: what was wrong and where (the file, the id, the
//! git command and its stderr), each variant with what its message needs. Failures
//! *inside* an attempt are not errors here: they end the attempt failed and are
//! recorded in the TaskStore and the result file.

use std::path::PathBuf;

/// A pipeline command's failure, with the file, id or command it concerns.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A file operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file operation whose file the message has already named.
    #[error("{0}")]
    Fs(std::io::Error),
    /// A JSON file that does not read.
    #[error("{}: {source}", path.display())]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A value that does not encode as JSON.
    #[error("{0}")]
    Encode(serde_json::Error),
    /// A leaf failed (a program that cannot start, a process that cannot be
    /// signalled).
    #[error(transparent)]
    Core(#[from] agent_runner_core::Error),
    /// Something the user gave (an id, a defaults file, a prompt) is not valid.
    #[error("{0}")]
    Invalid(String),
    /// No task file for the id.
    #[error("task {id} not found in workspace {workspace} ({})", path.display())]
    TaskNotFound {
        id: String,
        workspace: String,
        path: PathBuf,
    },
    /// `task new --id` with an id already taken.
    #[error("task {0} already exists; choose another --id")]
    TaskExists(String),
    /// Stopped by SIGINT/SIGTERM.
    #[error("interrupted")]
    Interrupted,

    // Host git, on repositories of ours (`clones::git`).
    #[error("`{command}` timed out")]
    GitTimedOut { command: String },
    #[error("`{command}` failed: {stderr}")]
    GitFailed { command: String, stderr: String },

    // root_dir's repository, read as files (`clones::root_repo`).
    #[error("{}: not a git work tree's top ({source})", root.display())]
    NotAWorkTree {
        root: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a `gitdir:` file", .0.display())]
    NotAGitdirFile(PathBuf),
    #[error("{} names {source}", dot_git.display())]
    GitdirTarget {
        dot_git: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} exists, which a repository's own git directory never has: git would take its configuration from where it points (planted by a worker?). Remove it",
        .0.display()
    )]
    PlantedCommondir(PathBuf),
    #[error("{} has no {missing}: not a git repository", dir.display())]
    NotARepository { dir: PathBuf, missing: &'static str },
    #[error(
        "{}: its refs are kept in a reftable, which isolated attempts cannot read yet",
        .0.display()
    )]
    Reftable(PathBuf),
    #[error("HEAD names {0}, which has no commit yet")]
    UnbornHead(String),
    #[error("{} is neither a ref nor a commit", .0.display())]
    BadHead(PathBuf),
    #[error("the object store {0}")]
    ObjectStore(std::io::Error),
    #[error("{}: alternates nested too deep", .0.display())]
    AlternatesTooDeep(PathBuf),
    #[error(
        "{} is a FIFO, a socket, a device or a link; git would block on it or be led away by it. Remove it",
        .0.display()
    )]
    BlockingObject(PathBuf),
    #[error("{0:?} is not a pack name")]
    NotAPackName(String),
    #[error("{0:?} is not a ref below refs/")]
    NotARef(String),
    #[error("ref {0} holds no commit id")]
    RefWithoutCommit(String),
    #[error("ref {0}: symbolic refs nested too deep")]
    RefsTooDeep(String),
    #[error("ref {name}: {source}")]
    RefUnreadable {
        name: String,
        source: std::io::Error,
    },
    #[error("packed-refs: {0}")]
    PackedRefs(std::io::Error),
    #[error("{0:?} is not a valid branch name")]
    BadBranchName(String),

    // An attempt's clone and its branch (`clones`).
    #[error("root_dir has no commit to start from (isolated attempts start from HEAD): {0}")]
    NoStart(Box<PipelineError>),
    #[error(
        "branch {branch} is no longer in root_dir {}'s repository (merged and deleted?), and a follow-up builds on it: run the task again instead",
        root.display()
    )]
    BranchGone { branch: String, root: PathBuf },
    #[error(
        "{branch} is checked out in root_dir {}; switch to another branch so it can be updated",
        root.display()
    )]
    CheckedOutInRoot { branch: String, root: PathBuf },
    #[error(
        "{branch} is checked out in {}, a worktree of root_dir {}'s repository; switch it to another branch so it can be updated",
        place.display(),
        root.display()
    )]
    CheckedOutInWorktree {
        branch: String,
        place: PathBuf,
        root: PathBuf,
    },
    #[error("merging {branch} into the attempt's start failed: {error}")]
    MergeFailed {
        branch: String,
        error: Box<PipelineError>,
    },
    #[error("merging {branch} into the attempt's start failed: conflict in {}", files.join(", "))]
    MergeConflict { branch: String, files: Vec<String> },
    #[error("the clone of job {job_id} is not described ({}: {source})", path.display())]
    CloneNotDescribed {
        job_id: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the clone of job {job_id} ({}) is gone", dir.display())]
    CloneGone { job_id: String, dir: PathBuf },
    #[error("{}: not commit ids", .0.display())]
    NotCommitIds(PathBuf),
    /// The bundler's own account of what went wrong (`clones::bundler`).
    #[error("{0}")]
    Bundler(String),
    #[error("the bundler called the branch unchanged at {0}, which it did not start from")]
    UnchangedElsewhere(String),
    #[error("the bundle holds {refs:?}, not {wanted} at {commit}")]
    WrongBundle {
        refs: Vec<(String, String)>,
        wanted: String,
        commit: String,
    },
    /// What is wrong with a bundle's header (`landing::past_header`'s words).
    #[error("{0}")]
    BundleHeader(String),
    #[error("index-pack answered {0:?}")]
    IndexPack(String),
    #[error("the branch names a {0}, not a commit")]
    NotACommit(String),
}

impl PipelineError {
    /// The HTTP status the web view answers with: the request's fault, or ours.
    pub(crate) fn http_status(&self) -> u16 {
        match self {
            PipelineError::Invalid(_) => 400,
            PipelineError::TaskNotFound { .. } => 404,
            PipelineError::TaskExists(_) => 409,
            _ => 500,
        }
    }

    /// An `Io` error for `action` on `path`.
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| PipelineError::Io {
            action,
            path,
            source,
        }
    }
}
