//! OpenAI Chat Completions over ureq: `POST {base_url}/chat/completions` with a bearer
//! key. Transient faults (5xx, 429, timeouts, connection errors, a response cut off
//! mid-way, a 200 whose body is not JSON, e.g. a proxy's HTML page) are retried up to
//! 3 times with backoff 1 s, 2 s, 4 s (`Retry-After` honoured, capped at 60 s); other
//! 4xx fail at once with the API's own message. The key goes in the header only, and
//! every response text is masked before it is cut for a message, so no prefix of a
//! secret an API echoes survives (SPEC §10).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{BackendError, ChatBackend, ChatMessage, Completion, MetaError};
use agent_runner_core::deadline::Deadline;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::{Redactor, Secret};
use agent_runner_core::text::cut;
use agent_runner_core::timestamp::human;
use agent_runner_core::usage::Tokens;

/// Retries after the first attempt.
pub(crate) const MAX_RETRIES: u32 = 3;
/// Longest `Retry-After` we wait.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Environment variable: backoff base in milliseconds (default 1000). Tests shorten it.
pub(crate) const BACKOFF_ENV: &str = "AGENT_RUNNER_META_BACKOFF_MS";
/// Largest backoff base accepted from `BACKOFF_ENV`.
pub(crate) const MAX_BACKOFF_BASE: Duration = Duration::from_secs(10);
/// How much of a response body a message shows.
const BODY_SHOWN: usize = 300;
/// Largest response body read.
const MAX_BODY: u64 = 8 << 20;
const TICK: Duration = Duration::from_millis(50);
/// Why no request goes out any more.
const DEADLINE_PASSED: &str =
    "the task's deadline (runner.budget.max_duration_sec) has passed; no request was sent";

/// The OpenAI Chat Completions backend.
pub struct OpenAiChat {
    agent: ureq::Agent,
    url: String,
    model: String,
    temperature: Option<f64>,
    key: Secret,
    /// Each request's own limit, cut to the time `deadline` leaves.
    timeout: Duration,
    deadline: Deadline,
    backoff_base: Duration,
    interrupt: Interrupt,
    redactor: Redactor,
}

impl OpenAiChat {
    /// `base_url` without the `/chat/completions` part; `timeout` bounds each request.
    pub fn new(
        base_url: &str,
        model: &str,
        temperature: Option<f64>,
        key: Secret,
        timeout: Duration,
    ) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .user_agent(concat!("agent-runner/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        OpenAiChat {
            agent,
            url: endpoint(base_url),
            model: model.to_string(),
            temperature,
            key,
            timeout,
            deadline: Deadline::none(),
            backoff_base: backoff_base(std::env::var(BACKOFF_ENV).ok().as_deref()),
            interrupt: Interrupt::never(),
            redactor: Redactor::default(),
        }
    }

    /// Masks `redactor`'s secrets in every response text before it is cut into an
    /// error message.
    pub fn masking(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// Gives up waiting (for an answer or a backoff) once `interrupt` is set.
    pub fn interruptible(mut self, interrupt: Interrupt) -> Self {
        self.interrupt = interrupt;
        self
    }

    /// Cuts each request's timeout and each backoff to the time `deadline` leaves,
    /// and sends nothing once it has passed.
    pub fn until(mut self, deadline: Deadline) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sets the backoff base (waits are base, 2 × base, 4 × base).
    pub fn with_backoff(mut self, base: Duration) -> Self {
        self.backoff_base = base;
        self
    }

    fn body(&self, messages: &[ChatMessage]) -> Vec<u8> {
        let mut body = json!({ "model": self.model, "messages": messages });
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        body.to_string().into_bytes()
    }

    /// One HTTP request, on its own thread so an interrupt need not wait for it.
    fn send(&self, body: &[u8]) -> Result<Answer, Fault> {
        let (tx, rx) = mpsc::channel();
        let agent = self.agent.clone();
        let url = self.url.clone();
        let auth = format!("Bearer {}", self.key.expose());
        let body = body.to_vec();
        let (timeout, _) = self.deadline.cut(self.timeout);
        std::thread::spawn(move || {
            let _ = tx.send(request(&agent, &url, &auth, body, timeout));
        });
        loop {
            match rx.recv_timeout(TICK) {
                Ok(result) => return result,
                Err(mpsc::RecvTimeoutError::Timeout) if self.interrupt.is_set() => {
                    return Err(Fault::Interrupted);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Fault::Fatal("the HTTP request thread died".into()));
                }
            }
        }
    }
}

/// A response worth reading: its status, `Retry-After` and body.
struct Answer {
    status: u16,
    retry_after: Option<u64>,
    body: String,
}

enum Fault {
    /// Worth another attempt (timeout, connection error).
    Transient(String),
    Fatal(String),
    Interrupted,
}

fn request(
    agent: &ureq::Agent,
    url: &str,
    auth: &str,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Answer, Fault> {
    let mut response = agent
        .post(url)
        .config()
        .timeout_global(Some(timeout))
        .build()
        .header("Authorization", auth)
        .header("Content-Type", "application/json")
        .send(body)
        .map_err(|e| transport_fault(url, e))?;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .map_err(|e| transport_fault(url, e))?;
    Ok(Answer {
        status,
        retry_after,
        body,
    })
}

fn transport_fault(url: &str, e: ureq::Error) -> Fault {
    match e {
        ureq::Error::Timeout(_) => Fault::Transient(format!("POST {url}: timed out")),
        // Protocol: e.g. a response cut off mid-way by a proxy or a dropped link.
        ureq::Error::Io(_)
        | ureq::Error::ConnectionFailed
        | ureq::Error::HostNotFound
        | ureq::Error::Protocol(_) => Fault::Transient(format!("POST {url}: {e}")),
        other => Fault::Fatal(format!("POST {url}: {other}")),
    }
}

/// `{base_url}/chat/completions`, the path going before any query string.
fn endpoint(base_url: &str) -> String {
    let (base, query) = match base_url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (base_url, String::new()),
    };
    format!("{}/chat/completions{query}", base.trim_end_matches('/'))
}

/// The backoff base from `BACKOFF_ENV`: milliseconds, at most `MAX_BACKOFF_BASE`;
/// anything else is ignored with a warning.
fn backoff_base(value: Option<&str>) -> Duration {
    const DEFAULT: Duration = Duration::from_secs(1);
    let Some(value) = value else {
        return DEFAULT;
    };
    match value.trim().parse::<u64>() {
        Ok(ms) if Duration::from_millis(ms) <= MAX_BACKOFF_BASE => Duration::from_millis(ms),
        _ => {
            log::warn!(
                "{BACKOFF_ENV}={value:?} is not a number of milliseconds up to {}; using 1000",
                MAX_BACKOFF_BASE.as_millis()
            );
            DEFAULT
        }
    }
}

/// How long to wait before retry `attempt` (1-based): the server's `Retry-After`
/// (capped), else exponential backoff.
fn retry_wait(retry_after: Option<u64>, base: Duration, attempt: u32) -> Duration {
    match retry_after {
        Some(secs) => Duration::from_secs(secs).min(MAX_RETRY_AFTER),
        None => base * 2u32.pow(attempt.saturating_sub(1).min(16)),
    }
}

/// What went wrong in a response, said from its body: the API's own error message
/// (`{"error": {"message": ...}}`), else the body's start. Masked, then cut.
fn body_problem(body: &str, redactor: &Redactor) -> String {
    let message = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| body.trim().to_string());
    cut(&redactor.redact(&message), BODY_SHOWN)
}

/// `choices[0].message.content` and the `usage`; an absent or null content is an
/// empty reply (which then fails the reply checks and is asked again). A body that
/// is not a completion (a proxy's page, a cut-off JSON document) is the problem text.
fn content(body: &str, redactor: &Redactor) -> Result<(String, Option<Tokens>), String> {
    let value: serde_json::Value = serde_json::from_str(body).map_err(|e| {
        format!(
            "the response is not JSON ({e}): {}",
            body_problem(body, redactor)
        )
    })?;
    let choice = value["choices"]
        .get(0)
        .ok_or("the response has no choices")?;
    let text = choice["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Ok((text, usage(&value["usage"])))
}

/// The Chat Completions `usage` object: `prompt_tokens`, `completion_tokens` and
/// `prompt_tokens_details.cached_tokens` (0 when a server gives no details). None
/// when there is no usage or its counts are not numbers: never guessed.
fn usage(value: &serde_json::Value) -> Option<Tokens> {
    let input_tokens = value["prompt_tokens"].as_u64()?;
    let output_tokens = value["completion_tokens"].as_u64()?;
    let cached_input_tokens = value["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    Some(Tokens {
        input_tokens,
        cached_input_tokens,
        output_tokens,
    })
}

/// Waits `d`, or less if interrupted; false when interrupted.
fn pause(d: Duration, interrupt: Interrupt) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if interrupt.is_set() {
            return false;
        }
        std::thread::sleep(TICK.min(until.saturating_duration_since(Instant::now())));
    }
    !interrupt.is_set()
}

impl ChatBackend for OpenAiChat {
    fn interrupt(&self) -> Interrupt {
        self.interrupt
    }

    fn model(&self) -> Option<&str> {
        Some(&self.model)
    }

    fn complete(&mut self, messages: &[ChatMessage]) -> Result<Completion, BackendError> {
        let body = self.body(messages);
        let mut attempts = 0;
        loop {
            if self.deadline.passed() {
                return Err(BackendError {
                    error: MetaError::Failed(DEADLINE_PASSED.into()),
                    attempts,
                });
            }
            attempts += 1;
            let fail = |error: MetaError| BackendError { error, attempts };
            let (problem, retry_after) = match self.send(&body) {
                Ok(answer) if (200..300).contains(&answer.status) => {
                    match content(&answer.body, &self.redactor) {
                        Ok((text, usage)) => {
                            return Ok(Completion {
                                text,
                                attempts,
                                usage,
                            });
                        }
                        // Not a completion at all: a proxy or a broken link, worth
                        // another try. (A completion with bad content is re-asked.)
                        Err(e) => (format!("POST {}: {e}", self.url), None),
                    }
                }
                Ok(answer) if answer.status == 429 || answer.status >= 500 => (
                    format!(
                        "HTTP {} from POST {}: {}",
                        answer.status,
                        self.url,
                        body_problem(&answer.body, &self.redactor)
                    ),
                    answer.retry_after,
                ),
                Ok(answer) => {
                    return Err(fail(MetaError::Failed(format!(
                        "HTTP {} from POST {}: {}",
                        answer.status,
                        self.url,
                        body_problem(&answer.body, &self.redactor)
                    ))));
                }
                Err(Fault::Transient(problem)) => (problem, None),
                Err(Fault::Fatal(problem)) => return Err(fail(MetaError::Failed(problem))),
                Err(Fault::Interrupted) => return Err(fail(MetaError::Interrupted)),
            };
            if attempts > MAX_RETRIES {
                return Err(fail(MetaError::Failed(format!(
                    "{problem} (gave up after {attempts} attempts)"
                ))));
            }
            let (wait, _) = self
                .deadline
                .cut(retry_wait(retry_after, self.backoff_base, attempts));
            log::warn!("meta: {problem}; retrying in {}", human(wait));
            if !pause(wait, self.interrupt) {
                return Err(fail(MetaError::Interrupted));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_problems_prefer_the_error_field_and_are_masked_before_the_cut() {
        let none = Redactor::default();
        assert_eq!(
            body_problem(
                r#"{"error":{"message":"Incorrect API key provided"}}"#,
                &none
            ),
            "Incorrect API key provided"
        );
        assert_eq!(
            body_problem("  <html>bad gateway</html> ", &none),
            "<html>bad gateway</html>"
        );
        // A key echoed across the cut: masked first, so no prefix of it is left.
        let key = Secret::new("sk-secret-0123456789abcdefghijklmnopqrstuvwxyz".into());
        let body = format!("{}{}", "x".repeat(BODY_SHOWN - 10), key.expose());
        let shown = body_problem(&body, &Redactor::new([&key]));
        assert!(shown.ends_with("***"), "{shown}");
        assert!(!shown.contains("sk-secr"), "{shown}");
    }

    #[test]
    fn content_reads_the_first_choice() {
        let none = Redactor::default();
        assert_eq!(
            content(r#"{"choices":[{"message":{"content":"type: x"}}]}"#, &none),
            Ok(("type: x".into(), None))
        );
        assert_eq!(
            content(r#"{"choices":[{"message":{"content":null}}]}"#, &none),
            Ok((String::new(), None))
        );
        assert!(content(r#"{"choices":[]}"#, &none).is_err());
        assert!(
            content("nope", &none)
                .unwrap_err()
                .starts_with("the response is not JSON")
        );
    }

    #[test]
    fn usage_is_read_as_reported_and_never_guessed() {
        let read = |v: serde_json::Value| usage(&v);
        assert_eq!(
            read(json!({"prompt_tokens": 1000, "completion_tokens": 50,
                        "prompt_tokens_details": {"cached_tokens": 200}})),
            Some(Tokens {
                input_tokens: 1000,
                cached_input_tokens: 200,
                output_tokens: 50
            })
        );
        assert_eq!(
            read(json!({"prompt_tokens": 7, "completion_tokens": 3}))
                .map(|t| t.cached_input_tokens),
            Some(0)
        );
        for absent in [
            json!(null),
            json!({}),
            json!({"prompt_tokens": 7}),
            json!({"prompt_tokens": "7", "completion_tokens": 3}),
            json!({"prompt_tokens": -7, "completion_tokens": 3}),
        ] {
            assert_eq!(read(absent.clone()), None, "{absent}");
        }
    }

    #[test]
    fn the_path_goes_before_the_query() {
        assert_eq!(endpoint("http://h/v1/"), "http://h/v1/chat/completions");
        assert_eq!(
            endpoint("http://h/v1?api-key=k"),
            "http://h/v1/chat/completions?api-key=k"
        );
    }

    #[test]
    fn retry_after_is_capped_and_backoff_doubles() {
        let base = Duration::from_millis(100);
        assert_eq!(retry_wait(Some(3), base, 1), Duration::from_secs(3));
        assert_eq!(retry_wait(Some(86_400), base, 1), MAX_RETRY_AFTER);
        assert_eq!(retry_wait(None, base, 1), base);
        assert_eq!(retry_wait(None, base, 3), base * 4);
    }

    #[test]
    fn the_backoff_base_from_the_environment_is_bounded() {
        assert_eq!(backoff_base(None), Duration::from_secs(1));
        assert_eq!(backoff_base(Some("10")), Duration::from_millis(10));
        assert_eq!(backoff_base(Some("99999999999")), Duration::from_secs(1));
        assert_eq!(backoff_base(Some("soon")), Duration::from_secs(1));
    }

    #[test]
    fn temperature_is_sent_only_when_set() {
        let messages = [ChatMessage {
            role: "user",
            content: "hi".into(),
        }];
        let chat = OpenAiChat::new(
            "http://127.0.0.1:1/v1/",
            "m",
            None,
            Secret::new("k".into()),
            Duration::from_secs(1),
        );
        assert_eq!(chat.url, "http://127.0.0.1:1/v1/chat/completions");
        let body: serde_json::Value = serde_json::from_slice(&chat.body(&messages)).unwrap();
        assert_eq!(
            body,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        );
        let chat = OpenAiChat::new(
            "http://x/v1",
            "m",
            Some(0.2),
            Secret::new("k".into()),
            Duration::from_secs(1),
        );
        let body: serde_json::Value = serde_json::from_slice(&chat.body(&messages)).unwrap();
        assert_eq!(body["temperature"], json!(0.2));
    }
}
