//! `agent-runner cache ls|rm`: the cache volumes of `runner.worker.caches` on the
//! Docker host (SPEC §21), one per repository and path.

use std::io::Write;

use clap::Subcommand;

use crate::error::exit;
use agent_runner_core::text::escape_controls;
use agent_runner_sandbox::worker::caches;

#[derive(Debug, Subcommand)]
pub(crate) enum CacheCommand {
    /// List the cache volumes: name, repository, path in the sandbox.
    Ls,
    /// Remove cache volumes by name (see `cache ls`), or every one of a repository.
    Rm {
        /// Volume names.
        names: Vec<String>,
        /// Every cache of this repository directory.
        #[arg(long, value_name = "DIR", conflicts_with = "names")]
        repo: Option<std::path::PathBuf>,
    },
}

/// Runs the command; returns the exit code.
pub(crate) fn run(command: CacheCommand) -> i32 {
    match command {
        CacheCommand::Ls => ls(),
        CacheCommand::Rm { names, repo } => rm(names, repo),
    }
}

fn ls() -> i32 {
    let backend = agent_runner_sandbox::backend::open();
    let list = match caches::list(&*backend) {
        Ok(list) => list,
        Err(e) => return failed(&e.to_string()),
    };
    let mut text = String::new();
    for cache in &list {
        text.push_str(&format!(
            "{}\t{}\t{}\n",
            cache.name,
            escape_controls(&cache.repo),
            escape_controls(&cache.path)
        ));
    }
    match super::write_stdout(&text) {
        Ok(()) => exit::COMPLETE,
        Err(e) => failed(&e.to_string()),
    }
}

fn rm(mut names: Vec<String>, repo: Option<std::path::PathBuf>) -> i32 {
    let backend = agent_runner_sandbox::backend::open();
    if let Some(repo) = repo {
        let Ok(dir) = std::fs::canonicalize(&repo) else {
            return failed(&format!("--repo {}: no such directory", repo.display()));
        };
        match caches::list(&*backend) {
            Ok(list) => names.extend(
                list.into_iter()
                    .filter(|c| c.repo == dir.display().to_string())
                    .map(|c| c.name),
            ),
            Err(e) => return failed(&e.to_string()),
        }
    }
    if names.is_empty() {
        return failed(
            "no cache named (give volume names from `agent-runner cache ls`, or --repo DIR)",
        );
    }
    let mut code = exit::COMPLETE;
    for name in &names {
        match caches::remove(&*backend, name) {
            Ok(()) => {
                let _ = writeln!(std::io::stderr(), "removed {name}");
            }
            Err(e) => code = failed(&e.to_string()),
        }
    }
    code
}

fn failed(message: &str) -> i32 {
    let _ = writeln!(std::io::stderr(), "error: {}", escape_controls(message));
    exit::FAILED
}
