//! `runner.meta.kind: openai-responses`, the OpenAI Responses API (SPEC §20), the
//! only one OpenAI serves its codex models through: `POST {base_url}/responses`
//! with the system prompt as `instructions` and the conversation as `input`, the
//! reply held to its JSON Schema (`text.format`: `json_schema`, strict), the effort
//! as `reasoning.effort`, nothing stored (`store: false`). A response `incomplete`
//! is asked again once (`http`); a refusal ends the call with its text.

use serde_json::{Value, json};

use super::http::{End, Reading, WireFormat, schema_note, split_system};
use super::openai_chat::endpoint;
use super::transport::NotAResponse;
use super::{ChatMessage, Form, ReplyFormat};
use agent_runner_core::secret::Redactor;
use agent_runner_core::usage::Tokens;

/// The Responses request and response.
pub struct OpenAiResponses {
    pub(crate) model: String,
    pub(crate) temperature: Option<f64>,
    /// `reasoning.effort`: `low`, `high`, ...
    pub(crate) reasoning_effort: Option<&'static str>,
}

impl WireFormat for OpenAiResponses {
    fn kind(&self) -> &'static str {
        "openai-responses"
    }

    fn endpoint(&self, base_url: &str) -> String {
        endpoint(base_url, "/responses")
    }

    fn form(&self) -> Form {
        Form::Schema
    }

    fn body(&self, messages: &[ChatMessage], reply: &ReplyFormat) -> Value {
        let (mut instructions, input) = split_system(messages);
        instructions.push_str(&schema_note(reply.kind));
        let mut body = json!({
            "model": self.model,
            "instructions": instructions,
            "input": input,
            "text": {"format": {
                "type": "json_schema",
                "name": reply.kind,
                "schema": reply.schema,
                "strict": true,
            }},
            "store": false,
        });
        if let Some(effort) = self.reasoning_effort {
            body["reasoning"] = json!({ "effort": effort });
        }
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        body
    }

    fn read(
        &self,
        body: &str,
        _reply: &ReplyFormat,
        redactor: &Redactor,
    ) -> Result<Reading, NotAResponse> {
        let value: Value = super::transport::json_body(body, redactor)?;
        let output = value["output"]
            .as_array()
            .ok_or(NotAResponse::Missing("output"))?;
        let status = value["status"].as_str().unwrap_or("completed");
        if status == "failed" {
            // The API's own fault mid-response (`server_error`): worth another try.
            let message = value["error"]["message"].as_str().unwrap_or("no message");
            return Err(NotAResponse::Failed(agent_runner_core::text::cut(
                &redactor.redact(message),
                300,
            )));
        }
        let mut text = String::new();
        let mut refusal = None;
        for part in output
            .iter()
            .filter(|item| item["type"] == "message")
            .filter_map(|item| item["content"].as_array())
            .flatten()
        {
            match part["type"].as_str() {
                Some("output_text") => text.push_str(part["text"].as_str().unwrap_or_default()),
                Some("refusal") => {
                    refusal = Some(part["refusal"].as_str().unwrap_or_default().to_string());
                }
                _ => {}
            }
        }
        let end = match (refusal, status) {
            (Some(said), _) => End::Refused(said),
            (None, "incomplete") => End::Incomplete(
                value["incomplete_details"]["reason"]
                    .as_str()
                    .unwrap_or("no reason given")
                    .to_string(),
            ),
            _ => End::Complete,
        };
        Ok(Reading {
            text,
            usage: usage(&value["usage"]),
            end,
        })
    }

    fn unserved_fix(&self) -> &'static str {
        "set runner.meta.kind: openai-chat when the model is served through Chat Completions, or name another model"
    }
}

/// The Responses `usage`: `input_tokens` (with `input_tokens_details.cached_tokens`
/// and `cache_write_tokens`) and `output_tokens` (with
/// `output_tokens_details.reasoning_tokens`). None when there is none or its counts
/// are not numbers.
fn usage(value: &Value) -> Option<Tokens> {
    let detail = |group: &str, key: &str| value[group][key].as_u64().unwrap_or(0);
    Some(Tokens {
        input_tokens: value["input_tokens"].as_u64()?,
        cached_input_tokens: detail("input_tokens_details", "cached_tokens"),
        cache_write_input_tokens: detail("input_tokens_details", "cache_write_tokens"),
        output_tokens: value["output_tokens"].as_u64()?,
        reasoning_tokens: detail("output_tokens_details", "reasoning_tokens"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply() -> ReplyFormat {
        ReplyFormat {
            kind: "next_action",
            schema: crate::messages::next_action(),
        }
    }

    fn format() -> OpenAiResponses {
        OpenAiResponses {
            model: "gpt-5.1-codex-max".into(),
            temperature: None,
            reasoning_effort: Some("high"),
        }
    }

    fn read(body: Value) -> Result<Reading, NotAResponse> {
        format().read(&body.to_string(), &reply(), &Redactor::default())
    }

    fn message(content: Value) -> Value {
        json!({"type": "message", "role": "assistant", "content": [content]})
    }

    #[test]
    fn the_request_holds_the_reply_to_its_schema() {
        let messages = [
            ChatMessage {
                role: "system",
                content: "Decide.".into(),
            },
            ChatMessage {
                role: "user",
                content: "type: next_action".into(),
            },
            ChatMessage {
                role: "assistant",
                content: "{}".into(),
            },
        ];
        let body = format().body(&messages, &reply());
        assert!(
            body["instructions"]
                .as_str()
                .unwrap()
                .starts_with("Decide.\n\nThe API holds your reply")
        );
        assert_eq!(
            body["input"],
            json!([{"role": "user", "content": "type: next_action"}, {"role": "assistant", "content": "{}"}])
        );
        assert_eq!(body["model"], "gpt-5.1-codex-max");
        assert_eq!(body["reasoning"], json!({"effort": "high"}));
        assert_eq!(body["text"]["format"]["strict"], true);
        assert_eq!(body["text"]["format"]["name"], "next_action");
        assert_eq!(body["store"], false);
        assert!(body.get("temperature").is_none());
    }

    #[test]
    fn text_refusal_and_incomplete_are_told_apart() {
        let reading = read(json!({
            "status": "completed",
            "output": [{"type": "reasoning", "summary": []}, message(json!({"type": "output_text", "text": "{\"type\":1}", "annotations": []}))],
            "usage": {"input_tokens": 900, "input_tokens_details": {"cached_tokens": 512, "cache_write_tokens": 128},
                      "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 256}, "total_tokens": 1200},
        }))
        .unwrap();
        assert_eq!(reading.text, "{\"type\":1}");
        assert_eq!(reading.end, End::Complete);
        assert_eq!(
            reading.usage,
            Some(Tokens {
                input_tokens: 900,
                cached_input_tokens: 512,
                cache_write_input_tokens: 128,
                output_tokens: 300,
                reasoning_tokens: 256,
            })
        );
        let refused = read(json!({"status": "completed", "output": [message(json!({"type": "refusal", "refusal": "No."}))]})).unwrap();
        assert_eq!(refused.end, End::Refused("No.".into()));
        assert_eq!(refused.usage, None);
        let cut = read(json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": []})).unwrap();
        assert_eq!(cut.end, End::Incomplete("max_output_tokens".into()));
        assert!(read(json!({"status": "failed", "error": {"code": "server_error", "message": "oops"}, "output": []})).unwrap_err().to_string().contains("oops"));
        assert!(read(json!({"choices": []})).is_err(), "no Responses body");
    }
}
