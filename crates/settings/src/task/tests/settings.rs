//! The rules added with the sandbox boundary and plans: one-line titles, acceptance
//! criteria, worker resource limits, and worker env names reserved for the host.

use super::*;

const TASK_CONFIG: &str = "task:\n  id: a\n  title: t\n  instructions: i\n  project: {root_dir: .}\nrunner:\n  meta: {model: m}\n  worker: {type: docker_codex_cli}\n";
const V1: &str = "version: 1\ntask:\n  prd: {text: x}\n";

#[test]
fn titles_are_one_line_in_both_shapes() {
    for yaml in [
        format!("{V1}  title: \"two\\nlines\"\n"),
        TASK_CONFIG.replace("title: t", "title: \"bell\\a\""),
        TASK_CONFIG.replace("title: t", "title: \"tab\\there\""),
    ] {
        assert_error(&err(&yaml), "task.title", "must be one line");
    }
    assert_eq!(
        ok(&format!("{V1}  title: ' spaced – ü '\n")).title,
        " spaced – ü "
    );
}

#[test]
fn acceptance_criteria_in_both_shapes() {
    let v1 = ok(&format!(
        "{V1}  acceptance_criteria: [' greet.sh prints hello ', tests pass]\n"
    ));
    assert_eq!(
        v1.acceptance_criteria,
        ["greet.sh prints hello", "tests pass"]
    );
    let tc = ok(&TASK_CONFIG.replace("  project:", "  acceptance_criteria: [one]\n  project:"));
    assert_eq!(tc.acceptance_criteria, ["one"]);
    assert!(ok(V1).acceptance_criteria.is_empty());
    assert_error(
        &err(&format!("{V1}  acceptance_criteria: [a, '  ', b]\n")),
        "task.acceptance_criteria[1]",
        "must not be empty",
    );
    let many = vec!["c"; MAX_ACCEPTANCE_CRITERIA + 1].join(", ");
    assert_error(
        &err(&format!("{V1}  acceptance_criteria: [{many}]\n")),
        "task.acceptance_criteria",
        "at most 50 criteria (got 51)",
    );
    let fifty = vec!["c"; MAX_ACCEPTANCE_CRITERIA].join(", ");
    assert_eq!(
        ok(&format!("{V1}  acceptance_criteria: [{fifty}]\n"))
            .acceptance_criteria
            .len(),
        50
    );
    let e = err(&format!("{V1}  acceptance_criteria: one\n"));
    assert_eq!(e.category, Category::Structure);
    assert_error(&e, "task.acceptance_criteria", "expected a list of strings");
    let out = resolved_yaml(&v1);
    assert!(
        out.contains("acceptance_criteria:\n  - greet.sh prints hello\n  - tests pass\n"),
        "{out}"
    );
}

#[test]
fn worker_limits_default_to_a_pids_limit_only() {
    let task = ok(V1);
    assert_eq!(
        task.worker.limits,
        WorkerLimits {
            memory_bytes: None,
            cpus: None,
            pids: 4096
        }
    );
    let task = ok(&format!(
        "{V1}runner: {{worker: {{limits: {{memory: 512m, cpus: 1.5, pids: 100}}}}}}\n"
    ));
    assert_eq!(
        task.worker.limits,
        WorkerLimits {
            memory_bytes: Some(512 << 20),
            cpus: Some(1.5),
            pids: 100
        }
    );
    let out = resolved_yaml(&task);
    assert!(
        out.contains("limits:\n      memory_bytes: 536870912\n      cpus: 1.5\n      pids: 100\n"),
        "{out}"
    );
    let task = ok(&format!(
        "{V1}runner: {{worker: {{limits: {{memory: 1073741824}}}}}}\n"
    ));
    assert_eq!(task.worker.limits.memory_bytes, Some(1 << 30));
    let errors = errs(&format!(
        "{V1}runner: {{worker: {{limits: {{memory: 5m, cpus: 0, pids: 0, swap: 1}}}}}}\n"
    ));
    let found: Vec<(&str, Category)> = errors
        .iter()
        .map(|e| (e.path.as_str(), e.category))
        .collect();
    assert_eq!(
        found,
        [
            ("runner.worker.limits.swap", Category::UnknownKey),
            ("runner.worker.limits.memory", Category::Value),
            ("runner.worker.limits.cpus", Category::Value),
            ("runner.worker.limits.pids", Category::Value),
        ]
    );
    assert_error(
        &err(&format!(
            "{V1}runner: {{worker: {{limits: {{cpus: .nan}}}}}}\n"
        )),
        "runner.worker.limits.cpus",
        "between 0.01 and",
    );
}

#[test]
fn host_values_cannot_reconfigure_the_docker_client() {
    let dir = Scratch::new();
    let yaml = format!(
        "{V1}runner:\n  worker:\n    env:\n      PATH: env:MY_PATH\n      DOCKER_HOST: env:DH\n      https_proxy: env:P\n      LD_PRELOAD: env:LP\n      GODEBUG: env:GD\n      NPM_TOKEN: env:NPM\n      HOME: /literal/is/fine\n"
    );
    let vars = [
        KEY,
        ("MY_PATH", "/x"),
        ("DH", "tcp://evil:2375"),
        ("P", "http://p"),
        ("LP", "/x.so"),
        ("GD", "x=1"),
        ("NPM", "npm-0123"),
    ];
    let errors = parse_in(&dir.0, &vars, &yaml).unwrap_err();
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "runner.worker.env.DOCKER_HOST",
            "runner.worker.env.GODEBUG",
            "runner.worker.env.LD_PRELOAD",
            "runner.worker.env.PATH",
            "runner.worker.env.https_proxy",
        ]
    );
    let path = errors.iter().find(|e| e.path.ends_with(".PATH")).unwrap();
    assert!(
        path.message
            .contains("host docker client's own environment"),
        "{path}"
    );
    assert_eq!(
        path.hint.as_deref(),
        Some(
            "give PATH a literal value (it goes on the docker command line), or pass the secret under another name"
        )
    );
    // Literals are fine under any valid name; other names may come from the host.
    let yaml = format!(
        "{V1}runner: {{worker: {{env: {{PATH: /usr/bin, DOCKER_HOST: x, NPM_TOKEN: 'env:NPM'}}}}}}\n"
    );
    let task = parse_in(&dir.0, &[KEY, ("NPM", "npm-0123")], &yaml).unwrap();
    let env: Vec<(&str, &str)> = task
        .worker
        .env
        .iter()
        .map(|e| (e.name.as_str(), e.value.expose()))
        .collect();
    assert_eq!(
        env,
        [
            ("DOCKER_HOST", "x"),
            ("NPM_TOKEN", "npm-0123"),
            ("PATH", "/usr/bin")
        ]
    );
}

#[test]
fn an_empty_meta_model_is_an_error_not_the_default() {
    assert_error(
        &err(&format!("{V1}runner: {{meta: {{model: ''}}}}\n")),
        "runner.meta.model",
        "is empty",
    );
    assert_error(
        &err(&TASK_CONFIG.replace("model: m", "model: ' '")),
        "runner.meta.model",
        "is empty",
    );
    assert_eq!(
        ok(V1).meta.model,
        crate::task::DEFAULT_META_MODEL,
        "absent means the default"
    );
}
