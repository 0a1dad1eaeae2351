//! The real worker image, agent-runner-codex:latest (Debian, git, the real Codex CLI),
//! built by sandbox/build.sh; `make test` makes it ready (testdata/setup-sandbox-image.sh).
//! Tests that need it start with
//! `let Some(image) = sandbox_image::require("test name") else { return };`.

use std::io::Write;

use super::docker::docker;

/// The image sandbox/build.sh builds.
pub const SANDBOX_IMAGE: &str = "agent-runner-codex:latest";
/// The label sandbox/build.sh puts on it (the hash of its recipe).
const RECIPE_LABEL: &str = "agent-runner.sandbox-image";

/// True when the CI variable says this is a CI run.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
}

/// The sandbox image's name when it has been built. Otherwise, under CI, panics: the
/// suite must not pass without the real-codex tests. Elsewhere, prints (past the test
/// harness's output capture) that `test` is skipped and how to build the image, and
/// returns None.
pub fn require(test: &str) -> Option<&'static str> {
    let format = format!("{{{{index .Config.Labels \"{RECIPE_LABEL}\"}}}}");
    let (ok, recipe, stderr) = docker(&["image", "inspect", "-f", &format, SANDBOX_IMAGE]);
    if ok && !recipe.trim().is_empty() {
        return Some(SANDBOX_IMAGE);
    }
    let why = if ok {
        format!("{SANDBOX_IMAGE} was not built by sandbox/build.sh")
    } else {
        format!("{SANDBOX_IMAGE} is not available ({})", stderr.trim())
    };
    assert!(
        !in_ci(),
        "{why}; CI is set, so the real-codex tests must run: `make test-env` builds the image \
         (see the output of testdata/setup-sandbox-image.sh)"
    );
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {why}. Build it with `make sandbox-image` (without an image registry \
         this needs root: it bootstraps Debian with debootstrap; codex comes from the npm registry)."
    );
    None
}
