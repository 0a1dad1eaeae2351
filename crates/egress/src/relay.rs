//! Carrying bytes both ways between the client (the bridge's unix connection) and
//! the destination, counting them. One thread per direction, so neither side's
//! back-pressure can stall the other; a connection on which nothing moves either
//! way for the idle timeout is closed, and so is one whose peer stops reading (a
//! write that waits that long fails). An end of input is passed on as a half-close;
//! a side that cannot be written stops its direction only, so the other still
//! delivers what it has (a server's answer to a request it stopped reading).
//!
//! Bytes move with `splice(2)` through a pipe, socket to socket inside the kernel:
//! no copy through the proxy's memory, which is what keeps a download through it
//! close to a direct one on a busy machine (and its memory flat). Where the kernel
//! cannot splice between these sockets, a plain read/write loop does the same.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A pipe's capacity at first (the kernel's default), and once a direction has
/// carried `BULK` bytes: a download then moves in fewer, larger steps. (Pipe pages
/// are kernel memory counted against the user, so only bulk transfers get more;
/// where the kernel refuses, the pipe stays as it is.)
const PIPE: usize = 64 * 1024;
const BULK_PIPE: usize = 1024 * 1024;
const BULK: u64 = 4 * 1024 * 1024;
/// Bytes read per system call without splice.
const BUFFER: usize = 32 * 1024;
/// Stack of the second direction's thread (it only moves bytes).
const PUMP_STACK: usize = 64 * 1024;

/// Bytes carried each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Traffic {
    /// Client to destination.
    pub(crate) up: u64,
    /// Destination to client.
    pub(crate) down: u64,
}

/// The socket operations a direction needs, for both kinds of socket.
pub(crate) trait Socket: AsRawFd + Send + Sync + 'static {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()>;
    fn shutdown(&self, how: Shutdown) -> std::io::Result<()>;
    fn read_into(&self, buffer: &mut [u8]) -> std::io::Result<usize>;
    fn write_whole(&self, bytes: &[u8]) -> std::io::Result<()>;
}

macro_rules! socket {
    ($type:ty) => {
        impl Socket for $type {
            fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
                <$type>::set_read_timeout(self, timeout)
            }
            fn shutdown(&self, how: Shutdown) -> std::io::Result<()> {
                <$type>::shutdown(self, how)
            }
            fn read_into(&self, buffer: &mut [u8]) -> std::io::Result<usize> {
                (&mut &*self).read(buffer)
            }
            fn write_whole(&self, bytes: &[u8]) -> std::io::Result<()> {
                (&mut &*self).write_all(bytes)
            }
        }
    };
}

socket!(TcpStream);
socket!(UnixStream);

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
pub(crate) fn relay(client: Arc<UnixStream>, upstream: Arc<TcpStream>, idle: Duration) -> Traffic {
    relay_by(client, upstream, idle, true)
}

/// `relay`, splicing when `splice` (else copying, as where the kernel cannot).
fn relay_by(
    client: Arc<UnixStream>,
    upstream: Arc<TcpStream>,
    idle: Duration,
    splice: bool,
) -> Traffic {
    let activity = Arc::new(Activity {
        began: Instant::now(),
        last: AtomicU64::new(0),
    });
    if client.set_write_timeout(Some(idle)).is_err()
        || upstream.set_write_timeout(Some(idle)).is_err()
    {
        return Traffic::default();
    }
    let (down_from, down_to, down_activity) = (upstream.clone(), client.clone(), activity.clone());
    let down = std::thread::Builder::new()
        .name("egress-down".into())
        .stack_size(PUMP_STACK)
        .spawn(move || pump(&*down_from, &*down_to, &down_activity, idle, splice));
    let up = pump(&*client, &*upstream, &activity, idle, splice);
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

/// What one step of a direction did.
enum Step {
    Moved(usize),
    /// The read timed out (the idle check decides).
    Waited,
    Ended(End),
    /// The kernel cannot splice these sockets (nothing was moved).
    Unsupported,
}

/// Moves `from` to `to` until it ends (see `End`). Returns the bytes moved.
fn pump(
    from: &dyn Socket,
    to: &dyn Socket,
    activity: &Activity,
    idle: Duration,
    splice: bool,
) -> u64 {
    let mut moved = 0u64;
    let mut mover = match Pipe::new() {
        Ok(pipe) if splice => Mover::Splice(pipe),
        _ => Mover::Copy(vec![0u8; BUFFER]),
    };
    let mut timeout = idle;
    let end = loop {
        if from
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .is_err()
        {
            break End::Input;
        }
        match mover.step(from, to) {
            Step::Moved(0) => {}
            Step::Moved(n) => {
                moved += n as u64;
                activity.touch();
                timeout = idle;
            }
            Step::Waited => {
                let quiet = activity.idle_for();
                if quiet >= idle {
                    break End::Idle;
                }
                timeout = idle - quiet;
            }
            Step::Ended(end) => break end,
            Step::Unsupported => mover = Mover::Copy(vec![0u8; BUFFER]),
        }
    };
    let _ = match end {
        End::Input => to.shutdown(Shutdown::Write),
        End::Output => from.shutdown(Shutdown::Read),
        End::Idle => from
            .shutdown(Shutdown::Both)
            .and_then(|()| to.shutdown(Shutdown::Both)),
    };
    moved
}

/// How a direction moves bytes.
enum Mover {
    Splice(Pipe),
    Copy(Vec<u8>),
}

impl Mover {
    fn step(&mut self, from: &dyn Socket, to: &dyn Socket) -> Step {
        match self {
            Mover::Splice(pipe) => pipe.step(from.as_raw_fd(), to.as_raw_fd()),
            Mover::Copy(buffer) => match from.read_into(buffer) {
                Ok(0) => Step::Ended(End::Input),
                Ok(n) => match to.write_whole(&buffer[..n]) {
                    Ok(()) => Step::Moved(n),
                    Err(_) => Step::Ended(End::Output),
                },
                Err(e) => read_error(e.kind()),
            },
        }
    }
}

fn read_error(kind: std::io::ErrorKind) -> Step {
    match kind {
        std::io::ErrorKind::Interrupted => Step::Moved(0),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Step::Waited,
        _ => Step::Ended(End::Input),
    }
}

/// A pipe that bytes pass through on their way from one socket to the other.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// Bytes moved so far (none yet: an unsupported splice falls back to copying).
    moved: u64,
    capacity: usize,
}

impl Pipe {
    fn new() -> std::io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: two fresh descriptors that nothing else owns.
        Ok(unsafe {
            Pipe {
                read: OwnedFd::from_raw_fd(fds[0]),
                write: OwnedFd::from_raw_fd(fds[1]),
                moved: 0,
                capacity: PIPE,
            }
        })
    }

    /// Splices what `from` has (up to the pipe's capacity) into the pipe, then all
    /// of it out to `to`. Reads and writes block, bounded by the sockets' timeouts.
    fn step(&mut self, from: RawFd, to: RawFd) -> Step {
        if self.moved >= BULK && self.capacity < BULK_PIPE {
            // SAFETY: a valid pipe descriptor; on failure the size stays.
            let size = BULK_PIPE as libc::c_int;
            if unsafe { libc::fcntl(self.write.as_raw_fd(), libc::F_SETPIPE_SZ, size) } > 0 {
                self.capacity = BULK_PIPE;
            } else {
                self.capacity = usize::MAX;
            }
        }
        // SAFETY: valid descriptors; no offsets (sockets and pipes have none).
        let n = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                self.write.as_raw_fd(),
                std::ptr::null_mut(),
                self.capacity.min(BULK_PIPE),
                libc::SPLICE_F_MOVE,
            )
        };
        if n == 0 {
            return Step::Ended(End::Input);
        }
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) if self.moved == 0 => {
                    Step::Unsupported
                }
                _ => read_error(e.kind()),
            };
        }
        self.moved += n as u64;
        let mut left = n as usize;
        while left > 0 {
            // SAFETY: as above.
            let m = unsafe {
                libc::splice(
                    self.read.as_raw_fd(),
                    std::ptr::null_mut(),
                    to,
                    std::ptr::null_mut(),
                    left,
                    libc::SPLICE_F_MOVE,
                )
            };
            if m > 0 {
                left -= m as usize;
            } else if m < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            } else {
                return Step::Ended(End::Output);
            }
        }
        Step::Moved(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A relay between a unix socket pair's far end and a TCP connection's far end;
    /// returns (client end, server end, the relay's thread).
    fn rig(idle: Duration) -> (UnixStream, TcpStream, std::thread::JoinHandle<Traffic>) {
        rig_by(idle, true)
    }

    fn rig_by(
        idle: Duration,
        splice: bool,
    ) -> (UnixStream, TcpStream, std::thread::JoinHandle<Traffic>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let (client, proxy_side) = UnixStream::pair().unwrap();
        let relay = std::thread::spawn(move || {
            relay_by(Arc::new(proxy_side), Arc::new(upstream), idle, splice)
        });
        (client, server, relay)
    }

    #[test]
    fn bytes_go_both_ways_and_half_closes_are_passed_on() {
        for splice in [true, false] {
            both_ways(splice);
        }
    }

    fn both_ways(splice: bool) {
        let (mut client, mut server, relay) = rig_by(Duration::from_secs(30), splice);
        client.write_all(b"request").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        server.read_to_end(&mut got).unwrap();
        assert_eq!(
            got, b"request",
            "the client's end of input reached the server"
        );
        let big: Vec<u8> = (0..3_000_000u32).map(|n| (n % 251) as u8).collect();
        server.write_all(&big).unwrap();
        drop(server);
        let mut back = Vec::new();
        client.read_to_end(&mut back).unwrap();
        assert!(back == big, "3 MB came back whole and in order");
        assert_eq!(
            relay.join().unwrap(),
            Traffic {
                up: 7,
                down: 3_000_000
            }
        );
    }

    #[test]
    fn an_answer_still_arrives_when_its_server_stopped_reading() {
        let (mut client, mut server, relay) = rig(Duration::from_secs(30));
        client.write_all(b"first").unwrap();
        let mut first = [0u8; 5];
        server.read_exact(&mut first).unwrap();
        server.write_all(b"answer").unwrap();
        drop(server);
        // The client keeps sending into a closed connection; its answer comes anyway.
        let _ = client.write_all(&[0u8; 200_000]);
        let mut back = Vec::new();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let _ = client.read_to_end(&mut back);
        assert_eq!(back, b"answer");
        assert_eq!(relay.join().unwrap().down, 6);
    }

    #[test]
    fn a_client_that_stops_reading_can_still_send() {
        let (mut client, mut server, relay) = rig(Duration::from_secs(30));
        client.shutdown(Shutdown::Read).unwrap();
        // Toward the client nothing can be written any more...
        server.write_all(b"unwanted").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        // ...but the other way still carries.
        client.write_all(b"after").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        server
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        server.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"after");
        drop(server);
        assert_eq!(relay.join().unwrap().up, 5);
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
