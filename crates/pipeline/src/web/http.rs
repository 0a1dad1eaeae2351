//! HTTP/1.1 messages, just enough for the web view: one request per connection
//! (`Connection: close`), a head of at most `MAX_HEAD` bytes, bodies only with a
//! `Content-Length` no larger than the caller's limit. Everything a client sends is
//! bounded before it is read, so a client can neither make the server buffer
//! without end nor hold more than one worker thread per connection (sockets have
//! read and write timeouts).
//!
//! Written here rather than taken from a crate: the small synchronous servers
//! available read request heads without a size limit and start a thread per
//! connection without a bound; what the web view needs is this much.

use std::io::{BufRead, Read, Write};

/// Largest request head (request line and headers).
pub(crate) const MAX_HEAD: usize = 16 * 1024;
/// Most header lines.
const MAX_HEADERS: usize = 64;

/// A request as received.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) method: String,
    /// The path part of the target, still percent-encoded.
    pub(crate) path: String,
    /// The query string without `?`, if any.
    pub(crate) query: Option<String>,
    /// Header names in lower case, values trimmed.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Request {
    /// The first header named `name` (lower case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// How many headers are named `name`.
    pub(crate) fn count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(n, _)| n == name).count()
    }

    /// The query parameter `name`, undecoded (values here are plain words).
    pub(crate) fn query_param(&self, name: &str) -> Option<&str> {
        self.query.as_deref()?.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (k == name).then_some(v)
        })
    }
}

/// Why no request could be read; each maps to the status answered, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The client closed or timed out before sending a request: no answer.
    Gone,
    /// 400, with what was wrong.
    Bad(String),
    /// 408: the client stopped sending in the middle.
    Timeout,
    /// 413: the body is larger than the limit.
    TooLarge { limit: usize },
    /// 431: the head is larger than `MAX_HEAD`.
    HeadTooLarge,
    /// 411: a body without a Content-Length (chunked bodies are not accepted).
    LengthRequired,
    /// 505.
    Version,
}

impl ReadError {
    /// The status and message to answer with; None when the client is gone.
    pub(crate) fn status(&self) -> Option<(u16, String)> {
        match self {
            ReadError::Gone => None,
            ReadError::Bad(why) => Some((400, format!("bad request: {why}"))),
            ReadError::Timeout => Some((408, "the request did not arrive in time".into())),
            ReadError::TooLarge { limit } => Some((
                413,
                format!("the request body is larger than {limit} bytes"),
            )),
            ReadError::HeadTooLarge => Some((
                431,
                format!("the request head is larger than {MAX_HEAD} bytes"),
            )),
            ReadError::LengthRequired => Some((
                411,
                "a request body needs a Content-Length (chunked bodies are not accepted)".into(),
            )),
            ReadError::Version => Some((505, "only HTTP/1.0 and HTTP/1.1 are spoken".into())),
        }
    }
}

fn io_error(e: std::io::Error, started: bool) -> ReadError {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut if started => {
            ReadError::Timeout
        }
        _ => ReadError::Gone,
    }
}

/// A request's head as read: its bytes, its lines (the request line first), and
/// where the header lines start in `bytes`.
struct Head {
    bytes: Vec<u8>,
    lines: Vec<String>,
    headers_at: usize,
}

/// Reads a request's head line by line, up to its empty line, within `MAX_HEAD`
/// bytes and `MAX_HEADERS` lines.
fn read_head(input: &mut impl BufRead) -> Result<Head, ReadError> {
    let mut head = Vec::with_capacity(1024);
    let mut lines: Vec<String> = Vec::new();
    // Where the header lines start in `head`: after the request line.
    let mut headers_at = 0;
    loop {
        let mut line = Vec::new();
        let room = MAX_HEAD.saturating_sub(head.len()) as u64 + 1;
        let n = match input.by_ref().take(room).read_until(b'\n', &mut line) {
            Ok(n) => n,
            // A client that sent part of a request and stopped gets an answer.
            Err(e) => return Err(io_error(e, !head.is_empty() || !line.is_empty())),
        };
        if n == 0 {
            return Err(if head.is_empty() {
                ReadError::Gone
            } else {
                ReadError::Bad("the head ended early".into())
            });
        }
        head.extend_from_slice(&line);
        if head.len() > MAX_HEAD {
            return Err(ReadError::HeadTooLarge);
        }
        if !line.ends_with(b"\n") {
            return Err(ReadError::Bad("the head ended early".into()));
        }
        let text = std::str::from_utf8(&line)
            .map_err(|_| ReadError::Bad("the head is not UTF-8".into()))?
            .trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if lines.is_empty() {
                // Empty lines before a request line are allowed (RFC 9112 §2.2).
                continue;
            }
            break;
        }
        if lines.len() > MAX_HEADERS {
            return Err(ReadError::HeadTooLarge);
        }
        if lines.is_empty() {
            headers_at = head.len();
        }
        lines.push(text.to_string());
    }
    Ok(Head {
        bytes: head,
        lines,
        headers_at,
    })
}

/// Reads one request; the body is read only if it is at most `max_body` bytes. The
/// head is read here line by line within its bounds; its header lines are parsed by
/// httparse (RFC 9110's grammar: token names, no controls but tab in values).
pub(crate) fn read_request(
    input: &mut impl BufRead,
    max_body: usize,
) -> Result<Request, ReadError> {
    let Head {
        bytes: head,
        lines,
        headers_at,
    } = read_head(input)?;
    let request_line = lines
        .first()
        .ok_or_else(|| ReadError::Bad("no request line".into()))?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad(
            "the request line is not `METHOD TARGET HTTP/1.1`".into(),
        ));
    };
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(ReadError::Version);
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(ReadError::Bad(
            "the method is not a word in capitals".into(),
        ));
    }
    if !target.starts_with('/') || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(ReadError::Bad("the target is not an absolute path".into()));
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (target.to_string(), None),
    };
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let parsed = match httparse::parse_headers(&head[headers_at..], &mut slots) {
        Ok(httparse::Status::Complete((_, parsed))) => parsed,
        Ok(httparse::Status::Partial) => return Err(ReadError::Bad("the head ended early".into())),
        Err(httparse::Error::TooManyHeaders) => return Err(ReadError::HeadTooLarge),
        Err(httparse::Error::HeaderName) if lines[1..].iter().any(|l| !l.contains(':')) => {
            return Err(ReadError::Bad("a header line without `:`".into()));
        }
        Err(httparse::Error::HeaderName) => {
            return Err(ReadError::Bad("a malformed header name".into()));
        }
        Err(_) => return Err(ReadError::Bad("a malformed header line".into())),
    };
    let headers = parsed
        .iter()
        .map(|h| {
            let value = String::from_utf8_lossy(h.value);
            (h.name.to_ascii_lowercase(), value.trim().to_string())
        })
        .collect();
    let mut request = Request {
        method: method.to_string(),
        path,
        query,
        headers,
        body: Vec::new(),
    };
    if request.header("transfer-encoding").is_some() {
        return Err(ReadError::LengthRequired);
    }
    let length = match request.count("content-length") {
        0 => 0,
        1 => request
            .header("content-length")
            .and_then(|v| {
                (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| v.parse::<usize>().ok())
                    .flatten()
            })
            .ok_or_else(|| ReadError::Bad("Content-Length is not a number".into()))?,
        _ => return Err(ReadError::Bad("more than one Content-Length".into())),
    };
    if length > max_body {
        return Err(ReadError::TooLarge { limit: max_body });
    }
    request.body = vec![0; length];
    input
        .read_exact(&mut request.body)
        .map_err(|e| match io_error(e, true) {
            ReadError::Gone => ReadError::Bad("the body ended early".into()),
            other => other,
        })?;
    Ok(request)
}

/// A response: status, headers and the whole body.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    /// A response with `content_type` and `body`.
    pub(crate) fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            headers: vec![("Content-Type", content_type.to_string())],
            body: body.into(),
        }
    }

    /// Adds a header.
    pub(crate) fn with(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// Writes the response, closing the connection after it.
    pub(crate) fn write_to(&self, out: &mut impl Write, head_only: bool) -> std::io::Result<()> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (name, value) in &self.headers {
            // Values are ours, but a stray newline must never split a header.
            let value: String = value.chars().filter(|c| !c.is_control()).collect();
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.body.len()
        ));
        out.write_all(head.as_bytes())?;
        if !head_only {
            out.write_all(&self.body)?;
        }
        out.flush()
    }
}

/// The reason phrase of the statuses the web view uses.
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8], max_body: usize) -> Result<Request, ReadError> {
        read_request(&mut std::io::BufReader::new(bytes), max_body)
    }

    #[test]
    fn any_request_is_read_within_its_bounds_or_refused() {
        // More cases than the default: `shape` picks one of many combinations.
        quickcheck::QuickCheck::new()
            .tests(2000)
            .quickcheck(read_within_bounds as fn(Vec<String>, Vec<u8>, u8) -> bool);
    }

    fn read_within_bounds(parts: Vec<String>, body: Vec<u8>, shape: u8) -> bool {
        const MAX_BODY: usize = 8;
        let method = ["GET", "POST", "get", "", "G T"][usize::from(shape % 5)];
        // Mostly well-formed, so that the limits are reached; every fourth case
        // has the parts as they come.
        let raw = (shape / 20).is_multiple_of(4);
        let word = |s: &str| -> String {
            if raw {
                s.to_string()
            } else {
                s.chars().filter(char::is_ascii_alphanumeric).collect()
            }
        };
        let target = word(parts.first().map_or("", String::as_str));
        let target = if shape.is_multiple_of(2) {
            format!("/{target}")
        } else {
            target
        };
        let mut head = format!("{method} {target} HTTP/1.1\r\n");
        for part in parts.iter().skip(1) {
            head.push_str(&format!("X-{}: {}\r\n", word(part), word(part)));
        }
        match shape / 5 % 4 {
            0 => {}
            1 => head.push_str(&format!("Content-Length: {}\r\n", body.len())),
            2 => head.push_str(&format!("Content-Length: {}\r\n", body.len() + 1)),
            _ => head.push_str("Content-Length: -1\r\n"),
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend(&body);
        let mut input = std::io::BufReader::new(&bytes[..]);
        match read_request(&mut input, MAX_BODY) {
            Ok(r) => {
                r.body.len() <= MAX_BODY
                    && r.path.starts_with('/')
                    && !r.method.is_empty()
                    && r.method.bytes().all(|b| b.is_ascii_uppercase())
            }
            // The whole request arrived: whatever is wrong with it gets an answer.
            Err(e) => e != ReadError::Gone,
        }
    }

    quickcheck::quickcheck! {

        fn any_bytes_are_read_or_refused_without_reading_past_the_limits(bytes: Vec<u8>) -> bool {
            // Repeated so that inputs run past MAX_HEAD.
            let bytes = bytes.repeat(400);
            let mut input: &[u8] = &bytes;
            let _ = read_request(&mut input, 0);
            bytes.len() - input.len() <= MAX_HEAD + 1
        }
    }

    #[test]
    fn a_request_is_read_with_its_headers_and_body() {
        let r = read(
            b"POST /api/tasks?all=1&x HTTP/1.1\r\nHost: 127.0.0.1:1\r\nContent-Length: 4\r\nX-A:  b \r\n\r\nbodyEXTRA",
            10,
        )
        .unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/api/tasks"));
        assert_eq!(r.query_param("all"), Some("1"));
        assert_eq!(r.query_param("x"), Some(""));
        assert_eq!(r.query_param("y"), None);
        assert_eq!(r.header("host"), Some("127.0.0.1:1"));
        assert_eq!(r.header("x-a"), Some("b"));
        assert_eq!(r.body, b"body");
        let r = read(b"\r\nGET / HTTP/1.0\n\n", 0).unwrap();
        assert_eq!(r.path, "/");
    }

    #[test]
    fn limits_and_malformed_requests_are_refused() {
        assert_eq!(
            read(b"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", 10).unwrap_err(),
            ReadError::TooLarge { limit: 10 }
        );
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(
            read(big.as_bytes(), 0).unwrap_err(),
            ReadError::HeadTooLarge
        );
        let many: String = (0..100).map(|n| format!("X-{n}: 1\r\n")).collect();
        assert_eq!(
            read(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes(), 0).unwrap_err(),
            ReadError::HeadTooLarge
        );
        assert_eq!(
            read(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 10).unwrap_err(),
            ReadError::LengthRequired
        );
        assert_eq!(read(b"", 10).unwrap_err(), ReadError::Gone);
        assert_eq!(
            read(b"GET / HTTP/2\r\n\r\n", 0).unwrap_err(),
            ReadError::Version
        );
        for bad in [
            &b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx"[..],
            b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab",
            b"GET / HTTP/1.1\r\nNoColon\r\n\r\n",
            b"GET / HTTP/1.1\r\nX Y: 1\r\n\r\n",
            b"GET / HTTP/1.1\r\nX(Y): 1\r\n\r\n",
            b"GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n",
            b"GET http://x/ HTTP/1.1\r\n\r\n",
            b"get / HTTP/1.1\r\n\r\n",
            b"GET /a b HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: x",
            b"GET /\xff HTTP/1.1\r\n\r\n",
        ] {
            assert!(
                matches!(read(bad, 10), Err(ReadError::Bad(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_response_closes_the_connection_and_keeps_headers_on_one_line() {
        let mut out = Vec::new();
        Response::new(404, "text/plain", "no")
            .with("X-Evil", "a\r\nSet-Cookie: x")
            .write_to(&mut out, false)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nX-Evil: aSet-Cookie: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno"
        );
    }
}
