//! The agent's files as pinned once per image ID on this machine (SPEC §27): an
//! image ID names the image's content (the hash of its configuration, which names
//! its layers' hashes), so what a pinning found in a fresh container of it (where
//! the agent is, which files decide what runs and their hashes, the paths visited to
//! reach them) holds for every fresh container of it started the same way. A start
//! with the pinning cached costs no engine call when the container was started from
//! the image's ID, looked up before it (else one, the container's image ID); the
//! per-run check (`agent_files`) then vouches that the container still has the
//! image's files.
//!
//! The key is everything else a pinning depends on: the agent's kind and where it
//! comes from, the envelope's shell, the tools volume, the task's literal variables
//! (PATH among them), the caches mounted, the user. A pinning is stored only when it
//! was taken from the image's own files (`AgentFiles::cacheable`).
//!
//! Where: `$XDG_CACHE_HOME/agent-runner/agents/<key>.json`, else
//! `$HOME/.cache/agent-runner/agents/`, a directory only the user can enter; written
//! whole by a rename. A file that does not parse is ignored (pinned again).

use std::path::PathBuf;

use super::container::ContainerSpec;

/// Bumped when what is stored changes meaning.
const VERSION: &str = "agent pins 1";
/// Largest cache file read.
const MAX_FILE: u64 = 4 << 20;

/// The key of a pinning of `spec`'s agent in a container of image `image_id`.
pub(crate) fn key(image_id: &str, spec: &ContainerSpec) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    let mut part = |text: &str| {
        context.update(text.as_bytes());
        context.update(b"\0");
    };
    part(VERSION);
    part(image_id);
    part(spec.worker.kind.program());
    part(&format!("{:?}", spec.worker.agent_from));
    part(spec.shell());
    part(spec.tools.as_deref().unwrap_or("-"));
    part(&agent_runner_core::sys::user_and_group().0.to_string());
    let mut env = spec.worker.literal_env();
    env.sort();
    for (name, value) in env {
        part(name);
        part(value);
    }
    for cache in &spec.caches {
        part(&cache.target);
    }
    context
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The pinning stored under `key`, if any (`AgentFiles`, kept as JSON).
pub(crate) fn load<T: serde::de::DeserializeOwned>(key: &str) -> Option<T> {
    let path = dir()?.join(format!("{key}.json"));
    let bytes = agent_runner_core::fs::read::whole(&path, MAX_FILE).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(found) => Some(found),
        Err(e) => {
            log::warn!(
                "{}: not a pinning of agent-runner's ({e}); pinned again",
                path.display()
            );
            None
        }
    }
}

/// Stores `pinned` under `key`; a failure is only logged (the next start pins again).
pub(crate) fn store(key: &str, pinned: &impl serde::Serialize) {
    let Some(dir) = dir() else {
        return;
    };
    let stored = std::fs::create_dir_all(&dir)
        .and_then(|()| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        })
        .and_then(|()| {
            let json = serde_json::to_vec(pinned).map_err(std::io::Error::other)?;
            agent_runner_core::fs::atomic::write(&dir.join(format!("{key}.json")), &json)
        });
    if let Err(e) = stored {
        log::warn!("cannot keep the agent's pinning in {}: {e}", dir.display());
    }
}

/// The cache's directory, None when neither variable is set.
fn dir() -> Option<PathBuf> {
    agent_runner_core::cache_dir::for_kind("agents")
}
