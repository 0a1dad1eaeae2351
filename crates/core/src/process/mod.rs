//! Every child process (docker, git) is spawned and waited for here.
//!
//! stdin is explicit (bytes written by a thread, then closed). stdout and stderr are
//! read by threads that own the pipes and send chunks over a bounded channel, so a
//! chatty child never blocks on a full pipe and memory stays bounded. The waiting
//! thread handles output, the wall and idle deadlines and interrupts in one loop; on
//! a deadline it runs a `Stop` strategy, then SIGKILLs the child's process group if
//! it is still there after the grace period.

mod attached;
mod capture;
mod held;
mod invocation;
pub mod priority;
pub mod program;

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use wait_timeout::ChildExt;

pub use attached::{Attached, Remote, run_attached};
pub use capture::{Capture, StreamFilter};
pub use held::{Held, HeldOutput, HeldWait, spawn_held};
pub use invocation::{INPUT_FILE, Invocation};

use crate::Error;
use crate::interrupt::Interrupt;
use crate::sys::{self, Signal};

/// How often a waiting loop looks at the interrupt flag. A child's exit or output
/// wakes the loop at once; this only bounds the reaction to Ctrl-C.
pub const TICK: Duration = Duration::from_millis(50);
/// Size of one read from a child's pipe.
const CHUNK: usize = 64 * 1024;
/// Chunks in flight between the reader threads and the waiting loop.
const CHANNEL_CHUNKS: usize = 16;
/// After the child exits, how long its pipes may stay open (held by a detached
/// grandchild) before we stop reading them.
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// When to give up on a child.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Wall-clock limit.
    pub wall: Option<Duration>,
    /// Limit on time without any output.
    pub idle: Option<Duration>,
    /// After the stop strategy ran: how long to wait before SIGKILL.
    pub grace: Duration,
    /// A stop request that ends this child. Clean-up commands that run after an
    /// interrupt use `Interrupt::never()`.
    pub interrupt: Interrupt,
}

impl Limits {
    /// A short administrative command: wall limit, 5 s grace, ended by `interrupt`.
    pub fn wall(wall: Duration, interrupt: Interrupt) -> Self {
        Limits {
            wall: Some(wall),
            idle: None,
            grace: Duration::from_secs(5),
            interrupt,
        }
    }

    /// Clean-up: runs to its end even after an interrupt.
    pub fn cleanup(wall: Duration) -> Self {
        Limits::wall(wall, Interrupt::never())
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

/// Which pipe a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout = 0,
    Stderr = 1,
}

pub(crate) enum Message {
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
) -> Result<Finished, Error> {
    run_watched(invocation, limits, capture, stop, &mut |_| {})
}

/// `run`, telling `spawned` the child's pid as soon as it runs (before anything is
/// waited for), so the caller can name the child to others while it runs.
pub fn run_watched(
    invocation: &Invocation,
    limits: &Limits,
    capture: &mut Capture,
    stop: Stop,
    spawned: &mut dyn FnMut(u32),
) -> Result<Finished, Error> {
    let started = Instant::now();
    let Started {
        mut child,
        receiver,
        open,
    } = start(invocation)?;
    spawned(child.id());
    if let Some(mut stdin) = child.stdin.take() {
        let bytes = invocation.stdin.clone();
        let file = invocation.stdin_file.clone();
        // A child that exits without reading its stdin makes this write fail; that
        // is its business, not an error here. The file follows the bytes through
        // a bounded buffer (`io::copy`), never whole in memory.
        std::thread::spawn(move || {
            if stdin.write_all(&bytes).is_ok()
                && let Some(file) = file
            {
                let _ = std::io::copy(&mut &*file, &mut stdin);
            }
        });
    }

    let waiter = Waiter {
        child: &mut child,
        receiver,
        open,
        capture,
        started,
        last_output: started,
        exited_at: None,
    };
    Ok(waiter.finish(limits, stop))
}

/// A spawned child whose stdout and stderr are being read into `receiver`.
pub(crate) struct Started {
    child: Child,
    receiver: Receiver<Message>,
    /// Pipes not yet at end-of-file.
    open: usize,
}

/// Spawns the child in its own process group, stdin piped, output read by threads.
/// The program is found by `program::resolve`; the child runs in the directory
/// given, else in `/`, never in one it inherited (which may be one a worker writes).
pub(crate) fn start(invocation: &Invocation) -> Result<Started, Error> {
    let path = program::resolve(&invocation.program).map_err(|reason| Error::Spawn {
        program: invocation.program.clone(),
        reason: reason.to_string(),
    })?;
    let mut command = std::process::Command::new(path);
    let stderr = match &invocation.stderr_file {
        None => Stdio::piped(),
        // A log of ours: this user's only.
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map(Stdio::from)
            .map_err(|e| Error::Spawn {
                program: invocation.program.clone(),
                reason: format!("cannot open {} for its stderr: {e}", path.display()),
            })?,
    };
    // A file alone is the child's stdin itself; after bytes, it goes through the
    // pipe behind them (`run_watched`).
    let stdin = match invocation
        .stdin_file
        .as_ref()
        .filter(|_| invocation.stdin.is_empty())
    {
        None => Stdio::piped(),
        Some(file) => file
            .try_clone()
            .map(Stdio::from)
            .map_err(|e| Error::Spawn {
                program: invocation.program.clone(),
                reason: format!("cannot pass its stdin: {e}"),
            })?,
    };
    for name in &invocation.env_removed {
        command.env_remove(name);
    }
    command
        .args(&invocation.args)
        .envs(invocation.env.iter().map(|(k, v)| (k, v)))
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0);
    command.current_dir(invocation.cwd.as_deref().unwrap_or(Path::new("/")));
    if invocation.parent_death_signal {
        sys::terminate_with_parent(&mut command);
    }
    // Kept open until the child has started with its copy.
    let input = match &invocation.input_file {
        None => None,
        Some(bytes) => {
            let file = sys::memory_file(bytes).map_err(|e| Error::Spawn {
                program: invocation.program.clone(),
                reason: format!("cannot make its input file: {e}"),
            })?;
            sys::pass_as_fd3(&mut command, &file);
            Some(file)
        }
    };
    let mut child = command.spawn().map_err(|e| Error::Spawn {
        program: invocation.program.clone(),
        reason: e.to_string(),
    })?;
    drop(input);
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

/// What a `Waiter` waits for: a child of ours, or a command another process
/// started for us (`Attached`).
trait Awaited {
    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>>;
    fn wait_timeout(&mut self, timeout: Duration) -> std::io::Result<Option<ExitStatus>>;
    /// To its process group; `Kill` to it too.
    fn signal(&mut self, signal: Signal);
}

impl Awaited for Child {
    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        Child::try_wait(self)
    }

    fn wait_timeout(&mut self, timeout: Duration) -> std::io::Result<Option<ExitStatus>> {
        ChildExt::wait_timeout(self, timeout)
    }

    fn signal(&mut self, signal: Signal) {
        sys::signal_group(self.id(), signal);
        if signal == Signal::Kill {
            let _ = self.kill();
        }
    }
}

struct Waiter<'c, 'a> {
    child: &'c mut dyn Awaited,
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
            if limits.interrupt.is_set() {
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
                    if self.capture.take(stream, &bytes) {
                        self.last_output = Instant::now();
                    }
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

    /// Waits under `limits`; a limit reached runs `stop`, then SIGKILL after the
    /// grace.
    fn finish(mut self, limits: &Limits, stop: Stop) -> Finished {
        let ending = self.wait_for_limit(limits);
        let status = match ending {
            Ending::Exited => self.reap(),
            _ => {
                match stop {
                    Stop::Terminate => self.child.signal(Signal::Term),
                    Stop::Custom(action) => action(),
                }
                self.wait_until(Instant::now() + limits.grace);
                match self.child.try_wait() {
                    Ok(Some(status)) => Some(status),
                    _ => {
                        self.child.signal(Signal::Kill);
                        self.wait_until(Instant::now() + Duration::from_secs(2));
                        self.child.try_wait().ok().flatten()
                    }
                }
            }
        };
        self.capture.finish();
        Finished {
            ending,
            status,
            duration: self.started.elapsed(),
        }
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
            Limits::wall(Duration::from_secs(10), Interrupt::never()),
        );
        assert_eq!((f.ending, f.code()), (Ending::Exited, Some(3)));
        assert!(tail.contains("out\n") && tail.contains("err\n"), "{tail}");
        assert_eq!(stderr, "err\n");
    }

    #[test]
    fn an_input_file_is_read_at_its_path_from_memory() {
        let mut capture = Capture::in_memory(4096);
        let inv = sh(&format!(
            "cat {INPUT_FILE}; cat {INPUT_FILE}; readlink {INPUT_FILE}"
        ))
        .input_file(b"profile\n".to_vec());
        let f = run(
            &inv,
            &Limits::wall(Duration::from_secs(10), Interrupt::never()),
            &mut capture,
            Stop::Terminate,
        )
        .unwrap();
        assert_eq!(f.code(), Some(0), "{}", capture.stderr());
        // Read twice from its start; no file on disk.
        assert_eq!(
            capture.tail(),
            "profile\nprofile\n/memfd:agent-runner-input (deleted)\n"
        );
    }

    #[test]
    fn stdin_bytes_then_a_file_streamed_after_them() {
        let path = std::env::temp_dir().join(format!("ar-stdin-{}", std::process::id()));
        std::fs::write(&path, "from the file\n").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let mut capture = Capture::in_memory(4096);
        let inv = Invocation::new("cat").stdin("head\n").stdin_file(file);
        let f = run(
            &inv,
            &Limits::wall(Duration::from_secs(10), Interrupt::never()),
            &mut capture,
            Stop::Terminate,
        )
        .unwrap();
        assert!(f.success());
        assert_eq!(capture.tail(), "head\nfrom the file\n");
    }

    #[test]
    fn stdin_is_written_then_closed() {
        let mut capture = Capture::in_memory(4096);
        let inv = Invocation::new("cat").stdin("hello\nworld");
        let f = run(
            &inv,
            &Limits::wall(Duration::from_secs(10), Interrupt::never()),
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
            &Limits::wall(Duration::from_secs(10), Interrupt::never()),
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
            ..Limits::wall(Duration::from_millis(300), Interrupt::never())
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
            Limits::wall(Duration::from_secs(20), Interrupt::never()),
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
            ..Limits::wall(Duration::from_millis(300), Interrupt::never())
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
            ..Limits::wall(Duration::from_secs(20), Interrupt::never())
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
    fn quiet_lines_do_not_reset_the_idle_clock() {
        let limits = Limits {
            idle: Some(Duration::from_millis(600)),
            ..Limits::wall(Duration::from_secs(20), Interrupt::never())
        };
        // A retry notice every 100 ms, for ever: stalled all the same.
        let quiet = |line: &[u8]| line.starts_with(b"Reconnecting");
        let mut capture = Capture::in_memory(1024).with_quiet_lines(&quiet);
        let started = Instant::now();
        let f = run(
            &sh("echo start; while :; do echo Reconnecting...; sleep 0.1; done"),
            &limits,
            &mut capture,
            Stop::Terminate,
        )
        .unwrap();
        assert_eq!(f.ending, Ending::Stalled);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            capture.tail().contains("Reconnecting"),
            "{}",
            capture.tail()
        );
    }

    #[test]
    fn custom_stop_runs_instead_of_sigterm() {
        let mut stopped = false;
        let mut action = || stopped = true;
        let limits = Limits {
            grace: Duration::from_millis(200),
            ..Limits::wall(Duration::from_millis(200), Interrupt::never())
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
    fn an_interrupt_stops_the_child_through_its_stop_strategy() {
        let interrupt = Interrupt::manual();
        let trigger = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            interrupt.trigger();
        });
        let mut stopped = false;
        let mut action = || stopped = true;
        let limits = Limits {
            grace: Duration::from_millis(200),
            ..Limits::wall(Duration::from_secs(30), interrupt)
        };
        let started = Instant::now();
        let mut capture = Capture::in_memory(16);
        let f = run(
            &sh("sleep 30"),
            &limits,
            &mut capture,
            Stop::Custom(&mut action),
        )
        .unwrap();
        trigger.join().unwrap();
        assert_eq!(f.ending, Ending::Interrupted);
        assert!(stopped, "the stop strategy ran");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // Clean-up commands ignore the same interrupt.
        let f = run(
            &sh("exit 0"),
            &Limits::cleanup(Duration::from_secs(5)),
            &mut Capture::in_memory(16),
            Stop::Terminate,
        )
        .unwrap();
        assert_eq!(f.ending, Ending::Exited);
    }

    #[test]
    fn a_held_child_is_drained_after_it_reports_ready() {
        // 4 MiB after the ready line: far more than the pipe and channel hold.
        let mut held = spawn_held(&sh(
            "echo 'ready 1'; head -c 4194304 /dev/zero; echo done >&2; cat >/dev/null",
        ))
        .unwrap();
        assert_eq!(
            held.wait_for_line("ready ", Duration::from_secs(5), Interrupt::never()),
            Ok("1".to_string())
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while !held.stderr().contains("done") {
            assert!(Instant::now() < deadline, "the child is blocked writing");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(held.is_running());
        assert!(held.release(Duration::from_secs(5)));
    }

    #[test]
    fn a_child_dies_with_the_thread_that_spawned_it() {
        let dir =
            std::env::temp_dir().join(format!("agent-runner-pdeath-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("stderr.log");
        let invocation =
            sh("trap 'echo got TERM >&2; exit 0' TERM; echo up >&2; while :; do sleep 0.05; done")
                .stderr_to(&log)
                .die_with_parent();
        // The spawning thread ends while the child runs (as when the process dies).
        let ready = log.clone();
        let pid = std::thread::spawn(move || {
            let started = start(&invocation).unwrap();
            let pid = started.child.id();
            std::mem::forget(started);
            while !std::fs::read_to_string(&ready).is_ok_and(|t| t.contains("up")) {
                std::thread::sleep(Duration::from_millis(10));
            }
            pid
        })
        .join()
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while sys::process_alive(pid) {
            assert!(
                Instant::now() < deadline,
                "the child outlived its parent thread"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(
            text.contains("got TERM"),
            "SIGTERM, so it could clean up: {text:?}"
        );
        // Without the flag, the child outlives the thread.
        let invocation = sh("sleep 30").stderr_to(&log);
        let pid = std::thread::spawn(move || {
            let started = start(&invocation).unwrap();
            let pid = started.child.id();
            std::mem::forget(started);
            pid
        })
        .join()
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(sys::process_alive(pid));
        sys::signal_process(pid, Signal::Kill);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn missing_program_is_a_spawn_error() {
        let mut capture = Capture::in_memory(16);
        let e = run(
            &Invocation::new("agent-runner-no-such-program"),
            &Limits::wall(Duration::from_secs(1), Interrupt::never()),
            &mut capture,
            Stop::Terminate,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot run `agent-runner-no-such-program`: not found on PATH (only its absolute directories are searched)"
        );
    }

    #[test]
    fn a_child_runs_in_the_root_directory_unless_told_where() {
        let (f, tail, _) = run_sh(
            "pwd",
            Limits::wall(Duration::from_secs(10), Interrupt::never()),
        );
        assert!(f.success());
        assert_eq!(tail, "/\n");
        let mut capture = Capture::in_memory(4096);
        let tmp = std::env::temp_dir();
        run(
            &sh("pwd").cwd(&tmp),
            &Limits::wall(Duration::from_secs(10), Interrupt::never()),
            &mut capture,
            Stop::Terminate,
        )
        .unwrap();
        assert_eq!(capture.tail(), format!("{}\n", tmp.display()));
    }

    #[test]
    fn lines_log_and_tails_are_bounded() {
        let dir =
            std::env::temp_dir().join(format!("agent-runner-process-{}", uuid::Uuid::new_v4()));
        let log = dir.join("x.log");
        let mut lines = Vec::new();
        let mut on_line = |l: &[u8]| lines.push(l.to_vec());
        let secret = crate::secret::Secret::new("TOPSECRET".into());
        std::fs::create_dir_all(&dir).unwrap();
        let file = std::fs::File::create(&log).unwrap();
        let mut capture = Capture::in_memory(10)
            .redacting(&crate::secret::Redactor::new([&secret]))
            .with_log(file, log.clone())
            .with_lines(5, &mut on_line);
        let inv = sh("printf 'ab\\n0123456789\\nTOPSECRET\\nlast'");
        run(
            &inv,
            &Limits::wall(Duration::from_secs(5), Interrupt::never()),
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
            held.wait_for_line("ready ", Duration::from_secs(5), Interrupt::never()),
            Ok("42".to_string())
        );
        let started = Instant::now();
        held.release(Duration::from_secs(5));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "stdin EOF ends it"
        );
    }

    #[test]
    fn waiting_for_a_held_child_times_out_or_is_interrupted() {
        let mut held = spawn_held(&sh("cat >/dev/null")).unwrap();
        assert_eq!(
            held.wait_for_line("ready ", Duration::from_millis(100), Interrupt::never()),
            Err(HeldWait::TimedOut)
        );
        let interrupt = Interrupt::manual();
        interrupt.trigger();
        assert_eq!(
            held.wait_for_line("ready ", Duration::from_secs(5), interrupt),
            Err(HeldWait::Interrupted)
        );
        assert!(held.release(Duration::from_secs(5)));
    }

    #[test]
    fn held_child_that_dies_reports_its_stderr() {
        let mut held = spawn_held(&sh("echo 'no such image' >&2; exit 125")).unwrap();
        assert_eq!(
            held.wait_for_line("ready ", Duration::from_secs(5), Interrupt::never()),
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
