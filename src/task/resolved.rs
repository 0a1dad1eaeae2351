//! `agent-runner validate` output: the task as it will run, every default visible,
//! the PRD shortened (its secrets were masked when the task was built, so the cut
//! cannot show part of one), every secret masked.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{CodexAuth, EnvValue, MetaBackend, Network, PrdSource, Shape, Task};
use crate::egress::Origin;
use crate::secret::MASK;

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
}

#[derive(Serialize)]
struct PriceView {
    input: f64,
    cached_input: f64,
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
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    base_url: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    script: Option<String>,
    temperature: Option<f64>,
    system_prompt: String,
    max_loops: u32,
    max_replans: u32,
    timeout_sec: u64,
}

#[derive(Serialize)]
struct WorkerView<'a> {
    kind: &'static str,
    docker_image: &'a str,
    max_run_time_sec: u64,
    idle_timeout_sec: u64,
    model: Option<&'a str>,
    extra_args: &'a [String],
    network: &'static str,
    /// With network allowlist: the effective allow list and where it came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    allow: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    allow_from: Option<String>,
    env: BTreeMap<&'a str, String>,
    limits: LimitsView,
    codex_auth: String,
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
                start: crate::text::escape_controls_in_lines(
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
        },
        runner: RunnerView {
            meta: meta_view(task),
            worker: WorkerView {
                kind: "codex-cli",
                docker_image: &task.worker.docker_image,
                max_run_time_sec: task.worker.max_run_time.as_secs(),
                idle_timeout_sec: task.worker.idle_timeout.as_secs(),
                model: task.worker.model.as_deref(),
                extra_args: &task.worker.extra_args,
                network: task.worker.network.as_str(),
                allow: (task.worker.network == Network::Allowlist)
                    .then(|| task.worker.allow.entries()),
                allow_from: (task.worker.network == Network::Allowlist).then(|| {
                    match &task.worker.allow.origin {
                        Origin::Task => "runner.worker.allow".to_string(),
                        Origin::Default(why) => format!("default: {why}"),
                    }
                }),
                env: task
                    .worker
                    .env
                    .iter()
                    .map(|e| {
                        let shown = match &e.value {
                            EnvValue::Literal(v) => v.clone(),
                            EnvValue::FromHost { var, .. } => format!("{MASK} (env:{var})"),
                        };
                        (e.name.as_str(), shown)
                    })
                    .collect(),
                limits: LimitsView {
                    memory_bytes: task.worker.limits.memory_bytes,
                    cpus: task.worker.limits.cpus,
                    pids: task.worker.limits.pids,
                },
                codex_auth: match &task.codex_auth {
                    CodexAuth::File { path, secrets, .. } => {
                        format!("file {} ({} values masked)", path.display(), secrets.len())
                    }
                    CodexAuth::ApiKey(_) => format!("{MASK} (env:CODEX_API_KEY)"),
                    CodexAuth::None => "none".into(),
                },
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
        },
    };
    serde_yaml::to_string(&view).unwrap_or_else(|e| format!("# cannot show the task: {e}\n"))
}

fn meta_view(task: &Task) -> MetaView<'_> {
    let meta = &task.meta;
    let (kind, base_url, api_key, script) = match &meta.backend {
        MetaBackend::OpenAiChat { base_url, api_key } => (
            "openai-chat",
            Some(base_url.as_str()),
            Some(format!("{MASK} ({})", api_key.source)),
            None,
        ),
        MetaBackend::Scripted { script } => {
            ("scripted", None, None, Some(script.display().to_string()))
        }
    };
    MetaView {
        kind,
        model: &meta.model,
        base_url,
        api_key,
        script,
        temperature: meta.temperature,
        system_prompt: match &meta.system_prompt {
            Some(p) => format!("custom ({} chars)", p.chars().count()),
            None => "default".into(),
        },
        max_loops: meta.max_loops,
        max_replans: meta.max_replans,
        timeout_sec: meta.timeout.as_secs(),
    }
}
