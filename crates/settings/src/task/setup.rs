//! `task.setup` (SPEC §21): a command run once in each new sandbox before the first
//! paid call, with hosts of its own on the egress allow list and variables only it
//! sees; and `runner.worker.caches`, the paths kept in a volume per repository.

use std::collections::BTreeMap;
use std::time::Duration;

use super::fields::{non_empty, seconds};
use super::host::Host;
use super::input_error::{InputError, InputErrors};
use super::raw::RawSetup;
use super::{Network, WorkerEnv, worker_env};
use crate::allow::AllowList;

/// Default `task.setup.timeout_sec`.
const DEFAULT_SETUP_TIMEOUT_SEC: u64 = 600;
/// Most entries in `runner.worker.caches`.
const MAX_CACHES: usize = 16;
/// Where a cache may not go: the repository, agent-runner's own mounts, and the
/// system's directories a volume over would break or hide.
const NOT_A_CACHE: &[&str] = &[
    "/",
    "/project",
    "/agent-runner-tools",
    "/run/agent-runner",
    "/tmp",
    "/proc",
    "/sys",
    "/dev",
    "/etc",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/usr",
    "/usr/bin",
    "/usr/lib",
    "/root",
    "/home",
    "/var",
    "/var/run",
];

/// `task.setup`, defaults applied.
#[derive(Debug, Clone)]
pub struct SetupSpec {
    /// The shell command (the user's; run from a file, never an argv).
    pub command: String,
    pub timeout: Duration,
    /// Hosts setup may reach besides `runner.worker.allow` (empty: none more).
    pub allow: AllowList,
    /// Variables only setup sees.
    pub env: Vec<WorkerEnv>,
}

/// `task.setup`, each of its problems recorded (None when absent or invalid).
pub(crate) fn setup_spec(
    raw: Option<RawSetup>,
    network: Option<Network>,
    host: &Host,
    problems: &mut InputErrors,
) -> Option<Option<SetupSpec>> {
    let Some(raw) = raw else {
        return Some(None);
    };
    let command = problems.take(non_empty(raw.command).ok_or_else(|| {
        InputError::new(
            "task.setup.command",
            "required when `task.setup` is present (got empty)",
        )
    }));
    let timeout = problems.take(seconds(
        raw.timeout_sec,
        DEFAULT_SETUP_TIMEOUT_SEC,
        "task.setup.timeout_sec",
    ));
    let allow = allow(raw.allow.unwrap_or_default(), network, problems);
    let env = worker_env::entries(raw.env, "task.setup.env", host, problems);
    if let Some(env) = &env {
        for entry in env {
            let field = format!("task.setup.env.{}", entry.name);
            if crate::allow::variables::sets(&entry.name) {
                problems.push(InputError::new(
                    field,
                    "is set by agent-runner (its egress proxy, with network: allowlist)",
                ));
            } else if worker_env::RESERVED.contains(&entry.name) {
                // Setup's variables all go by name; these would reconfigure the
                // host's docker client instead.
                problems.push(
                    InputError::new(
                        field,
                        "is read by the host's docker client; setup cannot set it",
                    )
                    .with_hint("set it in runner.worker.env, or in the setup command itself"),
                );
            }
        }
    }
    Some(Some(SetupSpec {
        command: command?,
        timeout: timeout?,
        allow: allow?,
        env: env?,
    }))
}

fn allow(
    entries: Vec<String>,
    network: Option<Network>,
    problems: &mut InputErrors,
) -> Option<AllowList> {
    if !entries.is_empty() && network.is_some_and(|n| n != Network::Allowlist) {
        problems.push(
            InputError::new(
                "task.setup.allow",
                "is only used with runner.worker.network: allowlist",
            )
            .with_hint("remove it, or set runner.worker.network: allowlist"),
        );
        return None;
    }
    super::allow_entries::allow_rules("task.setup.allow", &entries, problems)
}

/// `runner.worker.caches`: absolute, normalised, distinct paths, none of them a
/// directory a volume must not cover.
pub(crate) fn caches(raw: Option<Vec<String>>, problems: &mut InputErrors) -> Option<Vec<String>> {
    let raw = raw.unwrap_or_default();
    if raw.len() > MAX_CACHES {
        problems.push(InputError::new(
            "runner.worker.caches",
            format!("at most {MAX_CACHES} paths (got {})", raw.len()),
        ));
        return None;
    }
    let mut seen = BTreeMap::new();
    let mut complete = true;
    for (n, path) in raw.iter().enumerate() {
        let field = format!("runner.worker.caches[{n}]");
        match cache_path(path) {
            Err(why) => {
                complete = false;
                problems.push(InputError::new(field, why.to_string()));
            }
            Ok(path) => {
                if let Some(first) = seen.insert(path.clone(), n) {
                    complete = false;
                    problems.push(InputError::new(
                        field,
                        format!("{path} is already runner.worker.caches[{first}]"),
                    ));
                }
            }
        }
    }
    complete.then(|| seen.into_keys().collect())
}

/// Why a path cannot be a cache; the path as shown (cut), or as normalised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NotACache {
    #[error("must be an absolute path in the sandbox (got {0:?})")]
    Relative(String),
    #[error("must not contain control characters, `,` or `:` (got {0:?})")]
    Character(String),
    #[error("must not contain `..` (got {0:?})")]
    Parent(String),
    #[error(
        "{0} cannot be a cache (the repository, agent-runner's own mounts and system directories cannot); name a directory such as /root/.cache/pip"
    )]
    Reserved(String),
}

/// `path` normalised (no `.`, `..`, doubled or trailing `/`), or why it cannot be a
/// cache.
fn cache_path(path: &str) -> Result<String, NotACache> {
    let shown = || agent_runner_core::text::cut_chars(path, 80);
    if !path.starts_with('/') {
        return Err(NotACache::Relative(shown()));
    }
    if path.chars().any(|c| c.is_control() || c == ',' || c == ':') {
        return Err(NotACache::Character(shown()));
    }
    let mut parts = Vec::new();
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." {
            return Err(NotACache::Parent(shown()));
        }
        parts.push(part);
    }
    let normal = format!("/{}", parts.join("/"));
    let under = |dir: &str| normal == dir || normal.starts_with(&format!("{dir}/"));
    if NOT_A_CACHE.contains(&normal.as_str())
        || [
            "/project",
            "/agent-runner-tools",
            "/run/agent-runner",
            "/proc",
            "/sys",
            "/dev",
        ]
        .iter()
        .any(|d| under(d))
    {
        return Err(NotACache::Reserved(normal));
    }
    Ok(normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_paths_are_normalised_and_the_sandboxs_own_refused() {
        assert_eq!(
            cache_path("/root/.cache//pip/").unwrap(),
            "/root/.cache/pip"
        );
        assert_eq!(
            cache_path("/usr/local/cargo/./registry").unwrap(),
            "/usr/local/cargo/registry"
        );
        for bad in [
            "relative/pip",
            "/project",
            "/project/.venv",
            "/agent-runner-tools/x",
            "/",
            "/a/../project",
            "/proc/self",
            "/usr",
            "/tmp",
            "/a:b",
            "/a,b",
        ] {
            assert!(cache_path(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn twice_the_same_cache_is_an_error_naming_both() {
        let mut problems = InputErrors::default();
        let got = caches(
            Some(vec!["/root/.cache/pip".into(), "/root/.cache/pip/".into()]),
            &mut problems,
        );
        assert!(got.is_none());
        let text = format!("{problems:?}");
        assert!(
            text.contains("runner.worker.caches[1]") && text.contains("caches[0]"),
            "{text}"
        );
    }
}
