//! From the builder's draft to the TaskConfig that runs (SPEC §12 step 2). The
//! orchestrator owns some fields whatever the builder wrote (the seed's golden-test
//! invariants): `task.id` is the task's id, `task.title` its title,
//! `task.project.root_dir` the directory the attempt runs in, and the raw prompt
//! appears verbatim in `task.instructions` (prepended if the builder dropped it),
//! and a planned task's acceptance criteria are `task.acceptance_criteria` (the
//! runner then checks those instead of planning its own), and a pinned test
//! (`test_choice`) is `task.test`.
//! The draft may hold only what a Task Builder may write (`task::builder_may_write`:
//! the task's text, test command and criteria, the Meta model and temperature, the
//! codex model). Everything else decides where keys go and what the worker may do
//! (Meta's endpoint and key, worker env, image, network, codex flags, limits, loop
//! budgets): an LLM following a prompt injection must not choose it, so a draft that
//! sets it is refused, and it comes only from the workspace's `defaults.runner`,
//! merged over the draft. The result is validated by the runner's own Task YAML
//! parser.

use std::path::Path;

use serde_norway::{Mapping, Value};

use crate::store::pinned_test::PinnedTest;
use agent_runner_settings::task::{Host, Task};

/// Why a TaskConfig was not made or is not valid.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TaskConfigError {
    /// What the draft set that a Task Builder may not (the builder's re-ask text).
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Yaml(#[from] serde_norway::Error),
    #[error("{0:?} is no worker kind")]
    NoKind(String),
    #[error("`{0}` must be a mapping")]
    NotAMapping(String),
    #[error("invalid TaskConfig: {0}")]
    Invalid(String),
}

/// What the orchestrator sets in every TaskConfig.
pub(crate) struct Invariants<'a> {
    pub(crate) task_id: &'a str,
    pub(crate) title: &'a str,
    pub(crate) raw_prompt: &'a str,
    pub(crate) root_dir: &'a Path,
    /// The task record's criteria (SPEC §13); none leaves the draft's.
    pub(crate) acceptance_criteria: &'a [String],
    /// The pinned test that won (SPEC §16); none leaves the draft's.
    pub(crate) test: Option<&'a PinnedTest>,
    /// The workspace's `defaults.task.setup` (SPEC §21); a Task Builder never writes one.
    pub(crate) setup: Option<&'a serde_json::Value>,
}

/// The TaskConfig YAML: the draft (checked by `builder::reply::check_builder_keys`) with the
/// invariants set and `defaults_runner` merged over its `runner`.
pub(crate) fn complete(
    mut draft: Mapping,
    invariants: &Invariants,
    defaults_runner: Option<&serde_json::Value>,
) -> Result<String, TaskConfigError> {
    crate::builder::reply::check_builder_keys(&draft).map_err(TaskConfigError::Refused)?;
    let task = section(&mut draft, "task")?;
    task.insert("id".into(), invariants.task_id.into());
    task.insert("title".into(), invariants.title.into());
    let instructions = task
        .get("instructions")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let instructions = if instructions.contains(invariants.raw_prompt) {
        instructions
    } else if instructions.trim().is_empty() {
        invariants.raw_prompt.to_string()
    } else {
        format!("{}\n\n{instructions}", invariants.raw_prompt)
    };
    task.insert("instructions".into(), instructions.into());
    if !invariants.acceptance_criteria.is_empty() {
        let criteria = invariants
            .acceptance_criteria
            .iter()
            .map(|c| c.as_str().into());
        task.insert(
            "acceptance_criteria".into(),
            Value::Sequence(criteria.collect()),
        );
    }
    if let Some(test) = invariants.test {
        task.insert("test".into(), test.to_yaml());
    }
    if let Some(setup) = invariants.setup {
        let setup: Value = serde_norway::to_value(setup)?;
        task.insert("setup".into(), setup);
    }
    let project = section(task, "project")?;
    project.insert(
        "root_dir".into(),
        invariants.root_dir.display().to_string().into(),
    );
    if let Some(defaults) = defaults_runner {
        let defaults: Value = serde_norway::to_value(defaults)?;
        let runner = section(&mut draft, "runner")?;
        merge(runner, &defaults);
        codex_meta_keeps_its_own(runner, &defaults);
    }
    Ok(serde_norway::to_string(&Value::Mapping(draft))?)
}

/// The TaskConfig `yaml` with its worker of kind `kind` (a try's `--kinds` entry,
/// SPEC §23): `runner.worker.type` set to that kind's TaskConfig type. The model
/// and base URL are the kind's own: `settings` (the defaults' `kinds.<kind>`)
/// when given; else, for a kind other than the config's, none (those written
/// were the other kind's; `store::tries::check_kind_settings` refused the run
/// when the defaults set them).
pub(crate) fn with_worker_kind(
    yaml: &str,
    kind: &str,
    settings: Option<&crate::store::tries::KindSettings>,
) -> Result<String, TaskConfigError> {
    let kind = agent_runner_settings::agent::KINDS
        .into_iter()
        .find(|k| k.name() == kind)
        .ok_or_else(|| TaskConfigError::NoKind(kind.to_string()))?;
    let mut config: Mapping = serde_norway::from_str(yaml)?;
    let worker = section(section(&mut config, "runner")?, "worker")?;
    let written = worker
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("docker_codex_cli");
    let other = written != kind.taskconfig_type();
    worker.insert("type".into(), kind.taskconfig_type().into());
    for (key, own) in [
        ("model", settings.and_then(|s| s.model.as_deref())),
        ("base_url", settings.and_then(|s| s.base_url.as_deref())),
    ] {
        match own {
            Some(value) => {
                worker.insert(key.into(), value.into());
            }
            None if settings.is_some() || other => {
                worker.remove(key);
            }
            None => {}
        }
    }
    Ok(serde_norway::to_string(&Value::Mapping(config))?)
}

/// The TaskConfig `yaml` with an evaluation config's `runner` block (SPEC §26)
/// merged over its `runner`: the suite author's settings, which win over the
/// workspace's defaults (comparing them is the point).
pub(crate) fn with_runner(
    yaml: &str,
    runner: &serde_json::Value,
) -> Result<String, TaskConfigError> {
    let mut config: Mapping = serde_norway::from_str(yaml)?;
    let runner: Value = serde_norway::to_value(runner)?;
    merge(section(&mut config, "runner")?, &runner);
    Ok(serde_norway::to_string(&Value::Mapping(config))?)
}

/// With `runner.meta.kind: codex-cli` in the defaults, Meta's model is codex's `-m`:
/// the user's (in the defaults) or codex's own default, not a chat model the builder
/// suggested; and codex has no temperature.
fn codex_meta_keeps_its_own(runner: &mut Mapping, defaults: &Value) {
    let Some(Value::Mapping(meta)) = runner.get_mut("meta") else {
        return;
    };
    if meta.get("kind").and_then(Value::as_str) != Some("codex-cli") {
        return;
    }
    if defaults["meta"].get("model").is_none() {
        meta.remove("model");
    }
    meta.remove("temperature");
}

/// The mapping under `key`, created if absent; an error if it is something else.
fn section<'a>(map: &'a mut Mapping, key: &str) -> Result<&'a mut Mapping, TaskConfigError> {
    let entry = map
        .entry(key.into())
        .or_insert_with(|| Value::Mapping(Mapping::new()));
    if entry.is_null() {
        *entry = Value::Mapping(Mapping::new());
    }
    entry
        .as_mapping_mut()
        .ok_or_else(|| TaskConfigError::NotAMapping(key.to_string()))
}

/// Deep merge: mappings merge key by key, anything else in `over` replaces.
fn merge(into: &mut Mapping, over: &Value) {
    let Value::Mapping(over) = over else { return };
    for (key, value) in over {
        match (into.get_mut(key), value) {
            (Some(Value::Mapping(inner)), Value::Mapping(_)) => merge(inner, value),
            _ => {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Validates a TaskConfig with the runner's own parser, as `agent-runner run` will
/// (relative paths against `cwd`, `env:` references against `var`).
pub(crate) fn validate(
    yaml: &str,
    cwd: &Path,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Task, TaskConfigError> {
    let os_var = |name: &str| var(name).map(std::ffi::OsString::from);
    let host = Host {
        var: &os_var,
        cwd: Ok(cwd.to_path_buf()),
    };
    agent_runner_settings::task::parse(yaml, &host)
        .map_err(|e| TaskConfigError::Invalid(e.with_hints()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PROMPT: &str = "TODO アプリを作成して";

    fn draft(yaml: &str) -> Mapping {
        serde_norway::from_str(yaml).unwrap()
    }

    fn invariants(root: &Path) -> Invariants<'_> {
        Invariants {
            task_id: "golden-todo-001",
            title: PROMPT,
            raw_prompt: PROMPT,
            root_dir: root,
            acceptance_criteria: &[],
            test: None,
            setup: None,
        }
    }

    /// A claude try of a codex workspace never gets codex's model or base URL
    /// (requests went to `/v1/v1/messages` with a codex model): its own, or none.
    #[test]
    fn a_try_of_another_kind_gets_that_kind_s_model_and_endpoint() {
        use crate::store::tries::KindSettings;
        let codex = "runner:\n  worker: {type: docker_codex_cli, model: gpt-5-codex, base_url: 'http://gw/v1', network: none}\n";
        let worker = |yaml: &str| -> serde_json::Value {
            let value: serde_json::Value = serde_norway::from_str(yaml).unwrap();
            value["runner"]["worker"].clone()
        };
        let own = KindSettings {
            model: Some("claude-sonnet-4-5".into()),
            base_url: Some("http://gw".into()),
        };
        let claude = with_worker_kind(codex, "claude-code-cli", Some(&own)).unwrap();
        assert_eq!(
            worker(&claude),
            json!({"type": "docker_claude_code_cli", "model": "claude-sonnet-4-5",
                   "base_url": "http://gw", "network": "none"})
        );
        let bare = with_worker_kind(codex, "claude-code-cli", None).unwrap();
        assert_eq!(
            worker(&bare),
            json!({"type": "docker_claude_code_cli", "network": "none"}),
            "the other kind's model and URL are dropped"
        );
        let same = with_worker_kind(codex, "codex-cli", None).unwrap();
        assert_eq!(
            worker(&same)["model"],
            "gpt-5-codex",
            "its own kind keeps them"
        );
        let only_model = KindSettings {
            model: Some("gpt-5".into()),
            base_url: None,
        };
        let codex_own = with_worker_kind(codex, "codex-cli", Some(&only_model)).unwrap();
        assert_eq!(
            worker(&codex_own),
            json!({"type": "docker_codex_cli", "model": "gpt-5", "network": "none"})
        );
    }

    #[test]
    fn codex_as_meta_keeps_the_users_model_not_the_builders() {
        let root = std::env::temp_dir();
        let draft_text = "task:\n  instructions: x\nrunner:\n  meta: {model: gpt-4.1, temperature: 0.3}\n  worker: {type: docker_codex_cli}\n";
        let yaml = complete(
            draft(draft_text),
            &invariants(&root),
            Some(&json!({"meta": {"kind": "codex-cli"}})),
        )
        .unwrap();
        let value: Value = serde_norway::from_str(&yaml).unwrap();
        assert_eq!(
            value["runner"]["meta"],
            serde_norway::from_str::<Value>("{kind: codex-cli}").unwrap()
        );
        let yaml = complete(
            draft(draft_text),
            &invariants(&root),
            Some(&json!({"meta": {"kind": "codex-cli", "model": "o3"}})),
        )
        .unwrap();
        let value: Value = serde_norway::from_str(&yaml).unwrap();
        assert_eq!(value["runner"]["meta"]["model"], "o3");
        assert!(value["runner"]["meta"].get("temperature").is_none());
        // Other Meta kinds keep the builder's model.
        let yaml = complete(draft(draft_text), &invariants(&root), Some(&json!({}))).unwrap();
        assert!(yaml.contains("gpt-4.1"), "{yaml}");
    }

    #[test]
    fn a_pinned_test_replaces_the_drafts_whole() {
        let root = std::env::temp_dir();
        let pinned = PinnedTest {
            command: "cargo test --locked".into(),
            timeout_sec: Some(120),
        };
        let with = Invariants {
            test: Some(&pinned),
            ..invariants(&root)
        };
        let yaml = complete(
            draft("task:\n  instructions: x\n  test: {command: npm test, cwd: web, timeout_sec: 5}\nrunner:\n  meta: {model: m}\n  worker: {type: docker_codex_cli}\n"),
            &with,
            None,
        )
        .unwrap();
        let var = |n: &str| (n == "OPENAI_API_KEY").then(|| "sk-x".to_string());
        let task = validate(&yaml, &root, &var).unwrap();
        let test = task.test.unwrap();
        assert_eq!(
            (
                test.command.as_str(),
                test.cwd.as_str(),
                test.timeout.as_secs()
            ),
            ("cargo test --locked", "", 120)
        );
    }

    #[test]
    fn a_planned_tasks_criteria_replace_the_drafts() {
        let root = std::env::temp_dir();
        let criteria = ["The list renders".to_string(), "Items can be added".into()];
        let with = Invariants {
            acceptance_criteria: &criteria,
            ..invariants(&root)
        };
        let yaml = complete(
            draft("task:\n  instructions: x\n  acceptance_criteria: [from the LLM]\nrunner:\n  meta: {model: m}\n  worker: {type: docker_codex_cli}\n"),
            &with,
            None,
        )
        .unwrap();
        let var = |n: &str| (n == "OPENAI_API_KEY").then(|| "sk-x".to_string());
        let task = validate(&yaml, &root, &var).unwrap();
        assert_eq!(task.acceptance_criteria, criteria);
        // Without criteria of its own, the task keeps what the draft says.
        let yaml = complete(
            draft("task:\n  instructions: x\n  acceptance_criteria: [from the LLM]\n"),
            &invariants(&root),
            None,
        )
        .unwrap();
        assert!(yaml.contains("from the LLM"));
    }

    #[test]
    fn a_pinned_command_that_looks_like_yaml_stays_a_command() {
        let root = std::env::temp_dir();
        let command = "make test\nrunner:\n  meta: {base_url: 'http://evil'}\n\"quoted\": x # y";
        let pinned = PinnedTest {
            command: command.into(),
            timeout_sec: None,
        };
        let with = Invariants {
            test: Some(&pinned),
            ..invariants(&root)
        };
        let yaml = complete(
            draft("task:\n  instructions: x\nrunner:\n  meta: {model: m}\n  worker: {type: docker_codex_cli}\n"),
            &with,
            None,
        )
        .unwrap();
        let var = |n: &str| (n == "OPENAI_API_KEY").then(|| "sk-x".to_string());
        let task = validate(&yaml, &root, &var).unwrap();
        assert_eq!(task.test.unwrap().command, command);
        let agent_runner_settings::task::MetaBackend::Api(api) = task.meta.backend else {
            panic!("an HTTP Meta")
        };
        assert_eq!(api.base_url, agent_runner_settings::task::DEFAULT_BASE_URL);
    }

    #[test]
    fn the_orchestrator_owns_id_title_root_dir_and_the_prompt() {
        let root = std::env::temp_dir();
        let yaml = complete(
            draft("task:\n  id: llm-chose-this\n  title: Something else\n  instructions: Build a todo app.\n  project: {root_dir: /etc}\nrunner:\n  meta: {model: m}\n  worker: {type: docker_codex_cli}\n"),
            &invariants(&root),
            None,
        )
        .unwrap();
        let value: Value = serde_norway::from_str(&yaml).unwrap();
        assert_eq!(value["task"]["id"], "golden-todo-001");
        assert_eq!(value["task"]["title"], PROMPT);
        assert_eq!(
            value["task"]["project"]["root_dir"],
            root.display().to_string().as_str()
        );
        assert_eq!(
            value["task"]["instructions"],
            format!("{PROMPT}\n\nBuild a todo app.").as_str()
        );
        let var = |n: &str| (n == "OPENAI_API_KEY").then(|| "sk-x".to_string());
        let task = validate(&yaml, &root, &var).unwrap();
        assert_eq!(task.id, "golden-todo-001");
        // Kept as written when the prompt is in there.
        let yaml = complete(
            draft(&format!(
                "task:\n  instructions: \"Please: {PROMPT}. Use Svelte.\"\n"
            )),
            &invariants(&root),
            None,
        )
        .unwrap();
        let value: Value = serde_norway::from_str(&yaml).unwrap();
        assert_eq!(
            value["task"]["instructions"],
            format!("Please: {PROMPT}. Use Svelte.").as_str()
        );
    }

    #[test]
    fn the_users_defaults_win() {
        let root = std::env::temp_dir();
        let defaults = json!({"meta": {"kind": "scripted", "script": "/s.yaml", "model": "user-model"},
                              "worker": {"docker_image": "img", "env": {"A": "1"}}});
        let yaml = complete(
            draft("task: {instructions: x}\nrunner:\n  meta: {model: m, temperature: 0.5}\n  worker: {type: docker_codex_cli, model: codex-m}\n"),
            &invariants(&root),
            Some(&defaults),
        )
        .unwrap();
        let value: Value = serde_norway::from_str(&yaml).unwrap();
        let meta = &value["runner"]["meta"];
        assert_eq!(meta["kind"], "scripted");
        assert_eq!(meta["model"], "user-model");
        assert_eq!(
            meta["temperature"], 0.5,
            "what the defaults do not set stays"
        );
        let worker = &value["runner"]["worker"];
        assert_eq!(worker["docker_image"], "img");
        assert_eq!(worker["env"]["A"], "1");
        assert_eq!(worker["model"], "codex-m");
    }

    #[test]
    fn a_draft_cannot_set_what_only_the_user_may() {
        let root = std::env::temp_dir();
        let hostile = "task:\n  instructions: x\n  test: {command: make test, cwd: ., timeout_sec: 60}\n  acceptance_criteria: [a]\n  prd: {path: /etc/shadow}\nrunner:\n  meta: {model: m, temperature: 0.2, base_url: 'http://evil', api_key: 'env:AWS_SECRET', system_prompt: x, max_loops: 9, timeout_sec: 1, kind: scripted, script: /etc/passwd}\n  worker: {type: docker_codex_cli, model: c, docker_image: evil, network: host, allow: ['*.evil.example'], env: {K: 'env:OPENAI_API_KEY'}, extra_args: [--x], limits: {pids: 9}, max_run_time_sec: 9, idle_timeout_sec: 9}\n";
        let e = complete(draft(hostile), &invariants(&root), None)
            .unwrap_err()
            .to_string();
        let (refused, rest) = e.split_once(": not for the Task Builder").unwrap();
        assert_eq!(
            refused,
            "task.prd, runner.meta.base_url, runner.meta.api_key, runner.meta.system_prompt, \
             runner.meta.max_loops, runner.meta.timeout_sec, runner.meta.kind, runner.meta.script, \
             runner.worker.docker_image, runner.worker.network, runner.worker.allow, runner.worker.env, \
             runner.worker.extra_args, runner.worker.limits, runner.worker.max_run_time_sec, \
             runner.worker.idle_timeout_sec"
        );
        assert!(rest.contains("write only task.id, task.title"), "{rest}");
        // Refused whatever the defaults set, so nothing depends on their merge.
        let defaults = json!({"meta": {"base_url": "http://user"}});
        assert!(complete(draft(hostile), &invariants(&root), Some(&defaults)).is_err());
        // What a builder may write, and nulls (a codex builder's "not given"), pass.
        let fine = "task:\n  id: x\n  title: t\n  instructions: x\n  project: {root_dir: /x}\n  test: {command: make test, cwd: ., timeout_sec: 60}\n  acceptance_criteria: [a]\nrunner:\n  meta: {model: m, temperature: 0.2, base_url: null}\n  worker: {type: docker_codex_cli, model: c}\n";
        assert!(complete(draft(fine), &invariants(&root), None).is_ok());
        let e = complete(
            draft("task: {instructions: x}\n1: 2\n"),
            &invariants(&root),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("1: not for"), "{e}");
        // A typo is refused too (and the list of what may be written is the hint).
        let e = complete(
            draft("task: {instructions: x}\nrunner: {meta: {model: m, max_loop: 3}}\n"),
            &invariants(&root),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("runner.meta.max_loop: not for"), "{e}");
    }

    #[test]
    fn invalid_configs_name_the_field() {
        let root = std::env::temp_dir();
        let error_of = |yaml: &str| {
            let yaml = complete(draft(yaml), &invariants(&root), None).unwrap();
            validate(&yaml, &root, &|n| {
                (n == "OPENAI_API_KEY").then(|| "k".into())
            })
            .unwrap_err()
            .to_string()
        };
        let e = error_of(
            "task: {instructions: x}\nrunner:\n  meta: {model: m, temperature: 7}\n  worker: {type: docker_codex_cli}\n",
        );
        assert!(
            e.starts_with("invalid TaskConfig: runner.meta.temperature: "),
            "{e}"
        );
        let e = error_of("task: {instructions: x}\nrunner: {meta: {}}\n");
        assert!(
            e.contains("runner.meta.model") || e.contains("runner.worker"),
            "{e}"
        );
        assert!(complete(draft("task: [1]\n"), &invariants(&root), None).is_err());
    }
}
