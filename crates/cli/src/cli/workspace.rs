//! `agent-runner workspace init|set`: creates the workspace of a directory (init),
//! or replaces its defaults (init and set, `--defaults FILE.yaml`), and prints its
//! id, metadata directory and what its attempts need to be verified.

use std::path::PathBuf;

use clap::Subcommand;

use crate::error::{Error, exit};
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::{escape_controls, one_line};
use agent_runner_pipeline::Workspace;
use agent_runner_pipeline::store::defaults::Defaults;

use super::{report, write_stdout};

/// `agent-runner workspace ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum WorkspaceCommand {
    /// Create the workspace of DIR (default: the current directory), or update its defaults.
    Init {
        /// The project directory (root_dir).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// YAML with `runner:` (meta/worker settings that win over the builder's),
        /// `builder:` ({kind: meta|scripted|codex, model, script}), `isolation: clone`,
        /// `task: {test: {command, timeout_sec}}` (the pinned test) and
        /// `require_test: true|false` (default true), `deliver: {push_url, pr_command}`.
        #[arg(long, value_name = "FILE.yaml")]
        defaults: Option<PathBuf>,
    },
    /// Replace the defaults of the workspace of -w DIR (default: the current directory).
    Set {
        #[command(flatten)]
        workspace: super::WorkspaceDir,
        /// The new defaults, as for `workspace init --defaults` (they replace the old
        /// ones whole).
        #[arg(long, value_name = "FILE.yaml", required = true)]
        defaults: PathBuf,
    },
}

/// Runs a `workspace` subcommand; returns the exit code.
pub(crate) fn run(command: WorkspaceCommand) -> i32 {
    match command {
        WorkspaceCommand::Init { dir, defaults } => done(init(dir, defaults)),
        WorkspaceCommand::Set {
            workspace,
            defaults,
        } => done(init(workspace.dir, Some(defaults))),
    }
}

fn done(result: Result<(), Error>) -> i32 {
    match result {
        Ok(()) => exit::COMPLETE,
        Err(e) => report(&e, &Redactor::default()),
    }
}

fn init(dir: PathBuf, defaults: Option<PathBuf>) -> Result<(), Error> {
    let mut ws = Workspace::open(&super::home()?, &dir)?;
    if let Some(file) = defaults {
        ws.defaults = Defaults::load(&file)?;
        ws.save()?;
    }
    let d = &ws.defaults;
    let test = match d.pinned_test() {
        Some(t) => escape_controls(&one_line(&t.command)),
        None => "(none pinned)".into(),
    };
    write_stdout(&format!(
        // `metadata:` stays the last line: scripts take the path as the rest of it.
        "workspace {}\nroot_dir: {}\ntest: {test}\nrequire_test: {}\nmetadata: {}\n",
        ws.id,
        ws.root_dir.display(),
        d.require_test(),
        ws.dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use agent_runner_pipeline::store::defaults::BuilderKind;

    #[test]
    fn the_defaults_help_names_every_builder_kind() {
        let mut cli = super::super::Cli::command();
        let init = cli
            .find_subcommand_mut("workspace")
            .and_then(|w| w.find_subcommand_mut("init"))
            .expect("workspace init exists");
        let help = init.render_long_help().to_string();
        let kinds = [BuilderKind::Meta, BuilderKind::Scripted, BuilderKind::Codex]
            .map(BuilderKind::as_str)
            .join("|");
        assert!(help.contains(&format!("{{kind: {kinds},")), "{help}");
    }
}
