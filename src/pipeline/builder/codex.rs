//! `builder.kind: codex` (SPEC §12): the Task Builder is one `codex exec` in the
//! sandbox image, run by the worker's own machinery (`DockerSandbox`: the same
//! container, auth, network, limits and timeouts as a worker run, secrets passed by
//! name), with `--output-schema` (the TaskConfig JSON Schema, generated from the
//! parser's own key tables and mounted read-only) and `--output-last-message`. Its
//! last message is the draft TaskConfig, checked and completed like the other
//! kinds' replies.
//!
//! Codex works in a scratch directory of the job's (`logs/<job-id>/codex-builder/`),
//! not in the repository: like the `meta` builder it is told about the repository
//! through the request's overview, and it cannot change anything there.

use std::fmt::Write;
use std::path::Path;
use std::time::Instant;

use serde_json::json;
use serde_yaml::{Mapping, Value};

use super::Build;
use super::reply::BuiltConfig;
use super::request::{BuildRequest, codex_prompt};
use crate::interrupt::Interrupt;
use crate::meta::reply::{Reply, strip_fence};
use crate::secret::Redactor;
use crate::task::{CodexAuth, DEFAULT_META_MODEL, Host, Task};
use crate::worker::codex::{PROJECT_DIR, RunOutcome};
use crate::worker::docker::{DockerSandbox, SandboxConfig};
use crate::worker::{Sandbox, WorkerRun};

use crate::pipeline::store::defaults::Defaults;

/// The schema file, in the scratch directory's private (read-only) part.
const SCHEMA_FILE: &str = "task-config.schema.json";
/// Where codex writes its last message, in the scratch directory.
const REPLY_FILE: &str = "last-message.txt";
/// Largest reply read.
const MAX_REPLY: u64 = 256 * 1024;

/// Asks codex for a TaskConfig for `request`; `work` is the job's log directory.
pub fn build(
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
        config: outcome,
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
    usage: &mut Option<crate::usage::Usage>,
) -> Result<Mapping, String> {
    let scratch = work.join("codex-builder");
    let _ = std::fs::remove_dir_all(&scratch);
    crate::pipeline::store::workspace::create_dir(&scratch)
        .map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    let private = crate::private_dir::open(&scratch)
        .map_err(|e| format!("cannot create {}/.agent-runner: {e}", scratch.display()))?;
    let schema = serde_json::to_vec_pretty(&crate::task::task_config_schema())
        .map_err(|e| format!("cannot encode the TaskConfig schema: {e}"))?;
    private
        .write_atomic(SCHEMA_FILE, &schema)
        .map_err(|e| format!("cannot write the TaskConfig schema: {e}"))?;
    let task = settings(defaults, request, var, &scratch, &private.join(SCHEMA_FILE))?;
    let has_key_env = task.worker.env.iter().any(|e| e.name == "CODEX_API_KEY");
    if task.codex_auth == CodexAuth::None && !has_key_env {
        return Err("no codex session: there is no ~/.codex/auth.json and CODEX_API_KEY is not set (log in with `codex login`, or set CODEX_API_KEY)".into());
    }
    let redactor = Redactor::new(&task.secrets());
    let mut worker = task.worker.clone();
    if let Some(model) = defaults.builder().model {
        worker.model = Some(model);
    }
    worker.extra_args.extend([
        "--output-schema".into(),
        format!(
            "{PROJECT_DIR}/{}/{SCHEMA_FILE}",
            crate::private_dir::DIR_NAME
        ),
        "--output-last-message".into(),
        format!("{PROJECT_DIR}/{REPLY_FILE}"),
    ]);
    let model = task.meta.model.clone();
    let prompt = codex_prompt(request, &model);
    let _ = writeln!(
        log,
        "image: {}\n\n--- request ---\n{}",
        worker.docker_image,
        redactor.redact(prompt.trim_end())
    );
    let logs = private
        .subdir("logs")
        .and_then(|logs| logs.subdir(&task.id))
        .map_err(|e| format!("cannot create the builder's log directory: {e}"))?;
    let mut sandbox = DockerSandbox::new(SandboxConfig {
        task_id: task.id.clone(),
        repo: task.repo.clone(),
        private_dir: private.path().to_path_buf(),
        logs,
        worker,
        auth: task.codex_auth.clone(),
        redactor: redactor.clone(),
        interrupt,
        events: crate::events::Events::none(),
        session_dir: None,
        deadline: crate::deadline::Deadline::none(),
    });
    let run = sandbox.run_worker(1, &prompt);
    sandbox.shutdown();
    let run = run.map_err(|e| format!("codex could not run: {e}"))?;
    *usage = Some(run.usage.clone());
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
        return Err(failure(&run));
    }
    let reply = crate::fs::read::head(&scratch.join(REPLY_FILE), MAX_REPLY)
        .ok_or("codex wrote no last message (--output-last-message)")?;
    let reply = redactor.redact(&String::from_utf8_lossy(&reply));
    let _ = writeln!(log, "\n--- reply ---\n{}", reply.trim_end());
    parse(&reply).map_err(|e| format!("codex's reply is not a TaskConfig: {e}"))
}

/// The worker settings, codex auth and secrets for the builder's codex: the
/// workspace's `runner.worker` defaults resolved by the runner's own parser, as a
/// worker run would get them. `schema` stands in for what is not used here.
fn settings(
    defaults: &Defaults,
    request: &BuildRequest,
    var: &dyn Fn(&str) -> Option<String>,
    scratch: &Path,
    schema: &Path,
) -> Result<Task, String> {
    let mut worker = defaults
        .runner
        .as_ref()
        .and_then(|r| r.get("worker"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let serde_json::Value::Object(map) = &mut worker {
        map.insert("type".into(), crate::task::TASKCONFIG_WORKER_TYPE.into());
    }
    let model = defaults
        .runner_meta("model")
        .unwrap_or(DEFAULT_META_MODEL)
        .to_string();
    let config = json!({
        "task": {"id": request.task_id, "title": "Task Builder", "instructions": "-",
                 "project": {"root_dir": scratch}},
        // Meta is not asked here: a placeholder the parser accepts.
        "runner": {"meta": {"kind": "scripted", "script": schema, "model": model},
                   "worker": worker},
    });
    let yaml = serde_yaml::to_string(&config).map_err(|e| e.to_string())?;
    let os_var = |name: &str| var(name).map(std::ffi::OsString::from);
    crate::task::parse(
        &yaml,
        &Host {
            var: &os_var,
            cwd: Ok(scratch.to_path_buf()),
        },
    )
    .map_err(|e| format!("runner.worker: {}", e.with_hints()))
}

/// Why a codex run that did not complete failed.
fn failure(run: &WorkerRun) -> String {
    match run.outcome {
        RunOutcome::Interrupted => "interrupted".into(),
        outcome => format!("codex {}: {}", outcome.as_str(), run.summary),
    }
}

/// The draft from codex's last message: JSON (or YAML) following the schema, whose
/// `null`s mean "not given".
fn parse(text: &str) -> Result<Mapping, String> {
    let mut value = crate::yaml::parse(strip_fence(text), crate::yaml::Rules::Reply)
        .map_err(|e| format!("not valid JSON: {e}"))?;
    drop_nulls(&mut value);
    BuiltConfig::from_value(value).map(|BuiltConfig(map)| map)
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
        let yaml = serde_yaml::to_string(&map).unwrap();
        assert!(!yaml.contains("null"), "{yaml}");
        assert_eq!(map["task"]["instructions"], "Do it.");
        assert_eq!(map["runner"]["worker"]["type"], "docker_codex_cli");
    }

    #[test]
    fn replies_that_are_no_taskconfig_say_why() {
        assert!(
            parse("I could not do it.")
                .unwrap_err()
                .contains("expected a mapping")
        );
        assert!(
            parse("{\"task\": 1")
                .unwrap_err()
                .starts_with("not valid JSON")
        );
        assert_eq!(
            parse(r#"{"task": {"instructions": ""}, "runner": {}}"#).unwrap_err(),
            "task.instructions is missing or empty"
        );
    }
}
