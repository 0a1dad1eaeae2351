//! `agent-runner validate`: the task as it would run, every default visible; runs
//! nothing.

use crate::error::exit;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_settings::task;

use super::{read_task, report, write_stdout};

/// Prints the Task YAML on stdin resolved, secrets masked; returns the exit code.
pub(crate) fn validate(interrupt: Interrupt) -> i32 {
    let task = match read_task(interrupt) {
        Ok(task) => task,
        Err(e) => return report(&e, &Redactor::default()),
    };
    let redactor = Redactor::new(&task.secrets());
    for gap in task::allow_gaps(&task) {
        log::warn!("{}", redactor.redact(&gap.to_string()));
    }
    match write_stdout(&redactor.redact(&task::resolved_yaml(&task))) {
        Ok(()) => exit::COMPLETE,
        Err(e) => report(&e, &redactor),
    }
}
