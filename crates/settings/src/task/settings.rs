//! `runner.meta` and `runner.worker` → `MetaSettings` and `WorkerSettings`: defaults
//! applied, ranges checked, the API key and `env:` values resolved. Every problem is
//! recorded; a builder returns `None` when it recorded one.

use std::time::Duration;

use super::allow_entries::allow_rules;
use super::auth;
use super::fields::{argument, choice, non_empty, required, seconds, url_value};
use super::host::{Host, Var};
use super::input_error::{InputError, InputErrors};
use super::meta_api::{self, Chosen, DEFAULT_META_MODEL, Wire};
use super::paths::script_file;
use super::raw::{RawLimits, RawMeta, RawWorker};
use super::worker_env;
use super::{
    AgentFrom, DEFAULT_DOCKER_IMAGE, DEFAULT_IDLE_TIMEOUT_SEC, DEFAULT_MAX_LOOPS,
    DEFAULT_MAX_REPLANS, DEFAULT_MAX_RUN_TIME_SEC, DEFAULT_META_TIMEOUT_SEC, DEFAULT_PIDS_LIMIT,
    MetaBackend, MetaSettings, Network, Shape, WorkerLimits, WorkerSettings,
};
use super::{CODEX_DEFAULT_MODEL, CodexMeta, DEFAULT_CODEX_META_TIMEOUT_SEC};
use crate::agent::{self, Kind, Login};
use crate::allow::AllowList;
use agent_runner_core::text::cut_chars;

/// Most iterations a task may have; each is a paid worker run.
pub(crate) const MAX_LOOPS: u64 = 1000;
/// Docker refuses smaller memory limits.
pub(crate) const MIN_MEMORY_BYTES: u64 = 6 << 20;
/// A bound far above any machine, so sizes stay exact integers.
pub(crate) const MAX_MEMORY_BYTES: u64 = 1 << 50;
/// Docker's smallest CPU share.
pub(crate) const MIN_CPUS: f64 = 0.01;
/// A bound far above any machine.
pub(crate) const MAX_CPUS: f64 = 4096.0;
/// The kernel's largest pid_max.
pub(crate) const MAX_PIDS: u64 = 4 << 20;

/// `runner.meta`; `model` is required in the TaskConfig shape (but for
/// `kind: codex-cli`, whose default is codex's own model).
pub(crate) fn meta(
    raw: RawMeta,
    shape: Shape,
    host: &Host,
    problems: &mut InputErrors,
) -> Option<MetaSettings> {
    let chosen = problems.take(meta_api::kind(
        raw.kind.as_deref(),
        raw.base_url.as_deref(),
        host,
    ));
    let kind = chosen.as_ref().map(|(kind, _)| *kind);
    let codex = kind == Some(Chosen::CodexCli);
    let wire = match kind {
        Some(Chosen::Api(wire)) => Some(wire),
        _ => None,
    };
    unused_keys(&raw, kind, problems);
    // An empty model is most likely an unset variable in a template: say so rather
    // than quietly asking the default model.
    let model = match raw.model {
        Some(model) if model.trim().is_empty() => problems.take(Err(InputError::new(
            "runner.meta.model",
            format!("is empty; name a model, or leave the key out for the default ({DEFAULT_META_MODEL})"),
        ))),
        Some(model) => Some(Some(model)),
        None if codex => Some(Some(CODEX_DEFAULT_MODEL.to_string())),
        None if shape == Shape::TaskConfig => problems.take(Err(required("runner.meta.model"))),
        None => Some(None),
    };
    let effort = match (&raw.reasoning_effort, wire) {
        (Some(value), Some(_)) => problems.take(meta_api::effort_setting(value)).map(Some),
        _ => Some(None),
    };
    let (model, reasoning_effort) = match (model, effort, wire) {
        (Some(model), Some(effort), Some(wire)) => {
            match problems.take(meta_api::model_and_effort(wire, model, effort)) {
                Some((model, effort)) => (Some(model), Some(effort)),
                None => (None, None),
            }
        }
        (Some(model), Some(_), None) => (
            Some(model.unwrap_or_else(|| DEFAULT_META_MODEL.to_string())),
            Some(None),
        ),
        _ => (None, None),
    };
    if let (Some(Wire::AnthropicMessages), Some(Some(effort))) = (wire, &reasoning_effort)
        && effort.level.thinking_budget().is_none()
    {
        problems.push(
            InputError::new(
                "runner.meta.reasoning_effort",
                format!(
                    "{} has no extended-thinking budget on anthropic-messages",
                    effort.level.as_str()
                ),
            )
            .with_hint("low (2,048 tokens), medium (8,192) or high (24,576)"),
        );
    }
    let thinking =
        wire.is_some_and(|w| w != Wire::OpenAiChat) && matches!(reasoning_effort, Some(Some(_)));
    let temperature = temperature(raw.temperature, codex, thinking, wire, problems);
    let max_loops = problems.take(max_loops(raw.max_loops));
    let max_replans = problems.take(max_replans(raw.max_replans));
    let timeout = if codex {
        problems.take(seconds(
            raw.timeout_sec,
            DEFAULT_CODEX_META_TIMEOUT_SEC,
            "runner.meta.timeout_sec",
        ))
    } else {
        problems.take(meta_timeout(raw.timeout_sec, host))
    };
    let backend = match kind? {
        Chosen::Scripted => scripted(raw.base_url, raw.api_key, raw.script, host, problems),
        Chosen::CodexCli => codex_cli(
            raw.base_url,
            raw.api_key,
            raw.script,
            raw.docker_image,
            raw.extra_args,
            raw.env,
            host,
            problems,
        )
        .map(|mut codex| {
            codex.model = model.clone().filter(|m| m != CODEX_DEFAULT_MODEL);
            MetaBackend::CodexCli(codex)
        }),
        Chosen::Api(wire) => meta_api::api(
            wire,
            meta_api::ApiRaw {
                base_url: raw.base_url,
                api_key: raw.api_key,
                headers: raw.headers,
                structured: raw.structured,
                script: raw.script,
            },
            host,
            problems,
        )
        .map(MetaBackend::Api),
    };
    Some(MetaSettings {
        backend: backend?,
        model: model?,
        reasoning_effort: reasoning_effort?,
        temperature: temperature?,
        system_prompt: non_empty(raw.system_prompt),
        max_loops: max_loops?,
        max_replans: max_replans?,
        approve_plan: raw.approve_plan.unwrap_or(false),
        timeout: timeout?,
        kind_reason: chosen?.1,
    })
}

/// The keys of `raw` its Meta `kind` does not use, each a problem: codex-cli's own
/// keys under another kind, the HTTP kinds' keys under codex-cli or scripted.
fn unused_keys(raw: &RawMeta, kind: Option<Chosen>, problems: &mut InputErrors) {
    let codex = kind == Some(Chosen::CodexCli);
    let wire = match kind {
        Some(Chosen::Api(wire)) => Some(wire),
        _ => None,
    };
    if !codex {
        for (present, key) in [
            (raw.docker_image.is_some(), "docker_image"),
            (raw.extra_args.is_some(), "extra_args"),
            (raw.env.is_some(), "env"),
        ] {
            if present {
                problems.push(
                    InputError::new(
                        format!("runner.meta.{key}"),
                        "only used with `kind: codex-cli`",
                    )
                    .with_hint("Meta runs in the sandbox image only with kind: codex-cli"),
                );
            }
        }
    }
    if let (Some(kind), None) = (kind, wire) {
        let name = if kind == Chosen::CodexCli {
            "codex-cli"
        } else {
            "scripted"
        };
        for (present, key, hint) in [
            (
                raw.reasoning_effort.is_some(),
                "reasoning_effort",
                "with codex-cli, give codex `-c model_reasoning_effort=...` in runner.meta.extra_args",
            ),
            (raw.headers.is_some(), "headers", ""),
            (raw.structured.is_some(), "structured", ""),
        ] {
            if present {
                let mut error = InputError::new(
                    format!("runner.meta.{key}"),
                    format!(
                        "not used by `kind: {name}` (only by the HTTP kinds openai-responses, openai-chat, anthropic-messages); remove it"
                    ),
                );
                if kind == Chosen::CodexCli && !hint.is_empty() {
                    error = error.with_hint(hint);
                }
                problems.push(error);
            }
        }
    }
}

/// `runner.meta.temperature`, where the kind and the reasoning effort (`thinking`)
/// take one; None when it is a problem.
fn temperature(
    temperature: Option<f64>,
    codex: bool,
    thinking: bool,
    wire: Option<Wire>,
    problems: &mut InputErrors,
) -> Option<Option<f64>> {
    match temperature {
        Some(_) if codex => problems.take(Err(InputError::new(
            "runner.meta.temperature",
            "not used by `kind: codex-cli` (codex has no temperature setting); remove it",
        ))),
        Some(t) if !(0.0..=2.0).contains(&t) => problems.take(Err(InputError::new(
            "runner.meta.temperature",
            format!("must be between 0 and 2 (got {t})"),
        ))),
        Some(_) if thinking => problems.take(Err(InputError::new(
            "runner.meta.temperature",
            format!(
                "is not accepted with a reasoning effort on {} (a reasoning model, or extended thinking, takes no temperature)",
                wire.map_or("", Wire::as_str)
            ),
        )
        .with_hint("remove runner.meta.temperature, or give a model without reasoning and no runner.meta.reasoning_effort"))),
        t => Some(t),
    }
}

/// `kind: codex-cli`: no key or script of its own (codex logs in as the worker's
/// codex would); its own image, codex arguments and environment if given.
#[allow(clippy::too_many_arguments)]
fn codex_cli(
    base_url: Option<String>,
    api_key: Option<String>,
    script: Option<String>,
    docker_image: Option<String>,
    extra_args: Option<Vec<String>>,
    env: Option<std::collections::BTreeMap<String, String>>,
    host: &Host,
    problems: &mut InputErrors,
) -> Option<CodexMeta> {
    for (present, key, why) in [
        (
            api_key.is_some(),
            "api_key",
            "codex logs in with ~/.codex/auth.json or CODEX_API_KEY",
        ),
        (
            script.is_some(),
            "script",
            "only used with `kind: scripted`",
        ),
    ] {
        if present {
            problems.push(InputError::new(
                format!("runner.meta.{key}"),
                format!("not used by `kind: codex-cli` ({why}); remove it"),
            ));
        }
    }
    let base_url = match non_empty(base_url) {
        None => Some(None),
        Some(url) => problems
            .take(url_value(&url, "runner.meta.base_url"))
            .map(Some),
    };
    let docker_image = problems.take(argument(docker_image, "runner.meta.docker_image"));
    if let Some(args) = &extra_args {
        empty_arguments(args, "runner.meta.extra_args", problems);
    }
    let env = match env {
        None => Some(None),
        Some(env) => worker_env::entries(Some(env), "runner.meta.env", host, problems).map(Some),
    };
    if let Some(Some(env)) = &env {
        for entry in env
            .iter()
            .filter(|e| crate::allow::variables::sets(&e.name))
        {
            problems.push(
                InputError::new(
                    format!("runner.meta.env.{}", entry.name),
                    "is set by agent-runner (its egress proxy, with network: allowlist)",
                )
                .with_hint("remove it; to reach more hosts, add them to runner.worker.allow"),
            );
        }
    }
    let login = problems.take(auth::resolve(&crate::agent::codex::CODEX, host));
    Some(CodexMeta {
        login: login?,
        model: None,
        base_url: base_url?,
        docker_image: docker_image?,
        extra_args,
        env: env?,
    })
}

fn max_loops(value: Option<u64>) -> Result<u32, InputError> {
    let loops = value.unwrap_or(u64::from(DEFAULT_MAX_LOOPS));
    match u32::try_from(loops) {
        Ok(n) if (1..=MAX_LOOPS).contains(&loops) => Ok(n),
        _ => Err(InputError::new(
            "runner.meta.max_loops",
            format!("must be between 1 and {MAX_LOOPS} (got {loops})"),
        )),
    }
}

/// `runner.meta.max_replans`: each replan is a paid `plan_task` and counts as a loop,
/// so it is bounded like the loops.
fn max_replans(value: Option<u64>) -> Result<u32, InputError> {
    let replans = value.unwrap_or(u64::from(DEFAULT_MAX_REPLANS));
    match u32::try_from(replans) {
        Ok(n) if replans <= MAX_LOOPS => Ok(n),
        _ => Err(InputError::new(
            "runner.meta.max_replans",
            format!("must be between 0 and {MAX_LOOPS} (got {replans})"),
        )),
    }
}

/// `runner.meta.timeout_sec`, else `$META_TIMEOUT_SEC`, else the default.
fn meta_timeout(value: Option<u64>, host: &Host) -> Result<Duration, InputError> {
    if value.is_some() {
        return seconds(value, 0, "runner.meta.timeout_sec");
    }
    let problem = |message: String| InputError::new("META_TIMEOUT_SEC", message).environment();
    match host.var("META_TIMEOUT_SEC") {
        Var::Unset => Ok(Duration::from_secs(DEFAULT_META_TIMEOUT_SEC)),
        Var::NotUtf8 => Err(problem("environment variable is not valid UTF-8".into())),
        Var::Set(v) => {
            let secs = v.trim().parse::<u64>().map_err(|_| {
                problem(format!(
                    "must be a whole number of seconds (got {:?})",
                    cut_chars(&v, 60)
                ))
            })?;
            seconds(Some(secs), 0, "META_TIMEOUT_SEC").map_err(InputError::environment)
        }
    }
}

fn scripted(
    base_url: Option<String>,
    api_key: Option<String>,
    script: Option<String>,
    host: &Host,
    problems: &mut InputErrors,
) -> Option<MetaBackend> {
    for (present, key) in [
        (base_url.is_some(), "base_url"),
        (api_key.is_some(), "api_key"),
    ] {
        if present {
            problems.push(InputError::new(
                format!("runner.meta.{key}"),
                "not used by `kind: scripted`; remove it",
            ));
        }
    }
    let Some(script) = non_empty(script) else {
        problems.push(
            InputError::new("runner.meta.script", "required with `kind: scripted`")
                .with_hint("a YAML list of Meta replies, consumed in order"),
        );
        return None;
    };
    let script = problems.take(script_file(&script, "runner.meta.script", host))?;
    Some(MetaBackend::Scripted { script })
}

/// `runner.worker.kind` (v1) or `type` (TaskConfig; required there): the agent.
pub(crate) fn worker_kind(
    raw: &RawWorker,
    shape: Shape,
    problems: &mut InputErrors,
) -> Option<&'static dyn Kind> {
    match (shape, &raw.kind, non_empty(raw.r#type.clone())) {
        (Shape::V1, Some(kind), _) => problems
            .take(choice(kind, "runner.worker.kind", &agent::names()))
            .and_then(agent::by_name),
        (Shape::TaskConfig, _, None) => problems.take(Err(required("runner.worker.type"))),
        (Shape::TaskConfig, _, Some(t)) => {
            let types: Vec<&str> = agent::KINDS.iter().map(|k| k.taskconfig_type()).collect();
            problems
                .take(choice(&t, "runner.worker.type", &types))
                .and_then(agent::by_taskconfig_type)
        }
        (Shape::V1, None, _) => Some(agent::default_kind()),
    }
}

/// `runner.worker` of `kind`. `login` (when it could be read) and `meta` (Meta's
/// codex, if it runs in the sandbox too) decide the default allow list.
pub(crate) fn worker(
    raw: RawWorker,
    kind: Option<&'static dyn Kind>,
    host: &Host,
    login: Option<&Login>,
    meta: Option<&MetaBackend>,
    problems: &mut InputErrors,
) -> Option<WorkerSettings> {
    let docker_image = problems
        .take(argument(raw.docker_image, "runner.worker.docker_image"))
        .map(|image| image.unwrap_or_else(|| DEFAULT_DOCKER_IMAGE.to_string()));
    let agent_from = match raw.agent_from.as_deref() {
        None => Some(AgentFrom::Auto),
        Some(from) => problems
            .take(choice(
                from,
                "runner.worker.agent_from",
                &["auto", "tools", "image"],
            ))
            .map(|from| match from {
                "tools" => AgentFrom::Tools,
                "image" => AgentFrom::Image,
                _ => AgentFrom::Auto,
            }),
    };
    let max_run_time = problems.take(seconds(
        raw.max_run_time_sec,
        DEFAULT_MAX_RUN_TIME_SEC,
        "runner.worker.max_run_time_sec",
    ));
    let idle_timeout = problems.take(seconds(
        raw.idle_timeout_sec,
        DEFAULT_IDLE_TIMEOUT_SEC,
        "runner.worker.idle_timeout_sec",
    ));
    let model = problems.take(argument(raw.model, "runner.worker.model"));
    let base_url = match non_empty(raw.base_url) {
        None => Some(None),
        Some(url) => problems
            .take(url_value(&url, "runner.worker.base_url"))
            .map(Some),
    };
    let network = match raw.network.as_deref() {
        None => Some(Network::Allowlist),
        Some(network) => problems
            .take(choice(
                network,
                "runner.worker.network",
                &["allowlist", "none", "bridge", "host"],
            ))
            .map(|n| match n {
                "none" => Network::None,
                "host" => Network::Host,
                "bridge" => Network::Bridge,
                _ => Network::Allowlist,
            }),
    };
    let allow = allow_entries(raw.allow, network, problems);
    let limits = limits(raw.limits.unwrap_or_default(), problems);
    let env = worker_env::entries(raw.env, "runner.worker.env", host, problems);
    if let (Some(Network::Allowlist), Some(env)) = (network, &env) {
        for entry in env
            .iter()
            .filter(|e| crate::allow::variables::sets(&e.name))
        {
            problems.push(
                InputError::new(
                    format!("runner.worker.env.{}", entry.name),
                    "is set by agent-runner with network: allowlist (its egress proxy)",
                )
                .with_hint("remove it; to reach more hosts, add them to runner.worker.allow"),
            );
        }
    }
    let extra_args = raw.extra_args.unwrap_or_default();
    empty_arguments(&extra_args, "runner.worker.extra_args", problems);
    let caches = super::setup::caches(raw.caches, problems);
    let mcp_servers = super::mcp::servers(raw.mcp_servers, host, problems);
    let mut settings = WorkerSettings {
        kind: kind?,
        docker_image: docker_image?,
        agent_from: agent_from?,
        max_run_time: max_run_time?,
        idle_timeout: idle_timeout?,
        model: model?,
        extra_args,
        base_url: base_url?,
        network: network?,
        allow: AllowList::default(),
        env: env?,
        limits: limits?,
        caches: caches?,
        keep_untracked: raw.keep_untracked.unwrap_or(false),
        transport: None,
        mcp_servers: mcp_servers?,
        runtime: None,
    };
    settings.allow = match allow? {
        Some(allow) => allow,
        None => super::default_allow::for_task(&settings, login.unwrap_or(&Login::None), meta),
    };
    settings.allow = super::mcp::joined(std::mem::take(&mut settings.allow), &settings.mcp_servers);
    if settings.network == Network::Allowlist {
        super::loopback::refuse(&settings, login.unwrap_or(&Login::None), problems);
    }
    Some(settings)
}

/// Arguments that must not be empty (the agent would take one as its prompt).
fn empty_arguments(args: &[String], field: &str, problems: &mut InputErrors) {
    for (n, arg) in args.iter().enumerate() {
        if arg.is_empty() {
            problems.push(InputError::new(
                format!("{field}[{n}]"),
                "must not be empty (the agent would take it as a prompt)",
            ));
        }
    }
}

/// `runner.worker.allow` as written (None: the defaults apply); only with
/// `network: allowlist`.
fn allow_entries(
    raw: Option<Vec<String>>,
    network: Option<Network>,
    problems: &mut InputErrors,
) -> Option<Option<AllowList>> {
    let Some(entries) = raw else {
        return Some(None);
    };
    if network.is_some_and(|n| n != Network::Allowlist) {
        problems.push(
            InputError::new(
                "runner.worker.allow",
                "is only used with network: allowlist",
            )
            .with_hint("remove it, or set runner.worker.network: allowlist"),
        );
        return None;
    }
    allow_rules("runner.worker.allow", &entries, problems).map(Some)
}

fn limits(raw: RawLimits, problems: &mut InputErrors) -> Option<WorkerLimits> {
    let memory_bytes = match raw.memory {
        None => Some(None),
        Some(value) => problems.take(memory(&value)).map(Some),
    };
    let cpus = match raw.cpus {
        Some(cpus) if !(MIN_CPUS..=MAX_CPUS).contains(&cpus) => {
            problems.take(Err(InputError::new(
                "runner.worker.limits.cpus",
                format!("must be a number of CPUs between {MIN_CPUS} and {MAX_CPUS} (got {cpus})"),
            )))
        }
        cpus => Some(cpus),
    };
    let pids = match raw.pids.unwrap_or(DEFAULT_PIDS_LIMIT) {
        pids if (1..=MAX_PIDS).contains(&pids) => Some(pids),
        pids => problems.take(Err(InputError::new(
            "runner.worker.limits.pids",
            format!("must be between 1 and {MAX_PIDS} (got {pids})"),
        ))),
    };
    Some(WorkerLimits {
        memory_bytes: memory_bytes?,
        cpus: cpus?,
        pids: pids?,
    })
}

/// Docker's memory format: bytes, or a number with `b`, `k`, `m` or `g` (`512m`,
/// `1.5g`), at least `MIN_MEMORY_BYTES`.
fn memory(value: &serde_norway::Value) -> Result<u64, InputError> {
    let field = "runner.worker.limits.memory";
    let text = match value {
        serde_norway::Value::String(s) => s.trim().to_ascii_lowercase(),
        other => other.as_u64().map(|n| n.to_string()).unwrap_or_default(),
    };
    let invalid = || {
        InputError::new(
            field,
            format!(
                "must be bytes, or a number with b, k, m or g such as 512m (got {:?})",
                cut_chars(&text, 40)
            ),
        )
    };
    let (number, unit) = match text.strip_suffix(['b', 'k', 'm', 'g']) {
        Some(number) => (number.trim_end(), text.as_bytes()[text.len() - 1]),
        None => (text.as_str(), b'b'),
    };
    let well_formed = number.split_once('.').map_or_else(
        || !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()),
        |(whole, fraction)| {
            !whole.is_empty()
                && !fraction.is_empty()
                && whole
                    .bytes()
                    .chain(fraction.bytes())
                    .all(|b| b.is_ascii_digit())
        },
    );
    let amount: f64 = match number.parse() {
        Ok(amount) if well_formed => amount,
        _ => return Err(invalid()),
    };
    let scale = match unit {
        b'k' => 1u64 << 10,
        b'm' => 1 << 20,
        b'g' => 1 << 30,
        _ => 1,
    };
    let bytes = amount * scale as f64;
    if bytes < MIN_MEMORY_BYTES as f64 {
        return Err(InputError::new(
            field,
            format!("must be at least 6m, docker's minimum (got {text:?})"),
        ));
    }
    if bytes > MAX_MEMORY_BYTES as f64 {
        return Err(InputError::new(
            field,
            format!("must be at most 1048576g (got {:?})", cut_chars(&text, 40)),
        ));
    }
    Ok(bytes as u64)
}

/// `runner.sandbox.transport`; None: chosen by the daemon.
pub(crate) fn transport(
    raw: Option<super::raw::RawSandbox>,
    problems: &mut InputErrors,
) -> Option<Option<super::TransportChoice>> {
    match raw.and_then(|r| r.transport) {
        None => Some(None),
        Some(t) => problems
            .take(choice(&t, "runner.sandbox.transport", &["copy", "bind"]))
            .map(|t| {
                Some(match t {
                    "copy" => super::TransportChoice::Copy,
                    _ => super::TransportChoice::Bind,
                })
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_in_docker_format() {
        let text = |s: &str| memory(&serde_norway::Value::String(s.into()));
        assert_eq!(text("512m"), Ok(512 << 20));
        assert_eq!(text("1G"), Ok(1 << 30));
        assert_eq!(text("1.5g"), Ok(3 << 29));
        assert_eq!(text("8192k"), Ok(8 << 20));
        assert_eq!(text("7000000b"), Ok(7_000_000));
        assert_eq!(text(" 7000000 "), Ok(7_000_000));
        assert_eq!(
            memory(&serde_norway::Value::from(7_000_000u64)),
            Ok(7_000_000)
        );
        for bad in [
            "", "m", "1.g", ".5g", "1e9", "-1g", "1t", "1 gb", "0x10m", "NaNg", "infg",
        ] {
            let e = text(bad).unwrap_err();
            assert_eq!(e.path, "runner.worker.limits.memory");
            assert!(e.message.contains("such as 512m"), "{bad}: {e}");
        }
        assert!(text("5m").unwrap_err().message.contains("at least 6m"));
        assert!(
            text("99999999999g")
                .unwrap_err()
                .message
                .contains("at most")
        );
    }
}
