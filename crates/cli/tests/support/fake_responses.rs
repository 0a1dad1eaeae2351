//! A fake OpenAI Responses API server on 127.0.0.1 for the real Codex CLI. Each
//! `POST …/responses` gets the next scripted reply, streamed as server-sent events in
//! the sequence codex 0.169.0 reads: `response.created`, one
//! `response.output_item.done` per output item, `response.completed` (found by
//! running it against this server). Its POSTs are recorded for assertions.

use serde_json::{Value, json};

pub use super::server::Received;
use super::server::{Conn, Next, Protocol, Script, Server, event, response};

/// The name of codex 0.169.0's shell tool, and its argument holding the command.
pub const SHELL_TOOL: &str = "exec_command";

/// One scripted answer to a `POST …/responses`.
#[derive(Debug, Clone)]
pub enum Reply {
    /// The model calls codex's shell tool with this command line.
    Command(String),
    /// The model calls the tool the request offers whose name ends with `tool` (an
    /// MCP server's, which codex names after its server), with `arguments`.
    Tool { tool: String, arguments: Value },
    /// The model's final message; the turn ends.
    Message(String),
    /// An HTTP error status with an OpenAI-style error body.
    Status(u16),
    /// Starts the stream (`response.created`) and then sends nothing more, holding
    /// the connection open until the server is dropped.
    Stall,
}

/// What a Responses API request carries.
impl Received {
    /// The `input` items of type `kind` (e.g. `function_call_output`).
    pub fn inputs(&self, kind: &str) -> Vec<Value> {
        self.json()["input"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter(|i| i["type"] == kind)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The server: `url` ends in `/v1`, for codex's `model_providers.<id>.base_url`.
pub type FakeResponses = Server<Responses>;

/// Streams the next scripted reply to each POST; the last reply repeats. Counts
/// WebSocket upgrades asked for (refused with 404).
pub struct Responses(Script<Reply>, std::sync::atomic::AtomicUsize);

impl Server<Responses> {
    /// Starts the server on 127.0.0.1.
    pub fn start(script: Vec<Reply>) -> Self {
        FakeResponses::start_on("127.0.0.1", script)
    }

    /// Starts the server on another loopback address (127.0.0.2 stands for a host
    /// on the internet, reached through the egress proxy).
    pub fn start_on(ip: &str, script: Vec<Reply>) -> Self {
        assert!(!script.is_empty(), "a script needs at least one reply");
        Server::listen(
            ip,
            Responses(Script::new(script), std::sync::atomic::AtomicUsize::new(0)),
        )
    }

    /// How many WebSocket upgrades codex asked for.
    pub fn websocket_attempts(&self) -> usize {
        self.protocol().1.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The `model_providers.<id>` value that points codex at this server, reading its
    /// key from `env_key` and retrying failed requests and streams `retries` times.
    pub fn provider(&self, id: &str, env_key: &str, retries: u32) -> String {
        format!(
            "model_providers.{id}={{name=\"{id}\",base_url=\"{}\",wire_api=\"responses\",env_key=\"{env_key}\",request_max_retries={retries},stream_max_retries={retries}}}",
            self.url
        )
    }
}

/// The tool `request` offers (in `tools`, or added in its `input`) whose name ends
/// with `tool`: its name, and the namespace it is in (codex puts an MCP server's
/// tools in the namespace `mcp__<server>`).
fn offered_tool(
    request: &Value,
    tool: &str,
    namespace: Option<&str>,
) -> Option<(String, Option<String>)> {
    match request {
        Value::Object(map) => {
            let name = map.get("name").and_then(Value::as_str);
            if let Some(name) = name
                && name.ends_with(tool)
                && map.contains_key("parameters")
            {
                return Some((name.to_string(), namespace.map(str::to_string)));
            }
            let inside = match map.get("type").and_then(Value::as_str) {
                Some("namespace") => name,
                _ => namespace,
            };
            map.values().find_map(|v| offered_tool(v, tool, inside))
        }
        Value::Array(items) => items.iter().find_map(|v| offered_tool(v, tool, namespace)),
        _ => None,
    }
}

impl Protocol for Responses {
    const BASE_PATH: &'static str = "/v1";

    /// codex's built-in provider tries a WebSocket first (a GET with an upgrade):
    /// refused, it falls back to HTTPS. Not recorded.
    fn records(&self, request: &Received) -> bool {
        request.method == "POST"
    }

    fn answer(&self, request: &Received, n: usize, conn: &mut Conn) -> std::io::Result<Next> {
        if request.method != "POST" {
            if request
                .header("upgrade")
                .is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
            {
                self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            conn.respond(404, &[], "")?;
            return Ok(Next::KeepAlive);
        }
        let response_id = format!("resp_{n}");
        match self.0.next_or_last() {
            Reply::Command(command) => {
                let arguments = json!({ "cmd": command }).to_string();
                let item = json!({
                    "type": "function_call", "id": format!("fc_{n}"),
                    "call_id": format!("call_{n}"), "name": SHELL_TOOL, "arguments": arguments,
                });
                conn.write(&sse_response(&response_id, &[item]))?;
            }
            Reply::Tool { tool, arguments } => {
                let (name, namespace) =
                    offered_tool(&request.json(), &tool, None).unwrap_or((tool, None));
                let mut item = json!({
                    "type": "function_call", "id": format!("fc_{n}"),
                    "call_id": format!("call_{n}"), "name": name,
                    "arguments": arguments.to_string(),
                });
                if let Some(namespace) = namespace {
                    item["namespace"] = json!(namespace);
                }
                conn.write(&sse_response(&response_id, &[item]))?;
            }
            Reply::Message(text) => {
                let item = json!({
                    "type": "message", "id": format!("msg_{n}"), "role": "assistant",
                    "content": [{"type": "output_text", "text": text}],
                });
                conn.write(&sse_response(&response_id, &[item]))?;
            }
            Reply::Status(status) => {
                let message = format!("fake server: status {status}");
                let body = json!({"error": {"message": message, "type": "server_error"}});
                let json = [("Content-Type", "application/json")];
                conn.respond(status, &json, &body.to_string())?;
            }
            Reply::Stall => {
                let created = event("response.created", json!({"response": {"id": response_id}}));
                conn.write(
                    format!("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n{created}")
                        .as_bytes(),
                )?;
                conn.hold();
                return Ok(Next::Close);
            }
        }
        Ok(Next::KeepAlive)
    }
}

/// A whole streamed response: created, each output item done, completed with usage.
fn sse_response(id: &str, items: &[Value]) -> Vec<u8> {
    let mut body = event("response.created", json!({"response": {"id": id}}));
    for (index, item) in items.iter().enumerate() {
        body.push_str(&event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        ));
    }
    body.push_str(&event(
        "response.completed",
        json!({"response": {"id": id, "usage": {
            "input_tokens": 100, "input_tokens_details": {"cached_tokens": 40},
            "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 110,
        }}}),
    ));
    let stream = [
        ("Content-Type", "text/event-stream"),
        ("Cache-Control", "no-cache"),
    ];
    response(200, &stream, &body)
}
