//! A fake Anthropic Messages API server on 127.0.0.1 for the real Claude Code CLI.
//! Each `POST /v1/messages` gets the next scripted reply. Streamed replies are
//! server-sent events in chunked encoding, in the order the real API sends them:
//! `message_start`, per content block `content_block_start` (the first followed by a
//! `ping`), `content_block_delta`s (`text_delta`, or `input_json_delta` pieces for a
//! `tool_use`), `content_block_stop`, then `message_delta` (stop_reason, usage) and
//! `message_stop`. A request without `"stream": true` gets the same message as one
//! JSON body. Claude Code 2.1.330 was run against it (testdata/claude/). Requests are
//! recorded for assertions.

use serde_json::{Value, json};

pub use super::server::Received;
use super::server::{Conn, Next, Protocol, Script, Server, event};

/// One scripted answer to a `POST /v1/messages`.
#[derive(Debug, Clone)]
pub enum Reply {
    /// The model's text; the turn ends (`end_turn`).
    Text(String),
    /// The model calls tool `name` with `input` (`tool_use`), after a line of text.
    Tool { name: String, input: Value },
    /// An HTTP error status with the API's error body (its type follows the status).
    Status(u16),
    /// Starts the stream (`message_start`, a text block, a first delta), then sends
    /// nothing more, holding the connection open until the server is dropped.
    Stall,
}

impl Reply {
    /// Claude Code's `Bash` tool running `command`.
    pub fn bash(command: &str) -> Self {
        Reply::tool(
            "Bash",
            json!({"command": command, "description": "Run a command"}),
        )
    }

    pub fn tool(name: &str, input: Value) -> Self {
        Reply::Tool {
            name: name.into(),
            input,
        }
    }
}

/// What a Messages API request carries.
impl Received {
    /// The `tool_result` blocks of the last user message (what the tools returned).
    pub fn tool_results(&self) -> Vec<Value> {
        let json = self.json();
        let Some(last) = json["messages"].as_array().and_then(|m| m.last()) else {
            return Vec::new();
        };
        last["content"]
            .as_array()
            .map(|blocks| {
                let results = blocks.iter().filter(|b| b["type"] == "tool_result");
                results.cloned().collect()
            })
            .unwrap_or_default()
    }
}

/// The server: `url` is the value for `ANTHROPIC_BASE_URL` (no `/v1`: claude appends
/// `/v1/messages`).
pub type FakeAnthropic = Server<Messages>;

/// Answers each `POST …/v1/messages` with the next scripted reply; the last repeats.
/// Strict (`FakeAnthropic::strict`): only `POST /v1/messages` and one model, as the
/// real API at its own root takes them; anything else gets the API's 404.
pub struct Messages(Script<Reply>, Option<String>);

impl Server<Messages> {
    /// Starts the server on 127.0.0.1.
    pub fn start(script: Vec<Reply>) -> Self {
        FakeAnthropic::start_on("127.0.0.1", script)
    }

    /// Starts the server on another loopback address (127.0.0.2 stands for a host
    /// on the internet, reached through the egress proxy).
    pub fn start_on(ip: &str, script: Vec<Reply>) -> Self {
        assert!(!script.is_empty(), "a script needs at least one reply");
        Server::listen(ip, Messages(Script::new(script), None))
    }

    /// A strict server on 127.0.0.1: a request to another path than `/v1/messages`
    /// (`/v1/v1/messages`: a base URL ending in `/v1`, as codex's do) or for another
    /// model than `model` gets a 404 `not_found_error`, as from the real API.
    pub fn strict(script: Vec<Reply>, model: &str) -> Self {
        assert!(!script.is_empty(), "a script needs at least one reply");
        Server::listen(
            "127.0.0.1",
            Messages(Script::new(script), Some(model.to_string())),
        )
    }
}

impl Protocol for Messages {
    fn answer(&self, request: &Received, n: usize, conn: &mut Conn) -> std::io::Result<Next> {
        // Under a base URL with a path of its own (a gateway's), too.
        let messages = request
            .path
            .split('?')
            .next()
            .is_some_and(|p| p.ends_with("/v1/messages"));
        if request.method != "POST" || !messages {
            error(conn, 404, &format!("fake server: no {}", request.path))?;
            return Ok(Next::KeepAlive);
        }
        let body = request.json();
        if let Some(model) = &self.1 {
            let path = request.path.split('?').next().unwrap_or_default();
            if path != "/v1/messages" {
                error(conn, 404, &format!("fake server (strict): no {path}"))?;
                return Ok(Next::KeepAlive);
            }
            if body["model"] != model.as_str() {
                error(conn, 404, &format!("model: {}", body["model"]))?;
                return Ok(Next::KeepAlive);
            }
        }
        let reply = self.0.next_or_last();
        let model = body["model"].as_str().unwrap_or("claude-fake").to_string();
        let id = format!("msg_fake_{n}");
        let (blocks, stop_reason) = match &reply {
            Reply::Text(text) => (vec![json!({"type": "text", "text": text})], "end_turn"),
            Reply::Tool { name, input } => (
                vec![
                    json!({"type": "text", "text": format!("Using {name}.")}),
                    json!({"type": "tool_use", "id": format!("toolu_fake_{n}"), "name": name, "input": input}),
                ],
                "tool_use",
            ),
            Reply::Status(status) => {
                error(conn, *status, &format!("fake server: status {status}"))?;
                return Ok(Next::KeepAlive);
            }
            Reply::Stall => (Vec::new(), ""),
        };
        let stalls = matches!(reply, Reply::Stall);
        if body["stream"] != true {
            // claude falls back to a request without streaming when a stream fails.
            if stalls {
                conn.hold();
                return Ok(Next::Close);
            }
            let message = json!({
                "id": id, "type": "message", "role": "assistant", "model": model,
                "content": blocks, "stop_reason": stop_reason, "stop_sequence": null,
                "usage": usage(10),
            });
            let json = [
                ("Content-Type", "application/json"),
                ("request-id", "req_fake"),
            ];
            conn.respond(200, &json, &message.to_string())?;
            return Ok(Next::KeepAlive);
        }
        conn.write(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\nrequest-id: req_fake_{n}\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            .as_bytes(),
        )?;
        let mut events = vec![event(
            "message_start",
            json!({"message": {"id": id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage(1)}}),
        )];
        if stalls {
            events.push(event(
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "text", "text": ""}}),
            ));
            events.push(event("ping", json!({})));
            events.push(event(
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "text_delta", "text": "Let me"}}),
            ));
        }
        for (index, block) in blocks.iter().enumerate() {
            events.extend(block_events(index, block));
        }
        if !blocks.is_empty() {
            events.push(event(
                "message_delta",
                json!({"delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 10}}),
            ));
            events.push(event("message_stop", json!({})));
        }
        for e in &events {
            conn.chunk(e.as_bytes())?;
        }
        if stalls {
            conn.hold();
            return Ok(Next::Close);
        }
        conn.chunk(b"")?;
        Ok(Next::KeepAlive)
    }
}

/// The events of content block `index`; a tool's input arrives in two JSON pieces.
fn block_events(index: usize, block: &Value) -> Vec<String> {
    let mut start = block.clone();
    let deltas = if block["type"] == "tool_use" {
        start["input"] = json!({});
        let input = block["input"].to_string();
        let middle = input
            .char_indices()
            .nth(input.chars().count() / 2)
            .unwrap()
            .0;
        vec![
            json!({"type": "input_json_delta", "partial_json": ""}),
            json!({"type": "input_json_delta", "partial_json": &input[..middle]}),
            json!({"type": "input_json_delta", "partial_json": &input[middle..]}),
        ]
    } else {
        start["text"] = "".into();
        vec![json!({"type": "text_delta", "text": block["text"]})]
    };
    let mut events = vec![event(
        "content_block_start",
        json!({"index": index, "content_block": start}),
    )];
    if index == 0 {
        events.push(event("ping", json!({})));
    }
    for delta in deltas {
        events.push(event(
            "content_block_delta",
            json!({"index": index, "delta": delta}),
        ));
    }
    events.push(event("content_block_stop", json!({"index": index})));
    events
}

fn usage(output_tokens: u64) -> Value {
    json!({"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 40,
        "output_tokens": output_tokens, "service_tier": "standard"})
}

/// `status` with the API's error body: `{"type": "error", "error": {"type", "message"}}`.
fn error(conn: &mut Conn, status: u16, message: &str) -> std::io::Result<()> {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    let body = json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"});
    let json = [
        ("Content-Type", "application/json"),
        ("request-id", "req_fake"),
    ];
    conn.respond(status, &json, &body.to_string())
}
