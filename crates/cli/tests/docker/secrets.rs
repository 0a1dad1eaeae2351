//! No piece of a secret gets out (SPEC §10), whatever the secret looks like and
//! wherever it turns up: random secrets (multi-line, YAML-special, JSON-special) at
//! random offsets in the PRD, the worker's output, the test's output and Meta's error
//! bodies; then no substring of 6 bytes or more of any of them may appear in the
//! note, the logs, the result JSON, stderr, or any request the Meta server received.

use crate::support;

use quickcheck::{Arbitrary, Gen, QuickCheck};

use support::Scratch;
use support::docker::TEST_IMAGE;
use support::fake_openai::{Answer, FakeOpenAi};
use support::task::{assess, plan, run_worker, task_id};
use support::task_yaml::TaskYaml;

/// Shortest piece of a secret that must not appear anywhere.
const PIECE: usize = 6;

/// Characters secrets are made of: letters and digits mixed with everything YAML and
/// JSON treat specially, so a leak cannot hide behind escaping or quoting.
const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ0123456789\"\\:#'{}[],&*!|>%@`~$^()+=?;<\t";

#[derive(Debug, Clone)]
struct Case {
    /// The Meta API key (one line: it travels in an HTTP header).
    key: String,
    /// A `runner.worker.env` secret, sometimes several lines (a PEM-like value).
    env: String,
    /// Where in the PRD's filler each secret goes, as fractions of 1000.
    prd_at: (u16, u16),
}

fn random_line(g: &mut Gen, len: usize, alphabet: &[u8]) -> String {
    let mut s: String = (0..len)
        .map(|_| *g.choose(alphabet).unwrap_or(&b'X') as char)
        .collect();
    // No leading or trailing whitespace, which YAML and the shell would trim.
    s.replace_range(0..1, "Q");
    s.replace_range(len - 1..len, "Z");
    s
}

impl Arbitrary for Case {
    fn arbitrary(g: &mut Gen) -> Self {
        let plain: Vec<u8> = ALPHABET
            .iter()
            .copied()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        let key_len = 24 + usize::arbitrary(g) % 16;
        let key = format!("sk-{}", random_line(g, key_len, &plain));
        let lines = 1 + usize::arbitrary(g) % 4;
        let env = (0..lines)
            .map(|_| {
                let len = 8 + usize::arbitrary(g) % 30;
                random_line(g, len, ALPHABET)
            })
            .collect::<Vec<_>>()
            .join("\n");
        Case {
            key,
            env,
            prd_at: (u16::arbitrary(g) % 1000, u16::arbitrary(g) % 1000),
        }
    }
}

/// A PRD of about 1.2 KB with the secrets inside, one of them near the 1 KiB cut of
/// the PRD summary.
fn prd(case: &Case) -> String {
    let filler = "Build the feature as described. ".repeat(40);
    let at = |per_mille: u16| {
        let mut i = filler.len() * usize::from(per_mille) / 1000;
        while !filler.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let (a, b) = (
        at(case.prd_at.0),
        at(case.prd_at.1).max(1000).min(filler.len()),
    );
    let (first, second) = (a.min(b), a.max(b));
    format!(
        "{}{} {}{} {}",
        &filler[..first],
        case.key,
        &filler[first..second],
        case.env,
        &filler[second..]
    )
}

fn check(case: Case) -> bool {
    let dir = Scratch::new("secrets-prop");
    let id = task_id("secret");
    // Whole, to stderr, and re-wrapped with a prefix on every line (as a YAML dump
    // or a prefixed log would print a multi-line value).
    let echo = "@run: printf '%s\\n' \"$SECRET_TWO\"; printf '%s\\n' \"$SECRET_TWO\" >&2\n@run: printf '%s\\n' \"$SECRET_TWO\" | sed 's/^/  > /'\n@say: printed it";
    let body = format!("overloaded, key {} and {} rejected", case.key, case.env);
    let server = FakeOpenAi::start(vec![
        Answer::error(500, &body),
        plan(&["AC-1"]),
        run_worker(echo),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = TaskYaml::new(&id, &dir.path, &prd(&case))
        .test("printf '%s\\n' \"$SECRET_TWO\"")
        .set("runner.meta.base_url", &server.url)
        .set("runner.meta.model", "m")
        .image(TEST_IMAGE)
        .set("runner.worker.network", "none")
        .set("runner.worker.env.SECRET_TWO", "env:HOST_SECRET_TWO");
    let out = support::Run::new(&["run", "--json"])
        .env("OPENAI_API_KEY", &case.key)
        .env("HOST_SECRET_TWO", &case.env)
        .env("AGENT_RUNNER_META_BACKOFF_MS", "1")
        .env("RUST_LOG", "trace")
        .stdin(yaml.to_string())
        .output();
    out.code(0);
    let mut places = vec![
        ("stdout".to_string(), out.stdout.clone()),
        ("stderr".to_string(), out.stderr.clone()),
    ];
    for entry in walk(&dir.join(".agent-runner")) {
        let text = String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned();
        places.push((entry.display().to_string(), text));
    }
    for (n, request) in server.received().iter().enumerate() {
        places.push((format!("Meta request {n}"), request.body.clone()));
        for m in 0..request.roles().len() {
            places.push((format!("Meta request {n} message {m}"), request.message(m)));
        }
    }
    let log =
        std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/run-1.log"))).unwrap();
    assert!(
        log.contains("***"),
        "the worker printed the secret, masked:\n{log}"
    );
    for secret in std::iter::once(case.key.as_str()).chain(case.env.lines()) {
        for (place, text) in &places {
            if let Some(piece) = support::leaked_piece(text, secret, PIECE) {
                panic!("{piece:?} of a secret in {place}:\n{text}");
            }
        }
    }
    true
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn no_piece_of_any_secret_gets_out() {
    // Each case is a whole run against the real daemon: a few, not a hundred.
    QuickCheck::new()
        .tests(6)
        .max_tests(6)
        .quickcheck(check as fn(Case) -> bool);
}

/// File names the worker creates come back through git in the container: they must
/// be masked before they are quoted, escaped, collapsed or cut on their way into the
/// note and Meta's requests.
#[test]
fn secrets_in_worker_file_names_get_out_nowhere() {
    let dir = Scratch::new("secrets-files");
    let repo = dir.join("repo");
    support::git_repo(&repo, "a.txt", "original\n");
    let id = task_id("secfile");
    let secrets = [
        ("TOK_A", "alpha1#bravo2#charlie3"), // Markdown escaping of `#`
        ("TOK_B", "gr\u{20ac}\u{20ac}n-apple-orange"), // git's quoting of non-ASCII
        ("TOK_C", "one two  three-four"),    // whitespace collapsed
        ("TOK_D", "sk-live-ABCDEFGHIJKLMNOPQRSTUVWX"), // cut at 200 bytes for Meta
    ];
    let env: serde_json::Map<String, serde_json::Value> = secrets
        .iter()
        .map(|(name, _)| (name.to_string(), format!("env:HOST_{name}").into()))
        .collect();
    let prompt = "@run: touch \"f-$TOK_A\" \"g-$TOK_B\" \"h-$TOK_C\" \"$(printf '%0190d' 0)-$TOK_D\"\n@say: made files";
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(prompt),
        assess(&[], "checked"),
        run_worker("@say: again"),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = support::task::v1_task(&id, &repo, &server)
        .test("true")
        .set("runner.worker.env", env);
    let mut run = support::task::runner(&yaml).arg("--json");
    for (name, value) in secrets {
        run = run.env(&format!("HOST_{name}"), value);
    }
    let out = run.output();
    out.code(0);
    let note = support::task::note(&repo, &id);
    assert!(
        note.contains("?? f-***"),
        "the file is listed, masked:\n{note}"
    );
    let mut places = vec![
        ("note".to_string(), note),
        ("stdout".to_string(), out.stdout.clone()),
        ("stderr".to_string(), out.stderr.clone()),
    ];
    for (n, request) in server.received().iter().enumerate() {
        places.push((format!("Meta request {n}"), request.body.clone()));
        places.push((format!("Meta request {n} (decoded)"), request.message(1)));
    }
    for (name, secret) in secrets {
        for (place, text) in &places {
            if let Some(piece) = support::leaked_piece(text, secret, PIECE) {
                panic!("{name}: {piece:?} in {place}:\n{text}");
            }
        }
    }
}

/// Every `env:` value is a secret, `CI=true` included: masking must not turn Meta's
/// `all_criteria_satisfied: true` into `***` (a YAML alias) before the reply is read.
#[test]
fn a_secret_that_is_a_common_word_does_not_corrupt_meta_replies() {
    let dir = Scratch::new("secrets-ci");
    let id = task_id("ci");
    let done = Answer::chat(
        "type: completion_assessment\nsummary: all true\ndetails:\n  passed_criteria: [AC-1]\n  remaining_risks: []\nall_criteria_satisfied: true\n",
    );
    let server = FakeOpenAi::start(vec![plan(&["AC-1"]), run_worker("@say: done"), done]);
    let yaml = support::task::v1_task(&id, &dir.path, &server)
        .test("true")
        .set("runner.worker.env.CI", "env:CI");
    let out = support::task::runner(&yaml)
        .env("CI", "true")
        .arg("--json")
        .output();
    out.code(0);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(
        result["summary"], "all ***",
        "the reply's strings are still masked"
    );
}

/// Credentials in `runner.meta.base_url` (userinfo, or a key in the query as some
/// gateways take) are secrets like the API key.
#[test]
fn credentials_in_the_meta_base_url_are_masked() {
    let dir = Scratch::new("secrets-url");
    let id = task_id("url");
    let yaml = TaskYaml::new(&id, &dir.path, "x")
        .set(
            "runner.meta.base_url",
            "http://user:hu7QZ2xW9vK4@127.0.0.1:9/v1?api-key=qK8mP2xR7nB3",
        )
        .set("runner.meta.model", "m")
        .set("runner.meta.timeout_sec", 2)
        .image(TEST_IMAGE)
        .set("runner.worker.network", "none");
    let out = support::task::runner(&yaml).arg("--json").output();
    out.code(1);
    let note = support::task::note(&dir.path, &id);
    assert!(
        note.contains("http://***@127.0.0.1:9/v1/chat/completions?api-key=***")
            || note.contains("http://***@127.0.0.1:9/v1?api-key=***"),
        "{note}"
    );
    for secret in ["hu7QZ2xW9vK4", "qK8mP2xR7nB3"] {
        for (place, text) in [
            ("stdout", &out.stdout),
            ("stderr", &out.stderr),
            ("note", &note),
        ] {
            assert_eq!(
                support::leaked_piece(text, secret, PIECE),
                None,
                "{secret} in {place}:\n{text}"
            );
        }
    }
}

/// A secret that starts another (`TOP`, `TOP-LONGER`) must not be masked first:
/// `***-LONGER` would show the end of the longer one. Two pairs, the shorter named
/// first in one and last in the other, so the order the secrets are gathered in
/// does not matter.
#[test]
fn a_secret_inside_a_longer_one_leaves_no_piece_of_it() {
    let dir = Scratch::new("secrets-nested");
    let id = task_id("nested");
    let secrets = [
        ("A_TOP", "sk-TOP1"),
        ("B_TOP", "sk-TOP1-LONGER"),
        ("C_TOP", "pw-TOP2-LONGER"),
        ("D_TOP", "pw-TOP2"),
    ];
    let env: serde_json::Map<String, serde_json::Value> = secrets
        .iter()
        .map(|(name, _)| (name.to_string(), format!("env:HOST_{name}").into()))
        .collect();
    let prompt =
        "@run: echo \"one $B_TOP two $C_TOP\"; echo \"$B_TOP\" >&2\n@say: said $B_TOP and $C_TOP";
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(prompt),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = support::task::v1_task(&id, &dir.path, &server)
        .test("echo \"$C_TOP\"")
        .set("runner.worker.env", env);
    let mut run = support::task::runner(&yaml).arg("--json");
    for (name, value) in secrets {
        run = run.env(&format!("HOST_{name}"), value);
    }
    let out = run.output();
    out.code(0);
    let log =
        std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/run-1.log"))).unwrap();
    assert!(log.contains("one *** two ***"), "{log}");
    let mut places = vec![
        ("stdout".to_string(), out.stdout.clone()),
        ("stderr".to_string(), out.stderr.clone()),
    ];
    for entry in walk(&dir.join(".agent-runner")) {
        let text = String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned();
        places.push((entry.display().to_string(), text));
    }
    for (n, request) in server.received().iter().enumerate() {
        places.push((format!("Meta request {n}"), request.body.clone()));
    }
    for (place, text) in &places {
        assert!(
            !text.contains("LONGER"),
            "the end of a secret in {place}:\n{text}"
        );
    }
}
