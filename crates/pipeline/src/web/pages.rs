//! The HTML pages, rendered on the server from the workspace files: the task list
//! with the chat box, a task's detail, the plan, an attempt's files. Every piece of
//! text from outside goes through `html::text`; the Task Note through
//! `markdown::to_html`. The pages work without JavaScript (but for the buttons);
//! `static/app.js` adds the buttons and keeps statuses live by polling the API.

use std::fmt::Write as _;

use serde_json::Value;

use super::api;
use super::app::App;
use super::files::{self, AttemptFile};
use super::html::{push_text, text, url_segment};
use super::http::Response;
use super::markdown;
use crate::plan::chat::{self, Role};
use crate::plan::model::PlanState;
use crate::plan::tree;
use crate::plan::wbs::Wbs;
use crate::queue::status::{self as queue_status, TaskStatus};
use crate::queue::task_json;
use crate::store::task_file::{Attempt, TaskView};
use crate::store::task_store::TaskStore;
use crate::watch::log::Follower;
use agent_runner_core::timestamp::{human, short};

const HTML: &str = "text/html; charset=utf-8";

/// An HTML error page.
pub(crate) fn error(status: u16, message: &str) -> Response {
    Response::new(
        status,
        HTML,
        format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{status}</title><link rel=\"stylesheet\" href=\"/static/style.css\"></head><body><main><h1>{status} {}</h1><p>{}</p><p><a href=\"/\">Tasks</a></p></main></body></html>\n",
            super::http::reason(status),
            text(message)
        ),
    )
}

/// The page around `main`: head (with the token), header with the orchestrator's
/// status, navigation.
fn page(app: &App, title: &str, body_attrs: &str, main: &str) -> Response {
    let orchestrator = api::orchestrator_status(app);
    let running = orchestrator["running"] == true;
    let mut out = String::with_capacity(main.len() + 2048);
    let _ = writeln!(
        out,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"agent-runner-token\" content=\"{}\">\n<title>{} · agent-runner</title>\n<link rel=\"stylesheet\" href=\"/static/style.css\">\n<script src=\"/static/app.js\" defer></script>\n</head>\n<body {body_attrs}>\n<header>\n<a class=\"brand\" href=\"/\">agent-runner</a>\n<nav><a href=\"/\">Tasks</a><a href=\"/plan\">Plan</a><a href=\"/evals\">Evals</a></nav>\n<span class=\"workspace\" title=\"{}\">workspace <code>{}</code> {}</span>\n<span id=\"orchestrator\" class=\"orchestrator {}\">{}</span>\n<button id=\"start-orchestrator\" type=\"button\"{}>Start orchestrator</button>\n</header>\n<main>\n<p id=\"notice\" class=\"notice\" role=\"status\" hidden></p>\n{main}</main>\n</body>\n</html>",
        app.guard.token().as_str(),
        text(title),
        text(&app.ws.dir.display().to_string()),
        text(&app.ws.id),
        text(&app.ws.root_dir.display().to_string()),
        if running { "on" } else { "off" },
        text(&orchestrator_line(&orchestrator)),
        if running { " hidden" } else { "" },
    );
    Response::new(200, HTML, out)
}

/// "orchestrator: running (pid 42)" or "orchestrator: not running".
fn orchestrator_line(status: &Value) -> String {
    if status["running"] != true {
        return "orchestrator: not running".into();
    }
    let pids: Vec<String> = status["orchestrators"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["pid"].as_u64().map(|p| p.to_string()))
        .collect();
    if pids.is_empty() {
        "orchestrator: running".into()
    } else {
        format!("orchestrator: running (pid {})", pids.join(", "))
    }
}

/// The CSS class of a status badge.
fn status_class(status: &str) -> String {
    format!("status s-{}", status.to_ascii_lowercase())
}

/// A task's status badge: its class and text, `SUCCEEDED (unverified)` when no
/// passing test backs a success (SPEC §16; `static/app.js` `badge` does the same).
fn task_badge(status: TaskStatus, task: &TaskView) -> (String, &'static str) {
    let label = queue_status::label(status, task);
    let mut class = status_class(status.as_str());
    if label == queue_status::SUCCEEDED_UNVERIFIED {
        class.push_str(" s-unverified");
    }
    (class, label)
}

/// Whether a task in `status` can be asked to run (as `run_request::check` says).
fn runnable(status: TaskStatus) -> bool {
    matches!(
        status,
        TaskStatus::Pending
            | TaskStatus::Failed
            | TaskStatus::AwaitingApproval
            | TaskStatus::Succeeded
    )
}

/// Whether a follow-up message can go on from the task's latest attempt (SPEC §23).
fn follows_up(status: TaskStatus) -> bool {
    matches!(
        status,
        TaskStatus::Failed | TaskStatus::AwaitingApproval | TaskStatus::Succeeded
    )
}

fn duration(ms: u64) -> String {
    human(std::time::Duration::from_millis(ms))
}

/// Tokens, or `—` when not recorded (`static/app.js` writes the same).
fn tokens(tokens: Option<u64>) -> String {
    tokens.map_or("—".into(), |t| t.to_string())
}

/// A cost, or `—` when not known.
fn cost(usd: Option<f64>) -> String {
    usd.map_or("—".into(), |c| {
        format!("${}", agent_runner_core::usage::usd(c))
    })
}

/// `/`: the chat box and the task list (`?all=1`: deleted tasks too).
pub(crate) fn index(app: &App, all: bool) -> Response {
    let board = match app.board() {
        Ok(board) => board,
        Err(e) => return error(500, &e.to_string()),
    };
    let rows = task_json::rows(&board, all);
    let mut main = String::with_capacity(rows.len() * 420 + 2048);
    main.push_str(concat!(
        "<section class=\"chat\">\n<form id=\"chat\">\n",
        "<label for=\"prompt\">What should be done?</label>\n",
        "<textarea id=\"prompt\" name=\"prompt\" rows=\"3\" required placeholder=\"TODO アプリを作成して\"></textarea>\n",
        "<div class=\"row\"><label class=\"toggle\"><input type=\"checkbox\" id=\"plan-toggle\"> plan: let Meta break it into tasks</label>",
        "<button type=\"submit\" id=\"send\">Create task</button></div>\n",
        "<p id=\"chat-status\" role=\"status\"></p>\n",
        "<div id=\"plan-result\" hidden></div>\n",
        "</form>\n</section>\n",
    ));
    let _ = writeln!(
        main,
        "<section>\n<h2>Tasks <span id=\"count\" class=\"muted\">{}</span> <a class=\"small\" href=\"{}\">{}</a></h2>",
        rows.len(),
        if all { "/" } else { "/?all=1" },
        if all { "hide deleted" } else { "show deleted" }
    );
    main.push_str("<table id=\"tasks\">\n<thead><tr><th>Status</th><th>Task</th><th class=\"n\">Attempts</th><th>Last attempt</th><th class=\"n\">Tokens</th><th class=\"n\">Cost</th><th></th></tr></thead>\n<tbody>\n");
    for (task, status) in &rows {
        task_row(&mut main, task, *status);
    }
    main.push_str("</tbody>\n</table>\n");
    let _ = writeln!(
        main,
        "<p id=\"empty\" class=\"muted\"{}>No tasks yet: say above what should be done.</p>\n</section>",
        if rows.is_empty() { "" } else { " hidden" }
    );
    page(
        app,
        "Tasks",
        &format!(
            "data-page=\"index\" data-all=\"{}\"",
            if all { "1" } else { "0" }
        ),
        &main,
    )
}

/// One row of the task list; `static/app.js` builds the same.
fn task_row(out: &mut String, task: &TaskView, status: TaskStatus) {
    let id = &task.record.id;
    let href = format!("/tasks/{}", url_segment(id));
    out.push_str("<tr data-id=\"");
    push_text(out, id);
    let (class, label) = task_badge(status, task);
    let _ = write!(
        out,
        "\" data-status=\"{}\"><td><span class=\"{class}\">{label}</span></td><td><a class=\"title\" href=\"{}\">",
        status.as_str(),
        text(&href),
    );
    push_text(out, &task.record.title);
    out.push_str("</a><div class=\"id\">");
    push_text(out, id);
    let _ = write!(
        out,
        "</div></td><td class=\"n attempts\">{}</td><td class=\"last\">",
        task.attempt_count
    );
    match task.latest() {
        Some(a) => {
            let _ = write!(
                out,
                "{} · {} · {}",
                text(&short(&a.started_at)),
                a.status.as_str(),
                duration(a.duration_ms)
            );
        }
        None => out.push('—'),
    }
    let latest = task.latest();
    let _ = write!(
        out,
        "</td><td class=\"n tokens\">{}</td><td class=\"n cost\">{}",
        tokens(latest.and_then(Attempt::total_tokens)),
        cost(latest.and_then(Attempt::cost_usd))
    );
    out.push_str("</td><td><button type=\"button\" class=\"run\" data-id=\"");
    push_text(out, id);
    let _ = writeln!(
        out,
        "\"{}>{}</button></td></tr>",
        if runnable(status) { "" } else { " disabled" },
        if task.attempt_count > 0 {
            "Run again"
        } else {
            "Run"
        }
    );
}

/// `/tasks/<id>`: status, prompt, latest result (summary, validation), attempts
/// with their files, the Task Note.
pub(crate) fn task(app: &App, task_id: &str) -> Response {
    let task = match TaskStore::new(&app.ws).load(task_id) {
        Ok(Some(task)) => task,
        Ok(None) => {
            return error(
                404,
                &format!("task {task_id} not found in workspace {}", app.ws.id),
            );
        }
        Err(e) => return error(500, &e.to_string()),
    };
    let board = match app.board_around(&task) {
        Ok(board) => board,
        Err(e) => return error(500, &e.to_string()),
    };
    let status = board.status(task_id).unwrap_or(TaskStatus::Pending);
    let r = &task.record;
    let mut main = String::with_capacity(16 * 1024);
    main.push_str("<p><a href=\"/\">← Tasks</a></p>\n<h1 id=\"title\">");
    push_text(&mut main, &r.title);
    let (class, label) = task_badge(status, &task);
    let _ = write!(
        main,
        "</h1>\n<p class=\"meta\"><span id=\"status\" class=\"{class}\">{label}</span> <code>{}</code> created {}",
        text(&r.id),
        text(&short(&r.created_at)),
    );
    if let Some((state, job)) = board.jobs.get(task_id) {
        let _ = write!(
            main,
            " · job <code>{}</code> {}",
            text(job),
            task_json::job_state(*state)
        );
    }
    let _ = write!(
        main,
        " <button type=\"button\" class=\"run\" data-id=\"{}\"{}>{}</button>",
        text(&r.id),
        if runnable(status) { "" } else { " disabled" },
        if task.attempts.is_empty() {
            "Run"
        } else {
            "Run again"
        }
    );
    // SPEC §19: a failed (or stopped) attempt can be continued where it left off.
    let _ = writeln!(
        main,
        " <button type=\"button\" class=\"continue\" data-id=\"{}\"{}>Continue</button></p>",
        text(&r.id),
        if status == TaskStatus::Failed {
            ""
        } else {
            " hidden"
        }
    );
    // SPEC §23: a follow-up message beside Continue, also after a success.
    let _ = writeln!(
        main,
        "<p id=\"follow-up\" class=\"follow-up\"{}><textarea id=\"follow-up-message\" rows=\"2\" maxlength=\"{}\" placeholder=\"A follow-up message: the task goes on with it\"></textarea> <button type=\"button\" id=\"send-follow-up\" data-id=\"{}\">Send</button></p>",
        if follows_up(status) { "" } else { " hidden" },
        crate::queue::message::MAX_MESSAGE,
        text(&r.id),
    );
    if let (TaskStatus::AwaitingApproval, Some(latest)) = (status, task.latest()) {
        approval(&mut main, &r.id, latest);
    }
    if let Some(deleted) = &task.deleted {
        let _ = writeln!(
            main,
            "<p class=\"warning\">Deleted {}: {}</p>",
            text(&short(&deleted.at)),
            text(&deleted.reason)
        );
    }
    if board.jobs.contains_key(task_id) {
        live_log(&mut main, app, task_id);
    }
    main.push_str("<section>\n<h2>Prompt</h2>\n<pre class=\"prompt\">");
    push_text(&mut main, &r.raw_prompt);
    main.push_str("</pre>\n");
    if let Some(deps) = r.plan.depends_on.as_ref().filter(|d| !d.is_empty()) {
        main.push_str("<p>Depends on: ");
        for (n, dep) in deps.iter().enumerate() {
            if n > 0 {
                main.push_str(", ");
            }
            let _ = write!(
                main,
                "<a href=\"/tasks/{}\"><code>{}</code></a>",
                text(&url_segment(dep)),
                text(dep)
            );
        }
        main.push_str("</p>\n");
    }
    main.push_str("</section>\n");
    if let Some(latest) = task.latest() {
        latest_result(&mut main, latest);
        if let Some(comparison) = &latest.tries {
            super::comparison::section(&mut main, comparison);
        }
    }
    attempts(&mut main, app, &task);
    if let Some(latest) = task.latest() {
        note(&mut main, app, task_id, latest);
    }
    page(
        app,
        &r.title,
        &format!(
            "data-page=\"task\" data-task-id=\"{}\" data-attempts=\"{}\" data-status=\"{}\"",
            text(&r.id),
            task.attempts.len(),
            status.as_str()
        ),
        &main,
    )
}

/// The plan the latest attempt awaits approval of (SPEC §23), with Approve, and
/// Reject with a message.
fn approval(out: &mut String, task_id: &str, latest: &Attempt) {
    out.push_str(
        "<section id=\"approval\">\n<h2>Plan awaiting approval</h2>\n<ol class=\"plan\">\n",
    );
    let plan = latest.result_value().map(|r| r["plan"].clone());
    for criterion in plan
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |key: &str| criterion[key].as_str().unwrap_or_default().to_string();
        let _ = writeln!(
            out,
            "<li><code>{}</code> {}</li>",
            text(&field("id")),
            text(&field("description"))
        );
    }
    let _ = writeln!(
        out,
        "</ol>\n<p><button type=\"button\" id=\"approve\" data-id=\"{id}\">Approve</button></p>\n<p><textarea id=\"reject-message\" rows=\"2\" maxlength=\"{}\" placeholder=\"Why not: Meta plans again with it\"></textarea> <button type=\"button\" id=\"reject\" data-id=\"{id}\">Reject</button></p>\n</section>",
        crate::queue::message::MAX_MESSAGE,
        id = text(task_id),
    );
}

/// The events of the task's queued or running attempt so far; `static/app.js`
/// polls for the rest (`/api/tasks/<id>/events`) and shows the note once the
/// attempt is recorded. The Stop button asks for the job to be stopped.
fn live_log(out: &mut String, app: &App, task_id: &str) {
    let mut follower = Follower::new(task_id);
    let Ok(poll) = follower.poll(&app.ws) else {
        return;
    };
    let doc = api::live(&follower, &poll);
    let _ = write!(
        out,
        "<section id=\"live\" data-job=\"{}\" data-file=\"{}\" data-offset=\"{}\">\n<h2>Live log <span id=\"live-stage\" class=\"muted small\">{}</span> <button type=\"button\" id=\"stop\" class=\"stop\" data-id=\"{}\">Stop</button></h2>\n<pre id=\"events\" class=\"events\">",
        text(follower.job().unwrap_or("")),
        follower.cursor().file,
        follower.cursor().offset,
        text(doc["stage"].as_str().unwrap_or("")),
        text(task_id),
    );
    for line in doc["lines"].as_array().into_iter().flatten() {
        push_text(out, line.as_str().unwrap_or(""));
        out.push('\n');
    }
    out.push_str("</pre>\n</section>\n");
}

/// The latest attempt's usage (SPEC §15): each side, the Task Builder, the total,
/// the cost and the budget.
fn usage(out: &mut String, a: &Attempt) {
    let counts = |t: &agent_runner_core::usage::Tokens| {
        format!(
            "{} in ({} cached), {} out",
            t.input_tokens, t.cached_input_tokens, t.output_tokens
        )
    };
    out.push_str("<dt>Usage</dt><dd id=\"usage\">");
    match a.total_tokens() {
        None => out.push_str("<span class=\"muted\">(not recorded)</span>"),
        Some(total) => {
            let _ = write!(
                out,
                "{total} tokens · {}",
                text(&cost(a.cost_usd()).replace('—', "cost unknown"))
            );
            out.push_str("<ul>");
            if let Some(u) = &a.usage {
                let _ = write!(
                    out,
                    "<li>Meta: {} call(s), {}</li><li>Worker: {} run(s), {}</li>",
                    u.meta.calls,
                    counts(&u.meta.tokens),
                    u.worker.runs,
                    counts(&u.worker.tokens)
                );
            }
            if let Some(b) = &a.builder_usage {
                let _ = write!(
                    out,
                    "<li>Task Builder: {} call(s), {}, {}</li>",
                    b.calls,
                    counts(&b.tokens),
                    text(&cost(b.cost_usd))
                );
            }
            out.push_str("</ul>");
        }
    }
    out.push_str("</dd>\n");
    if let Some(budget) = a.budget.as_ref().filter(|b| b.is_object()) {
        let limit = |key: &str| match &budget[key] {
            Value::Null => "none".to_string(),
            v => v.to_string(),
        };
        out.push_str("<dt>Budget</dt><dd id=\"budget\">");
        push_text(
            out,
            &format!(
                "max_tokens {}, max_cost_usd {}, max_duration_sec {}",
                limit("max_tokens"),
                limit("max_cost_usd"),
                limit("max_duration_sec")
            ),
        );
        if let Some(limit) = budget["exhausted"].as_str() {
            out.push_str(" · <span class=\"error\">exhausted: ");
            push_text(out, limit);
            out.push_str("</span>");
        }
        out.push_str("</dd>\n");
    }
}

/// The latest attempt's result: status, summary, error, validation commands.
fn latest_result(out: &mut String, latest: &Attempt) {
    out.push_str("<section id=\"result\">\n<h2>Latest result</h2>\n<dl>\n");
    let result = latest.result_value();
    let field = |name: &str| {
        result
            .as_ref()
            .and_then(|r| r.get(name))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let _ = writeln!(
        out,
        "<dt>Attempt</dt><dd><span class=\"{}\">{}</span> {} · {}</dd>",
        status_class(latest.status.as_str()),
        latest.status.as_str(),
        text(&short(&latest.started_at)),
        duration(latest.duration_ms)
    );
    out.push_str("<dt>Summary</dt><dd id=\"summary\">");
    match field("summary").filter(|s| !s.trim().is_empty()) {
        Some(summary) => push_text(out, &summary),
        None => out.push_str("<span class=\"muted\">(none)</span>"),
    }
    out.push_str("</dd>\n");
    if let Some(error) = latest.error.as_deref().or(field("error").as_deref()) {
        out.push_str("<dt>Error</dt><dd class=\"error\">");
        push_text(out, error);
        out.push_str("</dd>\n");
    }
    usage(out, latest);
    let validation = result.as_ref().map(|r| &r["validation"]);
    let overall = validation
        .and_then(|v| v["overall"].as_str())
        .unwrap_or("unknown");
    let _ = writeln!(
        out,
        "<dt>Validation</dt><dd id=\"validation\"><span class=\"v v-{}\">{}</span></dd>",
        text(&overall.to_ascii_lowercase()),
        text(overall)
    );
    let source = latest
        .test_source
        .map_or(String::new(), |s| format!(" (test: {})", s.as_str()));
    let _ = writeln!(
        out,
        "<dt>Verified</dt><dd id=\"verified\">{}{source}</dd>\n</dl>",
        if latest.is_verified() { "yes" } else { "no" }
    );
    let commands: Vec<&Value> = validation
        .and_then(|v| v["commands"].as_array())
        .into_iter()
        .flatten()
        .collect();
    if !commands.is_empty() {
        out.push_str("<table id=\"validation-commands\">\n<thead><tr><th>Command</th><th class=\"n\">Exit code</th><th class=\"n\">Duration</th></tr></thead>\n<tbody>\n");
        for c in commands {
            out.push_str("<tr><td><code>");
            push_text(out, c["command"].as_str().unwrap_or("?"));
            let code = c["exit_code"]
                .as_i64()
                .map_or("—".to_string(), |x| x.to_string());
            let _ = writeln!(
                out,
                "</code></td><td class=\"n{}\">{}</td><td class=\"n\">{}</td></tr>",
                if code == "0" { "" } else { " error" },
                text(&code),
                duration(c["duration_ms"].as_u64().unwrap_or(0))
            );
        }
        out.push_str("</tbody>\n</table>\n");
    }
    out.push_str("</section>\n");
}

/// Every attempt, newest first, with links to its files.
fn attempts(out: &mut String, app: &App, task: &TaskView) {
    let _ = writeln!(
        out,
        "<section>\n<h2>Attempts <span class=\"muted\">{}</span></h2>",
        task.attempts.len()
    );
    if task.attempts.is_empty() {
        out.push_str("<p class=\"muted\">None yet: press Run, and have an orchestrator running.</p>\n</section>\n");
        return;
    }
    out.push_str("<table id=\"attempts\">\n<thead><tr><th class=\"n\">#</th><th>Started</th><th>Status</th><th class=\"n\">Duration</th><th class=\"n\">Tokens</th><th class=\"n\">Cost</th><th>Error</th><th>Files</th></tr></thead>\n<tbody>\n");
    for (n, a) in task.attempts.iter().enumerate().rev() {
        let _ = write!(
            out,
            "<tr><td class=\"n\">{}</td><td>{}<div class=\"id\">{} · job {}{}</div></td><td><span class=\"{}\">{}</span></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"error\">",
            n + 1,
            text(&short(&a.started_at)),
            text(&a.attempt_id),
            text(&a.job_id),
            // The Docker host it ran on (SPEC §22).
            a.host.as_deref().map_or(String::new(), |h| format!(
                " · host <span class=\"host\">{}</span>",
                text(h)
            )),
            status_class(a.status.as_str()),
            a.status.as_str(),
            duration(a.duration_ms),
            tokens(a.total_tokens()),
            cost(a.cost_usd())
        );
        if let Some(error) = &a.error {
            push_text(out, error);
        }
        if let Some(message) = &a.message {
            out.push_str("<div class=\"message\">Message: ");
            push_text(out, message);
            out.push_str("</div>");
        }
        out.push_str("</td><td class=\"files\">");
        for file in files::list(&app.ws, &task.record.id, a) {
            let _ = write!(
                out,
                "<a href=\"/tasks/{}/attempts/{}/files/{}\">{}</a> ",
                text(&url_segment(&task.record.id)),
                text(&url_segment(&a.job_id)),
                text(&url_segment(file.name())),
                text(file.name())
            );
        }
        out.push_str("</td></tr>\n");
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
}

/// The latest attempt's Task Note, rendered.
fn note(out: &mut String, app: &App, task_id: &str, latest: &Attempt) {
    let Ok((bytes, cut)) = files::read(&app.ws, task_id, latest, &AttemptFile::Note) else {
        return;
    };
    out.push_str("<section>\n<h2>Task Note</h2>\n");
    if let Some(path) = files::note_path(&app.ws, task_id, latest) {
        out.push_str("<p class=\"muted path\">");
        push_text(out, &path.display().to_string());
        out.push_str("</p>\n");
    }
    out.push_str("<article class=\"note\">\n");
    out.push_str(&markdown::to_html(&String::from_utf8_lossy(&bytes)));
    if cut {
        let _ = writeln!(
            out,
            "<p class=\"warning\">(the note is longer than {} MiB; the rest is not shown)</p>",
            files::MAX_FILE >> 20
        );
    }
    out.push_str("</article>\n</section>\n");
}

/// `/tasks/<id>/attempts/<job-id>/files/<name>`: the file as plain text.
pub(crate) fn attempt_file(app: &App, task_id: &str, job_id: &str, name: &str) -> Response {
    let Some(file) = AttemptFile::parse(name) else {
        return error(404, &format!("{name}: not a file an attempt has"));
    };
    let task = match TaskStore::new(&app.ws).load(task_id) {
        Ok(Some(task)) => task,
        Ok(None) => return error(404, &format!("task {task_id} not found")),
        Err(e) => return error(500, &e.to_string()),
    };
    let Some(attempt) = task.attempts.iter().rev().find(|a| a.job_id == job_id) else {
        return error(
            404,
            &format!("task {task_id} has no attempt of job {job_id}"),
        );
    };
    match files::read(&app.ws, task_id, attempt, &file) {
        Ok((mut bytes, cut)) => {
            if cut {
                bytes.extend_from_slice(
                    format!("\n[cut at {} MiB]\n", files::MAX_FILE >> 20).as_bytes(),
                );
            }
            Response::new(200, "text/plain; charset=utf-8", bytes)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            error(404, &format!("{name}: not there"))
        }
        Err(e) => error(403, &format!("{name}: not served: {e}")),
    }
}

/// `/plan`: the plan tree with the tasks' statuses, as `plan --show` has it, and
/// the chat.
pub(crate) fn plan(app: &App) -> Response {
    let mut main = String::with_capacity(8192);
    main.push_str("<h1>Plan</h1>\n");
    match Wbs::read(&app.ws).and_then(|wbs| Ok((wbs, app.board()?))) {
        Ok((None, _)) => main.push_str("<p class=\"muted\">No plan yet: tick \"plan\" in the chat box on the Tasks page, or run <code>agent-runner plan REQUEST</code>.</p>\n"),
        Err(e) => {
            let _ = writeln!(main, "<p class=\"error\">{}</p>", text(&e.to_string()));
        }
        Ok((Some(wbs), board)) => {
            let state = PlanState::of(&app.ws.id, &board, wbs);
            main.push_str("<div id=\"tree\" class=\"tree\">\n");
            for row in tree::rows(&state).0 {
                let _ = write!(main, "<div class=\"node depth-{}\">", row.depth.min(8));
                match row.status.filter(|_| row.kind == "task") {
                    Some(status) => {
                        let _ = write!(
                            main,
                            "<span class=\"{}\">{}</span> <a href=\"/tasks/{}\">{}</a> <code class=\"id\">{}</code>",
                            status_class(status),
                            status,
                            text(&url_segment(&row.id)),
                            text(&row.title),
                            text(&row.id)
                        );
                    }
                    None => {
                        let _ = write!(main, "<strong>{}</strong>", text(&row.title));
                    }
                }
                main.push_str("</div>\n");
            }
            main.push_str("</div>\n");
        }
    }
    let chat = chat::recent(&app.ws, 50).unwrap_or_default();
    main.push_str("<h2>Conversation</h2>\n");
    if chat.is_empty() {
        main.push_str("<p class=\"muted\">No messages yet.</p>\n");
    }
    for message in &chat {
        let role = match message.role {
            Role::User => "user",
            Role::Meta => "meta",
        };
        let _ = write!(
            main,
            "<div class=\"message role-{role}\"><div class=\"muted\">{role} · {}</div><div class=\"text\">{}</div>",
            text(&short(&message.at)),
            text(&message.text)
        );
        if !message.potential_conflicts.is_empty() {
            main.push_str("<div class=\"label\">Potential conflicts</div><ul class=\"conflicts\">");
            for c in &message.potential_conflicts {
                let line = match c {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let _ = write!(main, "<li>{}</li>", text(&line));
            }
            main.push_str("</ul>");
        }
        main.push_str("</div>\n");
    }
    page(app, "Plan", "data-page=\"plan\"", &main)
}

/// The evaluations of the workspace (SPEC §26): summaries and charts.
pub(crate) fn evals(app: &App) -> Response {
    page(
        app,
        "Evaluations",
        "data-page=\"evals\"",
        &super::eval_page::main(&app.ws),
    )
}
