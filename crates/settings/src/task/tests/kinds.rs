//! Worker kinds and the codex-cli Meta provider (SPEC §18): their keys, defaults,
//! logins and what `validate` shows of them.

use super::*;
use crate::agent::codex::CODEX;

const V1: &str = "version: 1\ntask:\n  prd: {text: x}\n";

#[test]
fn the_worker_kind_is_codex_unless_named_in_either_shape() {
    assert_eq!(ok(V1).worker.kind.name(), "codex-cli");
    let claude = ok(&format!(
        "{V1}runner:\n  worker: {{kind: claude-code-cli, base_url: 'http://gw.example:8080/'}}\n"
    ));
    assert_eq!(claude.worker.kind.name(), "claude-code-cli");
    assert_eq!(
        claude.worker.base_url.as_deref(),
        Some("http://gw.example:8080"),
        "without the trailing slash"
    );
    let tc = ok(
        "task:\n  id: a\n  title: t\n  instructions: i\n  project: {root_dir: .}\nrunner:\n  meta: {model: m}\n  worker: {type: docker_claude_code_cli}\n",
    );
    assert_eq!(tc.worker.kind.name(), "claude-code-cli");
    let e = err(
        "task:\n  id: a\n  title: t\n  instructions: i\n  project: {root_dir: .}\nrunner:\n  meta: {model: m}\n  worker: {type: docker_claude}\n",
    );
    assert_error(
        &e,
        "runner.worker.type",
        "must be one of docker_codex_cli, docker_claude_code_cli",
    );
    for bad in [
        "ftp://x",
        "http://a b",
        "http://x\"y",
        "https://x'y",
        "http://x\\y",
    ] {
        assert_error(
            &err(&format!("{V1}runner:\n  worker: {{base_url: {bad:?}}}\n")),
            "runner.worker.base_url",
            "must be an http:// or https:// URL without spaces or quotes",
        );
    }
    let out = resolved_yaml(&claude);
    assert!(out.contains("kind: claude-code-cli\n"), "{out}");
    assert!(out.contains("base_url: http://gw.example:8080\n"), "{out}");
    assert!(out.contains("claude_auth: none\n"), "{out}");
    assert!(out.contains("allow:\n    - gw.example:8080\n"), "{out}");
}

#[test]
fn claude_logs_in_with_its_key_by_name_and_the_key_is_a_secret() {
    let dir = Scratch::new();
    let key = "sk-ant-api03-0123456789";
    let task = parse_in(
        &dir.0,
        &[KEY, ("ANTHROPIC_API_KEY", key)],
        &format!("{V1}runner:\n  worker: {{kind: claude-code-cli}}\n  meta: {{system_prompt: 'not {key}'}}\n"),
    )
    .unwrap();
    assert_eq!(
        task.login,
        Login::Key {
            var: "ANTHROPIC_API_KEY",
            value: Secret::new(key.into())
        }
    );
    assert_eq!(task.meta.system_prompt.as_deref(), Some("not ***"));
    assert!(resolved_yaml(&task).contains("claude_auth: '*** (env:ANTHROPIC_API_KEY)'"));
    assert_eq!(task.worker.allow.entries(), ["api.anthropic.com"]);
}

#[test]
fn codex_as_meta_needs_no_openai_key_and_takes_its_own_settings() {
    let dir = Scratch::new();
    let yaml = format!(
        "{V1}runner:\n  meta:\n    kind: codex-cli\n    docker_image: meta-image:1\n    extra_args: ['-c', 'x=1']\n    env: {{A: 'env:META_SECRET', B: plain}}\n"
    );
    // No OPENAI_API_KEY on this host.
    let task = parse_in(&dir.0, &[("META_SECRET", "meta-secret-0123")], &yaml).unwrap();
    let MetaBackend::CodexCli(codex) = &task.meta.backend else {
        panic!("{:?}", task.meta.backend)
    };
    assert_eq!(task.meta.timeout.as_secs(), 600, "10 min per call");
    assert_eq!(task.meta.model, crate::task::CODEX_DEFAULT_MODEL);
    assert_eq!(codex.model, None, "no -m: codex's own default");
    let settings = codex.worker_settings(&task.worker, task.meta.timeout);
    assert_eq!(settings.kind.name(), "codex-cli");
    assert_eq!(settings.docker_image, "meta-image:1");
    assert_eq!(settings.extra_args, ["-c", "x=1"]);
    assert_eq!(settings.max_run_time.as_secs(), 600);
    assert_eq!(settings.network, task.worker.network);
    assert!(
        task.secrets()
            .iter()
            .any(|s| s.expose() == "meta-secret-0123")
    );
    let out = resolved_yaml(&task);
    assert!(out.contains("kind: codex-cli\n"), "{out}");
    assert!(out.contains("docker_image: meta-image:1\n"), "{out}");
    assert!(out.contains("A: '*** (env:META_SECRET)'"), "{out}");
    assert!(!out.contains("meta-secret"), "{out}");
    // Without settings of its own, the worker's (codex too) are Meta's.
    let task = parse_in(
        &dir.0,
        &[],
        &format!("{V1}runner:\n  meta: {{kind: codex-cli, model: o3, timeout_sec: 30}}\n  worker: {{model: w, extra_args: [--x], env: {{C: d}}}}\n"),
    )
    .unwrap();
    let MetaBackend::CodexCli(codex) = &task.meta.backend else {
        panic!()
    };
    let settings = codex.worker_settings(&task.worker, task.meta.timeout);
    assert_eq!(
        (
            settings.model.as_deref(),
            settings.extra_args.as_slice(),
            settings.env.len()
        ),
        (Some("o3"), ["--x".to_string()].as_slice(), 1)
    );
    assert_eq!(settings.idle_timeout.as_secs(), 30);
    // A claude worker's settings are not codex's.
    let task = parse_in(
        &dir.0,
        &[],
        &format!("{V1}runner:\n  meta: {{kind: codex-cli}}\n  worker: {{kind: claude-code-cli, model: w, extra_args: [--x], env: {{C: d}}}}\n"),
    )
    .unwrap();
    let MetaBackend::CodexCli(codex) = &task.meta.backend else {
        panic!()
    };
    let settings = codex.worker_settings(&task.worker, task.meta.timeout);
    assert_eq!(
        (
            settings.model,
            settings.extra_args.len(),
            settings.env.len()
        ),
        (None, 0, 0)
    );
    assert_eq!(*settings.kind, *(&CODEX as &dyn crate::agent::Kind));
    assert_eq!(
        task.worker.allow.entries(),
        ["api.anthropic.com", "api.openai.com"],
        "claude's host and Meta's codex's"
    );
}

#[test]
fn keys_of_one_meta_kind_are_errors_with_another() {
    let e = errs(&format!(
        "{V1}runner:\n  meta: {{kind: codex-cli, api_key: 'env:X', script: s.yaml, temperature: 0.5}}\n"
    ));
    let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "runner.meta.temperature",
            "runner.meta.api_key",
            "runner.meta.script"
        ],
        "{e:#?}"
    );
    assert!(
        e[1].message.contains("not used by `kind: codex-cli`"),
        "{e:#?}"
    );
    let e = errs(&format!(
        "{V1}runner:\n  meta: {{docker_image: x, extra_args: [], env: {{}}}}\n"
    ));
    let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "runner.meta.docker_image",
            "runner.meta.extra_args",
            "runner.meta.env"
        ]
    );
    assert!(e[0].message.contains("only used with `kind: codex-cli`"));
    assert_error(
        &err(&format!(
            "{V1}runner:\n  meta: {{kind: codex-cli, env: {{HTTPS_PROXY: x}}}}\n"
        )),
        "runner.meta.env.HTTPS_PROXY",
        "is set by agent-runner",
    );
    assert_error(
        &err(&format!(
            "{V1}runner:\n  meta: {{kind: codex-cli, env: {{PATH: 'env:P'}}}}\n"
        )),
        "runner.meta.env.PATH",
        "cannot take its value from the host",
    );
}

#[test]
fn a_taskconfig_with_codex_as_meta_needs_no_model() {
    let task = ok(
        "task:\n  id: a\n  title: t\n  instructions: i\n  project: {root_dir: .}\nrunner:\n  meta: {kind: codex-cli}\n  worker: {type: docker_codex_cli}\n",
    );
    assert!(matches!(task.meta.backend, MetaBackend::CodexCli(_)));
}
