//! Task YAML for tests: a v1 task built as a tree and written by serde_norway, the
//! library agent-runner reads it with, so that a test names only the settings its
//! task is about and never writes YAML indentation or quoting by hand. (Tests of
//! the reader itself, fast/validate.rs, write their documents as text.)

use std::fmt;
use std::path::Path;

use serde::Serialize;
use serde_norway::{Mapping, Value};

use super::Scratch;
use super::fake_openai::FakeOpenAi;

/// A v1 Task YAML document.
#[derive(Debug, Clone)]
pub struct TaskYaml(Value);

impl TaskYaml {
    /// Task `id` in `repo`, with `prd` as its `prd.text` and no runner settings.
    ///
    /// A test of the module `docker::runsc` (the boundary and egress tests again)
    /// gets its sandbox under gVisor: `runner.sandbox.runtime: runsc`.
    pub fn new(id: &str, repo: &Path, prd: &str) -> TaskYaml {
        let yaml = TaskYaml(Value::Mapping(Mapping::new()))
            .set("version", 1)
            .set("task.id", id)
            .set("task.repo", repo)
            .set("task.prd.text", prd);
        match runtime_of_this_test() {
            Some(runtime) => yaml.set("runner.sandbox.runtime", runtime),
            None => yaml,
        }
    }

    /// Task `id` in `repo` asking for hello.txt saying hello, and testing it: the task
    /// the real agents are given.
    pub fn hello(id: &str, repo: &Path) -> TaskYaml {
        TaskYaml::new(id, repo, "Create hello.txt containing the word hello.")
            .test("grep -qx hello hello.txt")
    }

    /// Sets `path` (keys joined by dots) to `value`, adding the mappings on the way.
    pub fn set(mut self, path: &str, value: impl Serialize) -> TaskYaml {
        let value = serde_norway::to_value(value).unwrap();
        let (parents, last) = match path.rsplit_once('.') {
            Some((parents, last)) => (Some(parents), last),
            None => (None, path),
        };
        let mut at = &mut self.0;
        for key in parents.into_iter().flat_map(|p| p.split('.')) {
            let map = at.as_mapping_mut().expect("a mapping on the way");
            at = map
                .entry(key.into())
                .or_insert_with(|| Value::Mapping(Mapping::new()));
        }
        at.as_mapping_mut()
            .expect("a mapping on the way")
            .insert(last.into(), value);
        self
    }

    /// Removes `path` (keys joined by dots).
    pub fn remove(mut self, path: &str) -> TaskYaml {
        let mut at = &mut self.0;
        let mut keys: Vec<&str> = path.split('.').collect();
        let last = keys.pop().unwrap();
        for key in keys {
            at = at.get_mut(key).expect("the path is there");
        }
        at.as_mapping_mut().unwrap().remove(last);
        self
    }

    /// `task.test.command`, if `command` is one.
    pub fn test<'a>(self, command: impl Into<Option<&'a str>>) -> TaskYaml {
        match command.into() {
            Some(command) => self.set("task.test.command", command),
            None => self,
        }
    }

    /// Meta over the OpenAI API at `server`, its model `test-model`.
    pub fn openai(self, server: &FakeOpenAi) -> TaskYaml {
        self.set("runner.meta.base_url", &server.url)
            .set("runner.meta.model", "test-model")
    }

    /// Meta replies from the file `script` (`kind: scripted`), for `max_loops` loops.
    pub fn scripted(self, script: impl AsRef<Path>, max_loops: u32) -> TaskYaml {
        self.set("runner.meta.kind", "scripted")
            .set("runner.meta.script", script.as_ref())
            .set("runner.meta.max_loops", max_loops)
    }

    /// The worker in `image`.
    pub fn image(self, image: &str) -> TaskYaml {
        self.set("runner.worker.docker_image", image)
    }
}

/// The runtime the running test's sandboxes take from the module it is in
/// (`docker::runsc::…`, by its thread's name: the test harness names each test's
/// thread after its path); it fails the test, saying why, when that runtime is not
/// here.
fn runtime_of_this_test() -> Option<&'static str> {
    if !under_gvisor() {
        return None;
    }
    super::prerequisite::require(super::prerequisite::Needs::Runsc);
    Some("runsc")
}

/// Whether the running test is one of `docker::runsc`, its sandboxes under gVisor:
/// for the few checks that differ there (each says why, as the docs do).
pub fn under_gvisor() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|name| name.contains("::runsc::"))
}

impl fmt::Display for TaskYaml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&serde_norway::to_string(&self.0).map_err(|_| fmt::Error)?)
    }
}

/// Scripted Meta replies in `dir`: one criterion, AC-1; one run of the `worker`
/// kind (`codex-cli`, `claude-code-cli`) with `prompt`; then an assessment that
/// finds `passed` met. Returns the script's path.
pub fn one_run(dir: &Scratch, worker: &str, prompt: &str, passed: &[&str]) -> String {
    let script = format!(
        "- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: hello.txt says hello\n\
         - type: next_action\n  decision:\n    action: run_worker\n    reason: nothing done yet\n  worker_call:\n    worker_type: {worker}\n    mode: exec\n    prompt: {prompt:?}\n\
         - type: completion_assessment\n  summary: assessed\n  details:\n    passed_criteria: [{}]\n    remaining_risks: []\n",
        passed.join(", ")
    );
    dir.file("meta-script.yaml", script).display().to_string()
}
