//! Re-planning inside a run (SPEC §16): `next_action` may answer `replan`, and the
//! runner asks `plan_task` again with the criteria so far and what each loop did;
//! the reply replaces the criteria. This module holds when a replan is offered (the
//! same rule makes the next_action schema offer it, makes a `replan` reply invalid
//! when it is not, and lets the runner refuse one a Meta let through) and what the
//! second `plan_task` is told, bounded like the tails of §5.3.

use serde::Serialize;

use super::protocol::{self, Action, CriterionInfo, MessageType, NextAction};
use crate::Error;
use crate::context::TaskContext;
use crate::loop_record::{LoopRecord, MAX_LOOP_TEXT};
use agent_runner_core::text::cut;

/// Loops shown in a replan's history (the latest).
pub(crate) const MAX_HISTORY: usize = 10;

/// How many replans are left, or why `replan` is not offered now.
pub(crate) fn offer(ctx: &TaskContext) -> Result<u32, Error> {
    let meta = &ctx.task.meta;
    if !ctx.task.acceptance_criteria.is_empty() {
        return Err(Error::CriteriaFixed);
    }
    if ctx.replans >= meta.max_replans {
        return Err(Error::ReplansUsed(meta.max_replans));
    }
    // A replan is a loop; on the last one, no loop would be left to meet new criteria.
    if ctx.loops + 1 >= meta.max_loops {
        return Err(Error::NoLoopLeft {
            at: ctx.loops + 1,
            max: meta.max_loops,
        });
    }
    Ok(meta.max_replans - ctx.replans)
}

/// Whether `next` may be carried out as it is: a `replan` that is not offered is an
/// invalid reply (asked again), saying why.
pub(crate) fn check(next: &NextAction, ctx: &TaskContext) -> Result<(), Error> {
    if next.action != Action::Replan {
        return Ok(());
    }
    offer(ctx)
        .map(|_| ())
        .map_err(|why| Error::ReplanNotOffered(Box::new(why)))
}

/// The system prompt of a replan's `plan_task`.
pub(crate) fn system_prompt(base: Option<&str>) -> String {
    format!(
        "{}\nThis is a replan: your earlier criteria (previous_criteria) were judged wrong for \
         replan.reason, and history says what each loop did. Write the whole new list: it \
         replaces the old one, and every criterion starts unmet.\n",
        protocol::system_prompt(base, MessageType::PlanTask).trim_end()
    )
}

/// The request YAML of a replan's `plan_task`, because of `reason`: the first
/// plan's request and what the replan adds.
pub(crate) fn request(ctx: &TaskContext, reason: &str) -> String {
    #[derive(Serialize)]
    struct ReplanRequest<'a> {
        #[serde(flatten)]
        plan: protocol::PlanRequest<'a>,
        #[serde(flatten)]
        replan: ReplanInfo,
    }
    let request = ReplanRequest {
        plan: protocol::plan_request(ctx),
        replan: info(ctx, reason),
    };
    protocol::encoded(MessageType::PlanTask, serde_norway::to_string(&request))
}

/// What a replan's `plan_task` adds to the request.
#[derive(Serialize)]
pub(crate) struct ReplanInfo {
    pub(crate) replan: Why,
    pub(crate) previous_criteria: Vec<CriterionInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) previous_criteria_not_shown: Option<usize>,
    pub(crate) history: Vec<LoopRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) history_not_shown: Option<usize>,
}

/// Why the replan, and when.
#[derive(Serialize)]
pub(crate) struct Why {
    pub(crate) reason: String,
    /// The loop the replan is (it counts as one).
    #[serde(rename = "loop")]
    pub(crate) loop_: u32,
}

/// The replan's additions, for the loop about to be the replan, because of `reason`.
pub(crate) fn info(ctx: &TaskContext, reason: &str) -> ReplanInfo {
    let (previous_criteria, previous_criteria_not_shown) = protocol::criteria_info(&ctx.criteria);
    let shown = ctx.loops.min(MAX_HISTORY as u32);
    let skipped = ctx.loops - shown;
    ReplanInfo {
        replan: Why {
            reason: protocol::clean(&cut(reason, MAX_LOOP_TEXT)),
            loop_: ctx.loops + 1,
        },
        previous_criteria,
        previous_criteria_not_shown,
        history: history(ctx, skipped + 1),
        history_not_shown: (skipped > 0).then_some(skipped as usize),
    }
}

/// The loops from `first` on, in order, cleaned for the request: each one's worker
/// run, test run, or replan.
pub(crate) fn history(ctx: &TaskContext, first: u32) -> Vec<LoopRecord> {
    (first..=ctx.loops)
        .map(|n| ctx.loop_record(n).cleaned(protocol::clean))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Criterion;
    use agent_runner_core::timestamp::Timestamp;
    use agent_runner_sandbox::worker::{TestRun, WorkerRun};
    use agent_runner_settings::agent::{RunOutcome, Transcript};
    use std::time::Duration;

    /// A planned task after `loops` loops, each a worker run and a failing test that
    /// printed `output`.
    fn after_loops(loops: u32, output: &str, extra: &str) -> TaskContext {
        let mut ctx = TaskContext::new(agent_runner_settings::task::test_task(&format!(
            "  test:\n    command: make test\n{extra}"
        )));
        ctx.set_criteria(
            vec![
                Criterion {
                    id: "AC-1".into(),
                    description: "it builds".into(),
                    passed: true,
                },
                Criterion {
                    id: "AC-2".into(),
                    description: "it flies".into(),
                    passed: false,
                },
            ],
            "planned by Meta",
        );
        for n in 1..=loops {
            ctx.worker_runs.push(WorkerRun {
                number: n,
                started: Timestamp::now(),
                finished: Timestamp::now(),
                duration: Duration::from_secs(1),
                exit_code: Some(0),
                outcome: RunOutcome::Completed,
                summary: format!("run {n}: {output}"),
                transcript: Transcript::default(),
                log_path: "/tmp/x.log".into(),
                output_bytes: 0,
                output_tail: output.into(),
                changes: agent_runner_sandbox::worker::git::RepoChanges::Unknown,
                leftovers: None,
                privileges: vec![],
                usage: Default::default(),
            });
            ctx.test_runs.push(TestRun {
                number: n,
                command: "make test".into(),
                cwd: String::new(),
                started: Timestamp::now(),
                duration: Duration::from_secs(1),
                exit_code: Some(2),
                timed_out: false,
                interrupted: false,
                output_tail: format!("{output} test {n} failed"),
                log_path: "/tmp/t.log".into(),
                leftovers: None,
                privileges: vec![],
            });
            ctx.loops = n;
        }
        ctx
    }

    #[test]
    fn the_second_plan_task_carries_the_criteria_and_each_loops_outcome() {
        let ctx = after_loops(2, "boom", "runner:\n  meta:\n    max_loops: 5\n");
        let yaml = request(&ctx, "AC-2 is impossible");
        let request: serde_norway::Value = serde_norway::from_str(&yaml).unwrap();
        assert_eq!(request["type"], "plan_task");
        assert_eq!(request["task"]["prd"], "Make it work.");
        assert_eq!(request["replan"]["reason"], "AC-2 is impossible");
        assert_eq!(request["replan"]["loop"], 3);
        let criteria: serde_norway::Value = serde_norway::from_str(
            "[{id: AC-1, description: it builds, passed: true}, {id: AC-2, description: it flies, passed: false}]",
        )
        .unwrap();
        assert_eq!(request["previous_criteria"], criteria);
        let history: serde_norway::Value = serde_norway::from_str(
            "- loop: 1\n  action: run_worker\n  worker: {outcome: completed, exit_code: 0, summary: 'run 1: boom'}\n  test: {passed: false, exit_code: 2, timed_out: false, output_tail: boom test 1 failed}\n\
             - loop: 2\n  action: run_worker\n  worker: {outcome: completed, exit_code: 0, summary: 'run 2: boom'}\n  test: {passed: false, exit_code: 2, timed_out: false, output_tail: boom test 2 failed}\n",
        )
        .unwrap();
        assert_eq!(request["history"], history);
        assert!(request.get("history_not_shown").is_none());
        // A first plan_task has none of it.
        let first: serde_norway::Value =
            serde_norway::from_str(&protocol::request(MessageType::PlanTask, &ctx)).unwrap();
        assert!(first.get("replan").is_none() && first.get("history").is_none());
    }

    #[test]
    fn the_history_is_bounded_whatever_the_worker_printed() {
        // The worst case for YAML: every character needs escaping.
        let output = "\"\\\u{1b}[31m\u{7}é".repeat(20_000);
        let ctx = after_loops(300, &output, "runner:\n  meta:\n    max_loops: 1000\n");
        let info = serde_norway::to_string(&info(&ctx, &output)).unwrap();
        assert!(info.len() <= 24 * 1024, "{} bytes", info.len());
        let request: serde_norway::Value = serde_norway::from_str(&request(&ctx, "x")).unwrap();
        let history = request["history"].as_sequence().unwrap();
        assert_eq!(history.len(), MAX_HISTORY);
        assert_eq!(history[0]["loop"], 291, "the latest loops");
        assert_eq!(request["history_not_shown"], 290);
    }

    #[test]
    fn replan_is_offered_only_while_it_is_allowed() {
        let offered = |ctx: &TaskContext| {
            let system =
                protocol::system_prompt_offering(None, MessageType::NextAction, offer(ctx).ok());
            let request: serde_norway::Value = serde_norway::from_str(&protocol::request_offering(
                MessageType::NextAction,
                ctx,
                offer(ctx).ok(),
            ))
            .unwrap();
            let in_request = request.get("replans_left").is_some();
            assert_eq!(system.contains("or replan"), in_request);
            in_request
        };
        let next = NextAction {
            action: Action::Replan,
            reason: "r".into(),
        };
        let mut ctx = after_loops(
            1,
            "x",
            "runner:\n  meta:\n    max_loops: 5\n    max_replans: 1\n",
        );
        assert_eq!(offer(&ctx).ok(), Some(1));
        assert!(offered(&ctx) && check(&next, &ctx).is_ok());
        ctx.replans = 1;
        assert!(!offered(&ctx));
        assert_eq!(
            check(&next, &ctx).unwrap_err().to_string(),
            "decision.action replan is not available: runner.meta.max_replans (1) replans are used; answer run_worker or mark_complete"
        );
        let run = NextAction {
            action: Action::RunWorker { prompt: "p".into() },
            reason: "r".into(),
        };
        assert!(
            check(&run, &ctx).is_ok(),
            "other actions are not its business"
        );
        let fixed = after_loops(1, "x", "  acceptance_criteria: [a]\n");
        assert!(!offered(&fixed));
        assert!(
            check(&next, &fixed)
                .unwrap_err()
                .to_string()
                .contains("fixes its acceptance criteria")
        );
        let last = after_loops(4, "x", "runner:\n  meta:\n    max_loops: 5\n");
        assert!(!offered(&last), "no loop would be left");
    }

    #[test]
    fn a_resumed_task_replans_with_the_loops_of_the_runs_before() {
        use crate::loop_record::{
            LoopAction, LoopRecord as Saved, TestOutcome as SavedTest, WorkerOutcome as SavedWorker,
        };
        use crate::resume::Resumed;
        let mut ctx = after_loops(0, "x", "runner:\n  meta:\n    max_loops: 5\n");
        ctx.loops = 2;
        ctx.resumed = Some(Resumed {
            at: Timestamp::now(),
            loops: 2,
            previous: "FAILED: budget exhausted".into(),
            history: (1..=2)
                .map(|n| Saved {
                    number: n,
                    action: LoopAction::RunWorker,
                    worker: Some(SavedWorker::new(
                        "completed",
                        Some(0),
                        &format!("earlier {n}"),
                    )),
                    test: Some(SavedTest::new(false, Some(1), false, "still red")),
                    reason: None,
                })
                .collect(),
            usage: Default::default(),
            elapsed: Duration::ZERO,
            worker_session: None,
            earlier_note: None,
            message: None,
        });
        let request: serde_norway::Value = serde_norway::from_str(&request(&ctx, "x")).unwrap();
        let history = request["history"].as_sequence().unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(history[1]["action"], "run_worker");
        assert_eq!(history[1]["worker"]["summary"], "earlier 2");
        assert_eq!(history[1]["test"]["output_tail"], "still red");
    }
}
