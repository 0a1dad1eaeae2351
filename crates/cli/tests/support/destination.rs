//! A destination on the host's loopback (127.0.0.2, 127.0.0.3, …) that stands for a
//! host on the internet in egress tests: it records every connection and the
//! request head that arrived, answers an HTTP request with `hello from <name>`, and
//! holds a connection that sends nothing open (until the server is dropped, or 60 s).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
struct Seen {
    connections: usize,
    heads: Vec<String>,
}

pub struct Destination {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    stopped: Arc<AtomicBool>,
}

impl Destination {
    /// A server named `name` on `ip`, any free port.
    pub fn start(name: &str, ip: &str) -> Destination {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stopped = Arc::new(AtomicBool::new(false));
        let (shared, stop, reply) = (seen.clone(), stopped.clone(), format!("hello from {name}"));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                shared.lock().unwrap().connections += 1;
                let (shared, stop, reply) = (shared.clone(), stop.clone(), reply.clone());
                std::thread::spawn(move || serve(stream, &shared, &stop, &reply));
            }
        });
        Destination {
            addr,
            seen,
            stopped,
        }
    }

    /// `ip:port`.
    pub fn authority(&self) -> String {
        self.addr.to_string()
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.seen.lock().unwrap().connections
    }

    /// Request heads received so far.
    pub fn heads(&self) -> Vec<String> {
        self.seen.lock().unwrap().heads.clone()
    }
}

impl Drop for Destination {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(mut stream: TcpStream, seen: &Mutex<Seen>, stopped: &AtomicBool, reply: &str) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    for _ in 0..300 {
        if stopped.load(Ordering::SeqCst) {
            return;
        }
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                head.extend_from_slice(&chunk[..n]);
                if head.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    if head.is_empty() {
        return;
    }
    seen.lock()
        .unwrap()
        .heads
        .push(String::from_utf8_lossy(&head).into_owned());
    let _ = write!(
        stream,
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
        reply.len()
    );
}
