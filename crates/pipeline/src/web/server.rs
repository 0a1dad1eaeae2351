//! The server loop: the listening sockets, a fixed pool of worker threads, one
//! request per connection. Who connects is checked as the connection is accepted,
//! before anything is read (`Guard::check_peer`): another local user's connections
//! are answered 403 and closed at once, so they never hold a worker or a place in
//! the queue (a few hundred of them would otherwise keep the owner out). Connections
//! wait in a bounded queue for a worker; when it is full the server answers 503 at
//! once instead of queueing more. A request must
//! arrive whole within `IO_TIMEOUT` of its first read (a deadline, not a timeout per
//! read, which a client sending a byte now and then would never reach), and writes
//! have a timeout, so a slow or silent client holds a worker for a bounded time.
//! Every response carries the headers that keep the pages to themselves: a
//! Content-Security-Policy without inline script and without framing, `nosniff`, no
//! referrer, same-origin resource and opener policies, no caching.

use std::io::{BufReader, Read};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{Receiver, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::app::App;
use super::guard::Denied;
use super::http::{self, ReadError, Response};
use super::routes;
use agent_runner_core::interrupt::Interrupt;

/// Worker threads.
pub(crate) const WORKERS: usize = 8;
/// Connections waiting for a worker.
const WAITING: usize = 64;
/// Longest a client may take to send its request, or to take each part of the
/// response.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest spent reading what a refused client still sends (see `connection`).
const DRAIN: Duration = Duration::from_secs(1);
/// Refused connections of other users being closed (see `Closing`); beyond this
/// many, a refused connection is closed at once.
const CLOSING: usize = 256;
/// Largest request body (the API takes small JSON documents).
pub(crate) const MAX_BODY: usize = 64 * 1024;
/// How often the accept loop looks at the interrupt.
const TICK: Duration = Duration::from_millis(100);

/// The Content-Security-Policy of every response.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Serves `app` on `listeners` until `interrupt` is set; then stops accepting,
/// finishes the requests in hand and waits for the children to end.
pub(crate) fn run(
    app: App,
    listeners: Vec<TcpListener>,
    interrupt: Interrupt,
) -> std::io::Result<()> {
    for listener in &listeners {
        listener.set_nonblocking(true)?;
    }
    let app = Arc::new(app);
    let (sender, receiver) = sync_channel::<TcpStream>(WAITING);
    let receiver = Arc::new(Mutex::new(receiver));
    let mut workers = Vec::with_capacity(WORKERS);
    for n in 0..WORKERS {
        let (app, receiver) = (app.clone(), receiver.clone());
        workers.push(
            std::thread::Builder::new()
                .name(format!("http {n}"))
                .spawn(move || work(&app, &receiver))?,
        );
    }
    let mut closing = Closing::default();
    'serving: while !interrupt.is_set() {
        closing.drain();
        for listener in readable(&listeners, TICK) {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::warn!("accepting a connection failed: {e}");
                    std::thread::sleep(TICK);
                    continue;
                }
            };
            if let Err(denied) = who(&app, &stream) {
                closing.refuse(stream, &denied);
                continue;
            }
            match sender.try_send(stream) {
                Ok(()) => {}
                Err(TrySendError::Full(stream)) => {
                    let _ = stream.set_nonblocking(false);
                    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                    let busy = Response::new(503, "text/plain; charset=utf-8", "busy; try again\n");
                    let _ = secure(busy).write_to(&mut &stream, false);
                }
                Err(TrySendError::Disconnected(_)) => break 'serving,
            }
        }
    }
    drop(sender);
    for worker in workers {
        let _ = worker.join();
    }
    app.children.wait();
    Ok(())
}

/// The user check of a connection just accepted.
fn who(app: &App, stream: &TcpStream) -> Result<(), Denied> {
    match (stream.peer_addr(), stream.local_addr()) {
        (Ok(peer), Ok(local)) => app.guard.check_peer(peer, local),
        (Err(e), _) | (_, Err(e)) => {
            Err(Denied::User(format!("a socket that cannot be told ({e})")))
        }
    }
}

/// Connections of other users, answered 403 and being closed. Closing a socket with
/// unread input resets the connection, which can lose the answer on its way, so
/// each is read (and dropped) without blocking until its client closes or `DRAIN`
/// has passed; a bounded number of them.
#[derive(Default)]
struct Closing {
    streams: Vec<(TcpStream, Instant)>,
}

impl Closing {
    /// Answers `stream` 403 without waiting and starts closing it.
    fn refuse(&mut self, stream: TcpStream, denied: &Denied) {
        let (status, message) = denied.status();
        let _ = stream.set_nonblocking(true);
        let refused = Response::new(status, "text/plain; charset=utf-8", format!("{message}\n"));
        // The answer is small: it fits the socket's buffer, or it is not sent.
        let _ = secure(refused).write_to(&mut &stream, false);
        let _ = stream.shutdown(Shutdown::Write);
        if self.streams.len() < CLOSING {
            self.streams.push((stream, Instant::now() + DRAIN));
        }
    }

    /// Reads what the refused clients sent; closes those done or out of time.
    fn drain(&mut self) {
        let now = Instant::now();
        let mut scratch = [0u8; 16 * 1024];
        self.streams.retain(|(stream, until)| {
            if now >= *until {
                return false;
            }
            let mut stream = stream;
            for _ in 0..4 {
                match stream.read(&mut scratch) {
                    Ok(0) => return false,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                    Err(_) => return false,
                }
            }
            true
        });
    }
}

fn work(app: &App, receiver: &Mutex<Receiver<TcpStream>>) {
    loop {
        let next = receiver.lock().unwrap_or_else(|e| e.into_inner()).recv();
        match next {
            Ok(stream) => connection(app, stream),
            Err(_) => return,
        }
    }
}

/// Reads one request, answers it, closes the connection.
fn connection(app: &App, stream: TcpStream) {
    let started = Instant::now();
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let Ok(local) = stream.local_addr() else {
        return;
    };
    let mut reader = BufReader::with_capacity(8192, Deadline::new(&stream, IO_TIMEOUT));
    let (response, what, unread) = match http::read_request(&mut reader, MAX_BODY) {
        Ok(request) => {
            let what = format!("{} {}", request.method, request.path);
            // A bug in a handler costs its request, not a worker thread.
            let handled =
                std::panic::catch_unwind(AssertUnwindSafe(|| routes::handle(app, &request, local)));
            let response = handled.unwrap_or_else(|_| {
                Response::new(500, "text/plain; charset=utf-8", "internal error\n")
            });
            (response, what, false)
        }
        Err(e) => {
            let Some((status, message)) = e.status() else {
                return;
            };
            let unread = matches!(e, ReadError::TooLarge { .. } | ReadError::Timeout);
            let response =
                Response::new(status, "text/plain; charset=utf-8", format!("{message}\n"));
            (response, "(unreadable request)".to_string(), unread)
        }
    };
    let status = response.status;
    let written = secure(response).write_to(&mut &stream, false);
    let took = started.elapsed();
    let _ = stream.shutdown(Shutdown::Write);
    if unread {
        // Closing with unread input would reset the connection and could lose the
        // answer on the way; read (and drop) a bounded amount first, for a bounded
        // time.
        let mut rest = Deadline::new(&stream, DRAIN).take(4 << 20);
        let _ = std::io::copy(&mut rest, &mut std::io::sink());
    }
    match written {
        Ok(()) if status >= 500 => log::warn!("{what}: {status} in {took:?}"),
        Ok(()) => log::debug!("{what}: {status} in {took:?}"),
        Err(e) => log::debug!("{what}: {status}, but the answer was not sent: {e}"),
    }
}

/// Reads from a socket until a deadline: each read waits at most until then.
struct Deadline<'a> {
    stream: &'a TcpStream,
    until: Instant,
}

impl<'a> Deadline<'a> {
    /// Reads from `stream` for `time` from now.
    fn new(stream: &'a TcpStream, time: Duration) -> Self {
        Deadline {
            stream,
            until: Instant::now() + time,
        }
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut stream = self.stream;
        stream.read(buf)
    }
}

/// `response` with the headers every response carries.
pub(crate) fn secure(response: Response) -> Response {
    response
        .with("Content-Security-Policy", CSP)
        .with("X-Frame-Options", "DENY")
        .with("X-Content-Type-Options", "nosniff")
        .with("Referrer-Policy", "no-referrer")
        .with("Cross-Origin-Resource-Policy", "same-origin")
        .with("Cross-Origin-Opener-Policy", "same-origin")
        .with("Cache-Control", "no-store")
}

/// The listeners with a connection to accept, waiting up to `timeout` for one.
fn readable(listeners: &[TcpListener], timeout: Duration) -> Vec<&TcpListener> {
    let mut polls: Vec<libc::pollfd> = listeners
        .iter()
        .map(|l| libc::pollfd {
            fd: l.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `polls` is a valid array of that many pollfds for the call.
    let ready = unsafe {
        libc::poll(
            polls.as_mut_ptr(),
            polls.len() as libc::nfds_t,
            timeout.as_millis() as libc::c_int,
        )
    };
    if ready <= 0 {
        return Vec::new();
    }
    listeners
        .iter()
        .zip(&polls)
        .filter(|(_, p)| p.revents & libc::POLLIN != 0)
        .map(|(l, _)| l)
        .collect()
}
