//! Commands started by the sandbox's main process, not by the engine's exec (SPEC
//! §27): `helper/exec.c` the bridge's side. An engine's exec costs ~60 ms and
//! ~0.06 CPU-s of its client, daemon and runtime per command, on the path of every
//! worker and test run; the bridge forks in a millisecond.
//!
//! The request goes on the control connection only agent-runner and the bridge
//! hold (`socket.rs`): "exec LEN", the command's directory, arguments and
//! variables, and four descriptors of ours passed beside it (SCM_RIGHTS): pipes
//! for its stdin, stdout and stderr, and a socket its wait status comes back on
//! (a socket, which nothing can open through `/proc/1/fd`: gVisor lets a worker
//! open the rest of what PID 1 holds there). Its output is read from our ends of
//! the pipes as a child's would be (`process::run_attached`); values of variables
//! travel on the socket, never in any command line. Where the bridge takes no
//! descriptors, has 16 commands running or is not PID 1 (no reaper of its own),
//! it answers "refused", and the engine's exec runs the command as before; so it
//! does when the connection cannot be used, whose failure the engine's exec then
//! diagnoses. The status is read as it comes, never to its end.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_runner_core::process::{self, Attached, Capture, Finished, Limits, Remote, Stop};
use agent_runner_core::sys::Signal;

use super::control::{Control, read_answer};
use super::spec::{Exec, Var};

/// The request's word and its answers (`helper/exec.c`).
const REQUEST: &str = "exec";
const STARTED: &str = "agent-runner-exec ";
/// The helper's words when the command itself could not be started (its stderr).
pub(crate) const EXEC_FAILED: &str = "agent-runner-helper: exec failed";
/// The longest request the bridge takes (`EXEC_MAX`).
const LONGEST: usize = 4 << 20;

/// Environment variable: `engine` runs every command through the engine's exec,
/// as before (to tell a fault of the main process's starts from the engine's).
pub(crate) const EXEC_ENV: &str = "AGENT_RUNNER_EXEC";

/// Whether commands are started by the main process where it can (`EXEC_ENV`:
/// unset or `main`, yes; `engine`, no; anything else is ignored with a warning).
pub(crate) fn wanted() -> bool {
    match std::env::var(EXEC_ENV).as_deref() {
        Err(_) | Ok("" | "main") => true,
        Ok("engine") => false,
        Ok(other) => {
            log::warn!(
                "{EXEC_ENV}={} is neither `main` nor `engine`: ignored",
                agent_runner_core::text::escape_controls(&agent_runner_core::text::cut(other, 40))
            );
            true
        }
    }
}

/// The main process's starts of one sandbox; see the module documentation.
#[derive(Clone)]
pub struct MainExec {
    control: Arc<Mutex<Control>>,
}

/// A command the bridge started: our ends of its pipes.
pub(crate) struct Opened {
    remote: RemoteCommand,
    stdin: std::fs::File,
    stdout: std::fs::File,
    stderr: std::fs::File,
}

impl MainExec {
    pub(crate) fn new(control: Arc<Mutex<Control>>) -> MainExec {
        MainExec { control }
    }

    /// Has the bridge start `exec`'s command. None: it cannot here (refused, or
    /// the connection unusable): the engine's exec is to run it.
    pub(crate) fn open(&self, exec: &Exec) -> Option<Opened> {
        let request = request(exec)?;
        let (stdin, their_stdin) = pipe().ok()?;
        let (stdout, their_stdout) = pipe().ok()?;
        let (stderr, their_stderr) = pipe().ok()?;
        // A socket, not a pipe: under gVisor a worker can open what PID 1 holds
        // through /proc/1/fd, but a socket cannot be opened that way (ENXIO), so
        // nothing but PID 1 can say the status.
        let (status, their_status) = UnixStream::pair().ok()?;
        let (status, their_status) = (OwnedFd::from(status), OwnedFd::from(their_status));
        // Ours are the writing end of stdin and the reading ends of the rest.
        let (stdin, their_stdin) = (their_stdin, stdin);
        let passed = [&their_stdin, &their_stdout, &their_stderr, &their_status];
        let mut control = self.control.lock().unwrap_or_else(|e| e.into_inner());
        let answer = control.bridge().ok().and_then(|stream| {
            send(stream, &request, &passed).ok()?;
            read_answer(stream).ok()
        });
        let Some(answer) = answer else {
            control.drop_connection();
            return None;
        };
        drop(control);
        drop((their_stdin, their_stdout, their_stderr, their_status));
        let pid = answer.strip_prefix(STARTED)?.trim().parse::<u32>().ok()?;
        Some(Opened {
            remote: RemoteCommand {
                pid,
                status: std::fs::File::from(status),
                said: Vec::new(),
                ended: None,
                control: self.control.clone(),
            },
            stdin: stdin.into(),
            stdout: stdout.into(),
            stderr: stderr.into(),
        })
    }
}

impl Opened {
    /// Runs it to its end (`process::run_attached`).
    pub(crate) fn run(
        mut self,
        exec: Exec,
        limits: &Limits,
        capture: &mut Capture,
        stop: Stop,
    ) -> Finished {
        let attached = Attached {
            remote: &mut self.remote,
            stdin: self.stdin,
            stdout: self.stdout,
            stderr: self.stderr,
        };
        process::run_attached(attached, exec.stdin, exec.stdin_file, limits, capture, stop)
    }
}

/// "exec LEN\n" and the fields: "D" the directory, "A" each argument, "E" each
/// variable, each ended by NUL. None: one holds a NUL, or it is too long.
fn request(exec: &Exec) -> Option<Vec<u8>> {
    let vars = exec.env.iter().map(|var| {
        let (Var::ByName(name, value) | Var::Literal(name, value)) = var;
        (b'E', format!("{name}={value}"))
    });
    let fields: Vec<(u8, String)> = (exec.workdir.iter().map(|dir| (b'D', dir.clone())))
        .chain(exec.command.iter().map(|arg| (b'A', arg.clone())))
        .chain(vars)
        .collect();
    if exec.command.is_empty() || fields.iter().any(|(_, text)| text.contains('\0')) {
        return None;
    }
    let mut bytes = Vec::new();
    for (kind, text) in fields {
        bytes.push(kind);
        bytes.extend_from_slice(text.as_bytes());
        bytes.push(0);
    }
    if bytes.len() > LONGEST {
        return None;
    }
    let mut request = format!("{REQUEST} {}\n", bytes.len()).into_bytes();
    request.extend(bytes);
    Some(request)
}

/// A pipe, both ends closed on exec: (reading end, writing end).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: both are open descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `request` on `stream`, the descriptors `passed` beside its first byte.
fn send(stream: &mut UnixStream, request: &[u8], passed: &[&OwnedFd; 4]) -> std::io::Result<()> {
    let fds: Vec<libc::c_int> = passed.iter().map(|fd| fd.as_raw_fd()).collect();
    let size = std::mem::size_of_val(fds.as_slice());
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(size as u32) } as usize;
    let mut buffer = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: request.as_ptr() as *mut libc::c_void,
        iov_len: 1,
    };
    // SAFETY: msghdr is plain data; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = buffer.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer has room for one header and `fds` (CMSG_SPACE).
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(size as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr() as *const u8, libc::CMSG_DATA(header), size);
    }
    // The first byte carries the descriptors; the rest follows as plain bytes.
    loop {
        // SAFETY: `msg` points at live buffers (above).
        let sent = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if sent == 1 {
            break;
        }
        let error = std::io::Error::last_os_error();
        if sent < 0 && error.kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return Err(error);
    }
    stream.write_all(&request[1..])
}

/// The command the bridge started, as `process` waits for it.
struct RemoteCommand {
    pid: u32,
    /// Its wait status comes on it, then its end; an end alone: the bridge is gone.
    status: std::fs::File,
    /// What came on `status` so far.
    said: Vec<u8>,
    /// Its status, once it came (asked again after).
    ended: Option<std::io::Result<ExitStatus>>,
    control: Arc<Mutex<Control>>,
}

impl Remote for RemoteCommand {
    fn wait_timeout(&mut self, timeout: Duration) -> std::io::Result<Option<ExitStatus>> {
        if self.ended.is_none() {
            self.ended = self.read_status(timeout)?;
        }
        match &self.ended {
            None => Ok(None),
            Some(Ok(status)) => Ok(Some(*status)),
            Some(Err(e)) => Err(std::io::Error::new(e.kind(), e.to_string())),
        }
    }

    fn signal(&mut self, signal: Signal) {
        if self.ended.is_some() {
            return;
        }
        let mut control = self.control.lock().unwrap_or_else(|e| e.into_inner());
        if let Ok(stream) = control.bridge() {
            let line = format!("signal {} {}\n", self.pid, signal.number());
            if stream.write_all(line.as_bytes()).is_err() {
                control.drop_connection();
            }
        }
    }
}

impl RemoteCommand {
    /// What `status` says within `timeout`: None, nothing yet.
    #[allow(clippy::type_complexity)]
    fn read_status(
        &mut self,
        timeout: Duration,
    ) -> std::io::Result<Option<std::io::Result<ExitStatus>>> {
        // Read as it comes, never to the end: whatever else came to hold its
        // other end must not hold the wait here.
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if self.said.contains(&b'\n') || self.said.len() > STATUS_LONGEST {
                return Ok(Some(status_of(&self.said)));
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let mut poll = libc::pollfd {
                fd: self.status.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let millis = libc::c_int::try_from(left.as_millis()).unwrap_or(libc::c_int::MAX);
            // SAFETY: one pollfd, alive for the call.
            if unsafe { libc::poll(&mut poll, 1, millis) } <= 0 {
                return Ok(None);
            }
            let mut chunk = [0u8; STATUS_LONGEST + 1];
            match std::io::Read::read(&mut &self.status, &mut chunk) {
                Ok(0) => return Ok(Some(status_of(&self.said))),
                Ok(n) => self.said.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The longest status line ("-2147483648\n" is shorter).
const STATUS_LONGEST: usize = 16;

/// The wait status said on the status pipe (`helper/exec.c`); ended by a signal:
/// 128 + its number, as the engine's exec says it. Anything else: the main
/// process ended before the command.
fn status_of(said: &[u8]) -> std::io::Result<ExitStatus> {
    let line = said.split(|&b| b == b'\n').next().unwrap_or_default();
    match std::str::from_utf8(line)
        .ok()
        .and_then(|text| text.parse::<i32>().ok())
    {
        Some(raw) if said.contains(&b'\n') => {
            Ok(ExitStatus::from_raw(
                match ExitStatus::from_raw(raw).signal() {
                    Some(signal) => (128 + signal) << 8,
                    None => raw,
                },
            ))
        }
        _ => Err(std::io::Error::other(
            "the sandbox's main process ended before the command",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_core::interrupt::Interrupt;
    use std::io::BufRead;

    /// The real helper (`helper/bridge.c`) as the keep-alive on this machine,
    /// connected to a control socket of ours, PID 1 of a PID namespace of its own
    /// (`unshare`) or not; its main exec, once it said it is ready.
    fn bridge(as_pid_1: bool) -> (std::process::Child, MainExec) {
        let dir = std::env::temp_dir().join(format!(
            "agent-runner-main-exec-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let helper = dir.join("helper");
        std::fs::write(&helper, super::super::socket::BINARY).unwrap();
        std::fs::set_permissions(&helper, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let control = dir.join("control.sock");
        let listener = std::os::unix::net::UnixListener::bind(&control).unwrap();
        listener.set_nonblocking(true).unwrap();
        let mut command = match as_pid_1 {
            true => {
                let mut unshare = std::process::Command::new("unshare");
                unshare
                    .args(["--user", "--map-root-user", "--pid", "--fork"])
                    .arg(&helper);
                unshare
            }
            false => std::process::Command::new(&helper),
        };
        let mut child = command
            .args([
                format!("control={}", control.display()),
                "0".into(),
                "-".into(),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert!(ready.starts_with("agent-runner-ready "), "{ready:?}");
        (
            child,
            MainExec::new(Arc::new(Mutex::new(Control::new(listener)))),
        )
    }

    fn shell(script: &str) -> Exec {
        Exec {
            workdir: Some("/".into()),
            env: vec![Var::ByName("GREETING".into(), "hello there".into())],
            command: vec!["/bin/sh".into(), "-c".into(), script.into()],
            stdin: b"from stdin\n".to_vec(),
            stdin_file: None,
        }
    }

    #[test]
    fn pid_1_runs_a_command_with_our_stdio_and_says_its_status() {
        let (mut child, main) = bridge(true);
        let exec =
            shell("read line; echo \"$GREETING, $line in $(pwd)\"; echo to-stderr >&2; exit 7");
        let opened = main.open(&exec).expect("started by PID 1");
        let mut capture = Capture::in_memory(4096);
        let limits = Limits::wall(Duration::from_secs(30), Interrupt::never());
        let finished = opened.run(exec, &limits, &mut capture, Stop::Terminate);
        assert_eq!(finished.code(), Some(7));
        // The tail has both streams, in the order they came.
        assert!(capture.tail().contains("hello there, from stdin in /\n"));
        assert_eq!(capture.stderr(), "to-stderr\n");
        // A command past its limit is killed through PID 1, in its group.
        let exec = shell("sleep 60 & sleep 60");
        let opened = main.open(&exec).expect("started by PID 1");
        let limits = Limits::wall(Duration::from_millis(300), Interrupt::never());
        let started = std::time::Instant::now();
        let finished = opened.run(exec, &limits, &mut Capture::in_memory(64), Stop::Terminate);
        assert_eq!(
            finished.ending,
            agent_runner_core::process::Ending::TimedOut
        );
        assert_eq!(finished.code(), Some(128 + 15));
        assert!(started.elapsed() < Duration::from_secs(10));
        drop(child.stdin.take());
        child.wait().unwrap();
    }

    #[test]
    fn a_helper_that_is_not_pid_1_refuses_and_the_engine_s_exec_is_to_run_it() {
        let (mut child, main) = bridge(false);
        assert!(main.open(&shell("true")).is_none());
        drop(child.stdin.take());
        child.wait().unwrap();
    }

    fn remote(status: OwnedFd) -> RemoteCommand {
        RemoteCommand {
            pid: 0,
            status: std::fs::File::from(status),
            said: Vec::new(),
            ended: None,
            control: Arc::new(Mutex::new(Control::default())),
        }
    }

    #[test]
    fn a_status_is_taken_as_its_line_comes_though_another_holds_the_pipe() {
        let (read, write) = pipe().unwrap();
        let mut command = remote(read);
        assert!(command.wait_timeout(Duration::ZERO).unwrap().is_none());
        let mut writer = std::fs::File::from(write);
        // A second writer that never closes (a worker's through /proc/1/fd).
        let _held = writer.try_clone().unwrap();
        writer.write_all(b"768\n").unwrap();
        let started = std::time::Instant::now();
        let status = command.wait_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(status.and_then(|s| s.code()), Some(3));
        assert!(started.elapsed() < Duration::from_secs(10));
        // Asked again: the same.
        let again = command.wait_timeout(Duration::ZERO).unwrap();
        assert_eq!(again.and_then(|s| s.code()), Some(3));
    }

    #[test]
    fn a_command_ended_by_a_signal_says_128_and_its_number_as_the_engine_does() {
        assert_eq!(status_of(b"9\n").unwrap().code(), Some(137));
        assert_eq!(status_of(b"0\n").unwrap().code(), Some(0));
        assert_eq!(status_of(b"256\n").unwrap().code(), Some(1));
    }

    #[test]
    fn a_pipe_ended_without_a_status_says_the_main_process_ended() {
        let (read, write) = pipe().unwrap();
        drop(write);
        let mut command = remote(read);
        assert!(command.wait_timeout(Duration::from_secs(5)).is_err());
        for said in [&b""[..], b"12", b"x\n", b"99999999999999999999\n"] {
            assert!(status_of(said).is_err(), "{said:?}");
        }
    }

    #[test]
    fn a_request_is_its_fields_each_ended_by_nul_and_one_with_a_nul_is_none() {
        let exec = Exec {
            workdir: Some("/w".into()),
            env: vec![
                Var::ByName("KEY".into(), "s3cr=t".into()),
                Var::Literal("PATH".into(), "/bin".into()),
            ],
            command: vec!["sh".into(), "-c".into(), "echo hi".into()],
            stdin: b"nonce\n".to_vec(),
            stdin_file: None,
        };
        let fields = b"D/w\0Ash\0A-c\0Aecho hi\0EKEY=s3cr=t\0EPATH=/bin\0";
        let mut expected = format!("exec {}\n", fields.len()).into_bytes();
        expected.extend_from_slice(fields);
        assert_eq!(request(&exec).unwrap(), expected);
        let nul = |exec: Exec| request(&exec).is_none();
        assert!(nul(Exec {
            command: vec!["a\0b".into()],
            ..exec.clone()
        }));
        assert!(nul(Exec {
            env: vec![Var::ByName("K".into(), "v\0".into())],
            ..exec.clone()
        }));
        assert!(nul(Exec {
            command: Vec::new(),
            ..exec
        }));
    }
}
