//! The envelope around every command agent-runner runs in the container: one small
//! POSIX shell script that takes git snapshots *inside* the container and stops what
//! a run left behind, within the same `docker exec` as the command itself.
//!
//! Why inside: a host-side `git` on the worker-written repo would read the worker's
//! `.git/config` (fsmonitor, filters, `gitdir:` files) and run its code on the host
//! (SPEC §9). In the container the worker already has full power, so git there can
//! only mislead the note, not escape. Why in the same exec: each `docker exec` costs
//! ~60 ms, a snapshot a few ms.
//!
//! Worker run, in two execs: snapshot before → stop leftovers (`before`); then, once
//! agent-runner has checked the agent's files (`agent_files.rs`: git may run what
//! the worker left, so it must not come between that check and the agent), the
//! command (stdin: the prompt) → stop leftovers → snapshot after (+ `git diff
//! --numstat` against the HEAD before when tracked files changed, + the line counts
//! of untracked files when there are some).
//! Test run: the command (stdin empty) → stop leftovers; where nothing runs in the
//! sandbox between it and the next worker run (the copy transport), also the
//! snapshot before that run → stop what git left (`test_then_before`), so that run
//! needs no exec of its own before the check.
//! Stop (after a timeout or interrupt, as its own exec): stop leftovers (the
//! interrupted command among them) → snapshot after, for worker runs.
//!
//! The script reports in records on stdout: `\x1e<nonce> <name>\n<body>\x1e<nonce>
//! end\n`. The nonce is random per exec and reaches the script as the first line of
//! its stdin (not argv or env, which any process in the container can read), so the
//! command's own output cannot end or fake a record by accident or by guessing;
//! `EnvelopeReader` takes the records out of the stream before it is logged. The
//! worker could still forge what git reports (it can replace git itself); the note
//! says that snapshots are taken in the container.
//!
//! What must reach the container but not through an argv (every local user of the
//! host can read any process's `/proc/<pid>/cmdline`, the container's included): an
//! agent's settings with a credential in them (a base URL with a password), the
//! test command. The envelope writes such a `PrivateFile` into `PRIVATE_DIR`, a
//! tmpfs of the container only the run's user can enter, before the command: its
//! contents come in the environment, by name (the value in the docker client's
//! environment, which only that user and root can read), written by a here-document
//! (never an argument), and leave the environment before the command starts.

use memchr::memmem::Finder;
use std::collections::BTreeMap;

use super::git::{self, DiffStat, Snapshot};
use agent_runner_core::process::StreamFilter;
use agent_runner_core::secret::Redactor;

/// Where the repository is mounted in the container.
use super::PROJECT_DIR;

/// Longest record body kept; the rest is counted, not stored.
const MAX_RECORD: usize = 1 << 20;

/// The script. Arguments: `before <keep-alive pid>`, `worker <keep-alive pid> <head
/// before> <command...>`, `test|test-before <keep-alive pid> <command...>` or `stop
/// <keep-alive pid> [snapshot <head before>]`.
const SCRIPT: &str = include_str!("envelope.sh");

/// The container's tmpfs for `PrivateFile`s (mounted by `container::run_args`).
pub(crate) const PRIVATE_DIR: &str = "/run/agent-runner/private";

/// A file the envelope writes into `PRIVATE_DIR` before the command; see the module
/// documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PrivateFile {
    /// Its name in `PRIVATE_DIR`.
    pub name: &'static str,
    /// Where under the user's HOME a link to it goes, if anywhere.
    pub link: Option<String>,
    pub contents: String,
}

impl PrivateFile {
    /// Its path in the container.
    pub fn path(&self) -> String {
        format!("{PRIVATE_DIR}/{}", self.name)
    }

    /// The variables that carry it, to be passed by name.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("AGENT_RUNNER_FILE_NAME", self.name.to_string()),
            ("AGENT_RUNNER_FILE", self.contents.clone()),
        ];
        if let Some(link) = &self.link {
            env.push(("AGENT_RUNNER_FILE_LINK", link.clone()));
        }
        env
    }
}

/// What the envelope wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Worker,
    Test,
}

/// One exec's envelope: its nonce, command line and stdin.
#[derive(Debug, Clone)]
pub(crate) struct Envelope {
    nonce: String,
}

impl Default for Envelope {
    fn default() -> Self {
        Self::new()
    }
}

impl Envelope {
    pub(crate) fn new() -> Self {
        Envelope {
            nonce: uuid::Uuid::new_v4().simple().to_string(),
        }
    }

    /// What follows `docker exec [options] <container>` to take the snapshot before
    /// a worker run (and stop what that left).
    pub(crate) fn before(shell: &str, keep_pid: &str) -> Vec<String> {
        script_args(shell, "before", keep_pid)
    }

    /// What follows `docker exec [options] <container>` to run the worker's
    /// `command`, then take the snapshot after it (diffed against `head_before`).
    /// `head_before` None: the snapshot before is taken first, in the same exec
    /// (reported as `git_before` and `stopped_before`).
    pub(crate) fn worker(
        shell: &str,
        keep_pid: &str,
        head_before: Option<&str>,
        command: &[String],
    ) -> Vec<String> {
        let mode = match head_before {
            Some(_) => "worker",
            None => "before-worker",
        };
        let mut args = script_args(shell, mode, keep_pid);
        args.push(head_before.unwrap_or_default().to_string());
        args.extend(command.iter().cloned());
        args
    }

    /// What follows `docker exec [options] <container>` to run a test `command`.
    pub(crate) fn test(shell: &str, keep_pid: &str, command: &[String]) -> Vec<String> {
        let mut args = script_args(shell, "test", keep_pid);
        args.extend(command.iter().cloned());
        args
    }

    /// `test`, then the snapshot before the next worker run and a stop of what that
    /// left (reported as `stopped_before`).
    pub(crate) fn test_then_before(shell: &str, keep_pid: &str, command: &[String]) -> Vec<String> {
        let mut args = script_args(shell, "test-before", keep_pid);
        args.extend(command.iter().cloned());
        args
    }

    /// What follows `docker exec -i <container>` to stop leftovers; with
    /// `snapshot_after`, also the snapshot after a worker run (diffed against
    /// `head_before`).
    pub(crate) fn stop(shell: &str, keep_pid: &str, snapshot_after: Option<&str>) -> Vec<String> {
        let mut args = script_args(shell, "stop", keep_pid);
        if let Some(head) = snapshot_after {
            args.extend(["snapshot".to_string(), head.to_string()]);
        }
        args
    }

    /// The exec's stdin: the nonce line, then `rest` (the worker's prompt).
    pub(crate) fn stdin(&self, rest: &[u8]) -> Vec<u8> {
        let mut bytes = format!("{}\n", self.nonce).into_bytes();
        bytes.extend_from_slice(rest);
        bytes
    }

    /// A filter for the exec's stdout that takes the records out.
    pub(crate) fn reader(&self) -> EnvelopeReader {
        EnvelopeReader {
            marker: Finder::new(format!("\x1e{} ", self.nonce).as_bytes()).into_owned(),
            end: Finder::new(format!("\x1e{} end\n", self.nonce).as_bytes()).into_owned(),
            buf: Vec::new(),
            state: State::Output,
            records: BTreeMap::new(),
            on_agent: None,
        }
    }
}

/// The shell runs by its path (`ContainerSpec::shell`: the tools volume's, else the
/// image's, pinned with the agent), never one found on PATH.
fn script_args(shell: &str, mode: &str, keep_pid: &str) -> Vec<String> {
    vec![
        shell.into(),
        "-c".into(),
        SCRIPT
            .replace("__PROJECT__", PROJECT_DIR)
            .replace("__PRIVATE__", PRIVATE_DIR)
            .replace("__HELPER__", crate::backend::tools::HELPER),
        "agent-runner-envelope".into(),
        mode.into(),
        keep_pid.into(),
    ]
}

enum State {
    /// The command's output: passed through.
    Output,
    /// After a marker, before its newline: the record's name.
    Name,
    /// Inside a record.
    Body { name: String, body: Vec<u8> },
}

/// Takes envelope records out of a stream; see the module documentation.
pub(crate) struct EnvelopeReader {
    /// Every byte the worker prints passes these searches (memchr's SIMD search).
    marker: Finder<'static>,
    end: Finder<'static>,
    /// Bytes not yet decided on.
    buf: Vec<u8>,
    state: State,
    records: BTreeMap<String, Record>,
    /// Told when the envelope is about to start the agent (its `agent` record):
    /// the agent's check starts then (`agent_files::Check`).
    on_agent: Option<std::sync::mpsc::Sender<()>>,
}

/// One record's body, and whether it was complete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    pub(crate) body: Vec<u8>,
    /// False when the stream ended inside it (the script was stopped).
    pub(crate) complete: bool,
}

impl StreamFilter for EnvelopeReader {
    fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            match &mut self.state {
                State::Output => match self.marker.find(&self.buf) {
                    Some(at) => {
                        out.extend_from_slice(&self.buf[..at]);
                        self.buf.drain(..at + self.marker.needle().len());
                        self.state = State::Name;
                    }
                    None => {
                        let keep = partial_suffix(&self.buf, self.marker.needle());
                        out.extend(self.buf.drain(..self.buf.len() - keep));
                        return out;
                    }
                },
                State::Name => match memchr::memchr(b'\n', &self.buf) {
                    Some(at) => {
                        let name = String::from_utf8_lossy(&self.buf[..at]).into_owned();
                        self.buf.drain(..=at);
                        self.state = State::Body {
                            name,
                            body: Vec::new(),
                        };
                    }
                    None if self.buf.len() > 64 => {
                        // Not one of ours after all: give it back as output.
                        out.extend_from_slice(self.marker.needle());
                        self.state = State::Output;
                    }
                    None => return out,
                },
                State::Body { name, body } => match self.end.find(&self.buf) {
                    Some(at) => {
                        append_bounded(body, &self.buf[..at]);
                        self.buf.drain(..at + self.end.needle().len());
                        let record = Record {
                            body: std::mem::take(body),
                            complete: true,
                        };
                        if name == "agent"
                            && let Some(on_agent) = self.on_agent.take()
                        {
                            let _ = on_agent.send(());
                        }
                        self.records.insert(std::mem::take(name), record);
                        self.state = State::Output;
                    }
                    None => {
                        let keep = partial_suffix(&self.buf, self.end.needle());
                        let take = self.buf.len() - keep;
                        append_bounded(body, &self.buf[..take]);
                        self.buf.drain(..take);
                        return out;
                    }
                },
            }
        }
    }

    fn finish(&mut self) -> Vec<u8> {
        match std::mem::replace(&mut self.state, State::Output) {
            State::Output => std::mem::take(&mut self.buf),
            State::Name => Vec::new(),
            State::Body { name, mut body } => {
                append_bounded(&mut body, &self.buf);
                self.buf.clear();
                self.records.insert(
                    name,
                    Record {
                        body,
                        complete: false,
                    },
                );
                Vec::new()
            }
        }
    }
}

impl EnvelopeReader {
    /// Tells `on_agent` when the envelope starts the agent (see the field).
    pub(crate) fn on_agent(mut self, on_agent: std::sync::mpsc::Sender<()>) -> Self {
        self.on_agent = Some(on_agent);
        self
    }

    /// What the records said, with `redactor`'s secrets masked first: the records
    /// hold file names the worker chose, which are cut, escaped and quoted later.
    pub(crate) fn report(&self, redactor: &Redactor) -> Report {
        let text = |name: &str| {
            self.records
                .get(name)
                .filter(|r| r.complete)
                .map(|r| redactor.redact(&String::from_utf8_lossy(&r.body)))
        };
        Report {
            started: self.records.contains_key("started"),
            stderr: String::new(),
            missing_command: text("missing").map(|t| t.trim().to_string()),
            // Cut short (`no-before`: git blocked, stopped): not a snapshot.
            git_before: text("git-before")
                .filter(|_| !self.records.contains_key("no-before"))
                .map(|t| Snapshot::parse(&t)),
            git_after: text("git-after").map(|t| Snapshot::parse(&t)),
            diff: match (text("numstat"), text("untracked")) {
                (None, None) => None,
                (numstat, untracked) => Some(
                    git::parse_numstat(&numstat.unwrap_or_default())
                        .into_iter()
                        .chain(git::parse_untracked(&untracked.unwrap_or_default()))
                        .collect(),
                ),
            },
            stopped: text("stopped").and_then(|t| Leftovers::parse(&t)),
            stopped_before: text("stopped-before").and_then(|t| Leftovers::parse(&t)),
        }
    }
}

/// What one envelope reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Report {
    /// The envelope ran (its first record arrived): a failure without it is docker's.
    pub(crate) started: bool,
    /// The exec's stderr, when the report is of a stop exec.
    pub(crate) stderr: String,
    /// The worker's program was not found in the image.
    pub(crate) missing_command: Option<String>,
    pub(crate) git_before: Option<Snapshot>,
    pub(crate) git_after: Option<Snapshot>,
    pub(crate) diff: Option<Vec<DiffStat>>,
    pub(crate) stopped: Option<Leftovers>,
    /// What the snapshot after a test run left (`Envelope::test_then_before`).
    pub(crate) stopped_before: Option<Leftovers>,
}

/// Processes a run left behind, stopped after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// Alive when the run ended (each got SIGTERM).
    pub found: u32,
    /// Still alive after SIGTERM, the grace period and SIGKILL.
    pub left: u32,
}

impl Leftovers {
    /// A `stopped` record's "<found> <left>".
    fn parse(text: &str) -> Option<Leftovers> {
        let mut numbers = text.split_whitespace().map(str::parse::<u32>);
        match (numbers.next(), numbers.next()) {
            (Some(Ok(found)), Some(Ok(left))) => Some(Leftovers { found, left }),
            _ => None,
        }
    }
}

/// Length of the longest proper suffix of `bytes` that starts `pattern`.
fn partial_suffix(bytes: &[u8], pattern: &[u8]) -> usize {
    (1..pattern.len().min(bytes.len() + 1))
        .rev()
        .find(|&k| bytes.ends_with(&pattern[..k]))
        .unwrap_or(0)
}

fn append_bounded(body: &mut Vec<u8>, bytes: &[u8]) {
    let room = MAX_RECORD.saturating_sub(body.len());
    body.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    fn records(envelope: &Envelope, chunks: &[&[u8]]) -> (Vec<u8>, Report) {
        let mut reader = envelope.reader();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(reader.push(chunk));
        }
        out.extend(reader.finish());
        (out, reader.report(&Redactor::default()))
    }

    fn stream(nonce: &str, output: &str) -> Vec<u8> {
        format!(
            "\x1e{nonce} started\n\x1e{nonce} end\n\x1e{nonce} git-before\n# branch.oid abc\n# branch.head main\nexit 0\n\x1e{nonce} end\n\
             {output}\x1e{nonce} stopped\n2 0\n\x1e{nonce} end\n\
             \x1e{nonce} git-after\n# branch.oid abc\n1 .M N... 100644 100644 100644 a b f.txt\n? new.txt\nexit 0\n\x1e{nonce} end\n\
             \x1e{nonce} numstat\n3\t1\tf.txt\n\x1e{nonce} end\n\
             \x1e{nonce} untracked\n2 ./new.txt\n\x1e{nonce} end\n"
        )
        .into_bytes()
    }

    /// The script's `private_file` alone (the whole script would stop this
    /// machine's processes), writing into `dir`.
    fn private_file_function(dir: &std::path::Path) -> String {
        let start = SCRIPT.find("private_file() {").unwrap();
        let end = start + SCRIPT[start..].find("\n}\n").unwrap() + 3;
        SCRIPT[start..end].replace("__PRIVATE__", &dir.display().to_string())
    }

    #[test]
    fn a_private_file_is_written_exactly_and_never_through_a_planted_name() {
        let dir = agent_runner_core::fs::testing::scratch("envelope-private");
        let function = private_file_function(&dir);
        // What a here-document or printf could mangle: `$`, backslashes, quotes,
        // a line that is the here-document's end word.
        let contents = "openai_base_url = \"http://u:p@h/v1?k=$HOME\\n\"\nEOF\n'x' `y`";
        let shells: Vec<&str> = ["/bin/sh", "/bin/busybox"]
            .into_iter()
            .filter(|shell| std::path::Path::new(shell).exists())
            .collect();
        assert!(!shells.is_empty());
        // Each shell's printf, and cat from a here-document where printf is no
        // builtin (a function here, which `command -V` does not call a builtin).
        for (shell, without_printf) in shells.iter().flat_map(|s| [(*s, false), (*s, true)]) {
            let mut command = std::process::Command::new(shell);
            if shell.ends_with("busybox") {
                command.arg("sh");
            }
            let shadow = if without_printf {
                "printf() { echo \"printf called: $*\" >&2; return 1; }\n"
            } else {
                ""
            };
            let out = command
                .arg("-c")
                .arg(format!(
                    "{function}{shadow}private_file; echo \"rc=$? $(env | grep -c AGENT_RUNNER_FILE)\""
                ))
                .env("AGENT_RUNNER_FILE_NAME", "settings")
                .env("AGENT_RUNNER_FILE", contents)
                .output()
                .unwrap();
            let what = format!("{shell} (printf shadowed: {without_printf})");
            assert_eq!(String::from_utf8_lossy(&out.stdout), "rc=0 0\n", "{what}");
            assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{what}");
            let path = dir.join("settings");
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                format!("{contents}\n"),
                "{what}"
            );
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{what}");
            std::fs::remove_file(&path).unwrap();
        }
        // A link or a FIFO where the file goes: refused, nothing written through.
        let outside = dir.join("outside");
        std::os::unix::fs::symlink(&outside, dir.join("settings")).unwrap();
        let planted = move |shell: &str| {
            std::process::Command::new(shell)
                .arg("-c")
                .arg(format!("{function}private_file; echo rc=$?"))
                .env("AGENT_RUNNER_FILE_NAME", "settings")
                .env("AGENT_RUNNER_FILE", "secret")
                .output()
                .unwrap()
        };
        assert_eq!(
            String::from_utf8_lossy(&planted("/bin/sh").stdout),
            "rc=1\n"
        );
        assert!(!outside.exists());
        std::fs::remove_file(dir.join("settings")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("settings").display().to_string()).unwrap();
        // SAFETY: a valid path string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let out = agent_runner_core::fs::testing::within(move || planted("/bin/sh"));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "rc=1\n");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn records_are_taken_out_and_read() {
        let envelope = Envelope::new();
        let bytes = stream(&envelope.nonce, "codex output\nno newline at the end");
        let (out, report) = records(&envelope, &[&bytes]);
        assert_eq!(out, b"codex output\nno newline at the end");
        assert!(report.started);
        assert_eq!(report.stopped, Some(Leftovers { found: 2, left: 0 }));
        assert_eq!(
            report.git_before.as_ref().and_then(Snapshot::head),
            Some("abc")
        );
        let Some(Snapshot::State(after)) = report.git_after else {
            panic!("{report:?}")
        };
        assert_eq!(after.status, [" M f.txt", "?? new.txt"]);
        assert_eq!(
            report.diff,
            Some(vec![
                DiffStat {
                    added: Some(3),
                    deleted: Some(1),
                    path: "f.txt".into()
                },
                DiffStat {
                    added: Some(2),
                    deleted: Some(0),
                    path: "new.txt".into()
                }
            ])
        );
    }

    #[test]
    fn another_nonce_is_just_output() {
        let envelope = Envelope::new();
        let forged = "\x1edeadbeef started\n\x1edeadbeef end\n";
        let (out, report) = records(&envelope, &[forged.as_bytes()]);
        assert_eq!(out, forged.as_bytes());
        assert_eq!(report, Report::default());
    }

    #[test]
    fn an_unterminated_record_is_not_believed() {
        let envelope = Envelope::new();
        let text = format!("out\x1e{} stopped\n3", envelope.nonce);
        let (out, report) = records(&envelope, &[text.as_bytes()]);
        assert_eq!(out, b"out");
        assert_eq!(report.stopped, None);
    }

    quickcheck! {
        fn any_chunking_gives_the_same_result(output: Vec<u8>, cuts: Vec<u8>) -> bool {
            let envelope = Envelope::new();
            // Output without the record separator, so it cannot contain a marker.
            let output: Vec<u8> = output.into_iter().filter(|&b| b != 0x1e).collect();
            let mut bytes = output.clone();
            bytes.extend(stream(&envelope.nonce, ""));
            let whole = records(&envelope, &[&bytes]);
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut rest: &[u8] = &bytes;
            for cut in cuts {
                let at = (cut as usize).min(rest.len());
                let (a, b) = rest.split_at(at);
                chunks.push(a);
                rest = b;
            }
            chunks.push(rest);
            let chunked = records(&envelope, &chunks);
            whole == chunked && whole.0 == output
        }
    }
}
