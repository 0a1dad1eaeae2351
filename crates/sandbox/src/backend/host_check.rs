//! `hosts check` and `hosts prepare` (SPEC §22), below the CLI: per Docker host,
//! whether its daemon answers within `host::HEALTH`, has the worker image, the tools
//! volume and the runtime asked for, and whether a bind mount of the workspace's
//! clones is possible there (else the copy transport is needed); and the image
//! loaded (`docker save | docker load` between the daemons, streamed, nothing
//! written here) and the tools volume filled where they are missing. The CLI
//! (`cli/hosts.rs`) resolves the hosts and prints.

use std::path::Path;
use std::time::Duration;

use super::docker_cli::last_lines;
use super::host::{HostSpec, Target};
use super::locality::{Pending, tar_content};
use super::tools;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Invocation, Limits, Stop};

/// Longest a short docker call of a check may take.
const SHORT: Duration = Duration::from_secs(30);
/// Longest an image's copy between daemons may take.
const LOAD: Duration = Duration::from_secs(1800);

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

/// One host's row of `hosts check`.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: String,
    /// Its daemon's version, or why it did not answer.
    pub version: Result<String, String>,
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
                    name: host.name.clone(),
                    version: Err("its check panicked".into()),
                    image: None,
                    tools: None,
                    locality: "-",
                    runtimes: None,
                    runtime_known: None,
                })
            })
            .collect()
    })
}

/// One host's row: `probe_dir` (a directory of the workspace) for the locality
/// column, `runtime` for the runtime's.
pub fn check(host: &HostSpec, image: &str, probe_dir: Option<&Path>, runtime: Option<&str>) -> Row {
    let target = &host.target;
    let mut row = Row {
        name: host.name.clone(),
        version: Err(String::new()),
        image: None,
        tools: None,
        locality: "-",
        runtimes: None,
        runtime_known: None,
    };
    if let Target::Kubernetes(cluster) = target {
        return check_cluster(row, cluster);
    }
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
        Ok(out) if out.ending == process::Ending::TimedOut => Err(format!(
            "{target}: no answer within {} s",
            super::host::HEALTH.as_secs()
        )),
        Ok(out) => Err(format!("{target}: {}", last_lines(&out.stderr, 2))),
        Err(e) => Err(format!("{target}: {e}")),
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

/// A cluster's row (SPEC §25): the API server's version, or the first thing the
/// backend needs that does not hold there (namespace, rights, tools image). The
/// cluster pulls its images itself: they are not asked for here. Its sandboxes
/// are copied into by exec.
fn check_cluster(mut row: Row, cluster: &super::cluster::Cluster) -> Row {
    let backend =
        super::kubernetes::Kubernetes::new(cluster.clone()).with_tools_image(&tools::image_name());
    let found = backend.check();
    let mut version = found.first().map(|f| f.seen.clone()).unwrap_or_default();
    if let Some(egress) = found.iter().find(|f| f.what.starts_with("egress")) {
        version = format!("{version}, egress {}", egress.seen);
    }
    if let Some(seccomp) = found.iter().find(|f| f.what == "seccomp") {
        version = format!("{version}, seccomp: {}", seccomp.seen);
    }
    let problems: Vec<String> = found
        .iter()
        .filter_map(|f| f.problem.as_ref().map(|p| format!("{}: {p}", f.what)))
        .collect();
    row.version = match problems.is_empty() {
        true => Ok(agent_runner_core::text::escape_controls(
            &agent_runner_core::text::cut_chars(&version, 120),
        )),
        false => Err(format!("{cluster}: {}", problems.join("; "))),
    };
    row.image = row.version.is_ok().then_some(true);
    row.locality = "copy (exec)";
    row
}

/// A cluster prepared (SPEC §25): agent-runner's seccomp profile installed on its
/// nodes and proven there (`kubernetes/seccomp_profile.rs`). Its images are the
/// cluster's to pull: said, not done.
fn prepare_cluster(
    host: &HostSpec,
    cluster: &super::cluster::Cluster,
    interrupt: Interrupt,
) -> Result<String, PrepareError> {
    let backend =
        super::kubernetes::Kubernetes::new(cluster.clone()).with_tools_image(&tools::image_name());
    let step = |e: super::BackendError| PrepareError::Step {
        what: format!("the seccomp profile on {cluster}"),
        detail: e.to_string(),
    };
    let nodes = backend.install_seccomp(interrupt).map_err(step)?;
    let verdict = backend.seccomp_verdict(true, interrupt).map_err(step)?;
    if !verdict.installed {
        return Err(PrepareError::Step {
            what: format!("hosts prepare {}", host.name),
            detail: format!(
                "the seccomp profile was written on {} but a Pod cannot run under it: {}",
                nodes.join(", "),
                verdict.detail
            ),
        });
    }
    Ok(format!(
        "seccomp profile {} installed on {} node(s) ({}), seccomp: localhost; {cluster} pulls its images itself: push the worker image and the tools image ({}) where it pulls, or load them on its nodes",
        super::kubernetes::seccomp_profile::localhost_profile(),
        nodes.len(),
        nodes.join(", "),
        tools::image_name()
    ))
}

/// Loads the image and fills the tools volume on `host` where missing; what it did.
pub fn prepare(
    host: &HostSpec,
    image: &str,
    image_only: bool,
    this_binary: &Path,
    interrupt: Interrupt,
) -> Result<String, PrepareError> {
    let target = &host.target;
    if let Target::Kubernetes(cluster) = target {
        return prepare_cluster(host, cluster, interrupt);
    }
    if let Some(why) = target.health() {
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
    let (name, value) = match target {
        Target::Url(url) => ("AR_LOAD_HOST", url.as_str()),
        Target::Context(context) => ("AR_LOAD_CONTEXT", context.as_str()),
        Target::Kubernetes(cluster) => {
            return Err(PrepareError::Step {
                what: what.to_string(),
                detail: format!("{cluster} is a cluster, not a Docker daemon"),
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
