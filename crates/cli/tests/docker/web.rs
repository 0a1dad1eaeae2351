//! The web view over HTTP (SPEC §14): every API route, the security checks (Host,
//! Origin, token, content type; refused requests change nothing), escaping of
//! hostile titles, notes and results, bounded requests, and files served only as the
//! TaskStore names them. Real binary on 127.0.0.1, a raw HTTP client; the route that
//! starts an orchestrator runs a scripted task without a container.

use crate::support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use support::pipeline::{BUILDER_REPLY, Pipeline, QUICK_META, wait_for};
use support::prerequisite::needs;
use support::web::Served;

const SCRIPT: &str = "<script>alert(1)</script>";

/// A decompose reply for the scripted Task Builder (plans take the replies of
/// their type from its script).
const DECOMPOSE: &str = "- type: decompose\n  understanding: A TODO app, planned.\n  phases:\n    - name: Build\n      milestone: m1\n      tasks:\n        - id: list\n          title: The planned list\n          description: Keep the items in todo.txt.\n          acceptance_criteria: [todo.txt lists the items]\n          wbs_level: 3\n          estimated_effort: small\n";

fn workspace(name: &str) -> Pipeline {
    let p = Pipeline::new(name, false);
    p.init(&format!("{BUILDER_REPLY}{DECOMPOSE}"), QUICK_META, "");
    p
}

/// Starts a plan with `message` from the page; how it ended.
fn plan_from_page(web: &Served, token: &str, message: &str) -> Value {
    let started = web.post(
        "/api/plan",
        token,
        &json!({ "message": message }).to_string(),
    );
    started.status(202);
    let run_id = started.json()["run"].as_u64().unwrap();
    let mut last = Value::Null;
    wait_for(Duration::from_secs(60), || {
        last = web.get(&format!("/api/plan/runs/{run_id}")).json();
        last["state"] != "running"
    });
    assert_eq!(last["message"], message);
    last
}

/// Names of the files in `dir` (sorted), or none if it is missing.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Appends an attempt line to task `id`, as an orchestrator (or another program)
/// would, with a result naming the note at `note_path`.
fn record_attempt(p: &Pipeline, id: &str, job: &str, result: Value) {
    let line = json!({
        "type": "attempt", "attempt_id": format!("a-{job}"), "job_id": job, "task_id": id,
        "status": "succeeded", "started_at": "2026-11-22T10:00:00.000Z",
        "finished_at": "2026-11-22T10:00:01.500Z", "duration_ms": 1500,
        "result": result,
        "task_config": p.ws().join(format!("logs/{job}/task-config.yaml")),
        "log_dir": p.ws().join(format!("logs/{job}")),
    });
    let path = p.ws().join(format!("tasks/{id}.jsonl"));
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&format!("{line}\n"));
    std::fs::write(path, text).unwrap();
}

fn result_with_note(id: &str, note_path: &Path) -> Value {
    json!({
        "task_id": id, "status": "succeeded", "state": "COMPLETE",
        "summary": "<img src=x onerror=alert(1)> all done",
        "validation": {"overall": "passed", "commands": [
            {"command": "<b>npm test</b>", "exit_code": 0, "duration_ms": 1234},
            {"command": "cargo test", "exit_code": 101, "duration_ms": 65000}
        ]},
        "duration_ms": 1500, "loops": 1, "note_path": note_path
    })
}

#[test]
fn every_api_route_answers_and_the_pages_show_it() {
    let p = workspace("web-api");
    let web = Served::start(&p, &[]);
    let token = web.token();

    // The task list, empty, as `task list --json` prints it.
    let list = web.get("/api/tasks");
    list.status(200);
    assert_eq!(list.header("content-type"), Some("application/json"));
    let list = list.json();
    assert_eq!(list["tasks"], json!([]));
    assert_eq!(list["root_dir"], p.root.to_str().unwrap());

    // Create: the prompt is the title and the raw prompt.
    let created = web.post(
        "/api/tasks",
        &token,
        r#"{"prompt":"TODO アプリを作成して"}"#,
    );
    created.status(201);
    let id = created.json()["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("t-"), "{id}");
    let cli = p.show(&id);
    assert_eq!(cli["task"]["title"], "TODO アプリを作成して");
    assert_eq!(cli["task"]["raw_prompt"], "TODO アプリを作成して");
    assert_eq!(cli["status"], "PENDING");
    web.post("/api/tasks", &token, r#"{"prompt":"x","id":"fixed-1"}"#)
        .status(201);
    web.post("/api/tasks", &token, r#"{"prompt":"x","id":"fixed-1"}"#)
        .status(409);
    web.post("/api/tasks", &token, r#"{"prompt":"x","id":"../etc"}"#)
        .status(400);
    web.post("/api/tasks", &token, r#"{"prompt":"   "}"#)
        .status(400);
    web.post("/api/tasks", &token, r#"{"prompt":"x","extra":1}"#)
        .status(400);
    web.post("/api/tasks", &token, "not json").status(400);

    // The list and the task, as the CLI prints them.
    let listed = web.get("/api/tasks").json();
    let tasks: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(tasks.len(), 2);
    assert!(tasks.contains(&id.as_str()) && tasks.contains(&"fixed-1"));
    let cli_list: Value =
        serde_json::from_str(&p.in_ws(&["task", "list"], &["--json"]).output().stdout).unwrap();
    assert_eq!(listed, cli_list, "the same document as task list --json");
    let shown = web.get(&format!("/api/tasks/{id}"));
    shown.status(200);
    assert_eq!(
        shown.json(),
        p.show(&id),
        "the same document as task show --json"
    );
    web.get("/api/tasks/nope").status(404);
    web.get("/api/tasks/nope/attempts").status(404);
    web.get("/api/tasks/..%2f..%2fworkspace").status(400);
    assert_eq!(
        web.get(&format!("/api/tasks/{id}/attempts")).json()["attempts"],
        json!([])
    );

    // Run: a job in the queue, as `task run` writes it; not twice.
    let run = web.post(&format!("/api/tasks/{id}/run"), &token, "{}");
    run.status(202);
    let job = run.json()["job_id"].as_str().unwrap().to_string();
    assert_eq!(p.ipc("queue"), [format!("{job}.json")]);
    let queued: Value = serde_json::from_str(
        &std::fs::read_to_string(p.ws().join(format!("ipc/queue/{job}.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(queued["task_id"], id.as_str());
    assert_eq!(
        web.get(&format!("/api/tasks/{id}")).json()["status"],
        "QUEUED"
    );
    let again = web.post(&format!("/api/tasks/{id}/run"), &token, "{}");
    again.status(409);
    assert!(
        again.json()["error"]
            .as_str()
            .unwrap()
            .contains("already QUEUED")
    );
    web.post("/api/tasks/nope/run", &token, "{}").status(404);
    assert_eq!(p.ipc("queue").len(), 1);

    // The plan: nothing yet, then what `plan` wrote, read as `plan` reads it.
    assert_eq!(
        web.get("/api/plan").json(),
        json!({"wbs": null, "chat": []})
    );
    let tree = |node: &str| {
        json!({"root_node_id": "root", "nodes": {
            "root": {"title": "TODO app", "parent": null, "children": ["phase-1"]},
            "phase-1": {"title": "<i>Build</i>", "parent": "root", "children": [node]},
            node: {"title": "The list", "parent": "phase-1", "children": [], "task_id": id},
        }})
        .to_string()
    };
    std::fs::write(p.ws().join("wbs.json"), tree(&id)).unwrap();
    std::fs::write(
        p.ws().join("chat.jsonl"),
        "{\"at\":\"2026-11-22T10:00:00.000Z\",\"role\":\"user\",\"text\":\"TODO アプリを作成して\"}\n{\"at\":\"2026-11-22T10:00:02.000Z\",\"role\":\"meta\",\"text\":\"A TODO app <b>in the browser</b>\"}\n",
    )
    .unwrap();
    let plan = web.get("/api/plan").json();
    assert_eq!(plan["wbs"]["nodes"][&id]["task_id"], id.as_str());
    assert_eq!(plan["chat"][1]["role"], "meta");
    let page = web.get("/plan");
    page.status(200);
    let page = page.text();
    assert!(page.contains("&lt;i&gt;Build&lt;/i&gt;"), "{page}");
    assert!(
        page.contains(&format!(
            "<a href=\"/tasks/{id}\">TODO アプリを作成して</a>"
        )),
        "the task's own title, as plan --show has it: {page}"
    );
    assert!(page.contains("s-queued"), "the task's status in the tree");
    assert!(
        page.contains("A TODO app &lt;b&gt;in the browser&lt;/b&gt;"),
        "{page}"
    );

    // A tree that names a task's node n1, not by its task id, is refused by the
    // one reader of wbs.json: the page and the API say why.
    std::fs::write(p.ws().join("wbs.json"), tree("n1")).unwrap();
    let plan = web.get("/api/plan").json();
    assert_eq!(plan["wbs"], Value::Null, "{plan}");
    assert!(
        plan["wbs_error"]
            .as_str()
            .unwrap()
            .contains("wbs.json: nodes.n1.task_id"),
        "{plan}"
    );
    let page = web.get("/plan").text();
    assert!(page.contains("wbs.json: nodes.n1.task_id"), "{page}");
    assert!(!page.contains("No plan yet"), "{page}");

    // Plan requests run `agent-runner plan` as a child. With that tree the plan
    // refuses too and says why, and shows no understanding (the chat's latest one
    // is not this plan's).
    web.post("/api/plan", &token, r#"{"message":""}"#)
        .status(400);
    let failed = plan_from_page(&web, &token, "TODO アプリを作成して");
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["exit"], "exit status 1", "{failed}");
    let errors = failed["errors"].as_str().unwrap();
    assert!(
        errors.contains("wbs.json: nodes.n1.task_id"),
        "a failed plan says why: {failed}"
    );
    assert_eq!(failed["meta"], Value::Null, "{failed}");
    // Without that tree the plan succeeds: its understanding, its task in the list.
    std::fs::remove_file(p.ws().join("wbs.json")).unwrap();
    let done = plan_from_page(&web, &token, "TODO アプリを作成して、テスト付きで");
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["meta"]["text"], "A TODO app, planned.", "{done}");
    let output = done["output"].as_str().unwrap();
    assert!(output.contains("The planned list"), "{done}");
    let planned: Vec<Value> = web.get("/api/tasks").json()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["title"] == "The planned list")
        .cloned()
        .collect();
    assert_eq!(planned.len(), 1, "{planned:?}");
    assert_eq!(planned[0]["status"], "PENDING");
    assert!(
        output.contains(planned[0]["id"].as_str().unwrap()),
        "{done}"
    );
    web.get("/api/plan/runs/999").status(404);

    // The orchestrator: none, then one started from the page runs the queued job.
    let status = web.get("/api/orchestrator").json();
    assert_eq!(status["running"], false);
    assert_eq!(status["orchestrators"], json!([]));
    assert!(web.get("/").text().contains("orchestrator: not running"));
    web.post("/api/orchestrator/start", &token, "{}")
        .status(202);
    let mut status = Value::Null;
    wait_for(Duration::from_secs(20), || {
        status = web.get("/api/orchestrator").json();
        status["running"] == true
    });
    let pid = status["orchestrators"][0]["pid"].as_u64().unwrap() as u32;
    assert!(support::pipeline::alive(pid));
    assert_eq!(status["started_here"]["state"], "running");
    assert!(
        web.get("/")
            .text()
            .contains(&format!("orchestrator: running (pid {pid})"))
    );
    web.post("/api/orchestrator/start", &token, "{}")
        .status(409);
    wait_for(Duration::from_secs(60), || {
        web.get(&format!("/api/tasks/{id}")).json()["status"] == "SUCCEEDED"
    });
    let listed = web.get("/api/tasks").json();
    let row = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        (row["status"].as_str(), row["attempts"].as_u64()),
        (Some("SUCCEEDED"), Some(1))
    );
    // No test ran (Meta's word alone): SUCCEEDED, but not verified, and said so.
    assert_eq!(row["verified"], false, "{row}");
    assert_eq!(row["last_attempt"]["test_source"], "none", "{row}");
    assert_eq!(
        web.get(&format!("/api/tasks/{id}")).json()["verified"],
        false
    );
    let index = web.get("/").text();
    assert!(
        index.contains(
            "<span class=\"status s-succeeded s-unverified\">SUCCEEDED (unverified)</span>"
        ),
        "{index}"
    );
    let attempts = web.get(&format!("/api/tasks/{id}/attempts")).json();
    assert_eq!(attempts["attempts"][0]["job_id"], job.as_str());
    assert_eq!(
        attempts["attempts"][0]["result"]["summary"],
        "Nothing needed doing."
    );

    // The detail page shows the result, the attempt's files and its note.
    let detail = web.get(&format!("/tasks/{id}")).text();
    assert!(
        detail.contains(
            "<span id=\"status\" class=\"status s-succeeded s-unverified\">SUCCEEDED (unverified)</span>"
        ),
        "{detail}"
    );
    assert!(
        detail.contains("<dd id=\"verified\">no (test: none)</dd>"),
        "{detail}"
    );
    assert!(
        detail.contains("<dd id=\"summary\">Nothing needed doing.</dd>"),
        "{detail}"
    );
    assert!(
        detail.contains("<span class=\"v v-unknown\">unknown</span>"),
        "{detail}"
    );
    for file in [
        "builder.log",
        "task-config.yaml",
        "runner.stderr.log",
        "note.md",
    ] {
        let href = format!("/tasks/{id}/attempts/{job}/files/{file}");
        assert!(
            detail.contains(&format!("href=\"{href}\"")),
            "{file}: {detail}"
        );
        web.get(&href).status(200);
    }
    assert!(detail.contains("<article class=\"note\">"), "{detail}");
    let config = web.get(&format!(
        "/tasks/{id}/attempts/{job}/files/task-config.yaml"
    ));
    assert_eq!(
        config.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert!(
        config.text().contains(&format!("id: {id}")),
        "{}",
        config.text()
    );

    // Stopping the server stops the orchestrator it started.
    let (code, stderr) = web.stop();
    assert_eq!(code, Some(130), "{stderr}");
    wait_for(Duration::from_secs(10), || !support::pipeline::alive(pid));
    assert_eq!(
        names(&p.ws().join("ipc/orchestrators")),
        Vec::<String>::new()
    );
}

#[test]
fn state_changes_need_our_host_origin_token_and_json_and_refusals_change_nothing() {
    let p = workspace("web-guard");
    let id = p.new_task("guarded", "Nothing to do");
    let web = Served::start(&p, &[]);
    let token = web.token();
    let body = r#"{"prompt":"created by an attacker"}"#;
    let refused = |reply: support::web::Reply, status: u16| {
        reply.status(status);
        assert!(reply.json()["error"].is_string());
    };
    // No token, a wrong one (same length), two of them.
    refused(web.post_with("/api/tasks", &[], body), 403);
    refused(web.post("/api/tasks", &"0".repeat(64), body), 403);
    refused(web.post("/api/tasks", &token[..63], body), 403);
    refused(
        web.post_with(
            "/api/tasks",
            &[
                ("X-Agent-Runner-Token", &token),
                ("X-Agent-Runner-Token", "x"),
            ],
            body,
        ),
        403,
    );
    // Another origin, even with the token.
    let evil = format!(
        "POST /api/tasks HTTP/1.1\r\nHost: {}\r\nOrigin: http://evil.example\r\nX-Agent-Runner-Token: {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        web.addr,
        body.len()
    );
    refused(web.raw(evil.as_bytes()), 403);
    // A form post (not JSON), even with the token.
    let form = format!(
        "POST /api/tasks HTTP/1.1\r\nHost: {}\r\nX-Agent-Runner-Token: {token}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 8\r\n\r\nprompt=x",
        web.addr
    );
    refused(web.raw(form.as_bytes()), 415);
    // DNS rebinding: a foreign Host gets neither the page (with its token) nor a change.
    let rebound = web.raw(b"GET / HTTP/1.1\r\nHost: evil.example:8765\r\n\r\n");
    rebound.status(421);
    assert!(!rebound.text().contains(&token));
    let rebound_post = format!(
        "POST /api/tasks/{id}/run HTTP/1.1\r\nHost: evil.example\r\nOrigin: http://evil.example\r\nX-Agent-Runner-Token: {token}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
    );
    refused(web.raw(rebound_post.as_bytes()), 421);
    web.raw(b"GET /api/tasks HTTP/1.1\r\n\r\n").status(421);
    // GET never changes anything; a state-changing route does not answer GET.
    web.get(&format!("/api/tasks/{id}/run")).status(405);
    web.get("/api/orchestrator/start").status(405);
    refused(
        web.post_with(&format!("/api/tasks/{id}/run"), &[], "{}"),
        403,
    );
    refused(web.post_with("/api/orchestrator/start", &[], "{}"), 403);
    refused(web.post_with("/api/plan", &[], r#"{"message":"x"}"#), 403);
    // Nothing changed.
    let tasks = web.get("/api/tasks").json();
    assert_eq!(tasks["tasks"].as_array().unwrap().len(), 1, "{tasks}");
    assert_eq!(p.ipc("queue"), Vec::<String>::new());
    assert_eq!(web.get("/api/orchestrator").json()["running"], false);
    assert_eq!(web.get("/api/plan/runs/1").status, 404, "no plan started");
    // Our own page's request passes, and every response carries the policy.
    let ok = web.post(&format!("/api/tasks/{id}/run"), &token, "{}");
    ok.status(202);
    // Stopping is a change like any other: the queued job stays without the token.
    web.get(&format!("/api/tasks/{id}/stop")).status(405);
    refused(
        web.post_with(&format!("/api/tasks/{id}/stop"), &[], "{}"),
        403,
    );
    let stop_evil = format!(
        "POST /api/tasks/{id}/stop HTTP/1.1\r\nHost: {}\r\nOrigin: http://evil.example\r\nX-Agent-Runner-Token: {token}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}",
        web.addr
    );
    refused(web.raw(stop_evil.as_bytes()), 403);
    assert_eq!(p.ipc("queue").len(), 1, "still queued");
    for reply in [
        ok,
        web.get("/"),
        web.get("/api/tasks"),
        web.get("/static/app.js"),
    ] {
        let csp = reply.header("content-security-policy").unwrap();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(reply.header("x-frame-options"), Some("DENY"));
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
    }
    // A new server has a new token; the old one no longer works.
    drop(web.stop());
    let second = Served::start(&p, &[]);
    assert_ne!(second.token(), token);
    refused(second.post("/api/tasks", &token, body), 403);
}

#[test]
#[ignore = "needs root"]
fn another_local_user_gets_neither_the_page_with_its_token_nor_a_change() {
    needs!(Root);
    let p = workspace("web-other-user");
    let id = p.new_task("mine", "Nothing to do");
    let web = Served::start(&p, &[]);
    let token = web.token();
    let page = format!("GET / HTTP/1.1\r\nHost: {}\r\n\r\n", web.addr);
    let read = support::web::request_as(4711, &web.addr, page.as_bytes());
    read.status(403);
    assert!(!read.text().contains(&token), "{}", read.text());
    assert!(read.text().contains("uid 4711"), "{}", read.text());
    // Even with the token (read some other way): nothing changes.
    let body = r#"{"prompt":"planted by another user"}"#;
    let post = format!(
        "POST /api/tasks/{id}/run HTTP/1.1\r\nHost: {0}\r\nOrigin: http://{0}\r\nX-Agent-Runner-Token: {token}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}",
        web.addr
    );
    support::web::request_as(4711, &web.addr, post.as_bytes()).status(403);
    let create = format!(
        "POST /api/tasks HTTP/1.1\r\nHost: {0}\r\nX-Agent-Runner-Token: {token}\r\nContent-Type: application/json\r\nContent-Length: {1}\r\n\r\n{body}",
        web.addr,
        body.len()
    );
    let refused = support::web::request_as(4711, &web.addr, create.as_bytes());
    refused.status(403);
    assert!(refused.text().contains("uid 4711"), "{}", refused.text());
    assert_eq!(p.ipc("queue"), Vec::<String>::new());
    let tasks = web.get("/api/tasks").json();
    assert_eq!(tasks["tasks"].as_array().unwrap().len(), 1, "{tasks}");
}

/// Another user's slowloris: 120 connections that never send a request. They are
/// refused as they are accepted, so they hold no worker and no place in the queue,
/// and the owner still gets in (else 8 workers wait 10 s on them, 64 more wait in
/// the queue, and the owner gets 503).
#[test]
#[ignore = "needs root"]
fn another_users_idle_connections_do_not_keep_the_owner_out() {
    needs!(Root);
    let p = workspace("web-other-slowloris");
    let web = Served::start(&p, &[]);
    let (host, port) = web.addr.rsplit_once(':').unwrap();
    let script = format!(
        "fds=(); for i in $(seq 120); do exec {{fd}}<>/dev/tcp/{host}/{port} || exit 1; fds+=($fd); done; echo opened; timeout 10 cat <&${{fds[0]}}; echo; echo answered; exec sleep 30"
    );
    let mut squatter = support::web::bash_as(4711, &script).start();
    let mut out = std::io::BufReader::new(squatter.child().stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line, "opened\n", "120 connections open");
    for _ in 0..5 {
        web.get("/api/tasks").status(200);
    }
    let mut refused = String::new();
    loop {
        line.clear();
        if std::io::BufRead::read_line(&mut out, &mut line).unwrap() == 0 || line == "answered\n" {
            break;
        }
        refused.push_str(&line);
    }
    assert!(
        refused.starts_with("HTTP/1.1 403 ") && refused.contains("uid 4711"),
        "a connection that sent nothing is told why: {refused}"
    );
    squatter.kill();
}

/// `http://localhost:<port>/` may reach 127.0.0.1 or ::1. The server holds its port
/// on both, so no other user can listen on the other one; and it answers only the
/// address a connection came to as Host, so a page loaded through `localhost` (or
/// any name) is never same-origin with its own pages.
#[test]
fn localhost_cannot_be_squatted_and_only_the_printed_address_is_served() {
    let p = workspace("web-localhost");
    let web = Served::start(&p, &[]);
    let port = web
        .addr
        .strip_prefix("127.0.0.1:")
        .expect("a 127.0.0.1 URL");
    let token = web.token();
    // The squatter's attempts to hold the port on the other loopback address.
    for squat in [format!("[::1]:{port}"), format!("[::]:{port}")] {
        let e = std::net::TcpListener::bind(&squat).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{squat}");
    }
    // ::1 is this server too, under its own address.
    let v6 = format!("[::1]:{port}");
    let own = support::web::request(
        &v6,
        format!("GET /api/tasks HTTP/1.1\r\nHost: {v6}\r\n\r\n").as_bytes(),
    );
    own.status(200);
    // Through `localhost`, on either address: neither the page with its token nor a
    // change, and the way to the right address.
    let body = r#"{"prompt":"planted through localhost"}"#;
    for addr in [web.addr.as_str(), v6.as_str()] {
        let page = support::web::request(
            addr,
            format!("GET / HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n").as_bytes(),
        );
        page.status(421);
        assert!(!page.text().contains(&token));
        assert!(
            page.text().contains(&format!("open http://{addr}/")),
            "{}",
            page.text()
        );
        let post = format!(
            "POST /api/tasks HTTP/1.1\r\nHost: localhost:{port}\r\nOrigin: http://localhost:{port}\r\nX-Agent-Runner-Token: {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        support::web::request(addr, post.as_bytes()).status(421);
        // Nor the other loopback's address as Host.
        let other = if addr == v6 {
            web.addr.clone()
        } else {
            v6.clone()
        };
        support::web::request(
            addr,
            format!("GET / HTTP/1.1\r\nHost: {other}\r\n\r\n").as_bytes(),
        )
        .status(421);
    }
    let tasks = web.get("/api/tasks").json();
    assert_eq!(tasks["tasks"], json!([]), "{tasks}");
    drop(web.stop());

    // A port another program already holds on ::1 is refused, saying why.
    let squatter = std::net::TcpListener::bind("[::1]:0").unwrap();
    let taken = squatter.local_addr().unwrap().port();
    p.in_ws(&["serve"], &["--addr", &format!("127.0.0.1:{taken}")])
        .output()
        .code(1)
        .stderr_has(&format!("cannot listen on [::1]:{taken} as well"))
        .stderr_has(&format!(
            "http://localhost:{taken}/ could lead a browser to it"
        ));
}

#[test]
fn hostile_titles_results_and_notes_render_as_text() {
    let p = workspace("web-escape");
    let id = p.new_task("hostile", SCRIPT);
    let note_path = p.root.join(format!(".agent-runner/task-{id}.md"));
    std::fs::create_dir_all(note_path.parent().unwrap()).unwrap();
    std::fs::write(
        &note_path,
        format!(
            "# Task Note\n\n## 1. Summary\n\n{SCRIPT}\n\n<img src=x onerror=alert(2)>\n\nInline <iframe src=/></iframe> html\n\n[click](javascript:alert(3)) [also](JAVASCRIPT:alert(4)) [data](data:text/html;base64,PHNjcmlwdD4=)\n\n<details>\n<summary>PRD (full text)</summary>\n\nfolded\n\n</details>\n"
        ),
    )
    .unwrap();
    record_attempt(&p, &id, "j-hostile", result_with_note(&id, &note_path));
    let web = Served::start(&p, &[]);
    // The list: the title is text.
    let list = web.get("/").text();
    assert!(
        list.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{list}"
    );
    assert!(!list.contains(SCRIPT), "{list}");
    assert_eq!(
        list.matches("<script").count(),
        1,
        "only our own script tag"
    );
    // The JSON: just a string.
    let listed = web.get("/api/tasks").json();
    assert_eq!(listed["tasks"][0]["title"], SCRIPT);
    // The detail: title, prompt, summary, commands, note: all text.
    let detail = web.get(&format!("/tasks/{id}")).text();
    assert_eq!(
        detail.matches("<script").count(),
        1,
        "only our own script tag: {detail}"
    );
    assert!(!detail.contains("<img"), "{detail}");
    assert!(!detail.contains("<iframe"), "{detail}");
    assert!(!detail.contains("<b>"), "{detail}");
    assert!(
        !detail.to_lowercase().contains("href=\"javascript"),
        "{detail}"
    );
    assert!(!detail.contains("href=\"data:"), "{detail}");
    assert!(
        detail.contains("<h1 id=\"title\">&lt;script&gt;alert(1)&lt;/script&gt;</h1>"),
        "{detail}"
    );
    assert!(
        detail.contains("&lt;img src=x onerror=alert(1)&gt; all done"),
        "{detail}"
    );
    assert!(
        detail.contains("<code>&lt;b&gt;npm test&lt;/b&gt;</code>"),
        "{detail}"
    );
    assert!(
        detail.contains("<td class=\"n error\">101</td><td class=\"n\">1 min 5 s</td>"),
        "{detail}"
    );
    assert!(
        detail.contains("&lt;img src=x onerror=alert(2)&gt;"),
        "{detail}"
    );
    assert!(
        detail.contains("click also data"),
        "the links' text stays: {detail}"
    );
    assert!(
        detail.contains("<details>\n<summary>PRD (full text)</summary>"),
        "{detail}"
    );
    // The note itself, as a file: plain text, never sniffed as HTML.
    let raw = web.get(&format!("/tasks/{id}/attempts/j-hostile/files/note.md"));
    raw.status(200);
    assert_eq!(
        raw.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(raw.header("x-content-type-options"), Some("nosniff"));
    assert!(raw.text().contains(SCRIPT));
}

#[test]
fn a_table_in_metas_summary_cannot_blow_up_the_task_page() {
    // GFM fills a table's short rows with empty cells: a wide header and many
    // one-cell rows, a few KiB of summary, would become megabytes of HTML (and of
    // parser memory) on every view of the page.
    let (columns, rows) = (300, 300);
    let summary = format!(
        "|{}\n|{}\n{}",
        "a|".repeat(columns),
        "-|".repeat(columns),
        "x\n".repeat(rows)
    );
    let meta = QUICK_META.replace(
        "summary: Nothing needed doing.",
        &format!("summary: {}", serde_json::to_string(&summary).unwrap()),
    );
    let p = Pipeline::new("web-table", false);
    p.init(BUILDER_REPLY, &meta, "");
    let id = p.new_task(&support::pipeline::task_id("web-table"), "Nothing to do");
    p.run_tasks(&[&id]);
    p.orchestrate_once(&[]).output().code(0);
    let web = Served::start(&p, &[]);
    let detail = web.get(&format!("/tasks/{id}")).text();
    let note = &detail[detail.find("<article class=\"note\">").expect("the note")..];
    assert!(note.contains("a|a|a|"), "the summary's text is shown");
    assert!(!note.contains("<td"), "{}", &note[..note.len().min(2000)]);
    assert!(detail.len() < 64 * 1024, "{} bytes", detail.len());
}

#[test]
fn request_bodies_and_heads_are_bounded() {
    let p = workspace("web-bounds");
    let web = Served::start(&p, &[]);
    let token = web.token();
    // Announced too large: refused before it is read.
    let announced = format!(
        "POST /api/tasks HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nX-Agent-Runner-Token: {token}\r\nContent-Length: 100000000\r\n\r\n",
        web.addr
    );
    web.raw(announced.as_bytes()).status(413);
    // Sent too large.
    let big = format!(r#"{{"prompt":"{}"}}"#, "a".repeat(200 * 1024));
    web.post("/api/tasks", &token, &big).status(413);
    // Within the body limit but above the prompt limit.
    let long = format!(r#"{{"prompt":"{}"}}"#, "a".repeat(40 * 1024));
    web.post("/api/tasks", &token, &long).status(413);
    // No length: chunked bodies are not read.
    let chunked = format!(
        "POST /api/tasks HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        web.addr
    );
    web.raw(chunked.as_bytes()).status(411);
    let head = format!(
        "GET / HTTP/1.1\r\nHost: {}\r\nX-Big: {}\r\n\r\n",
        web.addr,
        "b".repeat(20 * 1024)
    );
    web.raw(head.as_bytes()).status(431);
    web.raw(b"NOT HTTP\r\n\r\n").status(400);
    assert_eq!(
        web.get("/api/tasks").json()["tasks"],
        json!([]),
        "nothing created"
    );
    // The server still answers.
    web.get("/").status(200);
}

#[test]
fn files_are_served_only_as_the_store_names_them_and_never_through_a_symlink() {
    let p = workspace("web-files");
    let id = p.new_task("files", "Files");
    let other = p.new_task("other", "Other");
    let outside = p
        .scratch
        .file("outside/secret.txt", "TOP SECRET host file\n");
    let note_path = p.root.join(format!(".agent-runner/task-{id}.md"));
    std::fs::create_dir_all(note_path.parent().unwrap()).unwrap();
    std::fs::write(&note_path, "# Note\n").unwrap();
    record_attempt(&p, &id, "j-files", result_with_note(&id, &note_path));
    let logs = p.ws().join("logs/j-files");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(logs.join("builder.log"), "builder says hi\n").unwrap();
    std::os::unix::fs::symlink(&outside, logs.join("runner.stderr.log")).unwrap();
    let runner_logs = p.root.join(format!(".agent-runner/logs/{id}"));
    std::fs::create_dir_all(&runner_logs).unwrap();
    std::fs::write(runner_logs.join("run-1.log"), "worker output\n").unwrap();
    std::os::unix::fs::symlink(&outside, runner_logs.join("test-1.log")).unwrap();
    // A second attempt whose log directory is a symlink to a directory outside.
    record_attempt(&p, &id, "j-linked", result_with_note(&id, &note_path));
    std::os::unix::fs::symlink(outside.parent().unwrap(), p.ws().join("logs/j-linked")).unwrap();
    std::fs::copy(&outside, outside.parent().unwrap().join("builder.log")).unwrap();
    // An attempt whose result names a note elsewhere.
    record_attempt(&p, &other, "j-other", result_with_note(&other, &outside));
    let web = Served::start(&p, &[]);

    let file = |path: &str| web.get(&format!("/tasks/{id}/attempts/j-files/files/{path}"));
    assert_eq!(file("builder.log").text(), "builder says hi\n");
    assert_eq!(file("run-1.log").text(), "worker output\n");
    assert_eq!(file("note.md").text(), "# Note\n");
    let secret = |reply: support::web::Reply| {
        assert!(reply.status >= 400, "{}: {}", reply.status, reply.text());
        assert!(!reply.text().contains("TOP SECRET"), "{}", reply.text());
    };
    secret(file("runner.stderr.log"));
    secret(file("test-1.log"));
    secret(web.get(&format!("/tasks/{id}/attempts/j-linked/files/builder.log")));
    secret(web.get(&format!("/tasks/{other}/attempts/j-other/files/note.md")));
    // Names not in the fixed set: not found.
    for path in [
        format!("/tasks/{id}/attempts/j-files/files/secret.txt"),
        format!("/tasks/{id}/attempts/j-files/files/workspace.json"),
        format!("/tasks/{other}/attempts/j-files/files/builder.log"),
    ] {
        let reply = web.get(&path);
        assert_eq!(reply.status, 404, "{path}: {}", reply.text());
    }
    // Traversal, however it is spelled: refused before any file is looked for.
    for path in [
        format!("/tasks/{id}/attempts/j-files/files/..%2f..%2f..%2foutside%2fsecret.txt"),
        format!("/tasks/{id}/attempts/j-files/files/%2e%2e"),
        format!("/tasks/{id}/attempts/j-files/files/%2E%2e%5csecret.txt"),
        format!("/tasks/{id}/attempts/../files/builder.log"),
        format!("/tasks/{id}/attempts/j-files/files/../../../../outside/secret.txt"),
        format!("/tasks/{id}/attempts/j-files/files/run-1.log%00"),
        "/tasks/%2e%2e/attempts/j-files/files/builder.log".to_string(),
        "/static/..%2f..%2fCargo.toml".to_string(),
        "/..%2f..%2fetc%2fpasswd".to_string(),
    ] {
        let reply = web.get(&path);
        assert_eq!(reply.status, 400, "{path}: {}", reply.text());
        assert!(!reply.text().contains("TOP SECRET"), "{path}");
    }
    // The detail page links what is there and safe to open, nothing else.
    let detail = web.get(&format!("/tasks/{id}")).text();
    assert!(detail.contains("files/run-1.log"), "{detail}");
    assert!(!detail.contains("TOP SECRET"), "{detail}");
    let other_page = web.get(&format!("/tasks/{other}")).text();
    assert!(
        !other_page.contains("TOP SECRET") && !other_page.contains("class=\"note\""),
        "{other_page}"
    );
    // A symlinked .agent-runner in the root: no note, no runner logs.
    std::fs::rename(p.root.join(".agent-runner"), p.scratch.join("moved")).unwrap();
    std::os::unix::fs::symlink(p.scratch.join("moved"), p.root.join(".agent-runner")).unwrap();
    secret(file("note.md"));
    secret(file("run-1.log"));
    assert!(
        !web.get(&format!("/tasks/{id}"))
            .text()
            .contains("class=\"note\"")
    );
}

#[test]
fn a_non_loopback_address_needs_allow_remote_and_warns() {
    let p = workspace("web-remote");
    let refused = p.in_ws(&["serve"], &["--addr", "0.0.0.0:0"]).output();
    refused
        .code(2)
        .stderr_has("is not a loopback address")
        .stderr_has("--allow-remote");
    p.in_ws(&["serve"], &["--addr", "localhost:8765"])
        .output()
        .code(2)
        .stderr_has("is not IP:PORT");
    let mut running = p
        .in_ws(&["serve"], &["--addr", "0.0.0.0:0", "--allow-remote"])
        .start();
    let (line, _stdout) = support::web::first_line(&mut running);
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let addr = format!("127.0.0.1:{port}");
    let reply = support::web::request(
        &addr,
        format!("GET /api/tasks HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
    );
    reply.status(200);
    support::web::signal(running.id(), 15);
    running.finish().stderr_has("warning: serving on 0.0.0.0:");
}

#[test]
fn an_orchestrator_started_from_the_command_line_shows_as_running() {
    let p = workspace("web-presence");
    let web = Served::start(&p, &[]);
    assert_eq!(web.get("/api/orchestrator").json()["running"], false);
    let orchestrator = p.in_ws(&["orchestrate"], &[]).start();
    let pid = orchestrator.id();
    wait_for(Duration::from_secs(20), || {
        web.get("/api/orchestrator").json()["running"] == true
    });
    let status = web.get("/api/orchestrator").json();
    assert_eq!(status["orchestrators"][0]["pid"], pid);
    assert_eq!(status["started_here"], Value::Null);
    support::web::signal(pid, 15);
    orchestrator.finish();
    assert_eq!(web.get("/api/orchestrator").json()["running"], false);
    // Killed outright, it leaves its marker behind, unlocked: not running either.
    let killed = p.in_ws(&["orchestrate"], &[]).start();
    wait_for(Duration::from_secs(20), || {
        web.get("/api/orchestrator").json()["running"] == true
    });
    killed.kill();
    assert_eq!(
        names(&p.ws().join("ipc/orchestrators")).len(),
        1,
        "the marker stays"
    );
    assert_eq!(web.get("/api/orchestrator").json()["running"], false);
}

#[test]
fn a_silent_or_trickling_client_holds_a_worker_for_a_bounded_time() {
    let p = workspace("web-slow");
    let web = Served::start(&p, &[]);
    // As many half-sent requests as there are worker threads (8): some silent, some
    // sending a byte now and then (each read of the server gets one), never ending
    // the head; they must be cut off while still sending.
    let silent: Vec<std::net::TcpStream> = (0..4)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(&web.addr).unwrap();
            std::io::Write::write_all(&mut s, b"GET / HTT").unwrap();
            s
        })
        .collect();
    let trickling: Vec<_> = (0..4)
        .map(|_| {
            let addr = web.addr.clone();
            std::thread::spawn(move || trickle(&addr, 100))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // A real request still gets its answer once the slow ones time out.
    web.get("/api/tasks").status(200);
    for mut s in silent {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut answer = String::new();
        let _ = std::io::Read::read_to_string(&mut s, &mut answer);
        assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    }
    for t in trickling {
        let (answer, still_sending) = t.join().unwrap();
        assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
        assert!(still_sending, "answered only once the client stopped");
    }
}

/// Sends a never-ending request head to `addr`, a byte every 300 ms, at most `bytes`
/// of it; returns the answer and whether it came while the client was still sending.
fn trickle(addr: &str, bytes: usize) -> (String, bool) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nX-Slow: ").unwrap();
    s.set_nonblocking(true).unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    for _ in 0..bytes {
        match s.read(&mut chunk) {
            Ok(n) if n > 0 => {
                answer.extend_from_slice(&chunk[..n]);
                break;
            }
            _ => {}
        }
        if s.write(b"a").is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let still_sending = !answer.is_empty();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    answer.extend_from_slice(&rest);
    (String::from_utf8_lossy(&answer).into_owned(), still_sending)
}

#[test]
fn an_attempt_in_a_clone_shows_its_note_and_files() {
    // A home reached through a symlink: the runner names the note by its real path.
    // The attempt succeeds, so its clone is removed and its note and logs are kept
    // in the job's log directory: the page finds them there.
    let mut p = Pipeline::new("web-clone", true);
    std::fs::create_dir_all(p.scratch.join("real-home")).unwrap();
    std::os::unix::fs::symlink(p.scratch.join("real-home"), p.scratch.join("home")).unwrap();
    p.home = p.scratch.join("home");
    p.init(BUILDER_REPLY, QUICK_META, "isolation: clone\n");
    let id = p.new_task(&support::pipeline::task_id("web-clone"), "Nothing to do");
    let job = p.run_tasks(&[&id]).remove(0);
    p.orchestrate_once(&[]).output().code(0);
    let kept = p.ws().join(format!("logs/{job}/agent-runner"));
    let note = kept.join(format!("task-{id}.md"));
    assert!(note.is_file(), "{}", note.display());
    assert!(!p.ws().join(format!("clones/{job}")).exists());
    let web = Served::start(&p, &[]);
    let detail = web.get(&format!("/tasks/{id}")).text();
    assert!(detail.contains("<article class=\"note\">"), "{detail}");
    let href = format!("/tasks/{id}/attempts/{job}/files/note.md");
    assert!(detail.contains(&href), "{detail}");
    assert_eq!(
        web.get(&href).text(),
        std::fs::read_to_string(&note).unwrap()
    );
    support::task::assert_no_container(&id);
}

/// Issue 18, items 14 and 15: the chat box's API applies the runner's title and id
/// rules, so it makes no task that could never run.
#[test]
fn the_api_makes_no_task_a_run_would_refuse() {
    let p = workspace("web-rules");
    let web = Served::start(&p, &[]);
    let token = web.token();
    for (body, words) in [
        (
            json!({"prompt": "x", "title": "clear\u{1b}[2J"}),
            "control characters",
        ),
        (
            json!({"prompt": "x", "title": "nul\u{0}"}),
            "control characters",
        ),
        (json!({"prompt": "x", "id": "a..b"}), "agent-runner/<id>"),
        (json!({"prompt": "x", "id": "x.lock"}), "agent-runner/<id>"),
    ] {
        let reply = web.post("/api/tasks", &token, &body.to_string());
        reply.status(400);
        let error = reply.json()["error"].as_str().unwrap().to_string();
        assert!(error.contains(words), "{body}: {error}");
    }
    assert_eq!(web.get("/api/tasks").json()["tasks"], json!([]));
    let made = web.post(
        "/api/tasks",
        &token,
        &json!({"prompt": "\u{1b}[1mbold\u{1b}[0m plan"}).to_string(),
    );
    made.status(201);
    assert_eq!(made.json()["task"]["title"], "\\e[1mbold\\e[0m plan");
}

#[test]
fn the_event_api_follows_a_job_and_stop_cancels_a_queued_one() {
    let p = workspace("web-events");
    let id = p.new_task("followed", "Nothing to do");
    let web = Served::start(&p, &[]);
    let token = web.token();
    let events = |query: &str| web.get(&format!("/api/tasks/{id}/events{query}")).json();
    assert_eq!(events("")["stage"], "never");
    web.get("/api/tasks/nope/events").status(404);
    assert!(
        !web.get(&format!("/tasks/{id}"))
            .text()
            .contains("id=\"live\"")
    );
    let job = web
        .post(&format!("/api/tasks/{id}/run"), &token, "{}")
        .json()["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let queued = events("");
    assert_eq!(
        (&queued["stage"], &queued["job_id"]),
        (&json!("queued"), &json!(job))
    );
    assert_eq!(queued["lines"], json!([]));
    // The page of a task with a job follows it live, and has the Stop button.
    let page = web.get(&format!("/tasks/{id}")).text();
    assert!(
        page.contains(&format!("<section id=\"live\" data-job=\"{job}\"")),
        "{page}"
    );
    assert!(page.contains("id=\"stop\""), "{page}");
    // Junk in the query is no cursor.
    assert_eq!(events("?job=../x&file=-1&offset=zz")["stage"], "queued");
    let stopped = web.post(&format!("/api/tasks/{id}/stop"), &token, "{}");
    stopped.status(202);
    assert_eq!(stopped.json()["stopping"], "cancelled");
    let ended = events(&format!("?job={job}"));
    assert_eq!(
        (&ended["stage"], &ended["status"]),
        (&json!("ended"), &json!("cancelled"))
    );
    let again = web.post(&format!("/api/tasks/{id}/stop"), &token, "{}");
    again.status(409);
    assert!(
        again.json()["error"]
            .as_str()
            .unwrap()
            .contains("nothing to stop")
    );
    web.post("/api/tasks/nope/stop", &token, "{}").status(404);

    // Continue: only a failed attempt whose runner left its state.
    let refused = web.post(&format!("/api/tasks/{id}/continue"), &token, "{}");
    refused.status(409);
    assert!(
        refused.json()["error"]
            .as_str()
            .unwrap()
            .contains("it has not run yet")
    );
    let mut failed_attempt = json!({"task_id": id, "status": "failed", "error": "boom"});
    failed_attempt["note_path"] = Value::Null;
    record_attempt(&p, &id, "j-failed-1", failed_attempt);
    let path = p.ws().join(format!("tasks/{id}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap();
    let (before, last) = text.trim_end().rsplit_once('\n').unwrap();
    let mut last: Value = serde_json::from_str(last).unwrap();
    last["status"] = "failed".into();
    std::fs::write(&path, format!("{before}\n{last}\n")).unwrap();
    assert_eq!(
        web.get(&format!("/api/tasks/{id}")).json()["status"],
        "FAILED"
    );
    let page = web.get(&format!("/tasks/{id}")).text();
    assert!(page.contains("class=\"continue\""), "{page}");
    let refused = web.post(&format!("/api/tasks/{id}/continue"), &token, "{}");
    refused.status(409);
    assert!(
        refused.json()["error"]
            .as_str()
            .unwrap()
            .contains("left no saved state"),
        "{}",
        refused.text()
    );
    web.post_with(&format!("/api/tasks/{id}/continue"), &[], "{}")
        .status(403);
    web.post("/api/tasks/nope/continue", &token, "{}")
        .status(404);
    assert_eq!(p.ipc("queue"), Vec::<String>::new());
}
