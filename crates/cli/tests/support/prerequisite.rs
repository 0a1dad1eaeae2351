//! Tests that need what a machine may lack carry `#[ignore = "needs …"]` (the words
//! after "needs" are `root`, `chromium` or `sandbox-image`, joined by " and "), so a
//! plain `cargo test` counts them as ignored instead of passing them. `make test`
//! (testdata/test.sh) runs those whose prerequisites are here, all of them under
//! CI, and says how many it left out and why. A test that runs calls `needs` first:
//! a missing prerequisite fails it, with what to install, so it never passes
//! without doing its work.

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
}

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const SETPRIV: &str = "/usr/bin/setpriv";

/// Fails the test, saying what to do, when `what` is missing here.
pub fn needs(what: Needs) {
    if let Err(why) = check(what) {
        panic!("this test needs {what:?} (`#[ignore = \"needs …\"]`): {why}");
    }
}

/// Whether `what` is here; otherwise why not and how to get it.
pub fn check(what: Needs) -> Result<(), String> {
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
    }
}

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
