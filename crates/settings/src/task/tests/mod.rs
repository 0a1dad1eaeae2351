//! Tests of `parse` as a whole: each shape's fields and defaults here; every problem
//! at once in `reporting`, what comes from the host in `host`, the newer settings in
//! `settings`, prices and budgets in `bounds`, credentials on command lines in `argv`.

mod argv;
mod bounds;
mod host;
mod kinds;
mod mcp;
mod meta_kinds;
mod reporting;
mod settings;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use quickcheck::{Arbitrary, Gen, quickcheck};

use super::paths::MAX_PRD_BYTES;
use super::*;

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir =
            std::env::temp_dir().join(format!("agent-runner-task-test-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(std::fs::canonicalize(dir).unwrap())
    }

    fn file(&self, name: &str, content: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn parse_in(dir: &Path, vars: &[(&str, &str)], yaml: &str) -> Result<Task, InputErrors> {
    let vars: Vec<(&str, OsString)> = vars.iter().map(|(k, v)| (*k, OsString::from(v))).collect();
    parse_on(Ok(dir.to_path_buf()), &vars, yaml)
}

/// Parses on a host with exactly these variables (any bytes) and this current
/// directory (or why there is none).
fn parse_on(
    cwd: Result<PathBuf, std::io::Error>,
    vars: &[(&str, OsString)],
    yaml: &str,
) -> Result<Task, InputErrors> {
    let vars: HashMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let lookup = move |name: &str| vars.get(name).cloned();
    parse(yaml, &Host { var: &lookup, cwd })
}

/// (path, category) of every problem, in report order.
fn summary(errors: &InputErrors) -> Vec<(String, Category)> {
    errors
        .iter()
        .map(|e| (e.path.clone(), e.category))
        .collect()
}

/// The first problem reported.
fn first(errors: InputErrors) -> InputError {
    errors.iter().next().cloned().expect("at least one problem")
}

const KEY: (&str, &str) = ("OPENAI_API_KEY", "sk-test-0123456789");

fn ok(yaml: &str) -> Task {
    let dir = Scratch::new();
    parse_in(&dir.0, &[KEY], yaml).unwrap_or_else(|e| panic!("{e}"))
}

/// Every problem reported for `yaml`, in report order.
fn errs(yaml: &str) -> Vec<InputError> {
    let dir = Scratch::new();
    match parse_in(&dir.0, &[KEY], yaml) {
        Ok(task) => panic!("expected an error, got {task:?}"),
        Err(e) => e.iter().cloned().collect(),
    }
}

/// The only problem reported for `yaml`.
fn err(yaml: &str) -> InputError {
    let mut all = errs(yaml);
    assert_eq!(all.len(), 1, "expected one problem, got {all:#?}");
    all.remove(0)
}

/// Asserts the error is about `path` and says `words`.
fn assert_error(e: &InputError, path: &str, words: &str) {
    assert_eq!(e.path, path, "wrong field in: {e}");
    assert!(
        e.message.contains(words),
        "message {:?} lacks {words:?}",
        e.message
    );
}

#[test]
fn minimal_v1_gets_every_default() {
    let dir = Scratch::new();
    let task = parse_in(
        &dir.0,
        &[KEY],
        "version: 1\ntask:\n  prd:\n    text: Build it\n",
    )
    .unwrap();
    assert_eq!(task.shape, Shape::V1);
    assert!(task.id_generated);
    assert_eq!(task.id.len(), 36);
    assert_eq!(task.title, task.id);
    assert_eq!(task.repo, dir.0);
    assert_eq!(task.prd.text, "Build it");
    assert_eq!(task.prd.source, PrdSource::Inline);
    assert!(task.test.is_none());
    // The seed's default read as the model and its effort (SPEC §20).
    assert_eq!(task.meta.model, "gpt-5.1-codex-max");
    assert_eq!(
        task.meta.reasoning_effort,
        Some(Effort {
            level: EffortLevel::High,
            from: EffortSource::Default
        })
    );
    assert_eq!(task.meta.kind(), "openai-responses");
    assert_eq!(
        task.meta.kind_reason,
        "the default (runner.meta.kind not given)"
    );
    assert_eq!(task.meta.max_loops, 5);
    assert_eq!(task.meta.timeout, Duration::from_secs(60));
    assert_eq!(task.meta.temperature, None);
    match &task.meta.backend {
        MetaBackend::Api(api) => {
            assert_eq!(api.base_url, DEFAULT_BASE_URL);
            let key = api.api_key.as_ref().unwrap();
            assert_eq!(key.source, "env:OPENAI_API_KEY");
            assert_eq!(key.value.expose(), KEY.1);
            assert!(api.structured && api.headers.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(task.worker.docker_image, DEFAULT_DOCKER_IMAGE);
    assert_eq!(task.worker.max_run_time, Duration::from_secs(1800));
    assert_eq!(task.worker.idle_timeout, Duration::from_secs(600));
    assert_eq!(task.worker.network, Network::Allowlist);
    assert_eq!(task.worker.allow.entries(), ["api.openai.com"]);
    assert!(task.worker.env.is_empty() && task.worker.extra_args.is_empty());
}

#[test]
fn full_v1_reads_every_field() {
    let dir = Scratch::new();
    dir.file("repo/docs/T.md", b"# PRD\nDo it.\n");
    let yaml = "version: 1
task:
  id: T-1.x_y
  title: Title here
  repo: repo
  prd:
    path: repo/docs/T.md
  test:
    command: make check
    cwd: ./sub/dir/
    timeout_sec: 30
runner:
  meta:
    kind: openai-chat
    model: gpt-x
    base_url: http://127.0.0.1:9/v1/
    api_key: env:MY_KEY
    temperature: 0.5
    system_prompt: be brief
    max_loops: 3
    timeout_sec: 7
  worker:
    kind: codex-cli
    docker_image: img:1
    max_run_time_sec: 99
    model: o4
    extra_args: [--foo, bar]
    idle_timeout_sec: 11
    network: none
    env:
      CODEX_API_KEY: env:HOST_CODEX
      PLAIN: literal value
";
    let task = parse_in(
        &dir.0,
        &[("MY_KEY", "key-value-1"), ("HOST_CODEX", "codex-secret-2")],
        yaml,
    )
    .unwrap();
    assert_eq!(task.id, "T-1.x_y");
    assert!(!task.id_generated);
    assert_eq!(task.title, "Title here");
    assert_eq!(task.repo, dir.0.join("repo"));
    assert_eq!(
        task.prd.source,
        PrdSource::File(dir.0.join("repo/docs/T.md"))
    );
    assert_eq!(
        task.test,
        Some(TestSpec {
            command: "make check".into(),
            cwd: "sub/dir".into(),
            timeout: Duration::from_secs(30)
        })
    );
    assert_eq!(task.meta.model, "gpt-x");
    assert_eq!(task.meta.temperature, Some(0.5));
    assert_eq!(task.meta.system_prompt.as_deref(), Some("be brief"));
    assert_eq!(task.meta.max_loops, 3);
    assert_eq!(task.meta.timeout, Duration::from_secs(7));
    match &task.meta.backend {
        MetaBackend::Api(api) => {
            assert_eq!(api.wire, Wire::OpenAiChat);
            assert_eq!(api.base_url, "http://127.0.0.1:9/v1");
            assert_eq!(api.api_key.as_ref().unwrap().value.expose(), "key-value-1");
            assert!(!api.structured, "YAML text unless asked");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(task.meta.reasoning_effort, None);
    assert_eq!(task.worker.docker_image, "img:1");
    assert_eq!(task.worker.max_run_time, Duration::from_secs(99));
    assert_eq!(task.worker.idle_timeout, Duration::from_secs(11));
    assert_eq!(task.worker.model.as_deref(), Some("o4"));
    assert_eq!(task.worker.extra_args, ["--foo", "bar"]);
    assert_eq!(task.worker.network, Network::None);
    let env: Vec<(&str, &str)> = task
        .worker
        .env
        .iter()
        .map(|e| (e.name.as_str(), e.value.expose()))
        .collect();
    assert_eq!(
        env,
        [
            ("CODEX_API_KEY", "codex-secret-2"),
            ("PLAIN", "literal value")
        ]
    );
    let secrets: Vec<String> = task
        .secrets()
        .iter()
        .map(|s| s.expose().to_string())
        .collect();
    assert_eq!(secrets, ["key-value-1", "codex-secret-2"]);
}

#[test]
fn base_url_and_timeout_come_from_the_environment_when_absent() {
    let dir = Scratch::new();
    let task = parse_in(
        &dir.0,
        &[
            KEY,
            ("OPENAI_BASE_URL", "http://localhost:1/v1/"),
            ("META_TIMEOUT_SEC", "9"),
        ],
        "version: 1\ntask: {prd: {text: x}}\n",
    )
    .unwrap();
    assert_eq!(task.meta.timeout, Duration::from_secs(9));
    match &task.meta.backend {
        MetaBackend::Api(api) => {
            assert_eq!(api.base_url, "http://localhost:1/v1");
            assert_eq!(api.wire, Wire::OpenAiChat, "another host speaks Chat");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        task.meta
            .kind_reason
            .contains("OPENAI_BASE_URL naming another host"),
        "{}",
        task.meta.kind_reason
    );
    let e = parse_in(
        &dir.0,
        &[KEY, ("META_TIMEOUT_SEC", "soon")],
        "version: 1\ntask: {prd: {text: x}}\n",
    )
    .map_err(first)
    .unwrap_err();
    assert_error(&e, "META_TIMEOUT_SEC", "whole number");
}

#[test]
fn version_must_be_one() {
    assert_error(
        &err("version: 2\ntask: {prd: {text: x}}\n"),
        "version",
        "must be 1 (got 2)",
    );
    assert_error(
        &err("version: '1'\ntask: {prd: {text: x}}\n"),
        "version",
        "must be 1 (got '1')",
    );
    assert_error(
        &err("version:\ntask: {prd: {text: x}}\n"),
        "version",
        "must be 1",
    );
    assert_error(&err("task: {prd: {text: x}}\n"), "version", "missing");
}

#[test]
fn prd_needs_exactly_one_non_empty_source() {
    assert_error(&err("version: 1\ntask: {id: a}\n"), "task.prd", "required");
    assert_error(&err("version: 1\ntask: {prd: {}}\n"), "task.prd", "neither");
    assert_error(
        &err("version: 1\ntask: {prd: {text: '  '}}\n"),
        "task.prd",
        "neither",
    );
    assert_error(
        &err("version: 1\ntask: {prd: {text: a, path: b}}\n"),
        "task.prd",
        "got both",
    );
}

#[test]
fn prd_file_problems_name_the_file() {
    let dir = Scratch::new();
    let run = |yaml: &str| parse_in(&dir.0, &[KEY], yaml).map_err(first).unwrap_err();
    let e = run("version: 1\ntask: {prd: {path: docs/missing.md}}\n");
    assert_error(&e, "task.prd.path", "docs/missing.md not readable");
    assert!(
        e.message
            .contains(&dir.0.join("docs/missing.md").display().to_string())
    );
    assert!(e.hint.as_deref().unwrap().contains("current directory"));
    dir.file("d/x", b"");
    assert_error(
        &run("version: 1\ntask: {prd: {path: d}}\n"),
        "task.prd.path",
        "not a file",
    );
    assert_error(
        &run("version: 1\ntask: {prd: {path: d/x}}\n"),
        "task.prd.path",
        "empty",
    );
    dir.file("bin.md", b"ok\xff\xfe");
    assert_error(
        &run("version: 1\ntask: {prd: {path: bin.md}}\n"),
        "task.prd.path",
        "not UTF-8",
    );
    let big = std::fs::File::create(dir.0.join("big.md")).unwrap();
    big.set_len(MAX_PRD_BYTES + 1).unwrap();
    assert_error(
        &run("version: 1\ntask: {prd: {path: big.md}}\n"),
        "task.prd.path",
        "the limit is",
    );
}

#[test]
fn task_id_must_be_a_safe_name() {
    for bad in ["../x", "a b", "a/b", "-x", ".hidden", "é"] {
        let e = err(&format!(
            "version: 1\ntask: {{id: {bad:?}, prd: {{text: x}}}}\n"
        ));
        assert_error(&e, "task.id", "must be 1-128 characters");
    }
    // Names git refuses as the branch agent-runner/<id>.
    for bad in ["a..b", "x.lock", "a."] {
        let e = err(&format!(
            "version: 1\ntask: {{id: {bad:?}, prd: {{text: x}}}}\n"
        ));
        assert_error(&e, "task.id", "branch agent-runner/<id>");
    }
    let long = "a".repeat(129);
    assert_error(
        &err(&format!(
            "version: 1\ntask: {{id: {long}, prd: {{text: x}}}}\n"
        )),
        "task.id",
        "1-128",
    );
    assert_eq!(
        ok(&format!(
            "version: 1\ntask: {{id: {}, prd: {{text: x}}}}\n",
            "a".repeat(128)
        ))
        .id
        .len(),
        128
    );
}

#[test]
fn unknown_kinds_are_rejected_with_a_suggestion() {
    let e = err("version: 1\ntask: {prd: {text: x}}\nrunner: {meta: {kind: openai}}\n");
    assert_error(
        &e,
        "runner.meta.kind",
        "must be one of openai-responses, openai-chat, anthropic-messages, codex-cli, scripted (got \"openai\")",
    );
    assert_eq!(e.hint.as_deref(), Some("did you mean `openai-responses`?"));
    let e = err("version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {kind: codex}}\n");
    assert_error(
        &e,
        "runner.worker.kind",
        "must be one of codex-cli, claude-code-cli",
    );
    let e = err("version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {kind: claude-code}}\n");
    assert_eq!(e.hint.as_deref(), Some("did you mean `claude-code-cli`?"));
}

#[test]
fn numeric_bounds() {
    let base = "version: 1\ntask: {prd: {text: x}}\n";
    assert_error(
        &err(&format!("{base}runner: {{meta: {{max_loops: 0}}}}\n")),
        "runner.meta.max_loops",
        "between 1 and 1000 (got 0)",
    );
    assert_error(
        &err(&format!("{base}runner: {{meta: {{max_loops: -3}}}}\n")),
        "runner.meta.max_loops",
        "non-negative integer",
    );
    assert_error(
        &err(&format!(
            "{base}runner: {{worker: {{max_run_time_sec: 0}}}}\n"
        )),
        "runner.worker.max_run_time_sec",
        "between 1 and",
    );
    assert_error(
        &err(&format!(
            "{base}runner: {{worker: {{idle_timeout_sec: 0}}}}\n"
        )),
        "runner.worker.idle_timeout_sec",
        "between 1 and",
    );
    assert_error(
        &err(&format!(
            "{base}runner: {{worker: {{max_run_time_sec: 99999999999}}}}\n"
        )),
        "runner.worker.max_run_time_sec",
        "between 1 and",
    );
    assert_error(
        &err(&format!("{base}runner: {{meta: {{timeout_sec: 0}}}}\n")),
        "runner.meta.timeout_sec",
        "between 1 and",
    );
    assert_error(
        &err(&format!("{base}runner: {{meta: {{temperature: 2.5}}}}\n")),
        "runner.meta.temperature",
        "between 0 and 2 (got 2.5)",
    );
    assert_error(
        &err(&format!("{base}runner: {{meta: {{temperature: -0.1}}}}\n")),
        "runner.meta.temperature",
        "between 0 and 2",
    );
    assert_error(
        &err(&format!("{base}runner: {{meta: {{temperature: .nan}}}}\n")),
        "runner.meta.temperature",
        "between 0 and 2",
    );
    assert_error(
        &err(&format!("{base}runner: {{meta: {{temperature: hot}}}}\n")),
        "runner.meta.temperature",
        "expected a number",
    );
    assert_eq!(
        ok(&format!(
            "{base}runner: {{meta: {{model: gpt-4.1, temperature: 2}}}}\n"
        ))
        .meta
        .temperature,
        Some(2.0)
    );
}

#[test]
fn network_is_one_of_four() {
    let e = err("version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {network: bridged}}\n");
    assert_error(&e, "runner.worker.network", "allowlist, none, bridge, host");
    assert_eq!(e.hint.as_deref(), Some("did you mean `bridge`?"));
    let task = ok("version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {network: host}}\n");
    assert_eq!(task.worker.network, Network::Host);
}

#[test]
fn allow_entries_are_checked_and_given_ones_replace_the_defaults() {
    let base = "version: 1\ntask: {prd: {text: x}}\n";
    let task = ok(&format!(
        "{base}runner: {{worker: {{allow: [pypi.org, '*.npmjs.org', 'github.com:22', '10.0.0.5:*']}}}}\n"
    ));
    assert_eq!(
        task.worker.allow.entries(),
        ["pypi.org", "*.npmjs.org", "github.com:22", "10.0.0.5:*"]
    );
    assert_eq!(task.worker.allow.origin, crate::allow::Origin::Task);
    let task = ok(&format!("{base}runner: {{worker: {{allow: []}}}}\n"));
    assert!(
        task.worker.allow.rules.is_empty(),
        "an empty list allows nothing"
    );
    let all = errs(&format!(
        "{base}runner: {{worker: {{allow: [ok.example, '*', 'a.example:0', 'http://b.example/']}}}}\n"
    ));
    let paths: Vec<&str> = all.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "runner.worker.allow[1]",
            "runner.worker.allow[2]",
            "runner.worker.allow[3]"
        ]
    );
    assert!(all[0].message.contains("network: bridge"), "{}", all[0]);
}

#[test]
fn allow_is_only_for_the_allowlist_network() {
    let e = err(
        "version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {network: bridge, allow: [pypi.org]}}\n",
    );
    assert_error(
        &e,
        "runner.worker.allow",
        "only used with network: allowlist",
    );
}

#[test]
fn the_proxy_variables_belong_to_agent_runner_with_the_allowlist() {
    let e = err(
        "version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {env: {https_proxy: 'http://elsewhere:8080'}}}\n",
    );
    assert_error(&e, "runner.worker.env.https_proxy", "set by agent-runner");
    for (network, name) in [("none", "NO_PROXY"), ("host", "HTTP_PROXY")] {
        let task = ok(&format!(
            "version: 1\ntask: {{prd: {{text: x}}}}\nrunner: {{worker: {{network: {network}, env: {{{name}: x}}}}}}\n"
        ));
        assert_eq!(task.worker.env[0].name, name, "other networks may set them");
    }
}

#[test]
fn env_references_must_be_set() {
    let e = err(
        "version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {env: {CODEX_API_KEY: 'env:NOPE_UNSET'}}}\n",
    );
    assert_error(
        &e,
        "runner.worker.env.CODEX_API_KEY",
        "NOPE_UNSET is not set",
    );
    let dir = Scratch::new();
    let e = parse_in(&dir.0, &[], "version: 1\ntask: {prd: {text: x}}\n")
        .map_err(first)
        .unwrap_err();
    assert_error(&e, "runner.meta.api_key", "OPENAI_API_KEY is not set");
    let e = err("version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {env: {'BAD-NAME': x}}}\n");
    assert_error(
        &e,
        "runner.worker.env.BAD-NAME",
        "not a valid variable name",
    );
    let e = err("version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {env: {A: 'env:'}}}\n");
    assert_error(&e, "runner.worker.env.A", "variable name");
}

#[test]
fn repo_must_be_an_existing_directory() {
    let dir = Scratch::new();
    let e = parse_in(
        &dir.0,
        &[KEY],
        "version: 1\ntask: {repo: nowhere, prd: {text: x}}\n",
    )
    .map_err(first)
    .unwrap_err();
    assert_error(&e, "task.repo", "directory nowhere not found");
    dir.file("f", b"x");
    let e = parse_in(
        &dir.0,
        &[KEY],
        "version: 1\ntask: {repo: f, prd: {text: x}}\n",
    )
    .map_err(first)
    .unwrap_err();
    assert_error(&e, "task.repo", "not a directory");
}

#[test]
fn test_section_rules() {
    let base = "version: 1\ntask:\n  prd: {text: x}\n";
    assert_error(
        &err(&format!("{base}  test: {{cwd: .}}\n")),
        "task.test.command",
        "required",
    );
    assert_error(
        &err(&format!("{base}  test: {{command: ''}}\n")),
        "task.test.command",
        "required",
    );
    assert_error(
        &err(&format!("{base}  test: {{command: t, cwd: ../up}}\n")),
        "task.test.cwd",
        "inside the repo",
    );
    assert_error(
        &err(&format!("{base}  test: {{command: t, cwd: /abs}}\n")),
        "task.test.cwd",
        "inside the repo",
    );
    assert_error(
        &err(&format!("{base}  test: {{command: t, timeout_sec: 0}}\n")),
        "task.test.timeout_sec",
        "between",
    );
    let test = ok(&format!("{base}  test: {{command: t}}\n")).test.unwrap();
    assert_eq!((test.cwd.as_str(), test.timeout.as_secs()), ("", 600));
}

#[test]
fn duplicate_keys_are_rejected() {
    assert_error(&err("version: 1\nversion: 1\n"), "version", "duplicate key");
    let e = err(
        "version: 1\ntask: {prd: {text: x}}\nrunner:\n  worker:\n    env:\n      A: x\n      A: y\n",
    );
    assert_error(&e, "runner.worker.env.A", "duplicate key");
    // serde_norway points at the mapping holding the duplicate (its first key).
    assert_eq!(e.location, Some((6, 7)));
}

#[test]
fn unknown_keys_name_their_full_path_and_the_nearest_key() {
    let e = err("version: 1\ntask: {prd: {text: x}}\nrunner:\n  meta:\n    max_loop: 3\n");
    assert_error(&e, "runner.meta.max_loop", "unknown key");
    assert_eq!(e.hint.as_deref(), Some("did you mean `max_loops`?"));
    assert_eq!(e.location, Some((5, 5)));
    let e = err("version: 1\ntask: {prd: {pth: x}}\n");
    assert_error(&e, "task.prd.pth", "unknown key");
    assert_eq!(e.hint.as_deref(), Some("did you mean `path`?"));
    let e = err("verison: 1\ntask: {prd: {text: x}}\n");
    assert_error(&e, "verison", "unknown key");
    assert_eq!(e.hint.as_deref(), Some("did you mean `version`?"));
    let e = err("version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {type: docker_codex_cli}}\n");
    assert_error(&e, "runner.worker.type", "unknown key in shape v1");
}

#[test]
fn syntax_errors_carry_line_and_column() {
    let e = err("version: 1\ntask:\n  prd: [unclosed\n");
    assert_eq!(e.path, "stdin");
    assert!(e.message.starts_with("invalid YAML"), "{e}");
    assert!(e.location.is_some(), "{e}");
    let e = err("version: 1\ntask:\n\tprd: x\n");
    assert!(e.location.is_some(), "{e}");
}

#[test]
fn documents_that_are_not_one_mapping() {
    assert_error(&err(""), "stdin", "got an empty document");
    assert_error(&err("- a\n- b\n"), "stdin", "got a list");
    assert_error(&err("hello"), "stdin", "got string \"hello\"");
    assert_error(&err("a: 1\n---\nb: 2\n"), "stdin", "several YAML documents");
}

#[test]
fn alias_bombs_are_refused() {
    let mut yaml = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
    let names: Vec<char> = ('b'..='j').collect();
    let mut prev = 'a';
    for n in names {
        yaml.push_str(&format!("{n}: &{n} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
        prev = n;
    }
    assert_error(&err(&yaml), "stdin", "alias");
}

#[test]
fn task_config_shape() {
    let dir = Scratch::new();
    let yaml = format!(
        "task:
  id: golden-todo-001
  title: TODO アプリを作成して
  instructions: |
    TODO アプリを作成して。
  project:
    root_dir: {:?}
  test:
    command: npm test
runner:
  meta:
    model: gpt-4.1
    temperature: 0.2
  worker:
    type: docker_codex_cli
",
        dir.0.display().to_string()
    );
    let task = parse_in(&dir.0, &[KEY], &yaml).unwrap();
    assert_eq!(task.shape, Shape::TaskConfig);
    assert_eq!(
        (task.id.as_str(), task.title.as_str()),
        ("golden-todo-001", "TODO アプリを作成して")
    );
    assert_eq!(task.prd.text, "TODO アプリを作成して。\n");
    assert_eq!(task.repo, dir.0);
    assert_eq!(task.meta.model, "gpt-4.1");
    assert_eq!(task.test.unwrap().command, "npm test");
    assert_eq!(task.worker.docker_image, DEFAULT_DOCKER_IMAGE);
}

#[test]
fn task_config_required_fields() {
    let full = "task:\n  id: a\n  title: t\n  instructions: i\n  project: {root_dir: .}\nrunner:\n  meta: {model: m}\n  worker: {type: docker_codex_cli}\n";
    ok(full);
    for (drop, path) in [
        ("  id: a\n", "task.id"),
        ("  title: t\n", "task.title"),
        ("  instructions: i\n", "task.instructions"),
        ("  project: {root_dir: .}\n", "task.project.root_dir"),
        ("  meta: {model: m}\n", "runner.meta"),
        ("  worker: {type: docker_codex_cli}\n", "runner.worker"),
    ] {
        assert_error(&err(&full.replace(drop, "")), path, "required");
    }
    assert_error(
        &err(&full.replace("{model: m}", "{temperature: 1}")),
        "runner.meta.model",
        "required",
    );
    assert_error(
        &err(&full.replace("{type: docker_codex_cli}", "{docker_image: x}")),
        "runner.worker.type",
        "required",
    );
    assert_error(
        &err(&full.replace("docker_codex_cli", "docker-codex")),
        "runner.worker.type",
        "docker_codex_cli",
    );
    assert_error(
        &err(&full.replace("type: docker_codex_cli", "kind: codex-cli")),
        "runner.worker.kind",
        "TaskConfig",
    );
    // `prd` is a v1 key: the document is read as v1 without its version, and that
    // is said first.
    let all = errs(&full.replace("instructions: i", "prd: {text: i}"));
    assert_error(&all[0], "version", "missing");
}

#[test]
fn scripted_meta_needs_a_script_file() {
    let dir = Scratch::new();
    dir.file("script.yaml", b"[]");
    let base = "version: 1\ntask: {prd: {text: x}}\n";
    let task = parse_in(
        &dir.0,
        &[],
        &format!("{base}runner: {{meta: {{kind: scripted, script: script.yaml}}}}\n"),
    )
    .unwrap();
    match &task.meta.backend {
        MetaBackend::Scripted { script } => assert_eq!(script, &dir.0.join("script.yaml")),
        other => panic!("{other:?}"),
    }
    assert!(task.secrets().is_empty());
    let e = parse_in(
        &dir.0,
        &[],
        &format!("{base}runner: {{meta: {{kind: scripted}}}}\n"),
    )
    .map_err(first)
    .unwrap_err();
    assert_error(&e, "runner.meta.script", "required");
    let e = parse_in(
        &dir.0,
        &[],
        &format!("{base}runner: {{meta: {{kind: scripted, script: no.yaml}}}}\n"),
    )
    .map_err(first)
    .unwrap_err();
    assert_error(&e, "runner.meta.script", "not found");
    let e = parse_in(
        &dir.0,
        &[KEY],
        &format!("{base}runner: {{meta: {{script: script.yaml}}}}\n"),
    )
    .map_err(first)
    .unwrap_err();
    assert_error(&e, "runner.meta.script", "only used with");
}

#[test]
fn arguments_cannot_become_options() {
    let base = "version: 1\ntask: {prd: {text: x}}\n";
    assert_error(
        &err(&format!(
            "{base}runner: {{worker: {{docker_image: --privileged}}}}\n"
        )),
        "runner.worker.docker_image",
        "must not start with `-`",
    );
    assert_error(
        &err(&format!("{base}runner: {{worker: {{model: '-x'}}}}\n")),
        "runner.worker.model",
        "must not start with `-`",
    );
    assert_error(
        &err(&format!(
            "{base}runner: {{meta: {{base_url: 'ftp://x'}}}}\n"
        )),
        "runner.meta.base_url",
        "http://",
    );
}

#[test]
fn resolved_view_masks_secrets_and_shows_defaults() {
    let dir = Scratch::new();
    let prd = "p".repeat(300);
    let yaml = format!(
        "version: 1\ntask:\n  id: v\n  prd: {{text: {prd}}}\nrunner:\n  worker:\n    env: {{S: 'env:SECRET_VAR', L: plain}}\n"
    );
    let task = parse_in(&dir.0, &[KEY, ("SECRET_VAR", "hunter2-secret")], &yaml).unwrap();
    let out = resolved_yaml(&task);
    assert!(
        !out.contains(KEY.1) && !out.contains("hunter2-secret"),
        "{out}"
    );
    assert!(out.contains("api_key: '*** (env:OPENAI_API_KEY)'"), "{out}");
    assert!(out.contains("S: '*** (env:SECRET_VAR)'"), "{out}");
    assert!(out.contains("L: plain"), "{out}");
    assert!(out.contains("chars: 300"), "{out}");
    assert!(
        out.contains(&format!("start: {}\n", "p".repeat(200))),
        "{out}"
    );
    for default in [
        "max_loops: 5",
        "timeout_sec: 60",
        "max_run_time_sec: 1800",
        "idle_timeout_sec: 600",
        "network: allowlist",
        "allow:\n    - api.openai.com\n",
        "docker_image: agent-runner-codex:latest",
        "kind: openai-responses\n",
        "kind_from: the default (runner.meta.kind not given)\n",
        "model: gpt-5.1-codex-max\n",
        "reasoning_effort: high (the built-in default's)\n",
        "structured: true\n",
        "test: null",
    ] {
        assert!(out.contains(default), "missing {default} in\n{out}");
    }
}

/// Text built from YAML-ish fragments, to reach deeper into the parser than random bytes.
#[derive(Debug, Clone)]
struct YamlLike(String);

impl Arbitrary for YamlLike {
    fn arbitrary(g: &mut Gen) -> Self {
        const PIECES: &[&str] = &[
            "version: 1\n",
            "task:\n",
            "  prd:\n",
            "    text: x\n",
            "    path: p\n",
            "runner:\n",
            "  meta:\n",
            "    max_loops: ",
            "  worker:\n",
            "    env:\n",
            "      A: env:B\n",
            "- ",
            "[",
            "]",
            "{",
            "}",
            ": ",
            "&a ",
            "*a ",
            "!!str ",
            "---\n",
            "...\n",
            "'",
            "\"",
            "\t",
            "\n",
            " ",
            "#",
            "|\n",
            ">\n",
            "? ",
            ",",
            "~",
            "0",
            "-1",
            "1e400",
            "\u{feff}",
            "\u{0}",
            "é",
            "\r",
        ];
        let len = usize::arbitrary(g) % 40;
        let text = (0..len).map(|_| *g.choose(PIECES).unwrap_or(&"")).collect();
        YamlLike(text)
    }
}

quickcheck! {
    fn arbitrary_bytes_never_panic(bytes: Vec<u8>) -> bool {
        let text = String::from_utf8_lossy(&bytes);
        let dir = std::env::temp_dir();
        let _ = parse_in(&dir, &[KEY], &text);
        true
    }

    fn yaml_like_text_never_panics(text: YamlLike) -> bool {
        let dir = std::env::temp_dir();
        let _ = parse_in(&dir, &[KEY], &text.0);
        true
    }
}
