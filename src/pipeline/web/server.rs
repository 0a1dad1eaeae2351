//! The server loop: the listening socket, a fixed pool of worker threads, one
//! request per connection. Connections wait in a bounded queue for a worker; when it
//! is full the server answers 503 at once instead of queueing more. Sockets get read
//! and write timeouts, so a slow or silent client holds a worker for a bounded time.
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
use super::http::{self, ReadError, Response};
use super::routes;
use crate::interrupt::Interrupt;

/// Worker threads.
pub const WORKERS: usize = 8;
/// Connections waiting for a worker.
const WAITING: usize = 64;
/// Longest a client may take to send its request or read the response.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request body (the API takes small JSON documents).
pub const MAX_BODY: usize = 64 * 1024;
/// How often the accept loop looks at the interrupt.
const TICK: Duration = Duration::from_millis(100);

/// The Content-Security-Policy of every response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Serves `app` on `listener` until `interrupt` is set; then stops accepting,
/// finishes the requests in hand and waits for the children to end.
pub fn run(app: App, listener: TcpListener, interrupt: Interrupt) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
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
    while !interrupt.is_set() {
        if !readable(&listener, TICK) {
            continue;
        }
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
        match sender.try_send(stream) {
            Ok(()) => {}
            Err(TrySendError::Full(stream)) => {
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                let busy = Response::new(503, "text/plain; charset=utf-8", "busy; try again\n");
                let _ = secure(busy).write_to(&mut &stream, false);
            }
            Err(TrySendError::Disconnected(_)) => break,
        }
    }
    drop(sender);
    for worker in workers {
        let _ = worker.join();
    }
    app.children.wait();
    Ok(())
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
    let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::with_capacity(8192, &stream);
    let (response, what, unread) = match http::read_request(&mut reader, MAX_BODY) {
        Ok(request) => {
            let what = format!("{} {}", request.method, request.path);
            // A bug in a handler costs its request, not a worker thread.
            let handled =
                std::panic::catch_unwind(AssertUnwindSafe(|| routes::handle(app, &request)));
            let response = handled.unwrap_or_else(|_| {
                Response::new(500, "text/plain; charset=utf-8", "internal error\n")
            });
            (response, what, false)
        }
        Err(e) => {
            let Some((status, message)) = e.status() else {
                return;
            };
            let unread = matches!(e, ReadError::TooLarge { .. });
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
        // answer on the way; read (and drop) a bounded amount first.
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let _ = std::io::copy(&mut (&stream).take(4 << 20), &mut std::io::sink());
    }
    match written {
        Ok(()) if status >= 500 => log::warn!("{what}: {status} in {took:?}"),
        Ok(()) => log::debug!("{what}: {status} in {took:?}"),
        Err(e) => log::debug!("{what}: {status}, but the answer was not sent: {e}"),
    }
}

/// `response` with the headers every response carries.
pub fn secure(response: Response) -> Response {
    response
        .with("Content-Security-Policy", CSP)
        .with("X-Frame-Options", "DENY")
        .with("X-Content-Type-Options", "nosniff")
        .with("Referrer-Policy", "no-referrer")
        .with("Cross-Origin-Resource-Policy", "same-origin")
        .with("Cross-Origin-Opener-Policy", "same-origin")
        .with("Cache-Control", "no-store")
}

/// Waits up to `timeout` for a connection to accept.
fn readable(listener: &TcpListener, timeout: Duration) -> bool {
    let mut poll = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let ready = unsafe { libc::poll(&mut poll, 1, timeout.as_millis() as libc::c_int) };
    ready > 0 && poll.revents & libc::POLLIN != 0
}
