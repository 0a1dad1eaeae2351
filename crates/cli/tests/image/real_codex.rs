//! The real Codex CLI end to end: `agent-runner run` (the real binary) with scripted
//! Meta runs the real worker image agent-runner-codex:latest, whose codex (npm
//! @openai/codex, pinned) talks to a fake Responses API server on 127.0.0.1 through
//! `network: host`, or on 127.0.0.2 through the egress proxy (the default network).
//! The tests need that image (support/prerequisite.rs).

use crate::support;

use std::path::Path;

use support::fake_responses::{FakeResponses, Reply};
use support::prerequisite::{SANDBOX_IMAGE, needs};
use support::task::assert_no_container;
use support::task_yaml::TaskYaml;
use support::{Outcome, Run, Scratch};

/// The model key codex sends: a literal in runner.worker.env, read by codex through
/// the provider's `env_key`.
const MODEL_KEY: &str = "sk-fake-responses-0123456789";

fn task_id(name: &str) -> String {
    format!("real-codex-{name}-{}", support::short_id())
}

/// Scripted Meta: plan one criterion, run the worker once with `prompt`, then assess
/// with `passed` as the criteria met.
fn meta_script(dir: &Scratch, prompt: &str, passed: &[&str]) -> String {
    support::task_yaml::one_run(dir, "codex-cli", prompt, passed)
}

/// A task in `repo` whose worker is the real codex in `image`, pointed at `model`,
/// with `network: host`.
fn codex_task(
    id: &str,
    repo: &Path,
    script: &str,
    image: &str,
    model: &FakeResponses,
    idle_timeout_sec: u32,
) -> TaskYaml {
    codex_task_on(id, repo, script, image, model, idle_timeout_sec)
        .set("runner.worker.network", "host")
}

/// The same task with the default network (allowlist: the egress proxy).
fn codex_task_on(
    id: &str,
    repo: &Path,
    script: &str,
    image: &str,
    model: &FakeResponses,
    idle_timeout_sec: u32,
) -> TaskYaml {
    let provider = model.provider("fake", "FAKE_OPENAI_KEY", 1);
    TaskYaml::hello(id, repo)
        .scripted(script, 1)
        .image(image)
        .set("runner.worker.model", "some-model")
        .set("runner.worker.max_run_time_sec", 120)
        .set("runner.worker.idle_timeout_sec", idle_timeout_sec)
        .set(
            "runner.worker.extra_args",
            ["-c", &provider, "-c", "model_provider=fake"],
        )
        .set("runner.worker.env.FAKE_OPENAI_KEY", MODEL_KEY)
}

/// Runs the task; HOME is the scratch directory, so no ~/.codex/auth.json of the
/// machine is mounted.
fn run(dir: &Scratch, yaml: &TaskYaml) -> Outcome {
    Run::new(&["run"])
        .env("HOME", &dir.path)
        .stdin(yaml.to_string())
        .output()
}

fn note(repo: &Path, id: &str) -> String {
    std::fs::read_to_string(repo.join(format!(".agent-runner/task-{id}.md")))
        .expect("the Task Note is written")
}

fn worker_log(repo: &Path, id: &str) -> String {
    std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/run-1.log")))
        .expect("the worker log is written")
}

#[test]
#[ignore = "needs sandbox-image"]
fn codex_runs_the_shell_command_the_model_asks_for_and_the_task_completes() {
    needs!(SandboxImage);
    let image = SANDBOX_IMAGE;
    let dir = Scratch::new("real-codex-ok");
    let repo = dir.join("repo");
    // A git repository, so the in-container snapshots have something to see.
    support::git_repo(&repo, "notes.txt", "one\n");
    let id = task_id("ok");
    let model = FakeResponses::start(vec![
        Reply::Command("echo hello > hello.txt && echo two >> notes.txt && ls".into()),
        Reply::Message("Created hello.txt.".into()),
    ]);
    let script = meta_script(&dir, "Create hello.txt saying hello.", &["AC-1"]);
    let out = run(&dir, &codex_task(&id, &repo, &script, image, &model, 60));
    out.code(0)
        .stdout_has("COMPLETE")
        .stderr_has("worker run 1/1: completed");
    assert_eq!(
        std::fs::read_to_string(repo.join("hello.txt")).unwrap(),
        "hello\n"
    );

    let requests = model.received();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for request in &requests {
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/v1/responses")
        );
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {MODEL_KEY}").as_str())
        );
        assert_eq!(request.json()["model"], "some-model");
    }
    assert!(
        requests[0].body.contains("Create hello.txt saying hello."),
        "the prompt reaches the model"
    );
    let outputs = requests[1].inputs("function_call_output");
    assert_eq!(outputs.len(), 1, "{}", requests[1].body);
    assert_eq!(outputs[0]["call_id"], "call_1");
    let output = outputs[0]["output"].as_str().unwrap();
    assert!(
        output.contains("exited with code 0") && output.contains("hello.txt"),
        "the command ran in the container: {output}"
    );

    let note = note(&repo, &id);
    assert!(note.contains("(completed, ExitCode=0)"), "{note}");
    assert!(note.contains("- Summary: Created hello.txt."), "{note}");
    assert!(
        note.contains("echo hello > hello.txt && echo two >> notes.txt && ls")
            && note.contains("→ exit 0"),
        "{note}"
    );
    // git ran in the image (Debian's git, the image's safe.directory) and saw both.
    for line in [
        "  - M notes.txt",
        "  - ?? hello.txt",
        // The untracked file counts as its lines, new.
        "- Diff stat: 2 file(s), +2 −0\n  - +1 −0 notes.txt\n  - +1 −0 hello.txt\n",
    ] {
        assert!(note.contains(line), "note lacks {line:?}:\n{note}");
    }
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn model_errors_exhaust_codex_retries_and_the_run_fails() {
    needs!(SandboxImage);
    let image = SANDBOX_IMAGE;
    let dir = Scratch::new("real-codex-500");
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let id = task_id("500");
    let model = FakeResponses::start(vec![Reply::Status(500)]);
    let script = meta_script(&dir, "Create hello.txt saying hello.", &[]);
    let out = run(&dir, &codex_task(&id, &repo, &script, image, &model, 60));
    out.code(1)
        .stderr_has("worker run 1/1: failed")
        .stdout_has("max_loops reached");
    // One request, then codex's own retries (1 per request, 1 per stream) before it gives up.
    assert!(model.received().len() > 1, "codex retried");
    let log = worker_log(&repo, &id);
    assert!(log.contains("Reconnecting... 1/1"), "{log}");
    assert!(log.contains("\"type\":\"turn.failed\""), "{log}");
    let note = note(&repo, &id);
    assert!(note.contains("(failed, ExitCode=1)"), "{note}");
    assert!(!repo.join("hello.txt").exists());
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_stalled_model_stream_is_stopped_inside_the_container() {
    needs!(SandboxImage);
    let image = SANDBOX_IMAGE;
    let dir = Scratch::new("real-codex-stall");
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let id = task_id("stall");
    let model = FakeResponses::start(vec![Reply::Stall]);
    let script = meta_script(&dir, "Create hello.txt saying hello.", &[]);
    let out = run(&dir, &codex_task(&id, &repo, &script, image, &model, 3));
    out.code(1)
        .stderr_has("worker run 1/1: stalled")
        // codex itself was stopped, not only the `docker exec` client.
        .stderr_has("processes stopped, 0 left)");
    assert_eq!(model.received().len(), 1, "one request, left hanging");
    let note = note(&repo, &id);
    assert!(note.contains("(stalled, ExitCode="), "{note}");
    assert!(
        note.contains("Stalled: no output for 3 s (idle_timeout_sec)"),
        "{note}"
    );
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image and root"]
fn as_a_non_root_user_real_codex_works_and_files_belong_to_that_user() {
    needs!(SandboxImage, Root);
    let image = SANDBOX_IMAGE;
    use std::os::unix::fs::MetadataExt;
    let dir = Scratch::new("real-codex-nonroot");
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let id = task_id("nonroot");
    let model = FakeResponses::start(vec![
        Reply::Command("echo hello > hello.txt && id -u".into()),
        Reply::Message("Created hello.txt.".into()),
    ]);
    let script = meta_script(&dir, "Create hello.txt saying hello.", &["AC-1"]);
    let yaml = codex_task(&id, &repo, &script, image, &model, 60);
    let uid = 4244;
    let user = support::OtherUser::new(uid, &dir.path);
    let out = user
        .run(&["run"])
        .env("HOME", &dir.path)
        .stdin(yaml.to_string())
        .output();
    out.code(0).stderr_has("worker run 1/1: completed");
    let meta = std::fs::metadata(repo.join("hello.txt")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (uid, uid));
    let outputs = model.received()[1].inputs("function_call_output");
    assert!(
        outputs[0]["output"].as_str().unwrap().contains("4244"),
        "codex's shell ran as uid 4244: {outputs:?}"
    );
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn codex_reaches_its_model_only_through_the_egress_proxy_and_completes() {
    needs!(SandboxImage);
    let image = SANDBOX_IMAGE;
    let dir = Scratch::new("real-codex-egress");
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let id = task_id("egress");
    let model = FakeResponses::start_on(
        "127.0.0.2",
        vec![
            Reply::Command("echo hello > hello.txt".into()),
            Reply::Message("Created hello.txt.".into()),
        ],
    );
    let script = meta_script(&dir, "Create hello.txt saying hello.", &["AC-1"]);
    let model_host = model
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_string();
    let yaml = codex_task_on(&id, &repo, &script, image, &model, 60);
    // The default allow list holds the model's host, from the provider's base_url.
    let validated = Run::new(&["validate"])
        .env("HOME", &dir.path)
        .stdin(yaml.to_string())
        .output();
    validated.code(0).stdout_has(&format!(
        "allow:\n    - api.openai.com\n    - {model_host}\n"
    ));
    let out = run(&dir, &yaml);
    out.code(0)
        .stdout_has("COMPLETE")
        .stderr_has("worker run 1/1: completed");
    assert_eq!(
        std::fs::read_to_string(repo.join("hello.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        model.received().len(),
        2,
        "both model requests went through"
    );
    let log = std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/egress.jsonl")))
        .expect("egress.jsonl");
    let records: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let to_model: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| format!("{}:{}", r["host"].as_str().unwrap(), r["port"]) == model_host)
        .collect();
    assert!(
        !to_model.is_empty() && to_model.iter().all(|r| r["allowed"] == true),
        "{log}"
    );
    assert!(
        to_model
            .iter()
            .map(|r| r["bytes_down"].as_u64().unwrap())
            .sum::<u64>()
            > 0,
        "{log}"
    );
    // Whatever else codex tried (its update check, analytics) was refused without
    // failing the run.
    for record in records.iter().filter(|r| r["allowed"] == false) {
        assert_eq!(record["reason"], "not in runner.worker.allow", "{record}");
    }
    let note = note(&repo, &id);
    assert!(note.contains(&format!("- `{model_host}`: ")), "{note}");
    assert_no_container(&id);
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_base_url_points_codex_at_its_model_and_is_all_the_allow_list_holds() {
    needs!(SandboxImage);
    let dir = Scratch::new("real-codex-base-url");
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let id = task_id("base-url");
    let model = FakeResponses::start_on(
        "127.0.0.2",
        vec![
            Reply::Command("echo hello > hello.txt".into()),
            Reply::Message("Created hello.txt.".into()),
        ],
    );
    let script = meta_script(&dir, "Create hello.txt saying hello.", &["AC-1"]);
    let key = "ck-base-url-0123456789";
    // codex's own provider, at runner.worker.base_url (its profile's `openai_base_url`),
    // logged in with CODEX_API_KEY.
    let yaml = TaskYaml::new(&id, &repo, "Create hello.txt.")
        .test("grep -qx hello hello.txt")
        .scripted(&script, 1)
        .image(SANDBOX_IMAGE)
        .set("runner.worker.model", "some-model")
        .set("runner.worker.base_url", &model.url)
        .set("runner.worker.max_run_time_sec", 120);
    let model_host = model
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_string();
    Run::new(&["validate"])
        .env("HOME", &dir.path)
        .env("CODEX_API_KEY", key)
        .stdin(yaml.to_string())
        .output()
        .code(0)
        .stdout_has(&format!(
            "allow:\n    - {model_host}\n    allow_from: 'default: base_url'"
        ));
    let out = Run::new(&["run"])
        .env("HOME", &dir.path)
        .env("CODEX_API_KEY", key)
        .stdin(yaml.to_string())
        .output();
    out.code(0).stdout_has("COMPLETE");
    let requests = model.received();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for request in &requests {
        assert_eq!(request.path, "/v1/responses");
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {key}").as_str())
        );
    }
    assert_no_container(&id);
}

/// A codex configuration the worker writes does not steer a later run: neither one
/// in `$CODEX_HOME` (written by run 1; codex runs with `--ignore-user-config`) nor
/// one in the repository (`.codex/config.toml`, which codex loads only for a project
/// its user configuration trusts). Here both would give the commands a variable.
#[test]
#[ignore = "needs sandbox-image"]
fn a_codex_config_the_worker_writes_does_not_steer_the_next_run() {
    needs!(SandboxImage);
    let dir = Scratch::new("real-codex-config");
    let repo = dir.join("repo");
    support::git_repo(&repo, "notes.txt", "one\n");
    dir.file(
        "repo/.codex/config.toml",
        "[shell_environment_policy]\nset = { PLANTED_PROJECT = \"yes\" }\n",
    );
    let id = task_id("config");
    let write = "mkdir -p ~/.codex && printf '[shell_environment_policy]\\nset = { PLANTED_USER = \"yes\" }\\n' \
                 > ~/.codex/config.toml && echo wrote && echo project=$PLANTED_PROJECT";
    let model = FakeResponses::start(vec![
        Reply::Command(write.into()),
        Reply::Message("Wrote a config.".into()),
        Reply::Command("echo user=$PLANTED_USER project=$PLANTED_PROJECT".into()),
        Reply::Message("Looked.".into()),
    ]);
    let run = |prompt: &str| {
        format!(
            "- type: next_action\n  decision:\n    action: run_worker\n    reason: go on\n  worker_call:\n    worker_type: codex-cli\n    mode: exec\n    prompt: {prompt:?}\n"
        )
    };
    let assess = |passed: &str| {
        format!(
            "- type: completion_assessment\n  summary: assessed\n  details:\n    passed_criteria: [{passed}]\n    remaining_risks: []\n"
        )
    };
    let script = format!(
        "- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: looked\n{}{}{}{}",
        run("Write the config."),
        assess(""),
        run("Look at the environment."),
        assess("AC-1")
    );
    let script = dir.file("meta-script.yaml", script).display().to_string();
    let yaml = codex_task(&id, &repo, &script, SANDBOX_IMAGE, &model, 60)
        .set("runner.meta.max_loops", 2)
        .test("true");
    run_and_check(&dir, &yaml, &model);
    assert_no_container(&id);
}

fn run_and_check(dir: &Scratch, yaml: &TaskYaml, model: &FakeResponses) {
    let out = run(dir, yaml);
    out.code(0).stdout_has("COMPLETE");
    let requests = model.received();
    assert_eq!(requests.len(), 4, "{requests:?}");
    let output = |n: usize| {
        let outputs = requests[n].inputs("function_call_output");
        assert_eq!(outputs.len(), 1, "{}", requests[n].body);
        outputs[0]["output"].as_str().unwrap().to_string()
    };
    let first = output(1);
    assert!(first.contains("wrote\nproject=\n"), "run 1: {first}");
    let second = output(3);
    assert!(second.contains("user= project=\n"), "run 2: {second}");
}
