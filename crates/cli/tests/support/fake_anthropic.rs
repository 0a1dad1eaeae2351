//! A fake Anthropic Messages API server on 127.0.0.1 for the real Claude Code CLI.
//! Each `POST /v1/messages` gets the next scripted reply. Streamed replies are
//! server-sent events in chunked encoding, in the order the real API sends them:
//! `message_start`, per content block `content_block_start` (the first followed by a
//! `ping`), `content_block_delta`s (`text_delta`, or `input_json_delta` pieces for a
//! `tool_use`), `content_block_stop`, then `message_delta` (stop_reason, usage) and
//! `message_stop`. A request without `"stream": true` gets the same message as one
//! JSON body. Claude Code 2.1.330 was run against it (testdata/claude/). Requests are
//! recorded for assertions.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

pub use super::fake_openai::Received;
use super::fake_openai::read_request;

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

struct Shared {
    /// Replies not used yet, next last; the final one repeats.
    script: Mutex<Vec<Reply>>,
    received: Mutex<Vec<Received>>,
    stopped: AtomicBool,
}

/// The server; it stops answering (and releases stalled connections) when dropped.
pub struct FakeAnthropic {
    /// The value for `ANTHROPIC_BASE_URL` (no `/v1`: claude appends `/v1/messages`).
    pub url: String,
    shared: Arc<Shared>,
}

impl FakeAnthropic {
    /// Starts the server; replies are used in order and the last one repeats.
    pub fn start(script: Vec<Reply>) -> Self {
        FakeAnthropic::start_on("127.0.0.1", script)
    }

    /// Starts the server on another loopback address (127.0.0.2 stands for a host
    /// on the internet, reached through the egress proxy).
    pub fn start_on(ip: &str, script: Vec<Reply>) -> Self {
        assert!(!script.is_empty(), "a script needs at least one reply");
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into_iter().rev().collect()),
            received: Mutex::new(Vec::new()),
            stopped: AtomicBool::new(false),
        });
        let server = shared.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if server.stopped.load(Ordering::SeqCst) {
                    return;
                }
                let server = server.clone();
                std::thread::spawn(move || serve(stream, &server));
            }
        });
        FakeAnthropic { url, shared }
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }
}

impl Drop for FakeAnthropic {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
    }
}

fn serve(stream: TcpStream, shared: &Shared) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    // claude keeps connections alive across requests.
    while let Some(request) = read_request(&mut reader) {
        let n = {
            let mut received = shared.received.lock().unwrap();
            received.push(request.clone());
            received.len()
        };
        // Under a base URL with a path of its own (a gateway's), too.
        let messages = request
            .path
            .split('?')
            .next()
            .is_some_and(|p| p.ends_with("/v1/messages"));
        if request.method != "POST" || !messages {
            let body = error_body(404, &format!("fake server: no {}", request.path));
            if respond(&mut stream, 404, "application/json", &body).is_err() {
                return;
            }
            continue;
        }
        let reply = {
            let mut script = shared.script.lock().unwrap();
            if script.len() > 1 {
                script.pop().unwrap()
            } else {
                script[0].clone()
            }
        };
        let body = request.json();
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
                let body = error_body(*status, &format!("fake server: status {status}"));
                if respond(&mut stream, *status, "application/json", &body).is_err() {
                    return;
                }
                continue;
            }
            Reply::Stall => (Vec::new(), ""),
        };
        if body["stream"] != true {
            // claude falls back to a request without streaming when a stream fails.
            if matches!(reply, Reply::Stall) {
                return hold(shared);
            }
            let message = json!({
                "id": id, "type": "message", "role": "assistant", "model": model,
                "content": blocks, "stop_reason": stop_reason, "stop_sequence": null,
                "usage": usage(10),
            });
            if respond(&mut stream, 200, "application/json", &message.to_string()).is_err() {
                return;
            }
            continue;
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\nrequest-id: req_fake_{n}\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        let mut events = vec![event(
            "message_start",
            json!({"message": {"id": id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage(1)}}),
        )];
        if matches!(reply, Reply::Stall) {
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
            if write_chunk(&mut stream, e.as_bytes()).is_err() {
                return;
            }
        }
        if matches!(reply, Reply::Stall) {
            return hold(shared);
        }
        if write_chunk(&mut stream, b"").is_err() {
            return;
        }
    }
}

/// Keeps a connection open, sending nothing, until the server is dropped.
fn hold(shared: &Shared) {
    while !shared.stopped.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
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

/// The API's error body: `{"type": "error", "error": {"type", "message"}}`.
fn error_body(status: u16, message: &str) -> String {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"})
        .to_string()
}

fn respond(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} Fake\r\nContent-Type: {content_type}\r\nrequest-id: req_fake\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())
}

fn write_chunk(stream: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    stream.write_all(format!("{:x}\r\n", data.len()).as_bytes())?;
    stream.write_all(data)?;
    stream.write_all(b"\r\n")?;
    stream.flush()
}

/// One server-sent event whose data is `fields` plus `"type": kind`.
fn event(kind: &str, mut fields: Value) -> String {
    fields["type"] = kind.into();
    format!("event: {kind}\ndata: {fields}\n\n")
}
