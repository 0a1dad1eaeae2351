//! `agent-runner hosts check|prepare` (SPEC §22): the Docker hosts of `--host` or of
//! the workspace's `hosts`. `check` prints one row per host (its daemon's version
//! within 5 s, the worker image, the tools volume, and whether a bind mount of the
//! workspace's clones is possible there or the copy transport is needed) and fails
//! when a host is unhealthy; `prepare` loads the image (`docker save | docker load`
//! between the daemons, streamed, nothing written here) and fills the tools volume
//! (`agent-runner tools install` aimed at the host) where they are missing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::exit;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Invocation, Limits, Stop};
use agent_runner_pipeline::Workspace;
use agent_runner_sandbox::backend::docker_cli::last_lines;
use agent_runner_sandbox::backend::host::{HostSpec, Target, check_pool};
use agent_runner_sandbox::backend::tools;

use super::{WorkspaceDir, write_stdout};

/// The image a sandbox runs when neither the defaults nor `--image` name one.
const DEFAULT_IMAGE: &str = "agent-runner-sandbox:latest";
/// Longest a short docker call of a check may take.
const SHORT: Duration = Duration::from_secs(30);
/// Longest an image's copy between daemons may take.
const LOAD: Duration = Duration::from_secs(1800);

/// `--host NAME=URL[:SLOTS]`.
pub(crate) fn parse_flag(flag: &str) -> Result<HostSpec, String> {
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
    /// tools volume on each host where they are missing.
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

/// The hosts, the image, and a directory of the workspace for the locality probe.
fn resolve(args: &HostsArgs) -> Result<(Vec<HostSpec>, String, Option<PathBuf>), String> {
    let ws = super::home()
        .and_then(|home| Ok(Workspace::open(&home, &args.workspace.dir)?))
        .ok();
    let hosts = if args.hosts.is_empty() {
        let ws = ws.as_ref().ok_or_else(|| {
            format!(
                "no --host given and {} is not a workspace with `hosts` in its defaults",
                args.workspace.dir.display()
            )
        })?;
        ws.defaults.hosts()?
    } else {
        check_pool(&args.hosts, |i| format!("--host #{}", i + 1))?;
        args.hosts.clone()
    };
    if hosts.is_empty() {
        return Err(
            "no hosts: give --host NAME=URL[:SLOTS] or set `hosts` in the workspace's defaults"
                .into(),
        );
    }
    let image = args
        .image
        .clone()
        .or_else(|| ws.as_ref().and_then(|ws| ws.defaults.worker_image()))
        .unwrap_or_else(|| DEFAULT_IMAGE.into());
    let probe_dir = ws.map(|ws| ws.dir.clone());
    Ok((hosts, image, probe_dir))
}

/// One host's row.
struct Row {
    name: String,
    version: Result<String, String>,
    image: Option<bool>,
    tools: Option<bool>,
    locality: &'static str,
    /// The runtimes its daemon knows (SPEC §28); None: not asked or no answer.
    runtimes: Option<Vec<String>>,
    /// `--runtime` is among them.
    runtime_known: Option<bool>,
}

impl Row {
    /// The daemon answers and has the image. A missing tools volume is shown, not
    /// counted: an image with its own agent needs none (and a run fills it).
    fn healthy(&self) -> bool {
        self.version.is_ok() && self.image == Some(true) && self.runtime_known != Some(false)
    }
}

fn check_all(
    hosts: &[HostSpec],
    image: &str,
    probe_dir: Option<&Path>,
    runtime: Option<&str>,
) -> i32 {
    let rows: Vec<Row> = std::thread::scope(|scope| {
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
    });
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

fn check(host: &HostSpec, image: &str, probe_dir: Option<&Path>, runtime: Option<&str>) -> Row {
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
    let version = target.docker(
        &["version", "--format", "{{.Server.Version}}"],
        agent_runner_sandbox::backend::host::HEALTH,
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
            agent_runner_sandbox::backend::host::HEALTH.as_secs()
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
        .docker(
            &agent_runner_sandbox::backend::runtime::INFO_ARGS,
            SHORT,
            Interrupt::never(),
        )
        .ok()
        .filter(|o| o.ok)
        .map(|o| agent_runner_sandbox::backend::runtime::parse(&o.stdout));
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

/// Whether the daemon sees `dir` of this machine: a random token written there is
/// read back through a container of its, created and never started (`docker cp`).
fn sees(target: &Target, dir: &Path, image: &str) -> bool {
    let token = format!("{:032x}", rand_u128());
    let probe = dir.join(format!(".locality-{token}"));
    if std::fs::create_dir(&probe).is_err() || std::fs::write(probe.join("token"), &token).is_err()
    {
        let _ = std::fs::remove_dir_all(&probe);
        return false;
    }
    let name = format!("agent-runner-locality-{token}");
    let mount = format!(
        "type=bind,source={},target=/probe,readonly",
        probe.display()
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
            .is_ok_and(|o| o.ok && o.stdout.contains(&token));
    if created {
        let _ = target.docker(&["rm", "-f", &name], SHORT, Interrupt::never());
    }
    let _ = std::fs::remove_dir_all(&probe);
    read
}

fn rand_u128() -> u128 {
    let mut bytes = [0u8; 16];
    let _ = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    u128::from_le_bytes(bytes)
}

fn prepare_all(hosts: &[HostSpec], image: &str, image_only: bool, interrupt: Interrupt) -> i32 {
    let mut failed = false;
    for host in hosts {
        match prepare(host, image, image_only, interrupt) {
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

/// Loads the image and fills the tools volume on `host` where missing; what it did.
fn prepare(
    host: &HostSpec,
    image: &str,
    image_only: bool,
    interrupt: Interrupt,
) -> Result<String, String> {
    let target = &host.target;
    if let Some(why) = target.health() {
        return Err(format!("{target}: {why}"));
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
        let exe = super::this_binary().map_err(|e| e.to_string())?;
        let invocation =
            target.apply(Invocation::new(&exe.display().to_string()).args(["tools", "install"]));
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
fn copy_tools(target: &Target, interrupt: Interrupt) -> Result<(), String> {
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
) -> Result<(), String> {
    let (name, value) = match target {
        Target::Url(url) => ("AR_LOAD_HOST", url.as_str()),
        Target::Context(context) => ("AR_LOAD_CONTEXT", context.as_str()),
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
fn run_long(invocation: &Invocation, what: &str, interrupt: Interrupt) -> Result<(), String> {
    let mut capture = Capture::in_memory(16 * 1024);
    let finished = process::run(
        invocation,
        &Limits::wall(LOAD, interrupt),
        &mut capture,
        Stop::Terminate,
    )
    .map_err(|e| e.to_string())?;
    if !finished.success() {
        return Err(format!(
            "{what} failed: {}",
            last_lines(&capture.stderr(), 3)
        ));
    }
    Ok(())
}
