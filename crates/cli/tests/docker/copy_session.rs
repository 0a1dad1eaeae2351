//! The worker's session under the copy transport (SPEC §22): a volume of the task on
//! the sandbox's host (an emulated one, `support::remote_hosts`), kept across `run
//! --resume` there, holding the session and never the login file, removed once the
//! task is COMPLETE; a resume goes to that host, refused when told another; a volume
//! of the name that is not the task's is never mounted.

use crate::support;

use std::path::Path;

use serde_json::Value;
use support::Scratch;
use support::docker::{TEST_IMAGE, image_with_this_fake};
use support::fake_openai::FakeOpenAi;
use support::remote_hosts::{RemoteHost, hosts};
use support::task::*;
use support::task_yaml::TaskYaml;

/// The login file the worker gets (through the lifeline, into the tmpfs).
const LOGIN: &str = r#"{"OPENAI_API_KEY": "sk-login-file-session-0123456789"}"#;

/// `image` on `host`, loaded from this machine when it is not there yet.
fn on_host(host: &RemoteHost, image: &str) {
    if host.docker(&["image", "inspect", image]).0 {
        return;
    }
    let load = format!("docker save {image} | docker -H {} load -q", host.url);
    let out = support::Run::program("sh", &["-c", &load]).output();
    assert_eq!(out.code, Some(0), "{load}: {}", out.stderr);
}

/// A repository beside a HOME with the worker's login file: (the scratch, the
/// repository, HOME).
fn setup(name: &str) -> (Scratch, std::path::PathBuf, std::path::PathBuf) {
    let dir = Scratch::new(name);
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    support::git_repo(&repo, "out.txt", "wrong\n");
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    std::fs::write(home.join(".codex/auth.json"), LOGIN).unwrap();
    (dir, repo, home)
}

/// Meta: a plan, one loop that does not finish it; after a resume, a loop that
/// recalls the session and finishes.
fn two_runs() -> FakeOpenAi {
    FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo one > one.txt\n@say: wrote one"),
        assess(&[], "not yet"),
        run_worker("@recall\n@say: went on"),
        assess(&["AC-1"], "done"),
    ])
}

fn yaml(id: &str, repo: &Path, server: &FakeOpenAi, image: &str, loops: u32) -> TaskYaml {
    v1_task(id, repo, server)
        .image(image)
        .set("runner.meta.max_loops", loops)
}

/// `run` of `yaml` with `home`, on `host` when given (else DOCKER_HOST unset).
fn run(yaml: TaskYaml, home: &Path, host: Option<&RemoteHost>, args: &[&str]) -> support::Outcome {
    let mut run = runner(yaml)
        .args(args)
        .env("HOME", home)
        .env("RUST_LOG", "info");
    if let Some(host) = host {
        run = run.env("DOCKER_HOST", &host.url);
    }
    run.output()
}

/// Task `id`'s volumes on `host`.
fn volumes(host: &RemoteHost, id: &str) -> Vec<String> {
    let filter = format!("label=agent-runner.task={id}");
    host.docker_ok(&["volume", "ls", "-q", "--filter", &filter])
        .lines()
        .map(str::to_string)
        .collect()
}

/// The thread ids a run log's `thread.started` events name.
fn threads(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "thread.started")
        .map(|e| e["thread_id"].as_str().unwrap().to_string())
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_resumed_task_goes_on_with_its_session_on_the_same_remote_host_and_leaves_nothing() {
    let (host, other) = (&hosts()[0], &hosts()[1]);
    let image = image_with_this_fake();
    on_host(host, &image);
    let (_dir, repo, home) = setup("copy-session");
    let id = task_id("session");
    let server = two_runs();
    let first = run(
        yaml(&id, &repo, &server, &image, 1),
        &home,
        Some(host),
        &["--json"],
    );
    first.code(1).stdout_has("max_loops");
    // The session is in a volume of the task on that host: the agent's rollout,
    // never the login file (that went into the sandbox's tmpfs).
    let kept = volumes(host, &id);
    assert_eq!(kept.len(), 1, "{kept:?}: {}", first.stderr);
    assert!(kept[0].starts_with("agent-runner-session-"), "{kept:?}");
    let mount = format!("{}:/s", kept[0]);
    let files = host.docker_ok(&[
        "run",
        "--rm",
        "--network",
        "none",
        "-v",
        &mount,
        TEST_IMAGE,
        "sh",
        "-c",
        "find /s; cat $(find /s -type f)",
    ]);
    assert!(files.contains("rollout-"), "{files}");
    assert!(
        !files.contains("auth") && !files.contains("sk-login-file"),
        "the login file is in the session volume: {files}"
    );
    let state: Value =
        serde_json::from_str(&read(&repo.join(format!(".agent-runner/state/{id}.json")))).unwrap();
    assert_eq!(state["session_host"]["url"], host.url.as_str(), "{state}");
    let asked = server.received().len();

    // Told another host: refused, naming both, and nothing started there.
    let elsewhere = run(
        yaml(&id, &repo, &server, &image, 2),
        &home,
        Some(other),
        &["--resume"],
    );
    assert_ne!(elsewhere.code, Some(0), "{}", elsewhere.stderr);
    elsewhere
        .stderr_has(&format!(
            "its worker's session is on the docker host {}",
            host.url
        ))
        .stderr_has(&other.url);
    assert_eq!(volumes(other, &id), Vec::<String>::new());
    assert_eq!(
        server.received().len(),
        asked,
        "no Meta call for the refused resume"
    );

    // Told nothing: it goes to that host and the worker goes on with its thread.
    let out = run(
        yaml(&id, &repo, &server, &image, 2),
        &home,
        None,
        &["--json", "--resume"],
    );
    out.code(0)
        .stderr_has(&format!("resuming on the docker host {}", host.url))
        .stdout_has("COMPLETE");
    let logs = repo.join(format!(".agent-runner/logs/{id}"));
    let run1 = threads(&read(&logs.join("run-1.log")));
    let run2 = read(&logs.join("run-2.log"));
    assert_eq!(threads(&run2), run1, "{run2}");
    assert!(run2.contains("recalled 1 earlier turn(s)"), "{run2}");
    // COMPLETE: nothing of the task is left on the host, the session volume neither.
    assert_eq!(volumes(host, &id), Vec::<String>::new());
    let filter = format!("label=agent-runner.task={id}");
    assert_eq!(host.docker_ok(&["ps", "-aq", "--filter", &filter]), "");
    assert_no_container(&id);
}

#[test]
fn a_volume_of_the_session_name_that_is_not_the_tasks_is_never_mounted() {
    let host = &hosts()[1];
    let image = image_with_this_fake();
    on_host(host, &image);
    let (_dir, repo, home) = setup("copy-session-forged");
    let id = task_id("forged");
    let server = two_runs();
    let first = run(yaml(&id, &repo, &server, &image, 1), &home, Some(host), &[]);
    first.code(1);
    let kept = volumes(host, &id);
    assert_eq!(kept.len(), 1, "{kept:?}: {}", first.stderr);
    let name = &kept[0];
    // Another's volume of the same name: its labels name the task, not the session.
    host.docker_ok(&["volume", "rm", name]);
    let label = format!("agent-runner.task={id}");
    host.docker_ok(&["volume", "create", "--label", &label, name]);
    let mount = format!("{name}:/s");
    host.docker_ok(&[
        "run",
        "--rm",
        "-v",
        &mount,
        TEST_IMAGE,
        "sh",
        "-c",
        "echo theirs > /s/mark",
    ]);
    let out = run(
        yaml(&id, &repo, &server, &image, 2),
        &home,
        Some(host),
        &["--resume"],
    );
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    out.stderr_has(&format!(
        "the volume {name} on the sandbox's host is not the worker session of task {id}"
    ));
    let mark = host.docker_ok(&["run", "--rm", "-v", &mount, TEST_IMAGE, "cat", "/s/mark"]);
    assert_eq!(mark, "theirs\n", "the other volume is left as it was");
    let filter = format!("label=agent-runner.task={id}");
    assert_eq!(host.docker_ok(&["ps", "-aq", "--filter", &filter]), "");
    assert_eq!(
        volumes(host, &id),
        vec![name.clone()],
        "only theirs is left"
    );
    host.docker_ok(&["volume", "rm", name]);
}

/// The pipeline (SPEC §22): `task run --resume` of an attempt placed on host a goes
/// to a, though b has more free slots, and goes on with the worker's session there.
#[test]
fn a_resumed_attempt_goes_to_the_host_it_ran_on() {
    use support::pipeline::{BUILDER_REPLY, Pipeline, read};
    let (x, y) = (&hosts()[0], &hosts()[1]);
    let image = image_with_this_fake();
    on_host(x, &image);
    on_host(y, &image);
    let p = Pipeline::new("copy-session-pipeline", true);
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo one > one.txt\n@say: working on it\n@sleep: 120"),
        // After the resume.
        run_worker("@recall\n@say: went on"),
        assess(&["AC-1"], "done"),
    ]);
    p.scratch.file("builder.yaml", BUILDER_REPLY);
    p.init_with(
        "defaults.yaml",
        &format!(
            "builder: {{kind: scripted, script: builder.yaml}}\nrequire_test: false\nrunner:\n  meta: {{base_url: \"{}\", model: test-model}}\n  worker: {{docker_image: \"{image}\", network: none}}\n",
            server.url
        ),
    );
    let (a, b) = (format!("a={}:1", x.url), format!("b={}:2", y.url));
    let orchestrate = |hosts: &[&String]| {
        let mut args = Vec::new();
        for host in hosts {
            args.extend(["--host", host.as_str()]);
        }
        p.orchestrate_once(&args)
            .env("OPENAI_API_KEY", KEY)
            .env("AGENT_RUNNER_META_BACKOFF_MS", "10")
    };
    let id = support::pipeline::task_id("placed");
    p.new_task(&id, "Write one.txt");
    let first_job = p.run_tasks(&[&id]).remove(0);
    let first = orchestrate(&[&a]).start();
    let clone = p.ws().join("clones").join(&first_job);
    wait_for(std::time::Duration::from_secs(120), || {
        read(&clone.join(format!(".agent-runner/logs/{id}/events.jsonl"))).contains("working on it")
    });
    p.in_ws(&["task", "stop"], &[&id]).output().code(0);
    first.finish().code(1);
    assert_eq!(p.attempts(&id)[0]["host"], "a");
    assert_eq!(volumes(x, &id).len(), 1, "the session is on a's daemon");

    let job = p.in_ws(&["task", "run"], &["--resume", &id]).output();
    job.code(0);
    let job = job.stdout.trim().to_string();
    let out = orchestrate(&[&a, &b]).output();
    out.code(0);
    let attempts = p.attempts(&id);
    assert_eq!(
        (&attempts[1]["status"], &attempts[1]["host"]),
        (&Value::from("succeeded"), &Value::from("a")),
        "{}",
        out.stderr
    );
    let log = read(
        &p.ws()
            .join(format!("logs/{job}/agent-runner/logs/{id}/run-1.log")),
    );
    assert!(log.contains("recalled 1 earlier turn(s)"), "{log}");
    assert_eq!(volumes(x, &id), Vec::<String>::new());
    assert_eq!(volumes(y, &id), Vec::<String>::new());
    assert_no_container(&id);
}
