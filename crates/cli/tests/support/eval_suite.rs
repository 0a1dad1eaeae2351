//! A generated evaluation suite (testdata/demo-eval/make-suite.sh): real small
//! projects with planted bugs, one case per kind, held-out graders beside them, the
//! scripted config; with its own AGENT_RUNNER_HOME.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::{Run, Scratch, short_id};

pub struct EvalSuite {
    pub scratch: Scratch,
    pub suite: PathBuf,
    pub home: PathBuf,
    /// The eval workspace's directory.
    pub root: PathBuf,
    /// Appended to every case id (ids name tasks and containers: unique per test).
    pub suffix: String,
}

impl EvalSuite {
    /// One case per kind of `kinds` (fixed, wrong, slow, search).
    pub fn new(name: &str, kinds: &[&str]) -> EvalSuite {
        EvalSuite::with_budget(name, kinds, 60)
    }

    /// `new`, with the config's `budget.max_duration_sec` (the slow case sleeps past it).
    pub fn with_budget(name: &str, kinds: &[&str], max_duration_sec: u32) -> EvalSuite {
        EvalSuite::in_dir(&std::env::temp_dir(), name, kinds, max_duration_sec)
    }

    /// `with_budget`, everything under `dir` (a remote host's shared directory).
    pub fn in_dir(dir: &Path, name: &str, kinds: &[&str], max_duration_sec: u32) -> EvalSuite {
        EvalSuite::made(dir, name, kinds, max_duration_sec, &[])
    }

    /// `new`, with more of make-suite.sh's environment (`PYTHON_IMAGE`, `GRADER_IMAGE`).
    pub fn with_env(name: &str, kinds: &[&str], env: &[(&str, &str)]) -> EvalSuite {
        EvalSuite::made(&std::env::temp_dir(), name, kinds, 60, env)
    }

    fn made(
        dir: &Path,
        name: &str,
        kinds: &[&str],
        max_duration_sec: u32,
        env: &[(&str, &str)],
    ) -> EvalSuite {
        let scratch = Scratch::new_in(dir, name);
        let suffix = format!("-{}", short_id());
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo-eval/make-suite.sh");
        let mut args = vec![script.to_str().unwrap(), scratch.path.to_str().unwrap()];
        args.extend(kinds);
        let mut make = Run::program("sh", &args)
            .env("SUFFIX", &suffix)
            .env("IMAGE", super::docker::TEST_IMAGE)
            .env("MAX_DURATION_SEC", max_duration_sec.to_string());
        for (name, value) in env {
            make = make.env(name, value);
        }
        make.output().code(0);
        EvalSuite {
            suite: scratch.join("suite.yaml"),
            home: scratch.join("home"),
            root: scratch.join("eval-ws"),
            suffix,
            scratch,
        }
    }

    /// The id of the `i`th case (1-based) of kind `kind`.
    pub fn case(&self, kind: &str, i: usize) -> String {
        format!("{kind}-{i}{}", self.suffix)
    }

    /// `agent-runner eval WORDS… SUITE REST…` with this suite's home.
    pub fn cmd(&self, words: &[&str], rest: &[&str]) -> Run {
        let mut args = vec!["eval"];
        args.extend(words);
        args.push(self.suite.to_str().unwrap());
        args.extend(rest);
        Run::new(&args)
            .env("AGENT_RUNNER_HOME", &self.home)
            .deadline(Duration::from_secs(400))
    }

    /// `eval run` into this suite's workspace, with `rest`.
    pub fn run(&self, rest: &[&str]) -> Run {
        let mut all = vec!["-w", self.root.to_str().unwrap()];
        all.extend(rest);
        self.cmd(&["run"], &all)
    }

    /// The eval's directory (the one of the workspace).
    pub fn dir(&self) -> PathBuf {
        let evals = std::fs::read_dir(self.home.join("workspaces"))
            .unwrap()
            .flatten()
            .next()
            .expect("a workspace")
            .path()
            .join("evals");
        std::fs::read_dir(evals)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.is_dir())
            .expect("the eval's directory")
    }

    pub fn results(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir().join("results.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Each case's last outcome.
    pub fn outcomes(&self) -> BTreeMap<String, String> {
        self.results()
            .into_iter()
            .map(|l| {
                (
                    l["case"].as_str().unwrap().to_string(),
                    l["outcome"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    pub fn summary(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.dir().join("summary.json")).unwrap())
            .unwrap()
    }

    /// The task ids of the runs (config `scripted`, one try).
    pub fn task_ids(&self, cases: &[String]) -> Vec<String> {
        cases
            .iter()
            .map(|c| format!("eval-{c}-scripted-1"))
            .collect()
    }
}

/// `summary` without what differs between two evaluations of the same suite: times.
pub fn without_times(mut summary: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.retain(|k, _| !k.ends_with("_ms") && k != "written_at");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut summary);
    summary
}
