//! The suite file (SPEC §26) → `Suite`: the YAML checked by core's reader (depth,
//! aliases), deserialized into the raw shape (unknown keys and wrong types are
//! serde's errors, which name the field path and its line and column), then each
//! rule checked with the path and position of what broke it. Every problem is
//! reported at once, and a suite with any is not run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::{EvalError, Problem};
use agent_runner_settings::task::locate::{Segment, Target, locate};

/// Longest grader run allowed (a day: far beyond any test suite).
const MAX_TIMEOUT_SEC: u64 = 86_400;
/// Largest suite file read.
const MAX_SUITE_BYTES: u64 = 8 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    #[serde(default)]
    name: Option<String>,
    /// The grading image unless a grader names its own.
    #[serde(default)]
    image: Option<String>,
    cases: Vec<RawCase>,
    configs: Vec<RawConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    id: String,
    repo: String,
    base: String,
    prd: RawPrd,
    grader: RawGrader,
    #[serde(default)]
    solution: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawPrd {
    Text(String),
    File { path: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrader {
    files: String,
    command: String,
    timeout_sec: u64,
    #[serde(default)]
    image: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    name: String,
    #[serde(default)]
    runner: serde_json::Value,
    /// Each run a best of N (SPEC §23): N tries, one judged outcome.
    #[serde(default)]
    best_of: Option<u32>,
}

/// A suite, checked: paths absolute, prds read.
#[derive(Debug, Clone)]
pub struct Suite {
    /// Its file.
    pub path: PathBuf,
    pub name: String,
    /// sha256 of the file's bytes, hex: names the eval's directory and is in the summary.
    pub hash: String,
    pub cases: Vec<Case>,
    pub configs: Vec<Config>,
}

/// One case: a repository at a commit, what to do, and how it is graded.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    /// A repository (its work tree or a bare one) or a git bundle file.
    pub repo: PathBuf,
    pub base: String,
    pub prd: String,
    pub grader: Grader,
    /// A patch against `base` that the grader passes with.
    pub solution: Option<PathBuf>,
}

/// The held-out grader of a case.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Grader {
    /// A directory, copied over the attempt's files before `command` runs.
    pub files: PathBuf,
    pub command: String,
    pub timeout_sec: u64,
    pub image: String,
}

/// A configuration under evaluation: a name and runner settings (Task YAML `runner:`).
#[derive(Debug, Clone)]
pub struct Config {
    pub name: String,
    pub runner: serde_json::Value,
    /// Tries per run, judged as `task run --tries` judges them (1: a single attempt).
    pub best_of: u32,
}

impl Suite {
    /// The config named `name`.
    pub fn config(&self, name: &str) -> Option<&Config> {
        self.configs.iter().find(|c| c.name == name)
    }

    /// `config`'s runner settings as its runs get them: a relative `meta.script`
    /// made absolute against the suite's directory (the runner would resolve it in
    /// the attempt's clone).
    pub(crate) fn runner_of(&self, config: &Config) -> serde_json::Value {
        let mut runner = config.runner.clone();
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        if let Some(script) = runner["meta"]["script"].as_str()
            && !Path::new(script).is_absolute()
        {
            runner["meta"]["script"] = dir.join(script).display().to_string().into();
        }
        runner
    }
}

/// Reads and checks the suite file at `path`.
pub fn read(path: &Path) -> Result<Suite, EvalError> {
    let bytes = agent_runner_core::fs::read::whole(path, MAX_SUITE_BYTES).map_err(|e| {
        EvalError::Unreadable {
            path: path.to_path_buf(),
            detail: e.to_string(),
        }
    })?;
    let text = String::from_utf8(bytes).map_err(|_| EvalError::Unreadable {
        path: path.to_path_buf(),
        detail: "not UTF-8".into(),
    })?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir = std::path::absolute(dir).map_err(|e| EvalError::Unreadable {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    let invalid = |problems| EvalError::Invalid {
        path: path.to_path_buf(),
        problems,
    };
    let default_name = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "suite".into());
    let suite = parse(&text, &dir, &default_name).map_err(invalid)?;
    Ok(Suite {
        path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        hash: sha256_hex(text.as_bytes()),
        ..suite
    })
}

/// `text` (a suite whose relative paths are against `dir`) checked.
pub(crate) fn parse(text: &str, dir: &Path, default_name: &str) -> Result<Suite, Vec<Problem>> {
    check_document(text)?;
    let raw = raw_suite(text)?;
    let mut problems = Problems {
        text,
        found: Vec::new(),
    };
    let image = raw
        .image
        .clone()
        .unwrap_or_else(|| agent_runner_settings::task::DEFAULT_DOCKER_IMAGE.to_string());
    if raw.cases.is_empty() {
        problems.add(
            vec![key("cases")],
            Target::Key,
            "no case: a suite needs at least one".into(),
        );
    }
    if raw.configs.is_empty() {
        problems.add(
            vec![key("configs")],
            Target::Key,
            "no config: a suite needs at least one".into(),
        );
    }
    let mut ids = BTreeSet::new();
    let mut cases = Vec::new();
    for (i, c) in raw.cases.iter().enumerate() {
        cases.push(case(i, c, dir, &image, &mut ids, &mut problems));
    }
    check_configs(&raw.configs, dir, &mut problems);
    if !problems.found.is_empty() {
        return Err(problems.found);
    }
    Ok(Suite {
        path: PathBuf::new(),
        name: raw.name.unwrap_or_else(|| default_name.to_string()),
        hash: String::new(),
        cases,
        configs: raw
            .configs
            .into_iter()
            .map(|c| Config {
                name: c.name,
                runner: match c.runner {
                    serde_json::Value::Null => serde_json::json!({}),
                    other => other,
                },
                best_of: c.best_of.unwrap_or(1),
            })
            .collect(),
    })
}

/// The problems found so far, each placed in the suite's text.
struct Problems<'t> {
    text: &'t str,
    found: Vec<Problem>,
}

impl Problems<'_> {
    /// A problem of what is at `path` (its key or its value: `target`).
    fn add(&mut self, path: Vec<Segment>, target: Target, message: String) {
        self.found.push(Problem {
            path: dotted(&path),
            message,
            at: locate(self.text, &path, target),
        })
    }
}

/// The key `k` as a segment of a path.
fn key(k: &str) -> Segment {
    Segment::Key(k.to_string())
}

/// `p` of the suite: absolute, or against the suite's directory `dir`.
fn resolve(dir: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

/// The YAML as core's reader takes it (depth, aliases), before serde reads it.
fn check_document(text: &str) -> Result<(), Vec<Problem>> {
    agent_runner_core::yaml::check(text, agent_runner_core::yaml::Rules::Document).map_err(
        |refusal| {
            vec![Problem {
                path: String::new(),
                message: refusal.message,
                at: Some((refusal.line, refusal.column)),
            }]
        },
    )
}

/// `text` in the raw shape: an unknown key or a wrong type is serde's error, with
/// the field path and the position apart.
fn raw_suite(text: &str) -> Result<RawSuite, Vec<Problem>> {
    // Read once as a plain document first: a key given twice (where the runner
    // block would keep the last silently) is refused there.
    serde_norway::from_str::<serde_norway::Value>(text)
        .and_then(|_| serde_norway::from_str(text))
        .map_err(|e| {
            let message = e.to_string();
            // serde's message starts with the field path (`cases[0].grader: …`) and
            // ends with the position; the position goes to `at`.
            let message = match message.rfind(" at line ") {
                Some(cut) if e.location().is_some() => message[..cut].to_string(),
                _ => message,
            };
            let (path, message) = match message.split_once(": ") {
                Some((path, rest)) if !path.contains(' ') => (path.to_string(), rest.to_string()),
                _ => (String::new(), message),
            };
            vec![Problem {
                path,
                message,
                at: e.location().map(|l| (l.line(), l.column())),
            }]
        })
}

/// Case `i`, `c`, checked (`ids`: the ids of the cases before it) with its paths
/// resolved against `dir`; `image`: the suite's grading image.
fn case(
    i: usize,
    c: &RawCase,
    dir: &Path,
    image: &str,
    ids: &mut BTreeSet<String>,
    problems: &mut Problems,
) -> Case {
    let here = |k: &str| vec![key("cases"), Segment::Index(i), key(k)];
    new_name(
        &c.id,
        ids,
        here("id"),
        "the id of an earlier case",
        problems,
    );
    let repo = resolve(dir, &c.repo);
    if !repo.exists() {
        problems.add(
            here("repo"),
            Target::Value,
            format!("{} does not exist", repo.display()),
        );
    }
    if !is_commit(&c.base) {
        problems.add(
            here("base"),
            Target::Value,
            format!("{:?} is not a commit id (7 to 40 hex digits)", c.base),
        );
    }
    let prd = prd(&c.prd, dir, here("prd"), problems);
    let files = resolve(dir, &c.grader.files);
    check_grader(i, &c.grader, &files, &repo, problems);
    let solution = c.solution.as_deref().map(|s| resolve(dir, s));
    if let Some(s) = &solution
        && !s.is_file()
    {
        problems.add(
            here("solution"),
            Target::Value,
            format!("{} is not a file", s.display()),
        );
    }
    Case {
        id: c.id.clone(),
        repo,
        base: c.base.to_ascii_lowercase(),
        prd,
        grader: Grader {
            files,
            command: c.grader.command.clone(),
            timeout_sec: c.grader.timeout_sec,
            image: c.grader.image.clone().unwrap_or_else(|| image.to_string()),
        },
        solution,
    }
}

/// A case's prd, given as text or read from its file (`here`: its path in the
/// suite); empty with a problem when there is none.
fn prd(prd: &RawPrd, dir: &Path, here: Vec<Segment>, problems: &mut Problems) -> String {
    match prd {
        RawPrd::Text(text) if text.trim().is_empty() => {
            problems.add(here, Target::Value, "empty".into());
            String::new()
        }
        RawPrd::Text(text) => text.clone(),
        RawPrd::File { path } => {
            let file = resolve(dir, path);
            match agent_runner_core::fs::read::whole(&file, 1 << 20)
                .map_err(|e| e.to_string())
                .and_then(|b| String::from_utf8(b).map_err(|_| "not UTF-8".to_string()))
            {
                Ok(text) if !text.trim().is_empty() => text,
                Ok(_) => {
                    problems.add(here, Target::Value, format!("{} is empty", file.display()));
                    String::new()
                }
                Err(e) => {
                    problems.add(here, Target::Value, format!("{}: {e}", file.display()));
                    String::new()
                }
            }
        }
    }
}

/// The grader of case `i`: its `files` a directory apart from the case's `repo`,
/// a command, a timeout within bounds.
fn check_grader(i: usize, grader: &RawGrader, files: &Path, repo: &Path, problems: &mut Problems) {
    let here = |k: &str| vec![key("cases"), Segment::Index(i), key("grader"), key(k)];
    if !files.is_dir() {
        problems.add(
            here("files"),
            Target::Value,
            format!("{} is not a directory", files.display()),
        );
    } else if repo.exists() && (files.starts_with(repo) || repo.starts_with(files)) {
        // The held-out files must not ride along with the repository.
        problems.add(
            here("files"),
            Target::Value,
            format!(
                "{} overlaps the case's repository {}: keep the grader apart",
                files.display(),
                repo.display()
            ),
        );
    }
    if grader.command.trim().is_empty() {
        problems.add(here("command"), Target::Value, "empty".into());
    }
    if grader.timeout_sec == 0 || grader.timeout_sec > MAX_TIMEOUT_SEC {
        problems.add(
            here("timeout_sec"),
            Target::Value,
            format!(
                "{} is not between 1 and {MAX_TIMEOUT_SEC}",
                grader.timeout_sec
            ),
        );
    }
}

/// `name` (at `at`) checked as a name and as not taken yet (`taken` gains it), the
/// one rule of the cases' ids and the configs' names; `earlier` says what took it
/// ("the id of an earlier case").
fn new_name(
    name: &str,
    taken: &mut BTreeSet<String>,
    at: Vec<Segment>,
    earlier: &str,
    problems: &mut Problems,
) {
    if !is_name(name) {
        problems.add(at, Target::Value, format!("{name:?}: {NAME_RULE}"));
    } else if !taken.insert(name.to_string()) {
        problems.add(at, Target::Value, format!("{name:?} is {earlier}"));
    }
}

/// The configs: each name a name and given once, `best_of` within bounds, the
/// runner block as the runner's own parser takes it (relative paths against `dir`).
fn check_configs(configs: &[RawConfig], dir: &Path, problems: &mut Problems) {
    let mut names = BTreeSet::new();
    for (i, c) in configs.iter().enumerate() {
        let here = |k: &str| vec![key("configs"), Segment::Index(i), key(k)];
        let earlier = "the name of an earlier config";
        new_name(&c.name, &mut names, here("name"), earlier, problems);
        if let Some(n) = c.best_of
            && let Err(e) = crate::store::tries::check_count(n, "best_of")
        {
            problems.add(here("best_of"), Target::Value, e.problem);
        }
        match &c.runner {
            serde_json::Value::Null | serde_json::Value::Object(_) => {
                if let Err(e) = check_runner(&c.runner, dir) {
                    problems.add(here("runner"), Target::Key, e.to_string());
                }
            }
            _ => problems.add(
                here("runner"),
                Target::Value,
                "must be a mapping (Task YAML `runner:` keys)".into(),
            ),
        }
    }
}

/// What a case id and a config name may be: they name tasks and branches.
const NAME_RULE: &str = "1-40 characters of A-Z a-z 0-9 _ -, starting with a letter or digit";

fn is_name(name: &str) -> bool {
    (1..=40).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

fn is_commit(base: &str) -> bool {
    (7..=40).contains(&base.len()) && base.chars().all(|c| c.is_ascii_hexdigit())
}

/// `over` merged into `into`, mappings key by key.
fn merge(into: &mut serde_json::Value, over: &serde_json::Value) {
    match (into, over) {
        (serde_json::Value::Object(into), serde_json::Value::Object(over)) => {
            for (key, value) in over {
                merge(
                    into.entry(key.clone()).or_insert(serde_json::Value::Null),
                    value,
                );
            }
        }
        (into, over) => *into = over.clone(),
    }
}

/// Why the runner's own parser refuses a config's runner block.
#[derive(Debug, thiserror::Error)]
enum RunnerRefused {
    /// The TaskConfig made of it could not be written as YAML.
    #[error("{0}")]
    Yaml(#[from] serde_norway::Error),
    /// The parser's problems, but those of the host.
    #[error("{}", said(.0))]
    Problems(Vec<agent_runner_settings::task::InputError>),
}

/// Each problem as `path: message`, `; ` between them.
fn said(problems: &[agent_runner_settings::task::InputError]) -> String {
    let said: Vec<String> = problems
        .iter()
        .map(|e| format!("{}: {}", e.path(), e.message))
        .collect();
    said.join("; ")
}

/// The config's runner block checked by the runner's own Task YAML parser, over
/// `runner_base` in a TaskConfig of nothing else (the errors name `runner.…`).
fn check_runner(runner: &serde_json::Value, dir: &Path) -> Result<(), RunnerRefused> {
    let mut merged = crate::store::eval_task::runner_base();
    if !runner.is_null() {
        merge(&mut merged, runner);
    }
    let config = serde_json::json!({
        "task": {"id": "eval-check", "title": "check", "instructions": "check",
                 "project": {"root_dir": dir.display().to_string()}},
        "runner": merged,
    });
    let yaml = serde_norway::to_string(&config)?;
    let var = |name: &str| std::env::var_os(name);
    let host = agent_runner_settings::task::Host {
        var: &var,
        cwd: Ok(dir.to_path_buf()),
    };
    let Err(errors) = agent_runner_settings::task::parse(&yaml, &host) else {
        return Ok(());
    };
    // What the host lacks (a key's variable, a file) is checked when each run's
    // TaskConfig is built over the workspace's defaults, not here.
    let problems: Vec<_> = errors
        .iter()
        .filter(|e| e.category() != agent_runner_settings::task::Category::Environment)
        .cloned()
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    Err(RunnerRefused::Problems(problems))
}

/// `a.b[0].c` of a path.
fn dotted(path: &[Segment]) -> String {
    let mut out = String::new();
    for s in path {
        match s {
            Segment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// sha256 of `bytes` in hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("eval-suite-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("repo")).unwrap();
        std::fs::create_dir_all(dir.join("grader")).unwrap();
        std::fs::write(dir.join("m.yaml"), "[]\n").unwrap();
        dir
    }

    const GOOD: &str = "cases:\n  - id: c1\n    repo: repo\n    base: 0123456789abcdef0123456789abcdef01234567\n    prd: Fix it.\n    grader: {files: grader, command: sh t.sh, timeout_sec: 60}\nconfigs:\n  - name: a\n    runner: {meta: {kind: scripted, script: m.yaml}}\n";

    #[test]
    fn a_good_suite_is_read_with_paths_resolved() {
        let dir = scratch();
        let suite = parse(GOOD, &dir, "s").unwrap();
        assert_eq!(suite.name, "s");
        assert_eq!(suite.cases[0].repo, dir.join("repo"));
        assert_eq!(suite.cases[0].grader.files, dir.join("grader"));
        assert_eq!(suite.configs[0].name, "a");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_unknown_key_is_named_with_its_path_and_line() {
        let dir = scratch();
        let text = GOOD.replace("command: sh t.sh", "comand: sh t.sh");
        let problems = parse(&text, &dir, "s").unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, "cases[0].grader");
        assert!(
            problems[0].message.contains("unknown field `comand`"),
            "{problems:?}"
        );
        assert_eq!(problems[0].at.map(|a| a.0), Some(6));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn every_rule_broken_is_reported_with_its_position() {
        let dir = scratch();
        let text = GOOD
            .replace(
                "base: 0123456789abcdef0123456789abcdef01234567",
                "base: main",
            )
            .replace("files: grader", "files: nowhere")
            .replace("timeout_sec: 60", "timeout_sec: 0")
            .replace("id: c1", "id: \"../c1\"");
        let problems = parse(&text, &dir, "s").unwrap_err();
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "cases[0].id",
                "cases[0].base",
                "cases[0].grader.files",
                "cases[0].grader.timeout_sec"
            ]
        );
        assert_eq!(problems[1].at, Some((4, 11)), "{problems:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_key_given_twice_is_refused_with_its_line() {
        let dir = scratch();
        let text = GOOD.replace(
            "runner: {meta: {kind: scripted, script: m.yaml}}",
            "runner:\n      budget: {max_duration_sec: 60}\n      budget: {max_duration_sec: 5}",
        );
        let problems = parse(&text, &dir, "s").unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0]
                .message
                .contains("duplicate entry with key \"budget\""),
            "{problems:?}"
        );
        assert_eq!(problems[0].path, "configs[0].runner");
        assert_eq!(problems[0].at.map(|a| a.0), Some(10), "{problems:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn best_of_is_one_unless_said_and_bounded_with_its_field() {
        let dir = scratch();
        assert_eq!(parse(GOOD, &dir, "s").unwrap().configs[0].best_of, 1);
        let text = GOOD.replace("  - name: a\n", "  - name: a\n    best_of: 3\n");
        assert_eq!(parse(&text, &dir, "s").unwrap().configs[0].best_of, 3);
        let text = GOOD.replace("  - name: a\n", "  - name: a\n    best_of: 9\n");
        let problems = parse(&text, &dir, "s").unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, "configs[0].best_of");
        assert!(
            problems[0].message.starts_with("9 is not between 1 and 8"),
            "{problems:?}"
        );
        assert_eq!(problems[0].at, Some((9, 14)), "{problems:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_grader_inside_the_repository_is_refused() {
        let dir = scratch();
        std::fs::create_dir_all(dir.join("repo/tests")).unwrap();
        let text = GOOD.replace("files: grader", "files: repo/tests");
        let problems = parse(&text, &dir, "s").unwrap_err();
        assert!(problems[0].message.contains("overlaps"), "{problems:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_bad_runner_block_is_named_by_the_runners_parser() {
        let dir = scratch();
        let text = GOOD.replace(
            "runner: {meta: {kind: scripted, script: m.yaml}}",
            "runner: {worker: {max_run_time: 3}}",
        );
        let problems = parse(&text, &dir, "s").unwrap_err();
        assert_eq!(problems[0].path, "configs[0].runner");
        assert!(problems[0].message.contains("max_run_time"), "{problems:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
