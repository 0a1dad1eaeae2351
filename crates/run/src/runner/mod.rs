//! The task state machine (SPEC §4): PENDING → PLANNING → RUNNING ⇄ VALIDATING →
//! COMPLETE | FAILED, RUNNING → PLANNING when Meta re-plans (`replan`, SPEC §16), and
//! PLANNING → AWAITING_APPROVAL, the run's end, with `approve_plan` (SPEC §23; a
//! resume is the approval).
//! Meta plans and decides; the sandbox runs the worker and the tests;
//! `mark_complete` is a claim to be checked, not trusted; the test command gates
//! completion; `max_loops` bounds the iterations, replans included. Every paid call
//! is checked against the `budget` before and after it, and a loop that changed
//! nothing again ends the task (`progress`).

pub(crate) mod budget;
pub(crate) mod events;
pub mod meta;
pub(crate) mod progress;
pub(crate) mod protocol;
pub(crate) mod replan;
#[cfg(test)]
mod reply_figure;
pub mod state;

use crate::context::{Criterion, TaskContext, TaskState};
use agent_runner_core::deadline::Deadline;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::timestamp::human;
use agent_runner_meta::{MetaError, MetaOutcome};
use agent_runner_sandbox::backend::BroughtBack;
use agent_runner_sandbox::worker::{Sandbox, SandboxError, setup_error};
use agent_runner_settings::agent::RunOutcome;
use agent_runner_settings::events::named::Name as _;
use agent_runner_settings::task::TestSpec;
use meta::Meta;
pub use protocol::{Action, NextAction};

/// Why a step stopped the task early.
enum Stop {
    Failed(String),
    Interrupted,
}

/// Drives one task to a terminal state.
pub struct Runner<'a, M, S> {
    meta: M,
    sandbox: S,
    /// Called after every step with the latest state (writes the Task Note).
    checkpoint: &'a mut dyn FnMut(&TaskContext),
    interrupt: Interrupt,
    deadline: Deadline,
}

impl<'a, M: Meta, S: Sandbox> Runner<'a, M, S> {
    /// A runner that stops at the next step boundary once `interrupt` is set.
    pub fn new(
        meta: M,
        sandbox: S,
        checkpoint: &'a mut dyn FnMut(&TaskContext),
        interrupt: Interrupt,
    ) -> Self {
        Runner {
            meta,
            sandbox,
            checkpoint,
            interrupt,
            deadline: Deadline::none(),
        }
    }

    /// Counts `deadline` (the one Meta and the sandbox cut their steps to) as the
    /// end of `max_duration_sec`.
    pub fn until(mut self, deadline: Deadline) -> Self {
        self.deadline = deadline;
        self
    }

    /// Runs the task to COMPLETE or FAILED, then removes the sandbox.
    pub fn run(mut self, ctx: &mut TaskContext) {
        let result = self.drive(ctx);
        match result {
            Ok(()) => {}
            Err(Stop::Failed(reason)) => fail(ctx, reason),
            Err(Stop::Interrupted) => {
                ctx.interrupted = true;
                fail(ctx, "interrupted".into());
            }
        }
        (self.checkpoint)(ctx);
        if ctx.teardown.is_none() {
            ctx.teardown = Some(self.sandbox.shutdown());
        }
        (self.checkpoint)(ctx);
    }

    /// COMPLETE only once the work is where the user looks for it: the sandbox
    /// removed first, and a copy transport's work that could not be brought back
    /// (the bundler failed, the landing's checks refused the bundle) fails the task,
    /// saying why (SPEC §22).
    fn complete(&mut self, ctx: &mut TaskContext) -> Result<(), Stop> {
        let teardown = self.sandbox.shutdown();
        let lost = match &teardown.work {
            Some(failed @ BroughtBack::Failed(_)) => Some(failed.to_string()),
            _ => None,
        };
        ctx.teardown = Some(teardown);
        if let Some(lost) = lost {
            return Err(Stop::Failed(format!("all criteria passed, but {lost}")));
        }
        move_to(ctx, TaskState::Complete, "all criteria passed")
    }

    fn drive(&mut self, ctx: &mut TaskContext) -> Result<(), Stop> {
        let max_loops = ctx.task.meta.max_loops;
        let resumed_with_criteria = ctx.resumed.is_some() && !ctx.criteria.is_empty();
        let awaits_approval = ctx.task.meta.approve_plan
            && !resumed_with_criteria
            && ctx.task.acceptance_criteria.is_empty();
        // A plan that awaits approval starts no sandbox (SPEC §23): the preflight
        // (SPEC §21) comes with the approval, before its first paid call.
        if !awaits_approval {
            self.prepare(ctx)?;
        }
        move_to(ctx, TaskState::Planning, "")?;
        if let Some(resumed) = ctx.resumed.as_ref().filter(|_| !ctx.criteria.is_empty()) {
            // SPEC §19: the criteria and loops of the runs before; no plan_task.
            let reason = format!(
                "resumed after {} loop(s) with the saved criteria; the run before ended {}",
                resumed.loops, resumed.previous
            );
            move_to(ctx, TaskState::Running, &reason)?;
            if ctx.loops >= max_loops {
                return Err(Stop::Failed(format!(
                    "max_loops reached ({max_loops}) before this run: raise runner.meta.max_loops to go on"
                )));
            }
        } else if ctx.task.acceptance_criteria.is_empty() {
            let plan = self.ask(ctx, |meta, ctx| meta.plan_task(ctx))?;
            ctx.set_criteria(plan.criteria, "planned by Meta");
            log::info!("planned {} acceptance criteria", ctx.criteria.len());
            if ctx.task.meta.approve_plan {
                // SPEC §23: no sandbox is started and nothing more is paid for until
                // the user approves; a resume (the approval) goes on from here.
                move_to(
                    ctx,
                    TaskState::AwaitingApproval,
                    "runner.meta.approve_plan: the plan awaits approval",
                )?;
                return Ok(());
            }
            move_to(ctx, TaskState::Running, "")?;
        } else {
            // A plan (SPEC §13) already fixed them: Meta is not asked to plan again.
            let given = given_criteria(&ctx.task.acceptance_criteria);
            ctx.set_criteria(given, "given by the task");
            move_to(
                ctx,
                TaskState::Running,
                "acceptance criteria given by the task",
            )?;
        }
        loop {
            let next = self.ask(ctx, |meta, ctx| meta.next_action(ctx))?;
            let number = ctx.loops + 1;
            let done = match next.action {
                Action::RunWorker { prompt } => {
                    self.run_worker(ctx, number, &prompt, &next.reason)?
                }
                Action::MarkComplete => {
                    let reason = first_line(&next.reason);
                    log::info!("meta says the task is complete; checking: {reason}");
                    format!("meta claims completion: {reason}")
                }
                Action::Replan => {
                    self.replan(ctx, number, &next.reason)?;
                    continue;
                }
                Action::Unknown(other) => {
                    return Err(Stop::Failed(format!(
                        "unknown action {other:?} from next_action (expected run_worker, mark_complete or replan)"
                    )));
                }
            };
            ctx.loops = number;
            move_to(ctx, TaskState::Validating, &done)?;
            if let Some(test) = ctx.task.test.clone() {
                self.test(ctx, number, &test)?;
            }
            let stalled = ctx.task.bounds.max_stalled_loops;
            if progress::stalled(ctx, stalled) {
                return Err(Stop::Failed(format!("no progress in {stalled} loops")));
            }
            // A task the assessment completes needs no further paid call: the budget
            // is looked at before the next one, not after this one.
            let Some(why) = self.assess(ctx)? else {
                return self.complete(ctx);
            };
            if ctx.loops >= max_loops {
                return Err(Stop::Failed(format!(
                    "max_loops reached ({max_loops}): {why}"
                )));
            }
            move_to(ctx, TaskState::Running, &why)?;
        }
    }

    /// Before the first paid call (SPEC §21): the sandbox up, `task.setup` run once
    /// in it, the test's program found; a failure ends the task with no Meta call.
    fn prepare(&mut self, ctx: &mut TaskContext) -> Result<(), Stop> {
        let (test, setup) = (ctx.task.test.clone(), ctx.task.setup.clone());
        if let Some(setup) = &setup {
            log::info!("setup: `{}`", first_line(&setup.command));
        }
        let prepared = self
            .sandbox
            .prepare(test.as_ref(), setup.as_ref())
            .map_err(sandbox_stop)?;
        if let Some(run) = &prepared.setup {
            log::info!(
                "setup: {} in {} (exit {})",
                if run.passed() { "passed" } else { "failed" },
                human(run.duration),
                exit_code(run.exit_code)
            );
        }
        let interrupted = prepared.setup.as_ref().is_some_and(|r| r.interrupted);
        ctx.setup = prepared.setup;
        self.step_done(ctx)?;
        if interrupted {
            return Err(Stop::Interrupted);
        }
        match prepared.failed {
            Some(why) => Err(Stop::Failed(why)),
            None => Ok(()),
        }
    }

    /// Runs the worker with `prompt` (loop `number`, for `reason`); says what was done.
    fn run_worker(
        &mut self,
        ctx: &mut TaskContext,
        number: u32,
        prompt: &str,
        reason: &str,
    ) -> Result<String, Stop> {
        let max_loops = ctx.task.meta.max_loops;
        log::info!("worker run {number}/{max_loops}: {}", first_line(reason));
        self.within_budget(ctx)?;
        let continues = ctx
            .resumed
            .as_ref()
            .is_some_and(|r| r.worker_session.is_some() && ctx.worker_runs.is_empty());
        events::worker_started(&ctx.events, number, continues);
        let run = self
            .sandbox
            .run_worker(number, prompt)
            .map_err(sandbox_stop)?;
        events::worker_finished(&ctx.events, &run);
        log::info!(
            "worker run {number}/{max_loops}: {} in {} (exit {}): {}",
            run.outcome.as_str(),
            human(run.duration),
            exit_code(run.exit_code),
            first_line(&run.summary)
        );
        let outcome = run.outcome;
        ctx.worker_runs.push(run);
        self.step_done(ctx)?;
        if outcome == RunOutcome::Interrupted {
            return Err(Stop::Interrupted);
        }
        if let Err(stop) = self.within_budget(ctx) {
            // The run happened: its loop counts, so that a resume (SPEC §19)
            // goes on after it rather than running it again.
            ctx.loops = number;
            return Err(stop);
        }
        Ok(format!("worker run {number} {}", outcome.as_str()))
    }

    /// Asks Meta for new criteria (loop `number`), which replace the current ones.
    /// `offer` is checked again: a Meta that let a refused `replan` through must not
    /// get more loops or paid calls than the task allows.
    fn replan(&mut self, ctx: &mut TaskContext, number: u32, reason: &str) -> Result<(), Stop> {
        replan::offer(ctx).map_err(|why| {
            Stop::Failed(format!(
                "next_action answered replan, which is not available: {why}"
            ))
        })?;
        let said = first_line(reason);
        log::info!("loop {number}: meta re-plans the criteria: {said}");
        move_to(ctx, TaskState::Planning, &format!("replan: {said}"))?;
        let plan = self.ask(ctx, |meta, ctx| meta.replan(ctx, reason))?;
        ctx.loops = number;
        ctx.replans += 1;
        ctx.set_criteria(plan.criteria, reason.trim());
        log::info!(
            "re-planned {} acceptance criteria (version {})",
            ctx.criteria.len(),
            ctx.criteria_versions.len()
        );
        move_to(
            ctx,
            TaskState::Running,
            &format!("criteria version {}", ctx.criteria_versions.len()),
        )?;
        self.step_done(ctx)
    }

    /// Runs the task's test command.
    fn test(&mut self, ctx: &mut TaskContext, number: u32, test: &TestSpec) -> Result<(), Stop> {
        events::test_started(&ctx.events, number, &test.command);
        let run = self.sandbox.run_test(number, test).map_err(sandbox_stop)?;
        events::test_finished(&ctx.events, &run);
        let verdict = if run.timed_out {
            format!("timed out after {}", human(test.timeout))
        } else if run.passed() {
            "passed".into()
        } else {
            format!("failed (exit {})", exit_code(run.exit_code))
        };
        log::info!(
            "test `{}`: {verdict} in {}",
            first_line(&test.command),
            human(run.duration)
        );
        let interrupted = run.interrupted;
        let setup_error = setup_error(&run, &ctx.task.worker.docker_image);
        ctx.test_runs.push(run);
        self.step_done(ctx)?;
        if interrupted {
            return Err(Stop::Interrupted);
        }
        // The program is not there: no worker run will put it in the image, so no
        // further paid call is made for it.
        setup_error.map_or(Ok(()), |why| Err(Stop::Failed(why)))
    }

    /// Asks Meta for its assessment and ticks the criteria it names. None when the
    /// task is complete: every criterion passed and the last test (if any) passed;
    /// otherwise why not.
    fn assess(&mut self, ctx: &mut TaskContext) -> Result<Option<String>, Stop> {
        let assessment = self.ask(ctx, |meta, ctx| meta.completion_assessment(ctx))?;
        for id in &assessment.passed_criteria {
            match ctx.criteria.iter_mut().find(|c| &c.id == id) {
                Some(criterion) => criterion.passed = true,
                None => log::warn!("completion_assessment names an unknown criterion {id:?}"),
            }
        }
        if assessment.all_criteria_satisfied == Some(true) {
            ctx.criteria.iter_mut().for_each(|c| c.passed = true);
        }
        ctx.assessment = Some(assessment);
        let total = ctx.criteria.len();
        let passed = ctx.criteria.iter().filter(|c| c.passed).count();
        let last_test = ctx.last_test_run().map(|t| t.passed());
        let tests = match last_test {
            None => "not run",
            Some(true) => "passing",
            Some(false) => "failing",
        };
        log::info!("criteria {passed}/{total} passed; tests {tests}");
        (self.checkpoint)(ctx);
        Ok(match (passed == total, last_test != Some(false)) {
            (true, true) => None,
            (false, false) => Some(format!(
                "{passed}/{total} criteria passed and the last test failed"
            )),
            (false, true) => Some(format!("{passed}/{total} criteria passed")),
            (true, false) => Some("the last test failed".to_string()),
        })
    }

    /// One Meta call, if the budget allows it: recorded, checkpointed, its failure a
    /// stop (the budget's, when the call ended because it ran out). The budget after
    /// it is looked at before the next paid call.
    fn ask<T>(
        &mut self,
        ctx: &mut TaskContext,
        call: impl FnOnce(&mut M, &TaskContext) -> MetaOutcome<T>,
    ) -> Result<T, Stop> {
        self.within_budget(ctx)?;
        let outcome = call(&mut self.meta, ctx);
        events::meta_call(&ctx.events, &outcome.call);
        let kind = outcome.call.kind;
        ctx.meta_calls.push(outcome.call);
        self.step_done(ctx)?;
        match outcome.reply {
            Ok(reply) => Ok(reply),
            Err(MetaError::Interrupted) => Err(Stop::Interrupted),
            Err(MetaError::Failed(e)) => {
                self.within_budget(ctx)?;
                Err(Stop::Failed(format!("meta {kind} failed: {e}")))
            }
        }
    }

    /// A stop once a limit of `runner.budget` is reached (recorded in the context).
    fn within_budget(&mut self, ctx: &mut TaskContext) -> Result<(), Stop> {
        let budget = ctx.task.bounds.budget;
        if budget.is_unlimited() {
            return Ok(());
        }
        // A resumed task's limits hold for the whole task, the runs before included.
        let usage = ctx.task_usage();
        let elapsed = ctx.task_elapsed();
        match budget::exhausted(&budget, &usage, elapsed, self.deadline.passed()) {
            None => Ok(()),
            Some(exhausted) => {
                ctx.budget_exhausted = Some(exhausted.limit.as_str());
                events::budget(&ctx.events, exhausted.limit, &exhausted.reason);
                Err(Stop::Failed(exhausted.reason))
            }
        }
    }

    fn step_done(&mut self, ctx: &TaskContext) -> Result<(), Stop> {
        (self.checkpoint)(ctx);
        if self.interrupt.is_set() {
            Err(Stop::Interrupted)
        } else {
            Ok(())
        }
    }
}

/// The task's own criteria, with ids AC-1, AC-2, ...
fn given_criteria(descriptions: &[String]) -> Vec<Criterion> {
    descriptions
        .iter()
        .enumerate()
        .map(|(n, description)| Criterion {
            id: format!("AC-{}", n + 1),
            description: description.clone(),
            passed: false,
        })
        .collect()
}

fn move_to(ctx: &mut TaskContext, to: TaskState, reason: &str) -> Result<(), Stop> {
    ctx.transition(to, reason)
        .map_err(|e| Stop::Failed(format!("internal error: {e}")))
}

fn fail(ctx: &mut TaskContext, reason: String) {
    if !ctx.state.is_terminal() {
        // Every live state may go to FAILED.
        let _ = ctx.transition(TaskState::Failed, reason);
    }
}

fn sandbox_stop(e: SandboxError) -> Stop {
    match e {
        SandboxError::Interrupted => Stop::Interrupted,
        other => Stop::Failed(format!("sandbox: {other}")),
    }
}

fn exit_code(code: Option<i32>) -> String {
    code.map_or("none".into(), |c| c.to_string())
}

fn first_line(text: &str) -> String {
    agent_runner_core::text::first_line(text, 160)
}

#[cfg(test)]
mod tests;
