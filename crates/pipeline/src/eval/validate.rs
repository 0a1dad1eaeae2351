//! `eval validate SUITE`: each grader must fail on its case's base (else it proves
//! nothing) and pass with the case's solution where one is given (else it cannot be
//! passed), each checked in a fresh grading sandbox with no network, from a scratch
//! repository of ours that is removed afterwards.

use super::error::EvalError;
use super::grade::{self, GradeError, Graded};
use super::repo::EvalRepo;
use super::suite::{Case, Suite};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_sandbox::backend::Backend;

/// Why a case's grader could not be run on the base or with the solution.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Grade(#[from] GradeError),
    /// The case's solution does not apply (`EvalError::Case`'s detail).
    #[error("{0}")]
    Solution(String),
}

/// What validating one case found.
#[derive(Debug)]
pub struct CaseCheck {
    pub case: String,
    /// The grader on the base (it must fail).
    pub on_base: Result<Graded, CheckError>,
    /// The grader with the solution (it must pass), when the case has one.
    pub with_solution: Option<Result<Graded, CheckError>>,
}

impl CaseCheck {
    /// Why the case's grader is no good, if it is not.
    pub fn problem(&self) -> Option<String> {
        let at = |what: &str, r: &Result<Graded, CheckError>| match r {
            Err(e) => Some(format!("the grader could not run {what}: {e}")),
            Ok(_) => None,
        };
        if let Some(p) = at("on the base", &self.on_base) {
            return Some(p);
        }
        if let Ok(g) = &self.on_base
            && g.passed
        {
            return Some("the grader passes on the base: it cannot tell a fix from none".into());
        }
        match &self.with_solution {
            Some(Err(e)) => Some(e.to_string()),
            Some(Ok(g)) if !g.passed => Some(format!(
                "the grader fails with the solution ({}): {}",
                g.exit_code
                    .map_or("timed out".into(), |c| format!("exit {c}")),
                g.tail.trim()
            )),
            _ => None,
        }
    }
}

/// Checks every case's grader; the checks in the suite's order.
pub fn validate(suite: &Suite, interrupt: Interrupt) -> Result<Vec<CaseCheck>, EvalError> {
    let dir = std::env::temp_dir().join(format!(
        "agent-runner-eval-validate-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let checked = (|| {
        let repo = EvalRepo::scratch(&dir.join("repo.git"), interrupt)?;
        let backend = agent_runner_sandbox::backend::open();
        let mut checks = Vec::new();
        for case in &suite.cases {
            if interrupt.is_set() {
                return Err(EvalError::Interrupted);
            }
            checks.push(check(&repo, &*backend, case, &dir, interrupt)?);
        }
        Ok(checks)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    checked
}

fn check(
    repo: &EvalRepo,
    backend: &dyn Backend,
    case: &Case,
    dir: &std::path::Path,
    interrupt: Interrupt,
) -> Result<CaseCheck, EvalError> {
    let base = repo.import(case, interrupt)?;
    let run = |commit: &str, what: &str| -> Result<Result<Graded, CheckError>, EvalError> {
        let archive = dir.join(format!("{}-{what}.tar", case.id));
        repo.archive(commit, &archive, interrupt)?;
        let graded = grade::grade(
            backend,
            &archive,
            &case.grader,
            &format!("validate-{}", case.id),
            interrupt,
        );
        let _ = std::fs::remove_file(&archive);
        Ok(graded.map_err(CheckError::from))
    };
    let on_base = run(&base, "base")?;
    let with_solution = match &case.solution {
        Some(patch) => match repo.with_patch(&case.id, &base, patch, interrupt) {
            Ok(commit) => Some(run(&commit, "solution")?),
            // A solution that does not apply is this case's problem, not the run's.
            Err(EvalError::Case { detail, .. }) => Some(Err(CheckError::Solution(detail))),
            Err(e) => return Err(e),
        },
        None => None,
    };
    Ok(CaseCheck {
        case: case.id.clone(),
        on_base,
        with_solution,
    })
}
