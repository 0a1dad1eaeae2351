//! The IPC queue (SPEC §11–§12), Maildir style: a job is a file. Writers create it
//! under a hidden temp name and `rename` it into `ipc/queue/`, so readers never see
//! half a job. An orchestrator claims a job by renaming it into `ipc/running/`: the
//! rename succeeds for exactly one claimer. Jobs that cannot be read move to
//! `ipc/failed/` with a `<job-id>.error.txt` saying why.
//!
//! Names starting with `.` and names not ending in `.json` are not jobs (temp files);
//! `<job-id>.owner.json` in `running/` names the claimer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::claimant::Claimant;
use super::status::JobState;
use crate::store::id;
use crate::store::tries::TryOf;
use crate::{PipelineError, Workspace};
use agent_runner_core::fs::atomic;
use agent_runner_core::timestamp::Timestamp;

/// Largest job file read.
const MAX_JOB_BYTES: u64 = 64 * 1024;
const OWNER_SUFFIX: &str = ".owner.json";
/// `running/<job-id>.stop`: the user asked for the job to stop (SPEC §19). Not a
/// `.json` name, so no scan of the directory takes it for a job.
const STOP_SUFFIX: &str = ".stop";
/// The error of an attempt the user stopped.
pub(crate) const STOPPED_BY_USER: &str = "stopped by the user";

/// A job file: a request to run a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub(crate) workspace_id: String,
    pub(crate) task_id: String,
    #[serde(default)]
    pub(crate) created_at: String,
    /// The job whose attempt this one continues (`task run --resume`, SPEC §19).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) resume_from: Option<String>,
    /// The job whose clone (`clones/<job-id>`) a resumed attempt runs in: the
    /// first of the attempts it continues, when that one ran in a clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) clone_job: Option<String>,
    /// This job is one try of a best of N run (SPEC §23).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) try_of: Option<TryOf>,
    /// The user's message (SPEC §23): with `restart`, why the plan was rejected
    /// (`task reject`); else a follow-up for the resumed runner (`run --resume
    /// --message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<String>,
    /// Run the continued job's TaskConfig from the start instead of resuming its
    /// runner: a plan rejected (`task reject`) or approved with the user's criteria
    /// (`task approve --criteria`), in the same clone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) restart: bool,
    /// With `restart`: a follow-up after a success whose clone is gone (SPEC §23),
    /// run in a new clone that starts from the task's branch, the previous result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) on_branch: bool,
    /// A job re-queued because its attempt lost this host (SPEC §22): it goes to
    /// another host, and is not re-queued again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) lost_host: Option<String>,
}

/// How a job goes on from an earlier one (`enqueue_continuing`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Continuing {
    pub(crate) resume_from: Option<String>,
    pub(crate) clone_job: Option<String>,
    pub(crate) message: Option<String>,
    pub(crate) restart: bool,
    pub(crate) on_branch: bool,
}

/// A job file in one of the IPC directories.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The file name without `.json`.
    pub(crate) job_id: String,
    pub path: PathBuf,
    pub(crate) modified: SystemTime,
}

/// Writes a new job for `task_id` into the queue; returns its id.
pub(crate) fn enqueue(ws: &Workspace, task_id: &str) -> Result<String, PipelineError> {
    enqueue_continuing(ws, task_id, Continuing::default())
}

/// `enqueue`, of a job that continues job `resume_from`'s attempt (in job
/// `clone_job`'s clone, if it ran in one), as `continuing` says.
pub(crate) fn enqueue_continuing(
    ws: &Workspace,
    task_id: &str,
    continuing: Continuing,
) -> Result<String, PipelineError> {
    queued(
        ws,
        Job {
            resume_from: continuing.resume_from,
            clone_job: continuing.clone_job,
            message: continuing.message,
            restart: continuing.restart,
            on_branch: continuing.on_branch,
            ..Job::new(ws, task_id)
        },
    )
}

/// Writes a job for `task_id` again, after its attempt lost host `host`: placed
/// elsewhere, and never re-queued a second time.
pub(crate) fn requeue_lost(
    ws: &Workspace,
    task_id: &str,
    host: &str,
) -> Result<String, PipelineError> {
    queued(
        ws,
        Job {
            lost_host: Some(host.to_string()),
            ..Job::new(ws, task_id)
        },
    )
}

/// Writes one job per try of `tries` for `task_id` into the queue; returns their ids.
pub(crate) fn enqueue_tries(
    ws: &Workspace,
    task_id: &str,
    tries: Vec<TryOf>,
) -> Result<Vec<String>, PipelineError> {
    let mut ids = Vec::new();
    for try_of in tries {
        let job = Job {
            try_of: Some(try_of),
            ..Job::new(ws, task_id)
        };
        ids.push(queued(ws, job)?);
    }
    Ok(ids)
}

impl Job {
    /// A job for `task_id` created now that carries nothing over: each way of
    /// queueing sets only what its own job carries.
    fn new(ws: &Workspace, task_id: &str) -> Job {
        Job {
            workspace_id: ws.id.clone(),
            task_id: task_id.to_string(),
            created_at: Timestamp::now().to_string(),
            resume_from: None,
            clone_job: None,
            try_of: None,
            message: None,
            restart: false,
            on_branch: false,
            lost_host: None,
        }
    }
}

/// Writes `job` into the queue under a new job id (whole, by rename); returns the id.
fn queued(ws: &Workspace, job: Job) -> Result<String, PipelineError> {
    let job_id = id::new_job_id();
    let path = ws.queue_dir().join(format!("{job_id}.json"));
    let json = serde_json::to_vec(&job).unwrap_or_default();
    atomic::write(&path, &json).map_err(PipelineError::io("write", path))?;
    Ok(job_id)
}

/// The job files in `dir`, oldest first (by modification time, then name).
pub(crate) fn list(dir: &Path) -> Vec<Entry> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut entries: Vec<Entry> = read
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            if name.starts_with('.') || name.ends_with(OWNER_SUFFIX) {
                return None;
            }
            let job_id = name.strip_suffix(".json")?.to_string();
            let modified = entry.metadata().ok()?.modified().ok()?;
            Some(Entry {
                job_id,
                path: entry.path(),
                modified,
            })
        })
        .collect();
    entries.sort_by(|a, b| (a.modified, &a.job_id).cmp(&(b.modified, &b.job_id)));
    entries
}

/// What is wrong with a job file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JobFileError {
    /// A name or an id field that is no id (`id::invalid`'s words).
    #[error("{0}")]
    Id(String),
    #[error("cannot read it: {0}")]
    Read(std::io::Error),
    #[error("not a job (expected {{\"workspace_id\", \"task_id\", \"created_at\"}}): {0}")]
    NotAJob(serde_json::Error),
    #[error("workspace_id is {found:?}, but this is workspace {ours}")]
    OtherWorkspace { found: String, ours: String },
    #[error(transparent)]
    TryOf(#[from] crate::store::tries::TryOfError),
    #[error("try_of with resume_from: a try is never a resumed job")]
    ResumedTry,
    #[error("clone_job without resume_from: only a resumed job runs in another job's clone")]
    CloneWithoutResume,
    #[error(
        "message or restart without resume_from: only a job that goes on from another has them"
    )]
    MessageWithoutResume,
    #[error(
        "on_branch without restart, or with clone_job: a follow-up on the branch runs afresh in a new clone"
    )]
    OnBranch,
    #[error("message: {0}")]
    Message(super::message::MessageError),
}

/// Reads a job file; the error says what is wrong with it.
pub(crate) fn read_job(entry: &Entry, workspace_id: &str) -> Result<Job, JobFileError> {
    if !id::is_valid(&entry.job_id) || entry.job_id.ends_with(".owner") {
        return Err(JobFileError::Id(id::invalid(
            "job file name",
            &entry.job_id,
        )));
    }
    let mut bytes = Vec::new();
    agent_runner_core::fs::read::whole_into(&entry.path, &mut bytes, MAX_JOB_BYTES)
        .map_err(JobFileError::Read)?;
    let job: Job = serde_json::from_slice(&bytes).map_err(JobFileError::NotAJob)?;
    if job.workspace_id != workspace_id {
        return Err(JobFileError::OtherWorkspace {
            found: job.workspace_id,
            ours: workspace_id.to_string(),
        });
    }
    if !id::is_valid(&job.task_id) {
        return Err(JobFileError::Id(id::invalid("task_id", &job.task_id)));
    }
    for (field, value) in [
        ("resume_from", &job.resume_from),
        ("clone_job", &job.clone_job),
    ] {
        if let Some(value) = value.as_ref().filter(|v| !id::is_valid(v)) {
            return Err(JobFileError::Id(id::invalid(field, value)));
        }
    }
    if let Some(try_of) = &job.try_of {
        try_of.check()?;
        if job.resume_from.is_some() {
            return Err(JobFileError::ResumedTry);
        }
    }
    if job.clone_job.is_some() && job.resume_from.is_none() {
        return Err(JobFileError::CloneWithoutResume);
    }
    if (job.message.is_some() || job.restart) && job.resume_from.is_none() {
        return Err(JobFileError::MessageWithoutResume);
    }
    if job.on_branch && (!job.restart || job.clone_job.is_some()) {
        return Err(JobFileError::OnBranch);
    }
    if let Some(message) = &job.message {
        super::message::check_message(message).map_err(JobFileError::Message)?;
    }
    Ok(job)
}

/// Job `job_id` if it is running or queued (running wins: it is looked at first,
/// and a claim moves a job from the queue to running).
pub fn find(ws: &Workspace, job_id: &str) -> Option<(JobState, Job)> {
    if !id::is_valid(job_id) {
        return None;
    }
    [
        (ws.running_dir(), JobState::Running),
        (ws.queue_dir(), JobState::Queued),
    ]
    .into_iter()
    .find_map(|(dir, state)| {
        let entry = Entry {
            job_id: job_id.to_string(),
            path: dir.join(format!("{job_id}.json")),
            modified: SystemTime::UNIX_EPOCH,
        };
        read_job(&entry, &ws.id).ok().map(|job| (state, job))
    })
}

/// Claims a queued job by renaming it into `running/`. False when another process
/// took it first (or it is gone).
pub(crate) fn claim(ws: &Workspace, job_id: &str) -> Result<bool, PipelineError> {
    let from = ws.queue_dir().join(format!("{job_id}.json"));
    let to = ws.running_dir().join(format!("{job_id}.json"));
    match std::fs::rename(&from, &to) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(PipelineError::io("claim", from)(e)),
    }
}

/// Writes `running/<job-id>.owner.json`.
pub(crate) fn write_owner(
    ws: &Workspace,
    job_id: &str,
    owner: &Claimant,
) -> Result<(), PipelineError> {
    let path = owner_path(ws, job_id);
    let json = serde_json::to_vec(owner).unwrap_or_default();
    atomic::write(&path, &json).map_err(PipelineError::io("write", path))
}

/// The owner of a running job, if its file is there and readable.
pub(crate) fn read_owner(ws: &Workspace, job_id: &str) -> Option<(Claimant, SystemTime)> {
    let path = owner_path(ws, job_id);
    let mut bytes = Vec::new();
    agent_runner_core::fs::read::whole_into(&path, &mut bytes, MAX_JOB_BYTES).ok()?;
    let modified = std::fs::metadata(&path).ok()?.modified().ok()?;
    Some((serde_json::from_slice(&bytes).ok()?, modified))
}

fn owner_path(ws: &Workspace, job_id: &str) -> PathBuf {
    ws.running_dir().join(format!("{job_id}{OWNER_SUFFIX}"))
}

/// Moves an unreadable job file from `dir` into `failed/`, with `<job-id>.error.txt`
/// saying why. A file whose name is no job id (it may not even leave room for the
/// suffix) is kept under a new id, its reason naming the file. False when another
/// process moved or claimed it first. The job is moved even if its reason cannot be
/// written (a full disk), so it cannot hold up the queue; the log then has it.
pub(crate) fn move_to_failed(
    ws: &Workspace,
    entry: &Entry,
    reason: &str,
) -> Result<bool, PipelineError> {
    let (job_id, text) = if id::is_valid(&entry.job_id) && !entry.job_id.ends_with(".owner") {
        (entry.job_id.clone(), format!("{reason}\n"))
    } else {
        let name = entry.path.file_name().unwrap_or_default().to_string_lossy();
        let name = agent_runner_core::text::escape_controls(&agent_runner_core::text::cut_chars(
            &name, 300,
        ));
        (
            id::new_job_id(),
            format!("{reason}\n(the job file was {name:?})\n"),
        )
    };
    let to = ws.failed_dir().join(format!("{job_id}.json"));
    match std::fs::rename(&entry.path, &to) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(PipelineError::io("move", &entry.path)(e)),
    }
    let error = ws.failed_dir().join(format!("{job_id}.error.txt"));
    if let Err(e) = atomic::write(&error, text.as_bytes()) {
        log::error!(
            "job {job_id}: moved to {}, but its reason could not be written beside it ({e}): {reason}",
            to.display()
        );
    }
    Ok(true)
}

/// Removes a finished job's files from `running/`.
pub(crate) fn finish(ws: &Workspace, job_id: &str) {
    let _ = std::fs::remove_file(ws.running_dir().join(format!("{job_id}.json")));
    let _ = std::fs::remove_file(owner_path(ws, job_id));
    let _ = std::fs::remove_file(stop_path(ws, job_id));
}

/// Asks for running job `job_id` to stop: `running/<job-id>.stop`, which its
/// attempt looks at before and as its runner starts. False when the job is not
/// running (any more): then no request is left behind.
pub(crate) fn request_stop(ws: &Workspace, job_id: &str) -> Result<bool, PipelineError> {
    let path = stop_path(ws, job_id);
    let request = serde_json::json!({
        "at": Timestamp::now().to_string(),
        "pid": std::process::id(),
    });
    atomic::write(&path, request.to_string().as_bytes())
        .map_err(PipelineError::io("write", &path))?;
    // `finish` removes the job file before its stop request: a request written
    // after that is seen here as one for a job that is gone.
    if std::fs::symlink_metadata(ws.running_dir().join(format!("{job_id}.json"))).is_err() {
        let _ = std::fs::remove_file(&path);
        return Ok(false);
    }
    Ok(true)
}

/// Whether the user asked for running job `job_id` to stop.
pub(crate) fn stop_requested(ws: &Workspace, job_id: &str) -> bool {
    std::fs::symlink_metadata(stop_path(ws, job_id)).is_ok()
}

fn stop_path(ws: &Workspace, job_id: &str) -> PathBuf {
    ws.running_dir().join(format!("{job_id}{STOP_SUFFIX}"))
}

/// For each task with a job queued or running: that state and the job id (running
/// wins over queued).
pub(crate) fn job_states(ws: &Workspace) -> HashMap<String, (JobState, String)> {
    let mut states = HashMap::new();
    for (dir, state) in [
        (ws.queue_dir(), JobState::Queued),
        (ws.running_dir(), JobState::Running),
    ] {
        for entry in list(&dir) {
            if let Ok(job) = read_job(&entry, &ws.id) {
                states.insert(job.task_id, (state, entry.job_id));
            }
        }
    }
    states
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (Workspace, PathBuf) {
        crate::store::workspace::scratch("queue")
    }

    #[test]
    fn a_job_is_claimed_once() {
        let (ws, base) = workspace();
        let job_id = enqueue(&ws, "t-1").unwrap();
        let queued = list(&ws.queue_dir());
        assert_eq!(queued.len(), 1);
        let job = read_job(&queued[0], &ws.id).unwrap();
        assert_eq!(
            (job.task_id.as_str(), job.workspace_id.as_str()),
            ("t-1", ws.id.as_str())
        );
        assert!(claim(&ws, &job_id).unwrap());
        assert!(
            !claim(&ws, &job_id).unwrap(),
            "the second claim finds nothing"
        );
        write_owner(&ws, &job_id, &Claimant::this_process()).unwrap();
        let running = list(&ws.running_dir());
        assert_eq!(running.len(), 1, "the owner file is not a job");
        assert_eq!(
            read_owner(&ws, &job_id).unwrap().0.owner.pid,
            std::process::id()
        );
        assert_eq!(job_states(&ws)["t-1"], (JobState::Running, job_id.clone()));
        finish(&ws, &job_id);
        assert!(
            std::fs::read_dir(ws.running_dir())
                .unwrap()
                .next()
                .is_none()
        );
        std::fs::remove_dir_all(base).unwrap();
    }

    /// A job file written by hand cannot make a follow-up on the branch that is
    /// not one: it restarts from an earlier job, in a new clone.
    #[test]
    fn on_branch_is_only_a_restarted_follow_up_in_a_new_clone() {
        let (ws, base) = workspace();
        let q = ws.queue_dir();
        let job = |name: &str, rest: &str| {
            std::fs::write(
                q.join(format!("{name}.json")),
                format!(
                    r#"{{"workspace_id":"{}","task_id":"t-1","resume_from":"j-0","message":"more"{rest}}}"#,
                    ws.id
                ),
            )
            .unwrap();
            let entry = list(&q).into_iter().find(|e| e.job_id == name).unwrap();
            read_job(&entry, &ws.id)
        };
        assert!(
            job("ok", r#","restart":true,"on_branch":true"#)
                .unwrap()
                .on_branch
        );
        for (name, rest) in [
            ("no-restart", r#","on_branch":true"#),
            (
                "in-a-clone",
                r#","restart":true,"on_branch":true,"clone_job":"j-0""#,
            ),
        ] {
            let e = job(name, rest).unwrap_err().to_string();
            assert!(e.starts_with("on_branch without restart"), "{name}: {e}");
        }
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn temp_files_are_not_jobs_and_bad_jobs_say_why() {
        let (ws, base) = workspace();
        let q = ws.queue_dir();
        std::fs::write(q.join(".j-1.json.tmp-abc"), "{").unwrap();
        std::fs::write(q.join("notes.txt"), "x").unwrap();
        std::fs::write(q.join("bad.json"), "{\"task_id\": 1}").unwrap();
        std::fs::write(
            q.join("other.json"),
            r#"{"workspace_id":"ffffffffffff","task_id":"t"}"#,
        )
        .unwrap();
        std::fs::write(q.join("-x.json"), "{}").unwrap();
        let entries = list(&q);
        let names: Vec<&str> = entries.iter().map(|e| e.job_id.as_str()).collect();
        assert_eq!(names.len(), 3, "{names:?}");
        let errors: Vec<String> = entries
            .iter()
            .map(|e| read_job(e, &ws.id).unwrap_err().to_string())
            .collect();
        assert!(
            errors.iter().any(|e| e.starts_with("not a job")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("workspace_id is \"ffffffffffff\"")),
            "{errors:?}"
        );
        assert!(
            errors.iter().any(|e| e.contains("not a valid id")),
            "{errors:?}"
        );
        let bad = entries.iter().find(|e| e.job_id == "bad").unwrap();
        assert!(move_to_failed(&ws, bad, "not a job").unwrap());
        assert!(!move_to_failed(&ws, bad, "again").unwrap());
        assert_eq!(
            std::fs::read_to_string(ws.failed_dir().join("bad.error.txt")).unwrap(),
            "not a job\n"
        );
        assert!(ws.failed_dir().join("bad.json").is_file());
        // A name too long for the reason's suffix: kept under a new id, the reason
        // beside it naming the file.
        let long = format!("{}.json", "x".repeat(250));
        std::fs::write(q.join(&long), "{}").unwrap();
        let entry = list(&q)
            .into_iter()
            .find(|e| e.job_id.len() == 250)
            .unwrap();
        let reason = read_job(&entry, &ws.id).unwrap_err().to_string();
        assert!(move_to_failed(&ws, &entry, &reason).unwrap());
        let errors: Vec<String> = std::fs::read_dir(ws.failed_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".error.txt") && n != "bad.error.txt")
            .collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        let text = std::fs::read_to_string(ws.failed_dir().join(&errors[0])).unwrap();
        assert!(text.starts_with("job file name: "), "{text}");
        assert!(
            text.contains(&format!("(the job file was \"{long}\")")),
            "{text}"
        );
        let json = errors[0].replace(".error.txt", ".json");
        assert_eq!(
            std::fs::read_to_string(ws.failed_dir().join(json)).unwrap(),
            "{}"
        );
        std::fs::remove_dir_all(base).unwrap();
    }
}
