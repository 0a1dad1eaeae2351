//! The container runtime a sandbox runs under (`runner.sandbox.runtime`, SPEC §28):
//! `docker run --runtime NAME`, one the daemon has registered (`runc` is its own;
//! gVisor's `runsc` is registered in its daemon.json). Which ones a daemon knows
//! (`docker info`), for `doctor`, `hosts check` and the refusal of a start that
//! names another: before any paid call, since the sandbox starts first.

use super::daemon;
use std::time::Duration;

use super::docker_cli;
use super::error::BackendError;
use agent_runner_core::interrupt::Interrupt;

/// The runtimes the daemon has registered, by name (sorted).
pub fn known(deadline: Duration) -> Result<Vec<String>, BackendError> {
    let out = daemon::call(&INFO_ARGS, deadline, Interrupt::never())?;
    if !out.ok {
        return Err(BackendError::Failed {
            command: "docker info --format '{{json .Runtimes}}'".into(),
            detail: docker_cli::last_lines(&out.stderr, 3),
        });
    }
    Ok(parse(&out.stdout))
}

/// The command `known` runs, for a caller with a daemon of its own to ask
/// (`hosts check`); its output goes to `parse`.
pub const INFO_ARGS: [&str; 3] = ["info", "--format", "{{json .Runtimes}}"];

/// The names of `docker info`'s `{"runc":{…},"runsc":{…}}` (podman's runtimes
/// have no such map: none).
pub fn parse(json: &str) -> Vec<String> {
    let mut names: Vec<String> =
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(json.trim())
            .map(|map| map.into_iter().map(|(name, _)| name).collect())
            .unwrap_or_default();
    names.sort();
    names
}

/// The runtime `name` (None: the daemon's default) as the daemon has it: its
/// name and what it runs for it (`program_in`), if the daemon says (`docker info`).
pub fn resolve(name: Option<&str>, deadline: Duration) -> Option<(String, Vec<String>)> {
    let out = daemon::call(&RESOLVE_ARGS, deadline, Interrupt::never()).ok()?;
    if !out.ok {
        return None;
    }
    let (default, runtimes) = out.stdout.trim().split_once('\t')?;
    let name = name.unwrap_or(default).to_string();
    let program = program_in(runtimes, &name);
    Some((name, program))
}

const RESOLVE_ARGS: [&str; 3] = [
    "info",
    "--format",
    "{{.DefaultRuntime}}\t{{json .Runtimes}}",
];

/// What `name` runs in `docker info`'s `{"runsc":{"path":…},…}`: its `path`, a
/// containerd shim's `runtimeType` (`io.containerd.runsc.v1`) and its options'
/// `BinaryName`, those it has.
fn program_in(json: &str, name: &str) -> Vec<String> {
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(json.trim()).unwrap_or_default();
    let Some(runtime) = map.get(name) else {
        return Vec::new();
    };
    [
        &runtime["path"],
        &runtime["runtimeType"],
        &runtime["options"]["BinaryName"],
    ]
    .into_iter()
    .filter_map(|v| v.as_str().filter(|s| !s.is_empty()))
    .map(str::to_string)
    .collect()
}

/// Whether `docker run`'s error says its runtime is not one the daemon knows.
pub(crate) fn is_unknown(stderr: &str) -> bool {
    stderr.contains("Unknown runtime specified") || stderr.contains("unknown or invalid runtime")
}

/// Why a sandbox under `runtime` cannot start: the daemon does not know it.
pub fn unknown(runtime: &str, known: &[String]) -> String {
    let known = if known.is_empty() {
        "none listed".to_string()
    } else {
        known.join(", ")
    };
    format!(
        "runner.sandbox.runtime: the Docker daemon does not know the runtime `{runtime}` (it knows: {known}); register it in the daemon's daemon.json (\"runtimes\") and reload the daemon, or leave the key out"
    )
}

/// Why `check` finds `runtime` not usable: the daemon does not know it, or could
/// not say.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{}", unknown(.runtime, .known))]
    Unknown { runtime: String, known: Vec<String> },
    #[error("runner.sandbox.runtime: cannot tell whether the daemon knows `{runtime}`: {source}")]
    Unasked {
        runtime: String,
        source: BackendError,
    },
}

/// `doctor`'s and `hosts check`'s line on `runtime`: whether the daemon knows it.
pub fn check(runtime: &str, deadline: Duration) -> Result<String, RuntimeError> {
    match known(deadline) {
        Ok(known) if known.iter().any(|k| k == runtime) => Ok(format!(
            "runtime {runtime}: registered with the daemon (it knows: {})",
            known.join(", ")
        )),
        Ok(known) => Err(RuntimeError::Unknown {
            runtime: runtime.to_string(),
            known,
        }),
        Err(source) => Err(RuntimeError::Unasked {
            runtime: runtime.to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemons_runtimes_by_name() {
        assert_eq!(
            parse(
                r#"{"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none"]},"runc":{"path":"runc"},"io.containerd.runc.v2":{"path":"runc"}}"#
            ),
            ["io.containerd.runc.v2", "runc", "runsc"]
        );
        assert!(parse("null").is_empty() && parse("").is_empty());
    }

    #[test]
    fn a_runtimes_program_by_its_name() {
        let info = r#"{"secure":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none"]},"runc":{"path":"runc"}}"#;
        assert_eq!(program_in(info, "secure"), ["/usr/bin/runsc"]);
        assert_eq!(program_in(info, "runc"), ["runc"]);
        assert!(program_in(info, "other").is_empty());
        let shims = r#"{"a":{"runtimeType":"io.containerd.runsc.v1"},"b":{"runtimeType":"io.containerd.runc.v2","options":{"BinaryName":"/usr/local/bin/runsc"}}}"#;
        assert_eq!(program_in(shims, "a"), ["io.containerd.runsc.v1"]);
        assert_eq!(
            program_in(shims, "b"),
            ["io.containerd.runc.v2", "/usr/local/bin/runsc"]
        );
        assert!(program_in("null", "runc").is_empty());
    }

    #[test]
    fn docker_and_podman_words_for_an_unknown_runtime() {
        assert!(is_unknown(
            "docker: Error response from daemon: Unknown runtime specified nosuch\n"
        ));
        assert!(!is_unknown("Unable to find image"));
        let why = unknown("nosuch", &["runc".into(), "runsc".into()]);
        assert!(
            why.starts_with("runner.sandbox.runtime:")
                && why.contains("`nosuch`")
                && why.contains("runc, runsc"),
            "{why}"
        );
    }
}
