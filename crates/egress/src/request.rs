//! The head of a proxy request, read bounded and parsed strictly: `CONNECT
//! host:port` or a plain HTTP request with an absolute `http://` URI. What comes
//! after the head (a request body, a TLS client hello sent early) is handed on
//! untouched.
//!
//! A plain request goes upstream in origin form with the URI's host as `Host`
//! (normalised as HTTP clients write it: the host in lower case, an IPv6 address in
//! brackets, the port without leading zeros and left out when it is 80), no proxy
//! headers, and `Connection: close`: one request per upstream connection, so
//! the destination checked is the one the bytes go to. (A client that pipelines a
//! second request on the same connection sends it to the same, allowed, server.)

use std::io::Read;

use agent_runner_settings::allow::rules::{Destination, Host, Via};

/// Largest request head.
pub(crate) const MAX_HEAD: usize = 16 * 1024;
/// Most header lines.
const MAX_HEADERS: usize = 100;

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) via: Via,
    pub(crate) destination: Destination,
    /// For a plain request: the head to send upstream.
    pub(crate) upstream_head: Vec<u8>,
}

/// Why a head could not be used; each maps to the status answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BadHead {
    /// The client closed before sending a whole head.
    Closed,
    TooLarge,
    TimedOut,
    /// Unreadable; the reason.
    Malformed(String),
}

impl BadHead {
    /// The HTTP status answered.
    pub(crate) fn status(&self) -> u16 {
        match self {
            BadHead::Closed | BadHead::Malformed(_) => 400,
            BadHead::TooLarge => 431,
            BadHead::TimedOut => 408,
        }
    }

    pub(crate) fn reason(&self) -> String {
        match self {
            BadHead::Closed => "closed before a whole request head".into(),
            BadHead::TooLarge => format!("request head over {MAX_HEAD} bytes"),
            BadHead::TimedOut => "no whole request head in time".into(),
            BadHead::Malformed(why) => format!("bad request: {why}"),
        }
    }
}

/// Reads until the end of the head (the stream's read timeout bounds each read);
/// returns the head and whatever followed it.
pub(crate) fn read_head(stream: &mut impl Read) -> Result<(Vec<u8>, Vec<u8>), BadHead> {
    let mut bytes = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Err(BadHead::Closed),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(BadHead::TimedOut);
            }
            Err(_) => return Err(BadHead::Closed),
        };
        let searched_from = bytes.len().saturating_sub(3);
        bytes.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_end(&bytes[searched_from..]) {
            let end = searched_from + end;
            if end > MAX_HEAD {
                return Err(BadHead::TooLarge);
            }
            let rest = bytes.split_off(end);
            return Ok((bytes, rest));
        }
        if bytes.len() > MAX_HEAD {
            return Err(BadHead::TooLarge);
        }
    }
}

/// The offset just past the blank line that ends a head (CRLF or bare LF).
fn find_end(bytes: &[u8]) -> Option<usize> {
    (0..bytes.len()).find_map(|i| {
        if bytes[i..].starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if bytes[i..].starts_with(b"\n\n") {
            Some(i + 2)
        } else if bytes[i..].starts_with(b"\n\r\n") {
            Some(i + 3)
        } else {
            None
        }
    })
}

/// Parses a head read by `read_head`: the request line here, the header lines by
/// httparse (RFC 9110's grammar: token names, no controls but tab in values).
pub(crate) fn parse(head: &[u8]) -> Result<Request, BadHead> {
    let bad = |why: &str| BadHead::Malformed(why.to_string());
    let text = std::str::from_utf8(head).map_err(|_| bad("the head is not UTF-8"))?;
    let (request_line, header_text) = text.split_once('\n').unwrap_or((text, ""));
    let request_line = request_line.strip_suffix('\r').unwrap_or(request_line);
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("the request line is not `METHOD TARGET HTTP/1.x`"));
    };
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(bad("only HTTP/1.0 and HTTP/1.1 are spoken"));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(bad("the method is not a word in capitals"));
    }
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let parsed = match httparse::parse_headers(header_text.as_bytes(), &mut slots) {
        Ok(httparse::Status::Complete((_, parsed))) => parsed,
        Ok(httparse::Status::Partial) => return Err(bad("the head ended early")),
        Err(httparse::Error::TooManyHeaders) => return Err(bad("too many header lines")),
        Err(httparse::Error::HeaderName)
            if header_text
                .lines()
                .take_while(|l| !l.trim_end_matches('\r').is_empty())
                .any(|l| !l.contains(':')) =>
        {
            return Err(bad("a header line without `:`"));
        }
        Err(_) => return Err(bad("a malformed header line")),
    };
    let mut headers = Vec::with_capacity(parsed.len());
    for header in parsed {
        // The head is UTF-8; httparse let through C1 controls (U+0080..U+009F).
        let value = std::str::from_utf8(header.value).map_err(|_| bad("the head is not UTF-8"))?;
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(bad("a malformed header line"));
        }
        headers.push((header.name, value.trim()));
    }
    if method == "CONNECT" {
        let destination = authority(target, None)?;
        return Ok(Request {
            via: Via::Connect,
            destination,
            upstream_head: Vec::new(),
        });
    }
    let Some(rest) = strip_prefix_ignore_case(target, "http://") else {
        return Err(bad(
            if strip_prefix_ignore_case(target, "https://").is_some() {
                "an https:// URI in a plain request; HTTPS goes through CONNECT"
            } else {
                "not a proxy request (the target must be an absolute http:// URI)"
            },
        ));
    };
    let (authority_text, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    if path.contains('#') || path.chars().any(|c| c.is_control() || c == ' ') {
        return Err(bad("a malformed URI"));
    }
    let destination = authority(authority_text, Some(80))?;
    let mut upstream = format!("{method} {path} {version}\r\n");
    upstream.push_str(&format!("Host: {}\r\n", host_header(&destination)));
    for (name, value) in headers {
        let hop = ["host", "connection", "proxy-connection", "keep-alive"]
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h))
            || name.to_ascii_lowercase().starts_with("proxy-");
        if !hop {
            upstream.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    upstream.push_str("Connection: close\r\n\r\n");
    Ok(Request {
        via: Via::Plain,
        destination,
        upstream_head: upstream.into_bytes(),
    })
}

/// `host:port` (`[v6]:port`); `default` when the port may be left out.
fn authority(text: &str, default: Option<u16>) -> Result<Destination, BadHead> {
    let bad = |why: String| BadHead::Malformed(why);
    if text.contains('@') {
        return Err(bad("credentials in the URI".into()));
    }
    let (host, port) = match text.rfind(':') {
        Some(i) if !text[i..].contains(']') => (&text[..i], Some(&text[i + 1..])),
        _ => (text, None),
    };
    let port = match (port, default) {
        (Some(p), _) => match p.parse::<u16>() {
            Ok(port) if port > 0 && p.bytes().all(|b| b.is_ascii_digit()) => port,
            _ => return Err(bad("a bad port".into())),
        },
        (None, Some(default)) => default,
        (None, None) => return Err(bad("CONNECT needs host:port".into())),
    };
    let host = Host::parse(host).map_err(|e| bad(e.to_string()))?;
    Ok(Destination { host, port })
}

/// The `Host` header of a plain request to `destination`: what the client's URI
/// named, written as HTTP clients write it (the port left out when it is HTTP's).
fn host_header(destination: &Destination) -> String {
    if destination.port == 80 {
        destination.host.to_string()
    } else {
        destination.to_string()
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    (text.len() >= prefix.len()
        && text.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes()))
    .then(|| &text[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(host: &str, port: u16) -> Destination {
        Destination {
            host: Host::parse(host).unwrap(),
            port,
        }
    }

    #[test]
    fn connect_names_its_destination() {
        let r = parse(b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\n")
            .unwrap();
        assert_eq!(r.via, Via::Connect);
        assert_eq!(r.destination, dest("api.openai.com", 443));
        let r = parse(b"CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(r.destination, dest("[2001:db8::1]", 8443));
        for bad in [
            &b"CONNECT api.openai.com HTTP/1.1\r\n\r\n"[..],
            b"CONNECT api.openai.com:0 HTTP/1.1\r\n\r\n",
            b"CONNECT api.openai.com:99999 HTTP/1.1\r\n\r\n",
            b"CONNECT user@api.openai.com:443 HTTP/1.1\r\n\r\n",
            b"CONNECT 127.1:443 HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(parse(bad).unwrap_err().status(), 400, "{bad:?}");
        }
    }

    #[test]
    fn a_plain_request_goes_upstream_in_origin_form_without_proxy_headers() {
        let r = parse(
            b"POST http://Example.com:8080/v1/x?q=1 HTTP/1.1\r\nHost: evil.net\r\nProxy-Authorization: Basic x\r\n\
              Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\nContent-Length: 2\r\nX-Thing:  a b \r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.via, Via::Plain);
        assert_eq!(r.destination, dest("example.com", 8080));
        assert_eq!(
            String::from_utf8(r.upstream_head).unwrap(),
            "POST /v1/x?q=1 HTTP/1.1\r\nHost: example.com:8080\r\nContent-Length: 2\r\nX-Thing: a b\r\nConnection: close\r\n\r\n"
        );
        let r = parse(b"GET http://example.com HTTP/1.0\n\n").unwrap();
        assert_eq!(r.destination, dest("example.com", 80));
        assert!(r.upstream_head.starts_with(b"GET / HTTP/1.0\r\n"));
        let r = parse(b"GET http://example.com?a HTTP/1.1\r\n\r\n").unwrap();
        assert!(r.upstream_head.starts_with(b"GET /?a HTTP/1.1\r\n"));
    }

    #[test]
    fn the_host_header_is_the_uri_authority_as_http_clients_write_it() {
        for (uri, host) in [
            ("http://127.0.0.2:08080/", "127.0.0.2:8080"),
            ("http://EXAMPLE.com./", "example.com"),
            ("http://Example.COM:80/", "example.com"),
            ("http://example.com:0080/", "example.com"),
            ("http://example.com:443/", "example.com:443"),
            ("http://[2001:DB8::0:1]:8080/", "[2001:db8::1]:8080"),
            ("http://[2001:db8::1]/", "[2001:db8::1]"),
            ("http://[::ffff:127.0.0.2]:81/", "127.0.0.2:81"),
        ] {
            let head = format!("GET {uri} HTTP/1.1\r\nHost: other.example:99\r\n\r\n");
            let upstream =
                String::from_utf8(parse(head.as_bytes()).unwrap().upstream_head).unwrap();
            assert_eq!(
                upstream,
                format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
                "{uri}"
            );
        }
    }

    #[test]
    fn what_is_not_a_proxy_request_is_refused_with_a_reason() {
        for (head, why) in [
            (
                &b"GET /index.html HTTP/1.1\r\n\r\n"[..],
                "not a proxy request",
            ),
            (
                b"GET https://example.com/ HTTP/1.1\r\n\r\n",
                "through CONNECT",
            ),
            (
                b"GET ftp://example.com/ HTTP/1.1\r\n\r\n",
                "not a proxy request",
            ),
            (b"GET http://example.com/ HTTP/2\r\n\r\n", "HTTP/1.1"),
            (b"get http://example.com/ HTTP/1.1\r\n\r\n", "capitals"),
            (b"GET  http://example.com/ HTTP/1.1\r\n\r\n", "request line"),
            (
                b"GET http://example.com/ HTTP/1.1\r\nNo colon\r\n\r\n",
                "without `:`",
            ),
            (
                b"GET http://example.com/ HTTP/1.1\r\nA\x01: b\r\n\r\n",
                "malformed header",
            ),
            (
                b"GET http://example.com/ HTTP/1.1\r\nA: b\x00\r\n\r\n",
                "malformed header",
            ),
            (
                // NEL (U+0085): a control httparse lets through as obs-text.
                "GET http://example.com/ HTTP/1.1\r\nA: b\u{85}c\r\n\r\n".as_bytes(),
                "malformed header",
            ),
            (
                b"GET http://example.com/ HTTP/1.1\r\nA : b\r\n\r\n",
                "malformed header",
            ),
            (b"GET http://ex ample.com/ HTTP/1.1\r\n\r\n", "request line"),
            (
                b"GET http://example.com/a#b HTTP/1.1\r\n\r\n",
                "malformed URI",
            ),
            (
                b"GET http://u:p@example.com/ HTTP/1.1\r\n\r\n",
                "credentials",
            ),
            (b"GET http://\xff/ HTTP/1.1\r\n\r\n", "UTF-8"),
        ] {
            let e = parse(head).unwrap_err();
            assert!(e.reason().contains(why), "{head:?}: {}", e.reason());
        }
        let many: String = (0..=MAX_HEADERS).map(|n| format!("H{n}: v\r\n")).collect();
        let head = format!("GET http://example.com/ HTTP/1.1\r\n{many}\r\n");
        assert!(
            parse(head.as_bytes())
                .unwrap_err()
                .reason()
                .contains("too many")
        );
    }

    #[test]
    fn the_head_is_read_up_to_its_blank_line_and_bounded() {
        let mut input: &[u8] = b"CONNECT a.com:443 HTTP/1.1\r\n\r\n\x16\x03\x01tls";
        let (head, rest) = read_head(&mut input).unwrap();
        assert_eq!(head, b"CONNECT a.com:443 HTTP/1.1\r\n\r\n");
        assert_eq!(rest, b"\x16\x03\x01tls");
        let big = format!(
            "GET http://a.com/ HTTP/1.1\r\nX: {}\r\n\r\n",
            "x".repeat(MAX_HEAD)
        );
        assert_eq!(
            read_head(&mut big.as_bytes()).unwrap_err(),
            BadHead::TooLarge
        );
        let endless = vec![b'x'; 10 * MAX_HEAD];
        assert_eq!(read_head(&mut &endless[..]).unwrap_err(), BadHead::TooLarge);
        assert_eq!(
            read_head(&mut &b"GET http://a"[..]).unwrap_err(),
            BadHead::Closed
        );
    }

    #[test]
    fn quickcheck_arbitrary_heads_never_panic() {
        fn prop(bytes: Vec<u8>, prefix: bool) -> bool {
            let mut head = if prefix {
                b"GET http://example.com/ HTTP/1.1\r\n".to_vec()
            } else {
                Vec::new()
            };
            head.extend_from_slice(&bytes);
            match parse(&head) {
                Ok(r) => {
                    r.via == Via::Connect || r.upstream_head.ends_with(b"Connection: close\r\n\r\n")
                }
                Err(e) => !e.reason().is_empty(),
            }
        }
        quickcheck::QuickCheck::new()
            .tests(2000)
            .quickcheck(prop as fn(Vec<u8>, bool) -> bool);
    }
}
