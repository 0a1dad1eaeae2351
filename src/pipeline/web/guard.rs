//! The checks every request passes before a handler sees it (SPEC §14):
//! - **Host** (every request, GET too): the name the browser used must be an IP
//!   address the server listens on, or `localhost`, with the server's port. A page
//!   of another site that re-points its own name to 127.0.0.1 (DNS rebinding) sends
//!   its own name and is refused, so it can neither read our pages (and the token in
//!   them) nor post to us.
//! - **Origin** (state-changing requests): when a browser sends one it must be this
//!   server's own origin, `http://<Host>`.
//! - **Token** (state-changing requests): the per-process token (`token.rs`), which
//!   only our own pages carry.
//! - **Content-Type** (state-changing requests): `application/json`, which a plain
//!   HTML form cannot send.

use std::net::{IpAddr, SocketAddr};

use super::http::Request;
use super::token::{self, Token};

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// 421: a Host that is not this server's.
    Host(String),
    /// 403: another origin.
    Origin(String),
    /// 403: the token is missing or wrong.
    Token,
    /// 415: not a JSON body.
    ContentType,
}

impl Denied {
    /// The status and message to answer with.
    pub fn status(&self) -> (u16, String) {
        match self {
            Denied::Host(host) => (
                421,
                format!(
                    "Host {host:?} is not this server: use its address (e.g. http://127.0.0.1:<port>/) or localhost"
                ),
            ),
            Denied::Origin(origin) => (
                403,
                format!("a request from origin {origin:?} may not change anything here"),
            ),
            Denied::Token => (
                403,
                "missing or wrong X-Agent-Runner-Token header: reload the page".into(),
            ),
            Denied::ContentType => (415, "the body must be application/json".into()),
        }
    }
}

/// The checks of one server: its address and token.
#[derive(Debug, Clone)]
pub struct Guard {
    addr: SocketAddr,
    token: Token,
}

impl Guard {
    /// The checks of a server listening on `addr` with `token`.
    pub fn new(addr: SocketAddr, token: Token) -> Self {
        Guard { addr, token }
    }

    /// The token, to embed in pages.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// The Host check, for every request.
    pub fn check_host(&self, request: &Request) -> Result<(), Denied> {
        let host = request.header("host").unwrap_or("");
        if request.count("host") == 1 && self.host_is_ours(host) {
            Ok(())
        } else {
            Err(Denied::Host(host.to_string()))
        }
    }

    /// The checks for a request that changes state (after `check_host`).
    pub fn check_change(&self, request: &Request) -> Result<(), Denied> {
        if let Some(origin) = request.header("origin") {
            let ours = format!("http://{}", request.header("host").unwrap_or(""));
            if !origin.eq_ignore_ascii_case(&ours) {
                return Err(Denied::Origin(origin.to_string()));
            }
        }
        let token_ok = request.count(token::HEADER) == 1
            && request
                .header(token::HEADER)
                .is_some_and(|t| self.token.matches(t));
        if !token_ok {
            return Err(Denied::Token);
        }
        let json = request.header("content-type").is_some_and(|t| {
            t.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
        if !json {
            return Err(Denied::ContentType);
        }
        Ok(())
    }

    fn host_is_ours(&self, host: &str) -> bool {
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) if !name.ends_with(':') && !port.contains(']') => {
                (name, port.parse::<u16>().ok())
            }
            _ => (host, Some(80)),
        };
        if port != Some(self.addr.port()) {
            return false;
        }
        if name.eq_ignore_ascii_case("localhost") {
            return self.addr.ip().is_loopback() || self.addr.ip().is_unspecified();
        }
        let literal = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(name);
        let Ok(ip) = literal.parse::<IpAddr>() else {
            return false;
        };
        let bound = self.addr.ip();
        ip == bound || bound.is_unspecified() || (bound.is_loopback() && ip.is_loopback())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request {
        Request {
            method: "POST".into(),
            path: "/".into(),
            query: None,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: Vec::new(),
        }
    }

    #[test]
    fn only_our_own_names_pass_the_host_check() {
        let guard = Guard::new(
            "127.0.0.1:8765".parse().unwrap(),
            Token::generate().unwrap(),
        );
        for ok in [
            "127.0.0.1:8765",
            "localhost:8765",
            "LOCALHOST:8765",
            "127.0.0.2:8765",
            "[::1]:8765",
        ] {
            assert_eq!(guard.check_host(&request(&[("host", ok)])), Ok(()), "{ok}");
        }
        for bad in [
            "evil.example:8765",
            "127.0.0.1.nip.io:8765",
            "127.0.0.1:8766",
            "127.0.0.1",
            "localhost",
            "10.0.0.1:8765",
            "",
            "[::1]",
            "localhost:8765:8765",
        ] {
            assert!(
                guard.check_host(&request(&[("host", bad)])).is_err(),
                "{bad}"
            );
        }
        assert!(guard.check_host(&request(&[])).is_err(), "no Host");
        let two = request(&[("host", "127.0.0.1:8765"), ("host", "evil:8765")]);
        assert!(guard.check_host(&two).is_err(), "two Hosts");
        let remote = Guard::new("0.0.0.0:80".parse().unwrap(), Token::generate().unwrap());
        assert_eq!(
            remote.check_host(&request(&[("host", "192.168.1.5")])),
            Ok(())
        );
        assert!(
            remote
                .check_host(&request(&[("host", "evil.example")]))
                .is_err()
        );
        let lan = Guard::new(
            "192.168.1.5:80".parse().unwrap(),
            Token::generate().unwrap(),
        );
        assert!(lan.check_host(&request(&[("host", "localhost")])).is_err());
        assert!(
            lan.check_host(&request(&[("host", "192.168.1.6")]))
                .is_err()
        );
    }

    #[test]
    fn changes_need_our_origin_the_token_and_json() {
        let token = Token::generate().unwrap();
        let guard = Guard::new("127.0.0.1:8765".parse().unwrap(), token.clone());
        let t = token.as_str();
        let host = ("host", "127.0.0.1:8765");
        let json = ("content-type", "application/json; charset=utf-8");
        let good = request(&[
            host,
            (token::HEADER, t),
            json,
            ("origin", "http://127.0.0.1:8765"),
        ]);
        assert_eq!(guard.check_change(&good), Ok(()));
        let no_origin = request(&[host, (token::HEADER, t), json]);
        assert_eq!(guard.check_change(&no_origin), Ok(()), "not a browser");
        for (bad, why) in [
            (request(&[host, json]), Denied::Token),
            (request(&[host, (token::HEADER, "0"), json]), Denied::Token),
            (
                request(&[host, (token::HEADER, t), (token::HEADER, t), json]),
                Denied::Token,
            ),
            (
                request(&[
                    host,
                    (token::HEADER, t),
                    json,
                    ("origin", "http://evil.example"),
                ]),
                Denied::Origin("http://evil.example".into()),
            ),
            (
                request(&[host, (token::HEADER, t), json, ("origin", "null")]),
                Denied::Origin("null".into()),
            ),
            (
                request(&[host, (token::HEADER, t), ("content-type", "text/plain")]),
                Denied::ContentType,
            ),
            (request(&[host, (token::HEADER, t)]), Denied::ContentType),
        ] {
            assert_eq!(guard.check_change(&bad), Err(why));
        }
    }
}
