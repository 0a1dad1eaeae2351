//! The bridge's control connection (`socket.rs`): the requests only agent-runner
//! makes ("quiet", and "exec" and "signal", `main_exec.rs`), and their
//! answer lines, read as hostile. See `socket.rs` for why a socket.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Instant;

use super::quiet::{self, Quiet};

/// The bridge's control connection; see the module documentation.
#[derive(Default)]
pub(crate) struct Control {
    /// Where the bridge connects to take requests, until it did.
    listener: Option<UnixListener>,
    /// The bridge's connection, once accepted.
    bridge: Option<UnixStream>,
}

/// The longest answer read: "agent-runner-quiet FOUND LEFT\n" is far shorter.
const LONGEST_ANSWER: usize = 64;

/// Why the bridge did not answer a request.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AskError {
    #[error("its control connection was lost before")]
    Lost,
    #[error("it never connected to agent-runner's control socket")]
    NeverConnected,
    #[error("accept on the control socket: {0}")]
    Accept(std::io::Error),
    #[error("the control socket: {0}")]
    Socket(std::io::Error),
    #[error("no control connection")]
    NoConnection,
    #[error("the request could not be sent: {0}")]
    Send(std::io::Error),
    #[error("no answer within {} s", quiet::WITHIN.as_secs())]
    NoAnswer,
    #[error("its answer is too long")]
    TooLong,
    #[error("it closed the control connection")]
    Closed,
    #[error("reading its answer: {0}")]
    Read(std::io::Error),
    #[error("it answered {0:?}")]
    Answered(String),
}

impl Control {
    /// Waiting on `listener` for the bridge's connection.
    pub(crate) fn new(listener: UnixListener) -> Control {
        Control {
            listener: Some(listener),
            bridge: None,
        }
    }

    /// The bridge's connection: the first accepted, after which nothing else is.
    pub(crate) fn bridge(&mut self) -> Result<&mut UnixStream, AskError> {
        if self.bridge.is_none() {
            let listener = self.listener.take().ok_or(AskError::Lost)?;
            let (stream, _) = listener.accept().map_err(|e| match e.kind() {
                std::io::ErrorKind::WouldBlock => AskError::NeverConnected,
                _ => AskError::Accept(e),
            })?;
            stream
                .set_nonblocking(false)
                .and_then(|()| stream.set_write_timeout(Some(quiet::WITHIN)))
                .map_err(AskError::Socket)?;
            self.bridge = Some(stream);
        }
        self.bridge.as_mut().ok_or(AskError::NoConnection)
    }

    /// "quiet" sent, its answer read within `quiet::WITHIN` (bounded, read as
    /// hostile). Any failure drops the connection: no later answer is trusted.
    pub(crate) fn ask(&mut self) -> Result<Quiet, AskError> {
        let asked = self.ask_on_connection();
        if asked.is_err() {
            self.bridge = None;
        }
        asked
    }

    fn ask_on_connection(&mut self) -> Result<Quiet, AskError> {
        let stream = self.bridge()?;
        stream
            .write_all(format!("{}\n", quiet::REQUEST).as_bytes())
            .map_err(AskError::Send)?;
        let line = read_answer(stream)?;
        line.strip_prefix(quiet::ANSWER)
            .and_then(Quiet::parse)
            .ok_or_else(|| AskError::Answered(line.to_string()))
    }

    /// Drops the connection after a failure: no later answer is trusted.
    pub(crate) fn drop_connection(&mut self) {
        self.bridge = None;
    }
}

/// The bridge's answer line to a request on `stream`, read within
/// `quiet::WITHIN` (bounded, read as hostile).
pub(crate) fn read_answer(stream: &mut UnixStream) -> Result<String, AskError> {
    {
        let deadline = Instant::now() + quiet::WITHIN;
        let mut answer = Vec::new();
        let mut chunk = [0u8; LONGEST_ANSWER];
        while !answer.contains(&b'\n') {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || answer.len() > LONGEST_ANSWER {
                return Err(match left.is_zero() {
                    true => AskError::NoAnswer,
                    false => AskError::TooLong,
                });
            }
            stream
                .set_read_timeout(Some(left))
                .map_err(AskError::Socket)?;
            match stream.read(&mut chunk) {
                Ok(0) => return Err(AskError::Closed),
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(AskError::Read(e)),
            }
        }
        let text = String::from_utf8_lossy(&answer);
        Ok(text.lines().next().unwrap_or_default().to_string())
    }
}
