//! Docker helpers for tests. The daemon and the test worker image are real; they are
//! made ready by testdata/setup-docker.sh (run by `make test`).

use std::process::Command;

/// The image built by testdata/setup-docker.sh.
pub const TEST_IMAGE: &str = "agent-runner-test-worker:latest";

/// Runs `docker <args>`; returns (success, stdout, stderr).
pub fn docker(args: &[&str]) -> (bool, String, String) {
    let out = Command::new("docker")
        .args(args)
        .output()
        .expect("docker CLI on PATH");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Names of containers (running or not) carrying `label=value`.
pub fn containers_labelled(label: &str, value: &str) -> Vec<String> {
    let filter = format!("label={label}={value}");
    let (_, out, _) = docker(&["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"]);
    out.lines().map(str::to_string).collect()
}
