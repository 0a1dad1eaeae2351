//! `agent-runner hosts check|prepare` (SPEC §22): the Docker hosts of `--host` or of
//! the workspace's `hosts`, checked or prepared by `backend::host_check`. `check`
//! prints one row per host and fails when a host is unhealthy; `prepare` says per
//! host what it did.

use std::path::{Path, PathBuf};

use crate::error::exit;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_pipeline::Workspace;
use agent_runner_sandbox::backend::host::{HostError, HostSpec, check_pool};
use agent_runner_sandbox::backend::host_check::{self, Row};

use super::{WorkspaceDir, write_stdout};

/// The image a sandbox runs when neither the defaults nor `--image` name one.
const DEFAULT_IMAGE: &str = "agent-runner-sandbox:latest";

/// `--host NAME=URL[:SLOTS]`. The error is clap's message, as `HostSpec` words it.
pub(crate) fn parse_flag(flag: &str) -> Result<HostSpec, HostError> {
    HostSpec::parse_flag(flag)
}

/// `agent-runner hosts …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum HostsCommand {
    /// Per host: the daemon answers within 5 s, the worker image and the tools volume
    /// are there, and a bind mount is possible (else the copy transport is needed).
    /// Exits 1 when a host is unhealthy.
    Check(HostsArgs),
    /// Loads the worker image (`docker save | docker load`, streamed) and fills the
    /// tools volume on each Docker host where they are missing; on a cluster,
    /// installs agent-runner's seccomp profile on every node.
    Prepare(HostsArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct HostsArgs {
    #[command(flatten)]
    workspace: WorkspaceDir,
    /// A host (repeatable; instead of the workspace's `hosts`): NAME=URL[:SLOTS].
    #[arg(long = "host", value_name = "NAME=URL[:SLOTS]", value_parser = parse_flag)]
    hosts: Vec<HostSpec>,
    /// The worker image (default: the workspace's runner.worker.docker_image).
    #[arg(long, value_name = "IMAGE")]
    image: Option<String>,
    /// prepare: the image only, not the tools volume (an image with its own agent
    /// needs none).
    #[arg(long)]
    image_only: bool,
    /// check: the container runtime the tasks name (`runner.sandbox.runtime`); a
    /// host whose daemon does not know it is not ready.
    #[arg(long, value_name = "NAME")]
    runtime: Option<String>,
}

/// Runs the command; returns the exit code.
pub(crate) fn run(command: HostsCommand, interrupt: Interrupt) -> i32 {
    let (args, prepare) = match command {
        HostsCommand::Check(args) => (args, false),
        HostsCommand::Prepare(args) => (args, true),
    };
    let (hosts, image, probe_dir) = match resolve(&args) {
        Ok(resolved) => resolved,
        Err(e) => {
            eprintln!("agent-runner hosts: error: {e}");
            return exit::FAILED;
        }
    };
    if prepare {
        prepare_all(&hosts, &image, args.image_only, interrupt)
    } else {
        check_all(
            &hosts,
            &image,
            probe_dir.as_deref(),
            args.runtime.as_deref(),
        )
    }
}

/// Why there are no hosts to check or prepare.
#[derive(Debug, thiserror::Error)]
enum ResolveError {
    /// The workspace could not be opened: why, in its words (a workspace file that
    /// does not parse is not "no workspace").
    #[error("no --host given and the workspace of {} could not be opened: {reason}", .dir.display())]
    NoWorkspace { dir: PathBuf, reason: String },
    /// The workspace's `hosts` or the `--host` flags refused, in their words.
    #[error(transparent)]
    Hosts(HostError),
    #[error("no hosts: give --host NAME=URL[:SLOTS] or set `hosts` in the workspace's defaults")]
    NoHosts,
}

/// The hosts, the image, and a directory of the workspace for the locality probe.
fn resolve(args: &HostsArgs) -> Result<(Vec<HostSpec>, String, Option<PathBuf>), ResolveError> {
    let opened = super::home().and_then(|home| Ok(Workspace::open(&home, &args.workspace.dir)?));
    let hosts = if args.hosts.is_empty() {
        let ws = opened.as_ref().map_err(|e| ResolveError::NoWorkspace {
            dir: args.workspace.dir.clone(),
            reason: e.to_string(),
        })?;
        ws.defaults.hosts().map_err(ResolveError::Hosts)?
    } else {
        check_pool(&args.hosts, |i| format!("--host #{}", i + 1)).map_err(ResolveError::Hosts)?;
        args.hosts.clone()
    };
    if hosts.is_empty() {
        return Err(ResolveError::NoHosts);
    }
    let ws = opened.ok();
    let image = args
        .image
        .clone()
        .or_else(|| ws.as_ref().and_then(|ws| ws.defaults.worker_image()))
        .unwrap_or_else(|| DEFAULT_IMAGE.into());
    let probe_dir = ws.map(|ws| ws.dir.clone());
    Ok((hosts, image, probe_dir))
}

fn check_all(
    hosts: &[HostSpec],
    image: &str,
    probe_dir: Option<&Path>,
    runtime: Option<&str>,
) -> i32 {
    let rows: Vec<Row> = host_check::check_all(hosts, image, probe_dir, runtime);
    let yes_no = |v: Option<bool>| match v {
        Some(true) => "yes",
        Some(false) => "MISSING",
        None => "-",
    };
    let mut table = format!(
        "{:<16} {:<8} {:<12} {:<8} {:<8} {:<12} {}\n",
        "HOST", "HEALTH", "VERSION", "IMAGE", "TOOLS", "RUNTIMES", "LOCALITY"
    );
    for row in &rows {
        let (health, version) = match &row.version {
            Ok(v) => (if row.healthy() { "ok" } else { "unready" }, v.clone()),
            Err(_) => ("DOWN", "-".into()),
        };
        table.push_str(&format!(
            "{:<16} {:<8} {:<12} {:<8} {:<8} {:<12} {}\n",
            row.name,
            health,
            version,
            yes_no(row.image),
            yes_no(row.tools),
            row.runtimes
                .as_ref()
                .map_or("-".to_string(), |r| r.join(",")),
            row.locality
        ));
    }
    for row in &rows {
        if let (Some(false), Some(runtime)) = (row.runtime_known, runtime) {
            table.push_str(&format!(
                "host {}: {}\n",
                row.name,
                agent_runner_sandbox::backend::runtime::unknown(
                    runtime,
                    row.runtimes.as_deref().unwrap_or_default()
                )
            ));
        }
        if let Err(why) = &row.version {
            table.push_str(&format!("host {}: {why}\n", row.name));
        } else if !row.healthy() || row.tools == Some(false) {
            table.push_str(&format!(
                "host {}: `agent-runner hosts prepare` loads what is MISSING there\n",
                row.name
            ));
        }
    }
    if write_stdout(&table).is_err() {
        return exit::FAILED;
    }
    if rows.iter().all(Row::healthy) {
        exit::COMPLETE
    } else {
        exit::FAILED
    }
}

fn prepare_all(hosts: &[HostSpec], image: &str, image_only: bool, interrupt: Interrupt) -> i32 {
    let exe = match super::this_binary() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("agent-runner hosts prepare: {e}");
            return exit::FAILED;
        }
    };
    let mut failed = false;
    for host in hosts {
        match host_check::prepare(host, image, image_only, &exe, interrupt) {
            Ok(done) => {
                let _ = write_stdout(&format!("host {}: {done}\n", host.name));
            }
            Err(e) => {
                eprintln!("agent-runner hosts prepare: host {}: {e}", host.name);
                failed = true;
            }
        }
        if interrupt.is_set() {
            return exit::INTERRUPTED;
        }
    }
    if failed { exit::FAILED } else { exit::COMPLETE }
}
