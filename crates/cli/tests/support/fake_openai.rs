//! A fake OpenAI Chat Completions server on 127.0.0.1: a std TcpListener thread that
//! answers each request with the next scripted response and records what it got.
//! `Received` and `read_request` serve the Responses API fake too.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Instant,
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("request body is JSON")
    }

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

pub struct FakeOpenAi {
    pub url: String,
    answers: Arc<Mutex<Vec<Answer>>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl FakeOpenAi {
    /// Starts the server; answers are used in order (then 599 "script exhausted").
    pub fn start(answers: Vec<Answer>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let answers = Arc::new(Mutex::new(answers.into_iter().rev().collect::<Vec<_>>()));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (a, r) = (answers.clone(), received.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (a, r) = (a.clone(), r.clone());
                std::thread::spawn(move || serve(stream, &a, &r));
            }
        });
        FakeOpenAi {
            url,
            answers,
            received,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// Answers not used yet.
    pub fn left(&self) -> usize {
        self.answers.lock().unwrap().len()
    }
}

fn serve(stream: TcpStream, answers: &Mutex<Vec<Answer>>, received: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    // Several requests may come over one connection.
    while let Some(request) = read_request(&mut reader) {
        received.lock().unwrap().push(request);
        let answer = answers
            .lock()
            .unwrap()
            .pop()
            .unwrap_or_else(|| Answer::error(599, "fake server: script exhausted"));
        std::thread::sleep(answer.delay);
        if let Some(raw) = answer.raw {
            let _ = stream.write_all(raw);
            return;
        }
        let mut response = format!(
            "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            answer.status,
            answer.content_type,
            answer.body.len()
        );
        for (k, v) in &answer.headers {
            response.push_str(&format!("{k}: {v}\r\n"));
        }
        response.push_str("\r\n");
        response.push_str(&answer.body);
        if let Some(bytes) = answer.cut_at {
            let _ = stream.write_all(&response.as_bytes()[..bytes.min(response.len())]);
            return;
        }
        if stream.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// Reads one HTTP/1.1 request (Content-Length or chunked body); None at end of stream.
pub fn read_request(reader: &mut impl BufRead) -> Option<Received> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let at = Instant::now();
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        body.resize(length, 0);
        reader.read_exact(&mut body).ok()?;
    }
    Some(Received {
        at,
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}
