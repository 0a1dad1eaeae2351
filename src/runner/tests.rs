//! The state machine with an in-memory Meta and sandbox.

use std::collections::VecDeque;
use std::time::Duration;

use quickcheck::{Arbitrary, Gen, quickcheck};

use super::protocol::Plan;
use super::*;
use crate::agent::Transcript;
use crate::context::{Assessment, Criterion};
use crate::interrupt::Interrupt;
use crate::meta::MetaCall;
use crate::task::TestSpec;
use crate::timestamp::Timestamp;
use crate::worker::{Teardown, TestRun, WorkerRun};

type Reply<T> = Result<T, MetaError>;

#[derive(Default)]
struct FakeMeta {
    plans: VecDeque<Reply<Plan>>,
    nexts: VecDeque<Reply<NextAction>>,
    assessments: VecDeque<Reply<Assessment>>,
}

fn record<T>(kind: &'static str, reply: Option<Reply<T>>) -> MetaOutcome<T> {
    let reply =
        reply.unwrap_or_else(|| Err(MetaError::Failed("fake meta: script exhausted".into())));
    let call = MetaCall {
        kind,
        started: Timestamp::now(),
        duration: Duration::ZERO,
        attempts: 1,
        request: String::new(),
        replies: vec![],
        error: reply.as_ref().err().map(|e| e.to_string()),
    };
    MetaOutcome { call, reply }
}

impl Meta for FakeMeta {
    fn plan_task(&mut self, _: &TaskContext) -> MetaOutcome<Plan> {
        record("plan_task", self.plans.pop_front())
    }
    fn next_action(&mut self, _: &TaskContext) -> MetaOutcome<NextAction> {
        record("next_action", self.nexts.pop_front())
    }
    fn completion_assessment(&mut self, _: &TaskContext) -> MetaOutcome<Assessment> {
        record("completion_assessment", self.assessments.pop_front())
    }
}

/// What the fake sandbox does on a worker run.
#[derive(Debug, Clone)]
enum WorkerStep {
    Outcome(RunOutcome),
    Broken,
}

#[derive(Default)]
struct FakeSandbox {
    workers: VecDeque<WorkerStep>,
    tests: VecDeque<Option<i32>>,
    prompts: Vec<String>,
    test_calls: u32,
    shutdowns: u32,
}

impl Sandbox for FakeSandbox {
    fn run_worker(&mut self, number: u32, prompt: &str) -> Result<WorkerRun, SandboxError> {
        self.prompts.push(prompt.to_string());
        let outcome = match self
            .workers
            .pop_front()
            .unwrap_or(WorkerStep::Outcome(RunOutcome::Completed))
        {
            WorkerStep::Outcome(o) => o,
            WorkerStep::Broken => {
                return Err(SandboxError::DaemonUnreachable("fake: daemon gone".into()));
            }
        };
        Ok(WorkerRun {
            number,
            started: Timestamp::now(),
            finished: Timestamp::now(),
            duration: Duration::ZERO,
            exit_code: Some(0),
            outcome,
            summary: "fake run".into(),
            transcript: Transcript::default(),
            log_path: "/dev/null".into(),
            output_bytes: 0,
            output_tail: String::new(),
            changes: crate::worker::git::RepoChanges::Unknown,
            leftovers: None,
            privileges: vec![],
        })
    }

    fn run_test(&mut self, number: u32, test: &TestSpec) -> Result<TestRun, SandboxError> {
        self.test_calls += 1;
        let exit_code = self.tests.pop_front().unwrap_or(Some(0));
        Ok(TestRun {
            number,
            command: test.command.clone(),
            cwd: String::new(),
            started: Timestamp::now(),
            duration: Duration::ZERO,
            exit_code,
            timed_out: exit_code.is_none(),
            interrupted: false,
            output_tail: String::new(),
            log_path: "/dev/null".into(),
            leftovers: None,
            privileges: vec![],
        })
    }

    fn shutdown(&mut self) -> Teardown {
        self.shutdowns += 1;
        Teardown::default()
    }
}

fn plan(n: usize) -> Reply<Plan> {
    Ok(Plan {
        criteria: (1..=n)
            .map(|i| Criterion {
                id: format!("AC-{i}"),
                description: format!("c{i}"),
                passed: false,
            })
            .collect(),
    })
}

fn run_worker(prompt: &str) -> Reply<NextAction> {
    Ok(NextAction {
        action: "run_worker".into(),
        reason: "work".into(),
        prompt: Some(prompt.into()),
    })
}

fn mark_complete() -> Reply<NextAction> {
    Ok(NextAction {
        action: "mark_complete".into(),
        reason: "done".into(),
        prompt: None,
    })
}

fn assess(passed: &[&str]) -> Reply<Assessment> {
    Ok(Assessment {
        summary: format!("passed {passed:?}"),
        passed_criteria: passed.iter().map(|s| s.to_string()).collect(),
        remaining_risks: vec![],
        all_criteria_satisfied: None,
    })
}

fn context(extra: &str) -> TaskContext {
    TaskContext::new(crate::task::test_task(extra))
}

const WITH_TEST: &str = "  test:\n    command: make test\nrunner:\n  meta:\n    max_loops: 3\n";

/// Runs the machine; returns the sandbox for inspection and the checkpoint count.
fn run(ctx: &mut TaskContext, meta: FakeMeta, sandbox: &mut FakeSandbox) -> usize {
    let mut checkpoints = 0;
    let mut checkpoint = |_: &TaskContext| checkpoints += 1;
    Runner::new(meta, sandbox, &mut checkpoint, Interrupt::never()).run(ctx);
    checkpoints
}

fn states(ctx: &TaskContext) -> Vec<(TaskState, TaskState)> {
    ctx.transitions.iter().map(|t| (t.from, t.to)).collect()
}

#[test]
fn happy_path_runs_worker_then_tests_then_completes() {
    use TaskState::*;
    let mut ctx = context(WITH_TEST);
    let meta = FakeMeta {
        plans: [plan(2)].into(),
        nexts: [run_worker("do it")].into(),
        assessments: [assess(&["AC-1", "AC-2"])].into(),
    };
    let mut sandbox = FakeSandbox::default();
    let checkpoints = run(&mut ctx, meta, &mut sandbox);
    assert_eq!(ctx.state, Complete);
    assert_eq!(
        states(&ctx),
        [
            (Pending, Planning),
            (Planning, Running),
            (Running, Validating),
            (Validating, Complete)
        ]
    );
    assert_eq!(sandbox.prompts, ["do it"]);
    assert_eq!((sandbox.test_calls, sandbox.shutdowns), (1, 1));
    assert_eq!(
        (ctx.loops, ctx.worker_runs.len(), ctx.meta_calls.len()),
        (1, 1, 3)
    );
    assert!(ctx.criteria.iter().all(|c| c.passed));
    assert!(ctx.failure.is_none() && ctx.finished.is_some());
    assert!(checkpoints >= 6, "a note after every step: {checkpoints}");
}

#[test]
fn criteria_given_by_the_task_skip_planning() {
    let mut ctx = context("  acceptance_criteria: [\"it builds\", \"it greets\"]\n");
    let meta = FakeMeta {
        nexts: [run_worker("do it")].into(),
        assessments: [assess(&["AC-1", "AC-2"])].into(),
        ..Default::default()
    };
    let mut sandbox = FakeSandbox::default();
    run(&mut ctx, meta, &mut sandbox);
    assert_eq!(ctx.state, TaskState::Complete, "{:?}", ctx.failure);
    let ids: Vec<(&str, &str)> = ctx
        .criteria
        .iter()
        .map(|c| (c.id.as_str(), c.description.as_str()))
        .collect();
    assert_eq!(ids, [("AC-1", "it builds"), ("AC-2", "it greets")]);
    assert!(
        ctx.meta_calls.iter().all(|c| c.kind != "plan_task"),
        "plan_task was not asked"
    );
}

#[test]
fn a_failing_test_sends_it_round_again() {
    let mut ctx = context(WITH_TEST);
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: [run_worker("first"), run_worker("fix the test")].into(),
        assessments: [assess(&["AC-1"]), assess(&["AC-1"])].into(),
    };
    let mut sandbox = FakeSandbox {
        tests: [Some(1), Some(0)].into(),
        ..Default::default()
    };
    run(&mut ctx, meta, &mut sandbox);
    assert_eq!(ctx.state, TaskState::Complete);
    assert_eq!(sandbox.prompts, ["first", "fix the test"]);
    assert_eq!(ctx.loops, 2);
}

#[test]
fn mark_complete_is_checked_not_trusted() {
    let mut ctx = context(WITH_TEST);
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: [mark_complete(), mark_complete(), mark_complete()].into(),
        assessments: [assess(&["AC-1"]), assess(&["AC-1"]), assess(&["AC-1"])].into(),
    };
    let mut sandbox = FakeSandbox {
        tests: [Some(1), Some(1), Some(1)].into(),
        ..Default::default()
    };
    run(&mut ctx, meta, &mut sandbox);
    assert_eq!(ctx.state, TaskState::Failed);
    assert_eq!(
        ctx.failure.as_deref(),
        Some("max_loops reached (3): the last test failed")
    );
    assert!(ctx.worker_runs.is_empty());
    assert_eq!(sandbox.test_calls, 3);
}

#[test]
fn unmet_criteria_keep_it_from_completing() {
    let mut ctx = context("runner:\n  meta:\n    max_loops: 2\n");
    let meta = FakeMeta {
        plans: [plan(2)].into(),
        nexts: [run_worker("a"), run_worker("b")].into(),
        assessments: [assess(&["AC-1", "AC-9"]), assess(&[])].into(),
    };
    let mut sandbox = FakeSandbox::default();
    run(&mut ctx, meta, &mut sandbox);
    assert_eq!(
        ctx.failure.as_deref(),
        Some("max_loops reached (2): 1/2 criteria passed")
    );
    assert!(
        ctx.criteria[0].passed && !ctx.criteria[1].passed,
        "passed flags are sticky"
    );
    assert_eq!(sandbox.test_calls, 0, "no test configured");
}

#[test]
fn all_criteria_satisfied_ticks_every_criterion() {
    let mut ctx = context("");
    let mut assessment = assess(&[]).unwrap();
    assessment.all_criteria_satisfied = Some(true);
    let meta = FakeMeta {
        plans: [plan(3)].into(),
        nexts: [run_worker("a")].into(),
        assessments: [Ok(assessment)].into(),
    };
    run(&mut ctx, meta, &mut FakeSandbox::default());
    assert_eq!(ctx.state, TaskState::Complete);
    assert!(ctx.criteria.iter().all(|c| c.passed));
}

#[test]
fn planning_failure_fails_without_touching_the_sandbox() {
    let mut ctx = context(WITH_TEST);
    let meta = FakeMeta {
        plans: [Err(MetaError::Failed(
            "HTTP 401 from POST x: bad key".into(),
        ))]
        .into(),
        ..Default::default()
    };
    let mut sandbox = FakeSandbox::default();
    run(&mut ctx, meta, &mut sandbox);
    assert_eq!(
        ctx.failure.as_deref(),
        Some("meta plan_task failed: HTTP 401 from POST x: bad key")
    );
    assert!(sandbox.prompts.is_empty() && sandbox.test_calls == 0);
    assert_eq!(ctx.meta_calls.len(), 1, "the failed call is recorded");
}

#[test]
fn unknown_action_fails() {
    let mut ctx = context("");
    let action = NextAction {
        action: "dance".into(),
        reason: "why not".into(),
        prompt: None,
    };
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: [Ok(action)].into(),
        ..Default::default()
    };
    run(&mut ctx, meta, &mut FakeSandbox::default());
    assert_eq!(
        ctx.failure.as_deref(),
        Some("unknown action \"dance\" from next_action (expected run_worker or mark_complete)")
    );
}

#[test]
fn worker_failures_go_to_meta_but_sandbox_failures_end_the_task() {
    let mut ctx = context("");
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: [run_worker("a"), run_worker("b")].into(),
        assessments: [assess(&[]), assess(&["AC-1"])].into(),
    };
    let mut sandbox = FakeSandbox {
        workers: [WorkerStep::Outcome(RunOutcome::TimedOut)].into(),
        ..Default::default()
    };
    run(&mut ctx, meta, &mut sandbox);
    assert_eq!(
        ctx.state,
        TaskState::Complete,
        "a timed-out run is reported, not fatal"
    );
    assert_eq!(ctx.worker_runs[0].outcome, RunOutcome::TimedOut);

    let mut ctx = context("");
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: [run_worker("a")].into(),
        ..Default::default()
    };
    let mut sandbox = FakeSandbox {
        workers: [WorkerStep::Broken].into(),
        ..Default::default()
    };
    run(&mut ctx, meta, &mut sandbox);
    assert_eq!(
        ctx.failure.as_deref(),
        Some("sandbox: docker daemon not reachable: fake: daemon gone")
    );
    assert_eq!(sandbox.shutdowns, 1);
}

/// A sandbox whose worker run is interrupted half way (as Ctrl-C would).
struct InterruptingSandbox {
    inner: FakeSandbox,
    interrupt: Interrupt,
}

impl Sandbox for InterruptingSandbox {
    fn run_worker(&mut self, number: u32, prompt: &str) -> Result<WorkerRun, SandboxError> {
        self.interrupt.trigger();
        let mut run = self.inner.run_worker(number, prompt)?;
        run.outcome = RunOutcome::Interrupted;
        Ok(run)
    }

    fn run_test(&mut self, number: u32, test: &TestSpec) -> Result<TestRun, SandboxError> {
        self.inner.run_test(number, test)
    }

    fn shutdown(&mut self) -> Teardown {
        self.inner.shutdown();
        Teardown {
            removed_in: Some(Duration::from_millis(7)),
            privileges: vec![],
            egress: None,
        }
    }
}

#[test]
fn clean_up_continues_after_an_interrupt() {
    let mut ctx = context(WITH_TEST);
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: [run_worker("a"), run_worker("b")].into(),
        assessments: [assess(&[]), assess(&["AC-1"])].into(),
    };
    let interrupt = Interrupt::manual();
    let mut sandbox = InterruptingSandbox {
        inner: FakeSandbox::default(),
        interrupt,
    };
    let mut notes: Vec<(TaskState, Option<Duration>)> = Vec::new();
    let mut checkpoint = |ctx: &TaskContext| {
        notes.push((ctx.state, ctx.teardown.as_ref().and_then(|t| t.removed_in)))
    };
    Runner::new(meta, &mut sandbox, &mut checkpoint, interrupt).run(&mut ctx);
    assert_eq!(ctx.state, TaskState::Failed);
    assert!(ctx.interrupted);
    assert_eq!(ctx.failure.as_deref(), Some("interrupted"));
    assert_eq!(sandbox.inner.test_calls, 0, "nothing more ran");
    assert_eq!(sandbox.inner.prompts, ["a"]);
    assert_eq!(sandbox.inner.shutdowns, 1, "the sandbox was still removed");
    assert_eq!(
        notes.last(),
        Some(&(TaskState::Failed, Some(Duration::from_millis(7)))),
        "the last note was written after the teardown"
    );
}

/// One scripted iteration for the property test.
#[derive(Debug, Clone)]
struct Step {
    action: u8,
    worker: u8,
    test_exit: Option<i32>,
    passed_mask: u8,
    all_satisfied: Option<bool>,
    assessment_fails: bool,
}

#[derive(Debug, Clone)]
struct Scenario {
    max_loops: u32,
    criteria: usize,
    with_test: bool,
    plan_fails: bool,
    steps: Vec<Step>,
}

impl Arbitrary for Scenario {
    fn arbitrary(g: &mut Gen) -> Self {
        let steps = (0..usize::arbitrary(g) % 10)
            .map(|_| Step {
                action: u8::arbitrary(g) % 10,
                worker: u8::arbitrary(g) % 7,
                test_exit: if bool::arbitrary(g) {
                    Some(0)
                } else {
                    Option::<i32>::arbitrary(g)
                },
                passed_mask: u8::arbitrary(g),
                all_satisfied: Option::<bool>::arbitrary(g),
                assessment_fails: u8::arbitrary(g) % 20 == 0,
            })
            .collect();
        Scenario {
            max_loops: 1 + u32::arbitrary(g) % 5,
            criteria: 1 + usize::arbitrary(g) % 4,
            with_test: bool::arbitrary(g),
            plan_fails: u8::arbitrary(g) % 10 == 0,
            steps,
        }
    }
}

fn play(s: &Scenario) -> (TaskContext, FakeSandbox) {
    let test = if s.with_test {
        "  test:\n    command: t\n"
    } else {
        ""
    };
    let mut ctx = context(&format!(
        "{test}runner:\n  meta:\n    max_loops: {}\n",
        s.max_loops
    ));
    let mut meta = FakeMeta::default();
    let mut sandbox = FakeSandbox::default();
    meta.plans.push_back(if s.plan_fails {
        Err(MetaError::Failed("x".into()))
    } else {
        plan(s.criteria)
    });
    for step in &s.steps {
        meta.nexts.push_back(match step.action {
            0..=5 => run_worker("p"),
            6..=7 => mark_complete(),
            8 => Ok(NextAction {
                action: "other".into(),
                reason: String::new(),
                prompt: None,
            }),
            _ => Err(MetaError::Failed("next".into())),
        });
        sandbox.workers.push_back(match step.worker {
            0 => WorkerStep::Outcome(RunOutcome::Completed),
            1 => WorkerStep::Outcome(RunOutcome::Failed),
            2 => WorkerStep::Outcome(RunOutcome::TimedOut),
            3 => WorkerStep::Outcome(RunOutcome::Stalled),
            4 => WorkerStep::Outcome(RunOutcome::Crashed),
            5 => WorkerStep::Outcome(RunOutcome::Completed),
            _ => WorkerStep::Broken,
        });
        sandbox.tests.push_back(step.test_exit);
        let passed: Vec<String> = (0..s.criteria)
            .filter(|i| step.passed_mask & (1 << i) != 0)
            .map(|i| format!("AC-{}", i + 1))
            .collect();
        meta.assessments.push_back(if step.assessment_fails {
            Err(MetaError::Failed("assess".into()))
        } else {
            Ok(Assessment {
                summary: "s".into(),
                passed_criteria: passed,
                remaining_risks: vec![],
                all_criteria_satisfied: step.all_satisfied,
            })
        });
    }
    run(&mut ctx, meta, &mut sandbox);
    (ctx, sandbox)
}

/// What the scenario must lead to, worked out from the scenario alone (not from
/// anything the runner records): the final state, the loops run, and how the
/// failure reason starts.
fn expected(s: &Scenario) -> (TaskState, u32, &'static str) {
    use TaskState::{Complete, Failed};
    if s.plan_fails {
        return (Failed, 0, "meta plan_task failed");
    }
    let all = (1u8 << s.criteria) - 1;
    let mut passed = 0u8;
    let mut loops = 0;
    // The fake sandbox hands out its worker outcomes in order, one per worker run.
    let mut workers = s.steps.iter().map(|step| step.worker);
    for step in &s.steps {
        match step.action {
            0..=5 if workers.next() == Some(6) => return (Failed, loops, "sandbox: "),
            0..=7 => {}
            8 => return (Failed, loops, "unknown action"),
            _ => return (Failed, loops, "meta next_action failed"),
        }
        loops += 1;
        let test_passed = !s.with_test || step.test_exit == Some(0);
        if step.assessment_fails {
            return (Failed, loops, "meta completion_assessment failed");
        }
        passed |= step.passed_mask & all;
        if step.all_satisfied == Some(true) {
            passed = all;
        }
        if passed == all && test_passed {
            return (Complete, loops, "");
        }
        if loops >= s.max_loops {
            return (Failed, loops, "max_loops reached");
        }
    }
    // The script ran out: the next next_action has no reply.
    (Failed, loops, "meta next_action failed")
}

quickcheck! {
    fn the_outcome_follows_from_the_scenario(s: Scenario) -> bool {
        let (ctx, sandbox) = play(&s);
        let (state, loops, reason) = expected(&s);
        assert_eq!((ctx.state, ctx.loops), (state, loops), "{s:?}");
        assert!(
            ctx.failure.as_deref().unwrap_or("").starts_with(reason),
            "{:?} does not start with {reason:?} in {s:?}",
            ctx.failure
        );
        assert_eq!(sandbox.shutdowns, 1, "the sandbox is always released");
        true
    }
}

quickcheck! {
    fn every_run_is_a_chain_of_edges_to_a_terminal_state(s: Scenario) -> bool {
        let (ctx, sandbox) = play(&s);
        // Ends in a terminal state; FAILED always carries a reason.
        assert!(ctx.state.is_terminal(), "{s:?}");
        assert_eq!(ctx.state == TaskState::Failed, ctx.failure.as_deref().is_some_and(|r| !r.is_empty()), "{s:?}");
        // Every transition is an edge of the machine, in a chain from PENDING.
        let mut at = TaskState::Pending;
        for t in &ctx.transitions {
            assert!(t.from == at && t.from.can_go_to(t.to), "{:?} in {s:?}", (t.from, t.to));
            at = t.to;
        }
        assert_eq!(at, ctx.state);
        // Bounded by max_loops.
        assert!(ctx.worker_runs.len() as u32 <= s.max_loops && ctx.loops <= s.max_loops, "{s:?}");
        // Which terminal state, after how many loops, is `the_outcome_follows_from_the_scenario`.
        assert_eq!(sandbox.shutdowns, 1);
        true
    }
}
