//! The state machine's events (SPEC §19), from its own records: a Meta call once
//! answered, a worker or test run as it begins and once it ended. State changes
//! are written by `TaskContext::transition`, worker items by the sandbox as the
//! worker's stream goes by, denied connections by the egress proxy.

use agent_runner_core::usage::Usage;
use agent_runner_meta::MetaCall;
use agent_runner_sandbox::worker::{TestRun, WorkerRun};
use agent_runner_settings::events::{
    BudgetLimit, CallTokens, CallType, Event, Events, Named, Phase,
};

/// A Meta call, answered or given up.
pub(crate) fn meta_call(events: &Events, call: &MetaCall) {
    events.emit(Event::Meta {
        call: Named::<CallType>::parse(call.kind),
        duration_ms: call.duration.as_millis() as u64,
        requests: call.attempts,
        usage: usage(&call.usage),
        error: call.error.clone(),
    });
}

/// A call's tokens as the event says them (SPEC §15), when its provider reported
/// them.
fn usage(usage: &Usage) -> Option<CallTokens> {
    let tokens = usage.tokens?;
    Some(CallTokens {
        cached_input_tokens: tokens.cached_input_tokens,
        input_tokens: tokens.input_tokens,
        model: usage.model.clone(),
        output_tokens: tokens.output_tokens,
    })
}

/// Worker run `number` begins; `resumed_session` when it continues an earlier one.
pub(crate) fn worker_started(events: &Events, number: u32, resumed_session: bool) {
    events.emit(Event::WorkerRun {
        run: number,
        phase: Phase::Started,
        resumed_session,
        outcome: None,
        exit_code: None,
        duration_ms: None,
        summary: None,
    });
}

/// A worker run has ended.
pub(crate) fn worker_finished(events: &Events, run: &WorkerRun) {
    events.emit(Event::WorkerRun {
        run: run.number,
        phase: Phase::Finished,
        resumed_session: false,
        outcome: Some(run.outcome.into()),
        exit_code: run.exit_code,
        duration_ms: Some(run.duration.as_millis() as u64),
        summary: Some(run.summary.clone()),
    });
}

/// Test run `number` of `command` begins.
pub(crate) fn test_started(events: &Events, number: u32, command: &str) {
    events.emit(Event::Test {
        run: number,
        phase: Phase::Started,
        command: command.to_string(),
        exit_code: None,
        passed: None,
        timed_out: false,
        duration_ms: None,
    });
}

/// A test run has ended.
pub(crate) fn test_finished(events: &Events, run: &TestRun) {
    events.emit(Event::Test {
        run: run.number,
        phase: Phase::Finished,
        command: run.command.clone(),
        exit_code: run.exit_code,
        passed: Some(run.passed()),
        timed_out: run.timed_out,
        duration_ms: Some(run.duration.as_millis() as u64),
    });
}

/// A budget limit ended the task (SPEC §15: `limit` is `max_tokens`,
/// `max_cost_usd` or `max_duration_sec`; `message` the task's error).
pub(crate) fn budget(events: &Events, limit: BudgetLimit, message: &str) {
    events.emit(Event::Budget {
        limit: limit.into(),
        message: message.to_string(),
    });
}
