//! SPEC §21 end to end: the preflight before the first paid call, `task.setup`, the
//! cache volumes of `runner.worker.caches` and `agent-runner cache ls|rm`, and a real
//! project (a Python package with a bug, pytest in the project's own image without
//! git) driven to COMPLETE. Meta is the fake OpenAI server on 127.0.0.1, whose
//! request log says which paid calls were made; the worker is the fake codex.

use crate::support;

use std::path::Path;

use support::Scratch;
use support::destination::Destination;
use support::docker::{TEST_IMAGE, docker, docker_ok, image_with_foreign_shell, image_with_python};
use support::fake_openai::FakeOpenAi;
use support::prerequisite::needs;
use support::task::{
    assert_no_container, assess, mark_complete, note, plan, run_worker, runner, v1_task,
};
use support::task_yaml::TaskYaml;
use support::{Outcome, Run};

fn task_id(name: &str) -> String {
    format!("env-{name}-{}", support::short_id())
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `type` of each request Meta got, in order.
fn asked(server: &FakeOpenAi) -> Vec<String> {
    server
        .received()
        .iter()
        .map(|r| {
            let request: serde_norway::Value = serde_norway::from_str(&r.message(1)).unwrap();
            request["type"].as_str().unwrap_or("?").to_string()
        })
        .collect()
}

/// Runs `yaml` with `TMPDIR` and `HOME` at `tmp` (the egress proxy's directory is
/// made there) and the variables `env`.
fn run_in(yaml: &TaskYaml, tmp: &Path, env: &[(&str, &str)]) -> Outcome {
    let mut run = runner(yaml).env("TMPDIR", tmp).env("HOME", tmp);
    for (name, value) in env {
        run = run.env(name, value);
    }
    run.output()
}

/// A directory for `run_in` (not in the repository: it may not hold the HOME of
/// whoever runs the task).
fn tmp_dir() -> Scratch {
    Scratch::new("env-t")
}

#[test]
fn a_missing_test_program_fails_before_any_paid_call_and_says_how_to_fix_it() {
    let dir = Scratch::new("env-preflight");
    let id = task_id("preflight");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"]), run_worker("@say: hi")]);
    let out = runner(v1_task(&id, &dir.path, &server).test("pytest -q tests/")).output();
    let expected = format!(
        "test command: `pytest` not found in image {TEST_IMAGE} (exit 127); add it to the image or to task.setup"
    );
    out.code(1).stderr_has(&expected);
    assert_eq!(asked(&server), Vec::<String>::new(), "no paid call");
    let note = note(&dir.path, &id);
    assert!(note.contains(&expected.replace('`', "\\`")), "{note}");
    assert!(
        !dir.path
            .join(format!(".agent-runner/logs/{id}/run-1.log"))
            .exists()
    );
    assert_no_container(&id);
}

/// The sandbox's main process looks the test's program up as it starts (saving the
/// probe's exec) with the image's PATH; a task that sets its own PATH has the shell
/// asked with it, so that a program only the image's PATH reaches is missing.
#[test]
fn a_test_program_out_of_the_tasks_own_path_is_missing_though_the_images_has_it() {
    let dir = Scratch::new("env-path");
    let id = task_id("path");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"]), run_worker("@say: hi")]);
    // The test image's fake codex is in /usr/local/bin, on the image's PATH (`sh`
    // would not do: busybox's shell finds its applets on any PATH).
    let yaml = v1_task(&id, &dir.path, &server)
        .test("codex --version")
        .set("runner.worker.env.PATH", "/nowhere");
    let out = runner(yaml).output();
    out.code(1).stderr_has(&format!(
        "test command: `codex` not found in image {TEST_IMAGE} (exit 127)"
    ));
    assert_eq!(asked(&server), Vec::<String>::new(), "no paid call");
    assert_no_container(&id);
}

/// The main process's lookup trusts the image's `/bin/sh` only when it can run
/// here: one of another architecture is asked, and its failure ends the task before
/// any paid call, saying why.
#[test]
fn an_image_whose_shell_cannot_run_here_fails_before_any_paid_call() {
    let image = image_with_foreign_shell();
    let dir = Scratch::new("env-foreign");
    let id = task_id("foreign");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"]), run_worker("@say: hi")]);
    let out = runner(v1_task(&id, &dir.path, &server).image(&image).test("true")).output();
    out.code(1).stderr_has("exec /bin/sh: exec format error");
    assert_eq!(asked(&server), Vec::<String>::new(), "no paid call");
    assert_no_container(&id);
}

/// A task's variable that changes how the shell's loader runs (here a library
/// path holding a broken C library) keeps the lookup in the shell, which then
/// cannot start: the task ends before any paid call.
#[test]
fn a_loader_variable_of_the_task_keeps_the_lookup_in_the_images_shell() {
    needs!(SandboxImage);
    let image = image_with_python();
    let dir = Scratch::new("env-loader");
    dir.file("broken/libc.so.6", "not a library\n");
    let id = task_id("loader");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"]), run_worker("@say: hi")]);
    let yaml = v1_task(&id, &dir.path, &server)
        .image(&image)
        .test("pytest -q")
        .set(
            "runner.worker.env.LD_LIBRARY_PATH",
            "/workspace/project/broken",
        );
    let out = runner(yaml).output();
    out.code(1)
        .stderr_has("/bin/sh: error while loading shared libraries");
    assert_eq!(asked(&server), Vec::<String>::new(), "no paid call");
    assert_no_container(&id);
}

#[test]
fn a_test_that_exits_127_not_found_later_is_a_setup_error_with_no_further_paid_call() {
    let dir = Scratch::new("env-127");
    let id = task_id("127");
    // `sh` is there (the preflight passes); what it runs is not.
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo ok > out.txt\n@say: done"),
        assess(&["AC-1"], "should not be asked"),
    ]);
    let out =
        runner(v1_task(&id, &dir.path, &server).test("sh -c 'no-such-tool --check'")).output();
    out.code(1)
        .stderr_has("test command: sh: no-such-tool: not found (exit 127)")
        .stderr_has("a setup error, not a failing test");
    assert_eq!(asked(&server), ["plan_task", "next_action"]);
    assert_no_container(&id);
}

#[test]
fn setup_runs_once_across_loops_and_only_setup_sees_its_variables() {
    let dir = Scratch::new("env-setup");
    let id = task_id("setup");
    let token = format!("setup-token-{}", support::random_hex(16));
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: env > worker-env-1.txt\n@say: one"),
        assess(&[], "not yet"),
        run_worker("@run: env > worker-env-2.txt; echo ok > out.txt\n@say: two"),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server)
        .test("env > test-env.txt; grep -qx ok out.txt")
        .set(
            "task.setup.command",
            "echo ran >> setup-runs.txt; [ -n \"$SETUP_TOKEN\" ] && echo seen > setup-saw-token.txt; echo \"token $SETUP_TOKEN\"",
        )
        .set("task.setup.env.SETUP_TOKEN", "env:MY_SETUP_TOKEN");
    let out = run_in(&yaml, &tmp_dir().path, &[("MY_SETUP_TOKEN", &token)]);
    out.code(0).stderr_has("setup: passed in");
    let repo = &dir.path;
    assert_eq!(
        read(&repo.join("setup-runs.txt")),
        "ran\n",
        "once, across two loops"
    );
    assert_eq!(read(&repo.join("setup-saw-token.txt")), "seen\n");
    for file in ["worker-env-1.txt", "worker-env-2.txt", "test-env.txt"] {
        let env = read(&repo.join(file));
        assert!(
            !env.contains("SETUP_TOKEN") && !env.contains(&token),
            "{file}: {env}"
        );
    }
    let note = note(repo, &id);
    assert!(
        note.contains("Setup (once in this sandbox, before the first paid call)"),
        "{note}"
    );
    assert!(note.contains("- Summary: passed in"), "{note}");
    let setup_log = read(&repo.join(format!(".agent-runner/logs/{id}/setup.log")));
    assert!(setup_log.contains("token "), "{setup_log}");
    for (what, text) in [
        ("note", &note),
        ("setup.log", &setup_log),
        ("stderr", &out.stderr),
    ] {
        assert!(!text.contains(&token), "the setup secret is in the {what}");
    }
    assert_no_container(&id);
}

#[test]
fn a_failing_setup_fails_the_task_with_its_tail_and_no_paid_call() {
    let dir = Scratch::new("env-setup-fails");
    let id = task_id("setup-fails");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"])]);
    let yaml = v1_task(&id, &dir.path, &server).test("true").set(
        "task.setup.command",
        "echo fetching; echo 'E: package python3-foo has no candidate' >&2; exit 3",
    );
    let out = run_in(&yaml, &tmp_dir().path, &[]);
    // stdout and stderr are two streams: their lines may arrive in either order.
    let tail = ["fetching", "E: package python3-foo has no candidate"];
    let expected = [
        format!("setup failed (exit 3): {} / {}", tail[0], tail[1]),
        format!("setup failed (exit 3): {} / {}", tail[1], tail[0]),
    ];
    let out = out.code(1);
    assert!(
        expected.iter().any(|e| out.stderr.contains(e.as_str())),
        "{}",
        out.stderr
    );
    assert_eq!(asked(&server), Vec::<String>::new(), "no paid call");
    let note = note(&dir.path, &id);
    assert!(
        expected.iter().any(|e| note.contains(e.as_str())) && note.contains("- Summary: failed in"),
        "{note}"
    );
    assert_no_container(&id);
}

#[test]
fn setups_own_hosts_are_reachable_by_setup_and_not_by_the_worker() {
    let site = Destination::start("packages", "127.0.0.2");
    let dir = Scratch::new("env-setup-allow");
    let id = task_id("setup-allow");
    let url = format!("http://{}/pkg", site.authority());
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(&format!(
            "@run: wget -q -O worker-got.txt {url} 2> worker-err.txt; echo $? > worker-rc.txt\n@say: tried"
        )),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server)
        .set("runner.worker.network", "allowlist")
        .set(
            "task.setup.command",
            format!("wget -q -O setup-got.txt {url}"),
        )
        .set("task.setup.allow", [site.authority()])
        .test(
            format!("wget -q -O test-got.txt {url} 2> test-err.txt; echo $? > test-rc.txt")
                .as_str(),
        );
    let out = run_in(&yaml, &tmp_dir().path, &[]);
    out.code(0);
    let repo = &dir.path;
    assert_eq!(read(&repo.join("setup-got.txt")), "hello from packages");
    assert_ne!(read(&repo.join("worker-rc.txt")).trim(), "0");
    assert!(read(&repo.join("worker-err.txt")).contains("403"));
    assert_ne!(read(&repo.join("test-rc.txt")).trim(), "0");
    assert_eq!(site.heads().len(), 1, "only setup's request arrived");
    let note = note(repo, &id);
    assert!(note.contains("- Egress: 1 allowed, 0 denied"), "{note}");
    assert_no_container(&id);
}

/// A denial during setup names setup's own list (`task.setup.allow`), not the
/// worker's; the agent's background requests (codex's update check and feature
/// flags) are told apart from what the task needed: no warning, and not in the
/// note's suggested `allow:` line, which has only what the worker was denied.
#[test]
fn setup_s_denials_name_its_list_and_the_agent_s_background_requests_are_no_gap() {
    let missing = Destination::start("missing", "127.0.0.3");
    let dir = Scratch::new("env-setup-denied");
    let id = task_id("setup-denied");
    let setup_url = format!("http://{}/pkg", missing.authority());
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(
            "@run: wget -q -O /dev/null http://ab.chatgpt.com/flags 2>/dev/null; wget -q -O /dev/null http://needed.example/data 2>/dev/null; true\n@say: tried",
        ),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server)
        .set("runner.worker.network", "allowlist")
        .set(
            "task.setup.command",
            format!("wget -q -O /dev/null {setup_url} 2> setup-err.txt; true"),
        )
        .set("task.setup.allow", ["pypi.org"])
        .test("true");
    let out = run_in(&yaml, &tmp_dir().path, &[]);
    out.code(0);
    let m = missing.authority();
    out.stderr_has(&format!(
        "egress denied: {m} (an IP address not listed in task.setup.allow or runner.worker.allow (during setup)); to allow it, add `{m}` to task.setup.allow"
    ))
    .stderr_has("to allow it, add `needed.example` to runner.worker.allow");
    assert!(
        !out.stderr.contains("add `ab.chatgpt.com`"),
        "no fix suggested for a background request: {}",
        out.stderr
    );
    assert!(read(&dir.path.join("setup-err.txt")).contains("403"));
    let note = note(&dir.path, &id);
    assert!(
        note.contains("`ab.chatgpt.com:80`: 1 connection(s): not in runner.worker.allow; codex-cli's own background request"),
        "{note}"
    );
    let worker_line = note
        .split("set in the task's runner.worker:")
        .nth(1)
        .and_then(|rest| rest.lines().find(|l| l.starts_with("allow: [")))
        .unwrap_or_else(|| panic!("no suggested allow line: {note}"));
    assert!(worker_line.contains("\"needed.example\""), "{worker_line}");
    assert!(!worker_line.contains("chatgpt"), "{worker_line}");
    assert!(
        !worker_line.contains(&m),
        "setup's host is not the worker's: {worker_line}"
    );
    let setup_line = note
        .split("set in the task's task.setup:")
        .nth(1)
        .and_then(|rest| rest.lines().find(|l| l.starts_with("allow: [")))
        .unwrap_or_else(|| panic!("no suggested setup allow line: {note}"));
    assert_eq!(setup_line, format!("allow: [\"pypi.org\", \"{m}\"]"));
    assert_eq!(missing.connections(), 0);
    assert_no_container(&id);
}

/// A task in `repo` whose setup prints what the cache at /cache/t holds and then
/// leaves its mark there.
fn cache_task(id: &str, repo: &Path, server: &FakeOpenAi, mark: &str) -> TaskYaml {
    v1_task(id, repo, server)
        .test("true")
        .set("runner.worker.caches", ["/cache/t"])
        .set(
            "task.setup.command",
            format!("cat /cache/t/marks > seen.txt 2>/dev/null || : > seen.txt; echo {mark} >> /cache/t/marks"),
        )
}

fn quick_meta() -> FakeOpenAi {
    FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        mark_complete(),
        assess(&["AC-1"], "done"),
    ])
}

/// Removes the cache volumes of the repositories given, whatever happened.
struct Volumes(Vec<std::path::PathBuf>);

impl Drop for Volumes {
    fn drop(&mut self) {
        for repo in &self.0 {
            let _ = Run::new(&["cache", "rm", "--repo", repo.to_str().unwrap()]).output();
        }
    }
}

/// The base64 of `bytes`, as the host's `base64 -w0` prints it.
fn base64(bytes: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("base64")
        .arg("-w0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
}

/// Issue 41 (attack round 5, finding 6): a setup secret's base64 reached
/// `setup.log` and the note; masking knew the exact value only. Its base64 (alone
/// and inside a longer text), hex and percent-encoding are masked now.
#[test]
fn a_setup_secrets_base64_and_hex_reach_neither_setup_log_nor_the_note() {
    let dir = Scratch::new("env-setup-b64");
    let id = task_id("setup-b64");
    let token = format!("setup-token-{}", support::random_hex(16));
    let server = quick_meta();
    let yaml = v1_task(&id, &dir.path, &server)
        .test("true")
        .set(
            "task.setup.command",
            "printf %s \"$SETUP_TOKEN\" | base64; printf 'export T=%s\\n' \"$SETUP_TOKEN\" | base64; printf %s \"$SETUP_TOKEN\" | od -An -tx1 | tr -d ' \\n'; echo",
        )
        .set("task.setup.env.SETUP_TOKEN", "env:MY_SETUP_TOKEN");
    let out = run_in(&yaml, &tmp_dir().path, &[("MY_SETUP_TOKEN", &token)]);
    out.code(0);
    let alone = base64(token.as_bytes());
    let inside = base64(format!("export T={token}\n").as_bytes());
    let hex: String = token.bytes().map(|b| format!("{b:02x}")).collect();
    // What only the secret's bits make: inside, past the 12 characters of
    // `export T=` and short of its end.
    let spellings = [&alone[..24], &inside[14..36], &hex[..]];
    let setup_log = read(&dir.path.join(format!(".agent-runner/logs/{id}/setup.log")));
    let note = note(&dir.path, &id);
    for (what, text) in [
        ("setup.log", &setup_log),
        ("note", &note),
        ("stderr", &out.stderr),
    ] {
        for spelling in spellings {
            assert!(
                !text.contains(spelling),
                "{spelling} (the secret's) is in the {what}: {text}"
            );
        }
    }
    assert!(setup_log.contains("***"), "{setup_log}");
    assert_no_container(&id);
}

/// Issue 41 (attack round 5, finding 2): a repository's worker planted a script in
/// a cache; an unrelated repository cloned to the same place got that cache (named
/// from the path) and its setup ran the script, handing setup's secret to the
/// worker. A repository in the same place has caches of its own now, and a setup
/// with secrets runs with no cache mounted, even its own repository's.
#[test]
fn a_script_a_worker_planted_in_a_cache_never_runs_with_setup_secrets() {
    let place = Scratch::new("env-cache-plant");
    let _cleanup = Volumes(vec![place.path.clone()]);
    let token = format!("setup-token-{}", support::random_hex(16));
    // The script does what the attack's did: setup's secret where the worker reads.
    let plant = "@run: mkdir -p /cache/t && printf '%s\\n' 'echo \"leak $SETUP_TOKEN\" > /workspace/project/leak.txt' > /cache/t/setup.sh\n@say: planted";
    let run_planted =
        "test -f /cache/t/setup.sh && echo present > present.txt && sh /cache/t/setup.sh; true";
    let task = |name: &str, worker: &str, secret: bool| {
        let id = task_id(name);
        let server = FakeOpenAi::start(vec![
            plan(&["AC-1"]),
            run_worker(worker),
            assess(&["AC-1"], "done"),
        ]);
        let mut yaml = v1_task(&id, &place.path, &server)
            .test("true")
            .set("runner.worker.caches", ["/cache/t"])
            .set("task.setup.command", run_planted);
        if secret {
            yaml = yaml.set("task.setup.env.SETUP_TOKEN", "env:MY_SETUP_TOKEN");
        }
        let out = run_in(&yaml, &tmp_dir().path, &[("MY_SETUP_TOKEN", &token)]);
        out.code(0);
        assert_no_container(&id);
        let present = place.join("present.txt").exists();
        let leaked = std::fs::read_to_string(place.join("leak.txt")).unwrap_or_default();
        let _ = std::fs::remove_file(place.join("present.txt"));
        let _ = std::fs::remove_file(place.join("leak.txt"));
        (out, present, leaked)
    };
    // Repository A: its worker plants the script.
    task("plant", plant, false);
    // A's next task without setup secrets still has its cache (and the script).
    let (_, present, leaked) = task("a-plain", "@say: nothing", false);
    assert!(present, "the cache is shared by A's tasks");
    assert_eq!(leaked, "leak \n");
    // A's task whose setup has a secret: no cache is mounted, the script is not run.
    let (out, present, leaked) = task("a-secret", "@run: cat leak.txt; true\n@say: read", true);
    assert!(
        !present && !leaked.contains(&token),
        "A's setup ran the planted script: {leaked:?}"
    );
    out.stderr_has(
        "runner.worker.caches are not mounted: task.setup.env gives setup secrets (SETUP_TOKEN)",
    );
    // Repository B, in A's place: none of A's caches.
    std::fs::remove_dir_all(&place.path).unwrap();
    std::fs::create_dir_all(&place.path).unwrap();
    let (_, present, _) = task("b-plain", "@say: nothing", false);
    assert!(!present, "B, cloned where A was, got A's cache");
    let (_, present, leaked) = task("b-secret", "@run: cat leak.txt; true\n@say: read", true);
    assert!(
        !present && !leaked.contains(&token),
        "B's setup ran A's script: {leaked:?}"
    );
}

/// Issue 41 (attack round 5, finding 2): a cache volume was mounted whatever its
/// labels said. One of that name made by someone else is refused now.
#[test]
fn a_cache_volume_whose_labels_say_otherwise_is_refused() {
    let repo = Scratch::new("env-cache-labels");
    let _cleanup = Volumes(vec![repo.path.clone()]);
    let server = quick_meta();
    runner(cache_task(&task_id("labels1"), &repo.path, &server, "x"))
        .output()
        .code(0);
    let listed = Run::new(&["cache", "ls"]).output();
    let name = listed
        .stdout
        .lines()
        .find(|l| l.contains(&format!("\t{}\t", repo.path.display())))
        .and_then(|l| l.split('\t').next())
        .unwrap_or_else(|| panic!("no cache: {}", listed.stdout))
        .to_string();
    docker_ok(&["volume", "rm", &name]);
    docker_ok(&[
        "volume",
        "create",
        "--label",
        "agent-runner.cache.repo=/elsewhere",
        &name,
    ]);
    let id = task_id("labels2");
    let server = quick_meta();
    let out = runner(cache_task(&id, &repo.path, &server, "y")).output();
    docker_ok(&["volume", "rm", &name]);
    out.code(1).stderr_has(&format!(
        "the volume {name} on the sandbox's host is not the cache of /cache/t of the repository {}",
        repo.path.display()
    ));
    assert_eq!(server.received().len(), 0, "no paid call");
    assert_no_container(&id);
}

#[test]
fn a_cache_is_shared_by_the_tasks_of_one_repository_and_no_other() {
    let (a, b) = (Scratch::new("env-cache-a"), Scratch::new("env-cache-b"));
    let _cleanup = Volumes(vec![a.path.clone(), b.path.clone()]);
    for (n, (repo, mark)) in [(&a, "a1"), (&a, "a2"), (&b, "b1")].into_iter().enumerate() {
        let id = task_id(&format!("cache{n}"));
        let server = quick_meta();
        runner(cache_task(&id, &repo.path, &server, mark))
            .output()
            .code(0);
        let seen = read(&repo.path.join("seen.txt"));
        let expected = match mark {
            "a1" | "b1" => "",
            _ => "a1\n",
        };
        assert_eq!(seen, expected, "task {mark} saw {seen:?}");
        assert_no_container(&id);
    }
    // `cache ls`: one volume per repository, labelled with it and the path.
    let listed = Run::new(&["cache", "ls"]).output();
    listed.code(0);
    for repo in [&a, &b] {
        let canonical = std::fs::canonicalize(&repo.path).unwrap();
        let line = listed
            .stdout
            .lines()
            .find(|l| l.contains(&format!("\t{}\t", canonical.display())))
            .unwrap_or_else(|| panic!("no cache of {}: {}", canonical.display(), listed.stdout));
        let name = line.split('\t').next().unwrap();
        assert!(
            name.starts_with("agent-runner-cache-") && line.ends_with("\t/cache/t"),
            "{line}"
        );
        let labels = docker_ok(&["volume", "inspect", "--format", "{{json .Labels}}", name]);
        assert!(labels.contains("agent-runner.cache.repo"), "{labels}");
    }
    // `cache rm`: by name; a volume that is not ours is refused.
    let (ok, _, _) = docker(&["volume", "create", "not-a-cache-of-agent-runner"]);
    assert!(ok);
    let refused = Run::new(&["cache", "rm", "not-a-cache-of-agent-runner"]).output();
    refused
        .code(1)
        .stderr_has("is not a cache volume of agent-runner's");
    assert!(
        docker(&["volume", "inspect", "not-a-cache-of-agent-runner"]).0,
        "left alone"
    );
    docker_ok(&["volume", "rm", "not-a-cache-of-agent-runner"]);
    Run::new(&["cache", "rm", "--repo", a.path.to_str().unwrap()])
        .output()
        .code(0);
    let after = Run::new(&["cache", "ls"]).output();
    let canonical = std::fs::canonicalize(&a.path).unwrap();
    assert!(
        !after
            .stdout
            .contains(&format!("\t{}\t", canonical.display())),
        "{}",
        after.stdout
    );
}

#[test]
fn doctor_names_a_missing_test_program() {
    let dir = Scratch::new("env-doctor");
    let server = quick_meta();
    let yaml = v1_task("doctor-program", &dir.path, &server).test("pytest -q");
    let out = Run::new(&["doctor"])
        .stdin(yaml.to_string())
        .env("OPENAI_API_KEY", "sk-x")
        .output();
    let line = out
        .stdout
        .lines()
        .chain(out.stderr.lines())
        .find(|l| l.contains("test command's program"))
        .unwrap_or_else(|| {
            panic!(
                "no check of the test's program:\n{}\n{}",
                out.stdout, out.stderr
            )
        })
        .to_string();
    assert!(
        line.contains(&format!("`pytest` not found in image {TEST_IMAGE}")),
        "{line}"
    );
    assert_ne!(out.code, Some(0));
    // With the program there, the same check passes.
    let yaml = v1_task("doctor-program", &dir.path, &server).test("sh -c true");
    let out = Run::new(&["doctor"])
        .stdin(yaml.to_string())
        .env("OPENAI_API_KEY", "sk-x")
        .output();
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("`sh` is on the image's PATH"), "{text}");
}

/// A small Python package with a bug, its tests, and the fix the fake worker makes.
const PACKAGE: &[(&str, &str)] = &[
    // pytest puts the directory of a conftest.py on sys.path: `slug` imports.
    ("conftest.py", ""),
    ("slug/__init__.py", "from .core import slugify\n"),
    (
        "slug/core.py",
        "import re\n\n\ndef slugify(text):\n    text = text.strip().lower()\n    return re.sub(r\"[^a-z0-9]+\", \"_\", text).strip(\"-\")\n",
    ),
    (
        "tests/test_slug.py",
        "from slug import slugify\n\n\ndef test_words():\n    assert slugify(\"Hello World\") == \"hello-world\"\n\n\ndef test_edges():\n    assert slugify(\"  Ünïcode, too! \") == \"n-code-too\"\n",
    ),
];

#[test]
#[ignore = "needs sandbox-image"]
fn a_python_project_in_its_own_image_without_git_is_driven_to_complete() {
    needs!(SandboxImage);
    let image = image_with_python();
    let dir = Scratch::new("env-python");
    for (path, text) in PACKAGE {
        dir.file(path, text);
    }
    let id = task_id("python");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(
            "@run: sed -i 's/\"_\", text/\"-\", text/' slug/core.py\n@say: separators are hyphens now",
        ),
        assess(&["AC-1"], "slugify joins words with hyphens; pytest passes"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server)
        .image(&image)
        .set(
            "task.prd.text",
            "slugify must join words with hyphens (see tests/).",
        )
        .test("pytest -q -p no:cacheprovider");
    let out = runner(yaml)
        .arg("--json")
        .env("RUST_LOG", "agent_runner=debug")
        .output();
    out.code(0)
        .stderr_has("`pytest` found by the sandbox's main process as it started");
    assert!(read(&dir.path.join("slug/core.py")).contains("\"-\", text"));
    let note = note(&dir.path, &id);
    assert!(note.contains("2 passed"), "{note}");
    assert_eq!(
        asked(&server),
        ["plan_task", "next_action", "completion_assessment"]
    );
    assert!(
        !docker(&[
            "run",
            "--rm",
            "--entrypoint",
            "/bin/sh",
            &image,
            "-c",
            "command -v git"
        ])
        .0,
        "the image has no git"
    );
    assert_no_container(&id);
}
