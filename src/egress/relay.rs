//! Carrying bytes both ways between the client (the bridge's unix connection) and
//! the destination, counting them. One thread per direction, so neither side's
//! back-pressure can stall the other; a connection on which nothing moves either
//! way for the idle timeout is closed, and so is one whose peer stops reading (a
//! write that waits that long fails). An end of input is passed on as a half-close;
//! a side that cannot be written stops its direction only, so the other still
//! delivers what it has (a server's answer to a request it stopped reading).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Bytes read per system call (and held per direction).
const BUFFER: usize = 32 * 1024;
/// Stack of the second direction's thread (it only copies).
const PUMP_STACK: usize = 64 * 1024;

/// Bytes carried each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Client to destination.
    pub up: u64,
    /// Destination to client.
    pub down: u64,
}

/// The socket operations a direction needs, for both kinds of socket.
trait Socket: Read + Write + Send + 'static {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()>;
    fn shutdown(&self, how: Shutdown) -> std::io::Result<()>;
}

impl Socket for TcpStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        TcpStream::set_read_timeout(self, timeout)
    }
    fn shutdown(&self, how: Shutdown) -> std::io::Result<()> {
        TcpStream::shutdown(self, how)
    }
}

impl Socket for UnixStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        UnixStream::set_read_timeout(self, timeout)
    }
    fn shutdown(&self, how: Shutdown) -> std::io::Result<()> {
        UnixStream::shutdown(self, how)
    }
}

/// When anything last moved on the connection, in milliseconds since it began.
struct Activity {
    began: Instant,
    last: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        let now = self.began.elapsed().as_millis() as u64;
        self.last.fetch_max(now, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        self.began.elapsed().saturating_sub(last)
    }
}

/// Relays until both directions have ended (or the connection idles for `idle`);
/// returns the bytes carried.
pub fn relay(client: UnixStream, upstream: TcpStream, idle: Duration) -> Traffic {
    let activity = Arc::new(Activity {
        began: Instant::now(),
        last: AtomicU64::new(0),
    });
    for timeout in [
        client.set_write_timeout(Some(idle)),
        upstream.set_write_timeout(Some(idle)),
    ] {
        if timeout.is_err() {
            return Traffic::default();
        }
    }
    let (Ok(client_writer), Ok(upstream_reader)) = (client.try_clone(), upstream.try_clone())
    else {
        return Traffic::default();
    };
    let down_activity = activity.clone();
    let down = std::thread::Builder::new()
        .name("egress-down".into())
        .stack_size(PUMP_STACK)
        .spawn(move || pump(upstream_reader, client_writer, &down_activity, idle));
    let up = pump(client, upstream, &activity, idle);
    let down = match down {
        Ok(handle) => handle.join().unwrap_or(0),
        Err(_) => 0,
    };
    Traffic { up, down }
}

/// How a direction ended.
enum End {
    /// `from` ended (or failed): passed on as a half-close of `to`.
    Input,
    /// `to` cannot take more: this direction stops reading; the other one goes on.
    Output,
    /// Nothing moved either way for the idle timeout: the connection closes.
    Idle,
}

/// Copies `from` to `to` until it ends (see `End`). Returns the bytes copied.
fn pump<R: Socket, W: Socket>(mut from: R, mut to: W, activity: &Activity, idle: Duration) -> u64 {
    let mut buffer = vec![0u8; BUFFER];
    let mut copied = 0u64;
    let mut timeout = idle;
    let end = loop {
        if from
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .is_err()
        {
            break End::Input;
        }
        match from.read(&mut buffer) {
            Ok(0) => break End::Input,
            Ok(n) => {
                activity.touch();
                if to.write_all(&buffer[..n]).is_err() {
                    break End::Output;
                }
                copied += n as u64;
                activity.touch();
                timeout = idle;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                let quiet = activity.idle_for();
                if quiet >= idle {
                    break End::Idle;
                }
                timeout = idle - quiet;
            }
            Err(_) => break End::Input,
        }
    };
    let _ = match end {
        End::Input => to.shutdown(Shutdown::Write),
        End::Output => from.shutdown(Shutdown::Read),
        End::Idle => from
            .shutdown(Shutdown::Both)
            .and_then(|()| to.shutdown(Shutdown::Both)),
    };
    copied
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A relay between a unix socket pair's far end and a TCP connection's far end;
    /// returns (client end, server end, the relay's thread).
    fn rig(idle: Duration) -> (UnixStream, TcpStream, std::thread::JoinHandle<Traffic>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let (client, proxy_side) = UnixStream::pair().unwrap();
        let relay = std::thread::spawn(move || relay(proxy_side, upstream, idle));
        (client, server, relay)
    }

    #[test]
    fn bytes_go_both_ways_and_half_closes_are_passed_on() {
        let (mut client, mut server, relay) = rig(Duration::from_secs(30));
        client.write_all(b"request").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        server.read_to_end(&mut got).unwrap();
        assert_eq!(
            got, b"request",
            "the client's end of input reached the server"
        );
        server.write_all(&vec![7u8; 300_000]).unwrap();
        drop(server);
        let mut back = Vec::new();
        client.read_to_end(&mut back).unwrap();
        assert_eq!(back.len(), 300_000);
        assert_eq!(
            relay.join().unwrap(),
            Traffic {
                up: 7,
                down: 300_000
            }
        );
    }

    #[test]
    fn an_idle_connection_is_closed_but_a_busy_one_in_one_direction_is_not() {
        let idle = Duration::from_millis(300);
        let (mut client, mut server, relay) = rig(idle);
        // Only the server talks, for longer than the idle timeout: the client's
        // silent direction must not close the connection.
        let mut last_write = Instant::now();
        for n in 0..6 {
            if n > 0 {
                std::thread::sleep(Duration::from_millis(100));
            }
            server.write_all(b"tick").unwrap();
            last_write = Instant::now();
        }
        let mut got = Vec::new();
        client.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"tick".repeat(6), "open while one side talked");
        let quiet = last_write.elapsed();
        assert!(
            quiet >= Duration::from_millis(250),
            "closed only once idle: {quiet:?}"
        );
        assert_eq!(relay.join().unwrap().down, 24);
        let mut rest = Vec::new();
        assert!(
            server.read_to_end(&mut rest).is_ok_and(|n| n == 0),
            "the server's side is closed too"
        );
    }
}
