//! The files of an attempt that the web view shows: the orchestrator's logs of the
//! job (`logs/<job-id>/`), the runner's logs and the Task Note (in `.agent-runner/`
//! of the directory the attempt ran in, or where the orchestrator kept them after
//! removing a succeeded attempt's clone). A request names a task, one of its attempts
//! and a file name from a fixed set; the path is built here from what the TaskStore
//! records, never taken from the request or from the paths the TaskStore's lines
//! hold (`attempt_files`).
//!
//! Those directories are written by the worker (untrusted, SPEC §9), so every file
//! is reached through `fs::Dir`: component by component, no symlink followed, only
//! regular files read, and only a bounded amount.

use std::path::PathBuf;

use super::super::Workspace;
use crate::store::attempt_files;
use crate::store::id;
use crate::store::task_file::Attempt;
use agent_runner_core::fs::Dir;

/// The orchestrator's files of a job, in `logs/<job-id>/`.
pub(crate) const JOB_FILES: [&str; 3] = ["builder.log", "task-config.yaml", "runner.stderr.log"];
/// The name under which an attempt's Task Note is served.
pub(crate) const NOTE: &str = "note.md";
/// Most bytes of a file served or rendered.
pub(crate) const MAX_FILE: u64 = 8 << 20;
/// Most runner logs of each kind looked for.
const MAX_RUNNER_LOGS: usize = 200;

/// A file of an attempt, by the name a URL gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AttemptFile {
    /// One of `JOB_FILES`.
    Job(&'static str),
    /// `run-<n>.log` or `test-<n>.log` of the runner.
    Runner(String),
    /// The Task Note.
    Note,
}

impl AttemptFile {
    /// The file a URL's last segment names, if it is one we serve.
    pub(crate) fn parse(name: &str) -> Option<AttemptFile> {
        if let Some(known) = JOB_FILES.iter().find(|f| **f == name) {
            return Some(AttemptFile::Job(known));
        }
        if name == NOTE {
            return Some(AttemptFile::Note);
        }
        let number = name
            .strip_prefix("run-")
            .or_else(|| name.strip_prefix("test-"))?
            .strip_suffix(".log")?;
        let plain = !number.is_empty()
            && number.len() <= 6
            && number.bytes().all(|b| b.is_ascii_digit())
            && !number.starts_with('0');
        plain.then(|| AttemptFile::Runner(name.to_string()))
    }

    /// The name in URLs.
    pub(crate) fn name(&self) -> &str {
        match self {
            AttemptFile::Job(name) => name,
            AttemptFile::Runner(name) => name,
            AttemptFile::Note => NOTE,
        }
    }
}

/// The path of attempt `attempt`'s Task Note, as shown on a page.
pub(crate) fn note_path(ws: &Workspace, task_id: &str, attempt: &Attempt) -> Option<PathBuf> {
    attempt_files::note_path(ws, task_id, attempt)
}

/// Reads `file` of `attempt` (of task `task_id`): at most `MAX_FILE` bytes, and
/// whether there was more.
pub(crate) fn read(
    ws: &Workspace,
    task_id: &str,
    attempt: &Attempt,
    file: &AttemptFile,
) -> std::io::Result<(Vec<u8>, bool)> {
    let not_found = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
    if !id::is_valid(task_id) || !id::is_valid(&attempt.job_id) {
        return Err(not_found());
    }
    let (dir, name) = match file {
        AttemptFile::Job(name) => (
            Dir::open(&ws.logs_dir())?.existing(&attempt.job_id)?,
            name.to_string(),
        ),
        AttemptFile::Runner(name) => (
            runner_logs(ws, task_id, attempt).ok_or_else(not_found)??,
            name.clone(),
        ),
        AttemptFile::Note => (
            private_dir(ws, task_id, attempt).ok_or_else(not_found)??,
            format!("task-{task_id}.md"),
        ),
    };
    let mut bytes = dir.read(&name, MAX_FILE + 1)?;
    let cut = bytes.len() as u64 > MAX_FILE;
    bytes.truncate(MAX_FILE as usize);
    Ok((bytes, cut))
}

/// The files `attempt` has, in the order a page lists them.
pub(crate) fn list(ws: &Workspace, task_id: &str, attempt: &Attempt) -> Vec<AttemptFile> {
    let mut files = Vec::new();
    if !id::is_valid(task_id) || !id::is_valid(&attempt.job_id) {
        return files;
    }
    if let Ok(dir) = Dir::open(&ws.logs_dir()).and_then(|d| d.existing(&attempt.job_id)) {
        for name in JOB_FILES {
            if dir.exists(name).unwrap_or(false) {
                files.push(AttemptFile::Job(name));
            }
        }
    }
    if let Some(Ok(dir)) = private_dir(ws, task_id, attempt)
        && dir.exists(&format!("task-{task_id}.md")).unwrap_or(false)
    {
        files.push(AttemptFile::Note);
    }
    if let Some(Ok(dir)) = runner_logs(ws, task_id, attempt) {
        for kind in ["run", "test"] {
            for n in 1..=MAX_RUNNER_LOGS {
                let name = format!("{kind}-{n}.log");
                if !dir.exists(&name).unwrap_or(false) {
                    break;
                }
                files.push(AttemptFile::Runner(name));
            }
        }
    }
    files
}

/// The attempt's runner files (`attempt_files::runner_dir`), opened.
fn private_dir(ws: &Workspace, task_id: &str, attempt: &Attempt) -> Option<std::io::Result<Dir>> {
    let (dir, name) = attempt_files::runner_dir(ws, task_id, attempt)?;
    Some(Dir::open(&dir).and_then(|d| d.existing(name)))
}

/// `logs/<task-id>/` of the attempt's runner files.
fn runner_logs(ws: &Workspace, task_id: &str, attempt: &Attempt) -> Option<std::io::Result<Dir>> {
    let dir = private_dir(ws, task_id, attempt)?;
    Some(dir.and_then(|d| d.existing("logs")?.existing(task_id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_names_are_files() {
        assert_eq!(
            AttemptFile::parse("builder.log"),
            Some(AttemptFile::Job("builder.log"))
        );
        assert_eq!(AttemptFile::parse("note.md"), Some(AttemptFile::Note));
        assert_eq!(
            AttemptFile::parse("test-12.log"),
            Some(AttemptFile::Runner("test-12.log".into()))
        );
        for bad in [
            "",
            "..",
            "../builder.log",
            "run-.log",
            "run-01.log",
            "run-1.log/x",
            "run-1234567.log",
            "run-1.txt",
            "task-t-1.md",
            "workspace.json",
        ] {
            assert_eq!(AttemptFile::parse(bad), None, "{bad}");
        }
    }
}
