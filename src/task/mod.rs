//! The task to run: `Task` is the Task YAML validated, with defaults applied, paths
//! absolute, the PRD loaded and `env:` values resolved. Nothing runs before this
//! succeeds, so every mistake in the YAML is reported here, with its field path.

mod input_error;
mod raw;
mod resolved;

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde_yaml::Value;

pub use input_error::{InputError, closest};
pub use resolved::resolved_yaml;

use crate::secret::Secret;
use raw::{RawMeta, RawRunner, RawTaskConfig, RawTaskV1, RawTest, RawWorker};

pub const DEFAULT_META_MODEL: &str = "gpt-5.1-codex-max-high";
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_API_KEY: &str = "env:OPENAI_API_KEY";
pub const DEFAULT_DOCKER_IMAGE: &str = "agent-runner-codex:latest";
pub const DEFAULT_MAX_LOOPS: u32 = 5;
pub const DEFAULT_META_TIMEOUT_SEC: u64 = 60;
pub const DEFAULT_MAX_RUN_TIME_SEC: u64 = 1800;
pub const DEFAULT_IDLE_TIMEOUT_SEC: u64 = 600;
pub const DEFAULT_TEST_TIMEOUT_SEC: u64 = 600;
/// Default `runner.worker.limits.pids`: ample for builds, a stop for fork bombs.
pub const DEFAULT_PIDS_LIMIT: u32 = 4096;
/// Upper bound for every `*_sec` setting (one week): keeps deadlines representable.
pub const MAX_SECONDS: u64 = 7 * 24 * 3600;
/// Largest PRD file we load; PRDs are prose, and the whole text goes to Meta.
pub const MAX_PRD_BYTES: u64 = 4 << 20;

const TASKCONFIG_WORKER_TYPE: &str = "docker_codex_cli";

/// Which of the two accepted YAML shapes the task was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    V1,
    TaskConfig,
}

/// A validated task.
#[derive(Debug, Clone)]
pub struct Task {
    pub shape: Shape,
    pub id: String,
    /// True when `task.id` was not given and a UUID was generated.
    pub id_generated: bool,
    pub title: String,
    /// Absolute, symlinks resolved; an existing directory.
    pub repo: PathBuf,
    pub prd: Prd,
    pub test: Option<TestSpec>,
    pub meta: MetaSettings,
    pub worker: WorkerSettings,
}

#[derive(Debug, Clone)]
pub struct Prd {
    pub source: PrdSource,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PrdSource {
    File(PathBuf),
    Inline,
}

/// `task.test`: run by agent-runner in the sandbox after each worker run.
#[derive(Debug, Clone, PartialEq)]
pub struct TestSpec {
    pub command: String,
    /// Relative to the repo, normalised, `/`-separated; empty for the repo root.
    pub cwd: String,
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct MetaSettings {
    pub backend: MetaBackend,
    pub model: String,
    pub temperature: Option<f64>,
    pub system_prompt: Option<String>,
    pub max_loops: u32,
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
pub enum MetaBackend {
    OpenAiChat { base_url: String, api_key: ApiKey },
    Scripted { script: PathBuf },
}

#[derive(Debug, Clone)]
pub struct ApiKey {
    /// Where it came from: `env:NAME` or `literal`.
    pub source: String,
    pub value: Secret,
}

#[derive(Debug, Clone)]
pub struct WorkerSettings {
    pub docker_image: String,
    pub max_run_time: Duration,
    pub idle_timeout: Duration,
    pub model: Option<String>,
    pub extra_args: Vec<String>,
    pub network: Network,
    pub env: Vec<WorkerEnv>,
    pub limits: WorkerLimits,
}

/// `runner.worker.limits`: resources of the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerLimits {
    /// docker's `--memory` value (e.g. `2g`); no limit when absent.
    pub memory: Option<String>,
    /// docker's `--cpus` value (e.g. `1.5`); no limit when absent.
    pub cpus: Option<String>,
    /// docker's `--pids-limit`.
    pub pids: u32,
}

impl Default for WorkerLimits {
    fn default() -> Self {
        WorkerLimits {
            memory: None,
            cpus: None,
            pids: DEFAULT_PIDS_LIMIT,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    Bridge,
    None,
    Host,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Bridge => "bridge",
            Network::None => "none",
            Network::Host => "host",
        }
    }
}

/// One `runner.worker.env` entry.
#[derive(Debug, Clone)]
pub struct WorkerEnv {
    pub name: String,
    pub value: EnvValue,
}

#[derive(Debug, Clone)]
pub enum EnvValue {
    Literal(String),
    /// `env:VAR`: taken from the host; a secret.
    FromHost {
        var: String,
        value: Secret,
    },
}

impl EnvValue {
    pub fn expose(&self) -> &str {
        match self {
            EnvValue::Literal(v) => v,
            EnvValue::FromHost { value, .. } => value.expose(),
        }
    }
}

impl Task {
    /// Every secret value of this task (API key, `env:` values), for masking.
    pub fn secrets(&self) -> Vec<Secret> {
        let mut out = Vec::new();
        if let MetaBackend::OpenAiChat { api_key, .. } = &self.meta.backend {
            out.push(api_key.value.clone());
        }
        for env in &self.worker.env {
            if let EnvValue::FromHost { value, .. } = &env.value {
                out.push(value.clone());
            }
        }
        out
    }

    /// File name of the Task Note in `.agent-runner/`.
    pub fn note_name(&self) -> String {
        format!("task-{}.md", self.id)
    }

    /// Path of the Task Note.
    pub fn note_path(&self) -> PathBuf {
        self.repo
            .join(crate::private_dir::DIR_NAME)
            .join(self.note_name())
    }
}

/// What parsing may read from the host: environment variables and the current directory.
pub struct Host<'a> {
    pub var: &'a dyn Fn(&str) -> Option<String>,
    pub cwd: &'a Path,
}

impl Host<'_> {
    fn var(&self, name: &str) -> Option<String> {
        (self.var)(name)
    }
}

/// Parses and validates a Task YAML document.
pub fn parse(text: &str, host: &Host) -> Result<Task, InputError> {
    let value: Value = serde_yaml::from_str(text).map_err(|e| InputError::from_yaml(&e))?;
    let Value::Mapping(root) = &value else {
        return Err(InputError::new(
            "stdin",
            format!(
                "expected a YAML mapping with `task:` and `runner:` (got {})",
                describe(&value)
            ),
        )
        .with_hint("see README.md, \"Task YAML\", for both accepted shapes"));
    };
    if root.contains_key("version") {
        let raw: RawTaskV1 = serde_yaml::from_str(text).map_err(|e| InputError::from_yaml(&e))?;
        from_v1(raw, host)
    } else {
        // Without `version` the document is read as TaskConfig, whose root has only
        // `task` and `runner`; suggest among all root keys so `verison:` is caught.
        for key in root.keys() {
            let name = key
                .as_str()
                .map_or_else(|| yaml_inline(key), str::to_string);
            if name != "task" && name != "runner" {
                let error = InputError::new(name.clone(), "unknown key");
                return Err(match closest(&name, &["version", "task", "runner"]) {
                    Some(best) => error.with_hint(format!("did you mean `{best}`?")),
                    None => error.with_hint("valid keys here: version, task, runner"),
                });
            }
        }
        let task = root.get("task").and_then(Value::as_mapping);
        if task.is_some_and(|t| t.contains_key("prd") || t.contains_key("repo")) {
            return Err(
                InputError::new("version", "missing (shape v1 needs `version: 1`)").with_hint(
                    "add `version: 1` at the top; only the TaskConfig shape has no version",
                ),
            );
        }
        let raw: RawTaskConfig =
            serde_yaml::from_str(text).map_err(|e| InputError::from_yaml(&e))?;
        from_task_config(raw, host)
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "an empty document".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {:?}", truncate(s, 40)),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(t) => format!("tagged value {}", t.tag),
    }
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

fn from_v1(raw: RawTaskV1, host: &Host) -> Result<Task, InputError> {
    match &raw.version {
        Some(Value::Number(n)) if n.as_u64() == Some(1) => {}
        Some(other) => {
            return Err(InputError::new(
                "version",
                format!("must be 1 (got {})", yaml_inline(other)),
            ));
        }
        None => return Err(InputError::new("version", "must be 1 (got null)")),
    }
    let section = raw.task.unwrap_or_default();
    let id = task_id(section.id, "task.id")?;
    let title = title_or_id(section.title, &id.0);
    let repo = directory(section.repo.as_deref().unwrap_or("."), "task.repo", host)?;
    let prd = match section.prd {
        None => {
            return Err(
                InputError::new("task.prd", "required: give `path` or `text`")
                    .with_hint("task:\n  prd:\n    path: ./docs/TASK.md"),
            );
        }
        Some(prd) => match (non_empty(prd.path), non_empty(prd.text)) {
            (Some(path), None) => prd_file(&path, host)?,
            (None, Some(text)) => Prd {
                source: PrdSource::Inline,
                text,
            },
            (Some(_), Some(_)) => {
                return Err(InputError::new(
                    "task.prd",
                    "give exactly one of `path` and `text` (got both)",
                ));
            }
            (None, None) => {
                return Err(InputError::new(
                    "task.prd",
                    "give exactly one of `path` and `text` (got neither, or both empty)",
                ));
            }
        },
    };
    let runner = raw.runner.unwrap_or_default();
    let raw_worker = runner.worker.unwrap_or_default();
    if raw_worker.type_.is_some() {
        return Err(
            InputError::new("runner.worker.type", "unknown key in shape v1")
                .with_hint("did you mean `kind`? (`type` belongs to the TaskConfig shape)"),
        );
    }
    check_choice(
        raw_worker.kind.as_deref(),
        "runner.worker.kind",
        &["codex-cli"],
    )?;
    Ok(Task {
        shape: Shape::V1,
        id: id.0,
        id_generated: id.1,
        title,
        repo,
        prd,
        test: test_spec(section.test)?,
        meta: meta_settings(runner.meta.unwrap_or_default(), false, host)?,
        worker: worker_settings(raw_worker, host)?,
    })
}

fn from_task_config(raw: RawTaskConfig, host: &Host) -> Result<Task, InputError> {
    let section = raw.task.ok_or_else(|| required("task"))?;
    let id = non_empty(section.id).ok_or_else(|| required("task.id"))?;
    let (id, _) = task_id(Some(id), "task.id")?;
    let title = non_empty(section.title).ok_or_else(|| required("task.title"))?;
    let text = non_empty(section.instructions).ok_or_else(|| required("task.instructions"))?;
    let root_dir = section
        .project
        .and_then(|p| non_empty(p.root_dir))
        .ok_or_else(|| required("task.project.root_dir"))?;
    let repo = directory(&root_dir, "task.project.root_dir", host)?;
    let runner: RawRunner = raw.runner.ok_or_else(|| required("runner"))?;
    let meta = runner.meta.ok_or_else(|| required("runner.meta"))?;
    let mut raw_worker = runner.worker.ok_or_else(|| required("runner.worker"))?;
    if raw_worker.kind.is_some() {
        return Err(
            InputError::new("runner.worker.kind", "unknown key in the TaskConfig shape")
                .with_hint(format!("did you mean `type: {TASKCONFIG_WORKER_TYPE}`?")),
        );
    }
    let worker_type = raw_worker
        .type_
        .take()
        .ok_or_else(|| required("runner.worker.type"))?;
    check_choice(
        Some(&worker_type),
        "runner.worker.type",
        &[TASKCONFIG_WORKER_TYPE],
    )?;
    Ok(Task {
        shape: Shape::TaskConfig,
        id,
        id_generated: false,
        title,
        repo,
        prd: Prd {
            source: PrdSource::Inline,
            text,
        },
        test: test_spec(section.test)?,
        meta: meta_settings(meta, true, host)?,
        worker: worker_settings(raw_worker, host)?,
    })
}

fn required(path: &str) -> InputError {
    InputError::new(path, "required (missing or empty)")
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

fn yaml_inline(value: &Value) -> String {
    serde_yaml::to_string(value)
        .map(|s| truncate(s.trim_end(), 60))
        .unwrap_or_else(|_| "?".into())
}

/// `(id, generated)`; the id becomes part of a file name and a container name.
fn task_id(id: Option<String>, path: &str) -> Result<(String, bool), InputError> {
    let Some(id) = non_empty(id) else {
        return Ok((uuid::Uuid::new_v4().to_string(), true));
    };
    let valid = id.len() <= 128
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !valid {
        return Err(InputError::new(
            path,
            format!(
                "must be 1-128 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit (got {:?})",
                truncate(&id, 60)
            ),
        )
        .with_hint("the id names the Task Note file and the container"));
    }
    Ok((id, false))
}

fn title_or_id(title: Option<String>, id: &str) -> String {
    non_empty(title).unwrap_or_else(|| id.to_string())
}

fn directory(path: &str, field: &str, host: &Host) -> Result<PathBuf, InputError> {
    let joined = host.cwd.join(path);
    let resolved = std::fs::canonicalize(&joined).map_err(|e| {
        InputError::new(
            field,
            format!(
                "directory {path} not found (resolved to {}): {}",
                joined.display(),
                io_reason(&e)
            ),
        )
    })?;
    if !resolved.is_dir() {
        return Err(InputError::new(
            field,
            format!(
                "{path} is not a directory (resolved to {})",
                resolved.display()
            ),
        ));
    }
    Ok(resolved)
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

fn prd_file(path: &str, host: &Host) -> Result<Prd, InputError> {
    let field = "task.prd.path";
    let resolved = host.cwd.join(path);
    let not_found = |e: &std::io::Error| {
        InputError::new(
            field,
            format!(
                "file {path} not readable (resolved to {}): {}",
                resolved.display(),
                io_reason(e)
            ),
        )
        .with_hint("relative paths resolve against the current directory, not the repo")
    };
    let meta = std::fs::metadata(&resolved).map_err(|e| not_found(&e))?;
    if !meta.is_file() {
        return Err(InputError::new(
            field,
            format!("{path} is not a file (resolved to {})", resolved.display()),
        ));
    }
    if meta.len() > MAX_PRD_BYTES {
        return Err(InputError::new(
            field,
            format!(
                "{path} is {} bytes; the limit is {MAX_PRD_BYTES} bytes",
                meta.len()
            ),
        ));
    }
    let bytes = std::fs::read(&resolved).map_err(|e| not_found(&e))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        InputError::new(
            field,
            format!(
                "{path} is not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    if text.trim().is_empty() {
        return Err(InputError::new(field, format!("{path} is empty")));
    }
    Ok(Prd {
        source: PrdSource::File(std::fs::canonicalize(&resolved).unwrap_or(resolved)),
        text,
    })
}

fn test_spec(raw: Option<RawTest>) -> Result<Option<TestSpec>, InputError> {
    let Some(raw) = raw else { return Ok(None) };
    let command = non_empty(raw.command).ok_or_else(|| {
        InputError::new(
            "task.test.command",
            "required when `task.test` is present (got empty)",
        )
    })?;
    let cwd = relative_dir(raw.cwd.as_deref().unwrap_or("."), "task.test.cwd")?;
    let timeout = seconds(
        raw.timeout_sec,
        DEFAULT_TEST_TIMEOUT_SEC,
        "task.test.timeout_sec",
    )?;
    Ok(Some(TestSpec {
        command,
        cwd,
        timeout,
    }))
}

/// A directory inside the repo, as a normalised relative path.
fn relative_dir(path: &str, field: &str) -> Result<String, InputError> {
    if path.chars().any(char::is_control) {
        return Err(InputError::new(field, "contains control characters"));
    }
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(InputError::new(
                    field,
                    format!("must be a directory inside the repo, relative to it (got {path:?})"),
                ));
            }
        }
    }
    Ok(parts.join("/"))
}

fn seconds(value: Option<u64>, default: u64, field: &str) -> Result<Duration, InputError> {
    let secs = value.unwrap_or(default);
    if !(1..=MAX_SECONDS).contains(&secs) {
        return Err(InputError::new(
            field,
            format!("must be between 1 and {MAX_SECONDS} seconds (got {secs})"),
        ));
    }
    Ok(Duration::from_secs(secs))
}

fn check_choice(value: Option<&str>, field: &str, choices: &[&str]) -> Result<(), InputError> {
    match value {
        Some(v) if !choices.contains(&v) => Err(choice_error(v, field, choices)),
        _ => Ok(()),
    }
}

fn choice_error(value: &str, field: &str, choices: &[&str]) -> InputError {
    let error = InputError::new(
        field,
        format!("must be one of {} (got {value:?})", choices.join(", ")),
    );
    match closest(value, choices) {
        Some(best) => error.with_hint(format!("did you mean `{best}`?")),
        None => error,
    }
}

/// A value that ends up as one argument of a docker or codex command: a leading `-`
/// would turn it into an option.
fn argument(value: Option<String>, field: &str) -> Result<Option<String>, InputError> {
    match value {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Err(InputError::new(field, "must not be empty")),
        Some(v) if v.starts_with('-') || v.chars().any(|c| c.is_whitespace() || c.is_control()) => {
            Err(InputError::new(
                field,
                format!(
                    "must not start with `-` or contain spaces (got {:?})",
                    truncate(&v, 60)
                ),
            ))
        }
        Some(v) => Ok(Some(v)),
    }
}

/// Resolves `env:NAME` from the host; anything else is a literal.
fn env_reference(
    value: &str,
    field: &str,
    host: &Host,
) -> Result<Option<(String, Secret)>, InputError> {
    let Some(var) = value.strip_prefix("env:") else {
        return Ok(None);
    };
    let var = var.trim();
    if !is_env_name(var) {
        return Err(InputError::new(
            field,
            format!("`env:` must be followed by a variable name (got {value:?})"),
        ));
    }
    match host.var(var) {
        Some(v) if !v.is_empty() => Ok(Some((var.to_string(), Secret::new(v)))),
        _ => Err(InputError::new(
            field,
            format!("environment variable {var} is not set (from {value:?})"),
        )
        .with_hint(format!("export {var}=... before running agent-runner"))),
    }
}

fn is_env_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn meta_settings(
    raw: RawMeta,
    model_required: bool,
    host: &Host,
) -> Result<MetaSettings, InputError> {
    check_choice(
        raw.kind.as_deref(),
        "runner.meta.kind",
        &["openai-chat", "scripted"],
    )?;
    let model = match non_empty(raw.model) {
        Some(model) => model,
        None if model_required => return Err(required("runner.meta.model")),
        None => DEFAULT_META_MODEL.to_string(),
    };
    if let Some(t) = raw.temperature {
        if !(0.0..=2.0).contains(&t) {
            return Err(InputError::new(
                "runner.meta.temperature",
                format!("must be between 0 and 2 (got {t})"),
            ));
        }
    }
    let max_loops = raw.max_loops.unwrap_or(DEFAULT_MAX_LOOPS);
    if max_loops < 1 {
        return Err(InputError::new(
            "runner.meta.max_loops",
            format!("must be at least 1 (got {max_loops})"),
        ));
    }
    let timeout = match raw.timeout_sec {
        Some(secs) => seconds(Some(secs), 0, "runner.meta.timeout_sec")?,
        None => match host.var("META_TIMEOUT_SEC") {
            Some(v) => {
                let secs = v.trim().parse::<u64>().map_err(|_| {
                    InputError::new(
                        "META_TIMEOUT_SEC",
                        format!("must be a whole number of seconds (got {v:?})"),
                    )
                })?;
                seconds(Some(secs), 0, "META_TIMEOUT_SEC")?
            }
            None => Duration::from_secs(DEFAULT_META_TIMEOUT_SEC),
        },
    };
    let backend = if raw.kind.as_deref() == Some("scripted") {
        for (present, key) in [
            (raw.base_url.is_some(), "base_url"),
            (raw.api_key.is_some(), "api_key"),
        ] {
            if present {
                return Err(InputError::new(
                    format!("runner.meta.{key}"),
                    "not used by `kind: scripted`; remove it",
                ));
            }
        }
        let script = non_empty(raw.script).ok_or_else(|| {
            InputError::new("runner.meta.script", "required with `kind: scripted`")
                .with_hint("a YAML list of Meta replies, consumed in order")
        })?;
        let resolved = host.cwd.join(&script);
        if !resolved.is_file() {
            return Err(InputError::new(
                "runner.meta.script",
                format!(
                    "file {script} not found (resolved to {})",
                    resolved.display()
                ),
            ));
        }
        MetaBackend::Scripted {
            script: std::fs::canonicalize(&resolved).unwrap_or(resolved),
        }
    } else {
        if raw.script.is_some() {
            return Err(InputError::new(
                "runner.meta.script",
                "only used with `kind: scripted`",
            ));
        }
        let base_url = non_empty(raw.base_url)
            .or_else(|| non_empty(host.var("OPENAI_BASE_URL")))
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(InputError::new(
                "runner.meta.base_url",
                format!(
                    "must start with http:// or https:// (got {:?})",
                    truncate(&base_url, 80)
                ),
            ));
        }
        let key_spec = non_empty(raw.api_key).unwrap_or_else(|| DEFAULT_API_KEY.to_string());
        let api_key = match env_reference(&key_spec, "runner.meta.api_key", host)? {
            Some((var, value)) => ApiKey {
                source: format!("env:{var}"),
                value,
            },
            None => ApiKey {
                source: "literal".into(),
                value: Secret::new(key_spec),
            },
        };
        MetaBackend::OpenAiChat {
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
        }
    };
    Ok(MetaSettings {
        backend,
        model,
        temperature: raw.temperature,
        system_prompt: non_empty(raw.system_prompt),
        max_loops,
        timeout,
    })
}

fn worker_settings(raw: RawWorker, host: &Host) -> Result<WorkerSettings, InputError> {
    let docker_image = argument(raw.docker_image, "runner.worker.docker_image")?
        .unwrap_or_else(|| DEFAULT_DOCKER_IMAGE.to_string());
    let network = match raw.network.as_deref().unwrap_or("bridge") {
        "bridge" => Network::Bridge,
        "none" => Network::None,
        "host" => Network::Host,
        other => {
            return Err(choice_error(
                other,
                "runner.worker.network",
                &["bridge", "none", "host"],
            ));
        }
    };
    let mut env = Vec::new();
    for (name, value) in raw.env.unwrap_or_default() {
        let field = format!("runner.worker.env.{name}");
        if !is_env_name(&name) {
            return Err(InputError::new(
                field,
                "not a valid variable name (letters, digits, _; not starting with a digit)",
            ));
        }
        let value = match env_reference(&value, &field, host)? {
            Some((var, value)) => EnvValue::FromHost { var, value },
            None => EnvValue::Literal(value),
        };
        env.push(WorkerEnv { name, value });
    }
    Ok(WorkerSettings {
        docker_image,
        max_run_time: seconds(
            raw.max_run_time_sec,
            DEFAULT_MAX_RUN_TIME_SEC,
            "runner.worker.max_run_time_sec",
        )?,
        idle_timeout: seconds(
            raw.idle_timeout_sec,
            DEFAULT_IDLE_TIMEOUT_SEC,
            "runner.worker.idle_timeout_sec",
        )?,
        model: argument(raw.model, "runner.worker.model")?,
        extra_args: raw.extra_args.unwrap_or_default(),
        network,
        env,
        limits: WorkerLimits::default(),
    })
}

#[cfg(test)]
mod tests;

/// A valid task for unit tests elsewhere: inline PRD, `extra` appended to the YAML.
#[cfg(test)]
pub(crate) fn test_task(extra: &str) -> Task {
    let yaml = format!("version: 1\ntask:\n  id: unit\n  prd:\n    text: Make it work.\n{extra}");
    let var = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-unit-test-key".to_string());
    parse(
        &yaml,
        &Host {
            var: &var,
            cwd: &std::env::temp_dir(),
        },
    )
    .expect("test task is valid")
}
