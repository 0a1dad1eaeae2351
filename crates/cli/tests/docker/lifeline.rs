//! The sandbox's lifeline (SPEC §22): the static helper from the tools volume as
//! the sandbox's main process, its stdio the one stream to agent-runner; the
//! carrier with egress on a remote daemon (here the emulated host that shares this
//! machine's paths, so the bind transport's locality proof passes). Egress over
//! it, the agent's login file into the private tmpfs through it, the sandbox ending
//! when the stream closes or the expiry passes, and a worker that kills the helper.

use crate::support;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use support::destination::Destination;
use support::docker::TEST_IMAGE;
use support::remote_hosts::{RemoteHost, sharing_host};
use support::task::assert_no_container;
use support::task_yaml::TaskYaml;
use support::{Outcome, Run, Scratch};

fn task_id(name: &str) -> String {
    format!("lifeline-{name}-{}", support::short_id())
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Meta: plan one criterion, one worker run of `prompt`, then pass.
fn meta(dir: &Scratch, prompt: &str) -> std::path::PathBuf {
    let prompt = serde_json::to_string(prompt).unwrap();
    dir.file(
        "meta.yaml",
        format!(
            "- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: x\n\
             - type: next_action\n  decision: {{action: run_worker, reason: go}}\n  worker_call: {{worker_type: codex-cli, mode: exec, prompt: {prompt}}}\n\
             - type: completion_assessment\n  summary: ok\n  details: {{passed_criteria: [AC-1], remaining_risks: []}}\n"
        ),
    )
}

/// A task in `repo` whose one worker run is `prompt`, egress by allow list.
/// The sharing host sees this machine's paths: bind, so the worker's files can be
/// read here (the lifeline under the copy transport: docker::copy_transport).
fn task(id: &str, repo: &Path, script: &Path) -> TaskYaml {
    TaskYaml::new(id, repo, "Reach the network.")
        .scripted(script, 1)
        .image(TEST_IMAGE)
        .set("runner.sandbox.transport", "bind")
}

fn run(yaml: &TaskYaml, home: &Path, docker_host: Option<&str>) -> Outcome {
    let mut run = Run::new(&["run", "--json"])
        .env("TMPDIR", home)
        .env("HOME", home)
        .env("RUST_LOG", "info")
        .stdin(yaml.to_string());
    if let Some(url) = docker_host {
        run = run.env("DOCKER_HOST", url);
    }
    run.output()
}

#[test]
fn a_chatgpt_login_reaches_the_private_tmpfs_mode_0600_through_the_stream_and_is_never_mounted() {
    let _one = support::remote_hosts::sharing();
    let host = sharing_host();
    let dir = Scratch::new("lifeline-login");
    let repo = shared_repo(host);
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let auth = r#"{"tokens": {"access_token": "chatgpt-login-0123456789"}}"#;
    std::fs::write(home.join(".codex/auth.json"), auth).unwrap();
    let id = task_id("login");
    let script = meta(
        &dir,
        "@run: f=\"${CODEX_HOME:-$HOME/.codex}/auth.json\"; cat \"$f\" > seen-auth.txt; \
         readlink \"$f\" > link.txt; stat -L -c '%a %u' \"$f\" > mode.txt; id -u > uid.txt; \
         grep -c auth /proc/mounts > mounts.txt; grep ' /run/agent-runner/private ' /proc/mounts | cut -d' ' -f3 > fs.txt\n@say: looked",
    );
    let out = run(&task(&id, &repo, &script), &home, Some(&host.url));
    out.code(0).stderr_has("worker run 1/1: completed");
    assert_eq!(read(&repo.join("seen-auth.txt")), auth);
    assert_eq!(
        read(&repo.join("link.txt")),
        "/run/agent-runner/private/login-auth.json\n"
    );
    let uid = read(&repo.join("uid.txt"));
    assert_eq!(read(&repo.join("mode.txt")), format!("600 {uid}"));
    assert_eq!(
        read(&repo.join("mounts.txt")),
        "0\n",
        "no mount of the login file"
    );
    assert_eq!(read(&repo.join("fs.txt")), "tmpfs\n");
    assert_none_on(host, &id);
    let _ = std::fs::remove_dir_all(&repo);
}

/// A new repository in the directory the sharing host sees at the same path.
fn shared_repo(host: &RemoteHost) -> std::path::PathBuf {
    let repo = host
        .shared
        .as_ref()
        .unwrap()
        .join(format!("repo-lifeline-{}", support::short_id()));
    std::fs::create_dir_all(&repo).unwrap();
    repo
}

/// Writes a frame of unknown kind (255) to the stdout of the lifeline helper of
/// task `id`'s sandbox on `host`, from the host's root: its pid in the host's
/// namespace from `docker inspect`, its stdout through `/proc`.
fn inject_garbage(host: &'static RemoteHost, id: &str) -> Result<(), String> {
    let filter = format!("label=agent-runner.task={id}");
    let until = Instant::now() + Duration::from_secs(120);
    let mut last = String::from("no running sandbox seen");
    while Instant::now() < until {
        let (_, ids, _) = host.docker(&["ps", "-q", "--filter", &filter]);
        for cid in ids.split_whitespace() {
            let (_, pid, _) = host.docker(&["inspect", "-f", "{{.State.Pid}}", cid]);
            let pid = pid.trim();
            if pid.is_empty() || pid == "0" {
                continue;
            }
            // While the worker's command runs, as the worker's own write did: its
            // `sleep 30` is seen in the host's process list.
            let write = format!(
                "sleeping=; for p in /proc/[0-9]*; do case \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" in \
                 'sleep 30'*) sleeping=1;; esac; done; [ -n \"$sleeping\" ] && \
                 tr '\\0' ' ' < /proc/{pid}/cmdline | grep -q 'agent-runner-helper lifeline' \
                 && printf '\\377\\377\\377\\377\\377\\377\\377\\377' > /proc/{pid}/fd/1"
            );
            let out = Command::new("docker")
                .args(["exec", &host.container, "sh", "-c", &write])
                .output()
                .map_err(|e| format!("docker exec: {e}"))?;
            if out.status.success() {
                return Ok(());
            }
            last = format!(
                "{cid} (pid {pid}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(last)
}

/// Nothing of task `id` is left on `host`.
fn assert_none_on(host: &RemoteHost, id: &str) {
    let filter = format!("label=agent-runner.task={id}");
    let left = host.docker_ok(&["ps", "-a", "--filter", &filter, "-q"]);
    assert!(left.trim().is_empty(), "left on the host: {left}");
}

#[test]
fn egress_over_the_lifeline_is_allowed_and_denied_on_a_remote_host_with_nothing_of_this_machine_mounted()
 {
    let _one = support::remote_hosts::sharing();
    let host = sharing_host();
    let allowed = Destination::start("allowed", "127.0.0.2");
    let denied = Destination::start("denied", "127.0.0.3");
    let (a, d) = (allowed.authority(), denied.authority());
    // Many download windows: the helper's credits must keep coming.
    let big = big_server();
    let dir = Scratch::new("lifeline-remote");
    let repo = shared_repo(host);
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let id = task_id("remote");
    let script = meta(
        &dir,
        &format!(
            "@run: wget -q -O allowed.out http://{a}/x 2> allowed.err; \
             wget -q -O - http://{big}/big | wc -c > big.txt; \
             wget -q -O denied.out http://{d}/y 2> denied.err; echo $? > denied.rc; \
             grep -c egress /proc/mounts > mounts.txt\n@say: fetched"
        ),
    );
    let yaml = task(&id, &repo, &script).set("runner.worker.allow", [&a, &big]);
    let out = run(&yaml, &home, Some(&host.url));
    out.code(0).stderr_has(&format!("egress denied: {d}"));
    assert_eq!(read(&repo.join("allowed.out")), "hello from allowed");
    assert_eq!(read(&repo.join("big.txt")).trim(), BIG.to_string());
    assert_ne!(read(&repo.join("denied.rc")), "0\n");
    assert!(!repo.join("denied.out").exists() || read(&repo.join("denied.out")).is_empty());
    assert_eq!(read(&repo.join("mounts.txt")), "0\n");
    assert_eq!(denied.connections(), 0, "the denied server saw nothing");
    let log = read(&repo.join(format!(".agent-runner/logs/{id}/egress.jsonl")));
    assert!(
        log.contains("\"allowed\":true") && log.contains("\"allowed\":false"),
        "{log}"
    );
    assert_none_on(host, &id);
    let _ = std::fs::remove_dir_all(&repo);
}

/// Bytes of `big_server`'s answer: five of the lifeline's download windows.
const BIG: usize = 5 * 4 * 1024 * 1024;

/// A server on 127.0.0.2 answering one request with BIG bytes; its authority.
fn big_server() -> String {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let authority = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let Ok((mut client, _)) = listener.accept() else {
            return;
        };
        let mut request = [0u8; 4096];
        let _ = client.read(&mut request);
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {BIG}\r\nConnection: close\r\n\r\n");
        let _ = client.write_all(head.as_bytes());
        let _ = client.write_all(&vec![b'x'; BIG]);
    });
    authority
}

/// The tools volume of this build (as `tools install` says), filled if need be.
fn tools_volume() -> String {
    let out = Run::new(&["tools", "install"]).output();
    out.code(0);
    out.stdout.split_whitespace().next().unwrap().to_string()
}

/// The real helper as a sandbox's main process, its stdin a pipe of ours.
fn helper(expires: u64, name: &str) -> std::process::Child {
    let mount = format!(
        "type=volume,source={},target=/agent-runner-tools,ro=true",
        tools_volume()
    );
    Command::new("docker")
        .args([
            "run",
            "-i",
            "--rm",
            "--init",
            "--network",
            "none",
            "--name",
            name,
            "--label",
            // Its own: the two tests of the helper run at once.
            &format!("agent-runner.task={name}"),
            "--mount",
            &mount,
            "--entrypoint",
            "/agent-runner-tools/bin/agent-runner-helper",
            TEST_IMAGE,
            "lifeline",
            "0",
        ])
        .arg(expires.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn ready(child: &mut std::process::Child) {
    let mut line = [0u8; 19];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut line)
        .unwrap();
    assert_eq!(&line, b"agent-runner-ready ");
}

/// Waits for `child` to end within `limit`; how long it took.
fn ends_within(child: &mut std::process::Child, limit: Duration) -> Duration {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < limit, "the sandbox did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    started.elapsed()
}

#[test]
fn closing_the_stream_ends_the_sandbox() {
    let name = format!("agent-runner-lifeline-close-{}", support::short_id());
    let mut child = helper(0, &name);
    ready(&mut child);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "it lives while the stream is open"
    );
    drop(child.stdin.take());
    ends_within(&mut child, Duration::from_secs(15));
    assert_no_container(&name);
}

#[test]
fn the_sandbox_ends_when_its_expiry_passes_though_the_stream_stays_open() {
    let name = format!("agent-runner-lifeline-expiry-{}", support::short_id());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut child = helper(now + 3, &name);
    ready(&mut child);
    let _held = child.stdin.take();
    ends_within(&mut child, Duration::from_secs(20));
    let mut stderr = String::new();
    child
        .stderr
        .as_mut()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains("agent-runner lifeline: the sandbox expired"),
        "{stderr}"
    );
    assert_no_container(&name);
}

/// The helper is the sandbox's PID 1 (issue 41): a worker's signals do not reach it,
/// and it stops what the worker left after the run.
#[test]
fn a_worker_cannot_kill_the_helper_and_its_task_goes_on() {
    let _one = support::remote_hosts::sharing();
    let host = sharing_host();
    let dir = Scratch::new("lifeline-kill");
    let repo = shared_repo(host);
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let id = task_id("kill");
    let script = meta(
        &dir,
        "@run: for p in /proc/[0-9]*; do case \"$(cat $p/cmdline 2>/dev/null | tr '\\0' ' ')\" in *agent-runner-helper\\ lifeline*) kill -9 ${p#/proc/}; kill -STOP ${p#/proc/}; echo signalled=${p#/proc/};; esac; done; sleep 2\n@say: killed",
    );
    let out = run(&task(&id, &repo, &script), &home, Some(&host.url));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    let log = read(&repo.join(format!(".agent-runner/logs/{id}/run-1.log")));
    assert!(log.contains("signalled=1"), "the helper is PID 1: {log}");
    assert!(!read(&repo.join(format!(".agent-runner/task-{id}.md"))).is_empty());
    assert_none_on(host, &id);
    let _ = std::fs::remove_dir_all(&repo);
}

/// Issue 41 (attack round 5, finding 6): after the sandbox broke the lifeline's
/// protocol, the line that ends the task said only that the container was gone;
/// the cause was in the log alone. It says the cause now.
#[test]
fn a_sandbox_that_breaks_the_lifelines_protocol_is_named_in_the_line_that_ends_the_task() {
    let _one = support::remote_hosts::sharing();
    let host = sharing_host();
    let dir = Scratch::new("lifeline-garbage");
    let repo = shared_repo(host);
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let id = task_id("garbage");
    // A frame of a kind the protocol does not have, written up the helper's stdout
    // by the host, as a hostile host would: the helper is PID 1 and not dumpable, so
    // the worker cannot, but the host's root can.
    let script = meta(&dir, "@run: sleep 30\n@say: slept");
    let injector = std::thread::spawn({
        let id = id.clone();
        move || inject_garbage(host, &id)
    });
    let out = run(&task(&id, &repo, &script), &home, Some(&host.url));
    let injected = injector.join().unwrap();
    assert!(injected.is_ok(), "the host could not inject: {injected:?}");
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    let ended = out
        .stderr
        .lines()
        .find(|l| l.contains("→ FAILED"))
        .unwrap_or_default();
    assert!(
        ended.contains("lifeline: the sandbox broke the protocol: a frame of unknown kind 255"),
        "the line that ends the task: {ended}\n{}",
        out.stderr
    );
    assert_none_on(host, &id);
    let _ = std::fs::remove_dir_all(&repo);
}
