//! `runner.meta.kind: openai-chat`, the OpenAI Chat Completions API (SPEC §5.1,
//! §20): `POST {base_url}/chat/completions` with `[system, user, ...]` messages, the
//! reply a YAML text (the seed's protocol; the lingua franca of compatible
//! servers), or with `runner.meta.structured: true` a JSON object held to the
//! reply's schema (`response_format: json_schema`, strict). `reasoning_effort` as
//! given. The key, the retries and what every API shares are `http`'s.

use serde_json::json;

use super::http::{End, HttpMeta, Reading, WireFormat, schema_note};
use super::transport::NotAResponse;
use super::{ChatMessage, Form, ReplyFormat};
use agent_runner_core::secret::{Redactor, Secret};
use agent_runner_core::usage::Tokens;

/// The Chat Completions request and response.
pub struct OpenAiChat {
    pub(crate) model: String,
    pub(crate) temperature: Option<f64>,
    /// `reasoning_effort`: `low`, `high`, ...
    pub(crate) reasoning_effort: Option<&'static str>,
    /// Replies held to their schema (`response_format`).
    pub(crate) structured: bool,
}

impl OpenAiChat {
    /// The backend at `base_url` (without `/chat/completions`) for `model`, YAML
    /// replies, the key sent as a bearer token; `timeout` bounds each request.
    pub fn backend(
        base_url: &str,
        model: &str,
        temperature: Option<f64>,
        key: Secret,
        timeout: std::time::Duration,
    ) -> HttpMeta<OpenAiChat> {
        let format = OpenAiChat {
            model: model.to_string(),
            temperature,
            reasoning_effort: None,
            structured: false,
        };
        let auth = Secret::new(format!("Bearer {}", key.expose()));
        HttpMeta::new(
            format,
            base_url,
            model,
            vec![("Authorization".into(), auth)],
            timeout,
        )
    }
}

impl WireFormat for OpenAiChat {
    fn kind(&self) -> &'static str {
        "openai-chat"
    }

    fn endpoint(&self, base_url: &str) -> String {
        endpoint(base_url, "/chat/completions")
    }

    fn form(&self) -> Form {
        if self.structured {
            Form::Schema
        } else {
            Form::Yaml
        }
    }

    fn body(&self, messages: &[ChatMessage], reply: &ReplyFormat) -> serde_json::Value {
        let mut messages = messages.to_vec();
        if self.structured
            && let Some(system) = messages.iter_mut().find(|m| m.role == "system")
        {
            system.content.push_str(&schema_note(reply.kind));
        }
        let mut body = json!({ "model": self.model, "messages": messages });
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(effort) = self.reasoning_effort {
            body["reasoning_effort"] = json!(effort);
        }
        if self.structured {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": reply.kind, "schema": reply.schema, "strict": true},
            });
        }
        body
    }

    fn read(
        &self,
        body: &str,
        _reply: &ReplyFormat,
        redactor: &Redactor,
    ) -> Result<Reading, NotAResponse> {
        content(body, redactor)
    }

    fn unserved_fix(&self) -> &'static str {
        "set runner.meta.kind: openai-responses (OpenAI serves some models, the codex ones among them, only there), or name another model"
    }
}

/// `{base_url}{path}`, the path going before any query string (Azure's
/// `?api-version=`).
pub(crate) fn endpoint(base_url: &str, path: &str) -> String {
    let (base, query) = match base_url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (base_url, String::new()),
    };
    format!("{}{path}{query}", base.trim_end_matches('/'))
}

/// `choices[0].message.content` (or its `refusal`) and the `usage`; an absent or
/// null content is an empty reply (which then fails the reply checks and is asked
/// again). A body that is not a completion (a proxy's page, a cut-off JSON
/// document) is the problem text.
fn content(body: &str, redactor: &Redactor) -> Result<Reading, NotAResponse> {
    let value: serde_json::Value = super::transport::json_body(body, redactor)?;
    let choice = value["choices"]
        .get(0)
        .ok_or(NotAResponse::Missing("choices"))?;
    let message = &choice["message"];
    let text = message["content"].as_str().unwrap_or_default().to_string();
    let end = match message["refusal"].as_str() {
        Some(refusal) => End::Refused(refusal.to_string()),
        None => End::Complete,
    };
    Ok(Reading {
        text,
        usage: usage(&value["usage"]),
        end,
    })
}

/// The Chat Completions `usage` object: `prompt_tokens` (with
/// `prompt_tokens_details.cached_tokens` and `cache_write_tokens`) and
/// `completion_tokens` (with `completion_tokens_details.reasoning_tokens`); 0 for
/// details a server does not give. None when there is no usage or its counts are
/// not numbers: never guessed.
fn usage(value: &serde_json::Value) -> Option<Tokens> {
    let detail = |group: &str, key: &str| value[group][key].as_u64().unwrap_or(0);
    Some(Tokens {
        input_tokens: value["prompt_tokens"].as_u64()?,
        cached_input_tokens: detail("prompt_tokens_details", "cached_tokens"),
        cache_write_input_tokens: detail("prompt_tokens_details", "cache_write_tokens"),
        output_tokens: value["completion_tokens"].as_u64()?,
        reasoning_tokens: detail("completion_tokens_details", "reasoning_tokens"),
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

    fn chat(structured: bool) -> OpenAiChat {
        OpenAiChat {
            model: "m".into(),
            temperature: None,
            reasoning_effort: None,
            structured,
        }
    }

    #[test]
    fn content_reads_the_first_choice_or_its_refusal() {
        let none = Redactor::default();
        let read = |body: &str| content(body, &none).map(|r| (r.text, r.end));
        assert_eq!(
            read(r#"{"choices":[{"message":{"content":"type: x"}}]}"#),
            Ok(("type: x".into(), End::Complete))
        );
        assert_eq!(
            read(r#"{"choices":[{"message":{"content":null}}]}"#),
            Ok((String::new(), End::Complete))
        );
        assert_eq!(
            read(
                r#"{"choices":[{"message":{"content":null,"refusal":"I can't help with that."}}]}"#
            ),
            Ok((
                String::new(),
                End::Refused("I can't help with that.".into())
            ))
        );
        assert!(read(r#"{"choices":[]}"#).is_err());
        assert!(
            read("nope")
                .unwrap_err()
                .to_string()
                .starts_with("the response is not JSON")
        );
    }

    #[test]
    fn usage_is_read_as_reported_and_never_guessed() {
        let read = |v: serde_json::Value| usage(&v);
        assert_eq!(
            read(json!({"prompt_tokens": 1000, "completion_tokens": 50,
                        "prompt_tokens_details": {"cached_tokens": 200},
                        "completion_tokens_details": {"reasoning_tokens": 30}})),
            Some(Tokens {
                input_tokens: 1000,
                cached_input_tokens: 200,
                output_tokens: 50,
                reasoning_tokens: 30,
                ..Tokens::default()
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
        assert_eq!(
            endpoint("http://h/v1/", "/chat/completions"),
            "http://h/v1/chat/completions"
        );
        assert_eq!(
            endpoint("http://h/v1?api-key=k", "/chat/completions"),
            "http://h/v1/chat/completions?api-key=k"
        );
    }

    #[test]
    fn options_are_sent_only_when_set() {
        let messages = [
            ChatMessage {
                role: "system",
                content: "Plan.".into(),
            },
            ChatMessage {
                role: "user",
                content: "hi".into(),
            },
        ];
        assert_eq!(
            chat(false).body(&messages, &reply()),
            json!({"model": "m", "messages": [{"role": "system", "content": "Plan."}, {"role": "user", "content": "hi"}]})
        );
        let tuned = OpenAiChat {
            temperature: Some(0.2),
            reasoning_effort: Some("low"),
            ..chat(false)
        };
        let body = tuned.body(&messages, &reply());
        assert_eq!(
            (&body["temperature"], &body["reasoning_effort"]),
            (&json!(0.2), &json!("low"))
        );
        let body = chat(true).body(&messages, &reply());
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "plan_task", "schema": reply().schema, "strict": true}})
        );
        assert!(
            body["messages"][0]["content"]
                .as_str()
                .unwrap()
                .starts_with("Plan.\n\nThe API holds your reply to the JSON Schema of plan_task")
        );
    }
}
