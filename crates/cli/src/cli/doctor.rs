//! `agent-runner doctor [< task.yaml]`: the checks of `agent_runner_run::doctor`, one line each on
//! stdout, for the task on stdin or, without one, for the defaults.

use std::io::IsTerminal;

use crate::error::exit;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::escape_controls;
use agent_runner_run::doctor::{self, Status, Target};
use agent_runner_settings::task::Host;

use super::{input, parse_task, report, write_stdout};

/// Runs the checks and prints one line each; returns the exit code.
pub(crate) fn doctor(interrupt: Interrupt) -> i32 {
    let var = |name: &str| std::env::var(name).ok();
    let defaults = || {
        // An unreadable auth.json counts as no auth here; the auth check says so.
        let login = agent_runner_settings::task::resolve_login(
            agent_runner_settings::agent::default_kind(),
            &Host::process(),
        )
        .unwrap_or(agent_runner_settings::task::Login::None);
        (Target::defaults(&var, &login), login.secrets())
    };
    let (target, secrets) = if std::io::stdin().is_terminal() {
        defaults()
    } else {
        match input::read_stdin(interrupt) {
            Ok(text) if text.trim().is_empty() => defaults(),
            Ok(text) => match parse_task(&text) {
                Ok(task) => (Target::of_task(&task), task.secrets()),
                Err(e) => return report(&e, &Redactor::default()),
            },
            Err(e) => return report(&e, &Redactor::default()),
        }
    };
    // No check prints a secret; masking anyway keeps it so if one ever quotes one.
    let redactor = Redactor::new(&secrets);
    let mut print = |check: &doctor::Check| {
        let line = escape_controls(&redactor.redact(&check.line()));
        let _ = write_stdout(&format!("{line}\n"));
    };
    let checks = doctor::run_all(&target, interrupt, &mut print);
    if interrupt.is_set() {
        let _ = write_stdout("interrupted\n");
        return exit::INTERRUPTED;
    }
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let summary = match failed {
        0 => format!("all {} checks passed\n", checks.len()),
        n => format!("{n} of {} checks failed\n", checks.len()),
    };
    let _ = write_stdout(&summary);
    if failed == 0 {
        exit::COMPLETE
    } else {
        exit::FAILED
    }
}
