//! A grading on the host its attempt ran on (SPEC §22 hosts, §26): the grader's
//! image is where that attempt's image was, and this machine may have no daemon
//! of its own. Every docker call of a process goes to one daemon (the backend is
//! aimed once per process), so a grading on a host is a child of agent-runner,
//! `eval grade` (hidden), aimed at that host as the orchestrator aims a run's child
//! (`Target::apply`): it reads the request on stdin, grades as `grade.rs` does,
//! and prints the answer as one JSON line. The grader's files still go from the
//! suite's directory straight into the grading sandbox, over the exec's stdin.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::grade::{self, GradeError, Graded};
use super::suite::Grader;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Ending, Invocation, Limits, Stop};
use agent_runner_sandbox::backend::host::Target;

/// What the child is asked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// The attempt's files, a tar on this machine.
    pub archive: PathBuf,
    pub grader: Grader,
    /// Names the grading sandbox (`agent-runner.task`).
    pub label: String,
}

/// What the child answers: the grader's verdict, or why there is none (as text:
/// it crosses to the parent as a JSON line).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Graded(Graded),
    Failed(String),
}

/// The start of the child's answer line.
const ANSWER: &str = "agent-runner-eval-grade: ";
/// Time beyond the grader's own for the sandbox's start and the copies
/// (`grade::START` each).
const SLACK: Duration = Duration::from_secs(4 * 120);

/// Grades `archive` with `grader` on the host `target`, through `exe eval grade`.
pub(crate) fn grade(
    exe: &Path,
    target: &Target,
    archive: &Path,
    grader: &Grader,
    label: &str,
    interrupt: Interrupt,
) -> Result<Graded, GradeError> {
    let request = Request {
        archive: archive.to_path_buf(),
        grader: grader.clone(),
        label: label.to_string(),
    };
    let json = serde_json::to_vec(&request)?;
    let invocation = target.apply(
        Invocation::new(&exe.display().to_string())
            .args(["eval", "grade"])
            .stdin(json)
            .die_with_parent(),
    );
    let mut answer = None;
    let mut on_line = |line: &[u8]| {
        if let Some(rest) = String::from_utf8_lossy(line).strip_prefix(ANSWER) {
            answer = serde_json::from_str::<Answer>(rest.trim_end()).ok();
        }
    };
    let mut capture = Capture::in_memory(16 * 1024).with_lines(1 << 20, &mut on_line);
    let wall = Duration::from_secs(grader.timeout_sec) + SLACK;
    let finished = process::run(
        &invocation,
        &Limits::wall(wall, interrupt),
        &mut capture,
        Stop::Terminate,
    )
    .map_err(|source| GradeError::Child {
        exe: exe.to_path_buf(),
        source,
    })?;
    let stderr = capture.stderr();
    drop(capture);
    match (answer, finished.ending) {
        (Some(Answer::Graded(graded)), _) => Ok(graded),
        (Some(Answer::Failed(why)), _) => Err(GradeError::OnHost(why)),
        (None, Ending::Interrupted) => Err(GradeError::Interrupted),
        (None, _) => Err(GradeError::NoAnswer {
            target: target.to_string(),
            exit: finished
                .code()
                .map_or("no exit code".into(), |c| format!("exit {c}")),
            stderr: agent_runner_core::text::cut_chars(stderr.trim(), 400),
        }),
    }
}

/// The answer line of a grading that could not be aimed at its host (`why`).
pub fn refused(why: &str) -> String {
    let json = serde_json::to_string(&Answer::Failed(format!("the grading's host: {why}")))
        .unwrap_or_else(|e| format!("{{\"failed\":\"cannot write the answer: {e}\"}}"));
    format!("{ANSWER}{json}\n")
}

/// `eval grade` itself: the request in `stdin` graded on this process's daemon;
/// the answer line to print.
pub fn serve(stdin: &[u8], interrupt: Interrupt) -> String {
    let answer = match serde_json::from_slice::<Request>(stdin) {
        Ok(request) => {
            let backend = agent_runner_sandbox::backend::open();
            match grade::grade(
                &*backend,
                &request.archive,
                &request.grader,
                &request.label,
                interrupt,
            ) {
                Ok(graded) => Answer::Graded(graded),
                Err(why) => Answer::Failed(why.to_string()),
            }
        }
        Err(e) => Answer::Failed(format!("not a grading request: {e}")),
    };
    let json = serde_json::to_string(&answer)
        .unwrap_or_else(|e| format!("{{\"failed\":\"cannot write the answer: {e}\"}}"));
    format!("{ANSWER}{json}\n")
}
