//! The state machine with an in-memory Meta and sandbox.

use std::collections::VecDeque;
use std::time::Duration;

use quickcheck::{Arbitrary, Gen, quickcheck};

use super::protocol::{NextAction, Plan};
use super::*;
use crate::context::{Assessment, Criterion, Edges};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::timestamp::Timestamp;
use agent_runner_meta::MetaCall;
use agent_runner_sandbox::worker::{Teardown, TestRun, WorkerRun};
use agent_runner_settings::agent::Transcript;
use agent_runner_settings::task::TestSpec;

type Reply<T> = Result<T, MetaError>;

#[derive(Default)]
struct FakeMeta {
    /// The first plan, then one per replan.
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
        usage: agent_runner_core::usage::Usage::free(),
    };
    MetaOutcome { call, reply }
}

impl Meta for FakeMeta {
    fn plan_task(&mut self, _: &TaskContext) -> MetaOutcome<Plan> {
        record("plan_task", self.plans.pop_front())
    }
    fn replan(&mut self, _: &TaskContext, _: &str) -> MetaOutcome<Plan> {
        record("plan_task", self.plans.pop_front())
    }
    /// Lets every reply through, `replan` included, as a Meta that does not check
    /// might: the runner must refuse what is not offered itself.
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
    /// Tokens (input, output) each worker run reports; none when empty.
    worker_usage: VecDeque<(u64, u64)>,
    /// What git in the container sees after each run (Unknown when empty).
    repo: VecDeque<agent_runner_sandbox::worker::git::RepoChanges>,
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
            changes: self
                .repo
                .pop_front()
                .unwrap_or(agent_runner_sandbox::worker::git::RepoChanges::Unknown),
            leftovers: None,
            privileges: vec![],
            usage: agent_runner_core::usage::Usage::of(
                Some("worker-model"),
                self.worker_usage.pop_front().map(|(input, output)| {
                    agent_runner_core::usage::Tokens {
                        input_tokens: input,
                        cached_input_tokens: 0,
                        output_tokens: output,
                        ..Default::default()
                    }
                }),
            ),
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
        action: Action::RunWorker {
            prompt: prompt.into(),
        },
        reason: "work".into(),
    })
}

fn replan(reason: &str) -> Reply<NextAction> {
    Ok(NextAction {
        action: Action::Replan,
        reason: reason.into(),
    })
}

fn mark_complete() -> Reply<NextAction> {
    Ok(NextAction {
        action: Action::MarkComplete,
        reason: "done".into(),
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
    TaskContext::new(agent_runner_settings::task::test_task(extra))
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
        action: Action::Unknown("dance".into()),
        reason: "why not".into(),
    };
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: [Ok(action)].into(),
        ..Default::default()
    };
    run(&mut ctx, meta, &mut FakeSandbox::default());
    assert_eq!(
        ctx.failure.as_deref(),
        Some(
            "unknown action \"dance\" from next_action (expected run_worker, mark_complete or replan)"
        )
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

#[test]
fn a_replan_replaces_the_criteria_and_counts_as_a_loop() {
    use TaskState::*;
    let mut ctx = context(WITH_TEST);
    let new_plan = Ok(Plan {
        criteria: vec![Criterion {
            id: "NEW-1".into(),
            description: "the real requirement".into(),
            passed: false,
        }],
    });
    let meta = FakeMeta {
        plans: [plan(2), new_plan].into(),
        nexts: [
            run_worker("first"),
            replan("AC-2 cannot be met as written"),
            run_worker("again"),
        ]
        .into(),
        assessments: [assess(&["AC-1"]), assess(&["NEW-1"])].into(),
    };
    let mut sandbox = FakeSandbox::default();
    run(&mut ctx, meta, &mut sandbox);
    assert_eq!(ctx.state, Complete, "{:?}", ctx.failure);
    assert_eq!(
        states(&ctx),
        [
            (Pending, Planning),
            (Planning, Running),
            (Running, Validating),
            (Validating, Running),
            (Running, Planning),
            (Planning, Running),
            (Running, Validating),
            (Validating, Complete)
        ]
    );
    assert_eq!((ctx.loops, ctx.replans), (3, 1), "the replan is loop 2");
    assert_eq!(sandbox.prompts, ["first", "again"]);
    assert_eq!(
        ctx.worker_runs.iter().map(|r| r.number).collect::<Vec<_>>(),
        [1, 3]
    );
    // The new criteria are the ones judged; the old version is kept as it stood.
    assert_eq!(ctx.criteria.len(), 1);
    assert!(ctx.criteria[0].id == "NEW-1" && ctx.criteria[0].passed);
    type Version<'a> = (u32, &'a str, Vec<(&'a str, bool)>);
    let versions: Vec<Version> = ctx
        .criteria_versions
        .iter()
        .map(|v| {
            (
                v.at_loop,
                v.reason.as_str(),
                v.criteria
                    .iter()
                    .map(|c| (c.id.as_str(), c.passed))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        versions,
        [
            (0, "planned by Meta", vec![("AC-1", true), ("AC-2", false)]),
            (2, "AC-2 cannot be met as written", vec![])
        ]
    );
    let history = replan::history(&ctx, 1);
    let actions: Vec<&str> = history.iter().map(|h| h.action_name()).collect();
    assert_eq!(actions, ["run_worker", "replan", "run_worker"]);
}

#[test]
fn a_replan_that_is_not_offered_fails_even_if_meta_lets_it_through() {
    for (extra, why) in [
        (
            "  acceptance_criteria: [\"it builds\"]\n",
            "the task fixes its acceptance criteria",
        ),
        (
            "runner:\n  meta:\n    max_replans: 0\n",
            "runner.meta.max_replans (0) replans are used",
        ),
        (
            "runner:\n  meta:\n    max_loops: 1\n",
            "no loop would be left after it (loop 1 of 1)",
        ),
    ] {
        let mut ctx = context(extra);
        let meta = FakeMeta {
            plans: [plan(1), plan(1)].into(),
            nexts: [replan("again")].into(),
            ..Default::default()
        };
        let mut sandbox = FakeSandbox::default();
        run(&mut ctx, meta, &mut sandbox);
        let failure = ctx.failure.clone().unwrap_or_default();
        assert!(
            failure.starts_with("next_action answered replan, which is not available: ")
                && failure.contains(why),
            "{failure}"
        );
        assert_eq!((ctx.replans, ctx.loops), (0, 0));
        assert_eq!(
            ctx.meta_calls
                .iter()
                .filter(|c| c.kind == "plan_task")
                .count(),
            usize::from(!extra.contains("acceptance_criteria")),
            "no second plan_task"
        );
    }
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
            work: None,
            notices: Vec::new(),
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
    /// 0–5 run_worker, 6–7 mark_complete, 8 an unknown action, 9 a failed call,
    /// 10–11 replan.
    action: u8,
    worker: u8,
    test_exit: Option<i32>,
    passed_mask: u8,
    all_satisfied: Option<bool>,
    assessment_fails: bool,
    /// For a replan: its plan_task fails.
    replan_fails: bool,
}

impl Step {
    fn is_replan(&self) -> bool {
        self.action >= 10
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    max_loops: u32,
    max_replans: u32,
    criteria: usize,
    /// The task gives its criteria (no plan_task, no replan).
    fixed: bool,
    with_test: bool,
    plan_fails: bool,
    steps: Vec<Step>,
}

impl Arbitrary for Scenario {
    fn arbitrary(g: &mut Gen) -> Self {
        let steps = (0..usize::arbitrary(g) % 10)
            .map(|_| Step {
                action: u8::arbitrary(g) % 12,
                worker: u8::arbitrary(g) % 7,
                test_exit: if bool::arbitrary(g) {
                    Some(0)
                } else {
                    Option::<i32>::arbitrary(g)
                },
                passed_mask: u8::arbitrary(g),
                all_satisfied: Option::<bool>::arbitrary(g),
                assessment_fails: u8::arbitrary(g) % 20 == 0,
                replan_fails: u8::arbitrary(g) % 10 == 0,
            })
            .collect();
        Scenario {
            max_loops: 1 + u32::arbitrary(g) % 5,
            max_replans: u32::arbitrary(g) % 3,
            criteria: 1 + usize::arbitrary(g) % 4,
            fixed: u8::arbitrary(g) % 4 == 0,
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
    let fixed = if s.fixed {
        let given: Vec<String> = (1..=s.criteria).map(|i| format!("\"c{i}\"")).collect();
        format!("  acceptance_criteria: [{}]\n", given.join(", "))
    } else {
        String::new()
    };
    let mut ctx = context(&format!(
        "{test}{fixed}runner:\n  meta:\n    max_loops: {}\n    max_replans: {}\n",
        s.max_loops, s.max_replans
    ));
    let mut meta = FakeMeta::default();
    let mut sandbox = FakeSandbox::default();
    if !s.fixed {
        meta.plans.push_back(if s.plan_fails {
            Err(MetaError::Failed("x".into()))
        } else {
            plan(s.criteria)
        });
    }
    for step in &s.steps {
        meta.nexts.push_back(match step.action {
            0..=5 => run_worker("p"),
            6..=7 => mark_complete(),
            8 => Ok(NextAction {
                action: Action::Unknown("other".into()),
                reason: String::new(),
            }),
            9 => Err(MetaError::Failed("next".into())),
            _ => replan("the criteria are wrong"),
        });
        if step.is_replan() {
            // A replan asks plan_task, and runs no worker, test or assessment.
            meta.plans.push_back(if step.replan_fails {
                Err(MetaError::Failed("replan".into()))
            } else {
                plan(s.criteria)
            });
            continue;
        }
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
    if s.plan_fails && !s.fixed {
        return (Failed, 0, "meta plan_task failed");
    }
    let all = (1u8 << s.criteria) - 1;
    let mut passed = 0u8;
    let mut loops = 0;
    let mut replans = 0;
    // The fake sandbox hands out its worker outcomes in order, one per worker run
    // (a replan step has none).
    let mut workers = s
        .steps
        .iter()
        .filter(|step| !step.is_replan())
        .map(|step| step.worker);
    for step in &s.steps {
        match step.action {
            0..=5 if workers.next() == Some(6) => return (Failed, loops, "sandbox: "),
            0..=7 => {}
            8 => return (Failed, loops, "unknown action"),
            9 => return (Failed, loops, "meta next_action failed"),
            _ => {
                // Offered only for planned criteria, within max_replans, and with a
                // loop left after it.
                if s.fixed || replans >= s.max_replans || loops + 1 >= s.max_loops {
                    return (Failed, loops, "next_action answered replan");
                }
                if step.replan_fails {
                    return (Failed, loops, "meta plan_task failed");
                }
                loops += 1;
                replans += 1;
                // New criteria, none passed yet.
                passed = 0;
                continue;
            }
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
        // A replan is the RUNNING → PLANNING edge, and only that is.
        let back = ctx.transitions.iter().filter(|t| (t.from, t.to) == (TaskState::Running, TaskState::Planning)).count();
        assert!(back as u32 >= ctx.replans && back as u32 <= ctx.replans + 1, "{s:?}");
        // Bounded by max_loops and max_replans; every replan made a version.
        assert!(ctx.worker_runs.len() as u32 <= s.max_loops && ctx.loops <= s.max_loops, "{s:?}");
        assert!(ctx.replans <= s.max_replans, "{s:?}");
        if !ctx.criteria_versions.is_empty() {
            assert_eq!(ctx.criteria_versions.len() as u32, 1 + ctx.replans, "{s:?}");
        }
        if s.fixed {
            assert_eq!(ctx.replans, 0, "fixed criteria are never re-planned: {s:?}");
        }
        // Which terminal state, after how many loops, is `the_outcome_follows_from_the_scenario`.
        assert_eq!(sandbox.shutdowns, 1);
        true
    }
}

/// A fake Meta whose calls report tokens (input, output), in order, on `meta-model`.
struct Paid {
    meta: FakeMeta,
    usage: VecDeque<(u64, u64)>,
}

impl Paid {
    fn priced<T>(&mut self, mut outcome: MetaOutcome<T>) -> MetaOutcome<T> {
        if let Some((input, output)) = self.usage.pop_front() {
            outcome.call.usage = agent_runner_core::usage::Usage::of(
                Some("meta-model"),
                Some(agent_runner_core::usage::Tokens {
                    input_tokens: input,
                    cached_input_tokens: 0,
                    output_tokens: output,
                    ..Default::default()
                }),
            );
        }
        outcome
    }
}

impl Meta for Paid {
    fn plan_task(&mut self, ctx: &TaskContext) -> MetaOutcome<Plan> {
        let outcome = self.meta.plan_task(ctx);
        self.priced(outcome)
    }
    fn next_action(&mut self, ctx: &TaskContext) -> MetaOutcome<NextAction> {
        let outcome = self.meta.next_action(ctx);
        self.priced(outcome)
    }
    fn replan(&mut self, ctx: &TaskContext, reason: &str) -> MetaOutcome<Plan> {
        let outcome = self.meta.replan(ctx, reason);
        self.priced(outcome)
    }
    fn completion_assessment(&mut self, ctx: &TaskContext) -> MetaOutcome<Assessment> {
        let outcome = self.meta.completion_assessment(ctx);
        self.priced(outcome)
    }
}

fn run_paid(
    ctx: &mut TaskContext,
    meta: FakeMeta,
    usage: &[(u64, u64)],
    sandbox: &mut FakeSandbox,
) {
    let mut checkpoint = |_: &TaskContext| {};
    let paid = Paid {
        meta,
        usage: usage.iter().copied().collect(),
    };
    Runner::new(paid, sandbox, &mut checkpoint, Interrupt::never()).run(ctx);
}

const BUDGET: &str =
    "  test:\n    command: make test\nrunner:\n  meta:\n    max_loops: 5\n  budget:\n";

fn meta_calls(ctx: &TaskContext) -> Vec<&'static str> {
    ctx.meta_calls.iter().map(|c| c.kind).collect()
}

#[test]
fn a_meta_call_that_reaches_max_tokens_ends_the_task_before_the_worker_runs() {
    let mut ctx = context(&format!("{BUDGET}    max_tokens: 150\n"));
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: [run_worker("go")].into(),
        ..FakeMeta::default()
    };
    let mut sandbox = FakeSandbox::default();
    run_paid(&mut ctx, meta, &[(90, 10), (40, 10)], &mut sandbox);
    assert_eq!(ctx.state, TaskState::Failed);
    assert_eq!(
        ctx.failure.as_deref(),
        Some("budget exhausted: max_tokens (150 of 150)")
    );
    assert_eq!(ctx.budget_exhausted, Some("max_tokens"));
    assert_eq!(meta_calls(&ctx), ["plan_task", "next_action"]);
    assert!(sandbox.prompts.is_empty(), "no worker run after the limit");
    assert_eq!(sandbox.shutdowns, 1);
}

#[test]
fn a_worker_run_that_reaches_max_tokens_ends_the_task_before_tests_and_meta() {
    let mut ctx = context(&format!("{BUDGET}    max_tokens: 1000\n"));
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: [run_worker("go")].into(),
        assessments: [assess(&[])].into(),
    };
    let mut sandbox = FakeSandbox {
        worker_usage: [(700, 90)].into(),
        ..FakeSandbox::default()
    };
    run_paid(&mut ctx, meta, &[(100, 10), (100, 10)], &mut sandbox);
    assert_eq!(
        ctx.failure.as_deref(),
        Some("budget exhausted: max_tokens (1010 of 1000)")
    );
    assert_eq!(meta_calls(&ctx), ["plan_task", "next_action"]);
    assert_eq!((sandbox.prompts.len(), sandbox.test_calls), (1, 0));
    assert_eq!(ctx.loops, 1, "the run happened: a resume goes on after it");
}

/// SPEC §19: a resumed task's budget counts what the runs before used and how long
/// they ran, and its `max_replans` the replans they made.
#[test]
fn a_resumed_task_counts_the_runs_before_against_its_budget() {
    let resumed = |tokens: u64, elapsed: u64| crate::resume::Resumed {
        at: agent_runner_core::timestamp::Timestamp::now(),
        loops: 1,
        previous: "FAILED: budget exhausted".into(),
        history: vec![],
        usage: agent_runner_core::usage::Account {
            total_tokens: tokens,
            cost_usd: Some(0.0),
            ..Default::default()
        },
        elapsed: Duration::from_secs(elapsed),
        worker_session: None,
        earlier_note: None,
        message: None,
    };
    let resume = |ctx: &mut TaskContext, tokens: u64, elapsed: u64| {
        ctx.set_criteria(plan(1).unwrap().criteria, "from the saved state");
        ctx.loops = 1;
        ctx.resumed = Some(resumed(tokens, elapsed));
    };
    let meta = || FakeMeta {
        nexts: [run_worker("go")].into(),
        assessments: [assess(&[])].into(),
        ..FakeMeta::default()
    };
    // 900 before, 100 for next_action: the worker run does not start.
    let mut ctx = context(&format!(
        "{BUDGET}    max_tokens: 1000
"
    ));
    resume(&mut ctx, 900, 0);
    let mut sandbox = FakeSandbox::default();
    run_paid(&mut ctx, meta(), &[(90, 10)], &mut sandbox);
    assert_eq!(
        ctx.failure.as_deref(),
        Some("budget exhausted: max_tokens (1000 of 1000)")
    );
    assert_eq!(meta_calls(&ctx), ["next_action"], "no plan_task");
    assert!(sandbox.prompts.is_empty());
    assert_eq!(ctx.usage().total_tokens, 100, "this run's own");
    assert_eq!(ctx.task_usage().total_tokens, 1000, "the whole task's");
    // The time the runs before took counts against max_duration_sec.
    let mut ctx = context(&format!(
        "{BUDGET}    max_duration_sec: 60
"
    ));
    resume(&mut ctx, 0, 60);
    run_paid(&mut ctx, meta(), &[], &mut FakeSandbox::default());
    assert!(
        ctx.failure
            .as_deref()
            .is_some_and(|f| f.starts_with("budget exhausted: max_duration_sec (60.")),
        "{:?}",
        ctx.failure
    );
    assert!(ctx.meta_calls.is_empty());
}

#[test]
fn a_cost_limit_counts_with_the_users_prices() {
    // 1,000,000 tokens of meta-model at $2 per million: $2 per call.
    let yaml = "  test:\n    command: make test\nrunner:\n  meta:\n    model: meta-model\n  budget:\n    max_cost_usd: 5\n  pricing:\n    meta-model: {input: 2, output: 2}\n    worker-model: {input: 1, output: 1}\n  worker:\n    model: worker-model\n";
    let mut ctx = context(yaml);
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: [run_worker("a"), run_worker("b")].into(),
        assessments: [assess(&[]), assess(&[])].into(),
    };
    let mut sandbox = FakeSandbox {
        tests: [Some(1), Some(1)].into(),
        ..FakeSandbox::default()
    };
    run_paid(&mut ctx, meta, &[(1_000_000, 0); 5], &mut sandbox);
    // plan 2 + next 2 → 4 (< 5); run 1 (no usage); test; assess 2 → 6: the next
    // loop's Meta call does not start.
    assert_eq!(
        ctx.failure.as_deref(),
        Some("budget exhausted: max_cost_usd (6 of 5)")
    );
    assert_eq!(
        meta_calls(&ctx),
        ["plan_task", "next_action", "completion_assessment"]
    );
    assert_eq!(ctx.budget_exhausted, Some("max_cost_usd"));
}

#[test]
fn a_task_completed_by_the_call_that_passes_a_limit_stays_complete() {
    let mut ctx = context(&format!("{BUDGET}    max_tokens: 100\n"));
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: [run_worker("go")].into(),
        assessments: [assess(&["AC-1"])].into(),
    };
    let mut sandbox = FakeSandbox::default();
    run_paid(&mut ctx, meta, &[(10, 0), (10, 0), (500, 0)], &mut sandbox);
    assert_eq!(ctx.state, TaskState::Complete);
    assert_eq!(ctx.budget_exhausted, None);
    assert_eq!(ctx.usage().total_tokens, 520);
}

#[test]
fn a_passed_deadline_lets_no_paid_call_start() {
    let mut ctx = context(&format!("{BUDGET}    max_duration_sec: 60\n"));
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        ..FakeMeta::default()
    };
    let mut sandbox = FakeSandbox::default();
    let mut checkpoint = |_: &TaskContext| {};
    Runner::new(meta, &mut sandbox, &mut checkpoint, Interrupt::never())
        .until(agent_runner_core::deadline::Deadline::after(Some(
            Duration::ZERO,
        )))
        .run(&mut ctx);
    assert!(
        ctx.failure
            .as_deref()
            .is_some_and(|f| f.starts_with("budget exhausted: max_duration_sec (60.0 of 60)")),
        "{:?}",
        ctx.failure
    );
    assert!(ctx.meta_calls.is_empty());
    assert_eq!(ctx.budget_exhausted, Some("max_duration_sec"));
}

fn unchanged() -> agent_runner_sandbox::worker::git::RepoChanges {
    let state = agent_runner_sandbox::worker::git::GitState {
        head: Some("h".into()),
        status: vec![" M src/lib.rs".into()],
        more: 0,
    };
    agent_runner_sandbox::worker::git::RepoChanges::Seen {
        before: state.clone(),
        after: state,
        diff: vec![],
    }
}

#[test]
fn loops_that_change_nothing_end_the_task_without_asking_meta_again() {
    let mut ctx = context("  test:\n    command: make test\nrunner:\n  meta:\n    max_loops: 9\n");
    assert_eq!(ctx.task.bounds.max_stalled_loops, 3, "the default");
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: (0..9).map(|_| run_worker("again")).collect(),
        assessments: (0..9).map(|_| assess(&[])).collect(),
    };
    let mut sandbox = FakeSandbox {
        tests: [Some(1); 9].into(),
        repo: (0..9).map(|_| unchanged()).collect(),
        ..FakeSandbox::default()
    };
    run(&mut ctx, meta, &mut sandbox);
    assert_eq!(ctx.failure.as_deref(), Some("no progress in 3 loops"));
    assert_eq!(ctx.loops, 3);
    assert_eq!(
        meta_calls(&ctx)
            .iter()
            .filter(|k| **k == "completion_assessment")
            .count(),
        2,
        "the third loop's assessment is not asked"
    );
    assert_eq!(ctx.budget_exhausted, None);
}

#[test]
fn loops_that_change_the_repository_go_on() {
    let mut ctx = context(
        "  test:\n    command: make test\nrunner:\n  meta:\n    max_loops: 4\n  max_stalled_loops: 2\n",
    );
    let changed = |n: u32| {
        let agent_runner_sandbox::worker::git::RepoChanges::Seen {
            before,
            mut after,
            diff,
        } = unchanged()
        else {
            unreachable!()
        };
        after.status.push(format!("?? file{n}"));
        agent_runner_sandbox::worker::git::RepoChanges::Seen {
            before,
            after,
            diff,
        }
    };
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: (0..4).map(|_| run_worker("again")).collect(),
        assessments: (0..4).map(|_| assess(&[])).collect(),
    };
    let mut sandbox = FakeSandbox {
        tests: [Some(1); 4].into(),
        repo: (1..=4).map(changed).collect(),
        ..FakeSandbox::default()
    };
    run(&mut ctx, meta, &mut sandbox);
    assert!(
        ctx.failure
            .as_deref()
            .is_some_and(|f| f.starts_with("max_loops reached (4)")),
        "{:?}",
        ctx.failure
    );
    let mut off = context(
        "  test:\n    command: make test\nrunner:\n  meta:\n    max_loops: 4\n  max_stalled_loops: 0\n",
    );
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: (0..4).map(|_| run_worker("again")).collect(),
        assessments: (0..4).map(|_| assess(&[])).collect(),
    };
    let mut sandbox = FakeSandbox {
        tests: [Some(1); 4].into(),
        repo: (0..4).map(|_| unchanged()).collect(),
        ..FakeSandbox::default()
    };
    run(&mut off, meta, &mut sandbox);
    assert_eq!(off.loops, 4, "0 turns the stop off");
}

/// `max_stalled_loops: 1` does not stop a loop whose worker changed the repository:
/// a loop is compared with the state before it, not with itself.
#[test]
fn one_stalled_loop_does_not_stop_a_loop_that_changed_the_repository() {
    let mut ctx = context(
        "  test:\n    command: make test\nrunner:\n  meta:\n    max_loops: 2\n  max_stalled_loops: 1\n",
    );
    let agent_runner_sandbox::worker::git::RepoChanges::Seen {
        before, mut after, ..
    } = unchanged()
    else {
        unreachable!()
    };
    after.status.push("?? new.rs".into());
    let changed = agent_runner_sandbox::worker::git::RepoChanges::Seen {
        before,
        after,
        diff: vec![],
    };
    let meta = FakeMeta {
        plans: [plan(1)].into(),
        nexts: [run_worker("write it")].into(),
        assessments: [assess(&["AC-1"])].into(),
    };
    let mut sandbox = FakeSandbox {
        tests: [Some(0)].into(),
        repo: [changed].into(),
        ..FakeSandbox::default()
    };
    run(&mut ctx, meta, &mut sandbox);
    assert_eq!(ctx.failure, None);
    assert_eq!(ctx.state, TaskState::Complete);
}

#[test]
fn approve_plan_stops_after_plan_task_with_no_sandbox_and_no_paid_call_after() {
    use TaskState::*;
    let mut ctx = context(
        "  test:\n    command: make test\nrunner:\n  meta:\n    max_loops: 3\n    approve_plan: true\n",
    );
    let meta = FakeMeta {
        plans: [plan(2)].into(),
        nexts: [run_worker("must not run")].into(),
        ..Default::default()
    };
    let mut sandbox = FakeSandbox::default();
    run(&mut ctx, meta, &mut sandbox);
    assert_eq!(ctx.state, AwaitingApproval, "{:?}", ctx.failure);
    assert_eq!(
        states(&ctx),
        [(Pending, Planning), (Planning, AwaitingApproval)]
    );
    assert_eq!(meta_calls(&ctx), ["plan_task"]);
    assert!(sandbox.prompts.is_empty() && sandbox.test_calls == 0);
    assert_eq!(ctx.criteria.len(), 2, "the plan is kept for the approval");
    assert!(ctx.failure.is_none() && ctx.finished.is_some());
}

#[test]
fn approve_plan_does_not_stop_a_task_whose_criteria_are_given() {
    let mut ctx = context(
        "  acceptance_criteria: [\"it builds\"]\nrunner:\n  meta:\n    approve_plan: true\n",
    );
    let meta = FakeMeta {
        nexts: [run_worker("do it")].into(),
        assessments: [assess(&["AC-1"])].into(),
        ..Default::default()
    };
    let mut sandbox = FakeSandbox::default();
    run(&mut ctx, meta, &mut sandbox);
    assert_eq!(ctx.state, TaskState::Complete, "{:?}", ctx.failure);
    assert_eq!(sandbox.prompts, ["do it"]);
}
