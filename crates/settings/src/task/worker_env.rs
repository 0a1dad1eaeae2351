//! `runner.worker.env`: the variables worker and test runs see, and the names that may
//! not take their value from the host.

use std::collections::BTreeMap;

use super::env_ref;
use super::host::Host;
use super::input_error::{InputError, InputErrors};
use super::{EnvValue, WorkerEnv};

/// Names an `env:NAME` entry may not have (compared ignoring case).
///
/// A value taken from the host reaches the container by name: `docker exec -e NAME`
/// with the value in the environment of the host's own `docker` client process
/// (SPEC §6.1: never in an argv). That client, and the loader that starts it, read
/// their own configuration from the same environment, so these names would let a
/// Task YAML change what runs on the host or where the client connects (SPEC §9):
/// program lookup and shell start-up (`PATH`, `ENV`, `BASH_ENV`, `IFS`, `SHELL`), the
/// user's files (`HOME`, `TMPDIR`, `USER`, `LOGNAME`, `XDG_*`), the daemon and its
/// TLS (`DOCKER_*`, `SSL_CERT_*`), proxies (`*_PROXY`), the dynamic loader and libc
/// (`LD_*`, `GLIBC_TUNABLES`, `GCONV_PATH`, `LOCPATH`, `NLSPATH`, `HOSTALIASES`,
/// `LOCALDOMAIN`, `RES_OPTIONS`), the Go runtime docker is built on (`GODEBUG`,
/// `GOMAXPROCS`, `GOGC`, `GOMEMLIMIT`, `GOTRACEBACK`), and the docker CLI's telemetry
/// export (`OTEL_*`). Literal values are not affected: they go on the command line.
pub const RESERVED: Reserved = Reserved {
    names: &[
        "PATH",
        "HOME",
        "TMPDIR",
        "SHELL",
        "USER",
        "LOGNAME",
        "IFS",
        "ENV",
        "BASH_ENV",
        "GLIBC_TUNABLES",
        "GCONV_PATH",
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
        "LOCALDOMAIN",
        "RES_OPTIONS",
        "GODEBUG",
        "GOMAXPROCS",
        "GOGC",
        "GOMEMLIMIT",
        "GOTRACEBACK",
    ],
    prefixes: &["DOCKER_", "LD_", "XDG_", "SSL_CERT_", "OTEL_"],
    suffixes: &["_PROXY"],
};

/// The prefix of agent-runner's own variables in the container (the envelope's
/// `AGENT_RUNNER_FILE*`): no entry may have it.
const OWN_PREFIX: &str = "AGENT_RUNNER_";

/// A set of reserved variable names: exact names, prefixes and suffixes.
pub struct Reserved {
    names: &'static [&'static str],
    prefixes: &'static [&'static str],
    suffixes: &'static [&'static str],
}

impl Reserved {
    /// Whether `name` is reserved, ignoring case.
    pub fn contains(&self, name: &str) -> bool {
        let upper = name.to_ascii_uppercase();
        self.names.contains(&upper.as_str())
            || self.prefixes.iter().any(|p| upper.starts_with(p))
            || self.suffixes.iter().any(|s| upper.ends_with(s))
    }
}

/// The entries of `runner.worker.env` (or another such mapping, at `section`),
/// `env:` values resolved; problems go to `problems`.
pub fn entries(
    raw: Option<BTreeMap<String, String>>,
    section: &str,
    host: &Host,
    problems: &mut InputErrors,
) -> Option<Vec<WorkerEnv>> {
    let mut out = Vec::new();
    let mut complete = true;
    for (name, value) in raw.unwrap_or_default() {
        match entry(name, value, section, host) {
            Ok(entry) => out.push(entry),
            Err(error) => {
                problems.push(error);
                complete = false;
            }
        }
    }
    complete.then_some(out)
}

fn entry(name: String, value: String, section: &str, host: &Host) -> Result<WorkerEnv, InputError> {
    let field = format!(
        "{section}.{}",
        agent_runner_core::text::cut_chars(&name, super::structure::MAX_KEY_SHOWN)
    );
    if !env_ref::is_env_name(&name) {
        return Err(InputError::new(
            field,
            "not a valid variable name (letters, digits, _; not starting with a digit)",
        ));
    }
    if name.to_ascii_uppercase().starts_with(OWN_PREFIX) {
        return Err(InputError::new(
            field,
            format!(
                "names starting with {OWN_PREFIX} are agent-runner's own (it passes files \
                 to the container under them)"
            ),
        ));
    }
    let Some(var) = env_ref::variable(&value, &field)? else {
        return Ok(WorkerEnv {
            name,
            value: EnvValue::Literal(value),
        });
    };
    if RESERVED.contains(&name) {
        return Err(InputError::new(
            field,
            format!(
                "{name} cannot take its value from the host (\"env:{var}\"): such values \
                 reach the container through the host docker client's own environment, \
                 where {name} would change how the client or its loader behaves"
            ),
        )
        .with_hint(format!(
            "give {name} a literal value (it goes on the docker command line), \
             or pass the secret under another name"
        )));
    }
    let value = env_ref::resolve(&var, &field, host)?;
    Ok(WorkerEnv {
        name,
        value: EnvValue::FromHost { var, value },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names_prefixes_and_suffixes_ignore_case() {
        for name in [
            "PATH",
            "path",
            "HOME",
            "TMPDIR",
            "SHELL",
            "USER",
            "LOGNAME",
            "IFS",
            "ENV",
            "BASH_ENV",
            "DOCKER_HOST",
            "DOCKER_CONFIG",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "HTTP_PROXY",
            "https_proxy",
            "NO_PROXY",
            "ALL_PROXY",
            "XDG_CONFIG_HOME",
            "SSL_CERT_FILE",
            "SSL_CERT_DIR",
            "GODEBUG",
            "GOMAXPROCS",
            "GOGC",
            "GOMEMLIMIT",
            "GOTRACEBACK",
            "GLIBC_TUNABLES",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ] {
            assert!(RESERVED.contains(name), "{name} should be reserved");
        }
        for name in [
            "CODEX_API_KEY",
            "NPM_TOKEN",
            "PATHS",
            "MY_HOME",
            "DOCKER",
            "GOPATH",
        ] {
            assert!(!RESERVED.contains(name), "{name} should be allowed");
        }
    }
}
