//! Helpers shared by the integration tests: run the real binary, scratch directories.

pub mod cluster;
pub mod destination;
pub mod docker;
pub mod docker_proxy;
pub mod eval_suite;
pub mod fake_anthropic;
pub mod fake_openai;
pub mod fake_responses;
pub mod pipeline;
pub mod podman;
pub mod prerequisite;
pub mod remote_hosts;
pub mod server;
pub mod task;
pub mod task_yaml;
pub mod web;
pub mod webdriver;
pub mod webhook;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `support/setid_probe.c` built static (once per test binary): tries every way to
/// give a file a set-id bit or file capabilities, one line of result per way.
pub fn setid_probe() -> PathBuf {
    static PROBE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PROBE
        .get_or_init(|| {
            let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/setid_probe.c");
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
            let built = dir.join(format!("setid-probe.{}", std::process::id()));
            let out = Run::program("cc", &["-static", "-Os", "-Wall", "-o"])
                .arg(built.to_str().unwrap())
                .arg(source.to_str().unwrap())
                .output();
            assert_eq!(
                out.code,
                Some(0),
                "cc -static setid_probe.c: {}",
                out.stderr
            );
            // Renamed into place: test binaries running at once never see half a file.
            let probe = dir.join("setid-probe");
            std::fs::rename(&built, &probe).unwrap();
            probe
        })
        .clone()
}

/// `support/pid1_probe.c` built static (once per test binary): a hostile worker's
/// ways into PID 1 and the carrier (ptrace, process_vm_*, /proc/<pid>/mem, a
/// takeover), and out of the stop pass after a run.
pub fn pid1_probe() -> PathBuf {
    static PROBE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PROBE
        .get_or_init(|| {
            let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/pid1_probe.c");
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
            let built = dir.join(format!("pid1-probe.{}", std::process::id()));
            let out = Run::program("cc", &["-static", "-Os", "-Wall", "-pthread", "-o"])
                .arg(built.to_str().unwrap())
                .arg(source.to_str().unwrap())
                .output();
            assert_eq!(out.code, Some(0), "cc -static pid1_probe.c: {}", out.stderr);
            let probe = dir.join("pid1-probe");
            std::fs::rename(&built, &probe).unwrap();
            probe
        })
        .clone()
}

/// A scratch directory, removed on drop.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Self {
        Scratch::new_in(&std::env::temp_dir(), name)
    }

    /// A scratch directory under `dir` (a remote host's shared directory).
    pub fn new_in(dir: &Path, name: &str) -> Self {
        let path = dir.join(format!("agent-runner-{name}-{}", short_id()));
        std::fs::create_dir_all(&path).unwrap();
        Scratch {
            path: std::fs::canonicalize(path).unwrap(),
        }
    }

    /// Writes a file (creating parent directories); returns its path.
    pub fn file(&self, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The first piece of `secret` at least `len` bytes long (on char boundaries) that
/// appears in `text`: a partial leak survives a cut or a re-wrapped dump, where the
/// whole value does not.
pub fn leaked_piece(text: &str, secret: &str, len: usize) -> Option<String> {
    let bounds: Vec<usize> = secret
        .char_indices()
        .map(|(i, _)| i)
        .chain([secret.len()])
        .collect();
    for (a, &start) in bounds.iter().enumerate() {
        let Some(&end) = bounds[a..].iter().find(|&&e| e - start >= len) else {
            break;
        };
        let piece = &secret[start..end];
        if text.contains(piece) {
            return Some(piece.to_string());
        }
    }
    None
}

/// `n` random hex digits (std's per-hasher random keys), for values no other text
/// in a test can share a piece with.
pub fn random_hex(n: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::new();
    while out.len() < n {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(out.len());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(n);
    out
}

/// Runs `check` on every case at once, each in a thread named as the test's own
/// (the sandbox's runtime and the not-run list go by that name): for a test of
/// independent cases that waits on containers far more than it computes. A panic
/// in any case fails the test once all have ended.
pub fn each_at_once<T: Send>(cases: impl IntoIterator<Item = T>, check: impl Fn(T) + Sync) {
    let name = std::thread::current().name().map(str::to_string);
    let check = &check;
    std::thread::scope(|scope| {
        for case in cases {
            let mut thread = std::thread::Builder::new();
            if let Some(name) = &name {
                thread = thread.name(name.clone());
            }
            thread.spawn_scoped(scope, move || check(case)).unwrap();
        }
    });
}

pub fn short_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}-{nanos:x}", std::process::id())
}

/// A non-root user who may use the docker socket, for running the binary as them.
pub struct OtherUser {
    pub uid: u32,
    wrapper: Vec<String>,
}

impl OtherUser {
    /// User `uid` (group `uid`, plus the docker socket's group), owning `dir`
    /// recursively. Tests that use one need root (`#[ignore = "needs root"]`).
    pub fn new(uid: u32, dir: &Path) -> OtherUser {
        use std::os::unix::fs::MetadataExt;
        prerequisite::require(prerequisite::Needs::Root);
        let socket = Path::new("/var/run/docker.sock");
        let meta =
            std::fs::metadata(socket).unwrap_or_else(|e| panic!("{}: {e}", socket.display()));
        let wrapper = [
            "setpriv",
            "--reuid",
            &uid.to_string(),
            "--regid",
            &uid.to_string(),
            "--groups",
            &meta.gid().to_string(),
        ]
        .map(String::from)
        .to_vec();
        let user = OtherUser { uid, wrapper };
        user.owns(dir);
        user
    }

    /// Makes this user the owner of `dir`, recursively.
    pub fn owns(&self, dir: &Path) {
        let uid = self.uid;
        let chown = Command::new("chown")
            .args(["-R", &format!("{uid}:{uid}")])
            .arg(dir)
            .status()
            .unwrap();
        assert!(chown.success(), "chown {}", dir.display());
    }

    /// The binary with `args`, run as this user.
    pub fn run(&self, args: &[&str]) -> Run {
        let wrapper: Vec<&str> = self.wrapper.iter().map(String::as_str).collect();
        Run::through(&wrapper, args)
    }
}

/// A tmpfs mounted over a directory for the test's lifetime (tests that use one
/// need root).
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    pub fn mount(path: &Path, size: &str) -> Tmpfs {
        prerequisite::require(prerequisite::Needs::Root);
        std::fs::create_dir_all(path).unwrap();
        Run::program(
            "mount",
            &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"],
        )
        .arg(path.to_str().unwrap())
        .output()
        .code(0);
        Tmpfs(path.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A git repository at `path` with `file` committed, made by the test itself (before
/// any worker touched it).
pub fn git_repo(path: &Path, file: &str, content: &str) {
    std::fs::create_dir_all(path).unwrap();
    std::fs::write(path.join(file), content).unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", file],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    ] {
        Run::program("git", args).cwd(path).output().code(0);
    }
}

/// How long a test waits for a program it started to end, unless it says
/// otherwise (`Run::deadline`): a hang fails the test with what the program
/// printed, and never hangs the suite.
pub const DEADLINE: Duration = Duration::from_secs(180);
/// How long output is still read after the program ended (something it started
/// may hold its stdout or stderr open).
const DRAIN: Duration = Duration::from_secs(10);

/// The agent-runner binary, run like a user would: arguments, stdin, environment,
/// cwd; or another program (`Run::program`), the same way.
pub struct Run {
    command: Command,
    stdin: Vec<u8>,
    deadline: Duration,
}

impl Run {
    pub fn new(args: &[&str]) -> Self {
        Run::through(&[], args)
    }

    /// Runs the binary through `wrapper` (e.g. `setpriv --reuid ...`).
    pub fn through(wrapper: &[&str], args: &[&str]) -> Self {
        let binary = env!("CARGO_BIN_EXE_agent-runner");
        let mut run = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut run = Run::program(program, rest);
                run.command.arg(binary);
                run
            }
            None => Run::program(binary, &[]),
        };
        run.command.args(args);
        // Tests pass the variables they mean to; the developer's own must not leak in.
        for var in [
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "META_TIMEOUT_SEC",
            "CODEX_API_KEY",
            "ANTHROPIC_API_KEY",
            "RUST_LOG",
        ] {
            run.command.env_remove(var);
        }
        run
    }

    /// Another program (docker, a wrapper), with the same deadline and output capture.
    pub fn program(program: &str, args: &[&str]) -> Self {
        let mut command = Command::new(program);
        command.args(args);
        Run {
            command,
            stdin: Vec::new(),
            deadline: DEADLINE,
        }
    }

    pub fn arg(mut self, arg: &str) -> Self {
        self.command.arg(arg);
        self
    }

    pub fn args(mut self, args: &[&str]) -> Self {
        self.command.args(args);
        self
    }

    pub fn stdin(mut self, bytes: impl AsRef<[u8]>) -> Self {
        self.stdin = bytes.as_ref().to_vec();
        self
    }

    pub fn env(mut self, name: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.command.env(name, value);
        self
    }

    pub fn env_remove(mut self, name: &str) -> Self {
        self.command.env_remove(name);
        self
    }

    pub fn cwd(mut self, dir: &Path) -> Self {
        self.command.current_dir(dir);
        self
    }

    /// Runs the binary with file mode creation mask `mask`.
    pub fn umask(mut self, mask: u32) -> Self {
        use std::os::unix::process::CommandExt;
        // SAFETY: umask is async-signal-safe and cannot fail.
        unsafe {
            self.command.pre_exec(move || {
                libc::umask(mask as libc::mode_t);
                Ok(())
            });
        }
        self
    }

    /// How long `output` and `Running::finish` wait for the end (default `DEADLINE`).
    pub fn deadline(mut self, limit: Duration) -> Self {
        self.deadline = limit;
        self
    }

    /// Starts the program with stdin written, then closed; it is killed if the
    /// returned value is dropped first.
    pub fn start(mut self) -> Running {
        let bytes = std::mem::take(&mut self.stdin);
        let mut running = self.start_with_open_stdin();
        let mut stdin = running.child().stdin.take().unwrap();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
        running
    }

    /// Starts the program with stdin left open for the caller (`child().stdin`).
    pub fn start_with_open_stdin(mut self) -> Running {
        let label = std::iter::once(self.command.get_program())
            .chain(self.command.get_args())
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        self.command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = self
            .command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {label}: {e}"));
        Running {
            child: Some(child),
            deadline: self.deadline,
            label,
        }
    }

    /// Runs the program to its end (at most its deadline).
    pub fn output(self) -> Outcome {
        self.start().finish()
    }
}

/// A running program that is SIGKILLed if the test ends (or panics) first, so a
/// failing test leaves no process behind (its container then goes with it).
pub struct Running {
    child: Option<std::process::Child>,
    deadline: Duration,
    /// The command line, for messages (never its environment: it may hold keys).
    label: String,
}

impl Running {
    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    pub fn child(&mut self) -> &mut std::process::Child {
        self.child.as_mut().expect("still running")
    }

    /// Waits for the exit (at most the deadline) and collects the output it has
    /// not handed out (`child().stdout.take()`).
    pub fn finish(mut self) -> Outcome {
        self.collect(|child| child.try_wait().unwrap())
    }

    /// `finish`, and the child's peak RSS in KiB: the last `VmHWM` of its
    /// `/proc/<pid>/status`, read every 10 ms while it runs. Not wait4's
    /// `ru_maxrss`: that also counts what the child was before its exec, a copy of
    /// this test process (hundreds of MiB with every test in one binary).
    pub fn finish_with_peak_rss(mut self) -> (Outcome, u64) {
        let mut peak = 0;
        let outcome = self.collect(|child| {
            if let Some(kib) = vm_hwm_kib(child.id()) {
                peak = peak.max(kib);
            }
            child.try_wait().unwrap()
        });
        assert!(peak > 0, "no VmHWM was read while the program ran");
        (outcome, peak)
    }

    /// SIGKILLs the program and waits for it.
    pub fn kill(mut self) {
        let mut child = self.child.take().expect("still running");
        let _ = child.kill();
        child.wait().unwrap();
    }

    /// Polls `reap` until the program ended; past the deadline, kills it and fails
    /// the test with what it printed.
    fn collect(
        &mut self,
        mut reap: impl FnMut(&mut std::process::Child) -> Option<std::process::ExitStatus>,
    ) -> Outcome {
        let mut child = self.child.take().expect("still running");
        let (done, finished) = std::sync::mpsc::channel();
        let streams = [
            read_all(child.stdout.take().map(|s| Box::new(s) as _), done.clone()),
            read_all(child.stderr.take().map(|s| Box::new(s) as _), done),
        ];
        let until = Instant::now() + self.deadline;
        let ended = loop {
            if let Some(ended) = reap(&mut child) {
                break Some(ended);
            }
            if Instant::now() >= until {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let drained = Instant::now() + DRAIN;
        for _ in 0..2 {
            let left = drained.saturating_duration_since(Instant::now());
            if finished.recv_timeout(left).is_err() {
                break;
            }
        }
        let [stdout, stderr] =
            streams.map(|s| String::from_utf8_lossy(&s.lock().unwrap()).into_owned());
        let Some(status) = ended else {
            panic!(
                "{}: still running after {:?}, killed\nstdout:\n{}\nstderr:\n{}",
                self.label,
                self.deadline,
                tail(&stdout),
                tail(&stderr)
            );
        };
        Outcome {
            code: status.code(),
            stdout,
            stderr,
        }
    }
}

/// Reads `stream` to its end on a thread of its own, into the returned buffer;
/// says `done` then.
fn read_all(
    stream: Option<Box<dyn std::io::Read + Send>>,
    done: std::sync::mpsc::Sender<()>,
) -> std::sync::Arc<std::sync::Mutex<Vec<u8>>> {
    let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let shared = buffer.clone();
    std::thread::spawn(move || {
        if let Some(mut stream) = stream {
            let mut chunk = [0u8; 64 * 1024];
            while let Ok(n @ 1..) = stream.read(&mut chunk) {
                shared.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        }
        let _ = done.send(());
    });
    buffer
}

/// The end of `text`, for messages.
fn tail(text: &str) -> &str {
    let mut start = text.len().saturating_sub(16 * 1024);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What the program did.
#[derive(Debug)]
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    /// Asserts the exit code, showing all output when it is wrong.
    pub fn code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(expected),
            "exit code; stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    pub fn stderr_has(&self, text: &str) -> &Self {
        assert!(
            self.stderr.contains(text),
            "stderr lacks {text:?}:\n{}",
            self.stderr
        );
        self
    }

    pub fn stdout_has(&self, text: &str) -> &Self {
        assert!(
            self.stdout.contains(text),
            "stdout lacks {text:?}:\n{}",
            self.stdout
        );
        self
    }
}

/// The high-water mark of `pid`'s resident memory (`VmHWM`, KiB), while it runs.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
