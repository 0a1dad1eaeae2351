//! A grading: an attempt's files (a tar of its commit, from the eval's repository)
//! and the grader's files copied into a fresh sandbox with no network, then the
//! grader's command there; its exit code decides. The sandbox is started through
//! the sandbox crate's backend (owner labels: the sweep removes it if we die), fed
//! over `docker exec`'s stdin (nothing of this machine is mounted, so any host
//! works), and removed at once. The worker never had the grader's files: they go
//! from the suite's directory straight into this sandbox.

use std::path::Path;
use std::time::{Duration, Instant};

use super::suite::Grader;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;
use agent_runner_core::process::{Capture, Ending, Limits, Stop};
use agent_runner_sandbox::backend::sweep::{LABEL_TASK, owner_labels};
use agent_runner_sandbox::backend::{
    Backend, Confinement, Exec, Main, Net, Ready, Spec, TarWriter,
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

/// Runs `grader` on the files of `archive` (a tar) in a fresh sandbox of
/// `grader.image`; `label` names it (`agent-runner.task`). An error is the
/// engine's or a copy's failure, never the grader's verdict.
pub(crate) fn grade(
    backend: &dyn Backend,
    archive: &Path,
    grader: &Grader,
    label: &str,
    interrupt: Interrupt,
) -> Result<Graded, String> {
    let files =
        std::fs::read(archive).map_err(|e| format!("cannot read {}: {e}", archive.display()))?;
    let mut tar = TarWriter::new(Vec::new());
    tar.tree(&grader.files, "", &[]).map_err(|e| {
        format!(
            "cannot read the grader's files {}: {e}",
            grader.files.display()
        )
    })?;
    let grader_files = tar
        .finish()
        .map_err(|e| format!("cannot pack the grader's files: {e}"))?;
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
    let started = backend
        .start(&spec)
        .map_err(|e| format!("cannot start the grader's sandbox ({}): {e}", grader.image))?;
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
            .map_err(|e| e.to_string())
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
                return Err(format!(
                    "cannot copy {what} into the grader's sandbox: {}",
                    tail.trim()
                ));
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
            return Err("interrupted".into());
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
