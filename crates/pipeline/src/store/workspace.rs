//! A workspace: a project directory (`root_dir`) plus metadata kept outside it, in
//! `$AGENT_RUNNER_HOME/workspaces/<id>/` (SPEC §11). The id is derived from the
//! canonical root_dir alone, so any program can find a directory's workspace.
//!
//! The metadata holds what the web view refuses other users: prompts, notes, logs,
//! and whole copies of the repository (clones). So `workspaces/` and each
//! workspace's directory are this user's and mode 0700 whatever the umask, tightened
//! on every open when an older version left them readable (nothing below them is
//! reachable then, so the files need no walk); the pipeline's own directories and
//! files below are created 0700 and 0600 too (`create_dir`, `fs::atomic`, `fs::jsonl`).
//!
//! In-place attempts let the worker write root_dir, so the metadata may not be in
//! it (a worker would rewrite `workspace.json`'s defaults, and with them the next
//! task's worker settings), nor root_dir in the metadata.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::defaults::Defaults;
use crate::PipelineError;
use agent_runner_core::timestamp::Timestamp;

/// Environment variable naming the metadata home (default `~/.multiverse`).
pub(crate) const HOME_ENV: &str = "AGENT_RUNNER_HOME";

/// A workspace, opened.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub id: String,
    /// Canonical (absolute, symlinks resolved).
    pub root_dir: PathBuf,
    /// The metadata directory.
    pub dir: PathBuf,
    pub(crate) created_at: String,
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
pub(crate) fn workspace_id(root_dir: &Path) -> String {
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
        apart(home, &root_dir)?;
        let id = workspace_id(&root_dir);
        let workspaces = home.join("workspaces");
        let dir = workspaces.join(&id);
        for private in [&workspaces, &dir] {
            create_dir(private).map_err(PipelineError::io("create", private))?;
            keep_private(private)?;
        }
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
                    defaults: Defaults::new_workspace(),
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
        agent_runner_core::fs::atomic::write(&path, &json).map_err(PipelineError::io("write", path))
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
            create_dir(&dir).map_err(PipelineError::io("create", dir))?;
        }
        Ok(())
    }

    /// `tasks/`: one JSON Lines file per task (the TaskStore).
    pub(crate) fn tasks_dir(&self) -> PathBuf {
        self.dir.join("tasks")
    }

    /// `ipc/queue/`: jobs waiting to be claimed.
    pub(crate) fn queue_dir(&self) -> PathBuf {
        self.dir.join("ipc/queue")
    }

    /// `ipc/running/`: claimed jobs (a rename from the queue is the claim).
    pub(crate) fn running_dir(&self) -> PathBuf {
        self.dir.join("ipc/running")
    }

    /// `ipc/results/`: one result document per finished job.
    pub(crate) fn results_dir(&self) -> PathBuf {
        self.dir.join("ipc/results")
    }

    /// `ipc/failed/`: job files that could not be read, each with why.
    pub(crate) fn failed_dir(&self) -> PathBuf {
        self.dir.join("ipc/failed")
    }

    /// `wbs.json`: the plan tree and its commit record (`plan::wbs`, `commits`).
    pub(crate) fn wbs_path(&self) -> PathBuf {
        self.dir.join("wbs.json")
    }

    /// `chat.jsonl`: the plan conversation (`plan::chat`).
    pub(crate) fn chat_path(&self) -> PathBuf {
        self.dir.join("chat.jsonl")
    }

    /// `logs/`: a directory of logs per job.
    pub(crate) fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// Per-job log directory: builder.log, task-config.yaml, runner.stderr.log.
    pub(crate) fn job_log_dir(&self, job_id: &str) -> PathBuf {
        self.logs_dir().join(job_id)
    }

    /// Where isolated attempts get their clones.
    pub(crate) fn clones_dir(&self) -> PathBuf {
        self.dir.join("clones")
    }

    /// Where running orchestrators' bundlers put their bundles.
    pub(crate) fn bundles_dir(&self) -> PathBuf {
        self.dir.join("bundles")
    }
}

/// Creates `dir` and its missing parents as directories only this user can enter
/// (0700; the umask can only take more away).
pub(crate) fn create_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Makes the existing directory `dir` 0700 if it is looser; an error if it belongs
/// to another user, who could read everything below it whatever its mode.
fn keep_private(dir: &Path) -> Result<(), PipelineError> {
    let meta = std::fs::metadata(dir).map_err(PipelineError::io("read the mode of", dir))?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(PipelineError::Invalid(format!(
            "{} belongs to uid {}, not to you (uid {me}): its owner could read every workspace in it; set {HOME_ENV} to a directory of your own",
            dir.display(),
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(PipelineError::io("make private (chmod 700)", dir))?;
    }
    Ok(())
}

/// Refuses a home inside root_dir (or equal to it) and a root_dir inside the home.
fn apart(home: &Path, root_dir: &Path) -> Result<(), PipelineError> {
    let home = resolved(home)
        .map_err(|e| PipelineError::Invalid(format!("{HOME_ENV} {}: {e}", home.display())))?;
    if home.starts_with(root_dir) {
        return Err(PipelineError::Invalid(format!(
            "{HOME_ENV} ({}) is inside the workspace directory {}: a worker running there could rewrite the workspace's settings; keep the metadata outside every project (the default is ~/.multiverse)",
            home.display(),
            root_dir.display()
        )));
    }
    if root_dir.starts_with(&home) {
        return Err(PipelineError::Invalid(format!(
            "the workspace directory {} is inside {HOME_ENV} ({}), agent-runner's own metadata (clones of other workspaces among it); use a project directory outside it",
            root_dir.display(),
            home.display()
        )));
    }
    Ok(())
}

/// `path` absolute, with the symlinks of its longest existing part resolved (the
/// rest does not exist yet, so it has none).
fn resolved(path: &Path) -> std::io::Result<PathBuf> {
    let absolute = std::path::absolute(path)?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        match std::fs::canonicalize(existing) {
            Ok(canonical) => {
                let mut out = canonical;
                for part in rest.iter().rev() {
                    match part {
                        Component::ParentDir => {
                            out.pop();
                        }
                        Component::Normal(name) => out.push(name),
                        _ => {}
                    }
                }
                return Ok(out);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let Some(parent) = existing.parent() else {
                    return Err(e);
                };
                rest.extend(existing.components().next_back());
                existing = parent;
            }
            Err(e) => return Err(e),
        }
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

    #[test]
    fn the_metadata_and_the_project_stay_apart() {
        let base = std::env::temp_dir().join(format!("ar-ws-{}", super::super::id::random_hex(8)));
        let root = base.join("project");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::os::unix::fs::symlink(root.join("sub"), base.join("link")).unwrap();
        let inside = |home: PathBuf| {
            let e = Workspace::open(&home, &root).unwrap_err().to_string();
            assert!(e.contains("is inside the workspace directory"), "{e}");
            assert!(!home.join("workspaces").exists(), "nothing created");
        };
        inside(root.join(".home"));
        inside(root.clone());
        inside(root.join("sub/deeper/home"));
        inside(base.join("link/home"));
        inside(base.join("elsewhere/../project/x"));
        let e = Workspace::open(&base, &root).unwrap_err().to_string();
        assert!(e.contains("is inside AGENT_RUNNER_HOME"), "{e}");
        let ws = Workspace::open(&base.join("home"), &root).unwrap();
        let clone = ws.clones_dir().join("j-1");
        std::fs::create_dir_all(&clone).unwrap();
        let e = Workspace::open(&base.join("home"), &clone)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is inside AGENT_RUNNER_HOME"), "{e}");
        // A sibling whose name starts like the project is not inside it.
        assert!(Workspace::open(&base.join("project-home"), &root).is_ok());
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn the_workspaces_are_private_and_an_old_tree_is_made_so() {
        let (ws, base) = scratch("private");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        let workspaces = base.join("home/workspaces");
        assert_eq!(mode(&workspaces), 0o700);
        assert_eq!(mode(&ws.dir), 0o700);
        assert_eq!(mode(&ws.tasks_dir()), 0o700);
        assert_eq!(mode(&ws.dir.join("workspace.json")), 0o600);
        // As an older version left them.
        for dir in [&workspaces, &ws.dir] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Workspace::open(&base.join("home"), &base.join("root")).unwrap();
        assert_eq!(mode(&workspaces), 0o700);
        assert_eq!(mode(&ws.dir), 0o700);
        // Another user's directory (as root, who can make one): its owner reads it all.
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&workspaces, Some(4711), None).unwrap();
            let e = Workspace::open(&base.join("home"), &base.join("root"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("belongs to uid 4711, not to you"), "{e}");
        }
        std::fs::remove_dir_all(base).unwrap();
    }
}
