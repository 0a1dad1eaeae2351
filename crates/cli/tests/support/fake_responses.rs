//! A fake OpenAI Responses API server on 127.0.0.1 for the real Codex CLI. Each
//! `POST …/responses` gets the next scripted reply, streamed as server-sent events in
//! the sequence codex 0.169.0 reads: `response.created`, one
//! `response.output_item.done` per output item, `response.completed` (found by
//! running it against this server). Requests are recorded for assertions.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The name of codex 0.169.0's shell tool, and its argument holding the command.
pub const SHELL_TOOL: &str = "exec_command";

/// One scripted answer to a `POST …/responses`.
#[derive(Debug, Clone)]
pub enum Reply {
    /// The model calls codex's shell tool with this command line.
    Command(String),
    /// The model's final message; the turn ends.
    Message(String),
    /// An HTTP error status with an OpenAI-style error body.
    Status(u16),
    /// Starts the stream (`response.created`) and then sends nothing more, holding
    /// the connection open until the server is dropped.
    Stall,
}

pub use super::fake_openai::Received;
use super::fake_openai::read_request;

/// What a Responses API request carries.
impl Received {
    /// The `input` items of type `kind` (e.g. `function_call_output`).
    pub fn inputs(&self, kind: &str) -> Vec<serde_json::Value> {
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

struct Shared {
    /// Replies not used yet, next last; the final one repeats.
    script: Mutex<Vec<Reply>>,
    received: Mutex<Vec<Received>>,
    stopped: AtomicBool,
}

/// The server; it stops answering (and releases stalled connections) when dropped.
pub struct FakeResponses {
    /// Base URL for codex's `model_providers.<id>.base_url` (ends in `/v1`).
    pub url: String,
    shared: Arc<Shared>,
}

impl FakeResponses {
    /// Starts the server; replies are used in order and the last one repeats.
    pub fn start(script: Vec<Reply>) -> Self {
        FakeResponses::start_on("127.0.0.1", script)
    }

    /// Starts the server on another loopback address (127.0.0.2 stands for a host
    /// on the internet, reached through the egress proxy).
    pub fn start_on(ip: &str, script: Vec<Reply>) -> Self {
        assert!(!script.is_empty(), "a script needs at least one reply");
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
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
        FakeResponses { url, shared }
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
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

impl Drop for FakeResponses {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
    }
}

fn serve(stream: TcpStream, shared: &Shared) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    // codex keeps connections alive across requests.
    while let Some(request) = read_request(&mut reader) {
        if request.method != "POST" {
            // codex's built-in provider tries a WebSocket first (a GET with an
            // upgrade): refused, it falls back to HTTPS. Not recorded.
            let refused = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
            if stream.write_all(refused).is_err() {
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
        let n = {
            let mut received = shared.received.lock().unwrap();
            received.push(request);
            received.len()
        };
        let response_id = format!("resp_{n}");
        let written = match &reply {
            Reply::Command(command) => {
                let arguments = serde_json::json!({ "cmd": command }).to_string();
                let item = serde_json::json!({
                    "type": "function_call", "id": format!("fc_{n}"),
                    "call_id": format!("call_{n}"), "name": SHELL_TOOL, "arguments": arguments,
                });
                stream.write_all(&sse_response(&response_id, &[item]))
            }
            Reply::Message(text) => {
                let item = serde_json::json!({
                    "type": "message", "id": format!("msg_{n}"), "role": "assistant",
                    "content": [{"type": "output_text", "text": text}],
                });
                stream.write_all(&sse_response(&response_id, &[item]))
            }
            Reply::Status(status) => {
                let body = serde_json::json!({"error": {"message": format!("fake server: status {status}"), "type": "server_error"}}).to_string();
                stream.write_all(
                    format!(
                        "HTTP/1.1 {status} Fake\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
            }
            Reply::Stall => {
                let created = event(
                    "response.created",
                    serde_json::json!({"response": {"id": response_id}}),
                );
                let _ = stream.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n{created}"
                    )
                    .as_bytes(),
                );
                while !shared.stopped.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                return;
            }
        };
        if written.is_err() {
            return;
        }
    }
}

/// A whole streamed response: created, each output item done, completed with usage.
fn sse_response(id: &str, items: &[serde_json::Value]) -> Vec<u8> {
    let mut body = event(
        "response.created",
        serde_json::json!({"response": {"id": id}}),
    );
    for (index, item) in items.iter().enumerate() {
        body.push_str(&event(
            "response.output_item.done",
            serde_json::json!({"output_index": index, "item": item}),
        ));
    }
    body.push_str(&event(
        "response.completed",
        serde_json::json!({"response": {"id": id, "usage": {
            "input_tokens": 100, "input_tokens_details": {"cached_tokens": 40},
            "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 110,
        }}}),
    ));
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// One server-sent event whose data is `fields` plus `"type": kind`.
fn event(kind: &str, mut fields: serde_json::Value) -> String {
    fields["type"] = kind.into();
    format!("event: {kind}\ndata: {fields}\n\n")
}
