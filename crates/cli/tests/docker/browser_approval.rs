//! The approval gate and follow-ups in the web view, in a real headless Chromium
//! (SPEC §23): a task whose plan awaits approval shows it; Reject with a message
//! plans again, Approve goes on, and the message box beside Continue sends a
//! follow-up after the success, shown back as text. Every new POST is refused
//! without our token or from another origin, and changes nothing. Meta is the fake
//! OpenAI server (its request log shows what reached it); attempts run through
//! `orchestrate --once` with the test worker image.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};

use support::fake_openai::FakeOpenAi;
use support::pipeline::{BUILDER_REPLY, Pipeline, wait_for};
use support::prerequisite::needs;
use support::task::{KEY, assert_no_container, assess, plan, run_worker};
use support::web::Served;
use support::webdriver::Browser;

fn orchestrate(p: &Pipeline) {
    p.orchestrate_once(&[])
        .env("OPENAI_API_KEY", KEY)
        .env("AGENT_RUNNER_META_BACKOFF_MS", "10")
        .output()
        .code(0);
}

/// Opens the task page and waits for its script to have run.
fn open_task(browser: &Browser, web: &Served, id: &str) {
    browser.open(&web.url(&format!("/tasks/{id}")));
    browser.wait_for(
        Duration::from_secs(10),
        "return document.body.dataset.page === 'task' && document.readyState === 'complete';",
        json!([]),
    );
}

/// Clicks `css` and waits until a job is queued.
fn click_and_wait_for_a_job(browser: &Browser, p: &Pipeline, css: &str) {
    browser.click(css);
    wait_for(Duration::from_secs(10), || p.ipc("queue").len() == 1);
}

#[test]
#[ignore = "needs chromium"]
fn approve_reject_and_a_follow_up_from_the_browser_each_guarded_by_the_token() {
    needs!(Chromium);
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        // Rejected: a new plan.
        plan(&["AC-2"]),
        // Approved.
        run_worker("@run: echo hi > out.txt\n@say: wrote out.txt"),
        assess(&["AC-2"], "done"),
        // The follow-up.
        run_worker("@run: echo more > more.txt\n@say: wrote more.txt"),
        assess(&["AC-2"], "done again"),
    ]);
    let p = Pipeline::new("web-approval", false);
    p.scratch.file("builder.yaml", BUILDER_REPLY);
    p.init_with(
        "defaults.yaml",
        &format!(
            "builder: {{kind: scripted, script: builder.yaml}}\nrequire_test: false\nrunner:\n  meta: {{base_url: \"{}\", model: test-model, approve_plan: true}}\n  worker: {{docker_image: \"{}\", network: none}}\n",
            server.url,
            support::docker::TEST_IMAGE
        ),
    );
    let id = support::pipeline::task_id("web-approval");
    p.new_task(&id, "Write out.txt");
    p.run_tasks(&[&id]);
    orchestrate(&p);
    assert_eq!(p.show(&id)["status"], "AWAITING_APPROVAL");

    let browser = Browser::start();
    let web = Served::start(&p, &[]);
    let token = web.token();
    open_task(&browser, &web, &id);
    assert_eq!(browser.text("#status"), "AWAITING_APPROVAL");
    assert_eq!(browser.text("#approval ol li"), "AC-1 criterion AC-1");
    browser.screenshot("web-approval-1-awaiting");

    // Every new POST needs our token, our origin and JSON; refused ones change nothing.
    let approve = format!("/api/tasks/{id}/approve");
    let reject = format!("/api/tasks/{id}/reject");
    let follow = format!("/api/tasks/{id}/continue");
    for path in [&approve, &reject, &follow] {
        let body = r#"{"message":"sneaky"}"#;
        web.post_with(path, &[], body).status(403);
        web.post(path, &"0".repeat(64), body).status(403);
        web.raw(
            format!(
                "POST {path} HTTP/1.1\r\nHost: {0}\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\nX-Agent-Runner-Token: {token}\r\nContent-Length: {1}\r\n\r\n{body}",
                web.addr,
                body.len()
            )
            .as_bytes(),
        )
        .status(403);
    }
    let long = json!({ "message": "x".repeat(8193) }).to_string();
    web.post(&reject, &token, &long).status(413);
    web.post(&follow, &token, &long).status(413);
    web.post(&reject, &token, r#"{"message":"  "}"#).status(400);
    web.post(&reject, &token, "{}").status(400);
    assert_eq!(p.ipc("queue"), Vec::<String>::new(), "nothing enqueued");
    assert_eq!(p.attempts(&id).len(), 1);

    // Reject with a message: Meta plans again with it.
    let why = "Plan for a README line too";
    browser.type_into("#reject-message", why);
    click_and_wait_for_a_job(&browser, &p, "#reject");
    orchestrate(&p);
    let replan = server.received()[1].message(1);
    assert!(replan.contains(why), "{replan}");
    open_task(&browser, &web, &id);
    assert_eq!(browser.text("#approval ol li"), "AC-2 criterion AC-2");
    assert!(
        browser
            .text("#attempts")
            .contains(&format!("Message: {why}")),
        "the rejection is on its attempt"
    );

    // Approve: the task goes on and succeeds.
    click_and_wait_for_a_job(&browser, &p, "#approve");
    orchestrate(&p);
    assert_eq!(p.attempts(&id)[2]["status"], "succeeded");
    assert!(p.root.join("out.txt").exists());

    // A follow-up from the message box after the success; shown back as text.
    open_task(&browser, &web, &id);
    assert_eq!(
        browser.run(
            "return document.getElementById('approval') === null && !document.getElementById('follow-up').hidden;",
            json!([])
        ),
        Value::Bool(true)
    );
    let message = "<img src=x onerror=\"window.pwned=1\"> also write more.txt";
    browser.type_into("#follow-up-message", message);
    click_and_wait_for_a_job(&browser, &p, "#send-follow-up");
    orchestrate(&p);
    let asked = server.received()[4].message(1);
    assert!(asked.contains("also write more.txt"), "{asked}");
    assert!(p.root.join("more.txt").exists());
    open_task(&browser, &web, &id);
    assert_eq!(
        browser.text("#attempts tbody tr:first-child td .message"),
        format!("Message: {message}")
    );
    assert_eq!(
        browser.run(
            "return [window.pwned === undefined, document.querySelectorAll('#attempts img').length];",
            json!([])
        ),
        json!([true, 0]),
        "the message is text, never HTML"
    );
    browser.screenshot("web-approval-2-followed-up");
    assert_no_container(&id);
    web.stop();
}
