//! `runner.meta.kind: anthropic-messages`, the Anthropic Messages API (SPEC §20):
//! `POST {base_url}/v1/messages` (`x-api-key`, `anthropic-version: 2023-06-01`)
//! with the system prompt apart and the reply as the input of one tool whose
//! schema is the reply's. The tool is forced with `tool_choice`, but with extended
//! thinking (a reasoning effort: its budget), which the API refuses together with a
//! forced tool: then `tool_choice` is `auto`, and a reply that does not call the
//! tool is asked again. `stop_reason: max_tokens` is asked again once (`http`);
//! `refusal` ends the call.

use serde_json::{Value, json};

use super::http::{End, Reading, WireFormat, split_system};
use super::openai_chat::endpoint;
use super::transport::NotAResponse;
use super::{ChatMessage, Form, ReplyFormat};
use agent_runner_core::secret::Redactor;
use agent_runner_core::usage::Tokens;

/// The API version agent-runner speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Room for a reply beside the thinking budget: the largest reply (a plan, a
/// TaskConfig) is a few thousand tokens.
const REPLY_TOKENS: u32 = 8_192;

/// The Messages request and response.
pub struct AnthropicMessages {
    pub(crate) model: String,
    pub(crate) temperature: Option<f64>,
    /// The extended-thinking budget in tokens; None: no thinking.
    pub(crate) thinking_budget: Option<u32>,
}

impl WireFormat for AnthropicMessages {
    fn kind(&self) -> &'static str {
        "anthropic-messages"
    }

    fn endpoint(&self, base_url: &str) -> String {
        endpoint(base_url, "/v1/messages")
    }

    fn form(&self) -> Form {
        Form::Tool
    }

    fn body(&self, messages: &[ChatMessage], reply: &ReplyFormat) -> Value {
        let (mut system, messages) = split_system(messages);
        system.push_str(&format!(
            "\n\nAnswer by calling the tool {0} once: its input is your reply (its `type` is \"{0}\"), following the tool's schema, with null for what you leave out, instead of YAML.",
            reply.kind
        ));
        let mut body = json!({
            "model": self.model,
            "max_tokens": REPLY_TOKENS + self.thinking_budget.unwrap_or(0),
            "system": system,
            "messages": messages,
            "tools": [{
                "name": reply.kind,
                "description": format!("Give your {} reply.", reply.kind),
                "input_schema": reply.schema,
            }],
        });
        match self.thinking_budget {
            Some(budget) => {
                body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
                body["tool_choice"] = json!({"type": "auto"});
            }
            None => body["tool_choice"] = json!({"type": "tool", "name": reply.kind}),
        }
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        body
    }

    fn read(
        &self,
        body: &str,
        reply: &ReplyFormat,
        redactor: &Redactor,
    ) -> Result<Reading, NotAResponse> {
        let value: Value = super::transport::json_body(body, redactor)?;
        if value["type"] != "message" {
            return Err(NotAResponse::NotAMessage);
        }
        let content = value["content"].as_array().cloned().unwrap_or_default();
        let said: Vec<&str> = content
            .iter()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect();
        let said = said.join("\n");
        let call = content
            .iter()
            .find(|block| block["type"] == "tool_use" && block["name"] == reply.kind);
        let usage = usage(&value["usage"]);
        let (text, end) = match (value["stop_reason"].as_str(), call) {
            (Some("refusal"), _) => (String::new(), End::Refused(said)),
            (_, Some(call)) => (call["input"].to_string(), End::Complete),
            (Some("max_tokens"), None) => (said, End::Incomplete("max_tokens".into())),
            (_, None) => (
                said,
                End::Invalid(format!("the reply did not call the tool {}", reply.kind)),
            ),
        };
        Ok(Reading { text, usage, end })
    }

    fn unserved_fix(&self) -> &'static str {
        "name a model the Messages API serves in runner.meta.model"
    }
}

/// The Messages `usage`: `input_tokens` counts only the input after the last cache
/// breakpoint, so the input is it plus `cache_read_input_tokens` (cached) plus
/// `cache_creation_input_tokens` (written to the cache); the output's thinking is
/// `output_tokens_details.thinking_tokens`. None when there is none or its counts
/// are not numbers.
fn usage(value: &Value) -> Option<Tokens> {
    let count = |key: &str| value[key].as_u64();
    let read = count("cache_read_input_tokens").unwrap_or(0);
    let written = count("cache_creation_input_tokens").unwrap_or(0);
    Some(Tokens {
        input_tokens: count("input_tokens")?
            .saturating_add(read)
            .saturating_add(written),
        cached_input_tokens: read,
        cache_write_input_tokens: written,
        output_tokens: count("output_tokens")?,
        reasoning_tokens: value["output_tokens_details"]["thinking_tokens"]
            .as_u64()
            .unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply() -> ReplyFormat {
        ReplyFormat {
            kind: "plan_task",
            schema: crate::messages::plan_task(),
        }
    }

    fn format(thinking_budget: Option<u32>) -> AnthropicMessages {
        AnthropicMessages {
            model: "claude-sonnet-4-5".into(),
            temperature: None,
            thinking_budget,
        }
    }

    fn read(body: Value) -> Reading {
        format(None)
            .read(&body.to_string(), &reply(), &Redactor::default())
            .unwrap()
    }

    #[test]
    fn one_tool_forced_unless_thinking() {
        let messages = [
            ChatMessage {
                role: "system",
                content: "Plan.".into(),
            },
            ChatMessage {
                role: "user",
                content: "type: plan_task".into(),
            },
        ];
        let body = format(None).body(&messages, &reply());
        assert!(
            body["system"]
                .as_str()
                .unwrap()
                .starts_with("Plan.\n\nAnswer by calling the tool plan_task")
        );
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": "type: plan_task"}])
        );
        assert_eq!(body["tools"][0]["name"], "plan_task");
        assert_eq!(body["tools"][0]["input_schema"], reply().schema);
        assert_eq!(
            body["tool_choice"],
            json!({"type": "tool", "name": "plan_task"})
        );
        assert_eq!(body["max_tokens"], 8192);
        assert!(body.get("thinking").is_none());
        let body = format(Some(24_576)).body(&messages, &reply());
        assert_eq!(body["tool_choice"], json!({"type": "auto"}));
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 24576})
        );
        assert_eq!(body["max_tokens"], 24_576 + 8192);
    }

    #[test]
    fn the_tool_call_is_the_reply() {
        let reading = read(json!({
            "type": "message", "stop_reason": "tool_use",
            "content": [{"type": "text", "text": "Here it is."},
                        {"type": "tool_use", "id": "t1", "name": "plan_task", "input": {"type": "plan_task"}}],
            "usage": {"input_tokens": 100, "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 300, "output_tokens": 50,
                      "output_tokens_details": {"thinking_tokens": 20}},
        }));
        assert_eq!(
            (reading.text.as_str(), &reading.end),
            ("{\"type\":\"plan_task\"}", &End::Complete)
        );
        assert_eq!(
            reading.usage,
            Some(Tokens {
                input_tokens: 2400,
                cached_input_tokens: 2000,
                cache_write_input_tokens: 300,
                output_tokens: 50,
                reasoning_tokens: 20,
            })
        );
        let text_only = read(
            json!({"type": "message", "stop_reason": "end_turn", "content": [{"type": "text", "text": "type: plan_task"}]}),
        );
        assert_eq!(text_only.text, "type: plan_task");
        assert_eq!(
            text_only.end,
            End::Invalid("the reply did not call the tool plan_task".into())
        );
        let other_tool = read(
            json!({"type": "message", "stop_reason": "tool_use", "content": [{"type": "tool_use", "id": "t", "name": "bash", "input": {}}]}),
        );
        assert!(matches!(other_tool.end, End::Invalid(_)));
        let refused = read(
            json!({"type": "message", "stop_reason": "refusal", "content": [{"type": "text", "text": "I won't."}]}),
        );
        assert_eq!(refused.end, End::Refused("I won't.".into()));
        let cut = read(json!({"type": "message", "stop_reason": "max_tokens", "content": []}));
        assert_eq!(cut.end, End::Incomplete("max_tokens".into()));
        assert!(
            format(None)
                .read("{\"type\":\"error\"}", &reply(), &Redactor::default())
                .is_err()
        );
    }
}
