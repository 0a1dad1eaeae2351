//! Every child process (docker, git) is spawned and waited for here.
//!
//! stdin is explicit (bytes written by a thread, then closed). stdout and stderr are
//! read by threads that own the pipes and send chunks over a bounded channel, so a
//! chatty child never blocks on a full pipe and memory stays bounded. The waiting
//! thread handles output, the wall and idle deadlines and interrupts in one loop; on
//! a deadline it runs a `Stop` strategy, then SIGKILLs the child's process group if
//! it is still there after the grace period.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use wait_timeout::ChildExt;

use crate::secret::{Redactor, StreamRedactor};
use crate::sys::{self, Signal};

/// How often a waiting loop looks at the interrupt flag. A child's exit or output
/// wakes the loop at once; this only bounds the reaction to Ctrl-C.
const TICK: Duration = Duration::from_millis(50);
/// Size of one read from a child's pipe.
const CHUNK: usize = 64 * 1024;
/// Chunks in flight between the reader threads and the waiting loop.
const CHANNEL_CHUNKS: usize = 16;
/// After the child exits, how long its pipes may stay open (held by a detached
/// grandchild) before we stop reading them.
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// A program with its arguments, extra environment, working directory and stdin.
#[derive(Debug, Clone)]
pub struct Invocation {
    program: String,
    args: Vec<String>,
    /// Added to the child's environment. Secrets travel here, never in `args`.
    env: Vec<(String, String)>,
    cwd: Option<PathBuf>,
    stdin: Vec<u8>,
}

impl Invocation {
    pub fn new(program: &str) -> Self {
        Invocation {
            program: program.to_string(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            stdin: Vec::new(),
        }
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    pub fn cwd(mut self, dir: &Path) -> Self {
        self.cwd = Some(dir.to_path_buf());
        self
    }

    /// Bytes written to the child's stdin, which is then closed.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = bytes.into();
        self
    }

    /// The command line, for messages (arguments only: the environment may hold secrets).
    pub fn display(&self) -> String {
        let mut out = self.program.clone();
        for arg in &self.args {
            out.push(' ');
            if arg.is_empty() || arg.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"')
            {
                out.push_str(&format!("'{}'", arg.replace('\'', r"'\''")));
            } else {
                out.push_str(arg);
            }
        }
        out
    }
}

/// When to give up on a child.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Wall-clock limit.
    pub wall: Option<Duration>,
    /// Limit on time without any output.
    pub idle: Option<Duration>,
    /// After the stop strategy ran: how long to wait before SIGKILL.
    pub grace: Duration,
    /// Whether SIGINT/SIGTERM to agent-runner ends this child. Clean-up commands
    /// that run after an interrupt must not be.
    pub interruptible: bool,
}

impl Limits {
    /// A short administrative command: wall limit, 5 s grace, interruptible.
    pub fn wall(wall: Duration) -> Self {
        Limits {
            wall: Some(wall),
            idle: None,
            grace: Duration::from_secs(5),
            interruptible: true,
        }
    }

    /// Clean-up: runs to its end even after an interrupt.
    pub fn cleanup(wall: Duration) -> Self {
        Limits {
            interruptible: false,
            ..Limits::wall(wall)
        }
    }
}

/// How to stop a child that overran a limit or was interrupted.
pub enum Stop<'a> {
    /// SIGTERM to the child's process group.
    Terminate,
    /// A custom action (e.g. kill the work inside a container, where signals to the
    /// local `docker exec` client do not reach).
    Custom(&'a mut dyn FnMut()),
}

/// Why the waiting ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The child exited by itself.
    Exited,
    /// The wall-clock limit was reached.
    TimedOut,
    /// No output within the idle limit.
    Stalled,
    /// agent-runner received SIGINT or SIGTERM.
    Interrupted,
}

/// A child that has ended.
#[derive(Debug, Clone)]
pub struct Finished {
    pub ending: Ending,
    /// None only if the child could not be reaped after SIGKILL.
    pub status: Option<ExitStatus>,
    pub duration: Duration,
}

impl Finished {
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// Exited by itself with status 0.
    pub fn success(&self) -> bool {
        self.ending == Ending::Exited && self.status.is_some_and(|s| s.success())
    }
}

/// The child could not be started at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot run `{program}`: {reason}")]
pub struct SpawnError {
    pub program: String,
    pub reason: String,
}

/// Which pipe a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout = 0,
    Stderr = 1,
}

/// Where a child's output goes: an optional log file, a bounded tail of both streams,
/// a bounded tail of stderr alone, and optionally each stdout line to a callback (the
/// codex event parser). With `redacting`, secrets are masked in each stream before
/// any of these sees it, so no cut-off tail can show part of a secret.
pub struct Capture<'a> {
    masks: Option<[StreamRedactor; 2]>,
    /// Unbuffered: each chunk is written as it arrives, so the log can be followed.
    log: Option<(File, PathBuf)>,
    log_error: Option<String>,
    tail: Tail,
    stderr: Tail,
    lines: Option<LineSplitter<'a>>,
    bytes: u64,
}

impl<'a> Capture<'a> {
    /// Keeps the last `tail` bytes of output in memory; writes nothing to disk.
    pub fn in_memory(tail: usize) -> Self {
        Capture {
            masks: None,
            log: None,
            log_error: None,
            tail: Tail::new(tail),
            stderr: Tail::new(tail.min(16 * 1024)),
            lines: None,
            bytes: 0,
        }
    }

    /// Masks `redactor`'s secrets in everything captured.
    pub fn redacting(mut self, redactor: &Redactor) -> Self {
        if !redactor.is_empty() {
            self.masks = Some([
                StreamRedactor::new(redactor.clone()),
                StreamRedactor::new(redactor.clone()),
            ]);
        }
        self
    }

    /// Also streams all output to `path` (created with its directory).
    pub fn with_log(mut self, path: &Path) -> std::io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        self.log = Some((File::create(path)?, path.to_path_buf()));
        Ok(self)
    }

    /// Hands each stdout line (without its newline) to `on_line`. Lines longer than
    /// `max_line` are cut to that length.
    pub fn with_lines(mut self, max_line: usize, on_line: &'a mut dyn FnMut(&[u8])) -> Self {
        self.lines = Some(LineSplitter::new(max_line, on_line));
        self
    }

    fn take(&mut self, stream: Stream, bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
        match &mut self.masks {
            Some(masks) => {
                let masked = masks[stream as usize].push(bytes);
                self.store(stream, &masked);
            }
            None => self.store(stream, bytes),
        }
    }

    fn store(&mut self, stream: Stream, bytes: &[u8]) {
        if let Some((log, _)) = &mut self.log {
            if let Err(e) = log.write_all(bytes) {
                self.log_error.get_or_insert_with(|| e.to_string());
            }
        }
        self.tail.push(bytes);
        match stream {
            Stream::Stdout => {
                if let Some(lines) = &mut self.lines {
                    lines.push(bytes);
                }
            }
            Stream::Stderr => self.stderr.push(bytes),
        }
    }

    fn finish(&mut self) {
        if let Some(masks) = &mut self.masks {
            let rest = [masks[0].finish(), masks[1].finish()];
            self.store(Stream::Stdout, &rest[0]);
            self.store(Stream::Stderr, &rest[1]);
        }
        if let Some(lines) = &mut self.lines {
            lines.finish();
        }
        if let (Some((_, path)), Some(e)) = (&self.log, &self.log_error) {
            log::warn!("log {} is incomplete: {e}", path.display());
        }
    }

    /// The last bytes of stdout and stderr together, as text.
    pub fn tail(&self) -> String {
        self.tail.text()
    }

    /// The last bytes of stderr, as text.
    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// Total bytes received on both streams.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// The last `capacity` bytes of a stream.
struct Tail {
    capacity: usize,
    buf: Vec<u8>,
}

impl Tail {
    fn new(capacity: usize) -> Self {
        Tail {
            capacity,
            buf: Vec::new(),
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        if bytes.len() >= self.capacity {
            self.buf.clear();
            self.buf
                .extend_from_slice(&bytes[bytes.len() - self.capacity..]);
            return;
        }
        self.buf.extend_from_slice(bytes);
        // Trim only when twice the capacity, so trimming costs O(1) per byte.
        if self.buf.len() > 2 * self.capacity {
            self.buf.drain(..self.buf.len() - self.capacity);
        }
    }

    fn text(&self) -> String {
        let start = self.buf.len().saturating_sub(self.capacity);
        String::from_utf8_lossy(&self.buf[start..]).into_owned()
    }
}

/// Splits a byte stream into lines for a callback, bounding each line's length.
struct LineSplitter<'a> {
    max: usize,
    line: Vec<u8>,
    on_line: &'a mut dyn FnMut(&[u8]),
}

impl<'a> LineSplitter<'a> {
    fn new(max: usize, on_line: &'a mut dyn FnMut(&[u8])) -> Self {
        LineSplitter {
            max,
            line: Vec::new(),
            on_line,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            self.append(&bytes[..end]);
            (self.on_line)(&self.line);
            self.line.clear();
            bytes = &bytes[end + 1..];
        }
        self.append(bytes);
    }

    fn append(&mut self, bytes: &[u8]) {
        let room = self.max.saturating_sub(self.line.len());
        self.line.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn finish(&mut self) {
        if !self.line.is_empty() {
            (self.on_line)(&self.line);
            self.line.clear();
        }
    }
}

enum Message {
    Chunk(Stream, Vec<u8>),
    Closed,
}

/// Runs a child to its end (or until a limit, then stops it). The child gets its own
/// process group, so a Ctrl-C in the terminal reaches agent-runner only, which then
/// stops children in order.
pub fn run(
    invocation: &Invocation,
    limits: &Limits,
    capture: &mut Capture,
    stop: Stop,
) -> Result<Finished, SpawnError> {
    let started = Instant::now();
    let Started {
        mut child,
        receiver,
        open,
    } = start(invocation)?;
    if let Some(mut stdin) = child.stdin.take() {
        let bytes = invocation.stdin.clone();
        // A child that exits without reading its stdin makes this write fail; that
        // is its business, not an error here.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }

    let mut waiter = Waiter {
        child: &mut child,
        receiver,
        open,
        capture,
        started,
        last_output: started,
        exited_at: None,
    };
    let ending = waiter.wait_for_limit(limits);
    let status = match ending {
        Ending::Exited => waiter.reap(),
        _ => {
            match stop {
                Stop::Terminate => sys::signal_group(waiter.child.id(), Signal::Term),
                Stop::Custom(action) => action(),
            }
            waiter.wait_until(Instant::now() + limits.grace);
            match waiter.child.try_wait() {
                Ok(Some(status)) => Some(status),
                _ => {
                    sys::signal_group(waiter.child.id(), Signal::Kill);
                    let _ = waiter.child.kill();
                    waiter.wait_until(Instant::now() + Duration::from_secs(2));
                    waiter.child.try_wait().ok().flatten()
                }
            }
        }
    };
    waiter.capture.finish();
    Ok(Finished {
        ending,
        status,
        duration: started.elapsed(),
    })
}

/// A child that lives alongside agent-runner (the sandbox's keep-alive `docker run`).
/// Its stdin stays open while this value lives: when agent-runner ends in any way,
/// even SIGKILL, the kernel closes the pipe and the child sees end-of-file.
pub struct Held {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    receiver: Receiver<Message>,
    open: usize,
    stdout: Vec<u8>,
    stderr: Tail,
}

/// How waiting for a held child's line ended without the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldWait {
    /// The child closed its output (it ended); its stderr tail.
    Ended(String),
    TimedOut,
    Interrupted,
}

/// Starts a held child; see `Held`.
pub fn spawn_held(invocation: &Invocation) -> Result<Held, SpawnError> {
    let Started {
        mut child,
        receiver,
        open,
    } = start(invocation)?;
    Ok(Held {
        stdin: child.stdin.take(),
        child,
        receiver,
        open,
        stdout: Vec::new(),
        stderr: Tail::new(16 * 1024),
    })
}

/// A spawned child whose stdout and stderr are being read into `receiver`.
struct Started {
    child: Child,
    receiver: Receiver<Message>,
    /// Pipes not yet at end-of-file.
    open: usize,
}

/// Spawns the child in its own process group, stdin piped, output read by threads.
fn start(invocation: &Invocation) -> Result<Started, SpawnError> {
    let mut command = std::process::Command::new(&invocation.program);
    command
        .args(&invocation.args)
        .envs(invocation.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(dir) = &invocation.cwd {
        command.current_dir(dir);
    }
    let mut child = command.spawn().map_err(|e| SpawnError {
        program: invocation.program.clone(),
        reason: match e.kind() {
            std::io::ErrorKind::NotFound => "not found on PATH".to_string(),
            _ => e.to_string(),
        },
    })?;
    let (sender, receiver) = sync_channel(CHANNEL_CHUNKS);
    let mut open = 0;
    if let Some(out) = child.stdout.take() {
        spawn_reader(out, Stream::Stdout, sender.clone());
        open += 1;
    }
    if let Some(err) = child.stderr.take() {
        spawn_reader(err, Stream::Stderr, sender);
        open += 1;
    }
    Ok(Started {
        child,
        receiver,
        open,
    })
}

impl Held {
    /// Waits for a stdout line starting with `prefix`; returns the rest of it.
    pub fn wait_for_line(&mut self, prefix: &str, timeout: Duration) -> Result<String, HeldWait> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(line) = self.take_line(prefix) {
                return Ok(line);
            }
            if self.open == 0 {
                return Err(HeldWait::Ended(self.stderr.text()));
            }
            if sys::interrupted() {
                return Err(HeldWait::Interrupted);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(HeldWait::TimedOut);
            }
            match self.receiver.recv_timeout((deadline - now).min(TICK)) {
                Ok(Message::Chunk(Stream::Stdout, bytes)) => self.stdout.extend_from_slice(&bytes),
                Ok(Message::Chunk(Stream::Stderr, bytes)) => self.stderr.push(&bytes),
                Ok(Message::Closed) => self.open -= 1,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.open = 0,
            }
        }
    }

    fn take_line(&mut self, prefix: &str) -> Option<String> {
        while let Some(end) = self.stdout.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.stdout.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line[..end]).into_owned();
            if let Some(rest) = line.strip_prefix(prefix) {
                return Some(rest.to_string());
            }
        }
        None
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

fn spawn_reader(mut pipe: impl Read + Send + 'static, stream: Stream, sender: SyncSender<Message>) {
    std::thread::spawn(move || {
        loop {
            let mut buf = vec![0; CHUNK];
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    buf.truncate(n);
                    if sender.send(Message::Chunk(stream, buf)).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = sender.send(Message::Closed);
    });
}

struct Waiter<'c, 'a> {
    child: &'c mut Child,
    receiver: Receiver<Message>,
    open: usize,
    capture: &'c mut Capture<'a>,
    started: Instant,
    last_output: Instant,
    /// When the child was first seen gone while its pipes were still open.
    exited_at: Option<Instant>,
}

impl Waiter<'_, '_> {
    /// Waits until the child exits or a limit is reached.
    fn wait_for_limit(&mut self, limits: &Limits) -> Ending {
        let wall_deadline = limits.wall.and_then(|w| self.started.checked_add(w));
        loop {
            if limits.interruptible && sys::interrupted() {
                return Ending::Interrupted;
            }
            let now = Instant::now();
            if wall_deadline.is_some_and(|d| now >= d) {
                return Ending::TimedOut;
            }
            let idle_deadline = limits.idle.and_then(|i| self.last_output.checked_add(i));
            if idle_deadline.is_some_and(|d| now >= d) {
                return Ending::Stalled;
            }
            let next = [wall_deadline, idle_deadline, Some(now + TICK)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now + TICK);
            if self.step(next) {
                return Ending::Exited;
            }
        }
    }

    /// Handles output or waits for exit until `until`; true once the child has exited
    /// and its pipes are drained.
    fn step(&mut self, until: Instant) -> bool {
        let timeout = until.saturating_duration_since(Instant::now());
        if self.open > 0 {
            match self.receiver.recv_timeout(timeout) {
                Ok(Message::Chunk(stream, bytes)) => {
                    self.last_output = Instant::now();
                    self.capture.take(stream, &bytes);
                }
                Ok(Message::Closed) => self.open -= 1,
                Err(RecvTimeoutError::Timeout) => {
                    if matches!(self.child.try_wait(), Ok(Some(_))) {
                        let exited_at = *self.exited_at.get_or_insert_with(Instant::now);
                        if exited_at.elapsed() >= PIPE_GRACE {
                            self.open = 0;
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => self.open = 0,
            }
            false
        } else {
            matches!(self.child.wait_timeout(timeout), Ok(Some(_)) | Err(_))
        }
    }

    /// Drains output and waits for exit until `deadline`, whatever happens.
    fn wait_until(&mut self, deadline: Instant) {
        while Instant::now() < deadline {
            if self.step(deadline) {
                return;
            }
        }
    }

    fn reap(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Invocation {
        Invocation::new("sh").args(["-c", script])
    }

    fn run_sh(script: &str, limits: Limits) -> (Finished, String, String) {
        let mut capture = Capture::in_memory(4096);
        let finished = run(&sh(script), &limits, &mut capture, Stop::Terminate).unwrap();
        (finished, capture.tail(), capture.stderr())
    }

    #[test]
    fn captures_output_and_exit_code() {
        let (f, tail, stderr) = run_sh(
            "echo out; echo err >&2; exit 3",
            Limits::wall(Duration::from_secs(10)),
        );
        assert_eq!((f.ending, f.code()), (Ending::Exited, Some(3)));
        assert!(tail.contains("out\n") && tail.contains("err\n"), "{tail}");
        assert_eq!(stderr, "err\n");
    }

    #[test]
    fn stdin_is_written_then_closed() {
        let mut capture = Capture::in_memory(4096);
        let inv = Invocation::new("cat").stdin("hello\nworld");
        let f = run(
            &inv,
            &Limits::wall(Duration::from_secs(10)),
            &mut capture,
            Stop::Terminate,
        )
        .unwrap();
        assert!(f.success());
        assert_eq!(capture.tail(), "hello\nworld");
    }

    #[test]
    fn environment_is_passed_and_not_shown() {
        let mut capture = Capture::in_memory(4096);
        let inv = sh("printf %s \"$SECRET_X\"").env("SECRET_X", "value-42");
        run(
            &inv,
            &Limits::wall(Duration::from_secs(10)),
            &mut capture,
            Stop::Terminate,
        )
        .unwrap();
        assert_eq!(capture.tail(), "value-42");
        assert!(!inv.display().contains("value-42"));
    }

    #[test]
    fn wall_limit_terminates_the_whole_group() {
        let started = Instant::now();
        let limits = Limits {
            grace: Duration::from_secs(2),
            ..Limits::wall(Duration::from_millis(300))
        };
        // The grandchild would keep the pipe open if it survived.
        let (f, _, _) = run_sh("sleep 30 & sleep 30; wait", limits);
        assert_eq!(f.ending, Ending::TimedOut);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_grandchild_holding_the_pipes_does_not_keep_us_waiting() {
        let started = Instant::now();
        let (f, tail, _) = run_sh(
            "echo parent; (setsid sleep 5 &) ; exit 0",
            Limits::wall(Duration::from_secs(20)),
        );
        assert_eq!((f.ending, f.code()), (Ending::Exited, Some(0)));
        assert_eq!(tail, "parent\n");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn sigkill_follows_when_sigterm_is_ignored() {
        let started = Instant::now();
        let limits = Limits {
            grace: Duration::from_millis(300),
            ..Limits::wall(Duration::from_millis(300))
        };
        let (f, _, _) = run_sh("trap '' TERM; while :; do sleep 0.05; done", limits);
        assert_eq!(f.ending, Ending::TimedOut);
        assert!(f.code().is_none(), "killed by a signal: {:?}", f.status);
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn idle_limit_counts_time_without_output() {
        let limits = Limits {
            idle: Some(Duration::from_millis(400)),
            ..Limits::wall(Duration::from_secs(20))
        };
        // Talks every 100 ms for a while: not idle. Then silent: stalled.
        let (f, tail, _) = run_sh(
            "for i in 1 2 3 4 5 6 7 8; do echo $i; sleep 0.1; done; sleep 30",
            limits,
        );
        assert_eq!(f.ending, Ending::Stalled);
        assert!(tail.contains("8\n"), "{tail}");
    }

    #[test]
    fn custom_stop_runs_instead_of_sigterm() {
        let mut stopped = false;
        let mut action = || stopped = true;
        let limits = Limits {
            grace: Duration::from_millis(200),
            ..Limits::wall(Duration::from_millis(200))
        };
        let mut capture = Capture::in_memory(16);
        let f = run(
            &sh("sleep 30"),
            &limits,
            &mut capture,
            Stop::Custom(&mut action),
        )
        .unwrap();
        assert_eq!(f.ending, Ending::TimedOut);
        assert!(stopped);
    }

    #[test]
    fn missing_program_is_a_spawn_error() {
        let mut capture = Capture::in_memory(16);
        let e = run(
            &Invocation::new("agent-runner-no-such-program"),
            &Limits::wall(Duration::from_secs(1)),
            &mut capture,
            Stop::Terminate,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot run `agent-runner-no-such-program`: not found on PATH"
        );
    }

    #[test]
    fn lines_log_and_tails_are_bounded() {
        let dir =
            std::env::temp_dir().join(format!("agent-runner-process-{}", uuid::Uuid::new_v4()));
        let log = dir.join("x.log");
        let mut lines = Vec::new();
        let mut on_line = |l: &[u8]| lines.push(l.to_vec());
        let secret = crate::secret::Secret::new("TOPSECRET".into());
        let mut capture = Capture::in_memory(10)
            .redacting(&Redactor::new([&secret]))
            .with_log(&log)
            .unwrap()
            .with_lines(5, &mut on_line);
        let inv = sh("printf 'ab\\n0123456789\\nTOPSECRET\\nlast'");
        run(
            &inv,
            &Limits::wall(Duration::from_secs(5)),
            &mut capture,
            Stop::Terminate,
        )
        .unwrap();
        assert_eq!(capture.bytes(), 28);
        assert_eq!(capture.tail(), "9\n***\nlast");
        drop(capture);
        assert_eq!(
            lines,
            [
                b"ab".to_vec(),
                b"01234".to_vec(),
                b"***".to_vec(),
                b"last".to_vec()
            ]
        );
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "ab\n0123456789\n***\nlast"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn held_child_runs_until_released() {
        let mut held = spawn_held(&sh(
            "echo noise; echo 'ready 42'; cat >/dev/null; echo gone >&2",
        ))
        .unwrap();
        assert_eq!(
            held.wait_for_line("ready ", Duration::from_secs(5)),
            Ok("42".to_string())
        );
        assert_eq!(
            held.wait_for_line("never ", Duration::from_millis(100)),
            Err(HeldWait::TimedOut)
        );
        let started = Instant::now();
        held.release(Duration::from_secs(5));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "stdin EOF ends it"
        );
    }

    #[test]
    fn held_child_that_dies_reports_its_stderr() {
        let mut held = spawn_held(&sh("echo 'no such image' >&2; exit 125")).unwrap();
        assert_eq!(
            held.wait_for_line("ready ", Duration::from_secs(5)),
            Err(HeldWait::Ended("no such image\n".into()))
        );
        held.release(Duration::from_secs(1));
    }

    #[test]
    fn display_quotes_what_needs_quoting() {
        let inv =
            Invocation::new("docker").args(["exec", "-e", "NAME", "c", "sh", "-c", "echo 'hi'"]);
        assert_eq!(
            inv.display(),
            r"docker exec -e NAME c sh -c 'echo '\''hi'\'''"
        );
    }
}
