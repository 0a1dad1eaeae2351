//! Tokens one paid call used, as its provider reported them, and the record of the
//! call that a price turns into a cost.

use serde::{Deserialize, Serialize};

/// Token counts of one call or of a sum of calls. Cached input tokens (read from
/// the provider's cache) and cache-write input tokens (written to it, Anthropic's
/// `cache_creation_input_tokens`) are part of the input tokens, as the OpenAI APIs
/// count them; reasoning tokens are part of the output tokens, shown apart. The two
/// counts only some providers report are left out of JSON while zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub cached_input_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Tokens {
    /// Input plus output (cached tokens are already in the input).
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Adds `other`, saturating: a forged count must not wrap a total to zero.
    pub fn add(&mut self, other: &Tokens) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
        self.cache_write_input_tokens = self
            .cache_write_input_tokens
            .saturating_add(other.cache_write_input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
    }

    pub fn is_zero(&self) -> bool {
        *self == Tokens::default()
    }
}

/// What one paid call (a Meta exchange, a worker run) used.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// The model it ran on, which names its price; None when agent-runner cannot
    /// know it (codex's own default model) or when no model ran (scripted Meta).
    pub model: Option<String>,
    /// What the provider reported; None when it reported nothing (a reply without
    /// `usage`, a worker run stopped before its turn completed). Never guessed.
    pub tokens: Option<Tokens>,
    /// The cost the CLI itself reported for the run (e.g. a `total_cost_usd` in its
    /// event stream). Used only when the model has no price in `runner.pricing`:
    /// the user's prices win.
    pub reported_cost_usd: Option<f64>,
}

impl Usage {
    /// A call that reported `tokens` on `model`.
    pub fn of(model: Option<&str>, tokens: Option<Tokens>) -> Usage {
        Usage {
            model: model.map(str::to_string),
            tokens,
            reported_cost_usd: None,
        }
    }

    /// A call that cost nothing (scripted Meta: no model ran).
    pub fn free() -> Usage {
        Usage::of(None, Some(Tokens::default()))
    }

    /// Input plus output tokens; 0 when not reported.
    pub fn total_tokens(&self) -> u64 {
        self.tokens.map_or(0, |t| t.total())
    }

    /// The model for people: its name, or what stands for it.
    pub fn model_label(&self) -> &str {
        self.model.as_deref().unwrap_or("(model not known)")
    }
}
