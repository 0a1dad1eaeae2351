//! One exchange with Meta as it happened (the record the Task Note and the logs
//! show), and how an exchange can fail.

use std::time::Duration;

use agent_runner_core::timestamp::Timestamp;
use agent_runner_core::usage::Usage;

/// A reply (or why there is none) and the record of the exchange that got it.
pub struct MetaOutcome<T> {
    pub call: MetaCall,
    pub reply: Result<T, MetaError>,
}

/// Why an exchange gave no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    #[error("{0}")]
    Failed(String),
    #[error("interrupted")]
    Interrupted,
}

/// A call's usage in a few words: `model m: 1200 tokens in (300 cached), 60 out`.
pub fn usage_line(usage: &Usage) -> String {
    let model = usage.model.as_deref().unwrap_or("no model");
    match &usage.tokens {
        Some(t) => format!(
            "{model}: {} tokens in ({} cached), {} out",
            t.input_tokens, t.cached_input_tokens, t.output_tokens
        ),
        None => format!("{model}: not reported"),
    }
}

/// One Meta call as it happened, for the Task Note.
#[derive(Debug, Clone)]
pub struct MetaCall {
    /// The message type (`plan_task`, `next_action`, ...).
    pub kind: &'static str,
    pub started: Timestamp,
    pub duration: Duration,
    /// Requests sent (HTTP requests, or script entries used), retries and re-asks included.
    pub attempts: u32,
    /// The request YAML (the user message), secrets masked.
    pub request: String,
    /// Every reply text received, in order, secrets masked; more than one when
    /// replies were invalid.
    pub replies: Vec<String>,
    pub error: Option<String>,
    /// What its requests used, summed over every reply (re-asks are paid too).
    pub usage: Usage,
}

impl MetaCall {
    /// The exchange as plain text for a log file: `header` first, then when, how
    /// long, how many requests, the error, the request and every reply.
    pub fn transcript(&self, header: &str) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(out, "{header}");
        let _ = writeln!(out, "started: {}", self.started);
        let _ = writeln!(out, "duration_ms: {}", self.duration.as_millis());
        let _ = writeln!(out, "requests: {}", self.attempts);
        let _ = writeln!(out, "usage: {}", usage_line(&self.usage));
        if let Some(error) = &self.error {
            let _ = writeln!(out, "error: {error}");
        }
        let _ = writeln!(out, "\n--- request ---\n{}", self.request.trim_end());
        for (n, reply) in self.replies.iter().enumerate() {
            let _ = writeln!(out, "\n--- reply {} ---\n{}", n + 1, reply.trim_end());
        }
        out
    }
}
