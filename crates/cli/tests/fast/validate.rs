//! `agent-runner validate` driven as a user would: YAML on stdin, result on stdout,
//! errors on stderr with exit code 1.

use crate::support;

use std::path::Path;

use support::{Run, Scratch};

const KEY: &str = "sk-validate-test-0123456789";

fn validate(dir: &Scratch, yaml: &str) -> support::Outcome {
    Run::new(&["validate"])
        .cwd(&dir.path)
        .env("OPENAI_API_KEY", KEY)
        .stdin(yaml)
        .output()
}

#[test]
fn seed_spec_v1_example_validates() {
    let dir = Scratch::new("seed-v1");
    dir.file("docs/TASK-123.md", "# ユーザ登録 API\n");
    let out = validate(
        &dir,
        include_str!("../../../../testdata/seeds/spec-v1-full.yaml"),
    );
    out.code(0)
        .stdout_has("id: TASK-123")
        .stdout_has("title: ユーザ登録 API の実装")
        .stdout_has(&format!("repo: {}", dir.path.display()))
        .stdout_has("command: npm test")
        .stdout_has("model: gpt-5.1\n")
        .stdout_has("docker_image: agent-runner-codex:latest");
    assert!(!out.stdout.contains(KEY));
}

#[test]
fn seed_data_flow_example_validates() {
    let dir = Scratch::new("seed-flow");
    dir.file("docs/prd.md", "Implement the API.\n");
    validate(
        &dir,
        include_str!("../../../../testdata/seeds/data-flow.yaml"),
    )
    .code(0)
    .stdout_has("title: Implement API")
    .stdout_has("max_loops: 5")
    .stdout_has("chars: 19");
}

#[test]
fn seed_task_config_example_validates() {
    let dir = Scratch::new("seed-taskconfig");
    // The seed's root_dir is a placeholder; point it at a real directory.
    let yaml = include_str!("../../../../testdata/seeds/task-config.yaml")
        .replace("/path/to/workspace", &dir.path.display().to_string());
    validate(&dir, &yaml)
        .code(0)
        .stdout_has("shape: task-config")
        .stdout_has("id: golden-todo-001")
        .stdout_has("model: gpt-4.1")
        .stdout_has("temperature: 0.2")
        .stdout_has("start: |\n      TODO アプリを作成して。");
}

#[test]
fn unknown_key_exits_1_with_path_position_and_suggestion() {
    let dir = Scratch::new("unknown-key");
    let out = validate(
        &dir,
        "version: 1\ntask:\n  prd: {text: x}\nrunner:\n  meta:\n    max_loop: 3\n",
    );
    out.code(1)
        .stderr_has("error: runner.meta.max_loop: unknown key (line 6, column 5)")
        .stderr_has("hint: did you mean `max_loops`?");
    assert!(out.stdout.is_empty());
}

#[test]
fn malformed_documents_exit_1_with_a_reason() {
    let dir = Scratch::new("malformed");
    let cases: &[(&[u8], &str)] = &[
        (b"", "error: stdin: expected a YAML mapping"),
        (b"\xff\xfe\x00", "error: stdin: not valid UTF-8 (invalid byte at line 1, column 1)"),
        (b"version: 1\nx: \xc3\n", "not valid UTF-8 (invalid byte at line 2, column 4)"),
        (b"- a\n- b\n", "(got a list)"),
        (b"42", "(got number 42)"),
        (b"version: 1\n---\nversion: 1\n", "several YAML documents"),
        (b"version: 1\ntask: [\n", "error: stdin: invalid YAML"),
        (b"version: 1\ntask: {prd: {text: x}, id: 'a b'}\n", "error: task.id: must be"),
        (b"version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {env: {K: 'env:AGENT_RUNNER_UNSET_VAR'}}}\n",
         "error: runner.worker.env.K: environment variable AGENT_RUNNER_UNSET_VAR is not set"),
    ];
    for (input, expected) in cases {
        let out = Run::new(&["validate"])
            .cwd(&dir.path)
            .env("OPENAI_API_KEY", KEY)
            .stdin(input)
            .output();
        out.code(1).stderr_has(expected);
    }
}

#[test]
fn alias_bomb_is_refused_quickly() {
    let dir = Scratch::new("bomb");
    let mut yaml = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let mut prev = 'a';
    for name in 'b'..='i' {
        let refs = vec![format!("*{prev}"); 9].join(",");
        yaml.push_str(&format!("{name}: &{name} [{refs}]\n"));
        prev = name;
    }
    validate(&dir, &yaml).code(1).stderr_has("alias");
}

#[test]
fn deep_nesting_is_refused_where_it_gets_too_deep() {
    let dir = Scratch::new("deep");
    // 400 KB of `{a: ` took serde_norway about half a minute; refused before it parses.
    let yaml = format!("version: 1\ntask:\n  prd: {}", "{a: ".repeat(100_000));
    validate(&dir, &yaml)
        .code(1)
        .stderr_has("error: stdin: YAML nested deeper than 32 levels (line 3, column 128)");
    let block: String = (0..40)
        .map(|n| format!("{}k{n}:\n", " ".repeat(n)))
        .collect();
    validate(&dir, &format!("version: 1\nrunner:\n{block}"))
        .code(1)
        .stderr_has("YAML nested deeper than 32 levels (line 35, column 33)");
}

#[test]
fn large_documents_are_bounded() {
    let dir = Scratch::new("large");
    let prd = "x".repeat(10 << 20);
    validate(
        &dir,
        &format!("version: 1\ntask:\n  prd:\n    text: {prd}\n"),
    )
    .code(0)
    .stdout_has(&format!("chars: {}", 10 << 20));
    let huge = "#".repeat(17 << 20);
    validate(&dir, &huge)
        .code(1)
        .stderr_has("larger than 16777216 bytes");
}

#[test]
fn secrets_never_reach_stdout_or_stderr() {
    let dir = Scratch::new("secrets");
    let yaml = "version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {env: {CODEX_API_KEY: 'env:MY_CODEX_KEY'}}}\n";
    let out = Run::new(&["validate"])
        .cwd(&dir.path)
        .env("OPENAI_API_KEY", KEY)
        .env("MY_CODEX_KEY", "codex-sentinel-98765")
        .stdin(yaml)
        .output();
    out.code(0)
        .stdout_has("CODEX_API_KEY: '*** (env:MY_CODEX_KEY)'");
    for text in [&out.stdout, &out.stderr] {
        assert!(
            !text.contains(KEY) && !text.contains("codex-sentinel-98765"),
            "{text}"
        );
    }
}

#[test]
fn usage_errors_exit_2() {
    Run::new(&["frobnicate"])
        .output()
        .code(2)
        .stderr_has("unrecognized subcommand");
    Run::new(&[]).output().code(2);
    Run::new(&["--version"])
        .output()
        .code(0)
        .stdout_has("agent-runner 0.1.0");
}

#[test]
fn every_problem_is_listed_schema_before_environment() {
    let dir = Scratch::new("all-problems");
    let yaml = "version: 1
task:
  prd: {text: x}
  titel: t
runner:
  meta: {max_loop: 3}
  worker:
    max_run_time_sec: 0
    network: bogus
    idle_timeout_sec: soon
    env: {PATH: 'env:HOST_PATH', T: 'env:AGENT_RUNNER_UNSET_VAR'}
";
    // OPENAI_API_KEY is not set: reported, but after every problem of the YAML.
    let out = Run::new(&["validate"]).cwd(&dir.path).stdin(yaml).output();
    out.code(1);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("error: "))
        .map(|l| l.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        errors,
        [
            "task.titel",
            "runner.meta.max_loop",
            "runner.worker.idle_timeout_sec",
            "runner.worker.max_run_time_sec",
            "runner.worker.network",
            "runner.worker.env.PATH",
            "runner.meta.api_key",
            "runner.worker.env.T",
        ],
        "{}",
        out.stderr
    );
    out.stderr_has("error: task.titel: unknown key (line 4, column 3)\nhint: did you mean `title`?\n")
        .stderr_has("error: runner.worker.idle_timeout_sec: expected a non-negative integer (got string \"soon\") (line 10, column 23)\n")
        .stderr_has("error: runner.meta.api_key: environment variable OPENAI_API_KEY is not set (from \"env:OPENAI_API_KEY\")\nhint: export OPENAI_API_KEY=");
}

#[test]
fn run_with_invalid_input_prints_one_result_naming_every_problem() {
    let dir = Scratch::new("run-invalid");
    let yaml = "version: 1\ntask: {prd: {text: x}, titel: t}\nrunner: {worker: {network: bogus}}\n";
    let out = Run::new(&["run", "--json"])
        .cwd(&dir.path)
        .stdin(yaml)
        .output();
    out.code(1);
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "failed");
    let error = result["error"].as_str().unwrap();
    for path in ["task.titel", "runner.worker.network", "runner.meta.api_key"] {
        assert!(error.contains(path), "{path} missing from {error}");
    }
    assert_eq!(out.stderr.matches("error: ").count(), 3, "{}", out.stderr);
    // Without --json: one line.
    let out = Run::new(&["run"]).cwd(&dir.path).stdin(yaml).output();
    out.code(1)
        .stdout_has("FAILED: task ?: invalid input: task.titel");
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
}

#[test]
fn non_utf8_environment_values_are_errors_not_unset() {
    use std::os::unix::ffi::OsStrExt;
    let dir = Scratch::new("non-utf8");
    let binary = std::ffi::OsStr::from_bytes(b"http://127.0.0.1:9/\xff");
    let out = Run::new(&["validate"])
        .cwd(&dir.path)
        .env("OPENAI_API_KEY", KEY)
        .env("OPENAI_BASE_URL", binary)
        .stdin("version: 1\ntask: {prd: {text: x}}\n")
        .output();
    out.code(1)
        .stderr_has("error: OPENAI_BASE_URL: environment variable is not valid UTF-8\n");
    let out = Run::new(&["validate"])
        .cwd(&dir.path)
        .env("OPENAI_API_KEY", KEY)
        .env("MY_TOKEN", std::ffi::OsStr::from_bytes(b"\xfe\xff"))
        .stdin("version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {env: {T: 'env:MY_TOKEN'}}}\n")
        .output();
    out.code(1)
        .stderr_has("error: runner.worker.env.T: environment variable MY_TOKEN is not valid UTF-8");
}

#[test]
fn a_deleted_current_directory_matters_only_to_relative_paths() {
    let dir = Scratch::new("deleted-cwd");
    let gone = dir.join("gone");
    let in_gone_dir = |yaml: &str| {
        std::fs::create_dir_all(&gone).unwrap();
        Run::through(
            &[
                "sh",
                "-c",
                "cd \"$GONE\" && rmdir \"$GONE\" && exec \"$0\" \"$@\"",
            ],
            &["validate"],
        )
        .env("GONE", &gone)
        .env("OPENAI_API_KEY", KEY)
        .stdin(yaml)
        .output()
    };
    let repo = dir.path.display();
    in_gone_dir(&format!(
        "version: 1\ntask: {{repo: '{repo}', prd: {{text: x}}}}\n"
    ))
    .code(0)
    .stdout_has(&format!("repo: {repo}\n"));
    in_gone_dir("version: 1\ntask: {prd: {text: x}}\n")
        .code(1)
        .stderr_has(
            "error: task.repo: the relative path \".\" needs the current directory, which is not available",
        );
}

#[test]
fn a_huge_unknown_key_takes_bounded_memory_and_is_not_echoed() {
    let dir = Scratch::new("huge-key");
    let key = "k".repeat(8 << 20);
    let yaml = format!("version: 1\ntask: {{prd: {{text: x}}}}\n? {key}\n: 1\n");
    let (out, peak_kib) = Run::new(&["validate"])
        .cwd(&dir.path)
        .env("OPENAI_API_KEY", KEY)
        .stdin(yaml)
        .start()
        .finish_with_peak_rss();
    out.code(1);
    assert_eq!(
        out.stderr,
        format!(
            "error: {}…: unknown key (line 3, column 3)\nhint: valid keys here: version, task, runner\n",
            "k".repeat(60)
        )
    );
    // A generous bound: the quadratic edit distance took 878 MB here.
    let peak_mib = peak_kib / 1024;
    assert!(peak_mib < 100, "peak RSS {peak_mib} MiB");
}

#[test]
fn a_flood_of_problems_is_listed_up_to_a_limit_and_counted() {
    let dir = Scratch::new("flood");
    let env: Vec<String> = (0..150).map(|n| format!("V{n}: 'env:UNSET_{n}'")).collect();
    let yaml = format!(
        "version: 1\ntask: {{prd: {{text: x}}}}\nrunner: {{worker: {{env: {{{}}}}}}}\n",
        env.join(", ")
    );
    let out = validate(&dir, &yaml);
    out.code(1);
    assert_eq!(out.stderr.matches("error: ").count(), 101, "{}", out.stderr);
    assert!(
        out.stderr
            .ends_with("error: … and 50 more problems (only the first 100 are listed)\n"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_filesystem_root_is_refused_as_a_repository() {
    // `repo: .` run from `/`, where many CI jobs start: the worker would get the
    // whole host read-write.
    let yaml = "version: 1\ntask:\n  id: x\n  prd:\n    text: hi\nrunner:\n  meta:\n    kind: scripted\n    script: /etc/hostname\n";
    let out = Run::new(&["validate"])
        .stdin(yaml)
        .cwd(Path::new("/"))
        .output();
    out.code(1)
        .stderr_has("error: task.repo: . resolves to /, which is the filesystem root");
}

#[test]
fn every_problem_of_task_test_is_reported() {
    let dir = Scratch::new("validate-test-section");
    let yaml = format!(
        "version: 1\ntask:\n  id: x\n  repo: {}\n  prd:\n    text: hi\n  test:\n    command: ''\n    cwd: ../x\n    timeout_sec: 0\nrunner:\n  meta:\n    kind: scripted\n    script: /etc/hostname\n",
        dir.path.display()
    );
    let out = Run::new(&["validate"]).stdin(yaml).output();
    out.code(1)
        .stderr_has("task.test.command")
        .stderr_has("task.test.cwd")
        .stderr_has("task.test.timeout_sec");
}

/// `runner.sandbox.host` is checked as `run` checks it (SPEC §22), by its field, and
/// without contacting the host: nothing listens at the loopback address given.
#[test]
fn runner_sandbox_host_is_checked_by_field_without_contacting_it() {
    let dir = Scratch::new("sandbox-host");
    let task = |host: &str| {
        format!("version: 1\ntask:\n  prd: {{text: x}}\nrunner:\n  sandbox:\n    host: {host:?}\n")
    };
    validate(&dir, &task("tcp://10.9.8.7:2375"))
        .code(1)
        .stderr_has("error: runner.sandbox.host: \"tcp://10.9.8.7:2375\": plain tcp:// without TLS")
        .stderr_has("ssh://");
    validate(&dir, &task("bad/ctx"))
        .code(1)
        .stderr_has("error: runner.sandbox.host: \"bad/ctx\" is neither a URL");
    validate(&dir, &task("http://127.0.0.1:1"))
        .code(1)
        .stderr_has("runner.sandbox.host")
        .stderr_has("the scheme must be");
    let started = std::time::Instant::now();
    validate(&dir, &task("tcp://127.0.0.9:1"))
        .code(0)
        .stdout_has("host: tcp://127.0.0.9:1");
    validate(&dir, &task("some-context")).code(0);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn a_cluster_target_is_shown_and_a_run_without_kubectl_fails_naming_it() {
    let dir = Scratch::new("k8s-no-kubectl");
    support::git_repo(&dir.path, "out.txt", "x\n");
    let yaml = format!(
        "version: 1\ntask:\n  id: k8s-no-kubectl\n  repo: {}\n  prd:\n    text: Do it.\nrunner:\n  meta:\n    base_url: http://127.0.0.1:9/v1\n    model: m\n  sandbox:\n    host: k8s://prod/agents\n",
        dir.path.display()
    );
    validate(&dir, &yaml)
        .code(0)
        .stdout_has("host: k8s://prod/agents");
    let out = Run::new(&["run"])
        .cwd(&dir.path)
        .env("OPENAI_API_KEY", KEY)
        .env("AGENT_RUNNER_KUBECTL", dir.path.join("no-kubectl"))
        .stdin(&yaml)
        .output();
    assert_ne!(out.code, Some(0), "{}", out.stdout);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("kubectl could not be run"), "{said}");
    assert!(said.contains("AGENT_RUNNER_KUBECTL"), "{said}");
    assert!(!said.contains("docker CLI not found"), "{said}");
    let note = std::fs::read_to_string(dir.path.join(".agent-runner/task-k8s-no-kubectl.md"))
        .expect("a failed task still writes its note");
    assert!(note.contains("kubectl could not be run"), "{note}");
}
