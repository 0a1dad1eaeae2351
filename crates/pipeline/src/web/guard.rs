//! The checks every request passes before a handler sees it (SPEC §14):
//! - **User** (every connection from this machine, as it is accepted, before its
//!   request is read): the client's socket must belong to the user who started the
//!   server (`peer`), so another local user can neither read the pages (and the
//!   token in them) nor change anything, nor keep the owner out.
//! - **Host** (every request, GET too): the host the browser used must be the IP
//!   address the connection came to, with the server's port; never a name. A page
//!   of another site that re-points its own name to 127.0.0.1 (DNS rebinding) sends
//!   its own name and is refused, so it can neither read our pages (and the token in
//!   them) nor post to us. `localhost` is a name too: a browser may take it to
//!   another user's server on the other loopback address, whose page would then be
//!   same-origin with ours (`listen`).
//! - **Origin** (state-changing requests): when a browser sends one it must be this
//!   server's own origin, `http://<Host>`.
//! - **Token** (state-changing requests): the per-process token (`token.rs`), which
//!   only our own pages carry.
//! - **Content-Type** (state-changing requests): `application/json`, which a plain
//!   HTML form cannot send.

use std::net::{IpAddr, SocketAddr};

use super::http::Request;
use super::peer;
use super::token::{self, Token};

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Denied {
    /// 403: the connection comes from another local user (or one we cannot tell).
    User(String),
    /// 421: a Host that is not this server's address; the URL that is.
    Host { host: String, url: String },
    /// 403: another origin.
    Origin(String),
    /// 403: the token is missing or wrong.
    Token,
    /// 415: not a JSON body.
    ContentType,
}

impl Denied {
    /// The status and message to answer with.
    pub(crate) fn status(&self) -> (u16, String) {
        match self {
            Denied::User(who) => (
                403,
                format!(
                    "this web view answers only the user who started it; this connection comes from {who}"
                ),
            ),
            Denied::Host { host, url } => (
                421,
                format!(
                    "Host {host:?} is not this server's address: open {url} (the address it printed; a name, localhost too, could lead a browser to another program)"
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
pub(crate) struct Guard {
    addr: SocketAddr,
    token: Token,
    /// The server's own user.
    uid: u32,
}

impl Guard {
    /// The checks of a server listening on `addr` with `token`.
    pub(crate) fn new(addr: SocketAddr, token: Token) -> Self {
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        Guard { addr, token, uid }
    }

    /// The token, to embed in pages.
    pub(crate) fn token(&self) -> &Token {
        &self.token
    }

    /// The user check, for every connection: from `peer` to our `local` address.
    /// A client on this machine must be our user; one that is not listed is on
    /// another machine (allowed only with `--allow-remote`), unless it comes over
    /// loopback, where it cannot be told and is refused.
    pub(crate) fn check_peer(&self, peer: SocketAddr, local: SocketAddr) -> Result<(), Denied> {
        match peer::owner(peer, local) {
            Ok(Some(uid)) if uid == self.uid => Ok(()),
            Ok(Some(uid)) => Err(Denied::User(format!("uid {uid}"))),
            Ok(None) if !peer.ip().to_canonical().is_loopback() => Ok(()),
            Ok(None) => Err(Denied::User(
                "a socket the kernel does not list in /proc/net/tcp".into(),
            )),
            Err(e) => {
                log::warn!("cannot tell who connected from {peer}: /proc/net/tcp: {e}");
                if peer.ip().to_canonical().is_loopback() {
                    Err(Denied::User(format!(
                        "a user that cannot be told (/proc/net/tcp: {e})"
                    )))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The Host check, for every request, which came to our `local` address.
    pub(crate) fn check_host(&self, request: &Request, local: SocketAddr) -> Result<(), Denied> {
        let host = request.header("host").unwrap_or("");
        if request.count("host") == 1 && self.host_is_ours(host, local) {
            Ok(())
        } else {
            Err(Denied::Host {
                host: host.to_string(),
                url: format!("http://{local}/"),
            })
        }
    }

    /// The checks for a request that changes state (after `check_host`).
    pub(crate) fn check_change(&self, request: &Request) -> Result<(), Denied> {
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

    /// Whether `host` is the IP address `local` (any IP address when the server
    /// listens on all of them: a port forwarded to it keeps its own), with our port.
    fn host_is_ours(&self, host: &str, local: SocketAddr) -> bool {
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) if !name.ends_with(':') && !port.contains(']') => {
                (name, port.parse::<u16>().ok())
            }
            _ => (host, Some(80)),
        };
        if port != Some(local.port()) {
            return false;
        }
        let literal = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(name);
        let Ok(ip) = literal.parse::<IpAddr>() else {
            return false;
        };
        self.addr.ip().is_unspecified() || ip.to_canonical() == local.ip().to_canonical()
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
    fn only_the_address_a_connection_came_to_passes_the_host_check() {
        let guard = Guard::new(
            "127.0.0.1:8765".parse().unwrap(),
            Token::generate().unwrap(),
        );
        let v4: SocketAddr = "127.0.0.1:8765".parse().unwrap();
        let v6: SocketAddr = "[::1]:8765".parse().unwrap();
        let check = |host: &str, local| guard.check_host(&request(&[("host", host)]), local);
        assert_eq!(check("127.0.0.1:8765", v4), Ok(()));
        assert_eq!(check("[::1]:8765", v6), Ok(()), "the other loopback socket");
        for bad in [
            "localhost:8765",
            "LOCALHOST:8765",
            "foo.localhost:8765",
            "[::1]:8765",
            "127.0.0.2:8765",
            "[::ffff:127.0.0.2]:8765",
            "evil.example:8765",
            "127.0.0.1.nip.io:8765",
            "127.0.0.1:8766",
            "127.0.0.1",
            "127.1:8765",
            "localhost",
            "10.0.0.1:8765",
            "",
            "[::1]",
            "localhost:8765:8765",
        ] {
            assert_eq!(
                check(bad, v4),
                Err(Denied::Host {
                    host: bad.into(),
                    url: "http://127.0.0.1:8765/".into()
                }),
                "{bad}"
            );
        }
        assert_eq!(
            check("[::ffff:127.0.0.1]:8765", v4),
            Ok(()),
            "the same address"
        );
        assert!(check("127.0.0.1:8765", v6).is_err());
        assert!(check("localhost:8765", v6).is_err());
        assert!(guard.check_host(&request(&[]), v4).is_err(), "no Host");
        let two = request(&[("host", "127.0.0.1:8765"), ("host", "evil:8765")]);
        assert!(guard.check_host(&two, v4).is_err(), "two Hosts");
        let (_, message) = check("localhost:8765", v4).unwrap_err().status();
        assert!(message.contains("open http://127.0.0.1:8765/"), "{message}");
        // --allow-remote on every address: any address of the machine, never a name.
        let remote = Guard::new("0.0.0.0:80".parse().unwrap(), Token::generate().unwrap());
        let lan: SocketAddr = "192.168.1.5:80".parse().unwrap();
        let check = |host: &str| remote.check_host(&request(&[("host", host)]), lan);
        assert_eq!(check("192.168.1.5"), Ok(()));
        assert_eq!(check("203.0.113.7:80"), Ok(()), "a forwarded port");
        assert!(check("evil.example").is_err());
        assert!(check("localhost").is_err());
        let one = Guard::new(lan, Token::generate().unwrap());
        let check = |host: &str| one.check_host(&request(&[("host", host)]), lan);
        assert_eq!(check("192.168.1.5"), Ok(()));
        assert!(check("192.168.1.6").is_err());
        assert!(check("localhost").is_err());
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
