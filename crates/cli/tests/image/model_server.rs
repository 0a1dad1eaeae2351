//! The real Codex CLI and a model server of the user's (SPEC §24): a base URL on the
//! host's loopback under `network: allowlist` is refused before anything starts; a
//! codex retrying a model that is not there ("Reconnecting…" for ever) is stalled
//! after `idle_timeout_sec`; and codex's own provider pointed at a base URL makes
//! no WebSocket attempt first. A fake Responses server on 127.0.0.1.

use crate::support;

use std::time::{Duration, Instant};

use support::fake_responses::{FakeResponses, Reply};
use support::prerequisite::{SANDBOX_IMAGE, needs};
use support::task::assert_no_container;
use support::task_yaml::{TaskYaml, one_run};
use support::{Run, Scratch};

const KEY: &str = "ck-model-server-0123456789";

fn task_id(name: &str) -> String {
    format!("model-server-{name}-{}", support::short_id())
}

/// The hello task for the real codex with `runner.worker.base_url` at `url`.
fn task(dir: &Scratch, id: &str, url: &str, passed: &[&str]) -> TaskYaml {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let script = one_run(dir, "codex-cli", "Create hello.txt saying hello.", passed);
    TaskYaml::hello(id, &repo)
        .scripted(script, 1)
        .image(SANDBOX_IMAGE)
        .set("runner.worker.model", "some-model")
        .set("runner.worker.base_url", url)
        .set("runner.worker.max_run_time_sec", 300)
}

fn run(dir: &Scratch, yaml: &TaskYaml) -> support::Outcome {
    Run::new(&["run"])
        .env("HOME", &dir.path)
        .env("CODEX_API_KEY", KEY)
        .stdin(yaml.to_string())
        .output()
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_loopback_base_url_under_allowlist_is_refused_before_anything_starts() {
    needs!(SandboxImage);
    let model = FakeResponses::start(vec![Reply::Message("hi".into())]);
    for url in [
        model.url.clone(),
        model.url.replace("127.0.0.1", "localhost"),
    ] {
        let dir = Scratch::new("model-loopback");
        let id = task_id("loopback");
        let yaml = task(&dir, &id, &url, &["AC-1"]);
        let started = Instant::now();
        for command in ["validate", "run"] {
            let out = Run::new(&[command])
                .env("HOME", &dir.path)
                .env("CODEX_API_KEY", KEY)
                .stdin(yaml.to_string())
                .output();
            out.code(1)
                .stderr_has("runner.worker.base_url")
                .stderr_has("is on this host's loopback")
                .stderr_has("runner.worker.network: host");
        }
        assert!(started.elapsed() < Duration::from_secs(20), "never a hang");
        assert_eq!(model.received().len(), 0);
        assert_no_container(&id);
    }
    // The fix the message names works: `network: host` reaches the same server.
    let model = FakeResponses::start(vec![
        Reply::Command("echo hello > hello.txt".into()),
        Reply::Message("Created hello.txt.".into()),
    ]);
    let dir = Scratch::new("model-loopback-host");
    let id = task_id("host");
    let yaml = task(&dir, &id, &model.url, &["AC-1"]).set("runner.worker.network", "host");
    run(&dir, &yaml).code(0).stdout_has("COMPLETE");
    assert_eq!(model.received().len(), 2);
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_codex_reconnecting_for_ever_is_stalled_after_idle_timeout() {
    needs!(SandboxImage);
    // Nothing listens there: codex 0.169.0 prints "Reconnecting... waiting for
    // network" 3, 8, 13, 23, 43 s apart, then every 63 s, for ever.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let dir = Scratch::new("model-reconnecting");
    let id = task_id("reconnecting");
    let yaml = task(&dir, &id, &url, &[])
        .set("runner.worker.network", "host")
        .set("runner.worker.idle_timeout_sec", 30);
    let started = Instant::now();
    let out = run(&dir, &yaml);
    let took = started.elapsed();
    out.code(1).stderr_has("worker run 1/1: stalled");
    let log = std::fs::read_to_string(dir.join(&format!("repo/.agent-runner/logs/{id}/run-1.log")))
        .unwrap();
    assert!(log.contains("Reconnecting..."), "{log}");
    // Stalled 30 s after codex's last sign of progress; counting the notices as
    // output it would stall only after their 43 s gap, ~77 s in.
    assert!(took < Duration::from_secs(65), "took {took:?}");
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn codex_at_a_base_url_asks_for_no_websocket() {
    needs!(SandboxImage);
    let model = FakeResponses::start(vec![
        Reply::Command("echo hello > hello.txt".into()),
        Reply::Message("Created hello.txt.".into()),
    ]);
    let dir = Scratch::new("model-websocket");
    let id = task_id("websocket");
    let yaml = task(&dir, &id, &model.url, &["AC-1"]).set("runner.worker.network", "host");
    run(&dir, &yaml).code(0).stdout_has("COMPLETE");
    assert_eq!(model.received().len(), 2);
    assert_eq!(
        model.websocket_attempts(),
        0,
        "codex tried a WebSocket first"
    );
    assert_no_container(&id);
}
