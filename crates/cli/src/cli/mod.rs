//! Command line: parses arguments and dispatches to one module per command. stdout
//! carries only results; progress and errors go to stderr.

mod bad_value;
mod cache;
mod doctor;
mod eval;
mod hosts;
mod input;
mod orchestrate;
mod plan;
mod run;
mod serve;
mod task;
mod tools;
mod usage;
mod validate;
mod watch;
mod workspace;

use std::io::Write;

use clap::{Parser, Subcommand};

use crate::error::{Error, exit};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::escape_controls;

#[derive(Debug, Parser)]
#[command(
    name = "agent-runner",
    version,
    about = "Drive one software task to completion: Meta (an LLM) plans and judges, \
             a coding agent (Codex CLI or Claude Code) edits code in a Docker sandbox, \
             tests gate completion.",
    after_help = "The Task YAML is read from stdin, e.g. `agent-runner run < task.yaml`.\n\
                  Progress goes to stderr (RUST_LOG filters it); results go to stdout."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the task in the Task YAML on stdin until COMPLETE or FAILED; write the Task Note.
    Run {
        /// Meta model to use (overrides runner.meta.model).
        #[arg(long, value_name = "MODEL")]
        meta_model: Option<String>,
        /// Print the result as one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Go on with the task where its last run (failed or interrupted) left it:
        /// the saved criteria, loops and history, no new plan.
        #[arg(long)]
        resume: bool,
        /// With --resume: a follow-up message for Meta's next step and the worker;
        /// goes on after COMPLETE too, with the same criteria.
        #[arg(long, value_name = "TEXT", requires = "resume")]
        message: Option<String>,
    },
    /// Check the Task YAML on stdin and print the task as it would run; runs nothing.
    Validate,
    /// Check that this machine can run tasks (docker, the worker image, the agent, auth,
    /// Meta endpoint, file ownership): one line per check. Uses the Task YAML on stdin
    /// if given, else the defaults.
    Doctor,
    /// Cache volumes of runner.worker.caches (one per repository and path): ls, rm.
    Cache {
        #[command(subcommand)]
        command: cache::CacheCommand,
    },
    /// Workspaces: a project directory plus its task metadata ($AGENT_RUNNER_HOME).
    Workspace {
        #[command(subcommand)]
        command: workspace::WorkspaceCommand,
    },
    /// Tasks of a workspace: create, list, show, enqueue.
    Task {
        #[command(subcommand)]
        command: task::TaskCommand,
    },
    /// Plan with Meta: turn a request into phases of tasks, edit the plan (--patch),
    /// or show it (--show).
    Plan(plan::PlanArgs),
    /// Run the queued jobs of a workspace: build each TaskConfig, run agent-runner, record.
    Orchestrate {
        #[command(flatten)]
        workspace: WorkspaceDir,
        /// Attempts at once; above 1, each runs in its own clone (git workspaces).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
        jobs: u16,
        /// Stop when no job is claimable and nothing runs (exit 0 if all succeeded).
        #[arg(long)]
        once: bool,
        /// Claim no more jobs once the attempts this orchestrator finished cost this
        /// much (USD, with the workspace's runner.pricing); running ones finish.
        #[arg(long, value_name = "USD", value_parser = positive_usd)]
        max_cost_usd: Option<f64>,
        /// Claim no more jobs once the attempts this orchestrator finished used this
        /// many tokens; running ones finish.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        max_tokens: Option<u64>,
        /// A Docker host attempts are placed on (repeatable; over the workspace's
        /// `hosts`): NAME=URL[:SLOTS], URL unix://, tcp:// (loopback, else TLS by a
        /// docker context), ssh:// or a docker context's name; SLOTS default 1.
        #[arg(long = "host", value_name = "NAME=URL[:SLOTS]", value_parser = hosts::parse_flag)]
        hosts: Vec<agent_runner_sandbox::backend::host::HostSpec>,
    },
    /// What a workspace's attempts used and cost (tokens, USD), per day and per model.
    Usage {
        #[command(flatten)]
        workspace: WorkspaceDir,
        /// Only attempts started on this day (UTC) or later.
        #[arg(long, value_name = "YYYY-MM-DD", value_parser = usage::date)]
        since: Option<String>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Serve the web view of a workspace: chat box, tasks with live status, Run
    /// buttons, results, notes, the plan; prints its URL.
    Serve {
        #[command(flatten)]
        workspace: WorkspaceDir,
        /// Address to listen on; port 0 picks a free port.
        #[arg(long, default_value = "127.0.0.1:8765", value_name = "IP:PORT", value_parser = serve::parse_addr)]
        addr: std::net::SocketAddr,
        /// Allow an address that is not loopback (reachable from other machines).
        #[arg(long)]
        allow_remote: bool,
    },
    /// Docker hosts of `--host` or the workspace's `hosts`: check, prepare.
    Hosts {
        #[command(subcommand)]
        command: hosts::HostsCommand,
    },
    /// Evaluate configurations on a suite of cases with held-out graders:
    /// run, validate.
    Eval {
        #[command(subcommand)]
        command: eval::EvalCommand,
    },
    /// agent-runner's tools volume (the agents and its helper, for any image).
    Tools {
        #[command(subcommand)]
        command: tools::ToolsCommand,
    },
}

/// `-w/--workspace DIR` of the pipeline commands: the workspace's directory (its
/// root_dir), the current directory by default (SPEC §11).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct WorkspaceDir {
    /// The workspace's directory (root_dir).
    #[arg(
        short = 'w',
        long = "workspace",
        default_value = ".",
        value_name = "DIR"
    )]
    pub(crate) dir: std::path::PathBuf,
}

/// Runs the program; returns the process exit code.
pub(crate) fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return exit::of_usage(&e);
        }
    };
    agent_runner_core::logging::init();
    agent_runner_core::sys::raise_open_files_limit();
    let interrupt = Interrupt::from_signals();
    match cli.command {
        Command::Run {
            meta_model,
            json,
            resume,
            message,
        } => run::run(meta_model, json, resume, message, interrupt),
        Command::Validate => validate::validate(interrupt),
        Command::Doctor => doctor::doctor(interrupt),
        Command::Cache { command } => cache::run(command),
        Command::Workspace { command } => workspace::run(command),
        Command::Task { command } => task::run(command),
        Command::Plan(args) => plan::run(args, interrupt),
        Command::Orchestrate {
            workspace,
            jobs,
            once,
            max_cost_usd,
            max_tokens,
            hosts,
        } => orchestrate::run(
            &workspace.dir,
            agent_runner_pipeline::orchestrator::orchestrate::Options {
                jobs: usize::from(jobs),
                once,
                limit: agent_runner_pipeline::orchestrator::spend_limit::SpendLimit {
                    max_tokens,
                    max_cost_usd,
                },
                hosts,
            },
            interrupt,
        ),
        Command::Usage {
            workspace,
            since,
            json,
        } => usage::run(&workspace.dir, since, json),
        Command::Hosts { command } => hosts::run(command, interrupt),
        Command::Serve {
            workspace,
            addr,
            allow_remote,
        } => serve::run(&workspace.dir, addr, allow_remote, interrupt),
        Command::Tools { command } => tools::run(command, interrupt),
        Command::Eval { command } => eval::run(command, interrupt),
    }
}

/// `--max-cost-usd`: a positive, finite number of dollars.
fn positive_usd(value: &str) -> Result<f64, bad_value::BadValue> {
    match value.trim().parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err(bad_value::BadValue::Usd(value.to_string())),
    }
}

/// This binary, for the runner and plan children the pipeline starts.
fn this_binary() -> Result<std::path::PathBuf, Error> {
    Ok(
        std::env::current_exe().map_err(agent_runner_pipeline::PipelineError::io(
            "locate the agent-runner binary",
            "/proc/self/exe",
        ))?,
    )
}

/// Where workspaces live: `$AGENT_RUNNER_HOME`, else `~/.multiverse`.
fn home() -> Result<std::path::PathBuf, Error> {
    Ok(agent_runner_pipeline::store::workspace::home(&|name| {
        std::env::var(name).ok()
    })?)
}

/// Writes `text` to stdout and flushes.
fn write_stdout(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(Error::Stdout)
}

/// Writes `value` as one line of JSON on stdout, streamed (a large document is never
/// held as a whole string).
fn write_json_stdout(value: &impl serde::Serialize) -> Result<(), Error> {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    serde_json::to_writer(&mut out, value)
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(Error::Stdout)
}

/// Prints each problem of an error (and its hint) on stderr, secrets masked and
/// control characters shown escaped; returns the exit code.
fn report(error: &Error, redactor: &Redactor) -> i32 {
    let mut err = std::io::stderr().lock();
    for (message, hint) in error.problems() {
        let _ = writeln!(
            err,
            "error: {}",
            escape_controls(&redactor.redact(&message))
        );
        if let Some(hint) = hint {
            for line in hint.lines() {
                let _ = writeln!(err, "hint: {}", escape_controls(&redactor.redact(line)));
            }
        }
    }
    error.exit_code()
}

/// Reads and validates the Task YAML from stdin, against the real environment. The
/// validation runs on a thread of its own: a signal is acted on at once even while
/// a large document is parsed.
fn read_task(interrupt: Interrupt) -> Result<agent_runner_settings::task::Task, Error> {
    let text = input::read_stdin(interrupt)?;
    interrupt
        .unless_stopped("task yaml", move || parse_task(&text))
        .unwrap_or(Err(Error::Interrupted))
}

/// Validates a Task YAML against the real environment; `runner.sandbox.host` as a
/// host's address is checked (a URL or a context name, plain `tcp://` beyond the
/// loopback refused), without contacting it: `validate` says what `run` would.
fn parse_task(text: &str) -> Result<agent_runner_settings::task::Task, Error> {
    let task =
        agent_runner_settings::task::parse(text, &agent_runner_settings::task::Host::process())?;
    if let Some(host) = &task.sandbox_host
        && let Err(e) = agent_runner_sandbox::backend::host::Target::parse(host)
    {
        let problem =
            agent_runner_settings::task::InputError::new("runner.sandbox.host", e.to_string());
        return Err(problem.into());
    }
    Ok(task)
}
