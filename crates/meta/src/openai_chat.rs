//! `runner.meta.kind: openai-chat`, the OpenAI Chat Completions API (SPEC §5.1):
//! `POST {base_url}/chat/completions` with `[system, user, ...]` messages, the reply
//! a YAML text (the seed's protocol; the lingua franca of compatible servers). The
//! bearer key and the retries are the transport's.

use serde_json::json;

use super::http::{HttpMeta, Reading, WireFormat};
use super::{ChatMessage, ReplyFormat};
use agent_runner_core::secret::{Redactor, Secret};
use agent_runner_core::usage::Tokens;

/// The Chat Completions request and response.
pub struct OpenAiChat {
    model: String,
    temperature: Option<f64>,
}

impl OpenAiChat {
    /// The backend at `base_url` (without `/chat/completions`) for `model`, the key
    /// sent as a bearer token; `timeout` bounds each request.
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

    fn body(&self, messages: &[ChatMessage], _reply: &ReplyFormat) -> serde_json::Value {
        let mut body = json!({ "model": self.model, "messages": messages });
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
    ) -> Result<Reading, String> {
        content(body, redactor)
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

/// `choices[0].message.content` and the `usage`; an absent or null content is an
/// empty reply (which then fails the reply checks and is asked again). A body that
/// is not a completion (a proxy's page, a cut-off JSON document) is the problem text.
fn content(body: &str, redactor: &Redactor) -> Result<Reading, String> {
    let value: serde_json::Value = serde_json::from_str(body).map_err(|e| {
        format!(
            "the response is not JSON ({e}): {}",
            super::transport::body_problem(body, redactor)
        )
    })?;
    let choice = value["choices"]
        .get(0)
        .ok_or("the response has no choices")?;
    let text = choice["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Ok(Reading {
        text,
        usage: usage(&value["usage"]),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn reply() -> ReplyFormat {
        ReplyFormat {
            kind: "plan_task",
            schema: crate::messages::plan_task(),
        }
    }

    #[test]
    fn content_reads_the_first_choice() {
        let none = Redactor::default();
        let text = |body: &str| content(body, &none).map(|r| r.text);
        assert_eq!(
            text(r#"{"choices":[{"message":{"content":"type: x"}}]}"#),
            Ok("type: x".into())
        );
        assert_eq!(
            text(r#"{"choices":[{"message":{"content":null}}]}"#),
            Ok(String::new())
        );
        assert!(text(r#"{"choices":[]}"#).is_err());
        assert!(
            text("nope")
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
    fn temperature_is_sent_only_when_set() {
        let messages = [ChatMessage {
            role: "user",
            content: "hi".into(),
        }];
        let chat = OpenAiChat::backend(
            "http://127.0.0.1:1/v1/",
            "m",
            None,
            Secret::new("k".into()),
            std::time::Duration::from_secs(1),
        );
        assert_eq!(chat.url(), "http://127.0.0.1:1/v1/chat/completions");
        let format = OpenAiChat {
            model: "m".into(),
            temperature: None,
        };
        assert_eq!(
            format.body(&messages, &reply()),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        );
        let format = OpenAiChat {
            model: "m".into(),
            temperature: Some(0.2),
        };
        assert_eq!(format.body(&messages, &reply())["temperature"], json!(0.2));
    }
}
