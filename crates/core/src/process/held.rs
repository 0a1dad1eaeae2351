//! A child that lives alongside agent-runner: the sandbox's keep-alive `docker run`.
//! Its stdin stays open while the `Held` lives; when agent-runner ends in any way,
//! even SIGKILL, the kernel closes the pipe and the child sees end-of-file. Once it
//! has reported ready, its output is drained in the background, so nothing it (or
//! anything in the container) writes can block it.

use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wait_timeout::ChildExt;

use super::capture::Tail;
use super::{Invocation, Message, Started, Stream, TICK, start};
use crate::Error;
use crate::interrupt::Interrupt;
use crate::sys::{self, Signal};

/// A child that lives alongside agent-runner; see the module documentation.
pub struct Held {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    output: Output,
}

/// The held child's output: read here until it reports ready, then by a drain thread.
enum Output {
    Waiting {
        receiver: Receiver<Message>,
        open: usize,
        stdout: Vec<u8>,
        stderr: Tail,
    },
    Drained {
        ended: Arc<AtomicBool>,
        stderr: Arc<Mutex<Tail>>,
    },
}

/// How waiting for a held child's line ended without the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldWait {
    /// The child closed its output (it ended); its stderr tail.
    Ended(String),
    TimedOut,
    Interrupted,
}

/// Stderr kept from a held child, for messages.
const HELD_STDERR: usize = 16 * 1024;

/// Starts a held child; see `Held`.
pub fn spawn_held(invocation: &Invocation) -> Result<Held, Error> {
    let Started {
        mut child,
        receiver,
        open,
    } = start(invocation)?;
    Ok(Held {
        stdin: child.stdin.take(),
        child,
        output: Output::Waiting {
            receiver,
            open,
            stdout: Vec::new(),
            stderr: Tail::new(HELD_STDERR),
        },
    })
}

impl Held {
    /// Waits for a stdout line starting with `prefix` and returns the rest of it;
    /// from then on the child's output is drained in the background.
    pub fn wait_for_line(
        &mut self,
        prefix: &str,
        timeout: Duration,
        interrupt: Interrupt,
    ) -> Result<String, HeldWait> {
        let line = self.read_line(prefix, timeout, interrupt)?;
        self.drain();
        Ok(line)
    }

    /// Waits for a stdout line starting with `prefix` and returns the rest of it,
    /// skipping other lines; the output stays here for the next call (a child that
    /// answers one line per request, such as the pipeline's bundler). Between calls
    /// the child must print little: its output waits in bounded pipes.
    pub fn read_line(
        &mut self,
        prefix: &str,
        timeout: Duration,
        interrupt: Interrupt,
    ) -> Result<String, HeldWait> {
        let Output::Waiting {
            receiver,
            open,
            stdout,
            stderr,
        } = &mut self.output
        else {
            return Err(HeldWait::Ended("already running".into()));
        };
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(line) = take_line(stdout, prefix) {
                return Ok(line);
            }
            if *open == 0 {
                return Err(HeldWait::Ended(stderr.text()));
            }
            if interrupt.is_set() {
                return Err(HeldWait::Interrupted);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(HeldWait::TimedOut);
            }
            match receiver.recv_timeout((deadline - now).min(TICK)) {
                Ok(Message::Chunk(Stream::Stdout, bytes)) => stdout.extend_from_slice(&bytes),
                Ok(Message::Chunk(Stream::Stderr, bytes)) => stderr.push(&bytes),
                Ok(Message::Closed) => *open -= 1,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => *open = 0,
            }
        }
    }

    /// Hands the output to a thread that reads and discards it, keeping a stderr tail
    /// and noticing when the child closes its output.
    fn drain(&mut self) {
        let ended = Arc::new(AtomicBool::new(false));
        let kept = Arc::new(Mutex::new(Tail::new(HELD_STDERR)));
        let waiting = std::mem::replace(
            &mut self.output,
            Output::Drained {
                ended: ended.clone(),
                stderr: kept.clone(),
            },
        );
        let Output::Waiting {
            receiver,
            mut open,
            stderr,
            ..
        } = waiting
        else {
            return;
        };
        if let Ok(mut tail) = kept.lock() {
            *tail = stderr;
        }
        let spawned = std::thread::Builder::new()
            .name("held-drain".into())
            .spawn(move || {
                while open > 0 {
                    match receiver.recv() {
                        Ok(Message::Chunk(Stream::Stderr, bytes)) => {
                            if let Ok(mut tail) = kept.lock() {
                                tail.push(&bytes);
                            }
                        }
                        Ok(Message::Chunk(Stream::Stdout, _)) => {}
                        Ok(Message::Closed) => open -= 1,
                        Err(_) => break,
                    }
                }
                ended.store(true, Ordering::SeqCst);
            });
        if spawned.is_err() {
            log::warn!("cannot start a thread to drain the keep-alive's output");
        }
    }

    /// Once it reported ready (`wait_for_line`), the child's stdin and stdout as one
    /// stream (the sandbox's lifeline): what is written goes to its stdin, what is
    /// read is its stdout from after the ready line. Its stderr is still kept for
    /// messages; `release` no longer closes the stdin (its new owner does); `is_running`
    /// turns false once the stdout ends. None if taken already or never ready.
    pub fn take_stream(&mut self) -> Option<(std::process::ChildStdin, HeldOutput)> {
        let stdin = self.stdin.take()?;
        let Output::Waiting {
            receiver,
            open,
            stdout,
            stderr,
        } = std::mem::replace(
            &mut self.output,
            Output::Drained {
                ended: Arc::new(AtomicBool::new(false)),
                stderr: Arc::new(Mutex::new(Tail::new(HELD_STDERR))),
            },
        )
        else {
            self.stdin = Some(stdin);
            return None;
        };
        let Output::Drained {
            ended,
            stderr: kept,
        } = &self.output
        else {
            return None;
        };
        if let Ok(mut tail) = kept.lock() {
            *tail = stderr;
        }
        Some((
            stdin,
            HeldOutput {
                receiver,
                open,
                pending: stdout,
                at: 0,
                ended: ended.clone(),
                stderr: kept.clone(),
            },
        ))
    }

    /// Writes `line` and a newline to the child's stdin (a request to a child that
    /// reads its stdin, such as the pipeline's bundler).
    pub fn send_line(&mut self, line: &str) -> std::io::Result<()> {
        use std::io::Write;
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other("stdin already closed"))?;
        stdin.write_all(format!("{line}\n").as_bytes())?;
        stdin.flush()
    }

    /// False once the child has exited or closed its output.
    pub fn is_running(&mut self) -> bool {
        let closed = match &self.output {
            Output::Drained { ended, .. } => ended.load(Ordering::SeqCst),
            Output::Waiting { open, .. } => *open == 0,
        };
        !closed && matches!(self.child.try_wait(), Ok(None))
    }

    /// Set once the child's output has ended (it exited), for a watch on another
    /// thread; None while its output is still read here (`wait_for_line`).
    pub fn ended(&self) -> Option<Arc<AtomicBool>> {
        match &self.output {
            Output::Drained { ended, .. } => Some(ended.clone()),
            Output::Waiting { .. } => None,
        }
    }

    /// The last of the child's stderr, for messages.
    pub fn stderr(&self) -> String {
        match &self.output {
            Output::Waiting { stderr, .. } => stderr.text(),
            Output::Drained { stderr, .. } => stderr.lock().map(|t| t.text()).unwrap_or_default(),
        }
    }

    /// Closes its stdin and waits up to `timeout` for it to end; true if it did.
    /// Otherwise it is killed.
    pub fn release(mut self, timeout: Duration) -> bool {
        drop(self.stdin.take());
        if matches!(self.child.wait_timeout(timeout), Ok(Some(_))) {
            return true;
        }
        sys::signal_group(self.child.id(), Signal::Kill);
        let _ = self.child.kill();
        let _ = self.child.wait_timeout(Duration::from_secs(1));
        false
    }
}

/// A held child's stdout as a reader (`Held::take_stream`); its stderr goes to the
/// held child's tail meanwhile.
pub struct HeldOutput {
    receiver: Receiver<Message>,
    open: usize,
    pending: Vec<u8>,
    at: usize,
    ended: Arc<AtomicBool>,
    stderr: Arc<Mutex<Tail>>,
}

impl std::io::Read for HeldOutput {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.pending.len() {
            if self.open == 0 {
                self.ended.store(true, Ordering::SeqCst);
                return Ok(0);
            }
            match self.receiver.recv() {
                Ok(Message::Chunk(Stream::Stdout, bytes)) => {
                    self.pending = bytes;
                    self.at = 0;
                }
                Ok(Message::Chunk(Stream::Stderr, bytes)) => {
                    if let Ok(mut tail) = self.stderr.lock() {
                        tail.push(&bytes);
                    }
                }
                Ok(Message::Closed) => self.open -= 1,
                Err(_) => self.open = 0,
            }
        }
        let n = buf.len().min(self.pending.len() - self.at);
        buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Drop for HeldOutput {
    fn drop(&mut self) {
        self.ended.store(true, Ordering::SeqCst);
    }
}

/// Removes complete lines from `stdout` until one starts with `prefix`; its rest.
fn take_line(stdout: &mut Vec<u8>, prefix: &str) -> Option<String> {
    while let Some(end) = stdout.iter().position(|&b| b == b'\n') {
        let line: Vec<u8> = stdout.drain(..=end).collect();
        let line = String::from_utf8_lossy(&line[..end]).into_owned();
        if let Some(rest) = line.strip_prefix(prefix) {
            return Some(rest.to_string());
        }
    }
    None
}
