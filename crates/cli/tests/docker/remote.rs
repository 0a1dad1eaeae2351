//! Sandboxes on other machines (SPEC §22) against emulated remote Docker hosts
//! (`support::remote_hosts`): the hosts themselves, locality proven before any bind
//! mount (`runner.sandbox.transport: bind`: a daemon over tcp:// gets the copy
//! otherwise, `copy_transport.rs`), and a paused host bounded by the deadline.

use crate::support;

use std::time::{Duration, Instant};

use support::docker::{TEST_IMAGE, docker_ok};
use support::fake_openai::FakeOpenAi;
use support::remote_hosts::{RemoteHost, assert_docker0_intact, hosts, sharing, sharing_host};
use support::task::*;

/// A repository at `path` whose out.txt says `says`.
fn repository(path: &std::path::Path, says: &str) {
    std::fs::create_dir_all(path).unwrap();
    std::fs::write(path.join("out.txt"), format!("{says}\n")).unwrap();
}

/// The sandbox containers of task `id` on `host`.
fn task_containers(host: &RemoteHost, id: &str) -> Vec<String> {
    support::docker::containers_labelled_on(&["-H", &host.url], "agent-runner.task", id)
}

/// On `host`, a directory at `path` with other content (out.txt says "remote") and
/// everything a bind mount of task `id` names (its session directory too): the
/// trap of a daemon elsewhere that has the repository's path.
fn plant_copy(host: &RemoteHost, path: &str, id: &str) {
    docker_ok(&[
        "exec",
        &host.container,
        "sh",
        "-c",
        &format!(
            "mkdir -p '{path}/.agent-runner/state/{id}.session' && echo remote > '{path}/out.txt'"
        ),
    ]);
}

/// The locality token's directory is gone from the repository at `repo`.
fn assert_no_token_left(repo: &std::path::Path) {
    let private: Vec<String> = std::fs::read_dir(repo.join(".agent-runner"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        private.iter().all(|name| !name.starts_with("locality-")),
        "{private:?}"
    );
}

#[test]
fn emulated_hosts_answer_with_the_test_image_and_leave_docker0_intact() {
    let hosts = hosts();
    assert!(hosts.len() >= 2, "{hosts:?}");
    for host in hosts {
        let version = host.docker_ok(&["version", "--format", "{{.Server.Version}}"]);
        assert!(!version.trim().is_empty(), "{}", host.url);
        host.docker_ok(&["image", "inspect", TEST_IMAGE]);
        // Its own daemon, not this machine's: a container started there is not here.
        let name = format!("agent-runner-probe-{}", support::short_id());
        host.docker_ok(&["create", "--name", &name, TEST_IMAGE, "true"]);
        let (here, _, _) = support::docker::docker(&["container", "inspect", &name]);
        host.docker_ok(&["rm", &name]);
        assert!(
            !here,
            "{name} is on this machine's daemon: not a remote host"
        );
    }
    assert_docker0_intact();
}

#[test]
fn a_remote_daemon_with_the_repositorys_path_is_refused_and_nothing_runs_there() {
    let host = &hosts()[0];
    let dir = support::Scratch::new("same-path-trap");
    repository(&dir.path, "local");
    let path = dir.path.display().to_string();
    let id = task_id("trap");
    plant_copy(host, &path, &id);
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo ok > out.txt\n@say: done"),
        assess(&["AC-1"], "out.txt says ok"),
    ]);
    let out = runner(
        v1_task(&id, &dir.path, &server)
            .set("runner.sandbox.transport", "bind")
            .test("grep -qx ok out.txt"),
    )
    .env("DOCKER_HOST", &host.url)
    .output();
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    out.stderr_has("refusing to bind-mount the repository")
        .stderr_has(&format!("DOCKER_HOST={}", host.url))
        .stderr_has("unset DOCKER_HOST");
    assert!(!out.stdout.contains("COMPLETE"), "{}", out.stdout);
    let remote = docker_ok(&["exec", &host.container, "cat", &format!("{path}/out.txt")]);
    assert_eq!(remote, "remote\n", "the task ran on the remote copy");
    assert_eq!(
        std::fs::read_to_string(dir.join("out.txt")).unwrap(),
        "local\n"
    );
    assert_eq!(task_containers(host, &id), Vec::<String>::new());
    assert!(host.containers().is_empty(), "{:?}", host.containers());
    // The token's directory is gone, here (and was never there).
    assert_no_token_left(&dir.path);
    assert!(note(&dir.path, &id).contains("refusing to bind-mount"));
    docker_ok(&["exec", &host.container, "rm", "-rf", &path]);
}

#[test]
fn a_remote_daemon_without_the_path_is_refused_by_name_too() {
    let host = &hosts()[1];
    let dir = support::Scratch::new("no-path");
    repository(&dir.path, "local");
    let id = task_id("nopath");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo ok > out.txt\n@say: done"),
    ]);
    let out = runner(v1_task(&id, &dir.path, &server).set("runner.sandbox.transport", "bind"))
        .env("DOCKER_HOST", &host.url)
        .output();
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    out.stderr_has("refusing to bind-mount the repository")
        .stderr_has(&format!("DOCKER_HOST={}", host.url));
    assert_eq!(task_containers(host, &id), Vec::<String>::new());
}

#[test]
fn a_remote_daemon_that_sees_this_machines_files_passes_the_proof() {
    let _one = sharing();
    let host = sharing_host();
    let shared = host.shared.as_ref().unwrap();
    let repo = shared.join(format!("repo-{}", support::short_id()));
    repository(&repo, "wrong");
    let id = task_id("shared");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo ok > out.txt\n@say: done"),
        assess(&["AC-1"], "out.txt says ok"),
    ]);
    let out = runner(
        v1_task(&id, &repo, &server)
            .set("runner.sandbox.transport", "bind")
            .test("grep -qx ok out.txt"),
    )
    .env("DOCKER_HOST", &host.url)
    .env("RUST_LOG", "info")
    .output();
    out.code(0).stdout_has(&format!("COMPLETE: task {id}"));
    assert_eq!(
        std::fs::read_to_string(repo.join("out.txt")).unwrap(),
        "ok\n"
    );
    assert_eq!(task_containers(host, &id), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&repo);
}

/// The host's relay (its main process, as this machine sees it) stopped with
/// SIGSTOP: the host takes connections and answers none, as a paused or
/// unreachable machine does (`docker pause` cannot always freeze a busy cgroup
/// here). Continued however the test ends: other tests use the host.
struct Stopped(String);

impl Stopped {
    fn relay_of(host: &RemoteHost) -> Stopped {
        let pid = docker_ok(&["inspect", "--format", "{{.State.Pid}}", &host.container]);
        let pid = pid.trim().to_string();
        let out = support::Run::program("kill", &["-STOP", &pid]).output();
        assert_eq!(out.code, Some(0), "kill -STOP {pid}: {}", out.stderr);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = support::Run::program("kill", &["-CONT", &self.0]).output();
    }
}

#[test]
fn a_paused_host_ends_the_attempt_within_the_deadline_naming_the_host() {
    let _one = sharing();
    let host = sharing_host();
    let shared = host.shared.as_ref().unwrap();
    let repo = shared.join(format!("repo-{}", support::short_id()));
    repository(&repo, "wrong");
    let id = task_id("paused");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: working\n@run: sleep 600"),
    ]);
    let yaml = v1_task(&id, &repo, &server)
        .set("runner.sandbox.transport", "bind")
        .set("runner.worker.max_run_time_sec", 10);
    let child = runner(yaml).env("DOCKER_HOST", &host.url).start();
    let log = repo.join(format!(".agent-runner/logs/{id}/run-1.log"));
    // Only a bound on the start: on a loaded 2-core machine a remote sandbox's
    // start took over 60 s twice (the deadline measured is from the pause on).
    wait_for(Duration::from_secs(180), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("working"))
    });
    let stopped = Stopped::relay_of(host);
    let paused = Instant::now();
    let out = child.finish();
    let took = paused.elapsed();
    drop(stopped);
    eprintln!(
        "paused host: the run ended {:.1} s after the pause",
        took.as_secs_f64()
    );
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    out.stderr_has(&format!(
        "host lost: the docker daemon at DOCKER_HOST={}: no answer within 5 s",
        host.url
    ));
    // The worker's 10 s, the 5 s health check, the removal's 5 s + 5 s, and a
    // busy machine's slack: never the minutes of deadlines a paused host used to
    // hold a run for (each call waiting out 30 s).
    assert!(
        took < Duration::from_secs(45),
        "the run ended {took:?} after the pause:\n{}",
        out.stderr
    );
    // Back, the host ends the sandbox whose pipe we closed: nothing is left there.
    wait_for(Duration::from_secs(30), || {
        task_containers(host, &id).is_empty()
    });
    let _ = std::fs::remove_dir_all(&repo);
}

/// How long a copy-transport task on the sharing host runs on after that host is
/// paused the moment `pause_now` says (polled every 50 ms); its output, checked to
/// end FAILED with `host lost: …` naming the host, and the host left clean once
/// back.
fn paused_under_copy(
    name: &str,
    worker: &str,
    test: (&str, u64),
    mut pause_now: impl FnMut(&RemoteHost, &str, &std::path::Path) -> bool,
) -> Duration {
    let _one = sharing();
    let host = sharing_host();
    let dir = support::Scratch::new(name);
    support::git_repo(&dir.path, "out.txt", "wrong\n");
    let id = task_id(name);
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(worker),
        assess(&["AC-1"], "out.txt says ok"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server)
        .set("runner.sandbox.transport", "copy")
        .set("runner.worker.max_run_time_sec", 600)
        .set("task.test.command", test.0)
        .set("task.test.timeout_sec", test.1);
    let mut child = runner(yaml)
        .env("DOCKER_HOST", &host.url)
        .deadline(Duration::from_secs(900))
        .start();
    // Only a bound on the way there: a remote sandbox's start took over 60 s on a
    // loaded 2-core machine (the time measured is from the pause on).
    let began = Instant::now();
    while !pause_now(host, &id, &dir.path) {
        assert!(
            child.child().try_wait().unwrap().is_none(),
            "the task ended before the moment of the pause"
        );
        assert!(
            began.elapsed() < Duration::from_secs(240),
            "the moment of the pause never came"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let stopped = Stopped::relay_of(host);
    let paused = Instant::now();
    let out = child.finish();
    let took = paused.elapsed();
    drop(stopped);
    eprintln!(
        "{name}: the run ended {:.1} s after the pause",
        took.as_secs_f64()
    );
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains(&format!(
            "host lost: the docker daemon at DOCKER_HOST={}",
            host.url
        )),
        "{said}"
    );
    assert!(!said.contains("COMPLETE"), "{said}");
    // Back, the host ends the sandbox whose pipe we closed; the expiry labels
    // leave the rest to the next sweep.
    wait_for(Duration::from_secs(60), || {
        task_containers(host, &id)
            .iter()
            .all(|name| name.starts_with("agent-runner-copy-"))
    });
    took
}

/// The bound of SPEC §22 after a pause: the deadline of what was waiting, then
/// about 30 s (the 5 s health check, the removals', a busy machine's slack).
const AFTER_THE_DEADLINE: Duration = Duration::from_secs(35);

#[test]
fn a_host_paused_during_a_test_run_under_copy_ends_it_within_the_deadline() {
    let took = paused_under_copy(
        "paused-test",
        "@run: echo ok > out.txt\n@say: done",
        ("sleep 600", 8),
        |_, id, repo| {
            repo.join(format!(".agent-runner/logs/{id}/test-1.log"))
                .exists()
        },
    );
    assert!(
        took < Duration::from_secs(8) + AFTER_THE_DEADLINE,
        "the run ended {took:?} after the pause"
    );
}

#[test]
fn a_host_paused_during_the_bring_back_ends_it_within_seconds() {
    // 64 MiB of random bytes: the bundler hashes and packs them for a few seconds.
    let took = paused_under_copy(
        "paused-back",
        "@run: echo ok > out.txt; head -c 67108864 /dev/urandom > big.bin\n@say: done",
        ("grep -qx ok out.txt", 60),
        |host, id, _| {
            let filter = format!("label=agent-runner.task={id}");
            let (_, out, _) = host.docker(&[
                "ps",
                "-a",
                "--filter",
                &filter,
                "--filter",
                "label=agent-runner.role=bundler",
                "-q",
            ]);
            !out.trim().is_empty()
        },
    );
    assert!(
        took < AFTER_THE_DEADLINE,
        "the run ended {took:?} after the pause"
    );
}

#[test]
fn a_host_paused_during_the_start_under_copy_ends_it_within_seconds() {
    // The moment the repository's volume is there: its copy, the sandbox's start
    // and the first calls after wait on the host.
    let took = paused_under_copy(
        "paused-start",
        "@say: working\n@run: sleep 600",
        ("true", 60),
        |host, id, _| {
            let filter = format!("label=agent-runner.task={id}");
            let (_, out, _) = host.docker(&["volume", "ls", "-q", "--filter", &filter]);
            out.lines().any(|v| v.starts_with("agent-runner-copy-"))
        },
    );
    assert!(
        took < AFTER_THE_DEADLINE,
        "the run ended {took:?} after the pause"
    );
}

#[test]
fn plain_tcp_to_another_machine_is_refused_by_docker_host_and_by_context() {
    let dir = support::Scratch::new("plain-tcp");
    repository(&dir.path, "local");
    // TEST-NET-1: nothing answers there; the refusal must come before any call.
    let url = "tcp://192.0.2.1:2375";
    let config = support::Scratch::new("docker-config");
    let made = support::Run::program("docker", &["context", "create", "far"])
        .arg("--docker")
        .arg(&format!("host={url}"))
        .env("DOCKER_CONFIG", &config.path)
        .output();
    assert_eq!(made.code, Some(0), "{}", made.stderr);
    for (how, named) in [
        (
            "DOCKER_HOST",
            format!("refusing the docker daemon at DOCKER_HOST={url}"),
        ),
        (
            "DOCKER_CONTEXT",
            format!("refusing the docker daemon of docker context \"far\" ({url})"),
        ),
    ] {
        let id = task_id("plaintcp");
        let server = FakeOpenAi::start(vec![plan(&["AC-1"]), run_worker("@say: hi")]);
        let run = runner(v1_task(&id, &dir.path, &server).set("runner.sandbox.transport", "bind"))
            .env("DOCKER_CONFIG", &config.path);
        let run = match how {
            "DOCKER_HOST" => run.env("DOCKER_HOST", url),
            _ => run.env("DOCKER_CONTEXT", "far"),
        };
        let started = Instant::now();
        let out = run.output();
        out.code(1)
            .stdout_has(&named)
            .stdout_has("DOCKER_TLS_VERIFY=1")
            .stdout_has("ssh://");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{how}: {:?}",
            started.elapsed()
        );
        assert!(note(&dir.path, &id).contains("without TLS"));
    }
}

/// A unix socket on this machine that carries every connection to `host`'s API:
/// a daemon elsewhere behind a local endpoint (an ssh forward, say), which the
/// endpoint alone cannot tell from this machine's. Its path.
fn forwarded(host: &RemoteHost, dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::net::UnixListener;
    let path = dir.join("docker.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let address = host.url.trim_start_matches("tcp://").to_string();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = std::net::TcpStream::connect(&address) else {
                continue;
            };
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c_in, &mut s_out);
                let _ = s_out.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s_in, &mut c_out);
                let _ = c_out.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    path
}

/// The bridge's proof (SPEC §27: no container of its own): behind a local socket,
/// a daemon elsewhere that sees the bridge's directory (TMPDIR shared) and has a
/// copy of the repository at its path starts the sandbox, but its bridge finds no
/// token there: refused before anything runs, the copy there untouched.
#[test]
fn a_local_socket_to_a_daemon_elsewhere_is_refused_by_the_bridges_proof() {
    let _one = sharing();
    let host = sharing_host();
    let shared = host.shared.as_ref().unwrap();
    let tmp = shared.join(format!("tmp-{}", support::short_id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let dir = support::Scratch::new("forwarded");
    repository(&dir.path, "local");
    let id = task_id("forwarded");
    let path = dir.path.display().to_string();
    // The copy there: everything the sandbox mounts of the repository is there too.
    plant_copy(host, &path, &id);
    let socket = forwarded(host, &dir.path);
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo ok > out.txt\n@say: done"),
        assess(&["AC-1"], "out.txt says ok"),
    ]);
    let out = runner(
        v1_task(&id, &dir.path, &server)
            .set("runner.sandbox.transport", "bind")
            .set("runner.worker.network", "none")
            .test("grep -qx ok out.txt"),
    )
    .env("DOCKER_HOST", format!("unix://{}", socket.display()))
    .env("TMPDIR", &tmp)
    .output();
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    out.stderr_has("refusing to bind-mount the repository")
        .stderr_has("its main process found no token");
    let remote = docker_ok(&["exec", &host.container, "cat", &format!("{path}/out.txt")]);
    assert_eq!(remote, "remote\n", "the task ran on the copy there");
    assert_eq!(
        std::fs::read_to_string(dir.join("out.txt")).unwrap(),
        "local\n"
    );
    assert_eq!(task_containers(host, &id), Vec::<String>::new());
    assert_no_token_left(&dir.path);
    docker_ok(&["exec", &host.container, "rm", "-rf", &path]);
    let _ = std::fs::remove_dir_all(&tmp);
}
