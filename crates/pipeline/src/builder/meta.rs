//! `builder.kind: meta`: the Task Builder is one Meta exchange with the workspace's
//! `runner.meta`: over the OpenAI Chat Completions client (its endpoint, key,
//! temperature, timeout), or, with `runner.meta.kind: codex-cli`, through codex in
//! the sandbox image (`meta::codex_cli`); with `builder.model` or
//! `runner.meta.model`. The settings are resolved by the runner's own Task YAML
//! parser, so they mean exactly what they mean to the runner. Plans ask the same.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_meta::ChatBackend;
use agent_runner_meta::codex_cli::CodexCli;
use agent_runner_meta::openai_chat::OpenAiChat;
use agent_runner_sandbox::task::{DEFAULT_META_MODEL, Host, MetaBackend};

use crate::store::defaults::Defaults;

/// A Meta backend for the pipeline, its model and what it must mask.
pub(crate) struct PipelineChat {
    pub(crate) chat: Box<dyn ChatBackend>,
    pub(crate) model: String,
    pub(crate) redactor: Redactor,
}

/// Where a codex Meta works: a scratch directory (removed afterwards when
/// `remove_after`), and how long all its requests may take together.
pub(crate) struct CodexScratch<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) remove_after: bool,
    pub(crate) deadline: Option<Duration>,
}

/// Meta's codex with the workspace's settings (`builder::codex::codex_meta_task`),
/// `model` its `-m` when given.
pub(crate) fn codex_chat(
    defaults: &Defaults,
    var: &dyn Fn(&str) -> Option<String>,
    interrupt: Interrupt,
    model: Option<String>,
    scratch: &CodexScratch,
) -> Result<PipelineChat, String> {
    let task = super::codex::codex_meta_task(defaults, var, model, "meta", scratch.dir)?;
    let MetaBackend::CodexCli(codex) = &task.meta.backend else {
        return Err("runner.meta is not codex-cli".into());
    };
    let settings = codex.worker_settings(&task.worker, task.meta.timeout);
    if !super::codex::has_session(codex, &settings.env) {
        return Err("no codex session: there is no ~/.codex/auth.json and CODEX_API_KEY is not set (log in with `codex login`, or set CODEX_API_KEY)".into());
    }
    let redactor = Redactor::new(&task.secrets());
    let chat = CodexCli::for_task(
        &task,
        scratch.dir.to_path_buf(),
        scratch.remove_after,
        None,
        redactor.clone(),
        interrupt,
    )
    .ok_or("runner.meta is not codex-cli")?;
    let chat = match scratch.deadline {
        Some(within) => chat.with_deadline(within),
        None => chat,
    };
    Ok(PipelineChat {
        chat: Box::new(chat),
        model: task.meta.model.clone(),
        redactor,
    })
}

/// The builder's Meta: the OpenAI client, or codex when `runner.meta.kind` is
/// codex-cli.
pub(crate) fn backend(
    defaults: &Defaults,
    var: &dyn Fn(&str) -> Option<String>,
    interrupt: Interrupt,
    scratch: &CodexScratch,
) -> Result<PipelineChat, String> {
    if defaults.runner_meta("kind") == Some("codex-cli") {
        return codex_chat(defaults, var, interrupt, defaults.builder().model, scratch);
    }
    let mut meta = defaults
        .runner
        .as_ref()
        .and_then(|r| r.get("meta"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let Value::Object(map) = &mut meta else {
        return Err("runner.meta must be a mapping".into());
    };
    if map.get("kind").and_then(Value::as_str) == Some("scripted") {
        return Err("the Task Builder `kind: meta` needs an OpenAI-compatible runner.meta, but runner.meta.kind is scripted; set builder.kind: scripted with builder.script".into());
    }
    let model = defaults
        .builder()
        .model
        .or_else(|| map.get("model").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| DEFAULT_META_MODEL.to_string());
    map.insert("model".into(), model.clone().into());
    let config = json!({
        "task": {"id": "task-builder", "title": "Task Builder", "instructions": "-",
                 "project": {"root_dir": std::env::temp_dir()}},
        "runner": {"meta": meta, "worker": {"type": "docker_codex_cli"}},
    });
    let yaml = serde_norway::to_string(&config).map_err(|e| e.to_string())?;
    let os_var = |name: &str| var(name).map(std::ffi::OsString::from);
    let task = agent_runner_sandbox::task::parse(
        &yaml,
        &Host {
            var: &os_var,
            cwd: Ok(std::env::temp_dir()),
        },
    )
    .map_err(|e| e.to_string())?;
    let MetaBackend::OpenAiChat { base_url, api_key } = &task.meta.backend else {
        return Err("runner.meta is not an OpenAI-compatible backend".into());
    };
    let chat = OpenAiChat::backend(
        base_url,
        &model,
        task.meta.temperature,
        api_key.value.clone(),
        task.meta.timeout,
    )
    .interruptible(interrupt);
    Ok(PipelineChat {
        chat: Box::new(chat),
        model,
        redactor: Redactor::new([&api_key.value]),
    })
}
