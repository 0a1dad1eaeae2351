//! Hosts, placement and faults (SPEC §22) on emulated remote Docker hosts
//! (`support::remote_hosts`): attempts spread by free slots, a host lost mid-attempt
//! and its job finished elsewhere, `hosts check` and `hosts prepare`, the sweep of a
//! host's leftovers at start, `--host` parsing. Attempts use the bind transport, so
//! the hosts are this machine's daemon and hosts that see the workspace's directory.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::docker::{TEST_IMAGE, docker, docker_ok};
use support::pipeline::{BUILDER_REPLY, Pipeline, git, meta_script, task_id};
use support::prerequisite::needs;
use support::remote_hosts::{Has, OwnHost, RemoteHost, sharing, sharing_host};

/// This machine's daemon, as a host.
const LOCAL: &str = "unix:///var/run/docker.sock";

/// The start events of `host`'s containers labelled `agent-runner.task`, watched
/// from now on (`starts_on` counts them). Streamed, not asked for afterwards with
/// `--since`: the daemon keeps only its last 256 events, fewer than a few attempts
/// of the copy transport make (volumes, `docker cp`, the bundler).
fn watch_starts(host: &RemoteHost) -> support::Running {
    let watch = support::Run::program(
        "docker",
        &[
            "-H",
            &host.url,
            "events",
            "--filter",
            "type=container",
            "--filter",
            "event=start",
            "--filter",
            "label=agent-runner.task",
            "--format",
            "{{index .Actor.Attributes \"agent-runner.task\"}} {{index .Actor.Attributes \"agent-runner.role\"}}",
        ],
    )
    .start();
    // Connected before anything starts there.
    std::thread::sleep(Duration::from_millis(500));
    watch
}

/// How many sandboxes of `ids` `watch` saw start.
fn starts_on(mut watch: support::Running, ids: &[String]) -> usize {
    use std::io::Read;
    let mut stdout = watch.child().stdout.take().unwrap();
    watch.kill();
    let mut out = String::new();
    stdout.read_to_string(&mut out).unwrap();
    // Sandboxes only: the copy transport's bundler (role bundler) is not one.
    out.lines()
        .filter_map(|l| l.strip_suffix(' '))
        .filter(|l| ids.iter().any(|id| id == l))
        .count()
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The `host` of each attempt of `p`'s tasks `ids`.
fn hosts_of(p: &Pipeline, ids: &[String]) -> Vec<String> {
    ids.iter()
        .flat_map(|id| p.attempts(id))
        .map(|a| a["host"].as_str().unwrap_or("(none)").to_string())
        .collect()
}

#[test]
fn four_tasks_spread_over_two_hosts_by_free_slots() {
    let _one = sharing();
    let far = sharing_host();
    let p = Pipeline::new_in(far.shared.as_ref().unwrap(), "hosts-spread", true);
    p.init(BUILDER_REPLY, &meta_script("@say: working\n@sleep: 3"), "");
    let ids: Vec<String> = (0..4).map(|n| task_id(&format!("spread{n}"))).collect();
    for id in &ids {
        p.new_task(id, "Keep busy a moment");
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    p.run_tasks(&refs);
    let starts = watch_starts(far);
    let began = Instant::now();
    let out = p
        .orchestrate_once(&[
            "--host",
            &format!("here={LOCAL}:2"),
            "--host",
            &format!("far={}:2", far.url),
        ])
        .output();
    let took = began.elapsed();
    out.code(0);
    let mut placed = hosts_of(&p, &ids);
    placed.sort();
    assert_eq!(placed, ["far", "far", "here", "here"], "{}", out.stderr);
    for id in &ids {
        let attempt = &p.attempts(id)[0];
        assert_eq!(attempt["status"], "succeeded", "{attempt}");
        assert_eq!(
            attempt["branch"],
            Value::String(format!("agent-runner/{id}"))
        );
    }
    // The far host's daemon started two of the sandboxes, this machine's two.
    assert_eq!(starts_on(starts, &ids), 2, "{}", out.stderr);
    out.stderr_has("placed on host far");
    // The host on the attempt lines and in the list.
    let list = p.in_ws(&["task", "list"], &[]).output();
    list.code(0).stdout_has("HOST");
    assert_eq!(list.stdout.matches(" far").count(), 2, "{}", list.stdout);
    let show = p.in_ws(&["task", "show"], &[&ids[0]]).output();
    show.code(0).stdout_has(", host ");
    eprintln!(
        "four 3 s tasks on 2 hosts x 2 slots: {:.1} s",
        took.as_secs_f64()
    );
    assert!(
        far.containers()
            .iter()
            .all(|c| !ids.iter().any(|id| c.contains(id)))
    );
}

#[test]
fn a_host_lost_mid_attempt_fails_it_and_the_job_finishes_once_on_the_other() {
    let lost = OwnHost::start(Has::Prepared);
    let host = &lost.0;
    let p = Pipeline::new_in(host.shared.as_ref().unwrap(), "hosts-lost", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: echo from-an-attempt > work.txt\n@say: working\n@sleep: 8"),
        "",
    );
    let id = task_id("lost");
    p.new_task(&id, "Work while a host goes");
    p.run_tasks(&[&id]);
    // `gone` is named first: on a tie it gets the attempt.
    let orchestrator = p
        .orchestrate_once(&[
            "--host",
            &format!("gone={}:1", host.url),
            "--host",
            &format!("here={LOCAL}:1"),
        ])
        .start();
    let began = Instant::now();
    let deadline = began + Duration::from_secs(120);
    while support::docker::containers_labelled_on(&["-H", &host.url], "agent-runner.task", &id)
        .is_empty()
    {
        if Instant::now() > deadline {
            let out = orchestrator.finish();
            panic!("no sandbox on the host within 120 s:\n{}", out.stderr);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    // The host goes: its container (daemon and relay) removed.
    docker_ok(&["rm", "-f", &host.container]);
    let removed = began.elapsed();
    let out = orchestrator.finish();
    eprintln!(
        "lost host: sandbox seen and host removed after {:.1} s, all done after {:.1} s\n{}",
        removed.as_secs_f64(),
        began.elapsed().as_secs_f64(),
        out.stderr
    );
    let attempts = p.attempts(&id);
    assert_eq!(attempts.len(), 2, "{attempts:?}\n{}", out.stderr);
    let (first, second) = (&attempts[0], &attempts[1]);
    assert_eq!(first["status"], "failed", "{first}");
    assert_eq!(first["host"], "gone");
    let error = first["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("host lost: gone: "), "{error}");
    // Nothing of the lost attempt landed: no branch on its line, nothing in the
    // working tree.
    assert!(first.get("branch").is_none(), "{first}");
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    assert!(!p.root.join("work.txt").exists());
    // Re-queued once, to the other host, where it finished.
    assert_eq!(second["host"], "here", "{second}");
    assert_eq!(second["status"], "succeeded", "{second}\n{}", out.stderr);
    assert_eq!(
        second["branch"],
        Value::String(format!("agent-runner/{id}"))
    );
    out.stderr_has("re-queued as job");
    assert!(p.ipc("queue").is_empty(), "{:?}", p.ipc("queue"));
    let show = p.show(&id);
    assert_eq!(show["attempts"][0]["host"], "gone");
    drop(lost);
}

#[test]
fn hosts_check_tells_a_healthy_host_from_a_dead_one() {
    let _one = sharing();
    let far = sharing_host();
    let healthy = support::Run::new(&[
        "hosts",
        "check",
        "--image",
        TEST_IMAGE,
        "--host",
        &format!("far={}", far.url),
        "--host",
        &format!("here={LOCAL}"),
    ])
    .output();
    healthy.code(0).stdout_has("HOST").stdout_has("far ");
    let far_row = healthy
        .stdout
        .lines()
        .find(|l| l.starts_with("far "))
        .unwrap_or_default()
        .to_string();
    assert!(far_row.contains(" ok "), "{}", healthy.stdout);
    // Nothing listens at 127.0.0.1:9 (discard): the host is down, the check fails,
    // the healthy host is still reported.
    let dead = support::Run::new(&[
        "hosts",
        "check",
        "--image",
        TEST_IMAGE,
        "--host",
        &format!("far={}", far.url),
        "--host",
        "dead=tcp://127.0.0.1:9",
    ])
    .output();
    dead.code(1);
    let dead_row = dead
        .stdout
        .lines()
        .find(|l| l.starts_with("dead "))
        .unwrap_or_default()
        .to_string();
    assert!(dead_row.contains("DOWN"), "{}", dead.stdout);
    dead.stdout_has("host dead: tcp://127.0.0.1:9");
    assert!(
        dead.stdout
            .lines()
            .any(|l| l.starts_with("far ") && l.contains(" ok ")),
        "{}",
        dead.stdout
    );
}

#[test]
fn hosts_check_in_a_workspace_tells_bind_from_copy_needed() {
    let _one = sharing();
    let far = sharing_host();
    let elsewhere = &support::remote_hosts::hosts()[0];
    let p = Pipeline::new_in(far.shared.as_ref().unwrap(), "hosts-locality", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@say: hi"),
        &format!(
            "hosts:\n  - {{name: far, docker: \"{}\", slots: 2}}\n  - {{name: elsewhere, docker: \"{}\"}}\n",
            far.url, elsewhere.url
        ),
    );
    let out = p.in_ws(&["hosts", "check"], &[]).output();
    let row = |name: &str| {
        out.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(row("far").ends_with("bind"), "{}", out.stdout);
    assert!(row("elsewhere").ends_with("copy needed"), "{}", out.stdout);
}

#[test]
fn hosts_check_says_whether_the_daemon_knows_the_runtime() {
    let check = |runtime: &str| {
        support::Run::new(&[
            "hosts",
            "check",
            "--image",
            TEST_IMAGE,
            "--host",
            &format!("here={LOCAL}"),
            "--runtime",
            runtime,
        ])
        .output()
    };
    let known = check("runc");
    known.code(0).stdout_has("RUNTIMES");
    assert!(
        known
            .stdout
            .lines()
            .any(|l| l.starts_with("here ") && l.contains(" ok ") && l.contains("runc")),
        "{}",
        known.stdout
    );
    check("no-such-runtime").code(1).stdout_has(
        "host here: runner.sandbox.runtime: the Docker daemon does not know the runtime `no-such-runtime`",
    );
}

#[test]
fn hosts_prepare_loads_the_image_and_the_tools_volume_on_a_bare_host() {
    needs!(ToolsVolume);
    let bare = OwnHost::start(Has::Nothing);
    let host = &bare.0;
    let (present, _, _) = host.docker(&["image", "inspect", TEST_IMAGE]);
    assert!(!present, "a bare host has no image");
    let flag = format!("bare={}", host.url);
    let before =
        support::Run::new(&["hosts", "check", "--image", TEST_IMAGE, "--host", &flag]).output();
    before
        .code(1)
        .stdout_has("MISSING")
        .stdout_has("hosts prepare");
    let began = Instant::now();
    let prepared =
        support::Run::new(&["hosts", "prepare", "--image", TEST_IMAGE, "--host", &flag]).output();
    eprintln!(
        "hosts prepare on a bare host: {:.1} s",
        began.elapsed().as_secs_f64()
    );
    prepared.code(0).stdout_has(&format!(
        "host bare: {TEST_IMAGE} loaded, tools volume copied from this machine"
    ));
    host.docker_ok(&["image", "inspect", TEST_IMAGE]);
    let volume = agent_runner_sandbox::backend::tools::volume_name();
    let label = host.docker_ok(&[
        "volume",
        "inspect",
        "--format",
        "{{index .Labels \"agent-runner.tools\"}}",
        &volume,
    ]);
    assert_eq!(label.trim(), agent_runner_sandbox::backend::tools::digest());
    // Its files as this machine's volume has them: the ready file written last.
    let name = format!("agent-runner-tools-read-{}", support::short_id());
    let mount = format!("type=volume,source={volume},target=/agent-runner-tools");
    host.docker_ok(&[
        "create", "--name", &name, "--mount", &mount, TEST_IMAGE, "true",
    ]);
    let ready = host.docker(&["cp", &format!("{name}:/agent-runner-tools/ready"), "-"]);
    host.docker_ok(&["rm", &name]);
    assert!(
        ready
            .1
            .contains(&agent_runner_sandbox::backend::tools::digest()),
        "{ready:?}"
    );
    let after =
        support::Run::new(&["hosts", "check", "--image", TEST_IMAGE, "--host", &flag]).output();
    after.code(0);
    assert!(!after.stdout.contains("MISSING"), "{}", after.stdout);
    let again =
        support::Run::new(&["hosts", "prepare", "--image", TEST_IMAGE, "--host", &flag]).output();
    again
        .code(0)
        .stdout_has(&format!("{TEST_IMAGE} is there, tools volume is there"));
}

#[test]
fn a_hosts_expired_and_orphaned_leftovers_are_swept_at_start_and_a_live_one_kept() {
    let _one = sharing();
    let far = sharing_host();
    let p = Pipeline::new_in(far.shared.as_ref().unwrap(), "hosts-sweep", true);
    p.init(BUILDER_REPLY, &meta_script("@say: hi"), "");
    let tag = support::short_id();
    let me = agent_runner_core::owner::Owner::this_process();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = agent_runner_core::owner::Owner {
        pid: gone.id(),
        ..me.clone()
    };
    gone.wait().unwrap();
    let labels = |owner: &agent_runner_core::owner::Owner, expires: u64, task: &str| {
        let mut args = vec![
            "--label".to_string(),
            format!("agent-runner.task={task}"),
            "--label".to_string(),
            format!("agent-runner.expires={expires}"),
        ];
        for (label, value) in agent_runner_sandbox::backend::sweep::owner_labels(owner) {
            args.extend(["--label".to_string(), format!("{label}={value}")]);
        }
        args
    };
    let later = now_secs() + 3600;
    let cases = [
        (
            "expired",
            labels(&me, now_secs() - 10, &format!("expired-{tag}")),
        ),
        ("orphan", labels(&dead, later, &format!("orphan-{tag}"))),
        ("live", labels(&me, later, &format!("live-{tag}"))),
    ];
    for (what, labels) in &cases {
        let name = format!("agent-runner-sweep-{what}-{tag}");
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let mut create = vec!["create", "--name", &name];
        create.extend(&labels);
        create.extend([TEST_IMAGE, "true"]);
        far.docker_ok(&create);
        let mut volume = vec!["volume", "create"];
        volume.extend(&labels);
        volume.push(&name);
        far.docker_ok(&volume);
    }
    let out = p
        .orchestrate_once(&["--host", &format!("far={}", far.url)])
        .output();
    out.code(0);
    let containers = far.containers();
    let volumes = far.docker_ok(&["volume", "ls", "--format", "{{.Name}}"]);
    for what in ["expired", "orphan"] {
        let name = format!("agent-runner-sweep-{what}-{tag}");
        assert!(!containers.contains(&name), "{name} kept: {}", out.stderr);
        assert!(!volumes.lines().any(|v| v == name), "{name} volume kept");
    }
    let live = format!("agent-runner-sweep-live-{tag}");
    assert!(containers.contains(&live), "{live} removed: {}", out.stderr);
    assert!(volumes.lines().any(|v| v == live), "{live} volume removed");
    out.stderr_has("host far: removed");
    far.docker_ok(&["rm", "-f", &live]);
    far.docker_ok(&["volume", "rm", &live]);
}

#[test]
fn wrong_hosts_are_refused_naming_the_flag_or_the_field() {
    let p = Pipeline::new("hosts-flags", true);
    p.init(BUILDER_REPLY, &meta_script("@say: hi"), "");
    for (flag, says) in [
        ("nohost", "expected NAME=URL[:SLOTS]"),
        ("a=tcp://127.0.0.1:2375:0", ".slots: 0"),
        ("a=tcp://10.1.2.3:2375", "plain tcp://"),
        ("a=http://127.0.0.1:80", "unix://, tcp:// or ssh://"),
        ("a b=unix:///x.sock", ".name:"),
    ] {
        let out = p.orchestrate_once(&["--host", flag]).output();
        out.code(2).stderr_has(says);
    }
    let twice = p
        .orchestrate_once(&["--host", "a=unix:///x.sock", "--host", "a=unix:///y.sock"])
        .output();
    twice.code(1).stderr_has("\"a\" is named twice");
    let file = p.scratch.file(
        "hosts.yaml",
        "require_test: false\nhosts:\n  - {name: a, docker: \"unix:///x.sock\"}\n  - {name: a, docker: \"tcp://10.0.0.1:2375\", slots: 2}\n",
    );
    let out = p
        .in_ws(
            &["workspace", "set"],
            &["--defaults", file.to_str().unwrap()],
        )
        .output();
    out.code(1).stderr_has("hosts[1].docker");
    let file = p.scratch.file(
        "hosts2.yaml",
        "require_test: false\nhosts:\n  - {name: a, docker: \"unix:///x.sock\", slots: 0}\n",
    );
    let out = p
        .in_ws(
            &["workspace", "set"],
            &["--defaults", file.to_str().unwrap()],
        )
        .output();
    out.code(1).stderr_has("hosts[0].slots: 0");
    assert!(docker(&["version"]).0);
}

/// Waits until the sandboxes of task `id` on this machine's daemon are `n` in all
/// (counting each new name once); the orchestrator's stderr if it ends first.
fn wait_for_sandbox(
    seen: &mut Vec<String>,
    id: &str,
    n: usize,
    orchestrator: &mut support::Running,
) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.len() < n {
        for name in support::docker::containers_labelled("agent-runner.task", id) {
            if !seen.contains(&name) {
                seen.push(name);
            }
        }
        if let Ok(Some(_)) = orchestrator.child().try_wait() {
            panic!("the orchestrator ended before sandbox {n} of {id} started");
        }
        assert!(
            Instant::now() < deadline,
            "sandbox {n} of {id} did not start within 120 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_job_is_re_queued_once_only_and_a_lost_attempt_leaves_nothing_in_the_working_tree() {
    // Two hosts that are this machine's daemon behind sockets this test can cut.
    let dir = support::Scratch::new("hosts-cut");
    let a = support::docker_proxy::DockerProxy::start(&dir.join("a.sock"));
    let b = support::docker_proxy::DockerProxy::start(&dir.join("b.sock"));
    let p = Pipeline::new("hosts-once", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: echo from-an-attempt > work.txt\n@say: working\n@sleep: 30"),
        "",
    );
    let id = task_id("once");
    p.new_task(&id, "Work while hosts go");
    p.run_tasks(&[&id]);
    let mut orchestrator = p
        .orchestrate_once(&[
            "--host",
            &format!("a=unix://{}:1", a.path.display()),
            "--host",
            &format!("b=unix://{}:1", b.path.display()),
        ])
        .start();
    let mut seen = Vec::new();
    wait_for_sandbox(&mut seen, &id, 1, &mut orchestrator);
    std::thread::sleep(Duration::from_secs(1));
    a.stop();
    // Re-queued to b; lost there too: not re-queued a second time.
    wait_for_sandbox(&mut seen, &id, 2, &mut orchestrator);
    std::thread::sleep(Duration::from_secs(1));
    b.stop();
    let out = orchestrator.finish();
    out.code(1);
    let attempts = p.attempts(&id);
    let hosts: Vec<&str> = attempts
        .iter()
        .map(|a| a["host"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(hosts, ["a", "b"], "{}", out.stderr);
    for (attempt, host) in attempts.iter().zip(["a", "b"]) {
        assert_eq!(attempt["status"], "failed");
        let error = attempt["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with(&format!("host lost: {host}: ")),
            "{error}"
        );
        assert!(attempt.get("branch").is_none(), "{attempt}");
    }
    out.stderr_has("not re-queued again");
    assert!(p.ipc("queue").is_empty(), "{:?}", p.ipc("queue"));
    // Each attempt wrote work.txt in its clone; nothing of it is in the working tree.
    assert!(!p.root.join("work.txt").exists());
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    wait_for_gone(&id);
}

#[test]
fn a_lost_attempt_on_a_single_slot_host_leaves_nothing_in_the_working_tree() {
    let dir = support::Scratch::new("hosts-one");
    let only = support::docker_proxy::DockerProxy::start(&dir.join("only.sock"));
    let p = Pipeline::new("hosts-one-slot", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: echo from-an-attempt > work.txt\n@say: working\n@sleep: 30"),
        "",
    );
    let id = task_id("oneslot");
    p.new_task(&id, "Work while the host goes");
    p.run_tasks(&[&id]);
    // One slot in all: without hosts this attempt would run in the working tree.
    let mut orchestrator = p
        .orchestrate_once(&["--host", &format!("only=unix://{}:1", only.path.display())])
        .start();
    let mut seen = Vec::new();
    wait_for_sandbox(&mut seen, &id, 1, &mut orchestrator);
    let log = p.ws().join("clones");
    wait_for_work(&log);
    only.stop();
    let out = orchestrator.finish();
    out.code(1);
    let attempts = p.attempts(&id);
    assert_eq!(attempts.len(), 1, "{}", out.stderr);
    assert!(
        attempts[0]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("host lost: only: ")),
        "{}",
        attempts[0]
    );
    assert!(
        !p.root.join("work.txt").exists(),
        "the lost attempt's work landed"
    );
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    // Re-queued, waiting for a host that answers.
    assert_eq!(p.ipc("queue").len(), 1, "{:?}", p.ipc("queue"));
    wait_for_gone(&id);
}

/// Waits until an attempt wrote work.txt somewhere under `dir` (its clone).
fn wait_for_work(dir: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().join("work.txt").exists());
        if found {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no work.txt under {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until no sandbox of task `id` is left on this machine's daemon.
fn wait_for_gone(id: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !support::docker::containers_labelled("agent-runner.task", id).is_empty() {
        assert!(Instant::now() < deadline, "sandboxes of {id} left behind");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_task_runs_once_on_a_host_reached_over_ssh() {
    let _one = sharing();
    let far = sharing_host();
    let address = far
        .url
        .trim_start_matches("tcp://")
        .trim_end_matches(":2375")
        .to_string();
    // The test's own key and the host's key; the `ssh` docker runs is a wrapper first
    // on PATH adding the key, ControlMaster and ServerAliveInterval (ssh reads its
    // config from the user's real home, which a test leaves alone).
    let home = support::Scratch::new("hosts-ssh-home");
    let ssh = home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    for key in ["id_ed25519", "host_ed25519"] {
        let made = support::Run::program(
            "ssh-keygen",
            &[
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-f",
                ssh.join(key).to_str().unwrap(),
            ],
        )
        .output();
        assert_eq!(made.code, Some(0), "{}", made.stderr);
    }
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        bin.join("ssh"),
        format!(
            "#!/bin/sh\nexec /usr/bin/ssh -i {0}/id_ed25519 -o IdentitiesOnly=yes \
             -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
             -o ControlMaster=auto -o ControlPath=/tmp/ar-ssh-%C -o ControlPersist=30 \
             -o ServerAliveInterval=5 -o ServerAliveCountMax=2 \"$@\"\n",
            ssh.display()
        ),
    )
    .unwrap();
    support::Run::program("chmod", &["+x", bin.join("ssh").to_str().unwrap()]).output();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let public = std::fs::read_to_string(ssh.join("id_ed25519.pub")).unwrap();
    let host_key = std::fs::read_to_string(ssh.join("host_ed25519")).unwrap();
    let install = support::Run::program(
        "docker",
        &[
            "exec",
            "-i",
            &far.container,
            "sh",
            "-c",
            "mkdir -p -m 700 /root/.ssh /etc/ssh && IFS= read -r key && echo \"$key\" > /root/.ssh/authorized_keys && \
             cat > /etc/ssh/host_ed25519 && chmod 600 /etc/ssh/host_ed25519 /root/.ssh/authorized_keys",
        ],
    )
    .stdin(format!("{public}{host_key}"))
    .output();
    assert_eq!(install.code, Some(0), "{}", install.stderr);
    let listen = format!("ListenAddress={address}:2222");
    docker_ok(&[
        "exec",
        "-d",
        &far.container,
        "/usr/sbin/sshd",
        "-D",
        "-e",
        "-f",
        "/dev/null",
        "-h",
        "/etc/ssh/host_ed25519",
        "-o",
        &listen,
        "-o",
        "UsePAM=no",
        "-o",
        "PermitRootLogin=prohibit-password",
        "-o",
        "AuthorizedKeysFile=/root/.ssh/authorized_keys",
    ]);
    let url = format!("ssh://root@{address}:2222");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let version = support::Run::program(
            "docker",
            &["-H", &url, "version", "--format", "{{.Server.Version}}"],
        )
        .env("PATH", &path)
        .output();
        if version.code == Some(0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "docker over ssh did not answer: {}",
            version.stderr
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let p = Pipeline::new_in(far.shared.as_ref().unwrap(), "hosts-ssh", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: echo over-ssh > out.txt\n@say: done"),
        "",
    );
    let id = task_id("ssh");
    p.new_task(&id, "Run over ssh");
    p.run_tasks(&[&id]);
    let starts = watch_starts(far);
    let out = p
        .orchestrate_once(&["--host", &format!("far={url}")])
        .env("PATH", &path)
        .output();
    out.code(0);
    let attempts = p.attempts(&id);
    assert_eq!(attempts.len(), 1, "{}", out.stderr);
    assert_eq!(attempts[0]["host"], "far");
    assert_eq!(attempts[0]["status"], "succeeded", "{}", out.stderr);
    assert_eq!(
        git(&p.root, &["show", &format!("agent-runner/{id}:out.txt")]),
        "over-ssh\n"
    );
    // Its sandbox ran on that host's daemon, reached over ssh.
    assert_eq!(starts_on(starts, std::slice::from_ref(&id)), 1);
    // sshd stays for the host's lifetime; the control master ends with ControlPersist.
    let _ = support::Run::program(
        "ssh",
        &[
            "-F",
            ssh.join("config").to_str().unwrap(),
            "-O",
            "exit",
            &address,
        ],
    )
    .output();
}

#[test]
fn run_goes_to_runner_sandbox_host_and_a_wrong_one_is_refused_by_field() {
    use support::fake_openai::FakeOpenAi;
    use support::task::{assess, plan, run_worker, runner, v1_task};
    let _one = sharing();
    let far = sharing_host();
    let repo = far
        .shared
        .as_ref()
        .unwrap()
        .join(format!("repo-{}", support::short_id()));
    std::fs::create_dir_all(&repo).unwrap();
    let id = task_id("sandboxhost");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo ok > out.txt\n@say: done"),
        assess(&["AC-1"], "out.txt says ok"),
    ]);
    let starts = watch_starts(far);
    let out = runner(
        v1_task(&id, &repo, &server)
            .test("grep -qx ok out.txt")
            .set("runner.sandbox.host", far.url.as_str())
            // A plain directory the host shares: bind (the copy needs git).
            .set("runner.sandbox.transport", "bind"),
    )
    // The environment names this machine's daemon; the task's host wins.
    .env("DOCKER_HOST", LOCAL)
    .output();
    out.code(0).stdout_has(&format!("COMPLETE: task {id}"));
    assert_eq!(starts_on(starts, std::slice::from_ref(&id)), 1);

    let server = FakeOpenAi::start(vec![]);
    let out = runner(
        v1_task(&task_id("badhost"), &repo, &server)
            .set("runner.sandbox.host", "tcp://10.9.8.7:2375"),
    )
    .output();
    out.code(1)
        .stderr_has("runner.sandbox.host")
        .stderr_has("plain tcp://");
}

/// A Docker daemon's API that answers the health check with `version` (what a
/// hostile host may say) and "no such" to everything else.
struct HostileDaemon {
    version: String,
}

impl support::server::Protocol for HostileDaemon {
    fn answer(
        &self,
        request: &support::server::Received,
        _: usize,
        conn: &mut support::server::Conn,
    ) -> std::io::Result<support::server::Next> {
        let api = [
            ("Api-Version", "1.43"),
            ("Content-Type", "application/json"),
        ];
        if request.path.ends_with("/_ping") {
            // The client pings with HEAD first: a body there would be read as the
            // start of the next response on the connection (a malformed answer).
            let body = if request.method == "HEAD" { "" } else { "OK" };
            conn.respond(200, &api, body)?;
        } else if request.path.ends_with("/version") {
            let body = serde_json::json!({
                "Version": self.version, "ApiVersion": "1.43", "MinAPIVersion": "1.12",
                "Os": "linux", "Arch": "amd64", "GitCommit": "x", "GoVersion": "go1.21",
                "KernelVersion": "6.1", "BuildTime": "2024-01-01T00:00:00Z",
                "Components": [{"Name": "Engine", "Version": self.version,
                                "Details": {"ApiVersion": "1.43", "MinAPIVersion": "1.12"}}],
            });
            conn.respond(200, &api, &body.to_string())?;
        } else {
            conn.respond(404, &api, r#"{"message":"no such thing"}"#)?;
        }
        Ok(support::server::Next::KeepAlive)
    }
}

/// Issue 41 (attack round 5, finding 5): `hosts check` printed a hostile daemon's
/// version string raw: a terminal title, colours, a carriage return and a line
/// that reads as one of ours. It is escaped now, as every other outside text.
#[test]
fn hosts_check_escapes_a_hostile_daemons_version() {
    let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[31m27.0\r\nhost evil: ok, nothing MISSING";
    let daemon = support::server::Server::listen(
        "127.0.0.2",
        HostileDaemon {
            version: hostile.into(),
        },
    );
    let flag = format!("evil=tcp://{}", daemon.authority());
    let out =
        support::Run::new(&["hosts", "check", "--image", TEST_IMAGE, "--host", &flag]).output();
    assert!(
        daemon
            .received()
            .iter()
            .any(|r| r.path.ends_with("/version")),
        "the check never asked the daemon: {}",
        out.stdout
    );
    out.code(1);
    assert!(
        !out.stdout
            .chars()
            .any(|c| c != '\n' && (c.is_control() || c == '\u{9b}')),
        "a control character reached the terminal: {:?}",
        out.stdout
    );
    assert!(
        !out.stdout.lines().any(|l| l.starts_with("host evil: ok")),
        "the daemon wrote a line of its own: {}",
        out.stdout
    );
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("evil "))
        .unwrap_or_default();
    assert!(
        row.contains(r"\e]0;pwned\x07\e[31m27.0\r\nhost evil"),
        "{row}\n{}\n{}",
        out.stdout,
        out.stderr
    );
}
