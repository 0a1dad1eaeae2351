//! Egress by name (SPEC §17), end to end: the real binary, the real daemon, the test
//! worker image (busybox's wget and nc as the worker's clients) and destinations on
//! the host's loopback (127.0.0.2, 127.0.0.3) standing for hosts on the internet.
//! The task's test command does the worker's networking (a test run gets the same
//! container, proxy variables and proxy as a worker run) and leaves what it saw in
//! files; Meta is scripted.

use crate::support;

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::destination::Destination;
use support::docker::{TEST_IMAGE, containers_labelled, docker};
use support::task::assert_no_container;
use support::task_yaml::TaskYaml;
use support::{Outcome, Run, Scratch};

const PROXY: &str = "127.0.0.1 3128";

fn task_id(name: &str) -> String {
    format!("egress-{name}-{}", support::short_id())
}

/// Meta: plan one criterion, claim completion at once (so the test command runs),
/// then pass it.
fn meta_script(dir: &Scratch) -> PathBuf {
    dir.file(
        "meta.yaml",
        "- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: the test ran\n\
         - type: next_action\n  decision: {action: mark_complete, reason: check it}\n\
         - type: completion_assessment\n  summary: checked\n  details: {passed_criteria: [AC-1], remaining_risks: []}\n",
    )
}

/// A task whose test is `sh net.sh` (the script in the repository), in `image`
/// (the network stays the default).
fn net_task(id: &str, repo: &Path, script: &Path, image: &str) -> TaskYaml {
    TaskYaml::new(id, repo, "Reach the network.")
        .test("sh net.sh")
        .set("task.test.timeout_sec", 120)
        .scripted(script, 1)
        .image(image)
}

/// Runs `yaml` with `TMPDIR` at `tmp` (where the proxy's directory goes).
fn run(yaml: &TaskYaml, tmp: &Path) -> Outcome {
    Run::new(&["run", "--json"])
        .env("TMPDIR", tmp)
        .env("HOME", tmp)
        .stdin(yaml.to_string())
        .output()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn egress_log(repo: &Path, id: &str) -> Vec<Value> {
    read(&repo.join(format!(".agent-runner/logs/{id}/egress.jsonl")))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn note(repo: &Path, id: &str) -> String {
    read(&repo.join(format!(".agent-runner/task-{id}.md")))
}

fn result(out: &Outcome) -> Value {
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// A scratch directory with a repository and a short temp directory in it.
struct Setup {
    dir: Scratch,
    repo: PathBuf,
    tmp: PathBuf,
    script: PathBuf,
}

fn setup(name: &str, net_sh: &str) -> Setup {
    let dir = Scratch::new(name);
    let repo = dir.join("repo");
    let tmp = dir.join("t");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(repo.join("net.sh"), net_sh).unwrap();
    let script = meta_script(&dir);
    Setup {
        dir,
        repo,
        tmp,
        script,
    }
}

/// What is left in the temp directory (the proxy's directory must not be).
/// What a run left in its TMPDIR, but for the tools volume's lock file: that one
/// stays by design (a lock file removed races with one being taken).
fn leftovers(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !(name.starts_with("agent-runner-tools-") && name.ends_with(".lock")))
        // HOME is this directory too: the agent's pinning kept per image (SPEC §27)
        // is the user's cache, not the proxy's.
        .filter(|name| name != ".cache")
        .collect()
}

#[test]
fn allowed_plain_http_and_connect_reach_their_server_and_nothing_else_goes_out() {
    let allowed = Destination::start("allowed", "127.0.0.2");
    let denied = Destination::start("denied", "127.0.0.3");
    let (a, d) = (allowed.authority(), denied.authority());
    let s = setup(
        "egress-basic",
        &format!(
            "env | grep -i _proxy= | sort > proxy-env.out\n\
             touch /run/agent-runner/egress/planted 2>/dev/null; echo $? > ro.rc\n\
             rm -f /run/agent-runner/egress/proxy.sock /run/agent-runner/egress/bridge 2>/dev/null; echo $? >> ro.rc\n\
             cat /proc/net/dev > netdev.out\n\
             wget -q -O plain.out http://{a}/plain 2> plain.err\n\
             printf 'CONNECT {a} HTTP/1.1\\r\\nHost: {a}\\r\\n\\r\\nGET /tunnel HTTP/1.0\\r\\n\\r\\n' | nc {PROXY} > connect.out\n\
             printf 'GET http://127.0.0.2:0{port}/padded HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n' | nc {PROXY} > padded.out\n\
             wget -q -O denied.out http://{d}/secret 2> denied.err\n\
             dd if=/dev/zero of=big.bin bs=1024 count=4096 2>/dev/null\n\
             for i in 1 2 3 4 5; do wget -q -O /dev/null --post-file big.bin http://{d}/upload 2>> upload.err; done\n\
             printf 'CONNECT {d} HTTP/1.1\\r\\n\\r\\n' | nc {PROXY} > denied-connect.out\n\
             wget -Y off -q -O direct.out http://{a}/direct 2> direct.err; echo $? > direct.rc\n\
             wget -Y off -q -O gateway.out http://172.17.0.1:{port}/direct 2> gateway.err; echo $? > gateway.rc\n",
            port = allowed.port()
        ),
    );
    let id = task_id("basic");
    let yaml = net_task(&id, &s.repo, &s.script, TEST_IMAGE).set("runner.worker.allow", [&a]);
    let out = run(&yaml, &s.tmp);
    out.code(0)
        .stderr_has(&format!("egress denied: {d} (an IP address not listed in runner.worker.allow); to allow it, add `{d}` to runner.worker.allow"));
    let repo = &s.repo;

    // The run's variables point at the proxy; local addresses stay direct.
    assert_eq!(
        read(&repo.join("proxy-env.out")),
        "HTTPS_PROXY=http://127.0.0.1:3128\nHTTP_PROXY=http://127.0.0.1:3128\nNO_PROXY=localhost,127.0.0.1\n\
         http_proxy=http://127.0.0.1:3128\nhttps_proxy=http://127.0.0.1:3128\nno_proxy=localhost,127.0.0.1\n"
    );
    // The proxy's directory is read-only in the container (the requests below went
    // through the socket the worker tried to remove).
    let ro: Vec<String> = read(&repo.join("ro.rc"))
        .lines()
        .map(String::from)
        .collect();
    assert!(ro.iter().all(|rc| rc != "0"), "{ro:?}");
    // Allowed, both ways: plain HTTP in origin form, CONNECT as a tunnel.
    assert_eq!(read(&repo.join("plain.out")), "hello from allowed");
    let connect = read(&repo.join("connect.out"));
    assert!(
        connect.starts_with("HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.0 200 OK")
            && connect.ends_with("hello from allowed"),
        "{connect:?}"
    );
    let heads = allowed.heads();
    assert_eq!(heads.len(), 3, "{heads:?}");
    let plain = heads.iter().find(|h| h.starts_with("GET /plain ")).unwrap();
    assert!(
        plain.starts_with(&format!("GET /plain HTTP/1.1\r\nHost: {a}\r\n")),
        "{plain}"
    );
    assert!(plain.contains("Connection: close\r\n"), "{plain}");
    assert!(!plain.to_ascii_lowercase().contains("proxy-"), "{plain}");
    assert!(heads.iter().any(|h| h.starts_with("GET /tunnel HTTP/1.0")));
    // The Host the server gets is the URI's authority as HTTP clients write it, not
    // the client's spelling (`127.0.0.2:08080`) nor its own Host header.
    let padded = heads
        .iter()
        .find(|h| h.starts_with("GET /padded "))
        .unwrap();
    assert!(
        padded.starts_with(&format!("GET /padded HTTP/1.1\r\nHost: {a}\r\n")),
        "{padded}"
    );
    assert!(!padded.contains("evil.example"), "{padded}");
    // Denied: 403 with the way to allow it, and the destination saw nothing.
    assert!(read(&repo.join("denied.err")).contains("403"));
    // Refused while it was still sending a large body: the answer arrives anyway.
    let uploads = read(&repo.join("upload.err"));
    assert_eq!(uploads.matches("403 Forbidden").count(), 5, "{uploads}");
    let refused = read(&repo.join("denied-connect.out"));
    assert!(
        refused.starts_with("HTTP/1.1 403 Forbidden\r\n"),
        "{refused}"
    );
    assert!(
        refused.contains(&format!("To allow it, add `{d}` to runner.worker.allow.")),
        "{refused}"
    );
    assert_eq!(denied.connections(), 0, "the denied server saw nothing");
    // Without the proxy there is no way out: no interface but loopback.
    assert_ne!(read(&repo.join("direct.rc")).trim(), "0");
    assert_ne!(read(&repo.join("gateway.rc")).trim(), "0");
    let interfaces: Vec<String> = read(&repo.join("netdev.out"))
        .lines()
        .skip(2)
        .map(|l| l.split(':').next().unwrap().trim().to_string())
        .collect();
    assert_eq!(interfaces, ["lo"]);
    assert_eq!(
        allowed.connections(),
        3,
        "only the proxied connections arrived"
    );

    // Every connection is recorded; the note and the result count them.
    let log = egress_log(repo, &id);
    let line = |host: &str, allowed: bool| {
        log.iter()
            .filter(|r| r["host"] == host && r["allowed"] == allowed)
            .count()
    };
    assert_eq!(
        (line("127.0.0.2", true), line("127.0.0.3", false)),
        (3, 7),
        "{log:?}"
    );
    let plain_record = log.iter().find(|r| r["allowed"] == true).unwrap();
    assert!(
        plain_record["bytes_down"].as_u64().unwrap() > 18,
        "{plain_record}"
    );
    assert_eq!(plain_record["reason"], format!("allowed by {a}"));
    for key in ["at", "port", "bytes_up", "duration_ms"] {
        assert!(!plain_record[key].is_null(), "{key}: {plain_record}");
    }
    assert_eq!(
        result(&out)["egress"],
        serde_json::json!({"allowed": 3, "denied": 7})
    );
    // Each denied connection is an event of the run too (SPEC §19), as it happens.
    let events: Vec<Value> = read(&repo.join(format!(".agent-runner/logs/{id}/events.jsonl")))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let denied_events: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "egress_denied")
        .collect();
    assert_eq!(denied_events.len(), 7, "{events:?}");
    assert_eq!(denied_events[0]["host"], "127.0.0.3");
    assert_eq!(denied_events[0]["allow"], d.as_str());
    let note = note(repo, &id);
    for line in [
        "## 6. Egress".to_string(),
        "Allowed: 3 connection(s).".into(),
        format!("- `{a}`: 3 connection(s), "),
        "Denied: 7 connection(s).".into(),
        format!(
            "- `{d}`: 7 connection(s): an IP address not listed in runner.worker.allow; to allow it, add `{d}`"
        ),
        format!("allow: [\"{a}\", \"{d}\"]"),
    ] {
        assert!(note.contains(&line), "note lacks {line:?}:\n{note}");
    }
    assert_eq!(
        leftovers(&s.tmp),
        Vec::<String>::new(),
        "the proxy's directory is gone"
    );
    assert_no_container(&id);
    drop(s.dir);
}

#[test]
fn a_listed_name_that_resolves_to_loopback_is_refused_unless_its_address_is_listed() {
    let local = Destination::start("local", "127.0.0.1");
    let port = local.port();
    let s = setup(
        "egress-loopback",
        &format!(
            "printf 'GET http://localhost:{port}/x HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n' | nc {PROXY} > local.out\n\
             printf 'CONNECT 169.254.169.254:80 HTTP/1.1\\r\\n\\r\\n' | nc {PROXY} > metadata.out\n"
        ),
    );
    let id = task_id("loopback");
    let yaml = net_task(&id, &s.repo, &s.script, TEST_IMAGE)
        .set("runner.worker.allow", [format!("localhost:{port}")]);
    run(&yaml, &s.tmp).code(0).stderr_has(&format!(
        "egress denied: localhost:{port} (resolves to a loopback address"
    ));
    let refused = read(&s.repo.join("local.out"));
    assert!(refused.starts_with("HTTP/1.1 403 Forbidden"), "{refused}");
    assert!(
        refused.contains("resolves to a loopback address"),
        "{refused}"
    );
    assert!(read(&s.repo.join("metadata.out")).starts_with("HTTP/1.1 403 Forbidden"));
    assert_eq!(local.connections(), 0, "the loopback server saw nothing");
    let log = egress_log(&s.repo, &id);
    assert!(log.iter().all(|r| r["allowed"] == false), "{log:?}");
    assert!(
        note(&s.repo, &id).contains(&format!("to allow it, add `127.0.0.1:{port}`"))
            || note(&s.repo, &id).contains(&format!("to allow it, add `[::1]:{port}`"))
    );

    // Listing the addresses themselves lets the name through.
    let id = task_id("loopback-listed");
    let yaml = net_task(&id, &s.repo, &s.script, TEST_IMAGE).set(
        "runner.worker.allow",
        [
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ],
    );
    run(&yaml, &s.tmp).code(0);
    let reached = read(&s.repo.join("local.out"));
    assert!(reached.ends_with("hello from local"), "{reached}");
    assert_eq!(local.connections(), 1);
    assert_eq!(leftovers(&s.tmp), Vec::<String>::new());
}

/// A worker that opens connections as fast as it can, all refused (issue 28: 140,614
/// in 10 s made each log 25 MB): the logs stay small, the counts exact.
#[test]
fn a_flood_of_denied_connections_leaves_small_logs_and_exact_counts() {
    let denied = Destination::start("flooded", "127.0.0.3");
    let d = denied.authority();
    // Under gVisor each `nc` costs ~20 ms of its ptrace platform: 1,000 connections
    // still make a log of one line each 16 times the bound below.
    let per_loop = if support::task_yaml::under_gvisor() {
        250
    } else {
        750
    };
    let s = setup(
        "egress-flood",
        &format!(
            "flood() {{ i=0; while [ $i -lt {per_loop} ]; do i=$((i+1)); \
               printf 'CONNECT {d} HTTP/1.1\\r\\n\\r\\n' | nc {PROXY} > /dev/null; done; }}\n\
             flood & flood & flood & flood & wait\n"
        ),
    );
    let total = 4 * per_loop;
    let id = task_id("flood");
    let yaml = net_task(&id, &s.repo, &s.script, TEST_IMAGE)
        .set("runner.worker.allow", Vec::<String>::new());
    let out = run(&yaml, &s.tmp);
    out.code(0);
    assert_eq!(denied.connections(), 0);
    let logs = s.repo.join(format!(".agent-runner/logs/{id}"));
    // Connections refused as `too many at a time` (the 65th while 64 are open) are
    // denied too: every connection is counted once, in some line.
    let log = egress_log(&s.repo, &id);
    let counted: u64 = log
        .iter()
        .map(|r| r["connections"].as_u64().unwrap_or(1))
        .sum();
    assert_eq!(counted, total, "{log:?}");
    assert!(log.len() < 60, "{} lines", log.len());
    let summed = log
        .iter()
        .filter(|r| r["host"] == "127.0.0.3" && r["connections"].as_u64().is_some())
        .count();
    assert!(summed > 0, "{log:?}");
    let size = |name: &str| std::fs::metadata(logs.join(name)).unwrap().len();
    assert!(size("egress.jsonl") < 16 * 1024, "{}", size("egress.jsonl"));
    assert!(size("events.jsonl") < 32 * 1024, "{}", size("events.jsonl"));
    let events: Vec<Value> = read(&logs.join("events.jsonl"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let told: u64 = events
        .iter()
        .filter(|e| e["kind"] == "egress_denied")
        .map(|e| e["connections"].as_u64().unwrap_or(1))
        .sum();
    assert_eq!(told, total);
    assert_eq!(
        result(&out)["egress"],
        serde_json::json!({"allowed": 0, "denied": total})
    );
    let note = note(&s.repo, &id);
    assert!(
        note.contains(&format!("Denied: {total} connection(s).")),
        "{note}"
    );
    assert_no_container(&id);
}

#[test]
fn sixty_five_connections_at_once_are_bounded_to_sixty_four() {
    let holding = Destination::start("holding", "127.0.0.2");
    let h = holding.authority();
    let s = setup(
        "egress-bounded",
        &format!(
            "i=0; while [ $i -lt 65 ]; do i=$((i+1)); \
               (printf 'CONNECT {h} HTTP/1.1\\r\\n\\r\\n'; sleep 60) | nc {PROXY} > out.$i & done\n\
             n=0; while [ $n -lt 300 ]; do \
               answered=$(cat out.* | grep -c '^HTTP/1.1 '); [ \"$answered\" -ge 65 ] && break; sleep 0.1; n=$((n+1)); done\n\
             cat out.* | grep -c '^HTTP/1.1 200 ' > established.count\n\
             cat out.* | grep -c '^HTTP/1.1 503 ' > refused.count\n\
             for f in out.*; do printf '%s: ' $f; head -c 20 $f | tr '\\r\\n' '  '; echo; done\n"
        ),
    );
    let id = task_id("bounded");
    let yaml = net_task(&id, &s.repo, &s.script, TEST_IMAGE).set("runner.worker.allow", [&h]);
    let out = run(&yaml, &s.tmp);
    let logs = s.repo.join(format!(".agent-runner/logs/{id}"));
    assert_eq!(
        out.code,
        Some(0),
        "{}\n{}\n{}",
        out.stderr,
        std::fs::read_to_string(logs.join("test-1.log")).unwrap_or_default(),
        std::fs::read_to_string(logs.join("egress.jsonl")).unwrap_or_default()
    );
    out.stderr_has("egress denied: a connection (too many connections (at most 64 at a time))");
    assert_eq!(read(&s.repo.join("established.count")).trim(), "64");
    assert_eq!(read(&s.repo.join("refused.count")).trim(), "1");
    assert_eq!(holding.connections(), 64);
    let log = egress_log(&s.repo, &id);
    let refused: Vec<&Value> = log.iter().filter(|r| r["allowed"] == false).collect();
    assert_eq!(refused.len(), 1, "{log:?}");
    assert_eq!(
        refused[0]["reason"],
        "too many connections (at most 64 at a time)"
    );
    // After the first ten, a destination's connections are summed into lines.
    let recorded: u64 = log
        .iter()
        .map(|r| r["connections"].as_u64().unwrap_or(1))
        .sum();
    assert_eq!(
        recorded, 65,
        "every connection is recorded once the task ends"
    );
    assert!(log.len() < 30, "{} lines", log.len());
}

/// The proxy's directory under `tmp`, once there is one.
fn proxy_dir(tmp: &Path, within: Duration) -> PathBuf {
    let deadline = Instant::now() + within;
    loop {
        if let Some(dir) = std::fs::read_dir(tmp).unwrap().flatten().find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("agent-runner-egress-")
        }) {
            return dir.path();
        }
        assert!(
            Instant::now() < deadline,
            "no proxy directory in {}",
            tmp.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn after_sigkill_the_proxy_directory_goes_and_nothing_listens() {
    let s = setup("egress-kill", "true\n");
    let id = task_id("kill");
    let script = s.dir.file(
        "meta-kill.yaml",
        "- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: x\n\
         - type: next_action\n  decision: {action: run_worker, reason: go}\n  worker_call: {worker_type: codex-cli, mode: exec, prompt: \"@sleep: 120\"}\n",
    );
    let yaml = net_task(&id, &s.repo, &script, TEST_IMAGE);
    let mut running = Run::new(&["run"])
        .env("TMPDIR", &s.tmp)
        .env("HOME", &s.tmp)
        .stdin(yaml.to_string())
        .start();
    let dir = proxy_dir(&s.tmp, Duration::from_secs(60));
    let socket = dir.join("proxy.sock");
    let deadline = Instant::now() + Duration::from_secs(60);
    while containers_labelled("agent-runner.task", &id).is_empty() {
        assert!(Instant::now() < deadline, "the container did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        UnixStream::connect(&socket).is_ok(),
        "the proxy listens while the task runs"
    );
    let mode = std::fs::metadata(&dir).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o700
    );
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(running.id() as i32, libc::SIGKILL) }, 0);
    let _ = running.child().wait();
    // A child it was starting at that moment holds a copy of the listener between
    // its fork and its exec (a few milliseconds, never accepting): nothing listens
    // once that is over.
    let deadline = Instant::now() + Duration::from_secs(5);
    while UnixStream::connect(&socket).is_ok() {
        assert!(
            Instant::now() < deadline,
            "nothing listens once agent-runner is gone"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while dir.exists() {
        assert!(
            Instant::now() < deadline,
            "the watchdog did not remove {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while !containers_labelled("agent-runner.task", &id).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the container outlived agent-runner"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A static busybox on this machine (setup-docker.sh installs one).
fn host_busybox() -> PathBuf {
    ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("a static busybox (testdata/setup-docker.sh installs busybox-static)")
}

/// An image with a shell and nothing else: dash and the C library it needs, no
/// mkdir, cat, nc or wget. Tagged by content, built once.
fn image_without_tools() -> String {
    let dir = Scratch::new("egress-notools-image");
    let dash = std::fs::canonicalize("/bin/dash").expect("/bin/dash (Debian's dash)");
    let out = std::process::Command::new("ldd")
        .arg(&dash)
        .output()
        .unwrap();
    let mut dockerfile = String::from("FROM scratch\nCOPY dash /bin/sh\n");
    std::fs::copy(&dash, dir.join("dash")).unwrap();
    for lib in String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
    {
        let name = Path::new(lib)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        std::fs::copy(lib, dir.join(&name)).unwrap();
        dockerfile.push_str(&format!("COPY {name} {lib}\n"));
    }
    dir.file("Dockerfile", &dockerfile);
    let hash = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        dockerfile.hash(&mut h);
        std::fs::read(&dash).unwrap().hash(&mut h);
        h.finish()
    };
    let tag = format!("agent-runner-test-notools:{hash:016x}");
    if !docker(&["image", "inspect", &tag]).0 {
        let built = docker(&["build", "-q", "-t", &tag, dir.path.to_str().unwrap()]);
        assert!(built.0, "cannot build {tag}: {}", built.2);
    }
    tag
}

#[test]
fn an_image_with_no_shell_tools_still_gets_its_proxy() {
    let image = image_without_tools();
    let (has_mkdir, _, _) = docker(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "/bin/sh",
        &image,
        "-c",
        "mkdir /x",
    ]);
    assert!(!has_mkdir, "the image has no tools");
    let allowed = Destination::start("allowed", "127.0.0.2");
    let a = allowed.authority();
    // The test brings its own client in the repository; the image has none.
    let s = setup(
        "egress-notools",
        &format!("./busybox wget -q -O notools.out http://{a}/notools\n"),
    );
    std::fs::copy(host_busybox(), s.repo.join("busybox")).unwrap();
    let id = task_id("notools");
    let yaml = net_task(&id, &s.repo, &s.script, &image).set("runner.worker.allow", [&a]);
    run(&yaml, &s.tmp).code(0);
    assert_eq!(read(&s.repo.join("notools.out")), "hello from allowed");
    assert_eq!(allowed.connections(), 1);
    assert_no_container(&id);
}

#[test]
fn the_bridge_prepares_codex_home_with_the_host_s_auth_json() {
    let s = setup("egress-home", "true\n");
    let auth = r#"{"OPENAI_API_KEY": "sk-from-auth-json-0123456789"}"#;
    std::fs::create_dir_all(s.tmp.join(".codex")).unwrap();
    std::fs::write(s.tmp.join(".codex/auth.json"), auth).unwrap();
    let id = task_id("home");
    let script = s.dir.file(
        "meta-home.yaml",
        "- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: x\n\
         - type: next_action\n  decision: {action: run_worker, reason: go}\n  worker_call: {worker_type: codex-cli, mode: exec, prompt: \"@run: cat \\\"${CODEX_HOME:-$HOME/.codex}/auth.json\\\" > seen-auth.txt\\n@say: looked\"}\n\
         - type: completion_assessment\n  summary: ok\n  details: {passed_criteria: [AC-1], remaining_risks: []}\n",
    );
    let yaml = net_task(&id, &s.repo, &script, TEST_IMAGE);
    // HOME (where auth.json is found) is the temp directory.
    run(&yaml, &s.tmp)
        .code(0)
        .stderr_has("worker run 1/1: completed")
        .stderr_has("egress proxy started; allowed: api.openai.com");
    assert_eq!(read(&s.repo.join("seen-auth.txt")), auth);
    assert_eq!(
        leftovers(&s.tmp),
        [".codex"],
        "only auth.json's directory is left in the temp directory"
    );
    assert_no_container(&id);
}
