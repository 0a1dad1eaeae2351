//! The Docker engine (`docker.rs`) as the code above reaches it through a target
//! (`engine::Engine`): a `DockerDaemon` (`docker_target.rs`) read from a URL or a
//! context's name (the default engine: no target, or any text no other engine's
//! scheme claims) or from `hosts:`' `docker:`; its backend, health check
//! (`docker version` within 5 s), sweep of a host (`sweep::sweep_host`), and its rows
//! of `hosts check|prepare` (SPEC §22): whether the daemon answers, has the worker
//! image, the tools volume and the runtime asked for, and whether a bind mount of the
//! workspace's clones is possible there (else the copy transport is needed); the
//! image loaded (`docker save | docker load` between the daemons, streamed, nothing
//! written here) and the tools volume filled where they are missing.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::docker_cli::last_lines;
use super::docker_target::DockerDaemon;
use super::engine::{Engine, EntryPart, ImageAnswer, PullError};
use super::host::{HostError, HostSpec};
use super::host_check::{Ask, Prepare, PrepareError, Row, Unanswered};
use super::locality::{Pending, tar_content};
use super::sweep::Rule;
use super::target::{Target, TargetError};
use super::{Backend, Docker, tools};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Invocation, Limits, Stop};

/// Longest a short docker call of a check may take.
const SHORT: Duration = Duration::from_secs(30);
/// Longest an image's copy between daemons may take.
const LOAD: Duration = Duration::from_secs(1800);

/// `hosts[i].docker`: a daemon's URL or a docker context's name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub(crate) struct DockerEntry(String);

impl EntryPart for DockerEntry {
    fn target(&self, at: &str) -> Result<Target, HostError> {
        Target::parse(&self.0).map_err(|e| HostError::field(at, e))
    }
}

/// The Docker engine's entry in `ENGINES` (`backend/mod.rs`).
pub(crate) struct DockerEngine;

/// The Docker engine.
pub(crate) static DOCKER: DockerEngine = DockerEngine;

impl Engine for DockerEngine {
    type Place = DockerDaemon;

    fn key(&self) -> &'static str {
        "docker"
    }

    fn entry_form(&self) -> &'static str {
        "a URL or a docker context"
    }

    fn scheme(&self) -> Option<&'static str> {
        None
    }

    fn parse(&self, text: &str) -> Result<Target, TargetError> {
        DockerDaemon::parse(text)
            .map(Target::new)
            .map_err(|e| TargetError::Engine(Box::new(e)))
    }

    fn open_default(&self) -> Option<Arc<dyn Backend>> {
        Some(Arc::new(Docker::default()))
    }

    fn open(&self, _place: &DockerDaemon) -> Arc<dyn Backend> {
        // The docker CLI reads the target from its environment (`Place::apply`).
        Arc::new(Docker::default())
    }

    fn has_image(
        &self,
        _place: &DockerDaemon,
        target: &Target,
        image: &str,
        deadline: Duration,
        interrupt: Interrupt,
    ) -> ImageAnswer {
        let inspect = ["image", "inspect", "--format", "{{.Id}}", image];
        match target.docker(&inspect, deadline, interrupt) {
            Ok(out) if out.ok => ImageAnswer::Present,
            Ok(out) if super::docker_cli::no_such_image(&out.stderr) => ImageAnswer::Missing,
            _ => ImageAnswer::NoAnswer,
        }
    }

    fn pull(
        &self,
        _place: &DockerDaemon,
        target: &Target,
        image: &str,
        deadline: Duration,
        interrupt: Interrupt,
    ) -> Result<(), PullError> {
        let out = target.docker(&["pull", image], deadline, interrupt)?;
        match out.ok {
            true => Ok(()),
            false => Err(PullError::Refused(out.stderr)),
        }
    }

    fn tells_images(&self) -> bool {
        true
    }

    fn pins_sessions(&self) -> bool {
        true
    }

    fn health(&self, _place: &DockerDaemon, target: &Target) -> Option<String> {
        super::docker_target::health(target)
    }

    fn sweep(&self, _place: &DockerDaemon, target: &Target, rule: Rule) -> Vec<String> {
        super::sweep::sweep_host(target, rule)
    }

    fn check(&self, _place: &DockerDaemon, host: &HostSpec, ask: &Ask<'_>, row: Row) -> Row {
        check(host, ask, row)
    }

    fn prepare(
        &self,
        _place: &DockerDaemon,
        host: &HostSpec,
        ask: &Prepare<'_>,
    ) -> Result<String, PrepareError> {
        prepare(host, ask)
    }
}

/// A Docker host's row: `probe_dir` (a directory of the workspace) for the
/// locality column, `runtime` for the runtime's.
fn check(host: &HostSpec, ask: &Ask<'_>, mut row: Row) -> Row {
    let (image, probe_dir, runtime) = (ask.image, ask.probe_dir, ask.runtime);
    let target = &host.target;
    let version = target.docker(
        &["version", "--format", "{{.Server.Version}}"],
        super::host::HEALTH,
        Interrupt::never(),
    );
    row.version = match version {
        // The daemon's words: escaped (a hostile one could steer the terminal or
        // print a line that reads as ours) and cut.
        Ok(out) if out.ok => Ok(agent_runner_core::text::escape_controls(
            &agent_runner_core::text::cut_chars(out.stdout.trim(), 64),
        )),
        Ok(out) if out.ending == process::Ending::TimedOut => Err(Unanswered::Silent {
            target: target.clone(),
            within: super::host::HEALTH,
        }),
        Ok(out) => Err(Unanswered::Refused {
            target: target.clone(),
            why: last_lines(&out.stderr, 2),
        }),
        Err(e) => Err(Unanswered::Refused {
            target: target.clone(),
            why: e.to_string(),
        }),
    };
    if row.version.is_err() {
        return row;
    }
    let ok = |args: &[&str]| {
        target
            .docker(args, SHORT, Interrupt::never())
            .is_ok_and(|o| o.ok)
    };
    row.image = Some(ok(&["image", "inspect", "--format", "{{.Id}}", image]));
    row.tools = Some(ok(&[
        "volume",
        "inspect",
        "--format",
        "{{.Name}}",
        &tools::volume_name(),
    ]));
    row.runtimes = target
        .docker(&super::runtime::INFO_ARGS, SHORT, Interrupt::never())
        .ok()
        .filter(|o| o.ok)
        .map(|o| super::runtime::parse(&o.stdout));
    row.runtime_known = runtime.map(|r| {
        row.runtimes
            .as_ref()
            .is_some_and(|known| known.iter().any(|k| k == r))
    });
    row.locality = match (probe_dir, row.image) {
        (Some(dir), Some(true)) => {
            if sees(target, dir, image) {
                "bind"
            } else {
                "copy needed"
            }
        }
        _ => "-",
    };
    row
}

/// Whether the daemon sees `dir` of this machine: the locality proof's token
/// (`locality::Pending`, as a run's) read back through a container of its, created
/// and never started (`docker cp`: any image, no `cat` needed).
fn sees(target: &Target, dir: &Path, image: &str) -> bool {
    let Ok(pending) = Pending::write(dir) else {
        return false;
    };
    let name = format!("agent-runner-{}", pending.name());
    let mount = format!(
        "type=bind,source={},target=/probe,readonly",
        pending.dir(dir).display()
    );
    let created = target
        .docker(
            &[
                "create",
                "--name",
                &name,
                "--network",
                "none",
                "--mount",
                &mount,
                image,
                "true",
            ],
            SHORT,
            Interrupt::never(),
        )
        .is_ok_and(|o| o.ok);
    let read = created
        && target
            .docker(
                &["cp", &format!("{name}:/probe/token"), "-"],
                SHORT,
                Interrupt::never(),
            )
            .is_ok_and(|o| o.ok && pending.is(&tar_content(&o.stdout)));
    if created {
        let _ = target.docker(&["rm", "-f", &name], SHORT, Interrupt::never());
    }
    pending.discard(dir);
    read
}

fn rand_u128() -> u128 {
    let mut bytes = [0u8; 16];
    let _ = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    u128::from_le_bytes(bytes)
}

/// Loads the image and fills the tools volume on `host` where missing; what it did.
fn prepare(host: &HostSpec, ask: &Prepare<'_>) -> Result<String, PrepareError> {
    let (image, image_only, this_binary, interrupt) =
        (ask.image, ask.image_only, ask.this_binary, ask.interrupt);
    let target = &host.target;
    if let Some(why) = super::docker_target::health(target) {
        return Err(PrepareError::Down {
            target: Box::new(target.clone()),
            why,
        });
    }
    let mut did = Vec::new();
    let present = target
        .docker(
            &["image", "inspect", "--format", "{{.Id}}", image],
            SHORT,
            interrupt,
        )
        .is_ok_and(|o| o.ok);
    if present {
        did.push(format!("{image} is there"));
    } else {
        between(
            target,
            r#"docker save "$1" | there load -q"#,
            &[image],
            &format!("docker save {image} | docker load ({target})"),
            interrupt,
        )?;
        did.push(format!("{image} loaded"));
    }
    if image_only {
        return Ok(did.join(", "));
    }
    let tools_there = target
        .docker(
            &[
                "volume",
                "inspect",
                "--format",
                "{{.Name}}",
                &tools::volume_name(),
            ],
            SHORT,
            interrupt,
        )
        .is_ok_and(|o| o.ok);
    if tools_there {
        did.push("tools volume is there".into());
    } else if tools::complete(interrupt).unwrap_or(false) {
        copy_tools(target, interrupt)?;
        did.push("tools volume copied from this machine".into());
    } else {
        let invocation = target
            .apply(Invocation::new(&this_binary.display().to_string()).args(["tools", "install"]));
        run_long(
            &invocation,
            &format!("agent-runner tools install ({target})"),
            interrupt,
        )?;
        did.push("tools volume filled".into());
    }
    Ok(did.join(", "))
}

/// Copies this machine's complete tools volume to `target`: the carrier image
/// (empty, a few bytes) loaded there, the volume made with its digest label, and
/// the files streamed `docker cp` here into `docker cp` there through created (never
/// started) containers, labelled as a fill's (a killed copy's are swept as a
/// killed fill's). A copy that fails removes the volume there again.
fn copy_tools(target: &Target, interrupt: Interrupt) -> Result<(), PrepareError> {
    let volume = tools::volume_name();
    let script = r#"volume=$1 carrier=$2 dir=$3 label=$4 src=agent-runner-tools-copy-$5-src dst=agent-runner-tools-copy-$5-dst
shift 5
cleanup() { docker rm -f "$src" >/dev/null 2>&1 || true; there rm -f "$dst" >/dev/null 2>&1 || true; }
trap cleanup EXIT
there image inspect "$carrier" >/dev/null 2>&1 || docker save "$carrier" | there load -q >/dev/null
there volume create --label "$label" "$volume" >/dev/null
docker create --name "$src" "$@" --network none --mount "type=volume,source=$volume,target=$dir,readonly" "$carrier" /none >/dev/null
there create --name "$dst" "$@" --network none --mount "type=volume,source=$volume,target=$dir" "$carrier" /none >/dev/null
if ! docker cp "$src:$dir/." - | there cp - "$dst:$dir"; then
  there rm -f "$dst" >/dev/null 2>&1 || true
  there volume rm -f "$volume" >/dev/null 2>&1 || true
  exit 1
fi"#;
    let label = format!("{}={}", tools::LABEL, tools::digest());
    let id = format!("{:016x}", rand_u128() as u64);
    let labels: Vec<String> = tools::fill_labels()
        .into_iter()
        .map(|(label, value)| format!("--label={label}={value}"))
        .collect();
    let mut args = vec![
        volume.as_str(),
        tools::CARRIER_IMAGE,
        tools::TOOLS_DIR,
        &label,
        &id,
    ];
    args.extend(labels.iter().map(String::as_str));
    between(
        target,
        script,
        &args,
        &format!("copying the tools volume {volume} to {target}"),
        interrupt,
    )
}

/// Runs `script` (bash, `set -euo pipefail`) with `args`: `docker` in it is this
/// machine's daemon, `there` the daemon of `target`, which reaches the script as a
/// variable only (AR_LOAD_*). What crosses is streamed, nothing written here. An
/// error names `what` and the script's stderr's tail.
fn between(
    target: &Target,
    script: &str,
    args: &[&str],
    what: &str,
    interrupt: Interrupt,
) -> Result<(), PrepareError> {
    let (name, value) = match target.place::<DockerDaemon>() {
        Some(DockerDaemon::Url(url)) => ("AR_LOAD_HOST", url.as_str()),
        Some(DockerDaemon::Context(context)) => ("AR_LOAD_CONTEXT", context.as_str()),
        None => {
            return Err(PrepareError::Step {
                what: what.to_string(),
                detail: format!("{target} is not a Docker daemon"),
            });
        }
    };
    let script = format!(
        r#"set -euo pipefail
there() {{
  if [ -n "${{AR_LOAD_HOST:-}}" ]; then DOCKER_HOST="$AR_LOAD_HOST" DOCKER_CONTEXT= docker "$@"
  else DOCKER_HOST= DOCKER_CONTEXT="$AR_LOAD_CONTEXT" docker "$@"; fi
}}
{script}"#
    );
    let invocation = Invocation::new("bash")
        .args(["-c", &script, "agent-runner-hosts"])
        .args(args.iter().copied())
        .env(name, value);
    run_long(&invocation, what, interrupt)
}

/// Runs `invocation` within `LOAD`; an error names `what` and its stderr's tail.
fn run_long(invocation: &Invocation, what: &str, interrupt: Interrupt) -> Result<(), PrepareError> {
    let mut capture = Capture::in_memory(16 * 1024);
    let finished = process::run(
        invocation,
        &Limits::wall(LOAD, interrupt),
        &mut capture,
        Stop::Terminate,
    )
    .map_err(|source| PrepareError::Run {
        what: what.to_string(),
        source,
    })?;
    if !finished.success() {
        return Err(PrepareError::Step {
            what: what.to_string(),
            detail: last_lines(&capture.stderr(), 3),
        });
    }
    Ok(())
}
