//! The leaves' one error type: each variant carries what its message needs (the
//! program, the pid, the task id, the line and column).

use crate::yaml::Refusal;

/// What went wrong in a leaf.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A child could not be started at all (`process`).
    #[error("cannot run `{program}`: {reason}")]
    Spawn { program: String, reason: String },
    /// A program named without a slash is on no absolute directory of `PATH`
    /// (`process::program`).
    #[error("not found on PATH (only its absolute directories are searched)")]
    NotOnPath,
    /// `Owner::terminate`: the owner runs on another host or boot.
    #[error("process {pid} runs on {host} (boot {boot_id}), not here")]
    OwnerElsewhere {
        pid: u32,
        host: String,
        boot_id: String,
    },
    /// `Owner::terminate`: the owner is in another PID namespace.
    #[error("process {pid} is in PID namespace {theirs}, not this one ({ours})")]
    OtherPidNamespace {
        pid: u32,
        theirs: String,
        ours: String,
    },
    /// No signal sent: the process has ended.
    #[error("process {0} has ended")]
    ProcessGone(u32),
    /// No signal sent: the pid belongs to another process now.
    #[error("process {pid} is another process now (it started at {now}, not {expected})")]
    PidReused {
        pid: u32,
        expected: String,
        now: String,
    },
    /// The signal could not be sent.
    #[error("cannot signal process {pid}: {error}")]
    SignalFailed { pid: u32, error: String },
    /// Another run of the task holds its lock (`task_lock`).
    #[error(
        "task {task_id} is already running in this repository ({holder}); wait for it to end or use another task id"
    )]
    TaskRunning { task_id: String, holder: String },
    /// The task's lock could not be taken.
    #[error("cannot lock task {task_id}: {source}")]
    TaskLock {
        task_id: String,
        source: std::io::Error,
    },
    /// A YAML text refused before it was parsed (`yaml`).
    #[error("{0}")]
    YamlRefused(Refusal),
    /// A YAML text that does not parse.
    #[error("{0}")]
    Yaml(#[from] serde_norway::Error),
}
