//! A workspace: a project directory (`root_dir`) plus metadata kept outside it, in
//! `$AGENT_RUNNER_HOME/workspaces/<id>/` (SPEC §11). The id is derived from the
//! canonical root_dir alone, so any program can find a directory's workspace.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::PipelineError;
use super::defaults::Defaults;
use crate::timestamp::Timestamp;

/// Environment variable naming the metadata home (default `~/.multiverse`).
pub const HOME_ENV: &str = "AGENT_RUNNER_HOME";

/// A workspace, opened.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub id: String,
    /// Canonical (absolute, symlinks resolved).
    pub root_dir: PathBuf,
    /// The metadata directory.
    pub dir: PathBuf,
    pub created_at: String,
    pub defaults: Defaults,
}

/// `workspace.json`.
#[derive(Debug, Serialize, Deserialize)]
struct WorkspaceFile {
    id: String,
    root_dir: PathBuf,
    created_at: String,
    #[serde(default)]
    defaults: Defaults,
}

/// The workspace id of a canonical root_dir: the first 12 hex digits of the UUID v5
/// (URL namespace) of `file://<root_dir>`.
pub fn workspace_id(root_dir: &Path) -> String {
    let url = format!("file://{}", root_dir.display());
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, url.as_bytes())
        .simple()
        .to_string()[..12]
        .to_string()
}

/// `$AGENT_RUNNER_HOME`, else `$HOME/.multiverse`.
pub fn home(var: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, PipelineError> {
    match (var(HOME_ENV), var("HOME")) {
        (Some(dir), _) if !dir.is_empty() => Ok(PathBuf::from(dir)),
        (_, Some(home)) if !home.is_empty() => Ok(Path::new(&home).join(".multiverse")),
        _ => Err(PipelineError::Invalid(format!(
            "neither {HOME_ENV} nor HOME is set: cannot tell where workspaces live"
        ))),
    }
}

impl Workspace {
    /// Opens the workspace of `root` (a directory), creating it on first use.
    pub fn open(home: &Path, root: &Path) -> Result<Workspace, PipelineError> {
        let root_dir = canonical_dir(root)?;
        let id = workspace_id(&root_dir);
        let dir = home.join("workspaces").join(&id);
        let file = dir.join("workspace.json");
        let workspace = match std::fs::read(&file) {
            Ok(bytes) => {
                let parsed: WorkspaceFile = serde_json::from_slice(&bytes).map_err(|e| {
                    PipelineError::Invalid(format!(
                        "{}: not a valid workspace file: {e}",
                        file.display()
                    ))
                })?;
                Workspace {
                    id,
                    root_dir,
                    dir,
                    created_at: parsed.created_at,
                    defaults: parsed.defaults,
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let workspace = Workspace {
                    id,
                    root_dir,
                    dir,
                    created_at: Timestamp::now().to_string(),
                    defaults: Defaults::default(),
                };
                workspace.create_dirs()?;
                workspace.save()?;
                return Ok(workspace);
            }
            Err(e) => return Err(PipelineError::io("read", &file)(e)),
        };
        workspace.create_dirs()?;
        Ok(workspace)
    }

    /// Writes `workspace.json` (atomically).
    pub fn save(&self) -> Result<(), PipelineError> {
        let file = WorkspaceFile {
            id: self.id.clone(),
            root_dir: self.root_dir.clone(),
            created_at: self.created_at.clone(),
            defaults: self.defaults.clone(),
        };
        let mut json = serde_json::to_vec_pretty(&file)
            .map_err(|e| PipelineError::Invalid(format!("cannot encode workspace.json: {e}")))?;
        json.push(b'\n');
        let path = self.dir.join("workspace.json");
        super::atomic_file::write(&path, &json).map_err(PipelineError::io("write", path))
    }

    fn create_dirs(&self) -> Result<(), PipelineError> {
        for dir in [
            self.tasks_dir(),
            self.queue_dir(),
            self.running_dir(),
            self.results_dir(),
            self.failed_dir(),
            self.logs_dir(),
        ] {
            std::fs::create_dir_all(&dir).map_err(PipelineError::io("create", dir))?;
        }
        Ok(())
    }

    /// `tasks/`: one JSON Lines file per task (the TaskStore).
    pub fn tasks_dir(&self) -> PathBuf {
        self.dir.join("tasks")
    }

    /// `ipc/queue/`: jobs waiting to be claimed.
    pub fn queue_dir(&self) -> PathBuf {
        self.dir.join("ipc/queue")
    }

    /// `ipc/running/`: claimed jobs (a rename from the queue is the claim).
    pub fn running_dir(&self) -> PathBuf {
        self.dir.join("ipc/running")
    }

    /// `ipc/results/`: one result document per finished job.
    pub fn results_dir(&self) -> PathBuf {
        self.dir.join("ipc/results")
    }

    /// `ipc/failed/`: job files that could not be read, each with why.
    pub fn failed_dir(&self) -> PathBuf {
        self.dir.join("ipc/failed")
    }

    /// `logs/`: a directory of logs per job.
    pub fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// Per-job log directory: builder.log, task-config.yaml, runner.stderr.log.
    pub fn job_log_dir(&self, job_id: &str) -> PathBuf {
        self.logs_dir().join(job_id)
    }

    /// Where isolated attempts get their clones.
    pub fn clones_dir(&self) -> PathBuf {
        self.dir.join("clones")
    }

    /// Where running orchestrators' bundlers put their bundles.
    pub fn bundles_dir(&self) -> PathBuf {
        self.dir.join("bundles")
    }
}

fn canonical_dir(root: &Path) -> Result<PathBuf, PipelineError> {
    let resolved = std::fs::canonicalize(root).map_err(|e| {
        PipelineError::Invalid(format!("workspace directory {}: {e}", root.display()))
    })?;
    if !resolved.is_dir() {
        return Err(PipelineError::Invalid(format!(
            "workspace directory {} is not a directory",
            root.display()
        )));
    }
    Ok(resolved)
}

/// A workspace of a fresh project under the temp directory, and that directory (to
/// remove), for unit tests.
#[cfg(test)]
pub(crate) fn scratch(name: &str) -> (Workspace, PathBuf) {
    let base = std::env::temp_dir().join(format!("ar-{name}-{}", super::id::random_hex(8)));
    std::fs::create_dir_all(base.join("root")).unwrap();
    let ws = Workspace::open(&base.join("home"), &base.join("root")).unwrap();
    (ws, base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_the_uuid_v5_of_the_file_url() {
        // Python: uuid.uuid5(uuid.NAMESPACE_URL, "file:///work/project").hex[:12]
        assert_eq!(workspace_id(Path::new("/work/project")), "e9ce6f3fdb8e");
        assert_ne!(workspace_id(Path::new("/a")), workspace_id(Path::new("/b")));
    }

    #[test]
    fn home_prefers_the_variable() {
        let var = |n: &str| (n == "HOME").then(|| "/home/u".to_string());
        assert_eq!(home(&var).unwrap(), Path::new("/home/u/.multiverse"));
        let var = |n: &str| Some(format!("/x/{n}"));
        assert_eq!(home(&var).unwrap(), Path::new("/x/AGENT_RUNNER_HOME"));
        assert!(home(&|_| None).is_err());
    }

    #[test]
    fn open_creates_the_layout_once() {
        let base = std::env::temp_dir().join(format!("ar-ws-{}", super::super::id::random_hex(8)));
        let root = base.join("project");
        std::fs::create_dir_all(&root).unwrap();
        let ws = Workspace::open(&base.join("home"), &root.join(".")).unwrap();
        assert_eq!(ws.root_dir, std::fs::canonicalize(&root).unwrap());
        assert_eq!(ws.id, workspace_id(&ws.root_dir));
        for sub in [
            "tasks",
            "ipc/queue",
            "ipc/running",
            "ipc/results",
            "ipc/failed",
            "logs",
        ] {
            assert!(ws.dir.join(sub).is_dir(), "{sub}");
        }
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(ws.dir.join("workspace.json")).unwrap()).unwrap();
        assert_eq!(json["id"], ws.id.as_str());
        assert_eq!(json["root_dir"], ws.root_dir.to_str().unwrap());
        let again = Workspace::open(&base.join("home"), &root).unwrap();
        assert_eq!(again.created_at, ws.created_at);
        assert!(Workspace::open(&base.join("home"), &base.join("missing")).is_err());
        std::fs::remove_dir_all(base).unwrap();
    }
}
