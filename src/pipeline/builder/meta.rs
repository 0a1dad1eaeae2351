//! `builder.kind: meta`: the Task Builder is one Meta exchange over the OpenAI Chat
//! Completions client, with the workspace's `runner.meta` settings (endpoint, key,
//! temperature, timeout) and `builder.model` or `runner.meta.model`. The settings
//! are resolved by the runner's own Task YAML parser, so they mean exactly what they
//! mean to the runner.

use serde_json::{Value, json};

use crate::interrupt::Interrupt;
use crate::meta::openai::OpenAiChat;
use crate::secret::Secret;
use crate::task::{DEFAULT_META_MODEL, Host, MetaBackend};

use crate::pipeline::store::defaults::Defaults;

/// The OpenAI client for the builder, its model and the secret it holds.
pub fn backend(
    defaults: &Defaults,
    var: &dyn Fn(&str) -> Option<String>,
    interrupt: Interrupt,
) -> Result<(OpenAiChat, String, Secret), String> {
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
    let yaml = serde_yaml::to_string(&config).map_err(|e| e.to_string())?;
    let os_var = |name: &str| var(name).map(std::ffi::OsString::from);
    let task = crate::task::parse(
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
    let chat = OpenAiChat::new(
        base_url,
        &model,
        task.meta.temperature,
        api_key.value.clone(),
        task.meta.timeout,
    )
    .interruptible(interrupt);
    Ok((chat, model, api_key.value.clone()))
}
