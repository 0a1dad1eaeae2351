//! Tests of the real agents, the Codex CLI and Claude Code, in the real worker image
//! agent-runner-codex:latest (sandbox/build.sh), against fake model APIs.

mod claude_try;
mod claude_worker;
mod mcp;
mod meta_codex;
mod model_server;
mod real_claude;
mod real_codex;
