//! `agent-runner doctor` against a healthy set-up and each broken one: the real binary,
//! the real daemon, the test worker images (`:latest`, `:nocodex`, `:nogit`) and a fake
//! OpenAI server as the Meta endpoint.

use crate::support;

use support::docker::TEST_IMAGE;
use support::fake_openai::FakeOpenAi;
use support::prerequisite::needs;
use support::task_yaml::TaskYaml;
use support::{Outcome, Run, Scratch};

const META_KEY: &str = "sk-doctor-meta-key-0123456789";

/// A v1 task naming `image` and the Meta endpoint `base_url`.
/// The repository is a directory below the scratch directory, which is HOME: a task
/// may not name HOME itself.
fn doctor_task(dir: &Scratch, image: &str, base_url: &str) -> TaskYaml {
    let repo = dir.path.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    TaskYaml::new("", &repo, "anything")
        .remove("task.id")
        .set("runner.meta.base_url", base_url)
        .set("runner.meta.api_key", META_KEY)
        .image(image)
        .set("runner.worker.network", "none")
}

/// `agent-runner doctor` on `yaml`; HOME is the scratch directory (no auth.json
/// unless a test writes one) and CODEX_API_KEY is set unless `codex_key` is None.
fn doctor(dir: &Scratch, yaml: &TaskYaml, codex_key: Option<&str>) -> Outcome {
    let mut run = Run::new(&["doctor"])
        .env("HOME", &dir.path)
        .stdin(yaml.to_string());
    if let Some(key) = codex_key {
        run = run.env("CODEX_API_KEY", key);
    }
    run.output()
}

/// "<status> <what>" for each check line, e.g. "FAIL git in the image".
fn statuses(out: &Outcome) -> Vec<String> {
    out.stdout
        .lines()
        .filter_map(|line| {
            let (status, rest) = line.split_once(' ')?;
            let what = rest.trim_start().split(": ").next()?;
            matches!(status, "ok" | "FAIL" | "skip").then(|| format!("{status} {what}"))
        })
        .collect()
}

/// The check lines of a set-up where everything works, with `changes` applied.
fn expected(image: &str, changes: &[(&str, &str)]) -> Vec<String> {
    let whats = [
        "docker CLI".to_string(),
        "docker daemon".to_string(),
        format!("image {image}"),
        format!("image {image} runs"),
        "codex in the image".to_string(),
        "git in the image".to_string(),
        "file ownership".to_string(),
        "codex auth".to_string(),
        "Meta endpoint".to_string(),
    ];
    whats
        .iter()
        .map(|what| {
            let status = changes
                .iter()
                .find(|(w, _)| w == what)
                .map_or("ok", |(_, s)| s);
            format!("{status} {what}")
        })
        .collect()
}

fn line<'a>(out: &'a Outcome, what: &str) -> &'a str {
    out.stdout
        .lines()
        .find(|l| l.contains(&format!(" {what}: ")))
        .unwrap_or_else(|| panic!("no line for {what}:\n{}", out.stdout))
}

#[test]
fn a_healthy_setup_passes_every_check_and_sends_no_key() {
    let dir = Scratch::new("doctor-ok");
    let meta = FakeOpenAi::start(vec![]);
    let out = doctor(
        &dir,
        &doctor_task(&dir, TEST_IMAGE, &meta.url),
        Some("codex-key-for-doctor"),
    );
    out.code(0).stdout_has("all 9 checks passed");
    assert_eq!(statuses(&out), expected(TEST_IMAGE, &[]), "{}", out.stdout);
    assert!(
        line(&out, "codex in the image").ends_with("codex-cli 0.169.0 (agent-runner test fake)")
    );
    assert!(line(&out, &format!("image {TEST_IMAGE} runs")).contains("network none"));
    let requests = meta.received();
    assert_eq!(requests.len(), 1, "one plain request");
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("GET", "/v1")
    );
    assert_eq!(request.header("authorization"), None);
    let sent = format!("{:?}{}", request.headers, request.body);
    assert!(!sent.contains(META_KEY) && !sent.contains("codex-key-for-doctor"));
    assert!(!out.stdout.contains(META_KEY) && !out.stdout.contains("codex-key-for-doctor"));
}

#[test]
fn without_a_task_the_defaults_are_checked() {
    let dir = Scratch::new("doctor-defaults");
    let meta = FakeOpenAi::start(vec![]);
    let out = Run::new(&["doctor"])
        .env("HOME", &dir.path)
        .env("OPENAI_BASE_URL", &meta.url)
        .stdin("")
        .output();
    // Whether the real worker image is built here or not, its checks are the ones run.
    assert!(
        out.stdout.contains(" image agent-runner-codex:latest: "),
        "{}",
        out.stdout
    );
    assert!(
        line(&out, "Meta endpoint").starts_with("ok "),
        "{}",
        out.stdout
    );
    assert_eq!(meta.received().len(), 1);
}

#[test]
fn an_unreachable_daemon_fails_and_skips_what_needs_it() {
    let dir = Scratch::new("doctor-nodaemon");
    let meta = FakeOpenAi::start(vec![]);
    let out = Run::new(&["doctor"])
        .env("HOME", &dir.path)
        .env("CODEX_API_KEY", "codex-key")
        .env(
            "DOCKER_HOST",
            "unix:///nonexistent/agent-runner-docker.sock",
        )
        .stdin(doctor_task(&dir, TEST_IMAGE, &meta.url).to_string())
        .output();
    out.code(1).stdout_has("1 of 9 checks failed");
    let skip = "skip";
    assert_eq!(
        statuses(&out),
        expected(
            TEST_IMAGE,
            &[
                ("docker daemon", "FAIL"),
                (&format!("image {TEST_IMAGE}"), skip),
                (&format!("image {TEST_IMAGE} runs"), skip),
                ("codex in the image", skip),
                ("git in the image", skip),
                ("file ownership", skip),
            ]
        )
    );
    assert!(line(&out, "docker daemon").contains("(fix: start Docker"));
}

#[test]
fn a_missing_image_fails_with_how_to_build_it() {
    let dir = Scratch::new("doctor-noimage");
    let meta = FakeOpenAi::start(vec![]);
    let image = format!("agent-runner-test-worker:missing-{}", support::short_id());
    let out = doctor(
        &dir,
        &doctor_task(&dir, &image, &meta.url),
        Some("codex-key"),
    );
    out.code(1);
    let needs = "skip";
    assert_eq!(
        statuses(&out),
        expected(
            &image,
            &[
                (&format!("image {image}"), "FAIL"),
                (&format!("image {image} runs"), needs),
                ("codex in the image", needs),
                ("git in the image", needs),
                ("file ownership", needs),
            ]
        )
    );
    assert!(line(&out, &format!("image {image}")).contains("make sandbox-image"));
}

#[test]
fn an_image_without_codex_fails_the_codex_check() {
    let dir = Scratch::new("doctor-nocodex");
    let meta = FakeOpenAi::start(vec![]);
    let image = "agent-runner-test-worker:nocodex";
    // `agent_from: auto` would take the tools volume's (docker::tools_volume).
    let out = doctor(
        &dir,
        &doctor_task(&dir, image, &meta.url).set("runner.worker.agent_from", "image"),
        Some("codex-key"),
    );
    out.code(1);
    assert_eq!(
        statuses(&out),
        expected(image, &[("codex in the image", "FAIL")])
    );
    assert!(line(&out, "codex in the image").contains("no `codex` on the image's PATH"));
}

/// Git in the image is optional (SPEC §21): a warning naming what still needs it,
/// not a failure, and no advice to rebuild agent-runner's image.
#[test]
fn an_image_without_git_is_a_warning_not_a_failure() {
    let dir = Scratch::new("doctor-nogit");
    let meta = FakeOpenAi::start(vec![]);
    let image = "agent-runner-test-worker:nogit";
    let out = doctor(
        &dir,
        &doctor_task(&dir, image, &meta.url),
        Some("codex-key"),
    );
    out.code(0);
    let mut want = expected(image, &[]);
    want.retain(|l| l != "ok git in the image");
    assert_eq!(statuses(&out), want);
    let git = line(&out, "git in the image");
    assert!(git.starts_with("warn "), "{git}");
    assert!(
        git.contains("the copy transport commits the work on this machine")
            && git.contains("isolation: clone")
            && !git.contains("make sandbox-image"),
        "{git}"
    );
}

#[test]
fn codex_auth_comes_from_auth_json_or_a_key() {
    let dir = Scratch::new("doctor-auth");
    let meta = FakeOpenAi::start(vec![]);
    let yaml = doctor_task(&dir, TEST_IMAGE, &meta.url);
    let out = doctor(&dir, &yaml, None);
    out.code(1);
    assert_eq!(
        statuses(&out),
        expected(TEST_IMAGE, &[("codex auth", "FAIL")])
    );
    assert!(line(&out, "codex auth").contains("(fix: run `codex login`"));

    // A key the task gives the worker counts too.
    let with_env = doctor_task(&dir, TEST_IMAGE, &meta.url)
        .set("runner.worker.env.CODEX_API_KEY", "task-codex-key");
    let out = doctor(&dir, &with_env, None);
    out.code(0);
    assert!(line(&out, "codex auth").contains("runner.worker.env sets CODEX_API_KEY"));
    assert!(!out.stdout.contains("task-codex-key"));

    dir.file(".codex/auth.json", "{}");
    let out = doctor(&dir, &yaml, None);
    out.code(0);
    assert!(line(&out, "codex auth").contains(".codex/auth.json (mounted read-only"));
}

#[test]
fn an_unreachable_meta_endpoint_fails() {
    let dir = Scratch::new("doctor-nometa");
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let out = doctor(
        &dir,
        &doctor_task(&dir, TEST_IMAGE, &url),
        Some("codex-key"),
    );
    out.code(1);
    assert_eq!(
        statuses(&out),
        expected(TEST_IMAGE, &[("Meta endpoint", "FAIL")])
    );
    assert!(line(&out, "Meta endpoint").contains(&url));
}

#[test]
#[ignore = "needs root"]
fn as_a_non_root_user_files_belong_to_that_user() {
    needs!(Root);
    let dir = Scratch::new("doctor-nonroot");
    let meta = FakeOpenAi::start(vec![]);
    std::fs::create_dir_all(dir.path.join("repo")).unwrap();
    let user = support::OtherUser::new(4243, &dir.path);
    let out = user
        .run(&["doctor"])
        .env("HOME", &dir.path)
        .env("CODEX_API_KEY", "codex-key")
        .stdin(doctor_task(&dir, TEST_IMAGE, &meta.url).to_string())
        .output();
    out.code(0);
    assert!(
        line(&out, "file ownership").contains("belong to 4243:4243 (you)"),
        "{}",
        out.stdout
    );
    assert!(line(&out, &format!("image {TEST_IMAGE} runs")).contains("/bin/sh as 4243:4243"));
}

#[test]
fn a_codex_of_another_version_fails_the_version_check() {
    let dir = Scratch::new("doctor-oldcodex");
    let meta = FakeOpenAi::start(vec![]);
    let image = format!(
        "agent-runner-test-worker:doctor-codex-{}",
        support::short_id()
    );
    let dockerfile = format!(
        "FROM {TEST_IMAGE}\nRUN printf '#!/bin/sh\\necho \"codex-cli 0.170.0\"\\n' > /usr/local/bin/codex && chmod 755 /usr/local/bin/codex\n"
    );
    support::Run::program("docker", &["build", "-q", "-t", &image, "-"])
        .env("DOCKER_BUILDKIT", "0")
        .stdin(dockerfile)
        .output()
        .code(0);
    let out = doctor(
        &dir,
        &doctor_task(&dir, &image, &meta.url),
        Some("codex-key"),
    );
    support::docker::docker(&["rmi", &image]);
    out.code(1);
    assert_eq!(
        statuses(&out),
        expected(&image, &[("codex in the image", "FAIL")])
    );
    assert!(
        line(&out, "codex in the image")
            .contains("codex 0.170.0, but agent-runner was checked against 0.169.0"),
        "{}",
        out.stdout
    );
}

#[test]
fn sigterm_stops_a_slow_check_at_once() {
    let dir = Scratch::new("doctor-sigterm");
    let meta = FakeOpenAi::start(vec![
        support::fake_openai::Answer::chat("slow").delayed(std::time::Duration::from_secs(30)),
    ]);
    let running = Run::new(&["doctor"])
        .env("HOME", &dir.path)
        .env("CODEX_API_KEY", "codex-key")
        .stdin(doctor_task(&dir, TEST_IMAGE, &meta.url).to_string())
        .start();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while meta.received().is_empty() {
        assert!(std::time::Instant::now() < until, "doctor never asked Meta");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let signalled = std::time::Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &running.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = running.finish();
    assert!(signalled.elapsed() < std::time::Duration::from_secs(5));
    out.code(130).stdout_has("interrupted");
    assert!(!out.stdout.contains("Meta endpoint"), "{}", out.stdout);
}

#[test]
fn with_the_default_network_the_egress_bridge_is_checked_in_the_image() {
    let dir = Scratch::new("doctor-egress");
    let meta = FakeOpenAi::start(vec![]);
    let tmp = dir.path.join("t");
    std::fs::create_dir(&tmp).unwrap();
    let yaml = doctor_task(&dir, TEST_IMAGE, &meta.url).remove("runner.worker.network");
    let out = Run::new(&["doctor"])
        .env("HOME", &dir.path)
        .env("TMPDIR", &tmp)
        .env("CODEX_API_KEY", "codex-key-for-doctor")
        .stdin(yaml.to_string())
        .output();
    out.code(0).stdout_has("all 10 checks passed");
    assert_eq!(
        line(&out, "egress proxy"),
        "ok    egress proxy: the bridge runs in the image and listens on 127.0.0.1:3128"
    );
    assert!(line(&out, &format!("image {TEST_IMAGE} runs")).contains("network allowlist"));
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "the proxy's directory is gone"
    );
}
