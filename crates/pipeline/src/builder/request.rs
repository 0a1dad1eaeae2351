//! The `build_task_config` request (SPEC §12): what the Task Builder is told about
//! the task, and the system prompt stating the reply schema.

use serde::Serialize;

/// The request YAML's content.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BuildRequest {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) task_id: String,
    pub(crate) title: String,
    pub(crate) raw_prompt: String,
    pub(crate) root_dir: String,
    /// Top-level entries and the README's head, at most 2 KiB.
    pub(crate) repo_overview: String,
    pub(crate) depends_on: Vec<DependencySummary>,
    /// The test command the user pinned (the task's, else the workspace's): it runs
    /// whatever the builder proposes, so the builder proposes none (SPEC §16).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pinned_test: Option<String>,
}

/// What a dependency is and how it went.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DependencySummary {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) status: String,
    /// Its latest result's summary, cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) summary: Option<String>,
}

impl BuildRequest {
    /// The request YAML.
    pub(crate) fn to_yaml(&self) -> String {
        serde_norway::to_string(self).unwrap_or_default()
    }

    /// The Task Builder's job for this request.
    fn role(&self) -> String {
        format!("{ROLE} {}", test_rule(self.pinned_test.is_some()))
    }
}

/// The Task Builder's job, for every kind.
const ROLE: &str = "You are the Task Builder of a software pipeline. A user typed a request (raw_prompt) in a chat. \
Turn it into a TaskConfig for agent-runner, which plans the work with an LLM, has the Codex CLI carry it \
out in a Docker sandbox on the repository, and checks it with an optional test command. Write \
instructions a capable engineer could follow without asking back: start with the raw prompt verbatim, \
then what to build or change and how to verify it. Leave choices the user did not make (stack, design, \
tests) to the worker unless the repository overview settles them.";

/// What the builder is told about `task.test`: propose one, or a pinned one exists.
fn test_rule(pinned: bool) -> &'static str {
    if pinned {
        "The user pinned the test command (pinned_test in the request): agent-runner runs it after each \
worker run whatever you write, so do not add task.test; say in the instructions that the work must pass it."
    } else {
        "Add task.test.command only when you know a command that checks the work in this repository."
    }
}

/// The system prompt for `request`: the Task Builder's job and the exact reply
/// schema, with `model` suggested for `runner.meta.model`.
pub(crate) fn system_prompt(request: &BuildRequest, model: &str) -> String {
    let test = if request.pinned_test.is_some() {
        "\x20 # no test: the user pinned one\n"
    } else {
        "\x20 test:            # optional\n\
\x20   command: <shell command run in the repository after each worker run>\n"
    };
    format!(
        "{} Always answer with exactly one YAML document. No code fences, no prose.\n\n\
Reply schema:\n\
type: build_task_config\n\
task:\n\
\x20 id: <task_id from the request>\n\
\x20 title: <title from the request>\n\
\x20 instructions: |\n\
\x20   <raw_prompt verbatim>\n\
\x20   <what to do and how to check it>\n\
\x20 project:\n\
\x20   root_dir: <root_dir from the request>\n\
{test}\
runner:\n\
\x20 meta:\n\
\x20   model: {model}\n\
\x20 worker:\n\
\x20   type: docker_codex_cli\n\
\x20   model: <optional codex model>\n",
        request.role()
    )
}

/// The prompt of a codex Task Builder (`codex exec --output-schema`): the job, the
/// request YAML, and the raw prompt once more on lines of its own.
pub(crate) fn codex_prompt(request: &BuildRequest, model: &str) -> String {
    format!(
        "{} Do not change any file. Your final message is the TaskConfig as JSON following \
the output schema: task.id, task.title and task.project.root_dir as in the request, \
runner.meta.model {model}, runner.worker.type docker_codex_cli, null for what you leave out.\n\n\
The request:\n{}\n\
The user's words (raw_prompt), verbatim:\n{}\n",
        request.role(),
        request.to_yaml(),
        request.raw_prompt
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(pinned_test: Option<&str>) -> BuildRequest {
        BuildRequest {
            kind: "build_task_config",
            task_id: "t-1".into(),
            title: "T".into(),
            raw_prompt: "Do it".into(),
            root_dir: "/r".into(),
            repo_overview: String::new(),
            depends_on: vec![],
            pinned_test: pinned_test.map(str::to_string),
        }
    }

    #[test]
    fn the_builder_is_told_when_a_test_is_pinned() {
        let free = request(None);
        let pinned = request(Some("cargo test"));
        for prompt in [system_prompt(&free, "m"), codex_prompt(&free, "m")] {
            assert!(
                prompt.contains("Add task.test.command only when"),
                "{prompt}"
            );
            assert!(!prompt.contains("pinned"), "{prompt}");
        }
        for prompt in [system_prompt(&pinned, "m"), codex_prompt(&pinned, "m")] {
            assert!(
                prompt.contains("The user pinned the test command (pinned_test in the request)")
                    && prompt.contains("do not add task.test"),
                "{prompt}"
            );
            assert!(!prompt.contains("Add task.test.command"), "{prompt}");
        }
        assert!(system_prompt(&free, "m").contains("  test:            # optional\n"));
        assert!(!system_prompt(&pinned, "m").contains("  test:"));
        assert!(pinned.to_yaml().contains("pinned_test: cargo test\n"));
        assert!(!free.to_yaml().contains("pinned_test"));
    }
}
