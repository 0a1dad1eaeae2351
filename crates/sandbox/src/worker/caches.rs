//! `runner.worker.caches` (SPEC §21): each path a Docker volume per repository and
//! path, `agent-runner-cache-<repo-key>-<hash>`, made with labels that say whose it
//! is, so that `agent-runner cache ls|rm` find them and no task of another
//! repository ever gets one. A worker can write what later tasks of the same
//! repository read there (docs/security-model.md); `caches: []` has none.

use std::path::Path;
use std::time::Duration;

use crate::backend::Volume;
use crate::backend::docker_cli;
use agent_runner_core::interrupt::Interrupt;

/// Every cache volume has it (its value: the repository it belongs to).
pub const LABEL_REPO: &str = "agent-runner.cache.repo";
/// The path in the sandbox the volume is mounted at.
pub const LABEL_PATH: &str = "agent-runner.cache.path";
/// The name prefix of every cache volume.
pub const PREFIX: &str = "agent-runner-cache-";
const SHORT: Duration = Duration::from_secs(30);

/// The repository a cache belongs to: its directory, symlinks resolved.
pub fn repo_key(repo: &Path) -> String {
    let canonical = std::fs::canonicalize(repo).unwrap_or_else(|_| repo.to_path_buf());
    hex12(canonical.as_os_str().as_encoded_bytes())
}

/// The volumes of `paths` for `repo`.
pub(crate) fn volumes(repo: &Path, paths: &[String]) -> Vec<Volume> {
    let key = repo_key(repo);
    let repo_label = std::fs::canonicalize(repo)
        .unwrap_or_else(|_| repo.to_path_buf())
        .display()
        .to_string();
    paths
        .iter()
        .map(|path| Volume {
            name: format!("{PREFIX}{key}-{}", hex12(path.as_bytes())),
            target: path.clone(),
            labels: vec![
                (LABEL_REPO.to_string(), repo_label.clone()),
                (LABEL_PATH.to_string(), path.clone()),
            ],
        })
        .collect()
}

fn hex12(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One cache volume, as `cache ls` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    pub name: String,
    pub repo: String,
    pub path: String,
}

/// Every cache volume on the Docker host, or why they cannot be listed.
pub fn list() -> Result<Vec<Cache>, String> {
    // Names first, then their labels through `inspect`: `{{.Label "…"}}` in `volume
    // ls` is Docker's only, `index .Labels` of `inspect` both engines know (SPEC §24).
    let filter = format!("label={LABEL_REPO}");
    let names = docker_cli::run(
        &["volume", "ls", "-q", "--filter", &filter],
        SHORT,
        Interrupt::never(),
    )
    .map_err(|e| e.to_string())?;
    if !names.ok {
        return Err(format!(
            "`docker volume ls` failed: {}",
            docker_cli::last_lines(&names.stderr, 3)
        ));
    }
    let names: Vec<&str> = names
        .stdout
        .lines()
        .map(str::trim)
        .filter(|name| name.starts_with(PREFIX))
        .collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let format = format!(
        "{{{{.Name}}}}\t{{{{index .Labels \"{LABEL_REPO}\"}}}}\t{{{{index .Labels \"{LABEL_PATH}\"}}}}"
    );
    let mut args = vec!["volume", "inspect", "--format", &format];
    args.extend(names.iter().copied());
    let out = docker_cli::run(&args, SHORT, Interrupt::never()).map_err(|e| e.to_string())?;
    if !out.ok {
        return Err(format!(
            "`docker volume inspect` failed: {}",
            docker_cli::last_lines(&out.stderr, 3)
        ));
    }
    let mut caches: Vec<Cache> = out
        .stdout
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, '\t');
            let name = parts.next()?.to_string();
            name.starts_with(PREFIX).then(|| Cache {
                name,
                repo: parts.next().unwrap_or_default().to_string(),
                path: parts.next().unwrap_or_default().to_string(),
            })
        })
        .collect();
    caches.sort_by(|a, b| (&a.repo, &a.path).cmp(&(&b.repo, &b.path)));
    Ok(caches)
}

/// Removes the cache volume `name` (only one of ours: its name and label say so).
pub fn remove(name: &str) -> Result<(), String> {
    if !list()?.iter().any(|c| c.name == name) {
        return Err(format!(
            "{name} is not a cache volume of agent-runner's (see `agent-runner cache ls`)"
        ));
    }
    let out = docker_cli::run(&["volume", "rm", name], SHORT, Interrupt::never())
        .map_err(|e| e.to_string())?;
    if out.ok {
        Ok(())
    } else {
        Err(format!(
            "`docker volume rm {name}` failed: {}",
            docker_cli::last_lines(&out.stderr, 3)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_per_repository_and_path() {
        let a = std::env::temp_dir().join("agent-runner-cache-test-a");
        let b = std::env::temp_dir().join("agent-runner-cache-test-b");
        let paths = ["/root/.cache/pip".to_string(), "/root/.npm".to_string()];
        let (va, vb) = (volumes(&a, &paths), volumes(&b, &paths));
        assert_eq!(
            va,
            volumes(&a, &paths),
            "the same repository, the same volumes"
        );
        assert_ne!(va[0].name, va[1].name);
        assert_ne!(va[0].name, vb[0].name, "another repository, another volume");
        assert!(va[0].name.starts_with(PREFIX) && va[0].name.len() == PREFIX.len() + 25);
        assert_eq!(va[0].target, "/root/.cache/pip");
    }
}
