//! `runner.worker.caches` (SPEC §21): each path a Docker volume per repository and
//! path, `agent-runner-cache-<repo-key>-<hash>`, made with labels that say whose it
//! is, so that `agent-runner cache ls|rm` find them and no task of another
//! repository ever gets one.
//!
//! A repository is not its path: another repository cloned where one was before
//! must not find the first one's caches. Its key is a digest of this machine, its
//! directory and a random id it keeps in `.agent-runner/state/cache-id`, made at its
//! first task with caches (a new clone in the same place has none yet, so a new
//! id; no worker can write there: `.agent-runner/` is read-only in the sandbox).
//! The volume's labels carry the key, and a volume of that name whose labels say
//! otherwise is refused, never mounted (`backend::volume_labels`).
//!
//! A worker can write what later tasks of the same repository read there
//! (docs/security-model.md); so a sandbox whose setup has secrets
//! (`task.setup.env`) mounts no cache at all (`worker::sandbox`): setup's secrets
//! never meet what a worker could have written there. `caches: []` has none.

use std::path::Path;

use crate::backend::{Backend, BackendError, Volume};

/// Every cache volume has it (its value: the repository it belongs to).
pub const LABEL_REPO: &str = agent_runner_settings::labels::CACHE_REPO;
/// The path in the sandbox the volume is mounted at.
pub const LABEL_PATH: &str = agent_runner_settings::labels::CACHE_PATH;
/// The repository's key (see the module documentation).
pub const LABEL_KEY: &str = agent_runner_settings::labels::CACHE_KEY;
/// The name prefix of every cache volume.
pub const PREFIX: &str = "agent-runner-cache-";
/// The repository's random id, in `.agent-runner/state/`.
const ID_FILE: &str = "cache-id";

/// Why the caches cannot be named, listed or removed.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("runner.worker.caches: {}: {source}", .repo.display())]
    Repository {
        repo: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(
        "runner.worker.caches: the repository's cache id ({0}); remove .agent-runner/state/{ID_FILE} to make a new one"
    )]
    Id(std::io::Error),
    #[error("{0} is not a cache volume of agent-runner's (see `agent-runner cache ls`)")]
    NotOurs(String),
    #[error(transparent)]
    Engine(#[from] BackendError),
}

/// A repository as its caches know it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Repository {
    /// Its directory, symlinks resolved, for people and `cache rm --repo`.
    dir: String,
    /// The digest of this machine, the directory and the repository's id (hex).
    key: String,
}

/// The repository `repo` as its caches know it: its id read, or made on first use.
fn repository(repo: &Path) -> Result<Repository, CacheError> {
    let canonical = std::fs::canonicalize(repo).map_err(|source| CacheError::Repository {
        repo: repo.to_path_buf(),
        source,
    })?;
    let io = CacheError::Id;
    let state = agent_runner_core::private_dir::open(&canonical)
        .and_then(|dir| dir.subdir("state"))
        .map_err(io)?;
    let valid = |bytes: &[u8]| {
        let id = String::from_utf8_lossy(bytes).trim().to_string();
        (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
    };
    let id = match state.read(ID_FILE, 64) {
        Ok(bytes) => valid(&bytes).ok_or_else(|| {
            io(std::io::Error::other(format!(
                "{} is not one",
                state.join(ID_FILE).display()
            )))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = uuid::Uuid::new_v4().simple().to_string();
            state.write_atomic(ID_FILE, id.as_bytes()).map_err(io)?;
            // Two first tasks at once: both go on with the one that stayed.
            valid(&state.read(ID_FILE, 64).map_err(io)?).unwrap_or(id)
        }
        Err(e) => return Err(io(e)),
    };
    let machine = agent_runner_core::owner::Owner::this_process().host;
    let dir = canonical.display().to_string();
    let whose = format!("{machine}\0{dir}\0{id}");
    let digest = ring::digest::digest(&ring::digest::SHA256, whose.as_bytes());
    let key = digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Repository { dir, key })
}

/// The volumes of `paths` for `repo` (its id made if it has none yet).
pub(crate) fn volumes(repo: &Path, paths: &[String]) -> Result<Vec<Volume>, CacheError> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let repository = repository(repo)?;
    Ok(paths
        .iter()
        .map(|path| Volume {
            name: format!(
                "{PREFIX}{}-{}",
                &repository.key[..12],
                hex12(path.as_bytes())
            ),
            target: path.clone(),
            labels: vec![
                (LABEL_REPO.to_string(), repository.dir.clone()),
                (LABEL_PATH.to_string(), path.clone()),
                (LABEL_KEY.to_string(), repository.key.clone()),
            ],
            whose: format!(
                "the cache of {path} of the repository {} on this machine",
                repository.dir
            ),
        })
        .collect())
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

/// Every cache volume on the engine's host, or why they cannot be listed.
pub fn list(backend: &dyn Backend) -> Result<Vec<Cache>, CacheError> {
    let mut caches: Vec<Cache> = backend
        .labelled_volumes(LABEL_REPO, &[LABEL_REPO, LABEL_PATH])?
        .into_iter()
        .filter(|volume| volume.name.starts_with(PREFIX))
        .map(|volume| {
            let [repo, path] = <[String; 2]>::try_from(volume.values).unwrap_or_default();
            Cache {
                name: volume.name,
                repo,
                path,
            }
        })
        .collect();
    caches.sort_by(|a, b| (&a.repo, &a.path).cmp(&(&b.repo, &b.path)));
    Ok(caches)
}

/// Removes the cache volume `name` (only one of ours: its name and label say so).
pub fn remove(backend: &dyn Backend, name: &str) -> Result<(), CacheError> {
    if !list(backend)?.iter().any(|c| c.name == name) {
        return Err(CacheError::NotOurs(name.to_string()));
    }
    Ok(backend.remove_volume(name)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_per_repository_and_path() {
        let a = agent_runner_core::fs::testing::scratch("cache-a");
        let b = agent_runner_core::fs::testing::scratch("cache-b");
        let paths = ["/root/.cache/pip".to_string(), "/root/.npm".to_string()];
        let (va, vb) = (volumes(&a, &paths).unwrap(), volumes(&b, &paths).unwrap());
        assert_eq!(
            va,
            volumes(&a, &paths).unwrap(),
            "the same repository, the same volumes"
        );
        assert_ne!(va[0].name, va[1].name);
        assert_ne!(va[0].name, vb[0].name, "another repository, another volume");
        assert!(va[0].name.starts_with(PREFIX) && va[0].name.len() == PREFIX.len() + 25);
        assert_eq!(va[0].target, "/root/.cache/pip");
        assert!(volumes(&a, &[]).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&b);
    }

    /// Issue 41 (attack round 5, finding 2): caches were named from the
    /// repository's path alone, so a repository cloned where another one was got
    /// the first one's caches (and what its worker planted there).
    #[test]
    fn another_repository_in_the_same_place_has_other_caches() {
        let place = agent_runner_core::fs::testing::scratch("cache-place");
        let paths = ["/root/.cache/pip".to_string()];
        let first = volumes(&place, &paths).unwrap();
        std::fs::remove_dir_all(&place).unwrap();
        std::fs::create_dir_all(&place).unwrap();
        let second = volumes(&place, &paths).unwrap();
        assert_ne!(first[0].name, second[0].name);
        assert_ne!(first[0].labels, second[0].labels);
        assert_eq!(
            first[0].labels[0], second[0].labels[0],
            "the same directory"
        );
        // A cache id that is not one is an error naming the file, not a new id.
        std::fs::write(place.join(".agent-runner/state/cache-id"), "x").unwrap();
        let e = volumes(&place, &paths).unwrap_err().to_string();
        assert!(e.contains(".agent-runner/state/cache-id"), "{e}");
        let _ = std::fs::remove_dir_all(&place);
    }
}
