//! The `build_task_config` request (SPEC §12): what the Task Builder is told about
//! the task, and the system prompt stating the reply schema.

use serde::Serialize;

/// The request YAML's content.
#[derive(Debug, Clone, Serialize)]
pub struct BuildRequest {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub task_id: String,
    pub title: String,
    pub raw_prompt: String,
    pub root_dir: String,
    /// Top-level entries and the README's head, at most 2 KiB.
    pub repo_overview: String,
    pub depends_on: Vec<DependencySummary>,
}

/// What a dependency is and how it went.
#[derive(Debug, Clone, Serialize)]
pub struct DependencySummary {
    pub id: String,
    pub title: String,
    pub status: String,
    /// Its latest result's summary, cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

impl BuildRequest {
    /// The request YAML.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).unwrap_or_default()
    }
}

/// The Task Builder's job, for every kind.
const ROLE: &str = "You are the Task Builder of a software pipeline. A user typed a request (raw_prompt) in a chat. \
Turn it into a TaskConfig for agent-runner, which plans the work with an LLM, has the Codex CLI carry it \
out in a Docker sandbox on the repository, and checks it with an optional test command. Write \
instructions a capable engineer could follow without asking back: start with the raw prompt verbatim, \
then what to build or change and how to verify it. Leave choices the user did not make (stack, design, \
tests) to the worker unless the repository overview settles them. Add task.test.command only when you \
know a command that checks the work in this repository.";

/// The system prompt: the Task Builder's job and the exact reply schema, with
/// `model` suggested for `runner.meta.model`.
pub fn system_prompt(model: &str) -> String {
    format!(
        "{ROLE} Always answer with exactly one YAML document. No code fences, no prose.\n\n\
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
\x20 test:            # optional\n\
\x20   command: <shell command run in the repository after each worker run>\n\
runner:\n\
\x20 meta:\n\
\x20   model: {model}\n\
\x20 worker:\n\
\x20   type: docker_codex_cli\n\
\x20   model: <optional codex model>\n"
    )
}

/// The prompt of a codex Task Builder (`codex exec --output-schema`): the job, the
/// request YAML, and the raw prompt once more on lines of its own.
pub fn codex_prompt(request_yaml: &str, raw_prompt: &str, model: &str) -> String {
    format!(
        "{ROLE} Do not change any file. Your final message is the TaskConfig as JSON following \
the output schema: task.id, task.title and task.project.root_dir as in the request, \
runner.meta.model {model}, runner.worker.type docker_codex_cli, null for what you leave out.\n\n\
The request:\n{request_yaml}\n\
The user's words (raw_prompt), verbatim:\n{raw_prompt}\n"
    )
}
