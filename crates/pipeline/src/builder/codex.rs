//! `builder.kind: codex` (SPEC §12): the Task Builder is one `codex exec` in the
//! sandbox image, run as the codex-cli Meta provider runs (`worker::scratch`, SPEC
//! §18: the worker's container machinery, login, network, limits and timeouts,
//! secrets passed by name), with `--output-schema` (the TaskConfig JSON Schema,
//! generated from the parser's own key tables and mounted read-only) and
//! `--output-last-message`. Its last message is the draft TaskConfig, checked and
//! completed like the other kinds' replies. It gets that codex's settings as the
//! codex-cli Meta provider does (`meta::meta_settings`).
//!
//! Codex works in a scratch directory of the job's (`logs/<job-id>/codex-builder/`),
//! not in the repository: like the `meta` builder it is told about the repository
//! through the request's overview, and it cannot change anything there.

use std::fmt::Write;
use std::path::Path;
use std::time::Instant;

use serde_norway::{Mapping, Value};

use super::reply::BuiltConfig;
use super::request::{BuildRequest, codex_prompt};
use super::{Build, BuildError};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_meta::reply::{Reask, Reply, strip_fence};
use agent_runner_sandbox::worker::WorkerRun;
use agent_runner_sandbox::worker::scratch::{AskError, Scratch, ScratchConfig};
use agent_runner_settings::agent::RunOutcome;
use agent_runner_settings::task::{DEFAULT_META_MODEL, MetaBackend};

use crate::store::defaults::Defaults;

/// Why codex gave no draft.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CodexError {
    #[error(transparent)]
    Settings(#[from] super::meta::MetaOpenError),
    #[error("runner.meta is not codex-cli")]
    NotCodexCli,
    #[error(
        "no codex session: there is no ~/.codex/auth.json and CODEX_API_KEY is not set (log in with `codex login`, or set CODEX_API_KEY)"
    )]
    NoSession,
    /// Its sandbox could not be opened.
    #[error(transparent)]
    Sandbox(AskError),
    #[error("codex could not run: {0}")]
    Run(AskError),
    #[error("interrupted")]
    Interrupted,
    /// The run did not complete: its outcome, its summary.
    #[error("codex {outcome}: {summary}")]
    Ended {
        outcome: &'static str,
        summary: String,
    },
    #[error("codex wrote no last message (--output-last-message)")]
    NoMessage,
    #[error("codex's reply is not a TaskConfig: {0}")]
    NotATaskConfig(ReplyError),
}

/// Why codex's last message is no draft TaskConfig.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplyError {
    #[error("not valid JSON: {0}")]
    Json(agent_runner_core::Error),
    /// What the reply check says (`Reply::from_value`).
    #[error("{0}")]
    Checked(Reask),
}

/// Asks codex for a TaskConfig for `request`; `work` is the job's log directory.
pub(crate) fn build(
    defaults: &Defaults,
    request: &BuildRequest,
    var: &dyn Fn(&str) -> Option<String>,
    interrupt: Interrupt,
    work: &Path,
) -> Build {
    let clock = Instant::now();
    let model = defaults.builder().model;
    let mut log = format!(
        "builder: codex{}\n",
        model
            .as_deref()
            .map_or(String::new(), |m| format!(" ({m})"))
    );
    let mut usage = None;
    let outcome = ask(
        defaults, request, var, interrupt, work, &mut log, &mut usage,
    );
    if let Err(e) = &outcome {
        let _ = writeln!(log, "error: {e}");
    }
    let _ = writeln!(log, "duration_ms: {}", clock.elapsed().as_millis());
    Build {
        config: outcome.map_err(BuildError::from),
        builder: match &model {
            Some(m) => format!("codex ({m})"),
            None => "codex".into(),
        },
        duration: clock.elapsed(),
        log,
        usage,
    }
}

fn ask(
    defaults: &Defaults,
    request: &BuildRequest,
    var: &dyn Fn(&str) -> Option<String>,
    interrupt: Interrupt,
    work: &Path,
    log: &mut String,
    usage: &mut Option<agent_runner_core::usage::Usage>,
) -> Result<Mapping, CodexError> {
    let scratch = work.join("codex-builder");
    let _ = std::fs::remove_dir_all(&scratch);
    let runner = super::meta::meta_settings(defaults, var, defaults.builder().model, true)?;
    let MetaBackend::CodexCli(codex) = &runner.meta.backend else {
        return Err(CodexError::NotCodexCli);
    };
    let settings = codex.worker_settings(&runner.worker, runner.meta.timeout);
    if !super::meta::has_session(codex, &settings.env) {
        return Err(CodexError::NoSession);
    }
    let redactor = Redactor::new(&runner.secrets());
    let model = defaults
        .runner_meta("model")
        .unwrap_or(DEFAULT_META_MODEL)
        .to_string();
    let prompt = codex_prompt(request, &model);
    let _ = writeln!(
        log,
        "image: {}\n\n--- request ---\n{}",
        settings.docker_image,
        redactor.redact(prompt.trim_end())
    );
    let limit = settings.max_run_time;
    let mut sandbox = Scratch::open(ScratchConfig {
        task_id: request.task_id.clone(),
        dir: scratch,
        remove_after: false,
        logs: None,
        worker: settings,
        login: codex.login.clone(),
        redactor: redactor.clone(),
        interrupt,
    })
    .map_err(CodexError::Sandbox)?;
    let answer = sandbox.ask(
        &prompt,
        &agent_runner_settings::task::task_config_schema(),
        limit,
    );
    sandbox.shutdown();
    let answer = answer.map_err(CodexError::Run)?;
    *usage = Some(answer.run.usage.clone());
    let run = &answer.run;
    let _ = writeln!(
        log,
        "\n--- codex ---\n{} in {} ms (exit {}); output: {}",
        run.outcome.as_str(),
        run.duration.as_millis(),
        run.exit_code
            .map_or("none".to_string(), |code| code.to_string()),
        run.log_path.display()
    );
    if run.outcome != RunOutcome::Completed {
        return Err(failure(run));
    }
    let reply = answer.text.ok_or(CodexError::NoMessage)?;
    let reply = redactor.redact(&reply);
    let _ = writeln!(log, "\n--- reply ---\n{}", reply.trim_end());
    parse(&reply).map_err(CodexError::NotATaskConfig)
}

/// Why a codex run that did not complete failed.
fn failure(run: &WorkerRun) -> CodexError {
    match run.outcome {
        RunOutcome::Interrupted => CodexError::Interrupted,
        outcome => CodexError::Ended {
            outcome: outcome.as_str(),
            summary: run.summary.clone(),
        },
    }
}

/// The draft from codex's last message: JSON (or YAML) following the schema, whose
/// `null`s mean "not given".
fn parse(text: &str) -> Result<Mapping, ReplyError> {
    let mut value =
        agent_runner_core::yaml::parse(strip_fence(text), agent_runner_core::yaml::Rules::Reply)
            .map_err(ReplyError::Json)?;
    drop_nulls(&mut value);
    BuiltConfig::from_value(value)
        .map(|BuiltConfig(map)| map)
        .map_err(ReplyError::Checked)
}

fn drop_nulls(value: &mut Value) {
    match value {
        Value::Mapping(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Sequence(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_reply_with_nulls_is_a_draft_without_them() {
        let map = parse(r#"{"task": {"id": "t", "title": "T", "instructions": "Do it.", "project": {"root_dir": "/x"}, "test": null, "acceptance_criteria": null}, "runner": {"meta": {"model": "m", "temperature": null}, "worker": {"type": "docker_codex_cli", "model": null}}}"#).unwrap();
        let yaml = serde_norway::to_string(&map).unwrap();
        assert!(!yaml.contains("null"), "{yaml}");
        assert_eq!(map["task"]["instructions"], "Do it.");
        assert_eq!(map["runner"]["worker"]["type"], "docker_codex_cli");
    }

    #[test]
    fn replies_that_are_no_taskconfig_say_why() {
        assert!(
            parse("I could not do it.")
                .unwrap_err()
                .to_string()
                .contains("expected a mapping")
        );
        assert!(
            parse("{\"task\": 1")
                .unwrap_err()
                .to_string()
                .starts_with("not valid JSON")
        );
        assert_eq!(
            parse(r#"{"task": {"instructions": ""}, "runner": {}}"#)
                .unwrap_err()
                .to_string(),
            "task.instructions is missing or empty"
        );
    }
}
