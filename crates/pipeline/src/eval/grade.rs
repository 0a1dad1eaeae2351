//! A grading: an attempt's files (a tar of its commit, from the eval's repository)
//! and the grader's files copied into a fresh sandbox with no network, then the
//! grader's command there; its exit code decides. The sandbox is started through
//! the sandbox crate's backend (owner labels: the sweep removes it if we die), fed
//! over `docker exec`'s stdin (nothing of this machine is mounted, so any host
//! works), and removed at once. The worker never had the grader's files: they go
//! from the suite's directory straight into this sandbox.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::EvalError;
use super::suite::Grader;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;
use agent_runner_core::process::{Capture, Ending, Limits, Stop};
use agent_runner_sandbox::backend::sweep::{LABEL_TASK, owner_labels};
use agent_runner_sandbox::backend::{
    Backend, BackendError, Confinement, Exec, Main, Net, Ready, Spec, TarWriter,
};

/// Where the files are in the grader's sandbox.
pub const GRADE_DIR: &str = "/tmp/agent-runner-grade";
const READY: &str = "agent-runner-grader-ready";
/// Time allowed for the sandbox to start and for each copy into it.
const START: Duration = Duration::from_secs(120);
/// The grader's output kept for the results (its end).
const TAIL: usize = 4096;

/// What the grader said.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Graded {
    /// Exit 0 within the time.
    pub passed: bool,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// The end of its output.
    pub tail: String,
    pub duration_ms: u64,
}

/// Why there is no verdict: the engine's or a copy's failure, here or on the
/// grading's host (`grade_on_host`), never the grader's own.
#[derive(Debug, thiserror::Error)]
pub enum GradeError {
    /// The attempt's commit not read out of the eval's repository (`eval run`).
    #[error(transparent)]
    Commit(EvalError),
    #[error("cannot read {}: {source}", .path.display())]
    Archive {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the grader's files {}: {source}", .path.display())]
    GraderFiles {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot pack the grader's files: {0}")]
    Pack(std::io::Error),
    #[error("cannot start the grader's sandbox ({image}): {source}")]
    Start { image: String, source: BackendError },
    /// An exec in the grader's sandbox failed in the engine.
    #[error(transparent)]
    Exec(#[from] BackendError),
    /// `what`: the attempt's or the grader's files; the end of tar's output.
    #[error("cannot copy {what} into the grader's sandbox: {tail}")]
    CopyIn { what: &'static str, tail: String },
    #[error("interrupted")]
    Interrupted,
    /// The request for the grading's host could not be written.
    #[error(transparent)]
    Request(#[from] serde_json::Error),
    #[error("cannot run {} eval grade: {source}", .exe.display())]
    Child {
        exe: PathBuf,
        source: agent_runner_core::Error,
    },
    /// The grading's host answered with why it has no verdict (its words).
    #[error("{0}")]
    OnHost(String),
    /// `exit`: its exit code in words; `stderr`: its end.
    #[error("the grading on {target} gave no answer ({exit}): {stderr}")]
    NoAnswer {
        target: String,
        exit: String,
        stderr: String,
    },
}

/// Runs `grader` on the files of `archive` (a tar) in a fresh sandbox of
/// `grader.image`; `label` names it (`agent-runner.task`). An error is the
/// engine's or a copy's failure, never the grader's verdict.
pub(crate) fn grade(
    backend: &dyn Backend,
    archive: &Path,
    grader: &Grader,
    label: &str,
    interrupt: Interrupt,
) -> Result<Graded, GradeError> {
    let files = std::fs::read(archive).map_err(|source| GradeError::Archive {
        path: archive.to_path_buf(),
        source,
    })?;
    let mut tar = TarWriter::new(Vec::new());
    tar.tree(&grader.files, "", &[])
        .map_err(|source| GradeError::GraderFiles {
            path: grader.files.clone(),
            source,
        })?;
    let grader_files = tar.finish().map_err(GradeError::Pack)?;
    let mut spec = Spec::new(
        &grader.image,
        Main::shell(&format!("echo {READY}; while read -r _; do :; done"), []),
    );
    spec.name = Some(format!(
        "agent-runner-grade-{}",
        uuid::Uuid::new_v4().simple()
    ));
    spec.labels = vec![(LABEL_TASK.to_string(), format!("eval-grade-{label}"))];
    spec.labels.extend(
        owner_labels(&Owner::this_process())
            .into_iter()
            .map(|(label, value)| (label.to_string(), value)),
    );
    spec.held = true;
    spec.network = Net::Isolated;
    spec.confinement = Some(Confinement { keep: &[] });
    spec.as_user = true;
    spec.ready = Some(Ready {
        prefix: READY,
        within: START,
        interrupt,
    });
    let started = backend.start(&spec).map_err(|source| GradeError::Start {
        image: grader.image.clone(),
        source,
    })?;
    let instance = started.instance;
    let run = |command: Vec<String>, stdin: Vec<u8>, wall: Duration| {
        let mut capture = Capture::in_memory(TAIL);
        let exec = Exec {
            workdir: None,
            env: Vec::new(),
            command,
            stdin,
            stdin_file: None,
        };
        instance
            .exec(
                exec,
                &Limits::wall(wall, interrupt),
                &mut capture,
                Stop::Terminate,
            )
            .map(|finished| (finished, capture.tail()))
            .map_err(GradeError::Exec)
    };
    let unpack = format!("mkdir -p {GRADE_DIR} && tar -x -f - -C {GRADE_DIR}");
    let shell = |script: &str| vec!["/bin/sh".to_string(), "-c".to_string(), script.to_string()];
    let result = (|| {
        for (what, bytes) in [
            ("the attempt's files", files),
            ("the grader's files", grader_files),
        ] {
            let (finished, tail) = run(shell(&unpack), bytes, START)?;
            if !finished.success() {
                return Err(GradeError::CopyIn {
                    what,
                    tail: tail.trim().to_string(),
                });
            }
        }
        let clock = Instant::now();
        let command = format!("cd {GRADE_DIR} && {}", grader.command);
        let (finished, tail) = run(
            shell(&command),
            Vec::new(),
            Duration::from_secs(grader.timeout_sec),
        )?;
        if finished.ending == Ending::Interrupted {
            return Err(GradeError::Interrupted);
        }
        let timed_out = finished.ending == Ending::TimedOut;
        Ok(Graded {
            passed: !timed_out && finished.success(),
            exit_code: finished.code(),
            timed_out,
            tail,
            duration_ms: clock.elapsed().as_millis() as u64,
        })
    })();
    instance.remove(Duration::from_secs(10));
    result
}
