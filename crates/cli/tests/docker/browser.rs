//! The web view in a real headless Chromium (SPEC §14), the seed's golden test GT-3
//! offline: type "TODO アプリを作成して" into the chat box, see the task PENDING,
//! press Run, start an orchestrator from the page (scripted Task Builder and Meta,
//! the test worker image), see the task turn SUCCEEDED, and its summary and
//! validation on the detail page; and the chat box's plan toggle, whose planned
//! tasks appear in the list and the plan tree. Screenshots are kept in
//! target/test-artifacts/.

use crate::support;

use std::time::Duration;

use serde_json::json;

use support::pipeline::{Pipeline, meta_script, wait_for};
use support::prerequisite::needs;
use support::task::assert_no_container;
use support::web::Served;
use support::webdriver::{Browser, base64_decode};

const PROMPT: &str = "TODO アプリを作成して";

/// The Task Builder's reply: a TaskConfig with a test command; the orchestrator
/// sets the id, title and root_dir.
const BUILDER: &str = "- type: build_task_config\n  task:\n    id: chosen-by-the-llm\n    title: A title the LLM made up\n    instructions: |\n      Create a TODO app; write todo.txt.\n    project:\n      root_dir: /somewhere/else\n    test:\n      command: test -f todo.txt\n  runner:\n    meta:\n      model: gpt-4.1\n    worker:\n      type: docker_codex_cli\n";

/// The row of the task titled arguments[0]: [status, id], or null.
const ROW: &str = "const row = Array.from(document.querySelectorAll('#tasks tbody tr')).find((r) => r.cells[1].querySelector('a').textContent === arguments[0]); return row ? [row.dataset.status, row.dataset.id] : null;";

#[test]
fn base64_decodes_screenshots() {
    assert_eq!(base64_decode("aGVsbG8="), b"hello");
    assert_eq!(base64_decode("aGk="), b"hi");
    assert_eq!(base64_decode("YWJj"), b"abc");
}

#[test]
#[ignore = "needs chromium"]
fn gt3_chat_run_and_result_in_the_browser() {
    needs!(Chromium);
    let browser = Browser::start();
    let p = Pipeline::new("web-gt3", false);
    p.init(
        BUILDER,
        &meta_script("@run: echo 'TODO app' > todo.txt\n@say: wrote todo.txt"),
        "",
    );
    let web = Served::start(&p, &[]);
    browser.open(&web.url("/"));
    // A task made outside the page appears by itself; its hostile title is text
    // (the script builds the row).
    let hostile = "<img src=x onerror=\"window.pwned=1\">";
    p.in_ws(&["task", "new"], &["--id", "hostile-title", hostile])
        .output()
        .code(0);
    assert_eq!(
        browser.wait_for(Duration::from_secs(10), ROW, json!([hostile]))[1],
        "hostile-title"
    );

    // Chat → task, PENDING.
    browser.type_into("#prompt", PROMPT);
    browser.click("#send");
    let row = browser.wait_for(Duration::from_secs(10), ROW, json!([PROMPT]));
    assert_eq!(row[0], "PENDING", "{row}");
    let id = row[1].as_str().unwrap().to_string();
    assert!(
        browser.text("#chat-status").contains(&id),
        "the chat says which task it made"
    );
    assert_eq!(
        browser.run("return document.getElementById('prompt').value", json!([])),
        ""
    );
    let shown = p.show(&id);
    assert_eq!(shown["task"]["title"], PROMPT);
    assert_eq!(shown["task"]["raw_prompt"], PROMPT);
    browser.screenshot("web-gt3-1-list-pending");

    // Run → queued (no orchestrator yet).
    browser.click(&format!("tr[data-id=\"{id}\"] button.run"));
    browser.wait_for(
        Duration::from_secs(10),
        "const r = document.querySelector('tr[data-id=\"' + arguments[0] + '\"]'); return r && r.dataset.status === 'QUEUED';",
        json!([id]),
    );
    assert!(browser.text("#notice").contains("enqueued"));
    assert_eq!(p.ipc("queue").len(), 1);
    assert_eq!(browser.text("#orchestrator"), "orchestrator: not running");

    // Start an orchestrator from the page; the task runs and succeeds.
    browser.click("#start-orchestrator");
    browser.wait_for(
        Duration::from_secs(20),
        "return document.getElementById('orchestrator').textContent.startsWith('orchestrator: running');",
        json!([]),
    );
    browser.wait_for(
        Duration::from_secs(180),
        "const r = document.querySelector('tr[data-id=\"' + arguments[0] + '\"]'); return r && r.dataset.status === 'SUCCEEDED';",
        json!([id]),
    );
    assert_eq!(
        browser.text(&format!("tr[data-id=\"{id}\"] td.attempts")),
        "1"
    );
    // Live-updated from the API: its test passed, so no "(unverified)" (SPEC §16).
    assert_eq!(
        browser.text(&format!("tr[data-id=\"{id}\"] td span.status")),
        "SUCCEEDED"
    );
    browser.screenshot("web-gt3-2-list-succeeded");

    // The detail page: status, summary, validation with its command.
    browser.click(&format!("tr[data-id=\"{id}\"] a.title"));
    browser.wait_for(
        Duration::from_secs(10),
        "return document.body.dataset.page === 'task';",
        json!([]),
    );
    assert_eq!(browser.text("#status"), "SUCCEEDED");
    assert_eq!(browser.text("#title"), PROMPT);
    assert_eq!(browser.text("#summary"), "The work is done and checked.");
    assert_eq!(browser.text("#validation"), "passed");
    let commands = browser.text("#validation-commands");
    assert!(commands.contains("test -f todo.txt"), "{commands}");
    let exit_code = browser.run(
        "return document.querySelector('#validation-commands tbody tr').cells[1].textContent;",
        json!([]),
    );
    assert_eq!(exit_code, "0");
    let note = browser.text("article.note");
    assert!(
        note.contains(&format!("task {id}")) || note.contains(&id),
        "{note}"
    );
    browser.screenshot("web-gt3-3-detail");
    browser.run(
        "document.querySelector('article.note').scrollIntoView();",
        json!([]),
    );
    browser.screenshot("web-gt3-4-detail-note");
    // The log links open the files.
    browser.click("td.files a[href$=\"/runner.stderr.log\"]");
    let log = browser.wait_for(
        Duration::from_secs(10),
        "return document.contentType === 'text/plain' ? document.body.textContent : null;",
        json!([]),
    );
    assert!(!log.as_str().unwrap().is_empty());

    // Nothing hostile ran; the page's own script did its work.
    assert_eq!(
        browser.run("return window.pwned === undefined;", json!([])),
        true
    );
    assert_eq!(
        std::fs::read_to_string(p.root.join("todo.txt")).unwrap(),
        "TODO app\n"
    );

    // Stopping the server stops the orchestrator it started; nothing is left.
    drop(browser);
    let (code, stderr) = web.stop();
    assert_eq!(code, Some(130), "{stderr}");
    wait_for(Duration::from_secs(10), || {
        std::fs::read_dir(p.ws().join("ipc/orchestrators"))
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    });
    assert_no_container(&id);
}

/// The page another local user serves on the other loopback address, if they can:
/// once loaded through `http://localhost:<port>/`, it fetches `/` again (now from
/// the real server, the squatter having gone: same origin), takes the token and
/// posts a task with it.
const SQUATTER_PAGE: &str = r#"<!doctype html><html><head><title>squatter</title></head><body><script>
setTimeout(async () => {
  let seen = 'nothing';
  try {
    const page = await (await fetch('/', {cache: 'no-store'})).text();
    const m = page.match(/name="agent-runner-token" content="([0-9a-f]+)"/);
    seen = m ? 'token ' + m[1] : 'no token';
    if (m) {
      await fetch('/api/tasks', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Agent-Runner-Token': m[1]}, body: JSON.stringify({prompt: 'planted by a squatter'})});
    }
  } catch (e) { seen = 'error ' + e; }
  document.body.dataset.seen = seen;
}, 300);
</script></body></html>"#;

/// Issue 18, item 2: another local user listening on `[::1]:<port>` while the server
/// held only 127.0.0.1 got the owner's `http://localhost:<port>/`, read the token
/// and posted tasks. Now the port is the server's on both addresses, and a page
/// reached by a name gets no page with the token.
#[test]
#[ignore = "needs chromium"]
fn localhost_leads_to_no_squatter_and_to_no_token() {
    needs!(Chromium);
    let browser = Browser::start();
    let p = Pipeline::new("web-squat", false);
    p.init(BUILDER, &meta_script("@say: nothing"), "");
    let web = Served::start(&p, &[]);
    let port = web.addr.strip_prefix("127.0.0.1:").unwrap().to_string();
    let token = web.token();
    let squatter = std::net::TcpListener::bind(format!("[::1]:{port}"));
    let squatted = squatter.is_ok();
    let served = std::thread::spawn(move || {
        // Serve the page once, then leave, as the attack does.
        let Ok(listener) = squatter else { return };
        if let Ok((mut stream, _)) = listener.accept() {
            let mut head = [0u8; 4096];
            let _ = std::io::Read::read(&mut stream, &mut head);
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{SQUATTER_PAGE}",
                SQUATTER_PAGE.len()
            );
            let _ = std::io::Write::write_all(&mut stream, reply.as_bytes());
        }
    });
    browser.open(&format!("http://localhost:{port}/"));
    // Either page, done: ours (an error page) or the squatter's, once its script ran.
    let shown = browser.wait_for(
        Duration::from_secs(20),
        "return document.title === 'squatter' ? (document.body.dataset.seen || null) : document.body.innerText;",
        json!([]),
    );
    let shown = shown.as_str().unwrap().to_string();
    browser.screenshot("web-localhost-squat");
    let html = browser
        .run("return document.documentElement.outerHTML;", json!([]))
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !shown.contains(&token) && !html.contains(&token),
        "the token leaked: {shown}"
    );
    let tasks = web.get("/api/tasks").json();
    assert_eq!(tasks["tasks"], json!([]), "nothing posted: {tasks}");
    assert!(!squatted, "another program could listen on [::1]:{port}");
    assert!(
        shown.contains(&format!("open http://127.0.0.1:{port}/"))
            || shown.contains(&format!("open http://[::1]:{port}/")),
        "the way to the server's address: {shown}"
    );
    drop(browser);
    drop(web.stop());
    let _ = served.join();
}

/// Meta's understanding in the plan toggle's test.
const UNDERSTANDING: &str = "A TODO app: add, list and complete items.";
/// A planned task's title as an attacker would make it (the LLM's reply is input).
const PLANNED_HOSTILE: &str = "<img src=x onerror=\"window.pwned=2\">";

/// The Task Builder's script for plans: a decompose reply with two tasks (the
/// second hostile, after the first) and a potential conflict.
fn decompose_script() -> String {
    let reply = json!({"type": "decompose", "understanding": UNDERSTANDING,
        "phases": [{"name": "Build", "milestone": "m1", "tasks": [
            {"id": "list", "title": "The TODO list", "description": "Keep the items in todo.txt.",
             "acceptance_criteria": ["todo.txt lists the items"], "wbs_level": 3,
             "estimated_effort": "small"},
            {"id": "evil", "title": PLANNED_HOSTILE, "description": "Test the list.",
             "acceptance_criteria": ["the tests pass"], "dependencies": ["list"],
             "wbs_level": 3, "estimated_effort": "small"},
        ]}],
        "potential_conflicts": [{"file": "src/app.js", "tasks": ["list"],
                                  "warning": "<b>changed by two tasks</b>"}]});
    format!("{BUILDER}- {reply}\n")
}

/// The chat box's plan toggle runs `agent-runner plan` (scripted decompose) and
/// succeeds: the page shows Meta's understanding and conflict, the planned tasks
/// appear in the list, and the plan page shows their tree and the conversation.
/// The LLM's text is shown as text.
#[test]
#[ignore = "needs chromium"]
fn the_plan_toggle_creates_the_planned_tasks_on_the_page() {
    needs!(Chromium);
    let browser = Browser::start();
    let p = Pipeline::new("web-plan", false);
    p.init(&decompose_script(), &meta_script("@say: unused"), "");
    let web = Served::start(&p, &[]);
    browser.open(&web.url("/"));
    browser.click("#plan-toggle");
    assert_eq!(browser.text("#send"), "Plan");
    browser.type_into("#prompt", "TODO アプリを作成して、テスト付きで");
    browser.click("#send");
    let heading = browser.wait_for(
        Duration::from_secs(60),
        "const r = document.getElementById('plan-result'); return r.hidden ? null : r.querySelector('h3').textContent;",
        json!([]),
    );
    assert_eq!(
        heading,
        "Plan succeeded (exit status 0)",
        "{}",
        browser.text("#plan-result")
    );
    assert_eq!(browser.text("#chat-status"), "Plan done.");
    assert_eq!(browser.text("#plan-result p.understanding"), UNDERSTANDING);
    assert_eq!(
        browser.text("#plan-result ul.conflicts"),
        "{\"file\":\"src/app.js\",\"tasks\":[\"list\"],\"warning\":\"<b>changed by two tasks</b>\"}"
    );
    let list = browser.wait_for(Duration::from_secs(10), ROW, json!(["The TODO list"]));
    let evil = browser.wait_for(Duration::from_secs(10), ROW, json!([PLANNED_HOSTILE]));
    assert_eq!((&list[0], &evil[0]), (&json!("PENDING"), &json!("PENDING")));
    let shown = p.show(evil[1].as_str().unwrap());
    assert_eq!(shown["task"]["depends_on"], json!([list[1]]), "{shown}");
    browser.screenshot("web-plan-1-toggle");

    // The plan page: the tree with the tasks' statuses, and the conversation.
    browser.click("nav a[href=\"/plan\"]");
    browser.wait_for(
        Duration::from_secs(10),
        "return document.body.dataset.page === 'plan';",
        json!([]),
    );
    let tree = browser.text("#tree");
    for shown in ["Build", "The TODO list", PLANNED_HOSTILE, "PENDING"] {
        assert!(tree.contains(shown), "{shown:?} in {tree}");
    }
    let page = browser.text("main");
    for shown in [UNDERSTANDING, "<b>changed by two tasks</b>", "テスト付きで"] {
        assert!(page.contains(shown), "{shown:?} in {page}");
    }
    browser.screenshot("web-plan-2-tree");
    assert_eq!(
        browser.run("return window.pwned === undefined;", json!([])),
        true
    );
    drop(browser);
    let (code, stderr) = web.stop();
    assert_eq!(code, Some(130), "{stderr}");
}

/// A worker message an attacker would write: shown as text in the live log.
const WORKER_HOSTILE: &str = "<img src=x onerror=\"window.pwned=3\">";

/// SPEC §19 in the browser: a running attempt's events appear on its page as they
/// happen (without a reload), the Stop button stops it, and the page then shows the
/// attempt stopped, with its Task Note.
#[test]
#[ignore = "needs chromium"]
fn the_task_page_shows_a_running_attempt_live_and_its_stop_button_stops_it() {
    needs!(Chromium);
    let browser = Browser::start();
    let p = Pipeline::new("web-live", false);
    p.init(
        BUILDER,
        &meta_script(&format!(
            "@run: echo one\n@say: {WORKER_HOSTILE}\n@sleep: 10\n@run: echo two\n@sleep: 120"
        )),
        "",
    );
    let id = support::pipeline::task_id("live");
    p.new_task(&id, "Work for a while");
    let web = Served::start(&p, &[]);
    p.run_tasks(&[&id]);
    browser.open(&web.url(&format!("/tasks/{id}")));
    assert_eq!(browser.text("#live-stage"), "queued");
    browser.run("window.marker = 'same page';", json!([]));
    let orchestrator = p.orchestrate_once(&[]).start();
    let live = |text: &str| {
        browser.wait_for(
            Duration::from_secs(120),
            "const t = document.getElementById('events').textContent; return t.includes(arguments[0]) ? t : null;",
            json!([text]),
        )
    };
    // The worker says its message after its first command ended: shown as text.
    let first = live(WORKER_HOSTILE);
    assert!(
        first
            .as_str()
            .unwrap()
            .contains("run 1 $ /bin/sh -lc 'echo one' → exit 0"),
        "{first}"
    );
    assert!(
        !first.as_str().unwrap().contains("echo two"),
        "seen before the worker got there: {first}"
    );
    live("run 1 $ /bin/sh -lc 'echo two' → exit 0");
    assert_eq!(browser.text("#live-stage"), "running");
    assert_eq!(
        browser.run("return window.marker;", json!([])),
        "same page",
        "the events came without a reload"
    );
    browser.screenshot("web-live-1-running");

    browser.click("#stop");
    browser.wait_for(
        Duration::from_secs(20),
        "return document.getElementById('notice').textContent.includes('stopping job') || null;",
        json!([]),
    );
    // The attempt ends: the page shows it, the note, and no live log.
    browser.wait_for(
        Duration::from_secs(120),
        "return window.marker === undefined && document.getElementById('status').textContent === 'FAILED' || null;",
        json!([]),
    );
    assert!(browser.text("#attempts").contains("stopped by the user"));
    assert!(browser.text("article.note").contains("interrupted"));
    assert_eq!(
        browser.run("return document.getElementById('live');", json!([])),
        serde_json::Value::Null
    );
    browser.screenshot("web-live-2-stopped");
    assert_eq!(
        browser.run("return window.pwned === undefined;", json!([])),
        true
    );
    orchestrator.finish().code(1);
    assert_no_container(&id);
    drop(browser);
    drop(web.stop());
}
