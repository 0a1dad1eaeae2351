//! A Meta reached over HTTP: one `WireFormat` per API (what a request body holds,
//! what a response means) over the one retrying `Transport`. `HttpMeta` is the
//! `ChatBackend` they make together; adding an API is one file with a `WireFormat`.

use std::time::Duration;

use super::transport::{Answer, Read, Transport};
use super::{BackendError, ChatBackend, ChatMessage, Completion, MetaError, ReplyFormat};
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

    /// The request body for the conversation so far, the reply held to `reply`
    /// where the API can.
    fn body(&self, messages: &[ChatMessage], reply: &ReplyFormat) -> serde_json::Value;

    /// What a successful response holds; Err: it is no response of this API at all
    /// (a proxy's page, a cut JSON document), worth another attempt.
    /// `redactor` masks what a message shows of the body.
    fn read(&self, body: &str, reply: &ReplyFormat, redactor: &Redactor)
    -> Result<Reading, String>;
}

/// A response as the conversation needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub(crate) text: String,
    /// None: the API reported no usage.
    pub(crate) usage: Option<Tokens>,
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
    pub(crate) fn new(
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
            return Read::Fail(MetaError::Failed(answer.failure()));
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
}

impl<W: WireFormat> ChatBackend for HttpMeta<W> {
    fn complete(
        &mut self,
        messages: &[ChatMessage],
        reply: &ReplyFormat,
    ) -> Result<Completion, BackendError> {
        let body = self.format.body(messages, reply).to_string().into_bytes();
        let (reading, attempts) = self
            .transport
            .post(&body, |answer| self.read(answer, reply))?;
        Ok(Completion {
            text: reading.text,
            attempts,
            usage: reading.usage,
        })
    }

    fn interrupt(&self) -> Interrupt {
        self.transport.interrupt
    }

    fn model(&self) -> Option<&str> {
        Some(&self.model)
    }
}
