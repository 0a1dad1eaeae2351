//! Helpers shared by the integration tests: run the real binary, scratch directories.
#![allow(dead_code)] // each test crate uses a different part of this module

pub mod destination;
pub mod docker;
pub mod docker_proxy;
pub mod fake_openai;
pub mod fake_responses;
pub mod pipeline;
pub mod sandbox_image;
pub mod task;
pub mod web;
pub mod webdriver;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A scratch directory, removed on drop.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("agent-runner-{name}-{}", short_id()));
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
    /// recursively. None, with a message, when setpriv or the socket is missing;
    /// under CI that is a failure instead.
    pub fn new(uid: u32, dir: &Path) -> Option<OtherUser> {
        use std::os::unix::fs::MetadataExt;
        let socket = Path::new("/var/run/docker.sock");
        let Ok(meta) = std::fs::metadata(socket) else {
            return skipped();
        };
        if !Path::new("/usr/bin/setpriv").exists() {
            return skipped();
        }
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
        Some(user)
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

fn skipped() -> Option<OtherUser> {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "this test needs /var/run/docker.sock and setpriv, and CI=true"
    );
    eprintln!("skipped: needs /var/run/docker.sock and setpriv");
    None
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
        let ok = Command::new("git")
            .args(args)
            .current_dir(path)
            .status()
            .unwrap();
        assert!(ok.success(), "git {args:?}");
    }
}

/// The agent-runner binary, run like a user would: arguments, stdin, environment, cwd.
pub struct Run {
    command: Command,
    stdin: Vec<u8>,
}

impl Run {
    pub fn new(args: &[&str]) -> Self {
        Run::through(&[], args)
    }

    /// Runs the binary through `wrapper` (e.g. `setpriv --reuid ...`).
    pub fn through(wrapper: &[&str], args: &[&str]) -> Self {
        let binary = env!("CARGO_BIN_EXE_agent-runner");
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(binary);
                c
            }
            None => Command::new(binary),
        };
        command.args(args);
        // Tests pass the variables they mean to; the developer's own must not leak in.
        for var in [
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "META_TIMEOUT_SEC",
            "CODEX_API_KEY",
            "RUST_LOG",
        ] {
            command.env_remove(var);
        }
        Run {
            command,
            stdin: Vec::new(),
        }
    }

    pub fn arg(mut self, arg: &str) -> Self {
        self.command.arg(arg);
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

    /// Starts the binary; it is killed if the returned value is dropped first.
    pub fn start(self) -> Running {
        Running(Some(self.spawn()))
    }

    pub fn spawn(mut self) -> std::process::Child {
        self.command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self.command.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let bytes = std::mem::take(&mut self.stdin);
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
        child
    }

    /// Starts the binary with stdin left open for the caller (`child.stdin`).
    pub fn spawn_with_open_stdin(mut self) -> std::process::Child {
        self.command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.command.spawn().unwrap()
    }

    pub fn output(self) -> Outcome {
        Outcome::from(self.spawn().wait_with_output().unwrap())
    }
}

/// A running agent-runner that is SIGKILLed if the test ends (or panics) first, so a
/// failing test leaves no process behind (its container then goes with it).
pub struct Running(Option<std::process::Child>);

impl Running {
    pub fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, |c| c.id())
    }

    pub fn child(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("still running")
    }

    /// Waits for the exit and collects the output.
    pub fn finish(mut self) -> Outcome {
        Outcome::from(
            self.0
                .take()
                .expect("still running")
                .wait_with_output()
                .unwrap(),
        )
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What the binary did.
#[derive(Debug)]
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Outcome {
    fn from(o: Output) -> Self {
        Outcome {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
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
