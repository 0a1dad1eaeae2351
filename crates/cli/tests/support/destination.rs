//! A destination on the host's loopback (127.0.0.2, 127.0.0.3, …) that stands for a
//! host on the internet in egress tests: it counts connections, records each request
//! head that arrives, answers `hello from <name>` and closes; a connection that sends
//! nothing stays open until the server is dropped.

use super::server::{Conn, Next, Protocol, Received, Server};

pub type Destination = Server<Hello>;

/// Says hello to every request.
pub struct Hello {
    reply: String,
}

impl Server<Hello> {
    /// A server named `name` on `ip`, any free port.
    pub fn start(name: &str, ip: &str) -> Self {
        let reply = format!("hello from {name}");
        Server::listen(ip, Hello { reply })
    }

    /// Request heads received so far.
    pub fn heads(&self) -> Vec<String> {
        self.received().into_iter().map(|r| r.head).collect()
    }
}

impl Protocol for Hello {
    fn answer(&self, _: &Received, _: usize, conn: &mut Conn) -> std::io::Result<Next> {
        let reply = &self.reply;
        conn.write(
            format!(
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            )
            .as_bytes(),
        )?;
        Ok(Next::Close)
    }
}
