//! `eval import swebench FILE.jsonl --repos DIR`: a suite from SWE-bench instances
//! (`instance_id`, `repo`, `base_commit`, `problem_statement`, `test_patch`,
//! `FAIL_TO_PASS`, `PASS_TO_PASS`) whose repositories are present under DIR (as
//! `owner__name`, `name` or `owner/name`). The test patch is applied to the base in
//! a scratch repository of ours and the files it touches become the grader's files
//! (copied over the attempt's when grading); the grader's command runs pytest on
//! FAIL_TO_PASS and PASS_TO_PASS. The instance's solution patch is not the
//! grader's: it is left out (the suite has none), so `eval validate` checks each
//! grader fails on its base. Instances whose repository is not here are skipped and
//! named.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::EvalError;
use super::repo::EvalRepo;
use super::suite::{Case, Grader};
use agent_runner_core::interrupt::Interrupt;

/// Longest instances file read.
const MAX_FILE_BYTES: u64 = 1 << 30;

#[derive(Debug, Deserialize)]
struct Instance {
    instance_id: String,
    repo: String,
    base_commit: String,
    problem_statement: String,
    test_patch: String,
    #[serde(rename = "FAIL_TO_PASS", default)]
    fail_to_pass: TestList,
    #[serde(rename = "PASS_TO_PASS", default)]
    pass_to_pass: TestList,
}

/// A list of test ids, as a JSON array or (SWE-bench's own files) a string holding one.
#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
enum TestList {
    #[default]
    None,
    List(Vec<String>),
    Text(String),
}

/// A `TestList::Text` that does not hold a JSON list of test ids.
#[derive(Debug, thiserror::Error)]
#[error("not a JSON list of test ids: {0}")]
struct NotAList(#[from] serde_json::Error);

impl TestList {
    fn ids(&self) -> Result<Vec<String>, NotAList> {
        match self {
            TestList::None => Ok(Vec::new()),
            TestList::List(ids) => Ok(ids.clone()),
            TestList::Text(text) => Ok(serde_json::from_str(text)?),
        }
    }
}

/// What an import did.
#[derive(Debug, Default)]
pub struct Imported {
    pub cases: usize,
    /// Instance ids skipped, and why.
    pub skipped: Vec<(String, String)>,
}

/// Writes the suite of the instances in `file` into `out` (`suite.yaml`, `graders/`),
/// graders to run in `image`.
pub fn import(
    file: &Path,
    repos: &Path,
    out: &Path,
    image: &str,
    interrupt: Interrupt,
) -> Result<Imported, EvalError> {
    let bytes = agent_runner_core::fs::read::whole(file, MAX_FILE_BYTES).map_err(|e| {
        EvalError::Unreadable {
            path: file.to_path_buf(),
            detail: e.to_string(),
        }
    })?;
    // git resolves a relative alternate against its own directory: every path absolute.
    let repos = &std::path::absolute(repos).map_err(EvalError::io("resolve", repos))?;
    let out = &std::path::absolute(out).map_err(EvalError::io("resolve", out))?;
    std::fs::create_dir_all(out.join("graders")).map_err(EvalError::io("create", out))?;
    let scratch = out.join(format!(".import-{}", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let repo = EvalRepo::scratch(&scratch, interrupt)?;
        let mut imported = Imported::default();
        let mut cases = Vec::new();
        for (number, line, _) in agent_runner_core::fs::jsonl::lines(&bytes) {
            if interrupt.is_set() {
                return Err(EvalError::Interrupted);
            }
            let instance: Instance = match serde_json::from_slice(line) {
                Ok(i) => i,
                Err(e) => {
                    imported
                        .skipped
                        .push((format!("line {number}"), format!("not an instance: {e}")));
                    continue;
                }
            };
            match case_of(&instance, &repo, repos, out, image, interrupt) {
                Ok(case) => cases.push(case),
                Err(EvalError::Interrupted) => return Err(EvalError::Interrupted),
                Err(EvalError::Case { detail, .. }) => imported
                    .skipped
                    .push((instance.instance_id.clone(), detail)),
                Err(e) => imported
                    .skipped
                    .push((instance.instance_id.clone(), e.to_string())),
            }
        }
        imported.cases = cases.len();
        write_suite(out, file, &cases, image)?;
        Ok(imported)
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// A case id from an instance id (`django__django-11099` stays as it is).
fn case_id(instance_id: &str) -> String {
    let id: String = instance_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let id = id.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    id.chars().take(40).collect()
}

/// Where `repo` (`owner/name`) is under `repos`.
fn local_repo(repos: &Path, repo: &str) -> Option<PathBuf> {
    let (owner, name) = repo.split_once('/').unwrap_or(("", repo));
    [
        repos.join(format!("{owner}__{name}")),
        repos.join(name),
        repos.join(owner).join(name),
    ]
    .into_iter()
    .find(|p| !owner.contains("..") && !name.contains("..") && p.is_dir())
}

fn case_of(
    instance: &Instance,
    repo: &EvalRepo,
    repos: &Path,
    out: &Path,
    image: &str,
    interrupt: Interrupt,
) -> Result<Case, EvalError> {
    let fail = |detail: String| EvalError::Case {
        case: instance.instance_id.clone(),
        detail,
    };
    let id = case_id(&instance.instance_id);
    if id.is_empty() {
        return Err(fail("no usable id".into()));
    }
    let local = local_repo(repos, &instance.repo).ok_or_else(|| {
        fail(format!(
            "repository {} is not under {}",
            instance.repo,
            repos.display()
        ))
    })?;
    let mut tests = instance
        .fail_to_pass
        .ids()
        .map_err(|e| fail(format!("FAIL_TO_PASS: {e}")))?;
    if tests.is_empty() {
        return Err(fail("FAIL_TO_PASS is empty: nothing to grade by".into()));
    }
    tests.extend(
        instance
            .pass_to_pass
            .ids()
            .map_err(|e| fail(format!("PASS_TO_PASS: {e}")))?,
    );
    let mut case = Case {
        id: id.clone(),
        repo: local,
        base: instance.base_commit.clone(),
        prd: instance.problem_statement.clone(),
        grader: Grader {
            files: out.join("graders").join(&id),
            command: pytest_command(&tests),
            timeout_sec: 1800,
            image: image.to_string(),
        },
        solution: None,
    };
    let base = repo.import(&case, interrupt)?;
    case.base = base.clone();
    let patch = out.join("graders").join(format!(".{id}.test.patch"));
    std::fs::write(&patch, &instance.test_patch).map_err(EvalError::io("write", &patch))?;
    let with_tests = repo.with_patch(&id, &base, &patch, interrupt);
    let _ = std::fs::remove_file(&patch);
    let with_tests = with_tests?;
    let _ = std::fs::remove_dir_all(&case.grader.files);
    for path in patched_files(&instance.test_patch) {
        let target = case.grader.files.join(&path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(EvalError::io("create", parent))?;
        }
        let content = repo.show(&with_tests, &path, interrupt)?;
        std::fs::write(&target, content).map_err(EvalError::io("write", &target))?;
    }
    std::fs::create_dir_all(&case.grader.files)
        .map_err(EvalError::io("create", &case.grader.files))?;
    Ok(case)
}

/// The files a patch leaves (its `+++ b/…` paths; deleted files have none), plain
/// relative paths only.
fn patched_files(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = patch
        .lines()
        .filter_map(|l| l.strip_prefix("+++ b/"))
        .map(|p| p.trim_end().to_string())
        .filter(|p| {
            !p.is_empty()
                && !p.starts_with('/')
                && !p.split('/').any(|s| s == ".." || s == "." || s.is_empty())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `python -m pytest` on the test ids, each quoted for the shell.
fn pytest_command(tests: &[String]) -> String {
    let quoted: Vec<String> = tests
        .iter()
        .map(|t| format!("'{}'", t.replace('\'', "'\\''")))
        .collect();
    format!(
        "python -m pytest -q -p no:cacheprovider {}",
        quoted.join(" ")
    )
}

fn write_suite(out: &Path, file: &Path, cases: &[Case], image: &str) -> Result<(), EvalError> {
    let relative = |p: &Path| {
        p.strip_prefix(out)
            .map_or(p.display().to_string(), |r| r.display().to_string())
    };
    let suite = serde_json::json!({
        "name": file.file_stem().map_or("swebench".into(), |s| s.to_string_lossy().to_string()),
        "image": image,
        "cases": cases.iter().map(|c| serde_json::json!({
            "id": c.id,
            "repo": c.repo.display().to_string(),
            "base": c.base,
            "prd": c.prd,
            "grader": {"files": relative(&c.grader.files), "command": c.grader.command, "timeout_sec": c.grader.timeout_sec},
        })).collect::<Vec<_>>(),
        "configs": [{"name": "default", "runner": {}}],
    });
    let yaml = serde_norway::to_string(&suite).map_err(|e| EvalError::Engine(e.to_string()))?;
    let text = format!(
        "# Imported from {} by `agent-runner eval import swebench`. Edit `configs`\n# (Task YAML `runner:` keys) and `image` (an image with each repository's\n# environment) before `eval validate` and `eval run`.\n{yaml}",
        file.display()
    );
    let path = out.join("suite.yaml");
    agent_runner_core::fs::atomic::write(&path, text.as_bytes())
        .map_err(EvalError::io("write", &path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_paths_and_commands_from_an_instance() {
        assert_eq!(case_id("django__django-11099"), "django__django-11099");
        assert_eq!(case_id("astropy/astropy.12907"), "astropy-astropy-12907");
        assert_eq!(
            patched_files(
                "--- a/t/x.py\n+++ b/t/x.py\n@@\n--- /dev/null\n+++ b/t/new.py\n--- a/gone.py\n+++ /dev/null\n+++ b/../evil\n"
            ),
            ["t/new.py", "t/x.py"]
        );
        assert_eq!(
            pytest_command(&["t/x.py::test_a".into(), "t/x.py::test_b[it's]".into()]),
            "python -m pytest -q -p no:cacheprovider 't/x.py::test_a' 't/x.py::test_b[it'\\''s]'"
        );
        let list: TestList = serde_json::from_str("\"[\\\"a::b\\\"]\"").unwrap();
        assert_eq!(list.ids().unwrap(), ["a::b"]);
    }
}
