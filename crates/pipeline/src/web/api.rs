//! The JSON API under `/api/` (docs/pipeline.md, "Web view"), which the pages use and other
//! programs may too. Reads go to the workspace files on every request (the files
//! are the truth; the CLI and an orchestrator change them at any time); writes are
//! the same operations as `task new` and `task run`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::super::PipelineError;
use super::app::App;
use super::children::NotStarted;
use super::http::{Request, Response};
use crate::orchestrator::presence;
use crate::plan::chat::{self, Role};
use crate::plan::wbs::Wbs;
use crate::queue::approval;
use crate::queue::jobs;
use crate::queue::message;
use crate::queue::run_request::{self, Refused, RunError};
use crate::queue::task_json::{self, TaskList};
use crate::store::id;
use crate::store::new_task;
use crate::store::task_store::TaskStore;
use crate::watch::log::{Follower, Poll, Stage};
use crate::watch::stop::{self, NotStopped, Stopped};
use agent_runner_settings::events::reader::{Cursor, describe};

/// Longest prompt or plan message accepted, in bytes.
pub(crate) const MAX_PROMPT: usize = 32 * 1024;
/// Chat messages returned by `/api/plan`.
const CHAT_MESSAGES: usize = 50;

/// A JSON response.
pub(crate) fn json(status: u16, value: &impl serde::Serialize) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    Response::new(status, "application/json", body)
}

/// A JSON error: `{"error": message}`.
pub(crate) fn error(status: u16, message: &str) -> Response {
    json(status, &json!({ "error": message }))
}

fn failed(e: &PipelineError) -> Response {
    let status = e.http_status();
    if status == 500 {
        log::warn!("{e}");
    }
    error(status, &e.to_string())
}

/// `GET /api/tasks[?all=1]`: the document of `task list --json`.
pub(crate) fn tasks(app: &App, request: &Request) -> Response {
    let all = request.query_param("all").is_some_and(|v| v == "1");
    match app.board() {
        Ok(board) => {
            let rows = task_json::rows(&board, all);
            json(200, &TaskList::new(&app.ws, &board, &rows))
        }
        Err(e) => failed(&e),
    }
}

/// `GET /api/tasks/<id>`: the document of `task show --json`.
pub(crate) fn task(app: &App, task_id: &str) -> Response {
    let task = match TaskStore::new(&app.ws).load(task_id) {
        Ok(Some(task)) => task,
        Ok(None) => return not_found(app, task_id),
        Err(e) => return failed(&e),
    };
    match app.board_around(&task) {
        Ok(board) => {
            let status = board
                .status(task_id)
                .unwrap_or(crate::queue::status::TaskStatus::Pending);
            json(
                200,
                &task_json::detail(&task, status, board.jobs.get(task_id)),
            )
        }
        Err(e) => failed(&e),
    }
}

/// `GET /api/tasks/<id>/attempts`: every attempt, with its result.
pub(crate) fn attempts(app: &App, task_id: &str) -> Response {
    match TaskStore::new(&app.ws).load(task_id) {
        Ok(Some(task)) => json(
            200,
            &json!({ "task_id": task_id, "attempts": task.attempts }),
        ),
        Ok(None) => not_found(app, task_id),
        Err(e) => failed(&e),
    }
}

/// `GET /api/tasks/<id>/events[?job=J&file=F&offset=O]`: the events of the task's
/// current or last attempt after the cursor a previous answer gave, as lines for
/// people and as records: `{"job_id", "stage", "status"?, "lines", "events",
/// "cursor": {"file", "offset"}, "restarted"}`. `stage` is `never`, `queued`,
/// `running`, `settling` or `ended` (then `status` is the attempt's).
pub(crate) fn events(app: &App, task_id: &str, request: &Request) -> Response {
    match TaskStore::new(&app.ws).load(task_id) {
        Ok(Some(_)) => {}
        Ok(None) => return not_found(app, task_id),
        Err(e) => return failed(&e),
    }
    let number = |name: &str| {
        request
            .query_param(name)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let job = request
        .query_param("job")
        .filter(|j| id::is_valid(j))
        .map(str::to_string);
    let cursor = Cursor {
        file: number("file"),
        offset: number("offset"),
    };
    let mut follower = Follower::at(task_id, job, cursor);
    match follower.poll(&app.ws) {
        Ok(poll) => json(200, &live(&follower, &poll)),
        Err(e) => failed(&e),
    }
}

/// The document of `events`, also rendered into the task page.
pub(crate) fn live(follower: &Follower, poll: &Poll) -> Value {
    let (stage, status) = match &poll.stage {
        Stage::Never => ("never", None),
        Stage::Queued => ("queued", None),
        Stage::Running => ("running", None),
        Stage::Settling => ("settling", None),
        Stage::Ended(attempt) => ("ended", Some(attempt.status.as_str())),
    };
    json!({
        "job_id": follower.job(),
        "stage": stage,
        "status": status,
        "lines": poll.records.iter().map(describe).collect::<Vec<_>>(),
        "events": poll.records,
        "cursor": follower.cursor(),
        "restarted": poll.restarted,
    })
}

fn not_found(app: &App, task_id: &str) -> Response {
    error(
        404,
        &format!("task {task_id} not found in workspace {}", app.ws.id),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTask {
    prompt: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    id: Option<String>,
}

/// `POST /api/tasks` `{"prompt", "title"?, "id"?}`: creates a task as `task new`
/// does; 201 with `{"id", "task"}`.
pub(crate) fn create_task(app: &App, request: &Request) -> Response {
    let body: NewTask = match parse(request) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if body.prompt.len() > MAX_PROMPT {
        return error(413, &format!("prompt: longer than {MAX_PROMPT} bytes"));
    }
    match new_task::create(&app.ws, body.id, body.title, body.prompt, None) {
        Ok(record) => json(201, &json!({ "id": record.id, "task": record })),
        Err(e) => failed(&e),
    }
}

/// `POST /api/tasks/<id>/run`: enqueues a job as `task run` does; 202 with
/// `{"job_id"}`, 409 when the task is queued, running, blocked or deleted.
pub(crate) fn run_task(app: &App, task_id: &str) -> Response {
    match run_request::enqueue(&app.ws, task_id) {
        Ok(job_id) => json(202, &json!({ "job_id": job_id, "task_id": task_id })),
        Err(RunError::Refused(why @ Refused::NotFound { .. })) => error(404, &why.to_string()),
        Err(RunError::Refused(why)) => error(409, &why.to_string()),
        Err(RunError::Failed(e)) => failed(&e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FollowUp {
    #[serde(default)]
    message: Option<String>,
}

/// `POST /api/tasks/<id>/continue` `{"message"?}`: enqueues a job that continues the
/// task's failed latest attempt, as `task run --resume` does, or with a message
/// (SPEC §23) its latest attempt whatever its end, as `task run --resume --message`
/// does; 202 with `{"job_id"}`, 409 when the task is busy or has nothing to
/// continue, 413 for a message over `message::MAX_MESSAGE` bytes.
pub(crate) fn continue_task(app: &App, task_id: &str, request: &Request) -> Response {
    let body: FollowUp = match parse(request) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let enqueued = match body.message.as_deref() {
        Some(message) if message.len() > message::MAX_MESSAGE => {
            return too_long("message");
        }
        Some(message) => run_request::enqueue_follow_up(&app.ws, task_id, message),
        None => run_request::enqueue_resume(&app.ws, task_id),
    };
    enqueued_response(task_id, enqueued, json!({ "resumes": true }))
}

/// `POST /api/tasks/<id>/approve` `{}`: approves the plan the task awaits approval
/// of, as `task approve` does; 202 with `{"job_id"}`, 409 when it awaits none.
pub(crate) fn approve_task(app: &App, task_id: &str) -> Response {
    let enqueued = approval::approve(&app.ws, task_id, None);
    enqueued_response(task_id, enqueued, json!({ "approved": true }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Rejection {
    message: String,
}

/// `POST /api/tasks/<id>/reject` `{"message"}`: rejects the plan the task awaits
/// approval of, as `task reject --message` does; 202 with `{"job_id"}`, 409 when it
/// awaits none, 400 without a message, 413 for one too long.
pub(crate) fn reject_task(app: &App, task_id: &str, request: &Request) -> Response {
    let body: Rejection = match parse(request) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if body.message.len() > message::MAX_MESSAGE {
        return too_long("message");
    }
    let enqueued = approval::reject(&app.ws, task_id, &body.message);
    enqueued_response(task_id, enqueued, json!({ "rejected": true }))
}

fn too_long(field: &str) -> Response {
    error(
        413,
        &format!("{field}: longer than {} bytes", message::MAX_MESSAGE),
    )
}

/// 202 with `{"job_id", "task_id"}` and `extra`, or the refusal's status.
fn enqueued_response(task_id: &str, enqueued: Result<String, RunError>, extra: Value) -> Response {
    match enqueued {
        Ok(job_id) => {
            let mut doc = json!({ "job_id": job_id, "task_id": task_id });
            if let (Some(doc), Value::Object(extra)) = (doc.as_object_mut(), extra) {
                doc.extend(extra);
            }
            json(202, &doc)
        }
        Err(RunError::Refused(why @ Refused::NotFound { .. })) => error(404, &why.to_string()),
        Err(RunError::Refused(why)) => error(409, &why.to_string()),
        Err(RunError::Failed(e)) => failed(&e),
    }
}

/// `POST /api/tasks/<id>/stop`: stops the task's job as `task stop` does, without
/// waiting for its end; 202 with `{"job_id", "stopping", "message"}` (`stopping`:
/// `cancelled`, `terminated` or `not_started`), 409 when there is nothing to stop.
pub(crate) fn stop_task(app: &App, task_id: &str) -> Response {
    match stop::stop(&app.ws, task_id) {
        Ok(stopped) => {
            let how = match &stopped {
                Stopped::Cancelled { .. } => "cancelled",
                Stopped::Terminated { .. } => "terminated",
                Stopped::NotStarted { .. } => "not_started",
            };
            json(
                202,
                &json!({
                    "job_id": stopped.job_id(),
                    "task_id": task_id,
                    "stopping": how,
                    "message": stopped.describe(task_id),
                }),
            )
        }
        Err(why @ NotStopped::NotFound { .. }) => error(404, &why.to_string()),
        Err(NotStopped::Failed(e)) => failed(&e),
        Err(why) => error(409, &why.to_string()),
    }
}

/// `GET /api/plan`: `wbs.json` (or null: no plan yet, or `wbs_error` says why it
/// cannot be read) and the last chat messages, as `plan` reads them.
pub(crate) fn plan(app: &App) -> Response {
    let mut doc = json!({
        "wbs": Value::Null,
        "chat": chat::recent(&app.ws, CHAT_MESSAGES).unwrap_or_default(),
    });
    match Wbs::read(&app.ws) {
        Ok(wbs) => doc["wbs"] = json!(wbs),
        Err(e) => doc["wbs_error"] = json!(e.to_string()),
    }
    json(200, &doc)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanMessage {
    message: String,
}

/// `POST /api/plan` `{"message"}`: starts `agent-runner plan MESSAGE`; 202 with
/// `{"run"}` (see `plan_run`), 409 while another plan runs.
pub(crate) fn start_plan(app: &App, request: &Request) -> Response {
    let body: PlanMessage = match parse(request) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if body.message.trim().is_empty() {
        return error(400, "message: empty; say what the plan is for");
    }
    if body.message.len() > MAX_PROMPT {
        return error(413, &format!("message: longer than {MAX_PROMPT} bytes"));
    }
    match app.children.start_plan(&body.message) {
        Ok(run) => json(202, &json!({ "run": run })),
        Err(NotStarted::Busy(why)) => error(409, &why),
        Err(NotStarted::Failed(why)) => error(500, &why),
    }
}

/// `GET /api/plan/runs/<n>`: how that plan is doing; once it succeeded, the chat
/// message Meta wrote in it (its understanding, and potential conflicts if the
/// message has them).
pub(crate) fn plan_run(app: &App, run: &str) -> Response {
    let Some(run) = run.parse().ok().and_then(|n| app.children.plan(n)) else {
        return error(404, &format!("no plan run {run}"));
    };
    let mut doc = serde_json::to_value(&run).unwrap_or(Value::Null);
    if run.state != super::children::State::Running {
        // A failed plan writes no message: the latest one is an earlier plan's,
        // and shown here it would read as this plan's understanding.
        let reply = (run.state == super::children::State::Succeeded)
            .then(|| {
                chat::recent(&app.ws, 20)
                    .unwrap_or_default()
                    .into_iter()
                    .rev()
                    .find(|m| m.role == Role::Meta && m.at >= run.started_at)
                    .map(|m| json!(m))
            })
            .flatten();
        doc["meta"] = reply.unwrap_or(Value::Null);
    }
    json(200, &doc)
}

/// `GET /api/orchestrator`: whether an orchestrator runs for the workspace (its
/// presence marker, or a running job whose claimant lives), the running jobs, and
/// the orchestrator started from this server.
pub(crate) fn orchestrator(app: &App) -> Response {
    json(200, &orchestrator_status(app))
}

/// The document of `GET /api/orchestrator`, also rendered into pages.
pub(crate) fn orchestrator_status(app: &App) -> Value {
    let markers = presence::running(&app.ws);
    let jobs: Vec<Value> = jobs::list(&app.ws.running_dir())
        .iter()
        .filter_map(|entry| {
            let job = jobs::read_job(entry, &app.ws.id).ok()?;
            let owner = jobs::read_owner(&app.ws, &entry.job_id).map(|(c, _)| c);
            let alive = owner.as_ref().is_some_and(|c| !c.is_gone());
            Some(json!({
                "job_id": entry.job_id,
                "task_id": job.task_id,
                "pid": owner.as_ref().map(|c| c.owner.pid),
                "claimed_at": owner.as_ref().map(|c| c.claimed_at.clone()),
                "claimant_alive": alive,
            }))
        })
        .collect();
    let running = !markers.is_empty() || jobs.iter().any(|j| j["claimant_alive"] == true);
    json!({
        "running": running,
        "orchestrators": markers.iter().map(|m| json!({
            "pid": m.owner.pid,
            "host": m.owner.host,
            "started_at": m.started_at,
        })).collect::<Vec<_>>(),
        "running_jobs": jobs,
        "started_here": app.children.orchestrator(),
    })
}

/// `POST /api/orchestrator/start`: starts `agent-runner orchestrate` as a child of
/// the server; 409 when one already runs for the workspace.
pub(crate) fn start_orchestrator(app: &App) -> Response {
    if orchestrator_status(app)["running"] == true {
        return error(409, "an orchestrator already runs for this workspace");
    }
    match app.children.start_orchestrator() {
        Ok(()) => json(202, &json!({ "started": true })),
        Err(NotStarted::Busy(why)) => error(409, &why),
        Err(NotStarted::Failed(why)) => error(500, &why),
    }
}

/// The body as `T`; a 400 response saying what is wrong otherwise.
fn parse<T: serde::de::DeserializeOwned>(request: &Request) -> Result<T, Response> {
    serde_json::from_slice(&request.body)
        .map_err(|e| error(400, &format!("the body is not the expected JSON: {e}")))
}
