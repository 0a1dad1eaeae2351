//! Docker helpers for tests. The daemon and the test worker image are real; they are
//! made ready by testdata/setup-docker.sh (run by `make test`).

use std::time::Duration;

use super::Run;

/// The image built by testdata/setup-docker.sh.
pub const TEST_IMAGE: &str = "agent-runner-test-worker:latest";
/// Longest a docker command of a test may take (the daemon answers in well under a
/// second when it is healthy).
const DOCKER_DEADLINE: Duration = Duration::from_secs(120);

/// Runs `docker <args>`; returns (success, stdout, stderr).
pub fn docker(args: &[&str]) -> (bool, String, String) {
    let out = Run::program("docker", args)
        .deadline(DOCKER_DEADLINE)
        .output();
    (out.code == Some(0), out.stdout, out.stderr)
}

/// Runs `docker <args>`, which must succeed: a failing docker fails the test
/// instead of passing for an empty answer. Its stdout.
pub fn docker_ok(args: &[&str]) -> String {
    let (ok, stdout, stderr) = docker(args);
    assert!(ok, "docker {}: {}", args.join(" "), stderr.trim());
    stdout
}

/// Names of containers (running or not) carrying `label=value`.
pub fn containers_labelled(label: &str, value: &str) -> Vec<String> {
    containers_labelled_on(&[], label, value)
}

/// `containers_labelled` with docker's global options `global` (e.g. `--host`).
pub fn containers_labelled_on(global: &[&str], label: &str, value: &str) -> Vec<String> {
    let filter = format!("label={label}={value}");
    let mut args = global.to_vec();
    args.extend(["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"]);
    docker_ok(&args).lines().map(str::to_string).collect()
}
