//! A Meta reached over HTTP: one `WireFormat` per API (what a request body holds,
//! what a response means) over the one retrying `Transport`. `HttpMeta` is the
//! `ChatBackend` they make together, with what every API shares (SPEC §20): a reply
//! cut off (`incomplete`, `max_tokens`) is asked again once with the reason; a
//! refusal fails the call with its text; a model the API does not know or serve
//! fails at once, naming the model, the kind and the fix; usage missing, or all
//! zeros on a reply that is not empty (what a gateway fills in when its backend
//! sent none), is unreported. Adding an API is one file with a `WireFormat`.

use std::time::Duration;

use super::transport::{Answer, NotAResponse, Read, Transport};
use super::{BackendError, ChatBackend, ChatMessage, Completion, Form, MetaError, ReplyFormat};
use agent_runner_core::deadline::Deadline;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::{Redactor, Secret};
use agent_runner_core::usage::Tokens;

/// One API's request and response formats.
pub trait WireFormat {
    /// `runner.meta.kind` of this API.
    fn kind(&self) -> &'static str;

    /// The endpoint under `base_url`.
    fn endpoint(&self, base_url: &str) -> String;

    /// How the API holds the model to a reply's type.
    fn form(&self) -> Form;

    /// The request body for the conversation so far, the reply held to `reply`
    /// where the API can.
    fn body(&self, messages: &[ChatMessage], reply: &ReplyFormat) -> serde_json::Value;

    /// What a successful response holds; Err: it is no response of this API at all
    /// (a proxy's page, a cut JSON document), worth another attempt. `redactor`
    /// masks what a message shows of the body.
    fn read(
        &self,
        body: &str,
        reply: &ReplyFormat,
        redactor: &Redactor,
    ) -> Result<Reading, NotAResponse>;

    /// What to do about an API whose error says it does not serve the model.
    fn unserved_fix(&self) -> &'static str;
}

/// A response as the conversation needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The reply text (a tool call's input as JSON).
    pub text: String,
    /// None: the API reported no usage.
    pub usage: Option<Tokens>,
    pub end: End,
}

/// How a response ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    Complete,
    /// Cut off before its end, for this reason (`max_output_tokens`).
    Incomplete(String),
    /// The model refused, saying this.
    Refused(String),
    /// Not the reply asked for (no call of the reply's tool): asked again.
    Invalid(String),
}

/// An HTTP API as a `ChatBackend`.
pub struct HttpMeta<W> {
    format: W,
    transport: Transport,
    model: String,
}

impl<W: WireFormat> HttpMeta<W> {
    /// `format` at `base_url` for `model`, with `headers` (their values are
    /// secrets: keys, tokens); `timeout` bounds each request.
    pub fn new(
        format: W,
        base_url: &str,
        model: &str,
        headers: Vec<(String, Secret)>,
        timeout: Duration,
    ) -> Self {
        let url = format.endpoint(base_url);
        HttpMeta {
            format,
            transport: Transport::new(url, headers, timeout),
            model: model.to_string(),
        }
    }

    /// Masks `redactor`'s secrets in every response text before it is cut into an
    /// error message.
    pub fn masking(mut self, redactor: Redactor) -> Self {
        self.transport.redactor = redactor;
        self
    }

    /// Gives up waiting (for an answer or a backoff) once `interrupt` is set.
    pub fn interruptible(mut self, interrupt: Interrupt) -> Self {
        self.transport.interrupt = interrupt;
        self
    }

    /// Cuts each request's timeout and each backoff to the time `deadline` leaves,
    /// and sends nothing once it has passed.
    pub fn until(mut self, deadline: Deadline) -> Self {
        self.transport.deadline = deadline;
        self
    }

    /// Sets the backoff base (waits are base, 2 × base, 4 × base).
    pub fn with_backoff(mut self, base: Duration) -> Self {
        self.transport.backoff_base = base;
        self
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.transport.url
    }

    fn read(&self, answer: &Answer, reply: &ReplyFormat) -> Read<Reading> {
        if !answer.is_success() {
            return Read::Fail(MetaError::Failed(self.failure(answer)));
        }
        match self
            .format
            .read(&answer.body, reply, &self.transport.redactor)
        {
            Ok(reading) => Read::Done(reading),
            // Not a response at all: a proxy or a broken link, worth another try. (A
            // response with bad content is asked again by the conversation.)
            Err(problem) => Read::Retry(format!("{}: {problem}", answer.request)),
        }
    }

    /// An error status said for people: a model the API does not know, or does not
    /// serve on this API, with what to do about it; else the API's own message.
    fn failure(&self, answer: &Answer) -> String {
        let value: serde_json::Value = serde_json::from_str(&answer.body).unwrap_or_default();
        let error = &value["error"];
        let code = error["code"]
            .as_str()
            .or_else(|| error["type"].as_str())
            .unwrap_or_default();
        let message = answer.problem.to_ascii_lowercase();
        let kind = self.format.kind();
        let model = &self.model;
        let unserved = code == "unsupported_api_for_model"
            || message.contains("only supported in v1/responses")
            || message.contains("not supported in the v1/chat/completions")
            || message.contains("not supported with the responses api");
        let unknown = code == "model_not_found"
            || (code == "not_found_error" && message.starts_with("model:"));
        if unserved {
            format!(
                "the model {model} is not served by the {kind} API at {} ({}); {}",
                self.transport.url,
                answer.failure(),
                self.format.unserved_fix()
            )
        } else if unknown {
            format!(
                "the model {model} is not known to the {kind} API at {} ({}); name a model this key can use in runner.meta.model (or --meta-model)",
                self.transport.url,
                answer.failure()
            )
        } else {
            answer.failure()
        }
    }
}

/// What an API reported, or None: none at all, or all zeros beside a reply that
/// is not empty (a gateway's stand-in for none). Never guessed.
fn reported(usage: Option<Tokens>, text: &str) -> Option<Tokens> {
    usage.filter(|tokens| !tokens.is_zero() || text.trim().is_empty())
}

impl<W: WireFormat> ChatBackend for HttpMeta<W> {
    fn complete(
        &mut self,
        messages: &[ChatMessage],
        reply: &ReplyFormat,
    ) -> Result<Completion, BackendError> {
        let mut messages = messages.to_vec();
        let mut attempts = 0;
        let mut usage: Option<Tokens> = None;
        let mut cut_off: Option<String> = None;
        loop {
            let body = self.format.body(&messages, reply).to_string().into_bytes();
            let (reading, tries) = self
                .transport
                .post(&body, |answer| self.read(answer, reply))
                .map_err(|mut e| {
                    e.attempts += attempts;
                    e
                })?;
            attempts += tries;
            if let Some(used) = reported(reading.usage, &reading.text) {
                usage.get_or_insert_default().add(&used);
            }
            let fail = |message: String| BackendError {
                error: MetaError::Failed(message),
                attempts,
            };
            let text = match self.format.form() {
                Form::Yaml => reading.text,
                // Strict mode's nulls mean "left out".
                Form::Schema | Form::Tool => super::reply::without_nulls(&reading.text),
            };
            let (text, problem) = match reading.end {
                End::Complete => (text, None),
                End::Invalid(problem) => (text, Some(problem)),
                End::Refused(said) => {
                    return Err(fail(format!(
                        "the model {} refused ({}): {}",
                        self.model,
                        self.format.kind(),
                        agent_runner_core::text::cut(&self.transport.redactor.redact(&said), 500)
                    )));
                }
                End::Incomplete(reason) => match cut_off {
                    Some(first) => {
                        return Err(fail(format!(
                            "the reply was cut off twice ({first}, then {reason}); asked again once"
                        )));
                    }
                    None => {
                        log::warn!("meta: the reply was cut off ({reason}); asking again");
                        if let Some(last) = messages.iter_mut().rev().find(|m| m.role == "user") {
                            last.content.push_str(&format!(
                                "\n\n(Your previous answer to this was cut off before its end: {reason}. Answer again, shorter.)"
                            ));
                        }
                        cut_off = Some(reason);
                        continue;
                    }
                },
            };
            return Ok(Completion {
                text,
                attempts,
                usage,
                problem,
            });
        }
    }

    fn form(&self) -> Form {
        self.format.form()
    }

    fn interrupt(&self) -> Interrupt {
        self.transport.interrupt
    }

    fn model(&self) -> Option<&str> {
        Some(&self.model)
    }
}

/// What the system prompt gains where the API holds a reply to its schema: the
/// seed's prompt asks for YAML, the API will take JSON only.
pub(crate) fn schema_note(kind: &str) -> String {
    format!(
        "\n\nThe API holds your reply to the JSON Schema of {kind}: answer with one JSON object following it (its `type` is \"{kind}\"), with null for what you leave out, instead of YAML."
    )
}

/// The system prompt of `messages` and the rest as the `{role, content}` objects
/// the APIs that take the system prompt apart (Responses, Messages) both send.
pub(crate) fn split_system(messages: &[ChatMessage]) -> (String, Vec<serde_json::Value>) {
    let mut system = String::new();
    let mut rest = Vec::new();
    for message in messages {
        if message.role == "system" {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str(&message.content);
        } else {
            rest.push(serde_json::json!({"role": message.role, "content": message.content}));
        }
    }
    (system, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_beside_a_reply_are_no_report() {
        let zero = Some(Tokens::default());
        assert_eq!(reported(zero, "type: x"), None);
        assert_eq!(reported(zero, "  "), zero, "nothing said, nothing used");
        let some = Some(Tokens {
            input_tokens: 3,
            ..Tokens::default()
        });
        assert_eq!(reported(some, "type: x"), some);
        assert_eq!(reported(None, "type: x"), None);
    }
}
