//! The one interface every agent kind implements (SPEC §18): a CLI in the sandbox
//! image with a table of its real flags, an auth rule, the hosts it needs, and a
//! reader of its event stream into the shared run record. Everything else (the
//! container, timeouts, quiet between runs, secrets by name, egress, the note)
//! is shared and knows a kind only through this trait.

use std::fmt;

use super::login::{Login, LoginRule};
use super::record::Transcript;

/// What one run of the agent is given (besides the prompt, which goes to stdin).
#[derive(Debug, Clone, Copy)]
pub struct RunSpec<'a> {
    /// `runner.worker.model`.
    pub model: Option<&'a str>,
    /// `runner.worker.extra_args`, after the kind's own flags.
    pub extra_args: &'a [String],
    /// `runner.worker.base_url`: the model API's base URL.
    pub base_url: Option<&'a str>,
    /// The working directory in the container (the repository).
    pub workdir: &'a str,
    /// The agent runs as root in the container.
    pub root: bool,
    /// `runner.worker.mcp_servers` (SPEC §28): in the settings file, never argv.
    pub mcp_servers: &'a [super::mcp::McpServer],
    /// Where the run's settings file is in the container (`SettingsFile`), for a
    /// kind that is told its path on the command line (claude's `--mcp-config`).
    pub settings_path: &'a str,
}

/// A settings file of the agent for what must not be in an argv (a base URL with
/// a password or key in it, MCP servers' credentials): written before each run at
/// `RunSpec::settings_path`, and linked where the agent reads it (`link`, under
/// its HOME) when it is not told the path; never on its command line
/// (`worker::envelope`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsFile {
    pub link: Option<&'static str>,
    /// Its text, without the last line's newline (the envelope adds it).
    pub contents: String,
}

/// What the agent's default allow list is worked out from (SPEC §17).
#[derive(Debug, Clone, Copy)]
pub struct HostsSpec<'a> {
    pub login: &'a Login,
    /// `runner.worker.env`: each name, with its value when it is a literal (not a
    /// secret from the host).
    pub env: &'a [(&'a str, Option<&'a str>)],
    pub extra_args: &'a [String],
    pub base_url: Option<&'a str>,
}

/// A destination the agent needs: a host name, or a URL whose host (and port) is
/// allowed; and why, for `validate` and the note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub destination: String,
    pub why: String,
}

impl Need {
    pub fn new(destination: impl Into<String>, why: impl Into<String>) -> Self {
        Need {
            destination: destination.into(),
            why: why.into(),
        }
    }
}

/// The version of a kind's CLI agent-runner was checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pinned {
    pub version: &'static str,
    /// The variable of sandbox/build.sh that pins it.
    pub build_var: &'static str,
}

/// Reads one run's stdout, line by line, into the run record.
pub trait EventStream {
    /// Takes one stdout line. Anything that is not a known event is counted as raw
    /// text, never an error.
    fn feed(&mut self, line: &[u8], record: &mut Transcript);
}

/// An agent CLI; see the module documentation.
pub trait Kind: Sync {
    /// The `runner.worker.kind` value (`codex-cli`).
    fn name(&self) -> &'static str;
    /// The TaskConfig shape's `runner.worker.type` for it (`docker_codex_cli`).
    fn taskconfig_type(&self) -> &'static str;
    /// The program in the image (`codex`).
    fn program(&self) -> &'static str;
    fn pinned(&self) -> Pinned;
    /// The command line of one run, program first; the prompt goes to stdin.
    fn command(&self, run: &RunSpec) -> Vec<String>;
    /// The command line of a run that continues session `session` (SPEC §19).
    fn resume_command(&self, run: &RunSpec, session: &str) -> Vec<String>;
    /// What must persist in the container's HOME (paths relative to it, `*` as a
    /// wildcard) for `resume_command` to find session `session`.
    fn session_files(&self, session: &str) -> Vec<String>;
    /// Options that make a run answer with its last message, shaped by the JSON
    /// Schema in file `schema`, in file `reply` (paths in the container); None when
    /// the CLI cannot.
    fn answer_args(&self, schema: &str, reply: &str) -> Option<Vec<String>>;
    /// Variables every run gets (by name, as every value: never on a command line).
    fn run_env(&self, run: &RunSpec) -> Vec<(&'static str, String)>;
    /// The settings file a run needs, if any; `command` points the agent at it.
    fn settings_file(&self, run: &RunSpec) -> Option<SettingsFile>;
    /// The configuration it reads outside HOME (absolute paths; there or not): the
    /// image's to bring, so pinned with the agent (`worker::agent_files`), since a
    /// worker that is root in the container could write it to steer a later run.
    fn config_files(&self) -> &'static [&'static str];
    /// An argument of `run.extra_args` that cannot go with the rest of `run` (its
    /// index, and why), checked when the task is read.
    fn refused_arg(&self, _run: &RunSpec) -> Option<(usize, String)> {
        None
    }
    fn login_rule(&self) -> LoginRule;
    /// What a login file holds (`Login::File::modes`), from its JSON.
    fn login_modes(&self, file: &serde_json::Value) -> Vec<&'static str>;
    /// The destinations it needs for its model with this login and settings.
    fn needs(&self, spec: &HostsSpec) -> Vec<Need>;
    /// Hosts it asks for on its own, beside its model (update checks, feature
    /// flags): refusing them fails nothing, so a denial of one is no gap in the
    /// allow list and is never suggested for it.
    fn background_hosts(&self) -> &'static [&'static str] {
        &[]
    }
    /// A reader for one run's event stream.
    fn stream(&self) -> Box<dyn EventStream>;
    /// Whether a line of its stdout is a retry notice, no sign of progress: a run
    /// printing only those is stalled after `idle_timeout_sec` (SPEC §24).
    fn is_retry_notice(&self, _line: &[u8]) -> bool {
        false
    }
}

impl fmt::Debug for dyn Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq for dyn Kind {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

/// Feeds every line of `stdout` to a fresh reader of `kind`: the record of a
/// whole run (recorded samples, tests).
#[cfg(test)]
pub fn read_all(kind: &dyn Kind, stdout: &[u8]) -> Transcript {
    let mut transcript = Transcript::default();
    let mut stream = kind.stream();
    for line in stdout.split(|&b| b == b'\n') {
        stream.feed(line, &mut transcript);
    }
    transcript
}

/// Recorded real runs of a kind (testdata/…/<sample>/: stdout.jsonl, stderr.txt,
/// exit_code), read and judged as a live run is.
#[cfg(test)]
pub mod samples {
    use std::path::Path;

    use super::{Kind, read_all};
    use crate::agent::outcome::{Exit, RunOutcome, classify};
    use crate::agent::record::Transcript;

    /// `path` from the workspace's top (where `testdata/` is).
    pub fn at_top(path: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(path)
    }

    /// Sample `name` under `dir`: its record, outcome and summary; `exit` turns the
    /// recorded exit code into how the run ended.
    pub fn judged(
        kind: &dyn Kind,
        dir: &str,
        name: &str,
        exit: fn(i32) -> Exit,
    ) -> (Transcript, RunOutcome, String) {
        let dir = at_top(dir).join(name);
        let stdout = std::fs::read(dir.join("stdout.jsonl")).unwrap();
        let stderr = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
        let code: i32 = std::fs::read_to_string(dir.join("exit_code"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let transcript = read_all(kind, &stdout);
        let (outcome, summary) = classify(kind.program(), &transcript, exit(code), &stderr);
        (transcript, outcome, summary)
    }

    /// Every sample under `dir` has an expectation, and is judged as it says.
    pub fn all_judged(
        kind: &dyn Kind,
        dir: &str,
        exit: fn(i32) -> Exit,
        expected: &[(&str, RunOutcome, &str)],
    ) {
        let listed = std::fs::read_dir(at_top(dir)).unwrap();
        assert_eq!(
            listed.count(),
            expected.len(),
            "a sample without an expectation"
        );
        for (name, outcome, summary) in expected {
            let (_, got_outcome, got_summary) = judged(kind, dir, name, exit);
            assert_eq!(
                (got_outcome, got_summary.as_str()),
                (*outcome, *summary),
                "sample {name}"
            );
        }
    }
}
