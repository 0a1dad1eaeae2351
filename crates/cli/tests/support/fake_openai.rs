//! A fake OpenAI Chat Completions API on 127.0.0.1, for Meta: each request gets the
//! next scripted answer, which may also be late, cut off, garbled or not JSON.

use std::time::Duration;

pub use super::server::Received;
use super::server::{Conn, Next, Protocol, Script, Server, response};

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Wait this long before answering (to provoke client timeouts).
    pub delay: Duration,
    /// Send only this many bytes of the response (head and body), then close the
    /// connection: a response cut off mid-way.
    pub cut_at: Option<usize>,
    pub content_type: &'static str,
    /// Bytes sent instead of a proper response (then the connection closes).
    pub raw: Option<&'static [u8]>,
}

impl Answer {
    /// 200 with a chat completion whose message content is `content`.
    pub fn chat(content: &str) -> Self {
        let body = serde_json::json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        });
        Answer {
            status: 200,
            headers: vec![],
            body: body.to_string(),
            delay: Duration::ZERO,
            cut_at: None,
            content_type: "application/json",
            raw: None,
        }
    }

    /// A page that is not JSON at all (a proxy's login or error page).
    pub fn html(status: u16, page: &str) -> Self {
        Answer {
            status,
            headers: vec![],
            body: page.to_string(),
            delay: Duration::ZERO,
            cut_at: None,
            content_type: "text/html",
            raw: None,
        }
    }

    /// A response whose HTTP is garbled (a chunk length that is not a number), as a
    /// broken proxy might send: ureq's protocol error.
    pub fn garbled() -> Self {
        Answer {
            raw: Some(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabcde\r\n"),
            ..Answer::chat("")
        }
    }

    /// This answer, cut off after `bytes` bytes (of its head, when few).
    pub fn cut_at(mut self, bytes: usize) -> Self {
        self.cut_at = Some(bytes);
        self
    }

    /// An error status with an OpenAI-style error body.
    pub fn error(status: u16, message: &str) -> Self {
        let body = serde_json::json!({"error": {"message": message, "type": "test"}});
        Answer {
            status,
            headers: vec![],
            body: body.to_string(),
            delay: Duration::ZERO,
            cut_at: None,
            content_type: "application/json",
            raw: None,
        }
    }

    /// This chat completion with a `usage` object: `prompt` tokens (`cached` of
    /// them cached) and `completion` tokens, as the Chat Completions API reports.
    pub fn with_usage(mut self, prompt: u64, cached: u64, completion: u64) -> Self {
        let mut body: serde_json::Value = serde_json::from_str(&self.body).unwrap();
        body["usage"] = serde_json::json!({
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        });
        self.body = body.to_string();
        self
    }

    /// A redirect (`status` 301, 302, 303, 307 or 308) to `location`, with a body
    /// as servers send one.
    pub fn redirect(status: u16, location: &str) -> Self {
        Answer::html(status, &format!("<a href=\"{location}\">moved</a>"))
            .header("Location", location)
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// What a Chat Completions request carries.
impl Received {
    /// Content of message `n` of the request.
    pub fn message(&self, n: usize) -> String {
        self.json()["messages"][n]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub fn roles(&self) -> Vec<String> {
        self.json()["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_string())
            .collect()
    }
}

/// The server: `url` ends in `/v1`, as OpenAI's base URLs do.
pub type FakeOpenAi = Server<Chat>;

/// Answers every request with the next scripted answer (then 599 "script exhausted").
pub struct Chat(Script<Answer>);

impl Server<Chat> {
    /// Starts the server on 127.0.0.1.
    pub fn start(answers: Vec<Answer>) -> Self {
        Server::listen("127.0.0.1", Chat(Script::new(answers)))
    }

    /// Answers not used yet.
    pub fn left(&self) -> usize {
        self.protocol().0.left()
    }
}

impl Protocol for Chat {
    const BASE_PATH: &'static str = "/v1";

    fn answer(&self, _: &Received, _: usize, conn: &mut Conn) -> std::io::Result<Next> {
        let answer =
            (self.0.next()).unwrap_or_else(|| Answer::error(599, "fake server: script exhausted"));
        std::thread::sleep(answer.delay);
        if let Some(raw) = answer.raw {
            conn.write(raw)?;
            return Ok(Next::Close);
        }
        let mut headers = vec![("Content-Type", answer.content_type)];
        headers.extend(answer.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let response = response(answer.status, &headers, &answer.body);
        if let Some(bytes) = answer.cut_at {
            conn.write(&response[..bytes.min(response.len())])?;
            return Ok(Next::Close);
        }
        conn.write(&response)?;
        Ok(Next::KeepAlive)
    }
}
