//! `agent-runner eval`: run a suite of cases against configurations and grade them
//! with held-out graders (`eval run`), check a suite's graders (`eval validate`),
//! and write a suite from SWE-bench instances (`eval import swebench`) (SPEC §26).
//! The work is the pipeline's `eval`; this module parses and prints.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use crate::error::{Error, exit};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_pipeline::eval::run::{self as eval_run, Options, Rerun};
use agent_runner_pipeline::eval::{grade_on_host, import_swebench, suite, table, validate};

use super::{report, write_stdout};

#[derive(Debug, Subcommand)]
pub(crate) enum EvalCommand {
    /// Run every case × config × try of SUITE as tasks of an eval workspace, grade
    /// each with its held-out grader, and print the pass rates; a second run of the
    /// same suite and workspace runs only what has no outcome yet.
    Run {
        /// The suite file (YAML).
        suite: PathBuf,
        /// The eval workspace's directory: made when new (default: SUITE's name
        /// with `.eval`, beside it).
        #[arg(short = 'w', long = "workspace", value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Only this config (repeatable; default: all of the suite's).
        #[arg(long = "config", value_name = "NAME")]
        configs: Vec<String>,
        /// Tries per case and config (pass@k for k up to N).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
        tries: u32,
        /// Attempts (and gradings) at once.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
        jobs: u16,
        /// A Docker host attempts are placed on (repeatable), as for `orchestrate`.
        #[arg(long = "host", value_name = "NAME=URL[:SLOTS]", value_parser = super::hosts::parse_flag)]
        hosts: Vec<agent_runner_sandbox::backend::host::HostSpec>,
        /// Run again the runs with this outcome: infra_error, unresolved or all.
        #[arg(long, value_name = "OUTCOME", value_parser = rerun)]
        rerun: Option<Rerun>,
    },
    /// Check SUITE: its format, then that each grader fails on its case's base and
    /// passes with the case's solution where one is given.
    Validate { suite: PathBuf },
    /// Write a suite from another harness's cases.
    Import {
        #[command(subcommand)]
        source: ImportSource,
    },
    /// One grading on this process's docker host, asked on stdin by `eval run`
    /// for an attempt that ran on a host (internal).
    #[command(hide = true)]
    Grade,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ImportSource {
    /// SWE-bench instances (JSON Lines) whose repositories are under --repos DIR (as
    /// owner__name, name or owner/name); the others are skipped and named.
    Swebench {
        /// The instances file (JSON Lines).
        file: PathBuf,
        /// Where the repositories are.
        #[arg(long, value_name = "DIR")]
        repos: PathBuf,
        /// Where the suite goes (suite.yaml, graders/); default: FILE's name with `.suite`, beside it.
        #[arg(short = 'o', long = "out", value_name = "DIR")]
        out: Option<PathBuf>,
        /// The image graders run in: one with the repositories' environments.
        #[arg(long, default_value = agent_runner_settings::task::DEFAULT_DOCKER_IMAGE, value_name = "IMAGE")]
        image: String,
    },
}

fn rerun(value: &str) -> Result<Rerun, super::bad_value::BadValue> {
    match value {
        "infra_error" => Ok(Rerun::InfraError),
        "unresolved" => Ok(Rerun::Unresolved),
        "all" => Ok(Rerun::All),
        other => Err(super::bad_value::BadValue::Rerun(other.to_string())),
    }
}

/// Runs the command; returns the exit code.
pub(crate) fn run(command: EvalCommand, interrupt: Interrupt) -> i32 {
    let done = match command {
        EvalCommand::Run {
            suite,
            workspace,
            configs,
            tries,
            jobs,
            hosts,
            rerun,
        } => {
            let options = Options {
                configs,
                tries,
                jobs: usize::from(jobs),
                hosts,
                rerun,
            };
            run_suite(&suite, workspace, &options, interrupt)
        }
        EvalCommand::Validate { suite } => validate_suite(&suite, interrupt),
        EvalCommand::Import {
            source:
                ImportSource::Swebench {
                    file,
                    repos,
                    out,
                    image,
                },
        } => import_swebench(&file, &repos, out, &image, interrupt),
        EvalCommand::Grade => grade(interrupt),
    };
    match done {
        Ok(code) => code,
        Err(e) => report(&e, &Redactor::default()),
    }
}

fn run_suite(
    path: &Path,
    workspace: Option<PathBuf>,
    options: &Options,
    interrupt: Interrupt,
) -> Result<i32, Error> {
    agent_runner_sandbox::backend::host::check_pool(&options.hosts, |i| {
        format!("--host {}", options.hosts[i].name)
    })
    .map_err(|e| agent_runner_pipeline::PipelineError::Invalid(e.to_string()))?;
    let suite = suite::read(path)?;
    let root = workspace.unwrap_or_else(|| beside(path, "suite", "eval"));
    let evaluated = eval_run::run(
        &super::home()?,
        &root,
        &suite,
        options,
        super::this_binary()?,
        interrupt,
    )?;
    let mut out = table::render(&evaluated.summary);
    out.push_str(&format!(
        "results: {}\nsummary: {}\n",
        evaluated.dir.join("results.jsonl").display(),
        evaluated.dir.join("summary.json").display()
    ));
    write_stdout(&out)?;
    if evaluated.interrupted {
        return Ok(exit::INTERRUPTED);
    }
    Ok(exit::COMPLETE)
}

fn validate_suite(path: &Path, interrupt: Interrupt) -> Result<i32, Error> {
    let suite = suite::read(path)?;
    let checks = validate::validate(&suite, interrupt)?;
    let mut out = String::new();
    let mut bad = 0;
    for check in &checks {
        match check.problem() {
            Some(problem) => {
                bad += 1;
                out.push_str(&format!("case {}: INVALID: {problem}\n", check.case));
            }
            None => out.push_str(&format!(
                "case {}: ok (fails on the base{})\n",
                check.case,
                if check.with_solution.is_some() {
                    ", passes with the solution"
                } else {
                    ""
                }
            )),
        }
    }
    write_stdout(&out)?;
    if bad > 0 {
        eprintln!(
            "agent-runner eval validate: {bad} of {} case(s) invalid",
            checks.len()
        );
        return Ok(exit::FAILED);
    }
    Ok(exit::COMPLETE)
}

fn grade(interrupt: Interrupt) -> Result<i32, Error> {
    // A grading on a cluster host: aimed there as `run` is (`Target::apply`).
    if let Err(e) = super::run::aim_at_placement() {
        write_stdout(&grade_on_host::refused(&e.to_string()))?;
        return Ok(exit::COMPLETE);
    }
    let request = super::input::read_text("a grading request", "`eval run`'s", interrupt)?;
    write_stdout(&grade_on_host::serve(request.as_bytes(), interrupt))?;
    Ok(exit::COMPLETE)
}

fn import_swebench(
    file: &Path,
    repos: &Path,
    out: Option<PathBuf>,
    image: &str,
    interrupt: Interrupt,
) -> Result<i32, Error> {
    let out = out.unwrap_or_else(|| beside(file, "swebench", "suite"));
    let imported = import_swebench::import(file, repos, &out, image, interrupt)?;
    for (id, why) in &imported.skipped {
        eprintln!("agent-runner eval import: skipped {id}: {why}");
    }
    write_stdout(&format!(
        "{} case(s) imported, {} skipped: {}\n",
        imported.cases,
        imported.skipped.len(),
        out.join("suite.yaml").display()
    ))?;
    Ok(if imported.cases == 0 {
        exit::FAILED
    } else {
        exit::COMPLETE
    })
}

/// The default place of what a command makes of `file`: beside it, named after its
/// stem (`stem_if_none` where it has none) with `ending` (`suite.yaml` →
/// `suite.eval`).
fn beside(file: &Path, stem_if_none: &str, ending: &str) -> PathBuf {
    let stem = file
        .file_stem()
        .map_or(stem_if_none.into(), |s| s.to_string_lossy());
    file.with_file_name(format!("{stem}.{ending}"))
}
