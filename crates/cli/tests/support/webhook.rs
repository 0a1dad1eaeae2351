//! A webhook receiver (SPEC §23 notify) on the loopback: records each POST and
//! answers the status it was made with; `signed_by` checks a request's
//! `X-Agent-Runner-Signature` against the HMAC-SHA256 of its body.

use super::server::{Conn, Next, Protocol, Received, Server};

pub type Receiver = Server<Hook>;

/// Answers every request with `status`.
pub struct Hook {
    status: u16,
}

impl Server<Hook> {
    /// A receiver on `ip` answering `status`.
    pub fn start(ip: &str, status: u16) -> Self {
        Server::listen(ip, Hook { status })
    }

    /// Its URL, with a path that stands for a hook's token.
    pub fn url(&self) -> String {
        format!("http://{}/hooks/T0K3N", self.authority())
    }
}

impl Protocol for Hook {
    fn answer(&self, _: &Received, _: usize, conn: &mut Conn) -> std::io::Result<Next> {
        conn.respond(self.status, &[("Connection", "close")], "")?;
        Ok(Next::Close)
    }
}

/// Whether `request` carries the signature of its body with `key`.
pub fn signed_by(request: &Received, key: &str) -> bool {
    let tag = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes()),
        request.body.as_bytes(),
    );
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    request.header("X-Agent-Runner-Signature") == Some(format!("sha256={hex}").as_str())
}
