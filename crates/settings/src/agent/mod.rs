//! The coding-agent CLIs a worker can be (SPEC §18, `runner.worker.kind`), and that
//! the `codex-cli` Meta provider runs.
//!
//! `kind` is the one interface: a CLI's real flags, its login rule (`login`), the
//! hosts it needs, how it resumes a session (`resume_command`, `session_files`, the
//! record's `session_id`: the hooks SPEC §19's resume uses), and a reader of its
//! event stream into the shared run record (`record`), which `outcome` judges the
//! same way for every kind and `Transcript::usage_for` turns into SPEC §15's usage
//! (tokens and any cost the agent reported). Each kind is one
//! file with its recorded real output in testdata/: `codex` (codex-cli), `claude`
//! (claude-code-cli). A new kind is a new file and a line in `KINDS`.
//!
//! This module sits below `task` (which resolves a kind's login and default allow
//! list when it reads a task) and `worker` (which runs a kind in the sandbox), and
//! uses neither.

pub mod claude;
pub mod codex;
pub mod kind;
pub mod login;
pub mod mcp;
pub mod outcome;
pub mod record;

pub use kind::{EventStream, HostsSpec, Kind, Need, Pinned, RunSpec, SettingsFile};
pub use login::{Login, LoginRule};
pub use mcp::{McpServer, McpTransport, McpValue};
pub use outcome::{Exit, RunOutcome, classify};
pub use record::{CommandRecord, FileChange, McpCall, Terminal, Transcript, Usage};

/// Every kind, the default first.
pub const KINDS: [&'static dyn Kind; 2] = [&codex::CODEX, &claude::CLAUDE];

/// The default kind (`codex-cli`).
pub fn default_kind() -> &'static dyn Kind {
    KINDS[0]
}

/// The kind named `name` (`runner.worker.kind`).
pub fn by_name(name: &str) -> Option<&'static dyn Kind> {
    KINDS.into_iter().find(|k| k.name() == name)
}

/// The kind of a TaskConfig's `runner.worker.type`.
pub fn by_taskconfig_type(value: &str) -> Option<&'static dyn Kind> {
    KINDS.into_iter().find(|k| k.taskconfig_type() == value)
}

/// The kinds' names, for messages and choices.
pub fn names() -> Vec<&'static str> {
    KINDS.iter().map(|k| k.name()).collect()
}
