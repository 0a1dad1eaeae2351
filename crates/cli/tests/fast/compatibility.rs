//! `validate` on what a newcomer writes first (SPEC §24): a model server on the
//! host's loopback under `network: allowlist` is refused with the fix, before
//! anything runs; a written `allow` that lacks the worker's model or login host is
//! named in a warning; `keep_untracked` is shown.

use crate::support;

use support::task_yaml::TaskYaml;
use support::{Run, Scratch};

const KEY: &str = "sk-compat-test-0123456789";

fn validate(dir: &Scratch, yaml: &TaskYaml) -> support::Outcome {
    Run::new(&["validate"])
        .env("HOME", &dir.path)
        .env("OPENAI_API_KEY", KEY)
        .stdin(yaml.to_string())
        .output()
}

/// A task in `dir`/repo (HOME is `dir`).
fn task(dir: &Scratch) -> TaskYaml {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    TaskYaml::new("compat", &repo, "Make it work.")
}

#[test]
fn a_model_server_on_the_hosts_loopback_is_refused_under_allowlist_with_the_fix() {
    let dir = Scratch::new("compat-loopback");
    for url in [
        "http://127.0.0.1:4000/v1",
        "http://localhost:11434/v1",
        "http://user:pw@LOCALHOST:8000/v1",
    ] {
        let out = validate(&dir, &task(&dir).set("runner.worker.base_url", url));
        out.code(1)
            .stderr_has("runner.worker.base_url: ")
            .stderr_has("is on this host's loopback")
            .stderr_has("runner.worker.network: host");
        // A codex provider of the user's, in extra_args, the same.
        let provider =
            format!("model_providers.gw={{name=\"gw\",base_url=\"{url}\",wire_api=\"responses\"}}");
        let out = validate(
            &dir,
            &task(&dir).set(
                "runner.worker.extra_args",
                ["-c", &provider, "-c", "model_provider=gw"],
            ),
        );
        out.code(1)
            .stderr_has("runner.worker.extra_args: ")
            .stderr_has("is on this host's loopback");
    }
    // Through the proxy (another loopback address), or with the host's network: fine.
    validate(
        &dir,
        &task(&dir).set("runner.worker.base_url", "http://127.0.0.2:4000/v1"),
    )
    .code(0);
    validate(
        &dir,
        &task(&dir)
            .set("runner.worker.base_url", "http://127.0.0.1:4000/v1")
            .set("runner.worker.network", "host"),
    )
    .code(0);
}

#[test]
fn a_written_allow_list_without_the_model_host_is_warned_about() {
    let dir = Scratch::new("compat-allow");
    let out = validate(&dir, &task(&dir).set("runner.worker.allow", ["pypi.org"]));
    out.code(0).stderr_has(
        "runner.worker.allow lacks api.openai.com (codex's default API host): the worker cannot reach it",
    );
    let out = validate(
        &dir,
        &task(&dir).set("runner.worker.allow", ["pypi.org", "api.openai.com"]),
    );
    out.code(0);
    assert!(!out.stderr.contains("lacks"), "{}", out.stderr);
    // A ChatGPT login needs its login hosts too.
    std::fs::create_dir_all(dir.join(".codex")).unwrap();
    dir.file(
        ".codex/auth.json",
        r#"{"OPENAI_API_KEY": null, "tokens": {"id_token": "x", "access_token": "y", "refresh_token": "z", "account_id": "a"}, "last_refresh": "2026-01-01T00:00:00Z"}"#,
    );
    let out = validate(
        &dir,
        &task(&dir).set("runner.worker.allow", ["api.openai.com"]),
    );
    out.code(0)
        .stderr_has("lacks chatgpt.com (codex with a ChatGPT login)")
        .stderr_has("lacks auth.openai.com (codex with a ChatGPT login)");
}

#[test]
fn keep_untracked_is_shown_and_read() {
    let dir = Scratch::new("compat-keep");
    validate(&dir, &task(&dir))
        .code(0)
        .stdout_has("keep_untracked: false");
    validate(&dir, &task(&dir).set("runner.worker.keep_untracked", true))
        .code(0)
        .stdout_has("keep_untracked: true");
    validate(&dir, &task(&dir).set("runner.worker.keep_untracked", "yes"))
        .code(1)
        .stderr_has("runner.worker.keep_untracked");
}

/// `validate` shows `task.setup` (its hosts and its variables, masked),
/// `runner.worker.caches` and `runner.worker.agent_from`: a newcomer saw none of
/// them and could not tell whether they were read.
#[test]
fn validate_shows_setup_caches_and_where_the_agent_comes_from() {
    let dir = Scratch::new("compat-setup");
    let yaml = task(&dir)
        .set("task.setup.command", "pip install -r requirements.txt")
        .set("task.setup.timeout_sec", 300)
        .set("task.setup.allow", ["pypi.org", "files.pythonhosted.org"])
        .set("task.setup.env.PIP_INDEX_TOKEN", "env:OPENAI_API_KEY")
        .set("runner.worker.caches", ["/root/.cache/pip"])
        .set("runner.worker.agent_from", "tools");
    let out = validate(&dir, &yaml);
    out.code(0)
        .stdout_has("  setup:\n    command: pip install -r requirements.txt\n    timeout_sec: 300\n    allow:\n    - pypi.org\n    - files.pythonhosted.org\n")
        .stdout_has("    env:\n      PIP_INDEX_TOKEN: '*** (env:OPENAI_API_KEY)'\n")
        .stdout_has("    agent_from: tools\n    caches:\n    - /root/.cache/pip\n");
    assert!(!out.stdout.contains(KEY), "{}", out.stdout);
    let plain = validate(&dir, &task(&dir));
    plain
        .code(0)
        .stdout_has("    agent_from: auto\n    caches: []\n");
    assert!(!plain.stdout.contains("  setup:"), "{}", plain.stdout);
}
