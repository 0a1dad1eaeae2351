//! agent-runner: drives one software task to completion. Meta (an LLM) plans and
//! judges, the Worker (a coding-agent CLI: Codex or Claude Code) edits code inside
//! a Docker sandbox, the task's tests gate completion, and a Task Note records
//! everything.

mod cli;
mod error;

fn main() {
    std::process::exit(cli::main());
}
