//! `agent-runner validate` output: the task as it will run, every default visible,
//! the PRD shortened (its secrets were masked when the task was built, so the cut
//! cannot show part of one), every secret masked.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{EnvValue, Login, MetaBackend, Network, PrdSource, Shape, Task, WorkerEnv};
use crate::allow::Origin;
use agent_runner_core::secret::MASK;

/// How much of the PRD `validate` shows.
const PRD_PREVIEW_CHARS: usize = 200;

#[derive(Serialize)]
struct Resolved<'a> {
    shape: &'static str,
    task: TaskView<'a>,
    runner: RunnerView<'a>,
}

#[derive(Serialize)]
struct TaskView<'a> {
    id: &'a str,
    id_generated: bool,
    title: &'a str,
    repo: String,
    note: String,
    prd: PrdView,
    test: Option<TestView<'a>>,
    /// Empty: Meta plans them.
    acceptance_criteria: &'a [String],
    // SPEC §21: the environment set up once.
    #[serde(skip_serializing_if = "Option::is_none")]
    setup: Option<SetupView<'a>>,
}

/// `task.setup`: what runs before the first paid call, with its own hosts and
/// variables (shown masked).
#[derive(Serialize)]
struct SetupView<'a> {
    command: String,
    timeout_sec: u64,
    /// Hosts setup may reach besides the worker's allow list.
    allow: Vec<String>,
    env: BTreeMap<&'a str, String>,
}

#[derive(Serialize)]
struct PrdView {
    source: String,
    chars: usize,
    start: String,
}

#[derive(Serialize)]
struct TestView<'a> {
    command: &'a str,
    cwd: String,
    timeout_sec: u64,
}

#[derive(Serialize)]
struct RunnerView<'a> {
    meta: MetaView<'a>,
    worker: WorkerView<'a>,
    /// USD per million tokens, by model.
    pricing: BTreeMap<&'a str, PriceView>,
    budget: BudgetView,
    max_stalled_loops: u32,
    /// `runner.sandbox.host`, when the task names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    sandbox: Option<SandboxView<'a>>,
}

#[derive(Serialize)]
struct SandboxView<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<&'a str>,
    /// `runner.sandbox.runtime` (SPEC §28).
    #[serde(skip_serializing_if = "Option::is_none")]
    runtime: Option<&'a str>,
}

#[derive(Serialize)]
struct PriceView {
    input: f64,
    cached_input: f64,
    cache_write: f64,
    output: f64,
}

#[derive(Serialize)]
struct BudgetView {
    max_tokens: Option<u64>,
    max_cost_usd: Option<f64>,
    max_duration_sec: Option<u64>,
}

#[derive(Serialize)]
struct MetaView<'a> {
    kind: &'static str,
    /// Why this kind.
    kind_from: &'a str,
    model: &'a str,
    /// HTTP kinds: the effort and where it came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base_url: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    headers: Option<BTreeMap<&'a str, String>>,
    /// HTTP kinds: replies held to their JSON Schema (else the YAML text protocol).
    #[serde(skip_serializing_if = "Option::is_none")]
    structured: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    script: Option<String>,
    temperature: Option<f64>,
    system_prompt: String,
    max_loops: u32,
    max_replans: u32,
    approve_plan: bool,
    timeout_sec: u64,
    /// kind codex-cli: what it runs with beside the worker's settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    docker_image: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extra_args: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    env: Option<BTreeMap<&'a str, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    codex_auth: Option<String>,
}

#[derive(Serialize)]
struct WorkerView<'a> {
    kind: &'static str,
    docker_image: &'a str,
    max_run_time_sec: u64,
    idle_timeout_sec: u64,
    model: Option<&'a str>,
    extra_args: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    base_url: Option<&'a str>,
    network: &'static str,
    /// With network allowlist: the effective allow list and where it came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    allow: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    allow_from: Option<String>,
    env: BTreeMap<&'a str, String>,
    limits: LimitsView,
    keep_untracked: bool,
    // SPEC §21: where the agent comes from, and the caches kept per repository.
    agent_from: &'static str,
    caches: &'a [String],
    /// `<program>_auth` (`codex_auth`, `claude_auth`): how the agent logs in.
    #[serde(flatten)]
    auth: BTreeMap<String, String>,
    /// `runner.worker.mcp_servers` (SPEC §28): each server in words, its secrets
    /// by name only.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    mcp_servers: BTreeMap<&'a str, String>,
}

#[derive(Serialize)]
struct LimitsView {
    memory_bytes: Option<u64>,
    cpus: Option<f64>,
    pids: u64,
}

/// The resolved task as a YAML document.
pub fn resolved_yaml(task: &Task) -> String {
    let view = Resolved {
        shape: match task.shape {
            Shape::V1 => "v1",
            Shape::TaskConfig => "task-config",
        },
        task: TaskView {
            id: &task.id,
            id_generated: task.id_generated,
            title: &task.title,
            repo: task.repo.display().to_string(),
            note: task.note_path().display().to_string(),
            prd: PrdView {
                source: match &task.prd.source {
                    PrdSource::File(path) => format!("file {}", path.display()),
                    PrdSource::Inline => "inline".into(),
                },
                chars: task.prd.text.chars().count(),
                start: agent_runner_core::text::escape_controls_in_lines(
                    &task
                        .prd
                        .text
                        .chars()
                        .take(PRD_PREVIEW_CHARS)
                        .collect::<String>(),
                ),
            },
            test: task.test.as_ref().map(|t| TestView {
                command: &t.command,
                cwd: if t.cwd.is_empty() {
                    ".".into()
                } else {
                    t.cwd.clone()
                },
                timeout_sec: t.timeout.as_secs(),
            }),
            acceptance_criteria: &task.acceptance_criteria,
            setup: task.setup.as_ref().map(|setup| SetupView {
                command: agent_runner_core::text::escape_controls_in_lines(&setup.command),
                timeout_sec: setup.timeout.as_secs(),
                allow: setup.allow.entries(),
                env: env_view(&setup.env),
            }),
        },
        runner: RunnerView {
            meta: meta_view(task),
            worker: WorkerView {
                kind: task.worker.kind.name(),
                docker_image: &task.worker.docker_image,
                max_run_time_sec: task.worker.max_run_time.as_secs(),
                idle_timeout_sec: task.worker.idle_timeout.as_secs(),
                model: task.worker.model.as_deref(),
                extra_args: &task.worker.extra_args,
                base_url: task.worker.base_url.as_deref(),
                network: task.worker.network.as_str(),
                allow: (task.worker.network == Network::Allowlist)
                    .then(|| task.worker.allow.entries()),
                allow_from: (task.worker.network == Network::Allowlist).then(|| {
                    match &task.worker.allow.origin {
                        Origin::Task => "runner.worker.allow".to_string(),
                        Origin::Default(why) => format!("default: {why}"),
                    }
                }),
                env: env_view(&task.worker.env),
                limits: LimitsView {
                    memory_bytes: task.worker.limits.memory_bytes,
                    cpus: task.worker.limits.cpus,
                    pids: task.worker.limits.pids,
                },
                keep_untracked: task.worker.keep_untracked,
                agent_from: task.worker.agent_from.as_str(),
                caches: &task.worker.caches,
                auth: BTreeMap::from([(
                    format!("{}_auth", task.worker.kind.program()),
                    login_view(&task.login),
                )]),
                mcp_servers: mcp_view(&task.worker.mcp_servers),
            },
            pricing: task
                .bounds
                .pricing
                .models
                .iter()
                .map(|(model, p)| {
                    (
                        model.as_str(),
                        PriceView {
                            input: p.input,
                            cached_input: p.cached_input,
                            cache_write: p.cache_write,
                            output: p.output,
                        },
                    )
                })
                .collect(),
            budget: BudgetView {
                max_tokens: task.bounds.budget.max_tokens,
                max_cost_usd: task.bounds.budget.max_cost_usd,
                max_duration_sec: task.bounds.budget.max_duration.map(|d| d.as_secs()),
            },
            max_stalled_loops: task.bounds.max_stalled_loops,
            sandbox: (task.sandbox_host.is_some() || task.worker.runtime.is_some()).then_some(
                SandboxView {
                    host: task.sandbox_host.as_deref(),
                    runtime: task.worker.runtime.as_deref(),
                },
            ),
        },
    };
    serde_norway::to_string(&view).unwrap_or_else(|e| format!("# cannot show the task: {e}\n"))
}

/// Each MCP server as `McpServer::describe` says it, without its name before.
fn mcp_view(servers: &[crate::agent::McpServer]) -> BTreeMap<&str, String> {
    servers
        .iter()
        .map(|s| {
            let text = s.describe();
            let text = text
                .strip_prefix(&format!("{}: ", s.name))
                .map_or(text.clone(), str::to_string);
            (s.name.as_str(), text)
        })
        .collect()
}

fn meta_view(task: &Task) -> MetaView<'_> {
    let meta = &task.meta;
    let (base_url, api_key, script) = match &meta.backend {
        MetaBackend::Api(api) => (
            Some(api.base_url.as_str()),
            Some(match &api.api_key {
                Some(key) => format!("{MASK} ({})", key.source),
                None => "none (runner.meta.headers authenticate)".into(),
            }),
            None,
        ),
        MetaBackend::Scripted { script } => (None, None, Some(script.display().to_string())),
        MetaBackend::CodexCli(codex) => (codex.base_url.as_deref(), None, None),
    };
    let api = match &meta.backend {
        MetaBackend::Api(api) => Some(api),
        _ => None,
    };
    let codex = match &meta.backend {
        MetaBackend::CodexCli(codex) => Some(codex),
        _ => None,
    };
    MetaView {
        kind: meta.kind(),
        kind_from: &meta.kind_reason,
        model: &meta.model,
        reasoning_effort: api.map(|_| match &meta.reasoning_effort {
            Some(effort) => format!("{} ({})", effort.level.as_str(), effort.origin()),
            None => "none".into(),
        }),
        base_url,
        api_key,
        headers: api.filter(|a| !a.headers.is_empty()).map(|a| {
            a.headers
                .iter()
                .map(|h| {
                    let shown = match &h.value {
                        EnvValue::FromHost { var, .. } => format!("{MASK} (env:{var})"),
                        EnvValue::Literal(_) => format!("{MASK} (literal)"),
                    };
                    (h.name.as_str(), shown)
                })
                .collect()
        }),
        structured: api.map(|a| a.structured),
        script,
        temperature: meta.temperature,
        system_prompt: match &meta.system_prompt {
            Some(p) => format!("custom ({} chars)", p.chars().count()),
            None => "default".into(),
        },
        max_loops: meta.max_loops,
        max_replans: meta.max_replans,
        approve_plan: meta.approve_plan,
        timeout_sec: meta.timeout.as_secs(),
        docker_image: codex.map(|c| {
            c.docker_image
                .as_deref()
                .unwrap_or(task.worker.docker_image.as_str())
        }),
        extra_args: codex.and_then(|c| c.extra_args.as_deref()),
        env: codex.and_then(|c| c.env.as_deref()).map(env_view),
        codex_auth: codex.map(|c| login_view(&c.login)),
    }
}

fn env_view(env: &[WorkerEnv]) -> BTreeMap<&str, String> {
    env.iter()
        .map(|e| {
            let shown = match &e.value {
                EnvValue::Literal(v) => v.clone(),
                EnvValue::FromHost { var, .. } => format!("{MASK} (env:{var})"),
            };
            (e.name.as_str(), shown)
        })
        .collect()
}

fn login_view(login: &Login) -> String {
    match login {
        Login::File { path, secrets, .. } => {
            format!("file {} ({} values masked)", path.display(), secrets.len())
        }
        Login::Key { var, .. } => format!("{MASK} (env:{var})"),
        Login::None => "none".into(),
    }
}
