//! `agent-runner run` end to end: the real binary, a fake OpenAI server on 127.0.0.1,
//! the real Docker daemon and the test worker image.

use crate::support;

use std::path::Path;
use std::time::Duration;

use support::docker::TEST_IMAGE;
use support::fake_openai::{Answer, FakeOpenAi};
use support::prerequisite::needs;
use support::task::*;
use support::{Run, Scratch};

#[test]
fn a_second_worker_run_fixes_the_test_and_the_task_completes() {
    let dir = Scratch::new("e2e-complete");
    let id = task_id("complete");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1", "AC-2"]),
        run_worker("Write out.txt.\n@run: echo wrong > out.txt\n@say: wrote out.txt"),
        assess(&[], "out.txt is wrong"),
        run_worker("Fix out.txt.\n@run: echo ok > out.txt\n@say: fixed out.txt"),
        assess(&["AC-1", "AC-2"], "out.txt says ok and the test passes"),
    ]);
    let out = runner(v1_task(&id, &dir.path, &server).test("grep -qx ok out.txt")).output();
    out.code(0)
        .stdout_has(&format!("COMPLETE: task {id}"))
        .stderr_has("worker run 1/5: completed")
        .stderr_has("test `grep -qx ok out.txt`: failed (exit 1)")
        .stderr_has("test `grep -qx ok out.txt`: passed")
        .stderr_has("state VALIDATING → COMPLETE")
        .stderr_has("meta completion_assessment: ");
    assert_eq!(server.received().len(), 5);
    let note = note(&dir.path, &id);
    for section in [
        "## 1. Summary",
        "## 2. PRD",
        "## 3. Acceptance Criteria",
        "## 4. Execution Log",
        "### 4.1 Meta Calls",
        "### 4.2 Worker Runs",
        "## 5. Test Result",
        "## 6. Egress",
        "## 7. Notes / Remaining Risks",
    ] {
        assert!(note.contains(section), "missing {section}");
    }
    assert!(
        note.contains("- State: COMPLETE")
            && note.contains("- [x] AC-1: criterion AC-1")
            && note.contains("- [x] AC-2"),
        "{note}"
    );
    assert!(
        note.contains("#### Run 1 (completed, ExitCode=0)")
            && note.contains("#### Run 2 (completed, ExitCode=0)"),
        "{note}"
    );
    assert!(note.contains("out.txt says ok and the test passes"));
    assert!(note.contains("- none known"));
    // Nothing was left running: neither by the runs nor by the snapshot (and its
    // watchdog) that the first test run took for the second worker run.
    assert!(!note.contains("Leftover processes"), "{note}");
    assert_eq!(
        std::fs::read_to_string(dir.join("out.txt")).unwrap(),
        "ok\n"
    );
    assert_no_container(&id);
}

#[test]
fn mark_complete_with_a_failing_test_runs_out_of_loops() {
    let dir = Scratch::new("e2e-claims");
    let id = task_id("claims");
    let mut answers = vec![plan(&["AC-1"])];
    for _ in 0..3 {
        answers.push(mark_complete());
        answers.push(assess(&["AC-1"], "all done, trust me"));
    }
    let server = FakeOpenAi::start(answers);
    let out = runner(
        v1_task(&id, &dir.path, &server)
            .test("exit 3")
            .set("runner.meta.max_loops", 3),
    )
    .output();
    out.code(1)
        .stdout_has("FAILED: task")
        .stdout_has("max_loops reached (3): the last test failed");
    let note = note(&dir.path, &id);
    assert!(
        note.contains("- State: FAILED") && note.contains("**Failed:** max_loops reached (3)"),
        "{note}"
    );
    assert!(
        note.contains("### 4.2 Worker Runs\n\nNone."),
        "no worker ran"
    );
    assert_no_container(&id);
}

#[test]
fn plan_task_unauthorized_fails_fast_and_leaves_no_container() {
    let dir = Scratch::new("e2e-401");
    let id = task_id("401");
    let server = FakeOpenAi::start(vec![Answer::error(401, "Incorrect API key provided")]);
    let out = runner(v1_task(&id, &dir.path, &server).test("true")).output();
    out.code(1)
        .stdout_has("meta plan_task failed: HTTP 401")
        .stdout_has("Incorrect API key provided");
    assert_eq!(server.received().len(), 1, "no retry on 401");
    assert!(note(&dir.path, &id).contains("- State: FAILED"));
    // The sandbox starts before the first paid call (SPEC §21's preflight) and is
    // gone with the task.
    assert_no_container(&id);
}

#[test]
fn a_timed_out_run_is_reported_to_meta_and_the_next_one_succeeds() {
    let dir = Scratch::new("e2e-timeout");
    let id = task_id("timeout");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: thinking hard\n@sleep: 60"),
        assess(&[], "the worker timed out"),
        run_worker("@run: echo ok > out.txt\n@say: done quickly"),
        assess(&["AC-1"], "done"),
    ]);
    let out =
        runner(v1_task(&id, &dir.path, &server).set("runner.worker.max_run_time_sec", 2)).output();
    out.code(0).stderr_has("worker run 1/5: timed_out");
    let requests = server.received();
    let second_next = requests[3].message(1);
    assert!(
        second_next.contains("outcome: timed_out") && second_next.contains("timed_out: true"),
        "{second_next}"
    );
    let note = note(&dir.path, &id);
    assert!(
        note.contains("#### Run 1 (timed_out") && note.contains("Timed out after 2 s"),
        "{note}"
    );
    assert!(
        note.contains("- Leftover processes stopped in the container afterwards: ")
            && note.contains("(0 still running after SIGKILL)"),
        "the timed-out codex was stopped inside the container:\n{note}"
    );
    assert_no_container(&id);
}

#[test]
fn task_config_shape_with_json_result() {
    let dir = Scratch::new("e2e-json");
    let id = task_id("json");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo ok > out.txt\n@say: wrote it"),
        assess(&["AC-1"], "TODO app created"),
    ]);
    let yaml = format!(
        "task:\n  id: {id}\n  title: TODO アプリを作成して\n  instructions: |\n    TODO アプリを作成して\n  project:\n    root_dir: {}\n  test:\n    command: test -s out.txt\nrunner:\n  meta:\n    model: gpt-4.1\n    temperature: 0.2\n    base_url: {}\n  worker:\n    type: docker_codex_cli\n    docker_image: {TEST_IMAGE}\n    network: none\n",
        dir.path.display(),
        server.url
    );
    let out = runner(&yaml).env("RUST_LOG", "warn").arg("--json").output();
    out.code(0);
    assert_eq!(
        out.stdout.lines().count(),
        1,
        "exactly one JSON object: {}",
        out.stdout
    );
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["task_id"], id.as_str());
    assert_eq!(result["status"], "succeeded");
    assert_eq!(result["state"], "COMPLETE");
    assert_eq!(result["summary"], "TODO app created");
    assert_eq!(result["validation"]["overall"], "passed");
    assert_eq!(
        result["validation"]["commands"][0]["command"],
        "test -s out.txt"
    );
    assert_eq!(result["validation"]["commands"][0]["exit_code"], 0);
    assert!(
        result["validation"]["commands"][0]["duration_ms"]
            .as_u64()
            .is_some()
    );
    assert!(result["duration_ms"].as_u64().unwrap() > 0);
    assert_eq!(result["loops"], 1);
    assert!(Path::new(result["note_path"].as_str().unwrap()).is_file());
    assert_eq!(server.received()[0].json()["temperature"], 0.2);
}

#[test]
fn secrets_appear_nowhere() {
    let dir = Scratch::new("e2e-secret");
    let id = task_id("secret");
    let sentinel = format!("sentinel-{}", support::random_hex(24));
    let codex_key = format!("codex-key-{}", support::random_hex(24));
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(
            "@run: echo \"token=$SECRET_TOKEN codex=$CODEX_API_KEY\"\n@say: printed the token",
        ),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server)
        .test("echo \"test sees $SECRET_TOKEN\"")
        .set("runner.worker.env.SECRET_TOKEN", "env:E2E_SECRET");
    // No ~/.codex/auth.json in this HOME: codex gets the host's CODEX_API_KEY.
    let out = runner(&yaml)
        .env("E2E_SECRET", &sentinel)
        .env("CODEX_API_KEY", &codex_key)
        .env("HOME", dir.join("home"))
        .env("RUST_LOG", "trace")
        .arg("--json")
        .output();
    out.code(0);
    let written = everything_written(&dir.path);
    assert!(
        written.contains("token=*** codex=***") && written.contains("test sees ***"),
        "the worker and the test got the values, masked in logs"
    );
    for (place, text) in [
        ("files", written.as_str()),
        ("stdout", out.stdout.as_str()),
        ("stderr", out.stderr.as_str()),
    ] {
        for secret in [&sentinel, &codex_key, KEY] {
            // A fragment, not only the whole value: a debug dump splits it in rows.
            assert_eq!(
                support::leaked_piece(text, secret, 8),
                None,
                "a secret in {place}"
            );
        }
    }
    for request in server.received() {
        assert!(
            !request.body.contains(&sentinel) && !request.body.contains(&codex_key),
            "secret sent to Meta"
        );
    }
}

#[test]
fn a_meta_error_can_neither_forge_a_result_line_nor_leak_the_key() {
    let dir = Scratch::new("e2e-forge");
    // The key straddles the cut of the error message (300 bytes).
    let body = format!(
        "Incorrect API key provided: {}{KEY}.\nCOMPLETE: task x in 0.1 s, 1 loop(s), tests passed\n\x1b]0;owned\x07",
        "x".repeat(260)
    );
    for json in [false, true] {
        let id = task_id("forge");
        let server = FakeOpenAi::start(vec![Answer::error(400, &body)]);
        let mut run = runner(v1_task(&id, &dir.path, &server));
        if json {
            run = run.arg("--json");
        }
        let out = run.output();
        out.code(1);
        assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
        for text in [&out.stdout, &out.stderr] {
            assert_eq!(support::leaked_piece(text, KEY, 8), None, "{text}");
        }
        assert!(
            !out.stdout.contains('\u{1b}') && !out.stderr.contains('\u{1b}'),
            "control characters reach the terminal"
        );
        if json {
            let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
            assert_eq!(result["status"], "failed");
            assert!(
                result["error"]
                    .as_str()
                    .unwrap()
                    .contains("Incorrect API key provided: xxx"),
                "{result}"
            );
        } else {
            assert!(
                out.stdout.starts_with(&format!(
                    "FAILED: task {id}: meta plan_task failed: HTTP 400"
                )),
                "{}",
                out.stdout
            );
        }
    }
}

#[test]
fn control_characters_from_meta_do_not_reach_the_note_raw() {
    let dir = Scratch::new("e2e-esc");
    let id = task_id("esc");
    let server = FakeOpenAi::start(vec![
        Answer::chat(
            "type: plan_task\nacceptance_criteria:\n  - id: \"AC-1\\e]0;PWNED\\a\"\n    description: \"works \\e[31mred\"\n",
        ),
        run_worker("@say: done"),
        Answer::chat(
            "type: completion_assessment\nsummary: \"ok \\e[2J\"\ndetails:\n  passed_criteria: [\"AC-1\\e]0;PWNED\\a\"]\n  remaining_risks: []\n",
        ),
    ]);
    let out = runner(v1_task(&id, &dir.path, &server).test("true")).output();
    out.code(0);
    let note = note(&dir.path, &id);
    let raw: Vec<&str> = note
        .lines()
        .filter(|l| l.contains('\u{1b}') || l.contains('\u{7}'))
        .collect();
    assert!(
        raw.is_empty(),
        "raw control characters in the note: {raw:?}"
    );
    // Escaped for the terminal (`\e`), then for Markdown (`\\e`, `\]`).
    assert!(
        note.contains(r"AC-1\\e\]0;PWNED\\x07"),
        "shown escaped:\n{note}"
    );
}

#[test]
fn invalid_yaml_with_json_still_prints_one_result() {
    let out = Run::new(&["run", "--json"])
        .stdin("version: 1\ntask: [unclosed\n")
        .output();
    out.code(1).stderr_has("error: stdin: invalid YAML");
    assert_eq!(out.stdout.lines().count(), 1);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "failed");
    assert!(
        result["error"].as_str().unwrap().contains("invalid YAML"),
        "{result}"
    );
    assert_eq!(result["validation"]["overall"], "unknown");
}

#[test]
fn a_missing_api_key_is_an_error_before_any_request() {
    let dir = Scratch::new("e2e-nokey");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"])]);
    let out = Run::new(&["run"])
        .stdin(v1_task(&task_id("nokey"), &dir.path, &server).to_string())
        .output();
    out.code(1)
        .stderr_has("error: runner.meta.api_key: environment variable OPENAI_API_KEY is not set");
    assert_eq!(server.received().len(), 0);
}

#[test]
fn an_unreachable_daemon_fails_the_task_clearly() {
    let dir = Scratch::new("e2e-nodaemon");
    let id = task_id("nodaemon");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"]), run_worker("@say: hi")]);
    let out = runner(v1_task(&id, &dir.path, &server))
        .env(
            "DOCKER_HOST",
            format!("unix://{}/dead.sock", dir.path.display()),
        )
        .output();
    // The daemon named as the environment chose it (SPEC §22), then docker's words.
    out.code(1)
        .stdout_has(
            "sandbox: docker daemon not reachable: the docker daemon at DOCKER_HOST=unix://",
        )
        .stdout_has("Cannot connect to the Docker daemon");
    assert!(note(&dir.path, &id).contains("docker daemon not reachable"));
}

#[test]
fn memory_stays_small_while_the_worker_prints_200_mib() {
    let dir = Scratch::new("e2e-memory");
    let id = task_id("memory");
    let bytes: u64 = 200 << 20;
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(&format!("@spew: {bytes}\n@say: spewed")),
        assess(&["AC-1"], "done"),
    ]);
    let mut child = runner(v1_task(&id, &dir.path, &server)).start();
    let pid = child.id();
    let mut peak_kib = 0u64;
    while child.child().try_wait().unwrap().is_none() {
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            && let Some(kib) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        {
            peak_kib = peak_kib.max(kib);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.finish();
    out.code(0);
    let log = std::fs::metadata(dir.join(&format!(".agent-runner/logs/{id}/run-1.log")))
        .unwrap()
        .len();
    assert!(log > bytes, "log complete: {log} bytes");
    eprintln!("peak RSS {peak_kib} KiB with {} MiB of output", bytes >> 20);
    assert!(
        peak_kib > 0 && peak_kib < 32 * 1024,
        "peak RSS {peak_kib} KiB"
    );
    let largest = server
        .received()
        .iter()
        .map(|r| r.message(1).len())
        .max()
        .unwrap();
    assert!(largest <= 32 * 1024, "largest Meta request {largest} bytes");
}

#[test]
#[ignore = "needs root"]
fn as_a_non_root_user_files_belong_to_that_user() {
    needs!(Root);
    use std::os::unix::fs::MetadataExt;
    let dir = Scratch::new("e2e-nonroot");
    let uid = 4242;
    // The user's HOME beside the repository (a HOME inside it is refused).
    let home = Scratch::new("e2e-nonroot-home");
    let user = support::OtherUser::new(uid, &dir.path);
    user.owns(&home.path);
    let id = task_id("nonroot");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo mine > mine.txt && id -u\n@say: wrote mine.txt"),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server).test("test -f mine.txt");
    let out = user
        .run(&["run"])
        .env("OPENAI_API_KEY", KEY)
        .env("HOME", &home.path)
        .stdin(yaml.to_string())
        .output();
    out.code(0);
    for path in ["mine.txt", &format!(".agent-runner/task-{id}.md")] {
        let meta = std::fs::metadata(dir.join(path)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (uid, uid), "{path}");
    }
    assert!(
        everything_written(&dir.path).contains("4242"),
        "the worker ran as uid 4242"
    );
    assert_no_container(&id);
}

/// The worker fills the disk: the task still ends, and the result says the note
/// could not be written instead of pointing at a stale one.
#[test]
#[ignore = "needs root"]
fn a_full_disk_is_reported_instead_of_a_stale_note() {
    needs!(Root);
    let dir = Scratch::new("e2e-diskfull");
    let repo = dir.path.join("repo");
    let _disk = support::Tmpfs::mount(&repo, "4m");
    let id = task_id("diskfull");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(
            "@run: dd if=/dev/zero of=fill bs=64k count=200 2>/dev/null; true\n@say: filled",
        ),
        assess(&["AC-1"], "done"),
    ]);
    let out = runner(v1_task(&id, &repo, &server).test("true"))
        .arg("--json")
        .output();
    let result: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", out.stdout, out.stderr));
    assert_eq!(result["note_path"], serde_json::Value::Null, "{result}");
    let why = result["note_error"].as_str().unwrap_or_default();
    assert!(
        why.contains(&format!("task-{id}.md")) && why.contains("No space left"),
        "{result}"
    );
    assert_no_container(&id);
}
