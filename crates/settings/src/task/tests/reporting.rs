//! Every problem at once (SPEC §10): unknown keys, then wrong types, then wrong
//! values, then the host; nothing reported twice; long input never echoed whole.

use super::*;

use Category::{Environment, Structure, UnknownKey, Value};

fn owned(expected: &[(&str, Category)]) -> Vec<(String, Category)> {
    expected.iter().map(|(p, c)| (p.to_string(), *c)).collect()
}

#[test]
fn every_problem_is_reported_schema_before_environment() {
    let dir = Scratch::new();
    let yaml = "version: 1
task:
  prd: {text: x}
  titel: t
runner:
  meta: {max_loop: 3, max_loops: 0}
  worker:
    max_run_time_sec: 0
    network: bogus
    idle_timeout_sec: soon
    env: {T: 'env:AGENT_RUNNER_UNSET', PATH: 'env:X'}
";
    // No OPENAI_API_KEY: it is reported, but last.
    let errors = parse_in(&dir.0, &[], yaml).unwrap_err();
    assert_eq!(
        summary(&errors),
        owned(&[
            ("task.titel", UnknownKey),
            ("runner.meta.max_loop", UnknownKey),
            ("runner.worker.idle_timeout_sec", Structure),
            ("runner.meta.max_loops", Value),
            ("runner.worker.max_run_time_sec", Value),
            ("runner.worker.network", Value),
            ("runner.worker.env.PATH", Value),
            ("runner.meta.api_key", Environment),
            ("runner.worker.env.T", Environment),
        ])
    );
    let hints: Vec<Option<&str>> = errors.iter().map(|e| e.hint.as_deref()).collect();
    assert_eq!(hints[0], Some("did you mean `title`?"));
    assert_eq!(hints[1], Some("did you mean `max_loops`?"));
    assert!(hints[6].unwrap().contains("literal value"), "{hints:?}");
    assert!(
        hints[7].unwrap().starts_with("export OPENAI_API_KEY="),
        "{hints:?}"
    );
}

#[test]
fn the_spec_example_reports_the_schema_problem_first() {
    let dir = Scratch::new();
    for (worker, path) in [
        ("max_run_time_sec: 0", "runner.worker.max_run_time_sec"),
        ("network: bogus", "runner.worker.network"),
    ] {
        let yaml =
            format!("version: 1\ntask: {{prd: {{text: x}}}}\nrunner: {{worker: {{{worker}}}}}\n");
        let errors = parse_in(&dir.0, &[], &yaml).unwrap_err();
        assert_eq!(
            summary(&errors),
            owned(&[(path, Value), ("runner.meta.api_key", Environment)])
        );
    }
}

#[test]
fn wrong_types_are_all_reported_with_paths_and_positions() {
    let errors = errs(
        "version: 1
task:
  prd: {text: x}
  test: 5
runner:
  meta: {temperature: hot, max_loops: 1.5}
  worker:
    extra_args: [a, {b: 1}, c, [d]]
    env: {A: ~, B: [x], C: fine}
    limits: {memory: [1], pids: -1}
",
    );
    type Found<'a> = (&'a str, &'a str, Option<(usize, usize)>);
    let found: Vec<Found> = errors
        .iter()
        .map(|e| (e.path.as_str(), e.message.as_str(), e.location))
        .collect();
    assert_eq!(
        found,
        [
            (
                "task.test",
                "expected a mapping (got number 5)",
                Some((4, 9))
            ),
            (
                "runner.meta.temperature",
                "expected a number (got string \"hot\")",
                Some((6, 23))
            ),
            (
                "runner.meta.max_loops",
                "expected a non-negative integer (got number 1.5)",
                Some((6, 39))
            ),
            (
                "runner.worker.extra_args[1]",
                "expected a string (got a mapping)",
                Some((8, 21))
            ),
            (
                "runner.worker.extra_args[3]",
                "expected a string (got a list)",
                Some((8, 32))
            ),
            (
                "runner.worker.env.A",
                "expected a string (got null)",
                Some((9, 14))
            ),
            (
                "runner.worker.env.B",
                "expected a string (got a list)",
                Some((9, 20))
            ),
            (
                "runner.worker.limits.memory",
                "expected a size: bytes, or a number with b, k, m or g (got a list)",
                Some((10, 22))
            ),
            (
                "runner.worker.limits.pids",
                "expected a non-negative integer (got number -1)",
                Some((10, 33))
            ),
        ]
    );
    assert!(errors.iter().all(|e| e.category == Structure));
}

#[test]
fn a_wrong_or_misspelt_value_is_not_also_reported_missing() {
    let full = "task:\n  id: a\n  title: t\n  instructions: i\n  project: {root_dir: .}\nrunner:\n  meta: {model: m}\n  worker: {type: docker_codex_cli}\n";
    ok(full);
    for (from, to, path) in [
        ("id: a", "id: [a]", "task.id"),
        ("title: t", "titel: t", "task.titel"),
        ("{root_dir: .}", "{root: .}", "task.project.root"),
        ("project: {root_dir: .}", "project: .", "task.project"),
        ("meta: {model: m}", "meta: m", "runner.meta"),
        (
            "{type: docker_codex_cli}",
            "{typ: docker_codex_cli}",
            "runner.worker.typ",
        ),
    ] {
        let errors = errs(&full.replace(from, to));
        assert_eq!(errors.len(), 1, "{to}: {errors:#?}");
        assert_eq!(errors[0].path, path);
    }
    let e = err("version: 1\ntask: {prd: {pth: x}}\n");
    assert_error(&e, "task.prd.pth", "unknown key");
}

#[test]
fn the_other_problems_of_a_document_are_still_found() {
    // A structure problem does not stop the value and host checks of the rest.
    let errors = errs(
        "version: 1\ntask: {id: 'a b', prd: {text: x}, test: {command: t, timeout_sec: x}}\nrunner: {worker: {env: {K: 'env:AGENT_RUNNER_UNSET'}}}\n",
    );
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        ["task.test.timeout_sec", "task.id", "runner.worker.env.K"]
    );
}

#[test]
fn scalars_keep_their_spelling() {
    let task = ok("version: 1\ntask: {id: 0x1F, title: 1.10, prd: {text: 007}}\n");
    assert_eq!(
        (
            task.id.as_str(),
            task.title.as_str(),
            task.prd.text.as_str()
        ),
        ("0x1F", "1.10", "007")
    );
    // With a problem elsewhere the values are still read as text.
    let errors = errs("version: 1\ntask: {id: 0x1F, title: true, prd: {text: 7}, x: 1}\n");
    assert_eq!(errors.len(), 1, "{errors:#?}");
}

#[test]
fn huge_keys_and_values_are_echoed_cut_and_not_compared() {
    let key = "k".repeat(1 << 20);
    let e = err(&format!(
        "version: 1\ntask: {{prd: {{text: x}}}}\n? {key}\n: 1\n"
    ));
    assert_eq!(e.path, format!("{}…", "k".repeat(60)));
    assert_eq!(e.message, "unknown key");
    assert_eq!(
        e.hint.as_deref(),
        Some("valid keys here: version, task, runner")
    );
    assert_eq!(e.location, Some((3, 3)));
    let value = "b".repeat(1 << 20);
    let e = err(&format!(
        "version: 1\ntask: {{prd: {{text: x}}}}\nrunner: {{worker: {{network: {value}}}}}\n"
    ));
    assert!(e.to_string().len() < 200, "{e}");
    let e = err(&format!(
        "version: 1\ntask: {{prd: {{text: x}}}}\nrunner: {{worker: {{env: {{'{key}-': x}}}}}}\n"
    ));
    assert!(e.path.len() < 100, "{}", e.path);
}

#[test]
fn keys_of_the_other_shape_say_which_shape_they_belong_to() {
    let e = err("version: 1\ntask: {prd: {text: x}}\nrunner: {worker: {type: docker_codex_cli}}\n");
    assert_eq!(e.category, UnknownKey);
    assert_error(&e, "runner.worker.type", "unknown key in shape v1");
    assert_eq!(
        e.hint.as_deref(),
        Some("did you mean `kind`? (`type` belongs to the TaskConfig shape)")
    );
}

#[test]
fn problems_beyond_the_limit_are_counted() {
    let dir = Scratch::new();
    let env: Vec<String> = (0..150)
        .map(|n| format!("V{n:03}: 'env:UNSET_{n}'"))
        .collect();
    let yaml = format!(
        "{}runner: {{worker: {{env: {{{}}}}}}}\n",
        "version: 1\ntask: {prd: {text: x}}\n",
        env.join(", ")
    );
    let errors = parse_in(&dir.0, &[KEY], &yaml).unwrap_err();
    assert_eq!(errors.iter().count(), input_error::MAX_PROBLEMS);
    assert_eq!(errors.omitted(), 50);
    assert_eq!(errors.iter().last().unwrap().path, "runner.worker.env.V099");
    assert!(
        errors
            .to_string()
            .ends_with("… and 50 more problems (only the first 100 are listed)")
    );
}

#[test]
fn large_documents_get_fewer_positions() {
    // Each position costs a parse of the whole text: a 6 MiB document gets two.
    let padding = "p".repeat(6 << 20);
    let wrong: Vec<String> = (0..5).map(|n| format!("a{n}: 1")).collect();
    let errors = errs(&format!(
        "version: 1\ntask: {{prd: {{text: {padding}}}}}\nrunner: {{meta: {{{}}}}}\n",
        wrong.join(", ")
    ));
    let located: Vec<bool> = errors.iter().map(|e| e.location.is_some()).collect();
    assert_eq!(located, [true, true, false, false, false]);
    let errors = errs(&format!(
        "version: 1\ntask: {{prd: {{text: x}}}}\nrunner: {{meta: {{{}}}}}\n",
        wrong.join(", ")
    ));
    assert!(errors.iter().all(|e| e.location.is_some()));
}

/// A document made of the shapes' own keys (and some strangers) with values of any
/// type: reaches every branch of the structure check.
#[derive(Debug, Clone)]
struct KeyedDocument(String);

fn any_scalar(g: &mut Gen) -> serde_norway::Value {
    use serde_norway::Value as Y;
    match u8::arbitrary(g) % 9 {
        0 => Y::Null,
        1 => Y::Bool(bool::arbitrary(g)),
        2 => Y::from(u64::arbitrary(g) % 5000),
        3 => Y::from(-i64::from(u8::arbitrary(g))),
        4 => Y::from(f64::from(u8::arbitrary(g)) / 7.0),
        5 => Y::String(
            g.choose(&["x", "env:OPENAI_API_KEY", "512m", "1", "", "-v", "a\nb"])
                .unwrap()
                .to_string(),
        ),
        6 => Y::String("s".repeat(usize::from(u8::arbitrary(g)))),
        7 => Y::Sequence((0..u8::arbitrary(g) % 3).map(|_| Y::from(1)).collect()),
        _ => Y::String(String::arbitrary(g)),
    }
}

fn any_section(
    g: &mut Gen,
    keys: &'static [super::super::raw::Key],
    depth: u8,
) -> serde_norway::Value {
    use super::super::raw::Kind;
    let mut map = serde_norway::Mapping::new();
    for key in keys {
        if bool::arbitrary(g) {
            continue;
        }
        let value = match (key.kind, u8::arbitrary(g) % 4) {
            (Kind::Section(inner), 0..=2) if depth < 4 => any_section(g, inner, depth + 1),
            (Kind::TextList, 0..=1) => (0..u8::arbitrary(g) % 4).map(|_| any_scalar(g)).collect(),
            (Kind::TextMap, 0..=2) => {
                let mut env = serde_norway::Mapping::new();
                for _ in 0..u8::arbitrary(g) % 4 {
                    let name = g
                        .choose(&["A", "PATH", "B-C", "1", "T"])
                        .unwrap()
                        .to_string();
                    env.insert(serde_norway::Value::String(name), any_scalar(g));
                }
                serde_norway::Value::Mapping(env)
            }
            _ => any_scalar(g),
        };
        map.insert(serde_norway::Value::String(key.name().into()), value);
    }
    if u8::arbitrary(g) % 5 == 0 {
        map.insert(any_scalar(g), any_scalar(g));
    }
    serde_norway::Value::Mapping(map)
}

impl Arbitrary for KeyedDocument {
    fn arbitrary(g: &mut Gen) -> Self {
        let table = if bool::arbitrary(g) {
            super::super::raw::V1
        } else {
            super::super::raw::TASK_CONFIG
        };
        let document = any_section(g, table, 0);
        KeyedDocument(serde_norway::to_string(&document).unwrap_or_default())
    }
}

quickcheck! {
    /// The structure check catches every wrong type, so deserializing what it leaves
    /// never fails (that fallback reports serde's own words, "invalid YAML: ...").
    fn structure_check_leaves_nothing_for_serde_to_refuse(doc: KeyedDocument) -> bool {
        let dir = std::env::temp_dir();
        match parse_in(&dir, &[KEY], &doc.0) {
            Ok(_) => true,
            Err(errors) => errors
                .iter()
                .all(|e| !(e.category == Category::Structure && e.message.starts_with("invalid YAML"))),
        }
    }
}

#[test]
fn approve_plan_is_read_in_both_shapes_and_must_be_a_boolean() {
    // The pipeline's attempts stop for approval too (SPEC §23).
    let task = ok(
        "task:\n  id: a\n  title: t\n  instructions: i\n  project: {root_dir: .}\nrunner:\n  meta: {model: m, approve_plan: true}\n  worker: {type: docker_codex_cli}\n",
    );
    assert!(task.meta.approve_plan);
    let e = err("version: 1\ntask: {prd: {text: x}}\nrunner: {meta: {approve_plan: 1}}\n");
    assert_error(&e, "runner.meta.approve_plan", "");
}
