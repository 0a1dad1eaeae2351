//! What to run: a program, its arguments, extra environment, working directory and
//! the bytes for its stdin. Secrets travel in the environment, never in arguments, so
//! `display` can show a command line in messages safely.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A program with its arguments, extra environment, working directory and stdin.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub(super) program: String,
    pub(super) args: Vec<String>,
    /// Added to the child's environment. Secrets travel here, never in `args`.
    pub(super) env: Vec<(String, String)>,
    /// Taken out of the child's environment.
    pub(super) env_removed: Vec<String>,
    pub(super) cwd: Option<PathBuf>,
    pub(super) stdin: Vec<u8>,
    /// The child's stdin after `stdin`'s bytes: an open file, read from where it
    /// stands (streamed, never whole in memory).
    pub(super) stdin_file: Option<Arc<File>>,
    /// Where the child's stderr goes instead of a pipe (appended to).
    pub(super) stderr_file: Option<PathBuf>,
    /// SIGTERM the child when the spawning thread ends (`die_with_parent`).
    pub(super) parent_death_signal: bool,
    /// What the child reads at `INPUT_FILE` (`input_file`).
    pub(super) input_file: Option<Arc<[u8]>>,
}

/// Where a child reads the bytes given to `Invocation::input_file`.
pub const INPUT_FILE: &str = "/dev/fd/3";

impl Invocation {
    pub fn new(program: &str) -> Self {
        Invocation {
            program: program.to_string(),
            args: Vec::new(),
            env: Vec::new(),
            env_removed: Vec::new(),
            cwd: None,
            stdin: Vec::new(),
            stdin_file: None,
            stderr_file: None,
            parent_death_signal: false,
            input_file: None,
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

    /// Leaves `name` out of the environment the child inherits.
    pub fn env_remove(mut self, name: &str) -> Self {
        self.env_removed.push(name.to_string());
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

    /// The child reads `file` as its stdin, from the file's current offset, after
    /// the bytes of `stdin` if any: a large input streams without passing through
    /// memory.
    pub fn stdin_file(mut self, file: File) -> Self {
        self.stdin_file = Some(Arc::new(file));
        self
    }

    /// `stdin_file` of a file shared with its owner (`Arc`).
    pub fn stdin_shared(mut self, file: Arc<File>) -> Self {
        self.stdin_file = Some(file);
        self
    }

    /// Sends the child's stderr straight to `path` (created, or appended to), so it
    /// keeps a place to write even if this process dies first.
    pub fn stderr_to(mut self, path: &Path) -> Self {
        self.stderr_file = Some(path.to_path_buf());
        self
    }

    /// Has the kernel send the child SIGTERM when the thread that spawns it ends
    /// (`PR_SET_PDEATHSIG`), which includes this process being killed; a child whose
    /// parent is already gone when it starts exits at once. Linux only. The signal
    /// follows the spawning *thread*, so spawn from a thread that outlives the child
    /// (`run` does: it waits for the child on the calling thread).
    pub fn die_with_parent(mut self) -> Self {
        self.parent_death_signal = true;
        self
    }

    /// Gives the child `bytes` to read at `INPUT_FILE`, for an option that takes a
    /// file's path (docker's `--security-opt seccomp=`): an anonymous file in memory,
    /// so nothing is written to disk and nothing is left to remove.
    pub fn input_file(mut self, bytes: impl Into<Arc<[u8]>>) -> Self {
        self.input_file = Some(bytes.into());
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
