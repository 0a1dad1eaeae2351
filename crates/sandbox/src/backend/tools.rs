//! The tools volume (SPEC §21): the agent CLIs at their pinned versions and
//! agent-runner's static helper (`helper/`: the egress bridge, and the git-free
//! snapshot), in a Docker volume `agent-runner-tools-<digest>` on the Docker host,
//! mounted read-only at `/agent-runner-tools` in every sandbox. With it any image with
//! `/bin/sh` can be the worker's image: the agent runs from the volume by its absolute
//! path, and nothing in the container can change it (the mount is read-only; the
//! worker has no capability to remount). Nor can the worker move it aside (SPEC §27):
//! a mount point cannot be renamed, and its parent is the root, which cannot be
//! either; so the envelope's shell runs from the volume too (`SHELL`, a static
//! busybox), and an agent from the volume needs no check at all.
//!
//! Filled once per host and digest (the pinned packages and the helper's bytes):
//! each package is downloaded from the npm registry (`NPM_CONFIG_REGISTRY` for a
//! mirror) and checked against the sha512 pinned here, before anything of it reaches
//! the volume; then a container is created (never started) from an empty image that
//! agent-runner imports itself, with the volume mounted, and `docker cp` unpacks each
//! tarball into it (the daemon reads gzip'd tar itself: no tool is needed in any
//! image, nor on the host). A `ready` file is written last: a volume without it (a
//! fill that was interrupted) is refused when a run needs the agent from it, and
//! filled again by `agent-runner tools install`.
//!
//! Layout: `codex/package/vendor/<triple>/bin/codex` (static musl: any image),
//! `claude/package/claude` (needs glibc's loader), `claude-musl/package/claude`
//! (needs musl's), `bin/agent-runner-helper` (static), `bin/sh` (this machine's
//! static busybox, when it has one: `host_shell`), `ready`.

use super::daemon;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::daemon::call;
use super::docker_cli::{self, last_lines};
use super::{BackendError, sweep};
use agent_runner_core::interrupt::Interrupt;

/// Where the volume is mounted in every sandbox: directly under `/`, so that the
/// worker cannot move it aside (see the module documentation).
pub const TOOLS_DIR: &str = "/agent-runner-tools";
/// The static helper in the volume.
pub const HELPER: &str = "/agent-runner-tools/bin/agent-runner-helper";
/// The static shell in the volume, that runs the envelope (`host_shell`).
pub const SHELL: &str = "/agent-runner-tools/bin/sh";
/// The file written last into a complete volume.
pub const READY: &str = "/agent-runner-tools/ready";
/// Where a static busybox is looked for on this machine (Debian's busybox-static).
const HOST_SHELLS: [&str; 2] = ["/bin/busybox", "/usr/bin/busybox"];
/// The label on the volume (its digest), the fill's container and the empty image.
pub const LABEL: &str = agent_runner_settings::labels::TOOLS;
/// The value of `LABEL` on a fill's container.
pub const FILL: &str = agent_runner_settings::labels::TOOLS_FILL;
/// What a fill's container is labelled `agent-runner.task` as, so that every sweep
/// of leftovers (`sweep.rs`) sees one a killed fill left.
const FILL_TASK: &str = "tools-fill";
/// Longest a fill's container may live: far beyond a fill's calls' deadlines.
const FILL_LIFETIME: Duration = Duration::from_secs(2 * 3600);
/// The empty image the fill's container is created from (never run).
pub const CARRIER_IMAGE: &str = "agent-runner-tools-carrier:1";
/// Bumped when the layout changes.
const LAYOUT: &str = "layout 2";

/// Time allowed for one docker call of the fill, and for one download.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
const COPY_TIMEOUT: Duration = Duration::from_secs(600);
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// An npm package unpacked into the volume.
#[derive(Debug, Clone, Copy)]
pub struct Package {
    pub name: &'static str,
    pub version: &'static str,
    /// The registry's `dist.integrity`, pinned.
    pub integrity: &'static str,
    /// Its directory in the volume.
    pub dir: &'static str,
}

/// The packages of this machine's architecture (the Docker host is taken to share
/// it, as the helper does). The versions are those of `Kind::pinned`, the sha512s
/// those of sandbox/build.sh.
#[cfg(target_arch = "x86_64")]
pub const PACKAGES: [Package; 3] = [
    Package {
        name: "@openai/codex",
        version: "0.169.0-linux-x64",
        integrity: "sha512-o05NyAOCDygSPRo1yinzxvkRSdmsZyBD9E7mbpmjRanSfM8lypqWtQgEo4XfNkwhuCR2aFu8mlGOsQGFXVbVww==",
        dir: "codex",
    },
    Package {
        name: "@anthropic-ai/claude-code-linux-x64",
        version: "2.1.330",
        integrity: "sha512-9Gn+V7DtJ8M1nztP9CeDVl9g3RtrepI7rOFTyPRRnZe8D6zebIHKmC7OvBauucuAP0X0k85SDN/LPVZyjsGezQ==",
        dir: "claude",
    },
    Package {
        name: "@anthropic-ai/claude-code-linux-x64-musl",
        version: "2.1.330",
        integrity: "sha512-OnduSSPY1b59FA8jTbq20Y1XkDUV0S1OVyvYBNslEbpX79P81JF7Ih4lgYvDKiFnnSv75z4Kv6qLE5DQqogYXA==",
        dir: "claude-musl",
    },
];
#[cfg(target_arch = "aarch64")]
pub const PACKAGES: [Package; 3] = [
    Package {
        name: "@openai/codex",
        version: "0.169.0-linux-arm64",
        integrity: "sha512-NZ/DaQUpcQmxmqee7Z9uC1rzw3GhSbooawcaTe1LN5Yk+WlinUKGdTXJgClRT/9ogQEEM9TWxYzvxPfj5G/xFg==",
        dir: "codex",
    },
    Package {
        name: "@anthropic-ai/claude-code-linux-arm64",
        version: "2.1.330",
        integrity: "sha512-V4yanAY5EA5UpwwRPtjSfqDbNqAlUJeVn3NYZw2AgmRHjdpSsLtHAzbxRXfkAnbjwTXzE0uedjQxUY02ARPcsA==",
        dir: "claude",
    },
    Package {
        name: "@anthropic-ai/claude-code-linux-arm64-musl",
        version: "2.1.330",
        integrity: "sha512-NemfeTqZ30tQDhAeumZgDYoX4ewhAHkN3dbcsyvlgb+yvpKUlcYu5Bor8K+Du5azGe3uy9sftlJxbGhTsCR7zA==",
        dir: "claude-musl",
    },
];

#[cfg(target_arch = "x86_64")]
const TRIPLE: &str = "x86_64-unknown-linux-musl";
#[cfg(target_arch = "aarch64")]
const TRIPLE: &str = "aarch64-unknown-linux-musl";
#[cfg(target_arch = "x86_64")]
const GLIBC_LOADER: &str = "/lib64/ld-linux-x86-64.so.2";
#[cfg(target_arch = "aarch64")]
const GLIBC_LOADER: &str = "/lib/ld-linux-aarch64.so.1";
#[cfg(target_arch = "x86_64")]
const MUSL_LOADER: &str = "/lib/ld-musl-x86_64.so.1";
#[cfg(target_arch = "aarch64")]
const MUSL_LOADER: &str = "/lib/ld-musl-aarch64.so.1";

/// An agent in the volume: where it is, and the loader it needs from the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub path: String,
    /// The ELF interpreter it names (None: static).
    pub loader: Option<&'static str>,
}

/// An image that can run none of an agent's builds: it has neither C library.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "claude's binary needs a C library in the image: glibc ({glibc}) or musl \
     ({musl}, for its musl build), and it has neither",
    glibc = GLIBC_LOADER,
    musl = MUSL_LOADER
)]
pub struct NoCLibrary;

/// The C library loaders that decide which build of an agent an image can run.
pub fn loaders() -> [&'static str; 2] {
    [GLIBC_LOADER, MUSL_LOADER]
}

/// The build of `program` in the volume that an image with the loaders `present`
/// can run: Ok(None) when the volume has no such agent, Err(why) when the image can
/// run none of its builds.
pub fn agent(program: &str, present: &[&str]) -> Result<Option<Agent>, NoCLibrary> {
    match program {
        "codex" => Ok(Some(Agent {
            path: format!("{TOOLS_DIR}/codex/package/vendor/{TRIPLE}/bin/codex"),
            loader: None,
        })),
        "claude" => {
            let build = |dir: &str, loader| Agent {
                path: format!("{TOOLS_DIR}/{dir}/package/claude"),
                loader: Some(loader),
            };
            if present.contains(&GLIBC_LOADER) {
                Ok(Some(build("claude", GLIBC_LOADER)))
            } else if present.contains(&MUSL_LOADER) {
                Ok(Some(build("claude-musl", MUSL_LOADER)))
            } else {
                Err(NoCLibrary)
            }
        }
        _ => Ok(None),
    }
}

/// The parts of the volume (its top-level entries) a sandbox whose agent is
/// `program` uses: the helper and the shell, the `ready` file, and that agent's
/// builds unless the agent must be the image's own. None (all) for a program the
/// volume has no build of.
pub fn parts_for(program: &str, from_image_only: bool) -> Option<Vec<String>> {
    let builds: Vec<&str> = PACKAGES
        .iter()
        .map(|package| package.dir)
        .filter(|dir| {
            *dir == program
                || dir
                    .strip_prefix(program)
                    .is_some_and(|r| r.starts_with('-'))
        })
        .collect();
    if builds.is_empty() {
        return None;
    }
    let ready = READY.rsplit('/').next().unwrap_or_default();
    let mut parts = vec!["bin".to_string(), ready.to_string()];
    if !from_image_only {
        parts.extend(builds.into_iter().map(str::to_string));
    }
    Some(parts)
}

/// The volume's name on every host for this build of agent-runner.
pub fn volume_name() -> String {
    format!("agent-runner-tools-{}", digest())
}

/// The tools image of this build (`agent-runner tools image`): the volume's content
/// as an image, for engines that mount no volume of a daemon's (Kubernetes).
pub fn image_name() -> String {
    format!("agent-runner-tools:{}", digest())
}

/// The digest of what goes in the volume: the packages and the helper's bytes.
pub fn digest() -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(LAYOUT.as_bytes());
    for package in PACKAGES {
        for part in [
            package.name,
            package.version,
            package.integrity,
            package.dir,
        ] {
            context.update(part.as_bytes());
            context.update(b"\0");
        }
    }
    context.update(super::socket::BINARY);
    if let Some(shell) = host_shell() {
        context.update(b"shell\0");
        context.update(shell);
    }
    let digest = context.finish();
    digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// This machine's static busybox, put in the volume as the envelope's shell: read
/// once; None when there is none (the envelope then runs the image's `/bin/sh`,
/// pinned with the agent: `worker::agent_files`).
pub fn host_shell() -> Option<&'static [u8]> {
    static SHELL_BYTES: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    SHELL_BYTES
        .get_or_init(|| {
            HOST_SHELLS.iter().find_map(|path| {
                let bytes = std::fs::read(path).ok()?;
                let head = &bytes[..bytes.len().min(64 * 1024)];
                (super::elf::interpreter(head) == Ok(None) && head.starts_with(b"\x7fELF"))
                    .then_some(bytes)
            })
        })
        .as_deref()
}

/// What `ensure` or `install` did.
#[derive(Debug, Clone)]
pub struct Filled {
    pub volume: String,
    /// None: it was there already.
    pub took: Option<Duration>,
    /// Bytes downloaded.
    pub downloaded: u64,
}

/// The volume, filled first if this host does not have it yet. The volume exists
/// from the start of its fill: the lock (held by a fill throughout) keeps a task
/// from taking a volume that is still being filled on this machine; whoever waited
/// finds it complete.
pub fn ensure(interrupt: Interrupt) -> Result<Filled, BackendError> {
    let volume = volume_name();
    let _lock = host_lock()?;
    if exists(&volume, interrupt)? {
        return Ok(Filled {
            volume,
            took: None,
            downloaded: 0,
        });
    }
    sweep_killed_fills();
    fill(&volume, interrupt)
}

/// `agent-runner tools install`: the volume made complete, refilled when a fill was
/// interrupted (it has no `ready` file).
pub fn install(interrupt: Interrupt) -> Result<Filled, BackendError> {
    let volume = volume_name();
    let _lock = host_lock()?;
    // Before the volume is looked at: a killed fill's container still mounts it.
    sweep_killed_fills();
    if exists(&volume, interrupt)? {
        if is_complete(&volume, interrupt)? {
            return Ok(Filled {
                volume,
                took: None,
                downloaded: 0,
            });
        }
        log::warn!("the tools volume {volume} is incomplete; filling it again");
        call(&["volume", "rm", &volume], CALL_TIMEOUT, interrupt)?;
    }
    fill(&volume, interrupt)
}

/// Whether this host has the volume complete (its `ready` file, written last), as
/// `hosts prepare` copies it from.
pub fn complete(interrupt: Interrupt) -> Result<bool, BackendError> {
    let volume = volume_name();
    Ok(exists(&volume, interrupt)? && is_complete(&volume, interrupt)?)
}

/// The labels of a container of a fill (or of a copy of the volume between hosts),
/// by this process: the sweeps (`sweep.rs`) remove it once it expired or this
/// process is gone.
pub fn fill_labels() -> Vec<(&'static str, String)> {
    let owner = agent_runner_core::owner::Owner::this_process();
    [
        (LABEL, FILL.to_string()),
        (sweep::LABEL_TASK, FILL_TASK.to_string()),
        sweep::expiry_label(FILL_LIFETIME),
    ]
    .into_iter()
    .chain(sweep::owner_labels(&owner))
    .collect()
}

/// Removes the containers that killed fills left on this host (`sweep.rs`: their
/// owner is gone or their expiry passed).
fn sweep_killed_fills() {
    for name in sweep::remove_fill_leftovers(CALL_TIMEOUT) {
        log::info!("removed {name}, left by a tools-volume fill that was killed");
    }
}

/// Whether this host has the volume (complete or not), for `doctor`.
pub fn present(interrupt: Interrupt) -> Result<bool, BackendError> {
    exists(&volume_name(), interrupt)
}

fn exists(volume: &str, interrupt: Interrupt) -> Result<bool, BackendError> {
    let out = call(
        &["volume", "inspect", "-f", "{{.Name}}", volume],
        CALL_TIMEOUT,
        interrupt,
    )?;
    if out.ok {
        return Ok(true);
    }
    if out.stderr.contains("no such volume") || out.stderr.contains("No such volume") {
        return Ok(false);
    }
    Err(failed("docker volume inspect", &out.stderr))
}

fn failed(command: &str, stderr: &str) -> BackendError {
    BackendError::Failed {
        command: command.to_string(),
        detail: last_lines(stderr, 3),
    }
}

/// Whether the volume has its `ready` file (a created container, never started).
fn is_complete(volume: &str, interrupt: Interrupt) -> Result<bool, BackendError> {
    let carrier = Carrier::create(volume, interrupt)?;
    let source = format!("{}:{READY}", carrier.name);
    let out = call(&["cp", &source, "-"], CALL_TIMEOUT, interrupt)?;
    Ok(out.ok)
}

/// A container created from the empty image with the volume at `TOOLS_DIR`;
/// removed when dropped. It carries this process's owner labels and an expiry: a
/// fill killed mid-way leaves it, and the next fill or sweep removes it.
struct Carrier {
    name: String,
}

impl Carrier {
    fn create(volume: &str, interrupt: Interrupt) -> Result<Carrier, BackendError> {
        carrier_image(interrupt)?;
        let name = format!(
            "agent-runner-tools-fill-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let mount = format!("type=volume,source={volume},target={TOOLS_DIR}");
        let labels: Vec<String> = fill_labels()
            .into_iter()
            .map(|(label, value)| format!("--label={label}={value}"))
            .collect();
        let mut args = vec!["create", "--name", &name];
        args.extend(labels.iter().map(String::as_str));
        args.extend([
            "--network",
            "none",
            "--mount",
            &mount,
            CARRIER_IMAGE,
            "/none",
        ]);
        let out = call(&args, CALL_TIMEOUT, interrupt)?;
        if !out.ok {
            return Err(failed("docker create", &out.stderr));
        }
        Ok(Carrier { name })
    }

    /// `docker cp <from> <container>:<to>`, `from` a host path or `-` with `stdin`.
    fn copy(&self, from: &str, stdin: Option<&Path>, to: &str) -> Result<(), BackendError> {
        let target = format!("{}:{to}", self.name);
        let mut invocation = docker_cli::command().args(["cp", from, &target]);
        if let Some(path) = stdin {
            let file = std::fs::File::open(path)
                .map_err(|e| BackendError::Io(format!("{}: {e}", path.display())))?;
            invocation = invocation.stdin_file(file);
        }
        let out = daemon::guarded(&invocation, COPY_TIMEOUT, Interrupt::never())?;
        match out.ok {
            true => Ok(()),
            false => Err(failed(&format!("docker cp {from} {target}"), &out.stderr)),
        }
    }
}

impl Drop for Carrier {
    fn drop(&mut self) {
        daemon::remove_container(&self.name, CALL_TIMEOUT);
    }
}

/// The empty image (an empty tar imported), made once per host.
pub(crate) fn carrier_image(interrupt: Interrupt) -> Result<(), BackendError> {
    let out = call(
        &["image", "inspect", "-f", "{{.Id}}", CARRIER_IMAGE],
        CALL_TIMEOUT,
        interrupt,
    )?;
    if out.ok {
        return Ok(());
    }
    let change = format!("LABEL {LABEL}=carrier");
    let invocation = docker_cli::command()
        .args(["import", "--change", &change, "-", CARRIER_IMAGE])
        .stdin(vec![0u8; 1024]);
    let out = daemon::guarded(&invocation, CALL_TIMEOUT, interrupt)?;
    match out.ok {
        true => Ok(()),
        false => Err(failed(
            "docker import - (the tools volume's empty image)",
            &out.stderr,
        )),
    }
}

/// Downloads and checks every package, then fills a new volume; on any failure the
/// volume is removed again.
fn fill(volume: &str, interrupt: Interrupt) -> Result<Filled, BackendError> {
    let started = Instant::now();
    let scratch = Scratch::new()?;
    let mut downloaded = 0;
    for package in PACKAGES {
        downloaded += download(
            &package,
            &scratch.path.join(format!("{}.tgz", package.dir)),
            interrupt,
        )?;
    }
    let label = format!("{LABEL}={}", digest());
    let out = call(
        &["volume", "create", "--label", &label, volume],
        CALL_TIMEOUT,
        interrupt,
    )?;
    if !out.ok {
        return Err(failed("docker volume create", &out.stderr));
    }
    let filled = fill_volume(volume, &scratch.path, interrupt);
    if let Err(e) = filled {
        let _ = call(
            &["volume", "rm", "-f", volume],
            CALL_TIMEOUT,
            Interrupt::never(),
        );
        return Err(e);
    }
    let took = started.elapsed();
    log::info!(
        "tools volume {volume} filled in {} ({} MB downloaded)",
        agent_runner_core::timestamp::human(took),
        downloaded / 1_000_000
    );
    Ok(Filled {
        volume: volume.to_string(),
        took: Some(took),
        downloaded,
    })
}

fn fill_volume(volume: &str, scratch: &Path, interrupt: Interrupt) -> Result<(), BackendError> {
    let io =
        |e: std::io::Error| BackendError::Io(format!("the tools volume's staging directory: {e}"));
    let stage = scratch.join("stage");
    for package in PACKAGES {
        std::fs::create_dir_all(stage.join(package.dir)).map_err(io)?;
    }
    std::fs::create_dir_all(stage.join("bin")).map_err(io)?;
    let helper = stage.join("bin/agent-runner-helper");
    std::fs::write(&helper, super::socket::BINARY).map_err(io)?;
    set_mode(&helper, 0o755).map_err(io)?;
    if let Some(shell) = host_shell() {
        let path = stage.join("bin/sh");
        std::fs::write(&path, shell).map_err(io)?;
        set_mode(&path, 0o755).map_err(io)?;
    }
    for dir in [stage.clone(), stage.join("bin")]
        .into_iter()
        .chain(PACKAGES.iter().map(|p| stage.join(p.dir)))
    {
        set_mode(&dir, 0o755).map_err(io)?;
    }
    let ready = scratch.join("ready");
    std::fs::write(&ready, format!("{}\n", digest())).map_err(io)?;
    set_mode(&ready, 0o644).map_err(io)?;

    let carrier = Carrier::create(volume, interrupt)?;
    let stage_all = format!("{}/.", stage.display());
    carrier.copy(&stage_all, None, TOOLS_DIR)?;
    for package in PACKAGES {
        if interrupt.is_set() {
            return Err(BackendError::Interrupted);
        }
        let tarball = scratch.join(format!("{}.tgz", package.dir));
        carrier.copy("-", Some(&tarball), &format!("{TOOLS_DIR}/{}", package.dir))?;
    }
    carrier.copy(&ready.display().to_string(), None, READY)
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// The registry: npm's own setting, else the public one.
fn registry() -> String {
    let configured = ["NPM_CONFIG_REGISTRY", "npm_config_registry"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()));
    configured.unwrap_or_else(|| "https://registry.npmjs.org/".to_string())
}

/// The package's tarball URL in `registry`.
pub fn tarball_url(registry: &str, package: &Package) -> String {
    let base = package.name.rsplit('/').next().unwrap_or(package.name);
    format!(
        "{}/{}/-/{base}-{}.tgz",
        registry.trim_end_matches('/'),
        package.name,
        package.version
    )
}

/// Downloads `package` into `to`, checked against its pinned sha512; its size.
pub fn download(package: &Package, to: &Path, interrupt: Interrupt) -> Result<u64, BackendError> {
    let url = tarball_url(&registry(), package);
    let spec = format!("{}@{}", package.name, package.version);
    let fail = |detail: String| BackendError::Failed {
        command: format!("download of {spec} from {url}"),
        detail,
    };
    log::info!("tools volume: downloading {spec} from {url}");
    let agent = ureq::Agent::new_with_config(
        ureq::config::Config::builder()
            .timeout_global(Some(DOWNLOAD_TIMEOUT))
            .tls_config(
                ureq::tls::TlsConfig::builder()
                    .root_certs(root_certs())
                    .build(),
            )
            .build(),
    );
    let response = agent.get(&url).call().map_err(|e| fail(e.to_string()))?;
    let mut body = response.into_body().into_reader();
    let mut file = std::fs::File::create(to).map_err(|e| fail(format!("{}: {e}", to.display())))?;
    let mut context = ring::digest::Context::new(&ring::digest::SHA512);
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        if interrupt.is_set() {
            return Err(BackendError::Interrupted);
        }
        let n = body.read(&mut buf).map_err(|e| fail(e.to_string()))?;
        if n == 0 {
            break;
        }
        context.update(&buf[..n]);
        file.write_all(&buf[..n])
            .map_err(|e| fail(format!("{}: {e}", to.display())))?;
        size += n as u64;
    }
    let integrity = format!("sha512-{}", base64(context.finish().as_ref()));
    if integrity != package.integrity {
        return Err(fail(format!(
            "its sha512 is not the pinned one ({integrity}, pinned {}): the registry or mirror served something else",
            package.integrity
        )));
    }
    Ok(size)
}

/// The machine's certificate authorities (`SSL_CERT_FILE`, else the system bundle),
/// as curl and npm trust them (a company's own CA, a mirror's); the built-in roots
/// when there is no bundle.
fn root_certs() -> ureq::tls::RootCerts {
    let file = std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/ssl/certs/ca-certificates.crt"));
    let Ok(pem) = std::fs::read(&file) else {
        return ureq::tls::RootCerts::WebPki;
    };
    let certs: Vec<_> = ureq::tls::parse_pem(&pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(cert)) => Some(cert),
            _ => None,
        })
        .collect();
    match certs.is_empty() {
        true => ureq::tls::RootCerts::WebPki,
        false => ureq::tls::RootCerts::new_with_certs(&certs),
    }
}

/// Standard base64 with padding, as npm writes integrities.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The fill's host-side files: a private directory under the temp directory,
/// removed when dropped. A fill killed mid-way leaves its directory (the packages
/// it downloaded, about 0.5 GB): the next fill removes it.
struct Scratch {
    path: PathBuf,
}

/// The prefix of a scratch directory's name; a UUID's 32 hex digits follow.
const SCRATCH_PREFIX: &str = "agent-runner-tools-";

impl Scratch {
    /// Called with the host lock held: no other fill of this user runs, so every
    /// scratch directory of this user is a killed fill's.
    fn new() -> Result<Scratch, BackendError> {
        use std::os::unix::fs::DirBuilderExt;
        Scratch::remove_killed();
        let path =
            std::env::temp_dir().join(format!("{SCRATCH_PREFIX}{}", uuid::Uuid::new_v4().simple()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| BackendError::Io(format!("{}: {e}", path.display())))?;
        Ok(Scratch { path })
    }
}

impl Scratch {
    /// Removes the scratch directories of this user's killed fills: by name, a
    /// directory (not a link) owned by this user; another user's are left alone.
    fn remove_killed() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        let uid = agent_runner_core::sys::user_and_group().0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH_PREFIX)) else {
                continue;
            };
            if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                continue;
            }
            // `symlink_metadata`: a link of that name is not followed, and skipped.
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if !meta.is_dir() || meta.uid() != uid {
                continue;
            }
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => log::info!(
                    "removed {}, left by a tools-volume fill that was killed",
                    entry.path().display()
                ),
                Err(e) => log::warn!("{}: {e}", entry.path().display()),
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// One fill at a time on this machine: an exclusive lock on a file in the temp
/// directory, held until dropped.
fn host_lock() -> Result<std::fs::File, BackendError> {
    let uid = agent_runner_core::sys::user_and_group().0;
    let path = std::env::temp_dir().join(format!("agent-runner-tools-{uid}.lock"));
    let file = agent_runner_core::fs::lock::open(&path)
        .map_err(|e| BackendError::Io(format!("{}: {e}", path.display())))?;
    agent_runner_core::fs::lock::lock(&file)
        .map_err(|e| BackendError::Io(format!("cannot lock {}: {e}", path.display())))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_uses_the_shell_helper_ready_file_and_its_agents_builds_only() {
        let parts = |program, image_only| parts_for(program, image_only);
        assert_eq!(parts("codex", false).unwrap(), ["bin", "ready", "codex"]);
        assert_eq!(
            parts("claude", false).unwrap(),
            ["bin", "ready", "claude", "claude-musl"]
        );
        assert_eq!(parts("claude", true).unwrap(), ["bin", "ready"]);
        assert_eq!(parts("aider", false), None);
        assert_eq!(parts("clau", false), None, "a prefix is not a build");
    }

    #[test]
    fn base64_is_npms() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn tarballs_are_where_npm_puts_them() {
        let codex = PACKAGES[0];
        assert_eq!(
            tarball_url("https://registry.npmjs.org/", &codex),
            format!(
                "https://registry.npmjs.org/@openai/codex/-/codex-{}.tgz",
                codex.version
            )
        );
    }

    #[test]
    fn claude_is_the_build_the_image_can_load_or_refused() {
        let glibc = agent("claude", &[GLIBC_LOADER, MUSL_LOADER])
            .unwrap()
            .unwrap();
        assert_eq!(glibc.path, "/agent-runner-tools/claude/package/claude");
        let musl = agent("claude", &[MUSL_LOADER]).unwrap().unwrap();
        assert_eq!(musl.path, "/agent-runner-tools/claude-musl/package/claude");
        assert_eq!(musl.loader, Some(MUSL_LOADER));
        let none = agent("claude", &[]).unwrap_err().to_string();
        assert!(none.contains("has neither"), "{none}");
        assert_eq!(agent("codex", &[]).unwrap().unwrap().loader, None);
    }

    #[test]
    fn the_digest_names_the_volume() {
        assert_eq!(digest().len(), 16);
        assert_eq!(volume_name(), format!("agent-runner-tools-{}", digest()));
    }
}
