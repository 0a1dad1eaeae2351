//! What a test needs beyond the binary, the daemon and the test worker images: root,
//! Chromium, the real worker image. Such a test carries `#[ignore = "needs …"]`, so a
//! plain `cargo test` counts it as ignored instead of passing it, and starts with
//! `needs!(Root)` (or `needs!(SandboxImage, Root)`): where the prerequisite is here
//! the test goes on. Where it is not, the test fails saying what to install, unless
//! whoever runs the suite collects the tests it did not run: `make test`
//! (testdata/test.sh) names a file in `AGENT_RUNNER_TEST_NOT_RUN` (never under CI,
//! where everything must run); the test then writes its name and why there and
//! returns, and `make test` ends by counting them. So no test passes without doing
//! its work unnoticed.

use std::io::Write;
use std::path::Path;

use super::docker::docker;

/// Something a test needs beyond the docker daemon and the test worker image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Root with setpriv: other users (the worker's uid, the web view's peers),
    /// mknod and mount.
    Root,
    /// Debian's chromium and chromium-driver, for the browser tests.
    Chromium,
    /// The real worker image agent-runner-codex:latest, built by sandbox/build.sh.
    SandboxImage,
    /// agent-runner's tools volume on the daemon's host, filled from the npm
    /// registry by `agent-runner tools install` (once per host and digest).
    ToolsVolume,
    /// podman and catatonit, with the test worker image in podman's store
    /// (testdata/setup-podman.sh).
    Podman,
    /// gVisor's runtime `runsc` registered with the daemon, and able to run a
    /// container here (testdata/setup-runsc.sh).
    Runsc,
    /// The MCP test image (the real worker image with python3 and the `mcp` SDK),
    /// built by testdata/setup-mcp.sh.
    McpImage,
    /// The Kubernetes test cluster (`make test-cluster`, or `make test-env K8S=1`):
    /// its cluster.env, and its API answering.
    Cluster,
}

impl Needs {
    /// The word `#[ignore = "needs …"]`, `make test` and `TEST_WITHOUT` use.
    fn word(self) -> &'static str {
        match self {
            Needs::Root => "root",
            Needs::Chromium => "chromium",
            Needs::SandboxImage => "sandbox-image",
            Needs::ToolsVolume => "tools-volume",
            Needs::Podman => "podman",
            Needs::Runsc => "runsc",
            Needs::McpImage => "mcp-image",
            Needs::Cluster => "cluster",
        }
    }
}

/// Returns from the test when a prerequisite is missing and `make test` collects
/// the tests not run; fails it otherwise (see the module documentation).
macro_rules! needs {
    ($($what:ident),+) => {
        if !$crate::support::prerequisite::here(&[$($crate::support::prerequisite::Needs::$what),+]) {
            return;
        }
    };
}
pub(crate) use needs;

/// The file `make test` collects the tests not run in.
const NOT_RUN: &str = "AGENT_RUNNER_TEST_NOT_RUN";
/// Prerequisites `make test` is to count as missing (`TEST_WITHOUT`, never under CI).
const WITHOUT: &str = "AGENT_RUNNER_TEST_WITHOUT";

/// Whether everything in `what` is here. If not: records this test as not run and
/// returns false when `make test` collects those, else fails the test.
#[track_caller]
pub fn here(what: &[Needs]) -> bool {
    let Some(missing) = what.iter().find_map(|&w| missing(w).map(|why| (w, why))) else {
        return true;
    };
    let (what, why) = missing;
    let Some(file) = std::env::var_os(NOT_RUN) else {
        panic!(
            "this test needs {} (`#[ignore = \"needs …\"]`): {why}",
            what.word()
        );
    };
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let line = format!("{test}\t{}\t{why}\n", what.word());
    let mut out = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&file)
        .unwrap();
    // One write of a short line to a file opened for appending: lines of tests
    // running at once do not mix.
    out.write_all(line.as_bytes()).unwrap();
    false
}

/// Fails the test, saying what to do, when `what` is missing: for helpers that only
/// tests starting with `needs!` use.
#[track_caller]
pub fn require(what: Needs) {
    if let Some(why) = missing(what) {
        panic!(
            "this needs {} (the test lacks `needs!`): {why}",
            what.word()
        );
    }
}

/// Why `what` is not here (and how to get it), or None when it is.
fn missing(what: Needs) -> Option<String> {
    let left_out = std::env::var(WITHOUT)
        .is_ok_and(|words| words.split_whitespace().any(|w| w == what.word()));
    if left_out {
        return Some("left out by TEST_WITHOUT".into());
    }
    check(what).err()
}

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const SETPRIV: &str = "/usr/bin/setpriv";

/// Whether `what` is here; otherwise why not and how to get it.
fn check(what: Needs) -> Result<(), String> {
    match what {
        Needs::Root => {
            // SAFETY: geteuid cannot fail.
            if unsafe { libc::geteuid() } != 0 {
                return Err("run the tests as root".into());
            }
            if !Path::new(SETPRIV).exists() {
                return Err(format!("{SETPRIV} is missing (Debian: util-linux)"));
            }
            Ok(())
        }
        Needs::Chromium => {
            if Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists() {
                return Ok(());
            }
            Err(format!(
                "{CHROMIUM} or {CHROMEDRIVER} is missing (Debian: chromium, chromium-driver; `make test-env` installs them as root)"
            ))
        }
        Needs::SandboxImage => sandbox_image_built(),
        Needs::ToolsVolume => tools_volume_filled(),
        Needs::Podman => podman_ready(),
        Needs::Runsc => runsc_ready(),
        Needs::Cluster => super::cluster::reachable(),
        Needs::McpImage => {
            let format = "{{index .Config.Labels \"agent-runner.test-mcp-image\"}}";
            let (ok, recipe, stderr) = docker(&["image", "inspect", "-f", format, MCP_IMAGE]);
            if ok && !recipe.trim().is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{MCP_IMAGE} was not built ({}); `make test-env` builds it (testdata/setup-mcp.sh, after the sandbox image)",
                    stderr.trim()
                ))
            }
        }
    }
}

/// The runtime `runsc` is the daemon's and runs a container (once per test process,
/// or once for the run: `AGENT_RUNNER_TEST_RUNSC_RUNS`).
fn runsc_ready() -> Result<(), String> {
    static READY: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    READY
        .get_or_init(|| {
            let fix = "`make test-env` installs runsc and registers it with the daemon (testdata/setup-runsc.sh)";
            let (ok, runtimes, _) = docker(&["info", "--format", "{{json .Runtimes}}"]);
            if !ok || !runtimes.contains("\"runsc\"") {
                return Err(format!(
                    "the daemon does not know the runtime runsc (it has {}); {fix}",
                    runtimes.trim()
                ));
            }
            // Proven once for the run by testdata/test.sh.
            if std::env::var_os("AGENT_RUNNER_TEST_RUNSC_RUNS").is_some_and(|v| v == "1") {
                return Ok(());
            }
            let image = super::docker::TEST_IMAGE;
            let (ok, out, err) = docker(&[
                "run", "--rm", "--runtime", "runsc", "--network", "none", "--label",
                "agent-runner.task=runsc-probe", image, "/bin/sh", "-c", "echo runs",
            ]);
            if ok && out.trim() == "runs" {
                Ok(())
            } else {
                Err(format!(
                    "runsc cannot run a container on this machine: {}",
                    err.trim()
                ))
            }
        })
        .clone()
}

const PODMAN: &str = "/usr/bin/podman";
const CATATONIT: &str = "/usr/libexec/podman/catatonit";

/// podman, catatonit, and the test worker image in podman's store, the same as
/// docker's.
fn podman_ready() -> Result<(), String> {
    let fix = "`make test-env` installs podman and catatonit and copies the image \
               (testdata/setup-podman.sh; Debian: apt-get install podman catatonit)";
    for needed in [PODMAN, CATATONIT] {
        if !Path::new(needed).exists() {
            return Err(format!("{needed} is missing; {fix}"));
        }
    }
    let image = super::docker::TEST_IMAGE;
    let format = "{{.Id}}";
    let (ok, ours, _) = docker(&["image", "inspect", "--format", format, image]);
    let theirs =
        super::Run::program(PODMAN, &["image", "inspect", "--format", format, image]).output();
    let same = ok
        && theirs.code == Some(0)
        && ours.trim().trim_start_matches("sha256:")
            == theirs.stdout.trim().trim_start_matches("sha256:");
    if same {
        Ok(())
    } else {
        Err(format!(
            "podman lacks {image} as docker has it ({}); {fix}",
            theirs.stderr.trim()
        ))
    }
}

/// `agent-runner tools install`, once per test process: quick when the volume is
/// there; a fill downloads the pinned agents from the npm registry.
pub fn tools_volume_filled() -> Result<(), String> {
    static FILLED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    FILLED
        .get_or_init(|| {
            let out = super::Run::new(&["tools", "install"])
                .deadline(std::time::Duration::from_secs(900))
                .output();
            match out.code {
                Some(0) => Ok(()),
                _ => Err(format!(
                    "`agent-runner tools install` failed (it needs the npm registry once per host): {}",
                    out.stderr.trim()
                )),
            }
        })
        .clone()
}

/// The MCP test image testdata/setup-mcp.sh builds.
pub const MCP_IMAGE: &str = "agent-runner-test-mcp:latest";

/// The image sandbox/build.sh builds.
pub const SANDBOX_IMAGE: &str = "agent-runner-codex:latest";
/// The label sandbox/build.sh puts on it (the hash of its recipe).
const RECIPE_LABEL: &str = "agent-runner.sandbox-image";

fn sandbox_image_built() -> Result<(), String> {
    let format = format!("{{{{index .Config.Labels \"{RECIPE_LABEL}\"}}}}");
    let (ok, recipe, stderr) = docker(&["image", "inspect", "-f", &format, SANDBOX_IMAGE]);
    if ok && !recipe.trim().is_empty() {
        return Ok(());
    }
    let why = if ok {
        format!("{SANDBOX_IMAGE} was not built by sandbox/build.sh")
    } else {
        format!("{SANDBOX_IMAGE} is not available ({})", stderr.trim())
    };
    Err(format!(
        "{why}; `make sandbox-image` builds it (without an image registry this needs root: it bootstraps Debian with debootstrap; codex comes from the npm registry)"
    ))
}
