//! Recording an attempt (SPEC §12 step 4), always, whatever happened: the `attempt`
//! line appended to the task file, `ipc/results/<job-id>.json` written (temp +
//! rename), the job's files removed from `ipc/running/`. In that order, so a crash in
//! between leaves the job in `running/`, where recovery finishes the recording; and
//! recording is idempotent per job (an attempt line for the job is never written
//! twice).

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::queue::jobs;
use crate::store::task_file::{Attempt, AttemptStatus, Line};
use crate::store::task_store::TaskStore;
use crate::{PipelineError, Workspace};
use agent_runner_core::fs::atomic;

/// Records `attempt` of a job; returns the result file's path.
pub(crate) fn record(ws: &Workspace, attempt: &Attempt) -> Result<PathBuf, PipelineError> {
    let store = TaskStore::new(ws);
    let recorded = store
        .load(&attempt.task_id)?
        .is_some_and(|t| t.attempts.iter().any(|a| a.job_id == attempt.job_id));
    if !recorded {
        store.append(&attempt.task_id, &Line::Attempt(Box::new(attempt.clone())))?;
    }
    let path = ws.results_dir().join(format!("{}.json", attempt.job_id));
    let mut json = serde_json::to_vec_pretty(&result_document(ws, attempt)).unwrap_or_default();
    json.push(b'\n');
    atomic::write(&path, &json).map_err(PipelineError::io("write", &path))?;
    jobs::finish(ws, &attempt.job_id);
    Ok(path)
}

/// `ipc/results/<job-id>.json`: the runner's result (SPEC §8), or one in its shape
/// when the runner did not print one, plus job_id, workspace_id and attempt_id. Its
/// `status` is the attempt's: an attempt the runner called succeeded can still have
/// failed (its branch could not be brought back, it was interrupted).
pub(crate) fn result_document(ws: &Workspace, attempt: &Attempt) -> Value {
    let mut doc = attempt
        .result_value()
        .filter(Value::is_object)
        .unwrap_or_else(|| {
            let error = attempt.error.clone().unwrap_or_default();
            json!({
                "task_id": attempt.task_id,
                "status": attempt.status.as_str(),
                "state": "FAILED",
                "summary": error,
                "validation": {"overall": "unknown", "commands": []},
                "duration_ms": attempt.duration_ms,
                "loops": 0,
                "verified": false,
                "replans": 0,
                "note_path": null,
                "error": error,
            })
        });
    if attempt.status == AttemptStatus::Failed {
        doc["status"] = "failed".into();
        doc["verified"] = false.into();
        if let Some(error) = &attempt.error {
            doc["error"] = error.as_str().into();
        }
    }
    doc["job_id"] = attempt.job_id.as_str().into();
    doc["workspace_id"] = ws.id.as_str().into();
    doc["attempt_id"] = attempt.attempt_id.as_str().into();
    if let Some(branch) = &attempt.branch {
        doc["branch"] = branch.as_str().into();
    }
    if let Some(source) = attempt.test_source {
        doc["test_source"] = source.as_str().into();
    }
    doc
}
