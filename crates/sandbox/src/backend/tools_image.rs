//! `agent-runner tools image` (SPEC §25): the tools volume's content as an image,
//! for an engine that mounts no volume of a daemon's (a cluster's Pods copy it
//! from this image, before the worker starts, into a read-only `emptyDir`,
//! `kubernetes/pod.rs`). The user pushes it where the cluster pulls, or loads it
//! on the nodes.
//!
//! The volume is had as a task has it (`tools::ensure`), its tree written as one
//! tar stream by the tools' own shell in a container of the empty carrier image
//! (no network, the volume read-only, labelled for the sweeps), into a file of a
//! private directory here, then `docker import`ed: an image of that tree alone,
//! nothing else in it. Without the agents it holds the shell and the helper only
//! (~3 MB instead of ~1 GB), for images that bring their own agent.

use super::daemon;
use std::path::Path;
use std::time::Duration;

use super::docker_cli::{self, last_lines};
use super::file_sink::FileSink;
use super::tools::{self, CARRIER_IMAGE, SHELL, TOOLS_DIR};
use super::{BackendError, Output};
use agent_runner_core::interrupt::Interrupt;

/// The longest the stream or the import may take (a gigabyte on a slow disk).
const TIMEOUT: Duration = Duration::from_secs(1200);

/// What `build` made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    pub image: String,
    /// Bytes of the tree.
    pub bytes: u64,
}

/// Builds the image `tag` (None: `tools::image_name()`) from this host's tools
/// volume, the agents left out unless `with_agents`.
pub fn build(
    tag: Option<&str>,
    with_agents: bool,
    interrupt: Interrupt,
) -> Result<Built, BackendError> {
    let image = tag.map_or_else(tools::image_name, str::to_string);
    let filled = tools::ensure(interrupt)?;
    tools::carrier_image(interrupt)?;
    let scratch = std::env::temp_dir().join(format!(
        "agent-runner-tools-image-{}",
        uuid::Uuid::new_v4().simple()
    ));
    private_dir(&scratch).map_err(|e| BackendError::Io(format!("{}: {e}", scratch.display())))?;
    let built = stream_and_import(&filled.volume, &image, with_agents, &scratch, interrupt);
    let _ = std::fs::remove_dir_all(&scratch);
    built.map(|bytes| Built { image, bytes })
}

fn stream_and_import(
    volume: &str,
    image: &str,
    with_agents: bool,
    scratch: &Path,
    interrupt: Interrupt,
) -> Result<u64, BackendError> {
    let top = TOOLS_DIR.trim_start_matches('/');
    let parts = match with_agents {
        true => vec![top.to_string()],
        false => ["bin", "ready"]
            .iter()
            .map(|part| format!("{top}/{part}"))
            .collect(),
    };
    let mut args: Vec<String> = ["run", "--rm", "-i", "--network", "none"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    for (key, value) in tools::fill_labels() {
        args.extend(["--label".into(), format!("{key}={value}")]);
    }
    args.extend([
        "-v".into(),
        format!("{volume}:{TOOLS_DIR}:ro"),
        "--entrypoint".into(),
        SHELL.into(),
        CARRIER_IMAGE.into(),
        "-c".into(),
        "cd / && exec tar -c -f - \"$@\"".into(),
        "tar".into(),
    ]);
    args.extend(parts);
    let mut sink = FileSink::create(scratch, "tools.tar", u64::MAX)
        .map_err(|e| BackendError::Io(format!("the tools image's stream: {e}")))?;
    let invocation = docker_cli::command().args(args.iter().map(String::as_str));
    let out = daemon::guarded_streaming(&invocation, TIMEOUT, interrupt, &mut sink)?;
    let bytes = sink.written();
    sink.done()
        .map_err(|e| BackendError::Io(format!("the tools image's stream: {e}")))?;
    check(&out, "docker run (the tools volume as one tar stream)")?;
    let file = scratch.join("tools.tar").display().to_string();
    let change = format!("LABEL {}=image", tools::LABEL);
    let out = daemon::call(
        &["import", "--change", change.as_str(), file.as_str(), image],
        TIMEOUT,
        interrupt,
    )?;
    check(&out, "docker import")?;
    // Each import is a new image (its creation time differs): the one the tag
    // named before would stay behind untagged, one per build. The untagged ones
    // with the tools' label go; a tagged one or one a container uses stays.
    let label = format!("label={}=image", tools::LABEL);
    let _ = daemon::call(
        &["image", "prune", "--force", "--filter", label.as_str()],
        TIMEOUT,
        interrupt,
    );
    Ok(bytes)
}

/// A directory only this user can enter.
fn private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(path)
}

fn check(out: &Output, what: &str) -> Result<(), BackendError> {
    match out.ok {
        true => Ok(()),
        false => Err(BackendError::Failed {
            command: what.to_string(),
            detail: last_lines(&out.stderr, 3),
        }),
    }
}
