//! The task to run: `Task` is the Task YAML validated, with defaults applied, paths
//! absolute, the PRD loaded, `env:` values resolved and secrets masked in its texts.
//! Nothing runs before this succeeds, so every mistake in the YAML is reported here,
//! all of them at once, each with its field path.
//!
//! The pipeline (`parse`): `document` reads the YAML and picks the shape, `structure`
//! checks keys and types against the tables in `raw`, `build` (with `settings`,
//! `worker_env`, `env_ref`, `paths`, `auth`) turns the raw document into a `Task`.

mod allow_entries;
mod allow_gaps;
mod argv;
mod auth;
mod bounds;
mod build;
mod codex_meta;
mod default_allow;
mod document;
mod env_ref;
mod fields;
mod host;
pub mod id;
mod input_error;
pub mod locate;
mod loopback;
mod mcp;
mod meta_api;
mod paths;
mod raw;
mod resolved;
mod runner_section;
mod schema;
mod settings;
mod setup;

mod structure;
mod suggest;
pub mod worker_env;

use std::path::PathBuf;
use std::time::Duration;

pub use crate::agent::Login;
pub use crate::task_state::TaskState;
pub use allow_gaps::{AllowGap, allow_gaps};
pub use auth::resolve as resolve_login;
pub use bounds::{DEFAULT_MAX_STALLED_LOOPS, unpriced};
pub use codex_meta::CodexMeta;
pub use default_allow::url_entry as allow_entry_of;
pub use fields::{MAX_SECONDS, is_one_line};
pub use host::{Host, Var};
pub use input_error::{Category, InputError, InputErrors};
pub use meta_api::{
    DEFAULT_ANTHROPIC_BASE_URL, DEFAULT_ANTHROPIC_MODEL, DEFAULT_BASE_URL, DEFAULT_META_MODEL,
    Effort, EffortLevel, EffortSource, MetaApi, MetaHeader, Wire,
};
pub use resolved::resolved_yaml;
pub use runner_section::{RunnerSettings, runner_settings};
pub use schema::{builder_fields, builder_may_write, task_config_schema};
pub use setup::SetupSpec;

use crate::agent::Kind;
use crate::allow::AllowList;
use agent_runner_core::secret::Secret;

pub const DEFAULT_DOCKER_IMAGE: &str = "agent-runner-codex:latest";
pub(crate) const DEFAULT_MAX_LOOPS: u32 = 5;
/// Default `runner.meta.max_replans` (SPEC §16).
pub(crate) const DEFAULT_MAX_REPLANS: u32 = 2;
pub(crate) const DEFAULT_META_TIMEOUT_SEC: u64 = 60;
pub(crate) const DEFAULT_MAX_RUN_TIME_SEC: u64 = 1800;
pub(crate) const DEFAULT_IDLE_TIMEOUT_SEC: u64 = 600;
pub(crate) const DEFAULT_TEST_TIMEOUT_SEC: u64 = 600;
/// Default `runner.worker.limits.pids`: enough for any build, not for a fork bomb.
pub(crate) const DEFAULT_PIDS_LIMIT: u64 = 4096;
/// Most entries in `task.acceptance_criteria`.
pub const MAX_ACCEPTANCE_CRITERIA: usize = 50;
/// The default `runner.worker.type` of the TaskConfig shape (codex-cli); each kind
/// has its own (`Kind::taskconfig_type`).
pub const TASKCONFIG_WORKER_TYPE: &str = "docker_codex_cli";
/// `runner.meta.timeout_sec` of `kind: codex-cli` (seed MP §6.3: 10 min per call).
pub(crate) const DEFAULT_CODEX_META_TIMEOUT_SEC: u64 = 600;
/// What `task.meta.model` says for `kind: codex-cli` without a model.
pub(crate) const CODEX_DEFAULT_MODEL: &str = "(codex's default model)";

/// Which of the two accepted YAML shapes the task was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    V1,
    TaskConfig,
}

/// A validated task.
#[derive(Debug, Clone)]
pub struct Task {
    pub(crate) shape: Shape,
    pub id: String,
    /// True when `task.id` was not given and a UUID was generated.
    pub id_generated: bool,
    /// One line; secrets masked.
    pub title: String,
    /// Absolute, symlinks resolved; an existing directory.
    pub repo: PathBuf,
    pub prd: Prd,
    pub test: Option<TestSpec>,
    /// `task.setup`: run once in each new sandbox before the first paid call.
    pub setup: Option<SetupSpec>,
    /// Given in the YAML (secrets masked); empty: Meta plans them (`plan_task`).
    pub acceptance_criteria: Vec<String>,
    pub meta: MetaSettings,
    pub worker: WorkerSettings,
    /// How the worker's agent logs in in the container.
    pub login: Login,
    /// Prices, the budget and the no-progress stop (SPEC §15).
    pub bounds: Bounds,
    /// `runner.sandbox.host` as written: the Docker host every docker call of the
    /// run goes to (SPEC §22), checked by `backend::host::Target::parse` where the
    /// run starts; None: the environment's.
    pub sandbox_host: Option<String>,
}

/// `runner.pricing`, `runner.budget`, `runner.max_stalled_loops`.
#[derive(Debug, Clone, Default)]
pub struct Bounds {
    pub pricing: agent_runner_core::usage::Pricing,
    pub budget: Budget,
    /// Loops in a row with the same repository state and test outcome that end the
    /// task; 0: never.
    pub max_stalled_loops: u32,
}

/// `runner.budget`: limits for the whole task, each optional.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    /// Input plus output tokens, Meta and worker together.
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    /// Wall time of the whole task.
    pub max_duration: Option<Duration>,
}

/// The PRD: the requirements text.
#[derive(Debug, Clone)]
pub struct Prd {
    pub source: PrdSource,
    /// Secrets masked, so any cut of it is safe to show.
    pub text: String,
}

/// Where the PRD came from.
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

/// `runner.meta`, defaults applied.
#[derive(Debug, Clone)]
pub struct MetaSettings {
    pub backend: MetaBackend,
    pub model: String,
    /// The reasoning effort asked for (HTTP kinds), and where it came from.
    pub reasoning_effort: Option<Effort>,
    pub temperature: Option<f64>,
    /// Secrets masked.
    pub system_prompt: Option<String>,
    pub max_loops: u32,
    /// How often Meta may re-plan the criteria in a run (0: never).
    pub max_replans: u32,
    /// Stop after `plan_task` until the plan is approved (SPEC §23).
    pub approve_plan: bool,
    pub timeout: Duration,
    /// Why Meta is of its kind (`validate` says).
    pub kind_reason: String,
}

impl MetaSettings {
    /// `runner.meta.kind`.
    pub fn kind(&self) -> &'static str {
        match &self.backend {
            MetaBackend::Api(api) => api.wire.as_str(),
            MetaBackend::Scripted { .. } => "scripted",
            MetaBackend::CodexCli(_) => "codex-cli",
        }
    }

    /// Meta's model replaced by `model` (`--meta-model`, `builder.model`): codex's
    /// `-m` with `kind: codex-cli`; on `openai-responses` its effort suffix split
    /// off, replacing an effort that came with the model it replaces. An error when
    /// the name has an effort and `runner.meta.reasoning_effort` gave one too.
    pub fn set_model(&mut self, model: &str) -> Result<(), ModelRefused> {
        if let MetaBackend::CodexCli(codex) = &mut self.backend {
            codex.model = Some(model.to_string());
        }
        let MetaBackend::Api(api) = &self.backend else {
            self.model = model.to_string();
            return Ok(());
        };
        let given = self
            .reasoning_effort
            .as_ref()
            .filter(|e| e.from == EffortSource::Setting)
            .map(|e| e.level);
        let (model, effort) = meta_api::model_and_effort(api.wire, Some(model.to_string()), given)
            .map_err(|e| ModelRefused(e.message))?;
        self.model = model;
        self.reasoning_effort = effort;
        Ok(())
    }
}

/// Why `MetaSettings::set_model` refused a model name (the message only: the
/// caller names the setting it came from).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ModelRefused(pub String);

/// Where Meta's replies come from.
#[derive(Debug, Clone)]
pub enum MetaBackend {
    /// An HTTP API (`openai-responses`, `openai-chat`, `anthropic-messages`).
    Api(MetaApi),
    Scripted {
        script: PathBuf,
    },
    /// `codex exec --output-schema` in the sandbox image (SPEC §18).
    CodexCli(CodexMeta),
}

/// Meta's API key.
#[derive(Debug, Clone)]
pub struct ApiKey {
    /// Where it came from: `env:NAME` or `literal`.
    pub(crate) source: String,
    pub value: Secret,
}

/// `runner.worker`, defaults applied.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// `runner.worker.kind`: the agent CLI.
    pub kind: &'static dyn Kind,
    pub docker_image: String,
    /// `runner.worker.agent_from` (SPEC §21).
    pub agent_from: AgentFrom,
    pub max_run_time: Duration,
    pub idle_timeout: Duration,
    pub model: Option<String>,
    pub extra_args: Vec<String>,
    /// `runner.worker.base_url`: the agent's model API (`Kind::run_env`/`command`).
    pub base_url: Option<String>,
    pub network: Network,
    /// The effective `runner.worker.allow` (used with `Network::Allowlist`).
    pub allow: AllowList,
    pub env: Vec<WorkerEnv>,
    pub limits: WorkerLimits,
    /// `runner.worker.caches`: absolute, normalised paths, each a volume per
    /// repository (SPEC §21).
    pub caches: Vec<String>,
    /// `runner.worker.keep_untracked`: the pipeline's bring-back keeps untracked
    /// build caches in the branch (SPEC §24).
    pub keep_untracked: bool,
    /// `runner.sandbox.transport` (SPEC §22); None: by the daemon
    /// (`backend::copy::chosen`).
    pub transport: Option<TransportChoice>,
    /// `runner.worker.mcp_servers` (SPEC §28), values resolved.
    pub mcp_servers: Vec<crate::agent::McpServer>,
    /// `runner.sandbox.runtime` (SPEC §28): `docker run --runtime`; None: the
    /// daemon's default.
    pub runtime: Option<String>,
}

impl WorkerSettings {
    /// The `runner.worker.env` entries written as values, by name: the ones a
    /// reader of the container from outside sees as they are (an `env:` one is a
    /// secret and passed by name only).
    pub fn literal_env(&self) -> Vec<(&str, &str)> {
        self.env
            .iter()
            .filter_map(|e| match &e.value {
                EnvValue::Literal(value) => Some((e.name.as_str(), value.as_str())),
                EnvValue::FromHost { .. } => None,
            })
            .collect()
    }
}

/// `runner.sandbox.transport`: how the repository gets into the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportChoice {
    /// Copied into a volume of the sandbox's host; the work comes back as a branch.
    Copy,
    /// Bind-mounted in place (the daemon must prove it sees this machine's files).
    Bind,
}

/// `runner.worker.limits`, for `docker run` (`--memory`, `--cpus`, `--pids-limit`).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerLimits {
    /// Memory limit in bytes; `None`: no limit.
    pub memory_bytes: Option<u64>,
    /// CPUs, a decimal; `None`: no limit.
    pub cpus: Option<f64>,
    /// Most processes and threads in the container.
    pub pids: u64,
}

impl Default for WorkerLimits {
    fn default() -> Self {
        WorkerLimits {
            memory_bytes: None,
            cpus: None,
            pids: DEFAULT_PIDS_LIMIT,
        }
    }
}

/// `runner.worker.agent_from`: where the worker's agent comes from (SPEC §21).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AgentFrom {
    /// The image's own agent when it has one on PATH, else the tools volume's.
    #[default]
    Auto,
    /// The tools volume's, read-only at `/agent-runner-tools`.
    Tools,
    /// The image's own, hash-checked before each run.
    Image,
}

impl AgentFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentFrom::Auto => "auto",
            AgentFrom::Tools => "tools",
            AgentFrom::Image => "image",
        }
    }
}

/// `runner.worker.network`: how the container reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// No network but agent-runner's egress proxy, which allows `runner.worker.allow`
    /// (SPEC §17).
    Allowlist,
    Bridge,
    None,
    Host,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Allowlist => "allowlist",
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

/// The value of a `runner.worker.env` entry.
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
    /// Every secret value of this task (API key, `env:` values, logins, credentials
    /// in URLs, literal ones included), for masking.
    pub fn secrets(&self) -> Vec<Secret> {
        let mut secrets = secrets_of(&self.meta, &self.worker, &self.login);
        for entry in self.setup.iter().flat_map(|s| &s.env) {
            match &entry.value {
                EnvValue::FromHost { value, .. } => secrets.push(value.clone()),
                EnvValue::Literal(value) => {
                    secrets.extend(agent_runner_core::secret::in_url(value));
                }
            }
        }
        secrets
    }

    /// File name of the Task Note in `.agent-runner/`.
    pub fn note_name(&self) -> String {
        format!("task-{}.md", self.id)
    }

    /// Path of the Task Note.
    pub fn note_path(&self) -> PathBuf {
        self.repo
            .join(agent_runner_core::private_dir::DIR_NAME)
            .join(self.note_name())
    }
}

/// Every secret value of these settings (API key, `env:` values, logins,
/// credentials in URLs, literal ones included), for masking.
pub(crate) fn secrets_of(
    meta: &MetaSettings,
    worker: &WorkerSettings,
    login: &Login,
) -> Vec<Secret> {
    let mut out = login.secrets();
    let mut env: Vec<&WorkerEnv> = worker.env.iter().collect();
    match &meta.backend {
        MetaBackend::Api(api) => {
            out.extend(api.api_key.iter().map(|key| key.value.clone()));
            // Every header value: they are there to authenticate.
            out.extend(api.headers.iter().map(MetaHeader::value));
            out.extend(agent_runner_core::secret::in_url(&api.base_url));
        }
        MetaBackend::Scripted { .. } => {}
        MetaBackend::CodexCli(codex) => {
            out.extend(codex.login.secrets());
            out.extend(
                codex
                    .base_url
                    .iter()
                    .flat_map(|u| agent_runner_core::secret::in_url(u)),
            );
            env.extend(codex.env.iter().flatten());
        }
    }
    if let Some(url) = &worker.base_url {
        out.extend(agent_runner_core::secret::in_url(url));
    }
    out.extend(worker.mcp_servers.iter().flat_map(|s| s.secrets()));
    for env in env {
        match &env.value {
            EnvValue::FromHost { value, .. } => out.push(value.clone()),
            // `ANTHROPIC_BASE_URL: https://user:pw@gw/` given as a literal.
            EnvValue::Literal(value) if value.contains("://") => {
                out.extend(agent_runner_core::secret::in_url(value));
            }
            EnvValue::Literal(_) => {}
        }
    }
    out
}

/// Parses and validates a Task YAML document, reporting every problem it finds:
/// unknown keys, then wrong types, then wrong values, then problems of the host
/// (unset variables, missing files). A syntax error is reported alone.
pub fn parse(text: &str, host: &Host) -> Result<Task, InputErrors> {
    let mut problems = InputErrors::default();
    let read = document::read(text, &mut problems)?;
    let task = read
        .raw
        .and_then(|raw| build::task(raw, host, &mut problems));
    if let Some(task) = &task {
        for problem in argv::check(&task.meta, &task.worker, task.secrets()) {
            problems.push(problem);
        }
    }
    match task {
        Some(task) if problems.is_empty() => Ok(task),
        _ if problems.is_empty() => {
            // A builder returned nothing without saying why: a bug, but never a panic.
            Err(InputError::new("stdin", "invalid task (no details available)").into())
        }
        _ => Err(problems.into_report(&read.covered)),
    }
}

#[cfg(test)]
mod tests;

/// A valid task for unit tests elsewhere (other crates' with the `testing` feature):
/// inline PRD, `extra` appended to the YAML.
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::expect_used)]
pub fn test_task(extra: &str) -> Task {
    let yaml = format!("version: 1\ntask:\n  id: unit\n  prd:\n    text: Make it work.\n{extra}");
    let var = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-unit-test-key".into());
    parse(
        &yaml,
        &Host {
            var: &var,
            cwd: Ok(std::env::temp_dir()),
        },
    )
    .expect("test task is valid")
}
