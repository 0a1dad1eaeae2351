//! The proxy server: a unix socket listener and one thread per connection, at most
//! `max_connections` at a time (the next ones are answered 503 at once, without a
//! thread). A connection's thread reads the request head within `head_timeout`,
//! asks `policy` whether and where to connect, answers 403 (with the allow entry
//! that would help), 502 or — once connected — `200` for CONNECT (then TLS passes
//! untouched) or forwards a plain request, relays until both sides are done, and
//! records the connection in the journal.
//!
//! `stop` closes the listener and every live connection: the proxy ends with the
//! task. `allow_also` (setup's hosts, `task.setup.allow`) closes, when it changes,
//! every connection let through while the hosts it ends were allowed: a tunnel to a
//! setup-only host opened during setup does not outlive setup, whoever holds it.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::journal::{Journal, NO_HOST, Record, Summary};
use super::policy::{self, Resolve, Verdict};
use super::relay::{self, Socket};
use super::request::{self, BadHead};
use agent_runner_core::timestamp::Timestamp;
use agent_runner_settings::allow::rules::{AllowList, Via};

/// How long the accept loop waits after a failed accept.
const PAUSE: Duration = Duration::from_millis(100);
/// Longest wait for an answer to be taken by a client.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Addresses tried per destination.
const MAX_ADDRESSES: usize = 4;
/// Stack of a connection's thread (it resolves names; copying needs little).
const CONNECTION_STACK: usize = 512 * 1024;
/// How long `stop` waits for connection threads to end.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// The proxy's bounds (SPEC §17) and its resolver.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Connections at a time.
    pub max_connections: usize,
    /// A connection on which nothing moved for this long is closed.
    pub idle: Duration,
    /// Time for a client to send its request head.
    pub head_timeout: Duration,
    /// Time for a destination to accept a connection.
    pub connect_timeout: Duration,
    /// Largest `egress.jsonl`.
    pub max_log_bytes: u64,
    pub resolve: Resolve,
    /// Hosts the agent asks for in the background (`Kind::background_hosts`):
    /// their denials are logged quietly and suggested for no allow list.
    pub background: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_connections: 64,
            idle: Duration::from_secs(300),
            head_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(30),
            max_log_bytes: super::journal::MAX_LOG_BYTES,
            resolve: policy::system_resolve,
            background: Vec::new(),
        }
    }
}

/// A running proxy; see the module documentation.
pub(crate) struct Proxy {
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    /// Closing it wakes the accept loop at once (`stop` must not wait on a tick:
    /// it is on the path of every task's end).
    wake: Option<OwnedFd>,
}

struct Shared {
    allow: AllowList,
    /// More hosts for a while (`task.setup.allow`, while setup runs).
    also: Mutex<Also>,
    journal: Journal,
    settings: Settings,
    stopping: AtomicBool,
    live: Mutex<Live>,
    ended: Condvar,
}

/// The hosts allowed for a while, and the connections decided while they were.
#[derive(Default)]
struct Also {
    list: Option<AllowList>,
    /// Connections whose decision saw `list`: closed when it changes.
    decided: HashSet<u64>,
}

/// Live connections and their sockets, so `stop` can close them.
#[derive(Default)]
struct Live {
    next: u64,
    sockets: HashMap<u64, Vec<Arc<dyn Socket>>>,
    /// Connections closed before they were done (their era ended): no socket of
    /// theirs may be added any more.
    closed: HashSet<u64>,
}

impl Proxy {
    /// Serves `listener` (if any) and the connections handed to its `door` until
    /// `stop`.
    pub(crate) fn start(
        listener: Option<UnixListener>,
        allow: AllowList,
        journal: Journal,
        settings: Settings,
    ) -> std::io::Result<Proxy> {
        let (woken, wake) = pipe()?;
        let shared = Arc::new(Shared {
            allow,
            also: Mutex::new(Also::default()),
            journal,
            settings,
            stopping: AtomicBool::new(false),
            live: Mutex::new(Live::default()),
            ended: Condvar::new(),
        });
        let accepting = shared.clone();
        let acceptor = match listener {
            None => None,
            Some(listener) => {
                listener.set_nonblocking(true)?;
                Some(
                    std::thread::Builder::new()
                        .name("egress-accept".into())
                        .spawn(move || accept_loop(&listener, &woken, &accepting))?,
                )
            }
        };
        Ok(Proxy {
            shared,
            acceptor,
            wake: Some(wake),
        })
    }

    /// Where a connection accepted elsewhere (a lifeline's channel) comes in: served
    /// as one from the listener, under the same rules, bounds and log.
    pub(crate) fn door(&self) -> Arc<dyn Fn(UnixStream) + Send + Sync> {
        let shared = self.shared.clone();
        Arc::new(move |client| {
            if !shared.stopping.load(Ordering::SeqCst) {
                admit(client, &shared);
            }
        })
    }

    /// Allows `also` besides the proxy's list from now on for new connections
    /// (None: the list alone again), and closes every connection let through while
    /// the hosts allowed until now were (a tunnel opened during setup ends with it),
    /// waiting (up to `STOP_WAIT`) until each is in the journal: a connection its
    /// client ended just before is counted in the tally taken next, however soon.
    pub(crate) fn allow_also(&self, also: Option<AllowList>) {
        let ended = match self.shared.also.lock() {
            Ok(mut current) => {
                current.list = also;
                std::mem::take(&mut current.decided)
            }
            Err(_) => return,
        };
        if ended.is_empty() {
            return;
        }
        let Ok(mut live) = self.shared.live.lock() else {
            return;
        };
        for id in &ended {
            for socket in live.sockets.get(id).into_iter().flatten() {
                let _ = socket.shutdown(Shutdown::Both);
            }
            if live.sockets.contains_key(id) {
                live.closed.insert(*id);
            }
        }
        self.shared.wait(live, Instant::now() + STOP_WAIT, |live| {
            ended.iter().all(|id| !live.sockets.contains_key(id))
        });
    }

    /// The tally so far.
    pub(crate) fn summary(&self) -> Summary {
        self.shared.journal.summary()
    }

    /// Stops accepting, closes every live connection, and returns the tally.
    pub(crate) fn stop(mut self) -> Summary {
        self.halt();
        self.shared.journal.finish();
        self.shared.journal.summary()
    }

    fn halt(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        drop(self.wake.take());
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let deadline = Instant::now() + STOP_WAIT;
        let Ok(live) = self.shared.live.lock() else {
            return;
        };
        for socket in live.sockets.values().flatten() {
            let _ = socket.shutdown(Shutdown::Both);
        }
        self.shared
            .wait(live, deadline, |live| live.sockets.is_empty());
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if self.wake.is_some() {
            self.halt();
        }
    }
}

fn accept_loop(listener: &UnixListener, woken: &OwnedFd, shared: &Arc<Shared>) {
    while !shared.stopping.load(Ordering::SeqCst) {
        if !readable(listener, woken) {
            continue;
        }
        match listener.accept() {
            Ok((client, _)) => admit(client, shared),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                log::warn!("egress proxy: accepting a connection failed: {e}");
                std::thread::sleep(PAUSE);
            }
        }
    }
}

/// Waits until `listener` has a connection waiting (true) or `woken` is closed.
fn readable(listener: &UnixListener, woken: &OwnedFd) -> bool {
    let mut fds = [listener.as_raw_fd(), woken.as_raw_fd()].map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    // SAFETY: valid pollfds for the duration of the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
    n > 0 && fds[0].revents & libc::POLLIN != 0
}

/// A pipe: (read end, write end).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Gives a new connection a thread, or answers 503 when there are enough.
fn admit(client: UnixStream, shared: &Arc<Shared>) {
    let at = Timestamp::now();
    if client.set_nonblocking(false).is_err() {
        return;
    }
    let client = Arc::new(client);
    let Some(id) = shared.register(None, client.clone()) else {
        let max = shared.settings.max_connections;
        refuse(
            &client,
            503,
            &format!("too many connections (at most {max} at a time)\n"),
        );
        let mut record = Record::new(at, NO_HOST.into(), 0);
        record.reason = format!("too many connections (at most {max} at a time)");
        shared.journal.record(record, Duration::ZERO, None);
        return;
    };
    let serving = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("egress".into())
        .stack_size(CONNECTION_STACK)
        .spawn(move || {
            serve(&serving, client, at, id);
            serving.unregister(id);
        });
    if spawned.is_err() {
        shared.unregister(id);
    }
}

impl Shared {
    /// Waits until `done` holds of the live connections (each ended connection
    /// wakes it), or `deadline`.
    fn wait(
        &self,
        mut live: std::sync::MutexGuard<'_, Live>,
        deadline: Instant,
        done: impl Fn(&Live) -> bool,
    ) {
        while !done(&live) {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            live = match self.ended.wait_timeout(live, deadline - now) {
                Ok((live, _)) => live,
                Err(_) => return,
            };
        }
    }

    /// Adds `socket` to connection `id` (a new one when None); None when the proxy
    /// is stopping or, for a new connection, full.
    fn register(&self, id: Option<u64>, socket: Arc<dyn Socket>) -> Option<u64> {
        let mut live = self.live.lock().ok()?;
        if self.stopping.load(Ordering::SeqCst) {
            return None;
        }
        let id = match id {
            Some(id) if live.closed.contains(&id) => return None,
            Some(id) => id,
            None => {
                if live.sockets.len() >= self.settings.max_connections {
                    return None;
                }
                live.next += 1;
                live.next
            }
        };
        live.sockets.entry(id).or_default().push(socket);
        Some(id)
    }

    fn unregister(&self, id: u64) {
        if let Ok(mut live) = self.live.lock() {
            live.sockets.remove(&id);
            live.closed.remove(&id);
        }
        self.ended.notify_all();
    }
}

/// One connection, from its request head to its record.
fn serve(shared: &Arc<Shared>, client: Arc<UnixStream>, at: Timestamp, id: u64) {
    let started = Instant::now();
    let settings = &shared.settings;
    let journal = &shared.journal;
    let _ = client.set_read_timeout(Some(settings.head_timeout));
    let _ = client.set_write_timeout(Some(ANSWER_TIMEOUT));
    let parsed = request::read_head(&mut &*client)
        .and_then(|(head, early)| request::parse(&head).map(|request| (request, early)));
    let (request, early) = match parsed {
        Ok(parsed) => parsed,
        Err(bad) => {
            if bad != BadHead::Closed {
                refuse(&client, bad.status(), &format!("{}\n", bad.reason()));
            }
            let mut record = Record::new(at, NO_HOST.into(), 0);
            record.reason = bad.reason();
            journal.record(record, started.elapsed(), None);
            return;
        }
    };
    let destination = request.destination.clone();
    let mut record = Record::new(at, destination.host.to_string(), destination.port);
    // The decision and its era under one lock: `allow_also` ends either before it
    // (the task's list decides) or after (the connection is closed with the era).
    let also = shared.also.lock().ok().and_then(|mut also| {
        let list = also.list.clone()?;
        also.decided.insert(id);
        Some(list)
    });
    let during_setup = also.is_some();
    let allow = match also {
        None => shared.allow.clone(),
        Some(also) => AllowList {
            rules: shared
                .allow
                .rules
                .iter()
                .chain(&also.rules)
                .cloned()
                .collect(),
            origin: shared.allow.origin.clone(),
        },
    };
    match policy::decide(&allow, &destination, request.via, settings.resolve) {
        Verdict::Deny {
            reason,
            allow_entry,
        } => {
            let reason = match during_setup {
                true => policy::during_setup(&reason),
                false => reason,
            };
            let how = allow_entry
                .as_ref()
                .map(|e| format!(" To allow it, add `{e}` to {}.", policy::list_in(&reason)))
                .unwrap_or_default();
            refuse(
                &client,
                403,
                &format!("agent-runner: egress to {destination} denied: {reason}.{how}\n"),
            );
            record.reason = reason;
            journal.record(record, started.elapsed(), allow_entry);
        }
        Verdict::Unreachable { reason } => {
            refuse(
                &client,
                502,
                &format!("agent-runner: {destination}: {reason}\n"),
            );
            record.allowed = true;
            record.reason = reason;
            journal.record(record, started.elapsed(), None);
        }
        Verdict::Allow { addresses, rule } => {
            record.allowed = true;
            let upstream = match connect(&addresses, settings.connect_timeout) {
                Ok(upstream) => upstream,
                Err(e) => {
                    refuse(&client, 502, &format!("agent-runner: {destination}: {e}\n"));
                    record.reason = format!("allowed by {rule}; cannot connect: {e}");
                    journal.record(record, started.elapsed(), None);
                    return;
                }
            };
            record.reason = format!("allowed by {rule}");
            let upstream = Arc::new(upstream);
            if shared.register(Some(id), upstream.clone()).is_none() {
                record
                    .reason
                    .push_str("; closed as the task or setup ended");
                journal.record(record, started.elapsed(), None);
                return;
            }
            let _ = upstream.set_nodelay(true);
            let _ = upstream.set_write_timeout(Some(settings.idle));
            let opened = match request.via {
                Via::Connect => {
                    (&*client).write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                }
                Via::Plain => (&*upstream).write_all(&request.upstream_head),
            }
            .and_then(|()| (&*upstream).write_all(&early));
            if opened.is_ok() {
                let traffic = relay::relay(client, upstream, settings.idle);
                record.bytes_up = traffic.up;
                record.bytes_down = traffic.down;
            }
            record.bytes_up += (early.len() + request.upstream_head.len()) as u64;
            journal.record(record, started.elapsed(), None);
        }
    }
}

/// Tries the checked addresses in order.
fn connect(addresses: &[SocketAddr], timeout: Duration) -> std::io::Result<TcpStream> {
    let mut last = None;
    for address in addresses.iter().take(MAX_ADDRESSES) {
        match TcpStream::connect_timeout(address, timeout) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no address")))
}

/// Answers `status` with a short text and closes (what the client still sends is
/// read a little first, so the answer is not lost to a reset).
fn refuse(client: &UnixStream, status: u16, body: &str) {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let answer = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nX-Agent-Runner-Egress: {}\r\n\r\n{body}",
        body.len(),
        if status == 403 { "denied" } else { "error" }
    );
    let _ = client.set_write_timeout(Some(ANSWER_TIMEOUT));
    let _ = (&*client).write_all(answer.as_bytes());
    let _ = client.shutdown(Shutdown::Write);
    let _ = client.set_nonblocking(true);
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        if !matches!((&*client).read(&mut sink), Ok(n) if n > 0) {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_core::secret::Redactor;
    use agent_runner_settings::allow::rules::{Origin, Rule};
    use std::net::TcpListener;

    /// A proxy allowing `entries`, on a socket in a fresh directory.
    fn proxy(entries: &[String], settings: Settings) -> (Proxy, std::path::PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("egress-proxy-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir(&dir).unwrap();
        let socket = dir.join("s");
        let allow = AllowList {
            rules: entries.iter().map(|e| Rule::parse(e).unwrap()).collect(),
            origin: Origin::Task,
        };
        let listener = UnixListener::bind(&socket).unwrap();
        let proxy = Proxy::start(
            Some(listener),
            allow,
            Journal::new(None, Redactor::default()),
            settings,
        )
        .unwrap();
        (proxy, socket)
    }

    /// Sends `request` and reads until the proxy closes (or 10 s).
    fn ask(socket: &std::path::Path, request: &[u8]) -> String {
        let mut client = UnixStream::connect(socket).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        client.write_all(request).unwrap();
        let mut answer = Vec::new();
        let _ = client.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).into_owned()
    }

    fn server() -> (TcpListener, String) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let authority = listener.local_addr().unwrap().to_string();
        (listener, authority)
    }

    #[test]
    fn bad_heads_get_their_status_and_nothing_is_connected() {
        let (proxy, socket) = proxy(&[], Settings::default());
        assert!(
            ask(&socket, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 400 Bad Request\r\n")
        );
        let huge = format!(
            "GET http://a.example/ HTTP/1.1\r\nX: {}\r\n\r\n",
            "x".repeat(20_000)
        );
        assert!(ask(&socket, huge.as_bytes()).starts_with("HTTP/1.1 431 "));
        let summary = proxy.stop();
        assert_eq!((summary.allowed, summary.denied), (0, 2));
        let _ = std::fs::remove_dir_all(socket.parent().unwrap());
    }

    #[test]
    fn a_client_that_never_finishes_its_head_is_answered_408() {
        let settings = Settings {
            head_timeout: Duration::from_millis(300),
            ..Settings::default()
        };
        let (proxy, socket) = proxy(&[], settings);
        let started = Instant::now();
        assert!(ask(&socket, b"CONNECT a.example:443 HTT").starts_with("HTTP/1.1 408 "));
        assert!(started.elapsed() < Duration::from_secs(5));
        proxy.stop();
        let _ = std::fs::remove_dir_all(socket.parent().unwrap());
    }

    #[test]
    fn stopping_closes_live_tunnels_and_an_idle_one_closes_by_itself() {
        let (listener, authority) = server();
        let settings = Settings {
            idle: Duration::from_millis(400),
            ..Settings::default()
        };
        let (proxy, socket) = proxy(std::slice::from_ref(&authority), settings);
        let connect = format!("CONNECT {authority} HTTP/1.1\r\n\r\n");
        // Idle: closed after the timeout without anyone stopping the proxy.
        let mut idle = UnixStream::connect(&socket).unwrap();
        idle.write_all(connect.as_bytes()).unwrap();
        let _held = listener.accept().unwrap();
        let mut answer = Vec::new();
        idle.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let started = Instant::now();
        idle.read_to_end(&mut answer).unwrap();
        assert!(
            String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200 Connection Established")
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "closed when idle"
        );
        // Busy but stopped: closed by `stop`.
        let (proxy, socket) = {
            proxy.stop();
            let _ = std::fs::remove_dir_all(socket.parent().unwrap());
            self::proxy(std::slice::from_ref(&authority), Settings::default())
        };
        let mut live = UnixStream::connect(&socket).unwrap();
        live.write_all(connect.as_bytes()).unwrap();
        let (mut far, _) = listener.accept().unwrap();
        let mut established = [0u8; 39];
        live.read_exact(&mut established).unwrap();
        live.write_all(b"ping").unwrap();
        let mut ping = [0u8; 4];
        far.read_exact(&mut ping).unwrap();
        let summary = {
            let started = Instant::now();
            let summary = proxy.stop();
            assert!(started.elapsed() < Duration::from_secs(3));
            summary
        };
        live.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut rest = Vec::new();
        assert!(
            live.read_to_end(&mut rest).is_ok_and(|n| n == 0),
            "closed by stop"
        );
        assert_eq!(summary.allowed, 1);
        assert_eq!(summary.destinations[0].bytes_up, 4);
        assert!(UnixStream::connect(&socket).is_err(), "nothing listens");
        let _ = std::fs::remove_dir_all(socket.parent().unwrap());
    }

    /// Issue 41: a tunnel to a setup-only host, opened during setup and held past it
    /// (by a process that outlived setup), carried the worker's data there while the
    /// worker's own connections to it got 403.
    #[test]
    fn a_tunnel_opened_with_setups_hosts_is_closed_when_setup_ends() {
        let (listener, authority) = server();
        let (proxy, socket) = proxy(&[], Settings::default());
        proxy.allow_also(Some(AllowList {
            rules: vec![Rule::parse(&authority).unwrap()],
            origin: Origin::Task,
        }));
        let connect = format!("CONNECT {authority} HTTP/1.1\r\n\r\n");
        let mut tunnel = UnixStream::connect(&socket).unwrap();
        tunnel.write_all(connect.as_bytes()).unwrap();
        let (mut far, _) = listener.accept().unwrap();
        let mut established = [0u8; 39];
        tunnel.read_exact(&mut established).unwrap();
        tunnel.write_all(b"ping").unwrap();
        let mut ping = [0u8; 4];
        far.read_exact(&mut ping).unwrap();
        proxy.allow_also(None);
        tunnel
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut rest = Vec::new();
        assert!(
            tunnel.read_to_end(&mut rest).is_ok_and(|n| n == 0),
            "the setup-era tunnel is closed when setup ends"
        );
        let _ = tunnel.write_all(b"after setup");
        far.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut after = Vec::new();
        let _ = far.read_to_end(&mut after);
        assert!(
            after.is_empty(),
            "nothing went through after setup: {after:?}"
        );
        assert!(ask(&socket, connect.as_bytes()).starts_with("HTTP/1.1 403 "));
        proxy.stop();
        let _ = std::fs::remove_dir_all(socket.parent().unwrap());
    }
}
