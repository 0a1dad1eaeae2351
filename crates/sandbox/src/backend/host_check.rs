//! `hosts check` and `hosts prepare` (SPEC §22), below the CLI: each host's row
//! asked of its engine, all at once (`engines.rs`). A Docker daemon's
//! (`docker_engine.rs`): whether it answers within `host::HEALTH`, has the worker
//! image, the tools volume and the runtime asked for, and whether a bind mount of
//! the workspace's clones is possible there (else the copy transport is needed);
//! prepared, the image loaded and the tools volume filled where missing. A
//! cluster's (`kubernetes/entry.rs`): what its backend needs there; prepared, the
//! seccomp profile on its nodes. The CLI (`cli/hosts.rs`) resolves the hosts and
//! prints.

use std::path::Path;
use std::time::Duration;

use super::host::{HostSpec, Target};
use agent_runner_core::interrupt::Interrupt;

/// What `hosts check` asks of every host.
pub struct Ask<'a> {
    /// The worker image.
    pub image: &'a str,
    /// A directory of the workspace, for the locality column.
    pub probe_dir: Option<&'a Path>,
    /// `--runtime`, for the runtime's.
    pub runtime: Option<&'a str>,
}

/// What `hosts prepare` is asked to do on every host.
pub struct Prepare<'a> {
    /// The worker image.
    pub image: &'a str,
    /// Only the image, not the tools.
    pub image_only: bool,
    /// This program, to run `tools install` aimed at a host.
    pub this_binary: &'a Path,
    pub interrupt: Interrupt,
}

/// Why a host could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The daemon does not answer (`host::Target::health`).
    #[error("{target}: {why}")]
    Down { target: Box<Target>, why: String },
    /// A step (the image's load, the tools' copy or fill) failed.
    #[error("{what} failed: {detail}")]
    Step { what: String, detail: String },
    /// A step's program could not be run at all.
    #[error("{what}: {source}")]
    Run {
        what: String,
        source: agent_runner_core::Error,
    },
}

/// Why a host's row has no version (`hosts check` prints it below the table as
/// `host NAME: …`); kept apart from the version so a row without one is DOWN.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unanswered {
    /// The row before its engine's check, which replaces it.
    #[error("")]
    NotAsked,
    /// The thread that asked panicked: there is no target's answer to name.
    #[error("its check panicked")]
    Panicked,
    /// A place made by hand, of no engine listed in `ENGINES`.
    #[error("{0}: no engine of this build runs it")]
    NoEngine(Target),
    /// The engine gave no answer in time.
    #[error("{target}: no answer within {} s", .within.as_secs())]
    Silent { target: Target, within: Duration },
    /// The engine answered that the host cannot be used, in its own words (a
    /// daemon's last lines of stderr, a cluster's problems) or the asking failed.
    #[error("{target}: {why}")]
    Refused { target: Target, why: String },
}

/// One host's row of `hosts check`.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: String,
    /// Its daemon's version, or why it did not answer.
    pub version: Result<String, Unanswered>,
    /// The worker image is there; None: not asked.
    pub image: Option<bool>,
    /// The tools volume is there; None: not asked.
    pub tools: Option<bool>,
    /// `bind`, `copy needed`, or `-` (not asked).
    pub locality: &'static str,
    /// The runtimes its daemon knows (SPEC §28); None: not asked or no answer.
    pub runtimes: Option<Vec<String>>,
    /// `--runtime` is among them.
    pub runtime_known: Option<bool>,
}

impl Row {
    /// `host`'s row before anything is asked.
    pub(crate) fn unasked(host: &HostSpec) -> Row {
        Row {
            name: host.name.clone(),
            version: Err(Unanswered::NotAsked),
            image: None,
            tools: None,
            locality: "-",
            runtimes: None,
            runtime_known: None,
        }
    }

    /// The daemon answers and has the image. A missing tools volume is shown, not
    /// counted: an image with its own agent needs none (and a run fills it).
    pub fn healthy(&self) -> bool {
        self.version.is_ok() && self.image == Some(true) && self.runtime_known != Some(false)
    }
}

/// The rows of `hosts`, checked at once.
pub fn check_all(
    hosts: &[HostSpec],
    image: &str,
    probe_dir: Option<&Path>,
    runtime: Option<&str>,
) -> Vec<Row> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .iter()
            .map(|host| scope.spawn(move || check(host, image, probe_dir, runtime)))
            .collect();
        handles
            .into_iter()
            .zip(hosts)
            .map(|(h, host)| {
                h.join().unwrap_or(Row {
                    version: Err(Unanswered::Panicked),
                    ..Row::unasked(host)
                })
            })
            .collect()
    })
}

/// One host's row: `probe_dir` (a directory of the workspace) for the locality
/// column, `runtime` for the runtime's.
pub fn check(host: &HostSpec, image: &str, probe_dir: Option<&Path>, runtime: Option<&str>) -> Row {
    let ask = Ask {
        image,
        probe_dir,
        runtime,
    };
    host.check_row(&ask, Row::unasked(host))
}

/// Makes `host` ready for sandboxes of `image` where its engine can (a Docker
/// daemon: the image loaded, the tools volume filled where missing); what it did.
pub fn prepare(
    host: &HostSpec,
    image: &str,
    image_only: bool,
    this_binary: &Path,
    interrupt: Interrupt,
) -> Result<String, PrepareError> {
    let ask = Prepare {
        image,
        image_only,
        this_binary,
        interrupt,
    };
    host.prepare_with(&ask)
}
