//! The one fake server on the loopback for every protocol a test plays the other
//! side of: Meta's OpenAI Chat API (`fake_openai`), codex's Responses API
//! (`fake_responses`), claude's Messages API (`fake_anthropic`), a host on the
//! internet (`destination`). `Server` accepts connections and counts them, reads
//! HTTP/1.1 requests (several per connection; Content-Length or chunked bodies),
//! records them and hands each to its `Protocol`, which writes the answer. Dropped,
//! it stops: the accept loop ends, and reads and held connections give up.
//!
//! A new protocol is one `Protocol` impl (what to answer to one request) and a
//! constructor on `Server<ItsType>`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One side of a conversation the tests fake.
pub trait Protocol: Send + Sync + 'static {
    /// The path of the base URL its clients are given (`/v1` where they append the
    /// API's own path to it).
    const BASE_PATH: &'static str = "";

    /// Whether `request` is recorded (what `Server::received` returns).
    fn records(&self, _request: &Received) -> bool {
        true
    }

    /// Answers `request` on `conn`; `n` is how many requests were recorded so far,
    /// this one included. An error (the client went away) closes the connection.
    fn answer(&self, request: &Received, n: usize, conn: &mut Conn) -> std::io::Result<Next>;
}

/// What becomes of a connection after an answer.
pub enum Next {
    /// The client may send another request on it.
    KeepAlive,
    Close,
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Instant,
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The request line and the header lines as they arrived, blank line included.
    pub head: String,
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
}

/// Replies scripted by a test, used in order.
pub struct Script<R>(Mutex<Vec<R>>);

impl<R: Clone> Script<R> {
    pub fn new(replies: Vec<R>) -> Self {
        Script(Mutex::new(replies.into_iter().rev().collect()))
    }

    /// The next reply; None once all were used.
    pub fn next(&self) -> Option<R> {
        self.0.lock().unwrap().pop()
    }

    /// The next reply; the last one repeats.
    pub fn next_or_last(&self) -> R {
        let mut left = self.0.lock().unwrap();
        if left.len() > 1 {
            left.pop().unwrap()
        } else {
            left.first()
                .expect("a script of at least one reply")
                .clone()
        }
    }

    /// Replies not used yet.
    pub fn left(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

struct Shared<P> {
    protocol: P,
    received: Mutex<Vec<Received>>,
    connections: AtomicUsize,
    stopped: Arc<AtomicBool>,
}

/// A server speaking `P` on a loopback address; it stops when dropped.
pub struct Server<P: Protocol> {
    /// `http://<address>` and the protocol's base path.
    pub url: String,
    pub addr: SocketAddr,
    shared: Arc<Shared<P>>,
}

impl<P: Protocol> Server<P> {
    /// Starts serving `protocol` on `ip` (127.0.0.2, 127.0.0.3, … stand for hosts on
    /// the internet), any free port.
    pub fn listen(ip: &str, protocol: P) -> Self {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            protocol,
            received: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
            stopped: Arc::new(AtomicBool::new(false)),
        });
        let server = shared.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if server.stopped.load(Ordering::SeqCst) {
                    return;
                }
                server.connections.fetch_add(1, Ordering::SeqCst);
                let server = server.clone();
                std::thread::spawn(move || serve(stream, &server));
            }
        });
        Server {
            url: format!("http://{addr}{}", P::BASE_PATH),
            addr,
            shared,
        }
    }

    /// The requests recorded so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// `ip:port`.
    pub fn authority(&self) -> String {
        self.addr.to_string()
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn protocol(&self) -> &P {
        &self.shared.protocol
    }
}

impl<P: Protocol> Drop for Server<P> {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        // Wakes the accept loop, so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve<P: Protocol>(stream: TcpStream, shared: &Shared<P>) {
    // Reads wake up now and then to see whether the server stopped.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let patient = Patient {
        stream: stream.try_clone().unwrap(),
        stopped: shared.stopped.clone(),
    };
    let mut reader = BufReader::new(patient);
    let mut conn = Conn {
        stream,
        stopped: shared.stopped.clone(),
    };
    while let Some(request) = read_request(&mut reader) {
        let n = {
            let mut received = shared.received.lock().unwrap();
            if shared.protocol.records(&request) {
                received.push(request.clone());
            }
            received.len()
        };
        match shared.protocol.answer(&request, n, &mut conn) {
            Ok(Next::KeepAlive) => {}
            Ok(Next::Close) | Err(_) => return,
        }
    }
}

/// A stream whose reads wait for data until the server stops (then: end of stream).
struct Patient {
    stream: TcpStream,
    stopped: Arc<AtomicBool>,
}

impl Read for Patient {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.stopped.load(Ordering::SeqCst) {
                return Ok(0);
            }
            match self.stream.read(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                read => return read,
            }
        }
    }
}

/// Reads one request; None at the end of the stream or on what is not HTTP.
fn read_request(reader: &mut impl BufRead) -> Option<Received> {
    let mut head = String::new();
    if reader.read_line(&mut head).ok()? == 0 {
        return None;
    }
    let at = Instant::now();
    let mut parts = head.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        head.push_str(&line);
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let mut request = Received {
        at,
        method,
        path,
        headers,
        head,
        body: String::new(),
    };
    let mut body = Vec::new();
    if request
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
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
        let length: usize = request
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        body.resize(length, 0);
        reader.read_exact(&mut body).ok()?;
    }
    request.body = String::from_utf8_lossy(&body).into_owned();
    Some(request)
}

/// The writing side of a connection.
pub struct Conn {
    stream: TcpStream,
    stopped: Arc<AtomicBool>,
}

impl Conn {
    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// A whole response (`response`).
    pub fn respond(
        &mut self,
        status: u16,
        headers: &[(&str, &str)],
        body: &str,
    ) -> std::io::Result<()> {
        self.write(&response(status, headers, body))
    }

    /// One chunk of a chunked body (the empty one ends it).
    pub fn chunk(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.write(&[format!("{:x}\r\n", data.len()).as_bytes(), data, b"\r\n"].concat())
    }

    /// Keeps the connection open, sending nothing, until the server is dropped.
    pub fn hold(&self) {
        while !self.stopped.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// An HTTP/1.1 response with `headers`, its Content-Length and `body`.
pub fn response(status: u16, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} Fake\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    out.into_bytes()
}

/// One server-sent event whose data is `fields` plus `"type": kind`.
pub fn event(kind: &str, mut fields: serde_json::Value) -> String {
    fields["type"] = kind.into();
    format!("event: {kind}\ndata: {fields}\n\n")
}
