//! A stand-in for the Docker daemon's socket that can be cut: a Unix socket that
//! forwards every connection to the real daemon until `stop`, which closes the
//! listener and every open connection at once, as a daemon going away would. It can
//! also overhear what clients send (`start_tapped`), as an eavesdropper would.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const DAEMON: &str = "/var/run/docker.sock";

pub struct DockerProxy {
    pub path: PathBuf,
    stopped: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<UnixStream>>>,
}

/// Sees each piece a client sends to the daemon, in order per connection.
pub type Tap = Arc<dyn Fn(&[u8]) + Send + Sync>;

impl DockerProxy {
    pub fn start(path: &Path) -> Self {
        Self::start_tapped(path, Arc::new(|_: &[u8]| {}))
    }

    /// A proxy that shows `tap` what clients send.
    pub fn start_tapped(path: &Path, tap: Tap) -> Self {
        let listener = UnixListener::bind(path).unwrap();
        let stopped = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<UnixStream>>> = Arc::new(Mutex::new(Vec::new()));
        let (s, o) = (stopped.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(daemon) = UnixStream::connect(DAEMON) else {
                    continue;
                };
                {
                    let mut open = o.lock().unwrap();
                    open.push(client.try_clone().unwrap());
                    open.push(daemon.try_clone().unwrap());
                }
                pump(
                    client.try_clone().unwrap(),
                    daemon.try_clone().unwrap(),
                    tap.clone(),
                );
                pump(daemon, client, Arc::new(|_: &[u8]| {}));
            }
        });
        DockerProxy {
            path: path.to_path_buf(),
            stopped,
            open,
        }
    }

    /// Cuts every connection and stops accepting new ones.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let _ = std::fs::remove_file(&self.path);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        // Wake the accept loop so it sees the flag.
        let _ = UnixStream::connect(&self.path);
    }
}

impl Drop for DockerProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

fn pump(mut from: UnixStream, mut to: UnixStream, tap: Tap) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    tap(&buf[..n]);
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
