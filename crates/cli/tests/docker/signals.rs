//! Signals end to end (SPEC §2, §10): SIGINT, SIGTERM and SIGHUP stop the task in an
//! orderly way (worker stopped inside the container, container removed, note
//! written, exit 130), also while stdin is being read or Meta is being asked; only a
//! second SIGINT skips clean-up; SIGKILL still leaves no container.

use crate::support;

use std::io::Write;
use std::time::{Duration, Instant};

use support::Run;
use support::Scratch;
use support::docker::containers_labelled;
use support::fake_openai::{Answer, FakeOpenAi};
use support::task::*;

#[test]
fn sigint_during_a_worker_run_stops_everything_and_exits_130() {
    let dir = Scratch::new("e2e-sigint");
    let id = task_id("sigint");
    let (_server, child) = busy_worker(&dir, &id, "@sleep: 120", false);
    let signalled = Instant::now();
    send("-INT", &child);
    let out = child.finish();
    let took = signalled.elapsed();
    out.code(130)
        .stdout_has("FAILED: task")
        .stdout_has("interrupted");
    let note = note(&dir.path, &id);
    assert!(
        note.contains("- State: FAILED (interrupted)") && note.contains("#### Run 1 (interrupted"),
        "{note}"
    );
    assert_no_container(&id);
    // Promptly: the worker ends on SIGTERM, well before the 5 s grace after which
    // it would be killed.
    assert!(took < Duration::from_secs(5), "SIGINT to exit: {took:?}");
}

#[test]
fn sigterm_is_handled_like_sigint() {
    let dir = Scratch::new("e2e-sigterm");
    let id = task_id("sigterm");
    let (_server, child) = busy_worker(&dir, &id, "@sleep: 120", true);
    send("-TERM", &child);
    let out = child.finish();
    out.code(130);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        (result["status"].as_str(), result["error"].as_str()),
        (Some("failed"), Some("interrupted"))
    );
    assert_no_container(&id);
}

#[test]
fn a_second_sigint_exits_at_once_and_the_container_still_goes() {
    let dir = Scratch::new("e2e-sigint2");
    let id = task_id("sigint2");
    // The first SIGINT's clean-up waits for this process to stop, which ignores SIGTERM.
    let (_server, child) = busy_worker(&dir, &id, "@run: trap '' TERM; sleep 120", false);
    let sent = Instant::now();
    for _ in 0..2 {
        send("-INT", &child);
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.finish();
    assert!(
        sent.elapsed() < Duration::from_secs(3),
        "the second SIGINT did not end it: {:?}",
        sent.elapsed()
    );
    out.code(130);
    wait_for(Duration::from_secs(2), || {
        containers_labelled("agent-runner.task", &id).is_empty()
    });
}

#[test]
fn sigkill_of_agent_runner_removes_its_container_within_2_s() {
    let dir = Scratch::new("e2e-sigkill");
    let id = task_id("sigkill");
    let (_server, child) = busy_worker(&dir, &id, "@sleep: 120", false);
    assert_eq!(containers_labelled("agent-runner.task", &id).len(), 1);
    child.kill();
    let killed = Instant::now();
    wait_for(Duration::from_secs(10), || {
        containers_labelled("agent-runner.task", &id).is_empty()
    });
    let took = killed.elapsed();
    eprintln!("container gone {took:?} after SIGKILL");
    assert!(
        took <= Duration::from_secs(2),
        "container outlived its owner by {took:?}"
    );
}

#[test]
fn sighup_is_handled_like_sigterm() {
    let dir = Scratch::new("sig-hup");
    let id = task_id("sighup");
    let (_server, child) = busy_worker(&dir, &id, "@sleep: 120", true);
    send("-HUP", &child);
    let out = child.finish();
    out.code(130);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["error"], "interrupted");
    assert!(note(&dir.path, &id).contains("- State: FAILED (interrupted)"));
    assert_no_container(&id);
}

#[test]
fn sigterm_while_stdin_is_read_ends_before_anything_starts() {
    let dir = Scratch::new("sig-stdin");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"])]);
    // stdin stays open: a supervisor that has not finished writing the task.
    let mut child = Run::new(&["run", "--json"])
        .env("OPENAI_API_KEY", KEY)
        .start_with_open_stdin();
    let yaml = v1_task(&task_id("sigstdin"), &dir.path, &server);
    let mut stdin = child.child().stdin.take().unwrap();
    stdin.write_all(yaml.to_string().as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let out = child.finish();
    drop(stdin);
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "{:?}",
        sent.elapsed()
    );
    out.code(130);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "failed");
    assert_eq!(result["error"], "interrupted before the task started");
    assert!(server.received().is_empty(), "the task did not start");
    assert!(!dir.join(".agent-runner").exists(), "nothing was written");
}

#[test]
fn sigterm_then_sigint_or_two_sigterms_still_clean_up() {
    for (name, signals) in [
        ("term-int", ["-TERM", "-INT"]),
        ("term-term", ["-TERM", "-TERM"]),
    ] {
        let dir = Scratch::new(&format!("sig-{name}"));
        let id = task_id(name);
        // The clean-up takes a while (a process ignoring SIGTERM), so the second
        // signal arrives during it.
        let (_server, child) = busy_worker(&dir, &id, "@run: trap '' TERM; sleep 120", false);
        for signal in signals {
            send(signal, &child);
            std::thread::sleep(Duration::from_millis(200));
        }
        let out = child.finish();
        out.code(130).stdout_has("interrupted");
        let note = note(&dir.path, &id);
        assert!(
            note.contains("- State: FAILED (interrupted)") && note.contains("was removed in"),
            "{name}: the note was written after clean-up:\n{note}"
        );
        assert_no_container(&id);
    }
}

#[test]
fn sigint_during_a_meta_call_exits_promptly() {
    let dir = Scratch::new("sig-meta");
    let id = task_id("sigmeta");
    let server = FakeOpenAi::start(vec![
        Answer::chat("type: plan_task\n").delayed(Duration::from_secs(60)),
    ]);
    let child = runner(v1_task(&id, &dir.path, &server)).start();
    wait_for(Duration::from_secs(10), || !server.received().is_empty());
    let sent = Instant::now();
    send("-INT", &child);
    let out = child.finish();
    let took = sent.elapsed();
    out.code(130).stdout_has("interrupted");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(note(&dir.path, &id).contains("- State: FAILED (interrupted)"));
}

#[test]
fn sigterm_while_a_large_reply_is_parsed_exits_promptly() {
    let dir = Scratch::new("sig-parse");
    let id = task_id("sigparse");
    // Nested as deep as is accepted, 8 MB: seconds of parsing even in a release build.
    let item = format!("{}x{}, ", "{a: ".repeat(30), "}".repeat(30));
    let reply = format!(
        "type: plan_task\nacceptance_criteria: [{}]\n",
        item.repeat((8 << 20) / item.len() - 1)
    );
    let server = FakeOpenAi::start(vec![Answer::chat(&reply)]);
    let child = runner(v1_task(&id, &dir.path, &server)).start();
    wait_for(Duration::from_secs(10), || server.left() == 0);
    std::thread::sleep(Duration::from_millis(500));
    let sent = Instant::now();
    send("-TERM", &child);
    let out = child.finish();
    let took = sent.elapsed();
    out.code(130).stdout_has("interrupted");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(note(&dir.path, &id).contains("- State: FAILED (interrupted)"));
}
