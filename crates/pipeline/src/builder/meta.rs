//! `builder.kind: meta`: the Task Builder is one Meta exchange with the workspace's
//! `runner.meta`, whatever its kind (an HTTP API, or codex in the sandbox image with
//! `runner.meta.kind: codex-cli`), with `builder.model` or `runner.meta.model`. The
//! settings are resolved by the runner's own parser (`task::runner_settings`), so
//! they mean exactly what they mean to the runner, and the backend is opened as
//! `run` opens it (`meta::open`). Plans ask the same.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use agent_runner_core::deadline::Deadline;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_meta::{ChatBackend, CodexScratch, Opening};
use agent_runner_settings::task::{CodexMeta, Host, Login, RunnerSettings, WorkerEnv};

use crate::store::defaults::Defaults;

/// Why the pipeline's Meta was not opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MetaOpenError {
    /// The workspace's Meta settings, as the runner's parser words them.
    #[error("{0}")]
    Settings(String),
    #[error("builder.model: {0}")]
    Model(agent_runner_settings::task::ModelRefused),
    #[error(
        "the Task Builder `kind: meta` needs a model's API or codex as runner.meta, but runner.meta.kind is scripted; set builder.kind: scripted with builder.script"
    )]
    Scripted,
    #[error(
        "no codex session: there is no ~/.codex/auth.json and CODEX_API_KEY is not set (log in with `codex login`, or set CODEX_API_KEY)"
    )]
    NoSession,
    #[error(transparent)]
    Open(#[from] agent_runner_meta::OpenError),
}

/// A Meta backend for the pipeline, its model and what it must mask.
pub(crate) struct PipelineChat {
    pub(crate) chat: Box<dyn ChatBackend>,
    pub(crate) model: String,
    pub(crate) redactor: Redactor,
}

/// Where a codex Meta works: a scratch directory (removed afterwards when
/// `remove_after`), and how long all its requests may take together.
pub(crate) struct CodexPlace<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) remove_after: bool,
    pub(crate) deadline: Option<Duration>,
}

/// The workspace's Meta settings as a run would get them: `runner.meta` (a bare
/// `kind: codex-cli` one when `codex` and it is of another kind), `model` replacing
/// its model when given; the worker as the defaults say when Meta is codex (which
/// runs beside it), else a bare one (an HTTP Meta needs none).
pub(crate) fn meta_settings(
    defaults: &Defaults,
    var: &dyn Fn(&str) -> Option<String>,
    model: Option<String>,
    codex: bool,
) -> Result<RunnerSettings, MetaOpenError> {
    let runner = defaults.runner.as_ref();
    let mut meta = runner
        .and_then(|r| r.get("meta"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let is_codex = meta.get("kind").and_then(Value::as_str) == Some("codex-cli");
    if codex && !is_codex {
        meta = json!({"kind": "codex-cli"});
    }
    let mut worker = match runner.and_then(|r| r.get("worker")) {
        Some(worker) if codex || is_codex => worker.clone(),
        _ => json!({}),
    };
    if let Value::Object(map) = &mut worker {
        map.entry("type")
            .or_insert_with(|| agent_runner_settings::task::TASKCONFIG_WORKER_TYPE.into());
    }
    let os_var = |name: &str| var(name).map(std::ffi::OsString::from);
    let mut settings = agent_runner_settings::task::runner_settings(
        &json!({"meta": meta, "worker": worker}),
        &Host {
            var: &os_var,
            cwd: Ok(std::env::temp_dir()),
        },
    )
    .map_err(|e| MetaOpenError::Settings(e.with_hints()))?;
    if let Some(model) = model {
        settings
            .meta
            .set_model(&model)
            .map_err(MetaOpenError::Model)?;
    }
    Ok(settings)
}

/// Whether Meta's codex can log in: a login of the host's, or CODEX_API_KEY in the
/// environment it is given.
pub(crate) fn has_session(codex: &CodexMeta, env: &[WorkerEnv]) -> bool {
    codex.login != Login::None || env.iter().any(|e| e.name == "CODEX_API_KEY")
}

/// Meta's codex with the workspace's settings (`meta_settings`), `model` its `-m`
/// when given.
pub(crate) fn codex_chat(
    defaults: &Defaults,
    var: &dyn Fn(&str) -> Option<String>,
    interrupt: Interrupt,
    model: Option<String>,
    place: &CodexPlace,
) -> Result<PipelineChat, MetaOpenError> {
    let settings = meta_settings(defaults, var, model, true)?;
    open(settings, interrupt, place)
}

/// The builder's Meta: the workspace's `runner.meta`, whatever its kind.
pub(crate) fn backend(
    defaults: &Defaults,
    var: &dyn Fn(&str) -> Option<String>,
    interrupt: Interrupt,
    place: &CodexPlace,
) -> Result<PipelineChat, MetaOpenError> {
    if defaults.runner_meta("kind") == Some("scripted") {
        return Err(MetaOpenError::Scripted);
    }
    let settings = meta_settings(defaults, var, defaults.builder().model, false)?;
    open(settings, interrupt, place)
}

fn open(
    settings: RunnerSettings,
    interrupt: Interrupt,
    place: &CodexPlace,
) -> Result<PipelineChat, MetaOpenError> {
    if let agent_runner_settings::task::MetaBackend::CodexCli(codex) = &settings.meta.backend {
        let worker = codex.worker_settings(&settings.worker, settings.meta.timeout);
        if !has_session(codex, &worker.env) {
            return Err(MetaOpenError::NoSession);
        }
    }
    let redactor = Redactor::new(&settings.secrets());
    let chat = agent_runner_meta::open(Opening {
        meta: &settings.meta,
        worker: &settings.worker,
        task_id: "meta",
        redactor: redactor.clone(),
        interrupt,
        deadline: Deadline::none(),
        scratch: CodexScratch {
            open: agent_runner_sandbox::worker::scratch::open,
            dir: place.dir.to_path_buf(),
            remove_after: place.remove_after,
            logs: None,
            within: place.deadline,
        },
    })?;
    Ok(PipelineChat {
        chat,
        model: settings.meta.model.clone(),
        redactor,
    })
}
