//! One Meta exchange, for any message type: the request goes out with the system
//! prompt; a reply that does not check is sent back with the problem, at most
//! `MAX_REASKS` times; everything is recorded in a `MetaCall`. Secrets are masked in
//! the request before it leaves, in every reply text before it is kept or cut, and
//! in every string of a parsed reply (the structure is parsed from the text as sent).

use std::time::{Duration, Instant};

use super::backend::{ChatBackend, ChatMessage, Form, ReplyFormat};
use super::reply::{Reask, Reply, parse_reply_masked};
use super::{MetaCall, MetaError, MetaOutcome};
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::cut;
use agent_runner_core::timestamp::{Timestamp, human};
use agent_runner_core::usage::Usage;

/// Invalid replies are answered by asking again, at most this many times.
pub(crate) const MAX_REASKS: u32 = 3;
/// Longest reply text kept in a record or sent back in a re-ask.
const MAX_REPLY_KEPT: usize = 16 * 1024;

/// Asks `backend` for a reply of type `T` to `request`.
pub fn ask<T: Reply>(
    backend: &mut dyn ChatBackend,
    system: String,
    request: &str,
    redactor: &Redactor,
) -> MetaOutcome<T> {
    ask_checked::<T, T>(backend, system, request, redactor, Ok)
}

/// Like `ask`, with `check` run on each reply that parses: a reply it rejects is
/// asked again with its message, like a parse error (a check that needs more than
/// the reply, e.g. the ids that exist).
pub fn ask_checked<T: Reply, U>(
    backend: &mut dyn ChatBackend,
    system: String,
    request: &str,
    redactor: &Redactor,
    check: impl FnMut(T) -> Result<U, Reask>,
) -> MetaOutcome<U> {
    ask_within::<T, U>(backend, system, request, redactor, check, &|_| None)
}

/// Like `ask_checked`; before each re-ask, `stop` is shown the call's usage so far
/// and may end the call with its reason (a budget that the re-asks used up: each is
/// a paid request resending the whole conversation).
pub fn ask_within<T: Reply, U>(
    backend: &mut dyn ChatBackend,
    system: String,
    request: &str,
    redactor: &Redactor,
    mut check: impl FnMut(T) -> Result<U, Reask>,
    stop: &dyn Fn(&Usage) -> Option<String>,
) -> MetaOutcome<U> {
    let kind = T::KIND;
    let clock = Instant::now();
    let request = redactor.redact(request);
    let mut messages = vec![
        ChatMessage {
            role: "system",
            content: system,
        },
        ChatMessage {
            role: "user",
            content: request.clone(),
        },
    ];
    let mut call = MetaCall {
        kind,
        started: Timestamp::now(),
        duration: Duration::ZERO,
        attempts: 0,
        request,
        replies: Vec::new(),
        error: None,
        usage: Usage::of(backend.model(), None),
    };
    let format = ReplyFormat {
        kind,
        schema: T::schema(),
    };
    let mut problem = String::new();
    for round in 0..=MAX_REASKS {
        let completion = match backend.complete(&messages, &format) {
            Ok(completion) => completion,
            Err(e) => {
                call.attempts += e.attempts;
                return finish(call, clock, Err(e.error), redactor);
            }
        };
        call.attempts += completion.attempts;
        if let Some(used) = &completion.usage {
            call.usage.tokens.get_or_insert_default().add(used);
        }
        let kept = cut(&redactor.redact(&completion.text), MAX_REPLY_KEPT);
        call.replies.push(kept.clone());
        let parsed = match completion.problem {
            Some(problem) => Some(Err(problem)),
            None => parse_reply_masked::<T>(&completion.text, redactor, backend.interrupt()),
        };
        let Some(parsed) = parsed else {
            return finish(call, clock, Err(MetaError::Interrupted), redactor);
        };
        match parsed.and_then(&mut check) {
            Ok(reply) => return finish(call, clock, Ok(reply), redactor),
            Err(e) => {
                problem = redactor.redact(&e);
                if round < MAX_REASKS {
                    if let Some(reason) = stop(&call.usage) {
                        let error = format!("invalid reply ({problem}), not asked again: {reason}");
                        return finish(call, clock, Err(MetaError::Failed(error)), redactor);
                    }
                    log::warn!("meta {kind}: invalid reply ({problem}); asking again");
                    // An API may refuse an empty turn (Anthropic's does).
                    let said = if kept.trim().is_empty() {
                        "(an empty reply)".to_string()
                    } else {
                        kept
                    };
                    messages.push(ChatMessage {
                        role: "assistant",
                        content: said,
                    });
                    messages.push(ChatMessage {
                        role: "user",
                        content: format!(
                            "Your reply was invalid: {problem}\n{}",
                            answer_again(backend.form(), kind)
                        ),
                    });
                }
            }
        }
    }
    let start = call
        .replies
        .last()
        .map(|r| cut(r.trim(), 200))
        .unwrap_or_default();
    let error = MetaError::Failed(format!(
        "no valid {kind} reply after {MAX_REASKS} re-asks: {problem}; the last reply began: {start:?}"
    ));
    finish(call, clock, Err(error), redactor)
}

/// How to answer again, in the form `form` holds a reply to.
fn answer_again(form: Form, kind: &str) -> String {
    match form {
        Form::Yaml => format!(
            "Answer again with exactly one YAML document of type {kind}, following the schema, without code fences or prose."
        ),
        Form::Schema => {
            format!("Answer again with one JSON object of type {kind}, following the schema.")
        }
        Form::Tool => {
            format!("Answer again by calling the tool {kind} once, its input following the schema.")
        }
    }
}

fn finish<T>(
    mut call: MetaCall,
    clock: Instant,
    reply: Result<T, MetaError>,
    redactor: &Redactor,
) -> MetaOutcome<T> {
    call.duration = clock.elapsed();
    let plural = if call.attempts == 1 { "" } else { "s" };
    let tokens = match &call.usage.tokens {
        Some(t) if !t.is_zero() => format!(", {} tokens", t.total()),
        Some(_) => String::new(),
        None => ", usage not reported".into(),
    };
    // Masked once here, for the log, the record and the caller alike.
    let reply = reply.map_err(|e| match e {
        MetaError::Failed(m) => MetaError::Failed(redactor.redact(&m)),
        other => other,
    });
    match &reply {
        Ok(_) => log::info!(
            "meta {}: {}, {} attempt{plural}{tokens}",
            call.kind,
            human(call.duration),
            call.attempts
        ),
        Err(e) => {
            log::warn!(
                "meta {} failed after {}, {} attempt{plural}{tokens}: {e}",
                call.kind,
                human(call.duration),
                call.attempts
            );
            call.error = Some(e.to_string());
        }
    }
    MetaOutcome { call, reply }
}
