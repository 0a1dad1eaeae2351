//! The one retrying JSON POST every HTTP wire format goes through (SPEC §5.2, §20):
//! over ureq, one kept-alive connection per backend, each request on a thread of its
//! own so that an interrupt need not wait for it. 429, 5xx (Anthropic's 529 too),
//! timeouts, connection errors and a response cut off mid-way are retried up to 3
//! times with backoff 1 s, 2 s, 4 s; a server's wait (`retry-after-ms`,
//! `Retry-After` in seconds or as an HTTP date, LiteLLM's `llm_provider-retry-after`)
//! is honoured up to 60 s, and a wait past the task's deadline fails at once. What an
//! answer means is the wire format's to say (`read`): it may ask for another attempt
//! (a 200 that is no response at all, e.g. a proxy's page). Header values (keys,
//! tokens) go in headers only, and every response text is masked before it is cut
//! for a message, so no prefix of a secret an API echoes survives (SPEC §10).
//! Redirects are not followed: a redirected request would carry every header
//! (`x-api-key`, `runner.meta.headers`) to wherever the answer points, so a 3xx is
//! an error naming that place (the fix is `runner.meta.base_url`).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{BackendError, MetaError};
use agent_runner_core::deadline::Deadline;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::{Redactor, Secret};
use agent_runner_core::text::cut;
use agent_runner_core::timestamp::human;

/// Retries after the first attempt.
pub(crate) const MAX_RETRIES: u32 = 3;
/// Longest wait a server may ask for.
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
pub(crate) const DEADLINE_PASSED: &str =
    "the task's deadline (runner.budget.max_duration_sec) has passed; no request was sent";
/// The headers that say how long to wait, in the order they are believed:
/// milliseconds first (OpenAI's and Anthropic's own), then seconds or a date, then
/// what LiteLLM passes on from the provider behind it under its own prefix.
const WAIT_HEADERS: [(&str, Unit); 4] = [
    ("retry-after-ms", Unit::Millis),
    ("retry-after", Unit::SecondsOrDate),
    ("llm_provider-retry-after-ms", Unit::Millis),
    ("llm_provider-retry-after", Unit::SecondsOrDate),
];

#[derive(Clone, Copy)]
enum Unit {
    Millis,
    SecondsOrDate,
}

/// Where requests go and how: the endpoint, the headers (values are secrets), each
/// request's time limit, the task's deadline, the backoff, the stop request and the
/// secrets to mask in what comes back.
pub(crate) struct Transport {
    agent: ureq::Agent,
    pub(crate) url: String,
    headers: Vec<(String, Secret)>,
    /// Each request's own limit, cut to the time `deadline` leaves.
    timeout: Duration,
    pub(crate) deadline: Deadline,
    pub(crate) backoff_base: Duration,
    pub(crate) interrupt: Interrupt,
    pub(crate) redactor: Redactor,
}

/// A response that is not a 429 or 5xx, for the wire format to read.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
    /// `POST <url>`, for messages.
    pub(crate) request: String,
    /// What the body says went wrong, masked then cut (`problem`).
    pub(crate) problem: String,
}

impl Answer {
    /// `HTTP 401 from POST <url>: <the API's message>`.
    pub(crate) fn failure(&self) -> String {
        format!(
            "HTTP {} from {}: {}",
            self.status, self.request, self.problem
        )
    }

    pub(crate) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// What a wire format makes of an answer.
pub(crate) enum Read<T> {
    Done(T),
    /// Not a response at all (a proxy, a broken link): worth another attempt.
    Retry(String),
    Fail(MetaError),
}

/// A response as it came: status, the wait it asks for, where a redirect points,
/// body.
struct Raw {
    status: u16,
    wait: Option<Duration>,
    location: Option<String>,
    body: String,
}

enum Fault {
    /// Worth another attempt (timeout, connection error).
    Transient(String),
    Fatal(String),
    Interrupted,
}

impl Transport {
    /// POSTs to `url` with `headers`; `timeout` bounds each request.
    pub(crate) fn new(url: String, headers: Vec<(String, Secret)>, timeout: Duration) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            // 0: a 3xx comes back as it is (see the module documentation).
            .max_redirects(0)
            .user_agent(concat!("agent-runner/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Transport {
            agent,
            url,
            headers,
            timeout,
            deadline: Deadline::none(),
            backoff_base: backoff_base(std::env::var(BACKOFF_ENV).ok().as_deref()),
            interrupt: Interrupt::never(),
            redactor: Redactor::default(),
        }
    }

    /// POSTs `body` until `read` makes something of an answer, or gives up; the
    /// requests it took come back with the result.
    pub(crate) fn post<T>(
        &self,
        body: &[u8],
        mut read: impl FnMut(&Answer) -> Read<T>,
    ) -> Result<(T, u32), BackendError> {
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
            let (problem, wait) = match self.send(body) {
                Ok(raw) if raw.status == 429 || raw.status >= 500 => (
                    format!(
                        "HTTP {} from POST {}: {}",
                        raw.status,
                        self.url,
                        body_problem(&raw.body, &self.redactor)
                    ),
                    raw.wait,
                ),
                Ok(raw) if (300..400).contains(&raw.status) => {
                    return Err(fail(MetaError::Failed(self.redirected(&raw))));
                }
                Ok(raw) => {
                    let answer = Answer {
                        status: raw.status,
                        problem: body_problem(&raw.body, &self.redactor),
                        body: raw.body,
                        request: format!("POST {}", self.url),
                    };
                    match read(&answer) {
                        Read::Done(value) => return Ok((value, attempts)),
                        Read::Retry(problem) => (problem, None),
                        Read::Fail(error) => return Err(fail(error)),
                    }
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
            let asked = wait.map(|w| w.min(MAX_RETRY_AFTER));
            let (pause_for, cut) = self
                .deadline
                .cut(asked.unwrap_or_else(|| backoff(self.backoff_base, attempts)));
            if cut && asked.is_some() {
                return Err(fail(MetaError::Failed(format!(
                    "{problem}; the server asks to wait {} before trying again, past the task's deadline (runner.budget.max_duration_sec)",
                    human(asked.unwrap_or_default())
                ))));
            }
            let why = if asked.is_some() {
                " as the server asks"
            } else {
                ""
            };
            log::warn!("meta: {problem}; retrying in {}{why}", human(pause_for));
            if !pause(pause_for, self.interrupt) {
                return Err(fail(MetaError::Interrupted));
            }
        }
    }

    /// Why a redirect fails the call: where it points (masked, escaped: the
    /// server's text) and what to do.
    fn redirected(&self, raw: &Raw) -> String {
        let target = raw.location.as_deref().map_or_else(
            || "nowhere (no Location header)".to_string(),
            |to| agent_runner_core::text::escape_controls(&cut(&self.redactor.redact(to), 300)),
        );
        format!(
            "HTTP {} from POST {}: a redirect to {target}, not followed (it would carry Meta's keys and headers there); set runner.meta.base_url to where the API is",
            raw.status, self.url
        )
    }

    /// One HTTP request, on its own thread so an interrupt need not wait for it.
    fn send(&self, body: &[u8]) -> Result<Raw, Fault> {
        let (tx, rx) = mpsc::channel();
        let agent = self.agent.clone();
        let url = self.url.clone();
        let headers: Vec<(String, String)> = self
            .headers
            .iter()
            .map(|(name, value)| (name.clone(), value.expose().to_string()))
            .collect();
        let body = body.to_vec();
        let (timeout, _) = self.deadline.cut(self.timeout);
        std::thread::spawn(move || {
            let _ = tx.send(request(&agent, &url, &headers, body, timeout));
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

fn request(
    agent: &ureq::Agent,
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Raw, Fault> {
    let mut builder = agent
        .post(url)
        .config()
        .timeout_global(Some(timeout))
        .build()
        .header("Content-Type", "application/json");
    for (name, value) in headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let mut response = builder.send(body).map_err(|e| transport_fault(url, e))?;
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let wait = server_wait(header);
    let location = header("location");
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .map_err(|e| transport_fault(url, e))?;
    Ok(Raw {
        status,
        wait,
        location,
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

/// The wait a response asks for, from the first of `WAIT_HEADERS` that says one.
fn server_wait(header: impl Fn(&str) -> Option<String>) -> Option<Duration> {
    WAIT_HEADERS.iter().find_map(|(name, unit)| {
        let value = header(name)?;
        let value = value.trim();
        let seconds = |v: &str| v.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0);
        match unit {
            Unit::Millis => seconds(value).map(|ms| Duration::from_secs_f64(ms.min(1e9) / 1000.0)),
            Unit::SecondsOrDate => seconds(value)
                .map(|s| Duration::from_secs_f64(s.min(1e9)))
                .or_else(|| agent_runner_core::timestamp::until_http_date(value)),
        }
    })
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

/// The wait before retry `attempt` (1-based) when the server asks for none.
fn backoff(base: Duration, attempt: u32) -> Duration {
    base * 2u32.pow(attempt.saturating_sub(1).min(16))
}

/// Why a body sent with a success status is no response of the API at all (a
/// proxy's page, a cut JSON document): worth another attempt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAResponse {
    /// With what the body says, masked and cut.
    #[error("the response is not JSON ({error}): {body}")]
    NotJson { error: String, body: String },
    /// The member every response of the API has (`choices`, `output`).
    #[error("the response has no {0}")]
    Missing(&'static str),
    #[error("the response is not a message")]
    NotAMessage,
    /// The API's own fault mid-response, its message masked and cut.
    #[error("the response failed: {0}")]
    Failed(String),
}

/// A successful response's body as JSON, or why it is not.
pub(crate) fn json_body(
    body: &str,
    redactor: &Redactor,
) -> Result<serde_json::Value, NotAResponse> {
    serde_json::from_str(body).map_err(|e| NotAResponse::NotJson {
        error: e.to_string(),
        body: body_problem(body, redactor),
    })
}

/// What went wrong in a response, said from its body: the API's own error message
/// (`{"error": {"message": ...}}`, OpenAI's and Anthropic's alike), else the body's
/// start. Masked, then cut.
pub(crate) fn body_problem(body: &str, redactor: &Redactor) -> String {
    let message = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| body.trim().to_string());
    cut(&redactor.redact(&message), BODY_SHOWN)
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
            body_problem(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                &none
            ),
            "Overloaded"
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
    fn the_server_says_how_long_to_wait_in_any_of_its_spellings() {
        let wait = |headers: &[(&str, &str)]| {
            let headers: Vec<(String, String)> = headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            server_wait(|name| {
                headers
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            })
        };
        assert_eq!(wait(&[("retry-after", "3")]), Some(Duration::from_secs(3)));
        assert_eq!(
            wait(&[("retry-after", "1.5")]),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            wait(&[("retry-after-ms", "250"), ("retry-after", "3")]),
            Some(Duration::from_millis(250)),
            "milliseconds win"
        );
        assert_eq!(
            wait(&[("llm_provider-retry-after", "2")]),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            wait(&[("retry-after", "Thu, 01 Jan 1970 00:00:00 GMT")]),
            Some(Duration::ZERO),
            "a date passed"
        );
        for useless in ["soon", "-1", "NaN", "inf", ""] {
            assert_eq!(wait(&[("retry-after", useless)]), None, "{useless}");
        }
        assert_eq!(wait(&[]), None);
    }

    #[test]
    fn backoff_doubles() {
        let base = Duration::from_millis(100);
        assert_eq!(backoff(base, 1), base);
        assert_eq!(backoff(base, 3), base * 4);
    }

    #[test]
    fn the_backoff_base_from_the_environment_is_bounded() {
        assert_eq!(backoff_base(None), Duration::from_secs(1));
        assert_eq!(backoff_base(Some("10")), Duration::from_millis(10));
        assert_eq!(backoff_base(Some("99999999999")), Duration::from_secs(1));
        assert_eq!(backoff_base(Some("soon")), Duration::from_secs(1));
    }
}
