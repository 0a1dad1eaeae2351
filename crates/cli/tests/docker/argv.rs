//! No secret in any process's command line (issue 28): every local user of the host
//! can read every process's `/proc/<pid>/cmdline`, the container's processes
//! included. While a task runs, a thread reads the command line of every process on
//! the machine, over and over, looking for the task's random secrets: a base URL's
//! password and key (codex as worker and as Meta), claude's base URL, the test
//! command, `env` values, a plan's message from the web view. Each also has to
//! reach where it is used, and stay masked in what the task writes. Tests with the real agents need agent-runner-codex:latest
//! (support/prerequisite.rs).

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;
use support::docker::TEST_IMAGE;
use support::fake_anthropic::{self, FakeAnthropic};
use support::fake_openai::{Answer, FakeOpenAi};
use support::fake_responses::{FakeResponses, Reply};
use support::pipeline::{Pipeline, wait_for};
use support::prerequisite::{SANDBOX_IMAGE, needs};
use support::task::{assert_no_container, everything_written, note};
use support::web::Served;
use support::{Outcome, Run, Scratch, random_hex};

/// Reads every process's command line until stopped; see the module documentation.
struct CmdlineWatch {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Seen>,
}

/// What the watch saw.
#[derive(Debug, Default)]
struct Seen {
    /// Command lines that held a needle (the needle's index and the program).
    leaks: BTreeSet<(usize, String)>,
    /// Passes in which a process's command line held `while_running`.
    running: usize,
    passes: usize,
}

impl CmdlineWatch {
    /// Looks for `needles`; counts the passes that saw `while_running` (the agent
    /// or test command, so the watch provably overlapped it).
    fn start(needles: Vec<String>, while_running: &str) -> CmdlineWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let marker = while_running.as_bytes().to_vec();
        let handle = std::thread::spawn(move || {
            let mut seen = Seen::default();
            while !stopped.load(Ordering::SeqCst) {
                let mut running = false;
                for entry in std::fs::read_dir("/proc").unwrap().flatten() {
                    let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                        continue;
                    };
                    running |= contains(&cmdline, &marker);
                    for (n, needle) in needles.iter().enumerate() {
                        if contains(&cmdline, needle.as_bytes()) {
                            let program = cmdline.split(|&b| b == 0).next().unwrap_or_default();
                            seen.leaks
                                .insert((n, String::from_utf8_lossy(program).into_owned()));
                        }
                    }
                }
                seen.passes += 1;
                seen.running += usize::from(running);
                std::thread::sleep(Duration::from_millis(20));
            }
            seen
        });
        CmdlineWatch { stop, handle }
    }

    fn finish(self) -> Seen {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().unwrap()
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Asserts that the watch overlapped what it watched and found no needle.
fn assert_no_leak(seen: &Seen, what: &str) {
    assert!(
        seen.running >= 2,
        "the watch never overlapped {what}: {seen:?}"
    );
    assert!(
        seen.leaks.is_empty(),
        "a secret in a command line: {:?}",
        seen.leaks
    );
}

fn task_id(name: &str) -> String {
    format!("argv-{name}-{}", support::short_id())
}

/// Everything the task wrote, printed and returned, for secrets that must be masked.
fn written(repo: &Path, out: &Outcome) -> String {
    format!("{}{}{}", everything_written(repo), out.stdout, out.stderr)
}

/// Scripted Meta: one criterion, one worker run with `prompt`, an assessment.
fn meta_script(dir: &Scratch, prompt: &str) -> String {
    support::task_yaml::one_run(dir, "codex-cli", prompt, &["AC-1"])
}

/// A base URL's password and key, and codex's login key: random, looked for in
/// every command line and in everything the task writes.
struct Credentials {
    password: String,
    key: String,
    login: String,
}

impl Credentials {
    fn new() -> Credentials {
        Credentials {
            password: format!("pw{}", random_hex(16)),
            key: format!("k{}", random_hex(16)),
            login: format!("ck-{}", random_hex(20)),
        }
    }

    fn all(&self) -> Vec<String> {
        vec![self.password.clone(), self.key.clone(), self.login.clone()]
    }

    /// `run --json` of `yaml`, codex logged in with `login`, watched while a command
    /// line holding `while_running` runs; it must complete, and no credential may
    /// show in a command line or in what the task wrote into `repo`. The requests
    /// `model` got must carry the key (codex joins the base URL with `/responses`
    /// as a string).
    fn run(
        &self,
        dir: &Scratch,
        repo: &Path,
        yaml: &str,
        while_running: &str,
        model: &FakeResponses,
    ) {
        let watch = CmdlineWatch::start(self.all(), while_running);
        let out = Run::new(&["run", "--json"])
            .env("HOME", &dir.path)
            .env("CODEX_API_KEY", &self.login)
            .stdin(yaml)
            .output();
        let seen = watch.finish();
        out.code(0).stdout_has("\"state\":\"COMPLETE\"");
        assert_no_leak(&seen, while_running);
        let requests = model.received();
        assert!(!requests.is_empty());
        for request in &requests {
            assert_eq!(request.path, format!("/v1?api-key={}/responses", self.key));
            assert_eq!(
                request.header("authorization"),
                Some(format!("Bearer {}", self.login).as_str())
            );
        }
        let written = written(repo, &out);
        for secret in self.all() {
            assert!(!written.contains(&secret), "{secret} is masked");
        }
    }
}

/// `http://user:<password>@127.0.0.1:<port>/v1?api-key=<key>` for a fake server at
/// `url` (`http://127.0.0.1:<port>/v1`).
fn with_credentials(url: &str, password: &str, key: &str) -> String {
    let authority = url.trim_start_matches("http://").trim_end_matches("/v1");
    format!("http://user:{password}@{authority}/v1?api-key={key}")
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_base_url_with_credentials_reaches_codex_and_no_command_line_on_the_machine() {
    needs!(SandboxImage);
    let dir = Scratch::new("argv-codex");
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let credentials = Credentials::new();
    let model = FakeResponses::start(vec![
        // The watch sees codex run meanwhile.
        Reply::Command("sleep 2; echo hello > hello.txt".into()),
        Reply::Message("Created hello.txt.".into()),
    ]);
    let base_url = with_credentials(&model.url, &credentials.password, &credentials.key);
    let id = task_id("codex");
    let script = meta_script(&dir, "Create hello.txt saying hello.");
    let yaml = format!(
        "version: 1\ntask:\n  id: {id}\n  repo: {}\n  prd:\n    text: Create hello.txt.\n  test:\n    command: grep -qx hello hello.txt\nrunner:\n  meta:\n    kind: scripted\n    script: {script}\n    max_loops: 1\n  worker:\n    docker_image: {SANDBOX_IMAGE}\n    network: host\n    model: some-model\n    base_url: '{base_url}'\n    max_run_time_sec: 120\n",
        repo.display()
    );
    credentials.run(&dir, &repo, &yaml, "--skip-git-repo-check", &model);
    assert_eq!(model.received().len(), 2);
    assert!(note(&repo, &id).contains("(completed, ExitCode=0)"));
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn meta_s_codex_gets_its_base_url_with_credentials_on_no_command_line() {
    needs!(SandboxImage);
    let dir = Scratch::new("argv-meta");
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let credentials = Credentials::new();
    let reply = |value: serde_json::Value| Reply::Message(value.to_string());
    let model = FakeResponses::start(vec![
        reply(json!({"type": "plan_task", "acceptance_criteria": [
            {"id": null, "description": "hello.txt says hello"}]})),
        reply(json!({"type": "next_action",
            "decision": {"action": "run_worker", "reason": "nothing done yet"},
            "worker_call": {"worker_type": null, "mode": null,
                "prompt": "@run: echo hello > hello.txt\n@sleep: 2\n@say: wrote hello.txt"}})),
        reply(
            json!({"type": "completion_assessment", "summary": "hello.txt says hello",
            "details": {"passed_criteria": ["AC-1"], "remaining_risks": []},
            "all_criteria_satisfied": null}),
        ),
    ]);
    let base_url = with_credentials(&model.url, &credentials.password, &credentials.key);
    let id = task_id("meta");
    let yaml = format!(
        "version: 1\ntask:\n  id: {id}\n  repo: {}\n  prd:\n    text: Create hello.txt.\n  test:\n    command: grep -qx hello hello.txt\nrunner:\n  meta:\n    kind: codex-cli\n    docker_image: {SANDBOX_IMAGE}\n    model: some-model\n    base_url: '{base_url}'\n    timeout_sec: 120\n    max_loops: 1\n  worker:\n    docker_image: {TEST_IMAGE}\n    network: host\n",
        repo.display()
    );
    // Meta's codex runs three times; the watch must overlap at least one.
    credentials.run(&dir, &repo, &yaml, "--output-schema", &model);
    assert_eq!(model.received().len(), 3);
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn claude_s_base_url_reaches_it_by_name_not_on_a_command_line() {
    needs!(SandboxImage);
    let dir = Scratch::new("argv-claude");
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let key = format!("sk-ant-{}", random_hex(20));
    let gateway = format!("gw-{}", random_hex(16));
    let model = FakeAnthropic::start(vec![
        fake_anthropic::Reply::bash("sleep 2; echo hello > hello.txt"),
        fake_anthropic::Reply::Text("Created hello.txt.".into()),
    ]);
    let id = task_id("claude");
    let script = meta_script(&dir, "Create hello.txt saying hello.");
    let yaml = format!(
        "version: 1\ntask:\n  id: {id}\n  repo: {}\n  prd:\n    text: Create hello.txt.\n  test:\n    command: grep -qx hello hello.txt\nrunner:\n  meta:\n    kind: scripted\n    script: {script}\n    max_loops: 1\n  worker:\n    kind: claude-code-cli\n    docker_image: {SANDBOX_IMAGE}\n    network: host\n    model: claude-fake-model\n    base_url: {}/{gateway}\n    max_run_time_sec: 120\n",
        repo.display(),
        model.url
    );
    let watch = CmdlineWatch::start(vec![gateway.clone(), key.clone()], "stream-json");
    let out = Run::new(&["run", "--json"])
        .env("HOME", dir.join("home"))
        .env("ANTHROPIC_API_KEY", &key)
        .stdin(&yaml)
        .output();
    let seen = watch.finish();
    out.code(0).stdout_has("\"state\":\"COMPLETE\"");
    assert_no_leak(&seen, "claude");
    let requests = model.received();
    assert!(!requests.is_empty());
    for request in &requests {
        assert_eq!(request.path, format!("/{gateway}/v1/messages?beta=true"));
    }
    assert_no_container(&id);
}

/// The test worker's fake codex, always here: what the real ones are given, seen
/// from inside. codex's configuration file with the base URL is a link into the container's
/// private tmpfs, the variables that carried it are gone before the agent starts,
/// and neither it nor the test command nor an `env` value is in any command line.
#[test]
fn codex_s_configuration_and_the_test_command_reach_the_container_in_no_command_line() {
    let dir = Scratch::new("argv-fake");
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let (password, key, value, marker) = (
        format!("pw{}", random_hex(16)),
        format!("k{}", random_hex(16)),
        format!("v{}", random_hex(16)),
        format!("m{}", random_hex(16)),
    );
    let base_url = format!("http://user:{password}@gw.example:8080/v1?api-key={key}");
    // codex's configuration as agent-runner writes it: a model provider of its own at
    // the base URL, with no WebSocket attempt (SPEC §24).
    let profile = format!(
        "# agent-runner's, written before every run\nmodel_provider = \"agent-runner\"\n\n\
         [model_providers.agent-runner]\nname = \"runner.worker.base_url\"\n\
         base_url = \"{base_url}\"\nwire_api = \"responses\"\n\
         requires_openai_auth = true\nsupports_websockets = false\n"
    );
    let id = task_id("fake");
    let script = meta_script(
        &dir,
        "@run: cd /run/agent-runner/private && stat -c '%a %u %n' . agent-settings && readlink $HOME/.codex/config.toml && sha256sum < $HOME/.codex/config.toml && env | grep -c AGENT_RUNNER_FILE; sleep 1\n@say: looked",
    );
    let yaml = format!(
        "version: 1\ntask:\n  id: {id}\n  repo: {}\n  prd:\n    text: Look.\n  test:\n    command: \"echo {marker} > marker.txt; sleep 1; test -n \\\"$LITERAL\\\"\"\nrunner:\n  meta:\n    kind: scripted\n    script: {script}\n    max_loops: 1\n  worker:\n    docker_image: {TEST_IMAGE}\n    network: none\n    base_url: '{base_url}'\n    env:\n      LITERAL: {value}\n",
        repo.display()
    );
    let watch = CmdlineWatch::start(
        vec![password.clone(), key.clone(), value.clone(), marker.clone()],
        "agent-runner-envelope",
    );
    let out = Run::new(&["run", "--json"])
        .env("HOME", &dir.path)
        .env("CODEX_API_KEY", "ck-fake-0123456789")
        .stdin(&yaml)
        .output();
    let seen = watch.finish();
    out.code(0).stdout_has("\"state\":\"COMPLETE\"");
    assert_no_leak(&seen, "the worker and the test");
    // The test command ran (with the literal in its environment), from a file.
    assert_eq!(
        std::fs::read_to_string(repo.join("marker.txt")).unwrap(),
        format!("{marker}\n")
    );
    let log =
        std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/run-1.log"))).unwrap();
    let digest = {
        let out = std::process::Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(profile.as_bytes())?;
                child.wait_with_output()
            })
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    for line in [
        "700 0 .".to_string(),
        "600 0 agent-settings".into(),
        "/run/agent-runner/private/agent-settings".into(),
        digest.trim().to_string(),
    ] {
        assert!(log.contains(&line), "the worker saw no {line:?}: {log}");
    }
    assert!(
        log.contains("\\n0\\n"),
        "AGENT_RUNNER_FILE* left the environment: {log}"
    );
    let written = written(&repo, &out);
    for secret in [&password, &key] {
        assert!(!written.contains(secret.as_str()), "{secret} is masked");
    }
    assert_no_container(&id);
}

#[test]
fn credentials_in_extra_args_are_refused_before_anything_runs() {
    let dir = Scratch::new("argv-refused");
    let yaml = format!(
        "version: 1\ntask:\n  repo: {}\n  prd: {{text: x}}\nrunner:\n  worker:\n    extra_args: ['-c', 'model_providers.gw={{base_url=\"https://u:hunter2@gw.example/v1\"}}']\n",
        dir.path.display()
    );
    let out = Run::new(&["validate"])
        .env("OPENAI_API_KEY", "sk-test-0123456789")
        .stdin(&yaml)
        .output();
    out.code(1)
        .stderr_has("runner.worker.extra_args[1]")
        .stderr_has("holds a credential (a password in a URL)")
        .stderr_has("every user of this machine can read");
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
}

/// A plan started from the web view: the user's message goes to `plan` on its
/// stdin, not in its command line.
#[test]
fn a_plan_message_from_the_web_view_is_on_no_command_line() {
    let needle = random_hex(16);
    let message = format!("Build the list page, ref {needle}");
    let decompose = "type: decompose\nunderstanding: A list page.\nphases:\n  - name: Build\n    milestone: m1\n    tasks:\n      - id: list\n        title: The list page\n        description: Show the items.\n        acceptance_criteria: [the items show]\n        wbs_level: 3\n        estimated_effort: small\n";
    // Slow enough for the watch to see `plan` run.
    let server = FakeOpenAi::start(vec![Answer {
        delay: Duration::from_secs(2),
        ..Answer::chat(decompose)
    }]);
    let p = Pipeline::new("argv-plan", false);
    p.init_with(
        "defaults.yaml",
        &format!(
            "builder: {{kind: meta, model: plan-model}}\nrunner:\n  meta: {{base_url: \"{}\", api_key: sk-literal-0123456789}}\n",
            server.url
        ),
    );
    let web = Served::start(&p, &[]);
    let token = web.token();
    let watch = CmdlineWatch::start(vec![needle.clone()], "plan\0-w\0");
    let started = web.post(
        "/api/plan",
        &token,
        &json!({ "message": message }).to_string(),
    );
    started.status(202);
    let run_id = started.json()["run"].as_u64().unwrap();
    let mut last = serde_json::Value::Null;
    wait_for(Duration::from_secs(60), || {
        last = web.get(&format!("/api/plan/runs/{run_id}")).json();
        last["state"] != "running"
    });
    let seen = watch.finish();
    assert_eq!(last["state"], "succeeded", "{last}");
    assert_eq!(last["message"], message.as_str());
    assert_no_leak(&seen, "the plan");
    let received = server.received();
    assert!(
        received[0].body.contains(&needle),
        "the message reached Meta"
    );
}
