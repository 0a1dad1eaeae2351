//! A cluster's probe verdicts (egress enforced, agent-runner's seccomp profile on
//! its nodes) kept an hour on this machine, so tasks pay a probe Pod once an hour
//! per cluster: `$XDG_CACHE_HOME/agent-runner/clusters/<kind>-<cluster digest>.json`
//! (else `~/.cache/…`), the verdict's fields beside `at` (seconds since the epoch).
//! An unreadable, foreign or old file is no verdict: the probe runs again.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::super::BackendError;

/// How long a verdict is kept.
const KEPT: Duration = Duration::from_secs(3600);
/// The largest verdict file read.
const MAX_FILE: u64 = 64 * 1024;

#[derive(serde::Serialize, serde::Deserialize)]
struct Kept<V> {
    at: u64,
    #[serde(flatten)]
    verdict: V,
}

/// The verdict of `kind` (`egress`, `seccomp-<profile>`) on `cluster`: the kept one
/// when it is younger than an hour and `fresh` is false, else `probe`'s, kept.
pub(super) fn verdict<V: Serialize + DeserializeOwned>(
    kind: &str,
    cluster: &str,
    fresh: bool,
    probe: impl FnOnce() -> Result<V, BackendError>,
) -> Result<V, BackendError> {
    let file = file(kind, cluster);
    if let Some(kept) = file.as_deref().filter(|_| !fresh).and_then(read) {
        return Ok(kept);
    }
    let verdict = probe()?;
    if let Some(file) = file {
        keep(&file, kind, &verdict);
    }
    Ok(verdict)
}

/// Where the verdict of `kind` on `cluster` is kept.
pub(super) fn file(kind: &str, cluster: &str) -> Option<PathBuf> {
    let dir = agent_runner_core::cache_dir::for_kind("clusters")?;
    let digest = ring::digest::digest(&ring::digest::SHA256, cluster.as_bytes());
    let key: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(dir.join(format!("{kind}-{key}.json")))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn read<V: DeserializeOwned>(file: &Path) -> Option<V> {
    let bytes = agent_runner_core::fs::read::whole(file, MAX_FILE).ok()?;
    let kept: Kept<V> = serde_json::from_slice(&bytes).ok()?;
    (now().saturating_sub(kept.at) <= KEPT.as_secs()).then_some(kept.verdict)
}

fn keep<V: Serialize>(file: &Path, kind: &str, verdict: &V) {
    let kept = Kept { at: now(), verdict };
    let written = file
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| serde_json::to_vec(&kept).map_err(std::io::Error::other))
        .and_then(|json| agent_runner_core::fs::atomic::write(file, &json));
    if let Err(e) = written {
        log::warn!(
            "cannot keep the {kind} probe's verdict in {}: {e}",
            file.display()
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Seen {
        reached: Vec<String>,
    }

    #[test]
    fn a_verdict_is_kept_an_hour_and_probed_again_after_or_when_fresh() {
        let dir = agent_runner_core::fs::testing::scratch("kept-verdict");
        let path = dir.join("v.json");
        let seen = Seen {
            reached: vec!["10.0.0.1:443".into()],
        };
        keep(&path, "test", &seen);
        assert_eq!(read::<Seen>(&path), Some(seen));
        let old = serde_json::json!({"at": now() - KEPT.as_secs() - 1, "reached": []});
        std::fs::write(&path, old.to_string()).unwrap();
        assert_eq!(read::<Seen>(&path), None, "past the hour");
        std::fs::write(&path, "{\"at\": 1, \"reached\": 3}").unwrap();
        assert_eq!(read::<Seen>(&path), None, "not a verdict");
        let _ = std::fs::remove_dir_all(dir);
    }
}
