//! A workspace's defaults (`workspace.json` `defaults`, SPEC §11–§12, §16): the
//! user's `runner:` settings merged over every TaskConfig the orchestrator runs, the
//! Task Builder to use, whether attempts run in clones, the workspace's pinned test
//! (`task.test`) and whether an attempt needs a test at all (`require_test`). Set by
//! `workspace init --defaults FILE.yaml` or `workspace set --defaults FILE.yaml`,
//! checked there with the runner's own Task YAML parser, so a typo fails at once
//! rather than in every attempt.
//!
//! `require_test` is true unless a defaults file says otherwise, and every
//! workspace.json this version writes carries it; a workspace.json without the key
//! was written before it existed and keeps running as it did (false), its
//! unverified results shown as such.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::defaults_error::DefaultsError;
use super::field_error::FieldError;
use super::kind_settings::KindWithoutSettings;
use super::pinned_test::{self, PinnedTest};
use crate::PipelineError;
use agent_runner_sandbox::backend::host::{HostError, HostSpec, check_pool};
use agent_runner_sandbox::backend::host_entry::HostEntry;

/// The model the check of the defaults puts where the Task Builder will choose one.
const PLACEHOLDER: &str = "placeholder";

/// The defaults of a workspace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// `meta:` and `worker:` as in Task YAML v1; win over what the builder wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) runner: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) builder: Option<BuilderSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) isolation: Option<Isolation>,
    /// `task.test`: the test every task gets unless it pins its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) task: Option<TaskDefaults>,
    /// An attempt without a test from any source fails before it runs; absent in a
    /// workspace.json written before the key existed (read as false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) require_test: Option<bool>,
    /// Where verified attempts' branches go (SPEC §23).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) deliver: Option<super::delivery::DeliverSettings>,
    /// Who is told when an attempt ends (SPEC §23).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) notify: Vec<super::notify_settings::Notifier>,
    /// How many tries `task run` makes of a task unless `--tries` says (SPEC §23).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tries: Option<u32>,
    /// The hosts attempts are placed on (SPEC §22, §25): each a Docker daemon by URL
    /// or docker context, or a cluster's namespace; none: the local daemon.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) hosts: Vec<HostEntry>,
    /// Each worker kind's own model and endpoint, for tries of another kind than
    /// the workspace's (`--kinds`, SPEC §23).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(crate) kinds: std::collections::BTreeMap<String, super::tries::KindSettings>,
}

/// `defaults.task`: what every task of the workspace gets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskDefaults {
    /// `{command, timeout_sec}`: wins over the Task Builder's proposal.
    #[serde(
        default,
        deserialize_with = "pinned_test::strict",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) test: Option<PinnedTest>,
    /// `task.setup` of every task (SPEC §21), as in Task YAML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) setup: Option<Value>,
}

/// `defaults.builder`: which Task Builder turns a prompt into a TaskConfig.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BuilderSettings {
    #[serde(default)]
    pub(crate) kind: BuilderKind,
    /// `kind: meta`: the model (default: `runner.meta.model`); `kind: codex`: codex's
    /// model (default: `runner.worker.model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    /// `kind: scripted`: a YAML list of replies, like `runner.meta.script`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) script: Option<PathBuf>,
}

/// `defaults.builder.kind`: how a prompt becomes a TaskConfig.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BuilderKind {
    /// One Meta request `build_task_config` (SPEC §12).
    #[default]
    Meta,
    /// Replies from `builder.script`, offline.
    Scripted,
    /// `codex exec --output-schema` in the sandbox image.
    Codex,
}

impl BuilderKind {
    /// The name in the defaults file and in log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            BuilderKind::Meta => "meta",
            BuilderKind::Scripted => "scripted",
            BuilderKind::Codex => "codex",
        }
    }
}

/// Where attempts run: in root_dir, or each in its own clone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Isolation {
    /// In root_dir itself (unless `--jobs` > 1).
    #[default]
    None,
    /// Always in a clone, on branch `agent-runner/<task-id>`.
    Clone,
}

impl Defaults {
    /// The defaults of a workspace this version creates: a test is required.
    pub(crate) fn new_workspace() -> Defaults {
        Defaults {
            require_test: Some(true),
            ..Defaults::default()
        }
    }

    /// `tries`: how many tries `task run` makes of a task (SPEC §23).
    pub fn tries(&self) -> Option<u32> {
        self.tries
    }

    /// Reads a defaults file (YAML), resolves its relative paths against the file's
    /// directory and checks it. `require_test` is true unless the file says false.
    pub fn load(path: &Path) -> Result<Defaults, PipelineError> {
        let text = std::fs::read_to_string(path).map_err(PipelineError::io("read", path))?;
        let invalid =
            |e: String| PipelineError::Invalid(format!("defaults file {}: {e}", path.display()));
        agent_runner_core::yaml::check(&text, agent_runner_core::yaml::Rules::Document)
            .map_err(|r| invalid(r.to_string()))?;
        let mut defaults: Defaults =
            serde_norway::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let base = std::fs::canonicalize(&base).unwrap_or(base);
        defaults.resolve_paths(&base);
        defaults.require_test.get_or_insert(true);
        defaults.check().map_err(|e| {
            PipelineError::Invalid(format!("defaults file {}: {e}", path.display()))
        })?;
        Ok(defaults)
    }

    fn resolve_paths(&mut self, base: &Path) {
        if let Some(builder) = &mut self.builder
            && let Some(script) = &builder.script
        {
            builder.script = Some(base.join(script));
        }
        let script = self
            .runner
            .as_mut()
            .and_then(|r| r.get_mut("meta"))
            .and_then(|m| m.get_mut("script"));
        if let Some(script @ Value::String(_)) = script
            && let Some(s) = script.as_str()
        {
            *script = Value::String(base.join(s).display().to_string());
        }
    }

    /// Checks `runner` with the runner's own parser, the builder settings and the
    /// pinned test.
    pub(crate) fn check(&self) -> Result<(), DefaultsError> {
        if let Some(runner) = &self.runner {
            check_runner(runner)?;
        }
        if let Some(test) = self.pinned_test() {
            test.check("task.test")?;
        }
        if let Some(deliver) = &self.deliver {
            deliver.check()?;
        }
        for (index, notifier) in self.notify.iter().enumerate() {
            notifier.check(index)?;
        }
        self.hosts()?;
        if let Some(setup) = self.setup() {
            check_setup(setup)?;
        }
        if let Some(tries) = self.tries {
            super::tries::check_count(tries, "tries")?;
        }
        for (kind, settings) in &self.kinds {
            super::tries::check_kinds(std::slice::from_ref(kind), "kinds")?;
            settings.check(&format!("kinds.{kind}"))?;
        }
        if let Some(builder) = &self.builder {
            match (builder.kind, &builder.script) {
                (BuilderKind::Scripted, None) => {
                    return Err(FieldError::new(
                        "builder.script",
                        "required with `kind: scripted`",
                    )
                    .into());
                }
                (BuilderKind::Scripted, Some(script)) if !script.is_file() => {
                    return Err(FieldError::new(
                        "builder.script",
                        format!("file {} not found", script.display()),
                    )
                    .into());
                }
                (BuilderKind::Meta | BuilderKind::Codex, Some(_)) => {
                    return Err(FieldError::new(
                        "builder.script",
                        "only used with `kind: scripted`",
                    )
                    .into());
                }
                _ => {}
            }
            if builder.kind == BuilderKind::Scripted && builder.model.is_some() {
                return Err(
                    FieldError::new("builder.model", "not used by `kind: scripted`").into(),
                );
            }
        }
        Ok(())
    }

    /// `defaults.hosts`, checked: field paths in the error.
    pub fn hosts(&self) -> Result<Vec<HostSpec>, HostError> {
        let hosts = self
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| h.spec(&format!("hosts[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        check_pool(&hosts, |i| format!("hosts[{i}]"))?;
        Ok(hosts)
    }

    /// `runner.worker.docker_image`, if the defaults name one.
    pub fn worker_image(&self) -> Option<String> {
        let image = self.runner.as_ref()?.get("worker")?.get("docker_image")?;
        image.as_str().map(str::to_string)
    }

    /// `defaults.task.setup`, if any.
    pub(crate) fn setup(&self) -> Option<&Value> {
        self.task.as_ref()?.setup.as_ref()
    }

    /// The workspace's pinned test, if any.
    pub fn pinned_test(&self) -> Option<&PinnedTest> {
        self.task.as_ref()?.test.as_ref()
    }

    /// Whether an attempt without a test fails before it runs (false only when the
    /// defaults say so, or predate the key).
    pub fn require_test(&self) -> bool {
        self.require_test.unwrap_or(false)
    }

    /// The builder settings (default: `kind: meta`).
    pub(crate) fn builder(&self) -> BuilderSettings {
        self.builder.clone().unwrap_or_default()
    }

    /// The prices of `runner.pricing` (checked when the defaults were set; none
    /// when absent or unreadable).
    pub(crate) fn pricing(&self) -> agent_runner_core::usage::Pricing {
        let Some(pricing) = self.runner.as_ref().and_then(|r| r.get("pricing")) else {
            return Default::default();
        };
        let config = serde_json::json!({
            "task": {"id": "pricing", "title": "pricing", "instructions": "-",
                     "project": {"root_dir": std::env::temp_dir()}},
            "runner": {"meta": {"model": PLACEHOLDER, "api_key": PLACEHOLDER},
                       "worker": {"type": "docker_codex_cli"}, "pricing": pricing},
        });
        let Ok(yaml) = serde_norway::to_string(&config) else {
            return Default::default();
        };
        let var = |name: &str| match name {
            "META_TIMEOUT_SEC" | "OPENAI_BASE_URL" | "ANTHROPIC_BASE_URL" => None,
            _ => Some(std::ffi::OsString::from(PLACEHOLDER)),
        };
        agent_runner_settings::task::parse(
            &yaml,
            &agent_runner_settings::task::Host {
                var: &var,
                cwd: Ok(std::env::temp_dir()),
            },
        )
        .map(|task| task.bounds.pricing)
        .unwrap_or_default()
    }

    /// The workspace's worker kind: `runner.worker.type`, else codex.
    fn worker_kind(&self) -> &'static str {
        let configured = self.runner_worker("type");
        agent_runner_settings::agent::KINDS
            .iter()
            .find(|k| configured == Some(k.taskconfig_type()))
            .or_else(|| agent_runner_settings::agent::KINDS.first())
            .map_or("codex-cli", |k| k.name())
    }

    /// Refuses `kinds` (of `--kinds`) when a try of another kind than the
    /// workspace's would get the workspace kind's model or endpoint, since the
    /// defaults set one and say nothing of that kind (`kinds.<kind>`, SPEC §23);
    /// the error names the fix. Checked before anything is queued.
    pub fn check_kind_settings(&self, kinds: &[String]) -> Result<(), KindWithoutSettings> {
        let own = self.worker_kind();
        let set: Vec<(&'static str, String)> = ["model", "base_url"]
            .into_iter()
            .filter_map(|key| self.runner_worker(key).map(|v| (key, v.to_string())))
            .collect();
        if set.is_empty() {
            return Ok(());
        }
        match kinds
            .iter()
            .find(|kind| *kind != own && !self.kinds.contains_key(*kind))
        {
            Some(kind) => Err(KindWithoutSettings {
                kind: kind.clone(),
                own: own.to_string(),
                settings: set,
            }),
            None => Ok(()),
        }
    }

    /// `runner.worker.<key>` as a string, if set.
    fn runner_worker(&self, key: &str) -> Option<&str> {
        self.runner.as_ref()?.get("worker")?.get(key)?.as_str()
    }

    /// `runner.meta.<key>` as a string, if set.
    pub(crate) fn runner_meta(&self, key: &str) -> Option<&str> {
        self.runner.as_ref()?.get("meta")?.get(key)?.as_str()
    }
}

/// The keys `defaults.runner` may hold: the Task YAML's `runner:` keys.
const RUNNER_KEYS: &[&str] = &["meta", "worker", "pricing", "budget", "max_stalled_loops"];

/// Why `runner.sandbox` is no default (SPEC §22): the orchestrator places each
/// attempt on a host of its pool, which counts that host's slots, watches its
/// health and re-queues a lost host's job; a host (or transport) from the defaults
/// would send every attempt around all of that. One way to name hosts: `hosts:`.
const SANDBOX_REFUSED: &str = "not a default: the orchestrator places each attempt on a Docker host of `hosts:` (or `orchestrate --host NAME=URL[:SLOTS]`), counting its slots and watching its health, and a host here would go around that; name the hosts in `hosts:` (runner.sandbox.host is for `agent-runner run` of one task)";

/// `runner` must hold only the Task YAML's runner keys, and with placeholders for
/// what the orchestrator fills in, make a TaskConfig the runner accepts.
/// `defaults.task.setup` read by the runner's own parser, in a task around it.
fn check_setup(setup: &Value) -> Result<(), DefaultsError> {
    let config = serde_json::json!({
        "task": {"id": "defaults-check", "title": "check", "instructions": "check",
                 "project": {"root_dir": std::env::temp_dir()}, "setup": setup},
        "runner": {"meta": {"model": PLACEHOLDER}, "worker": {"type": "docker_codex_cli"}},
    });
    let yaml = serde_norway::to_string(&config)?;
    let var = |_: &str| Some(std::ffi::OsString::from("value-of-a-variable"));
    agent_runner_settings::task::parse(
        &yaml,
        &agent_runner_settings::task::Host {
            var: &var,
            cwd: Ok(std::env::temp_dir()),
        },
    )
    .map(|_| ())
    .map_err(DefaultsError::Task)
}

fn check_runner(runner: &Value) -> Result<(), DefaultsError> {
    let Value::Object(map) = runner else {
        return Err(
            FieldError::new("runner", "expected a mapping with `meta` and/or `worker`").into(),
        );
    };
    for key in map.keys() {
        if key == "sandbox" {
            return Err(FieldError::new("runner.sandbox", SANDBOX_REFUSED).into());
        }
        if !RUNNER_KEYS.contains(&key.as_str()) {
            return Err(FieldError::new(
                format!("runner.{key}"),
                format!("unknown key (valid: {})", RUNNER_KEYS.join(", ")),
            )
            .into());
        }
    }
    let mut meta = map
        .get("meta")
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    let mut worker = map
        .get("worker")
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    if let Value::Object(m) = &mut meta {
        m.entry("model").or_insert_with(|| PLACEHOLDER.into());
    }
    if let Value::Object(w) = &mut worker {
        if w.contains_key("kind") {
            return Err(FieldError::new(
                "runner.worker.kind",
                "not used here; the orchestrator writes TaskConfigs, whose worker is `type: docker_codex_cli` or `type: docker_claude_code_cli`",
            )
            .into());
        }
        w.entry("type").or_insert_with(|| "docker_codex_cli".into());
    }
    let mut runner = map.clone();
    // A cost limit needs prices for the models that run, which the Task Builder may
    // still choose: only the models named here must have one now (the runner checks
    // the rest when the attempt starts).
    if map
        .get("budget")
        .and_then(|b| b.get("max_cost_usd"))
        .is_some()
    {
        if let Value::Object(w) = &mut worker {
            w.entry("model").or_insert_with(|| PLACEHOLDER.into());
        }
        let pricing = runner
            .entry("pricing")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Value::Object(p) = pricing {
            p.entry(PLACEHOLDER)
                .or_insert_with(|| serde_json::json!({"input": 0, "output": 0}));
        }
    }
    runner.insert("meta".into(), meta);
    runner.insert("worker".into(), worker);
    let config = serde_json::json!({
        "task": {"id": "defaults-check", "title": "check", "instructions": "check",
                 "project": {"root_dir": std::env::temp_dir()}},
        "runner": runner,
    });
    let yaml = serde_norway::to_string(&config)?;
    // Environment references are checked when a task runs, where they are needed.
    // (Their stand-in is no other placeholder: a secret's value is looked for in
    // what goes on a command line, the worker's model among it.)
    let var = |name: &str| match name {
        "META_TIMEOUT_SEC" | "OPENAI_BASE_URL" | "ANTHROPIC_BASE_URL" => None,
        _ => Some(std::ffi::OsString::from("value-of-a-variable")),
    };
    agent_runner_settings::task::parse(
        &yaml,
        &agent_runner_settings::task::Host {
            var: &var,
            cwd: Ok(std::env::temp_dir()),
        },
    )
    .map(|_| ())
    .map_err(DefaultsError::Task)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Defaults, String> {
        let d: Defaults = serde_norway::from_str(yaml).map_err(|e| e.to_string())?;
        d.check().map_err(|e| e.to_string())?;
        Ok(d)
    }

    #[test]
    fn valid_defaults_pass_and_typos_fail_with_their_path() {
        let d = parse("runner:\n  meta:\n    model: m\n  worker:\n    docker_image: img\n    network: none\nisolation: clone\n").unwrap();
        assert_eq!(d.isolation, Some(Isolation::Clone));
        assert_eq!(d.runner_meta("model"), Some("m"));
        assert_eq!(d.builder().kind, BuilderKind::Meta);
        let e = parse("runner:\n  meta:\n    max_loop: 3\n").unwrap_err();
        assert!(
            e.contains("runner.meta.max_loop") && e.contains("max_loops"),
            "{e}"
        );
        let e = parse("runner:\n  worker:\n    network: moon\n").unwrap_err();
        assert!(e.contains("runner.worker.network"), "{e}");
        assert!(
            parse("isolation: always\n")
                .unwrap_err()
                .contains("unknown variant")
        );
        assert_eq!(
            parse("builder:\n  kind: codex\n  model: o3\n")
                .unwrap()
                .builder()
                .kind,
            BuilderKind::Codex
        );
        assert!(
            parse("builder:\n  kind: codex\n  script: x.yaml\n")
                .unwrap_err()
                .contains("only used with `kind: scripted`")
        );
        assert!(
            parse("builder:\n  kind: claude\n")
                .unwrap_err()
                .contains("unknown variant")
        );
        assert!(
            parse("builder:\n  kind: scripted\n")
                .unwrap_err()
                .contains("builder.script")
        );
        assert!(
            parse("runner:\n  planner: {}\n")
                .unwrap_err()
                .contains("runner.planner")
        );
        assert!(parse("runnr: {}\n").unwrap_err().contains("unknown field"));
    }

    #[test]
    fn the_pinned_test_and_require_test() {
        let d =
            parse("task:\n  test: {command: cargo test, timeout_sec: 300}\nrequire_test: false\n")
                .unwrap();
        assert_eq!(
            d.pinned_test(),
            Some(&PinnedTest {
                command: "cargo test".into(),
                timeout_sec: Some(300)
            })
        );
        assert!(!d.require_test());
        for (yaml, error) in [
            (
                "task:\n  test: {command: x, timeout: 3}\n",
                "unknown field `timeout`",
            ),
            ("task:\n  tests: {command: x}\n", "unknown field `tests`"),
            (
                "task:\n  test: {command: ' '}\n",
                "task.test.command: empty",
            ),
            (
                "task:\n  test: {command: x, timeout_sec: 0}\n",
                "task.test.timeout_sec",
            ),
            ("require_test: maybe\n", "require_test"),
        ] {
            let e = parse(yaml).unwrap_err();
            assert!(e.contains(error), "{yaml}: {e}");
        }
        // workspace.json without the key predates it: not required.
        assert!(!parse("{}\n").unwrap().require_test());
        assert!(Defaults::new_workspace().require_test());
    }

    #[test]
    fn a_host_is_a_docker_daemon_or_a_clusters_namespace() {
        let d = parse(
            "hosts:\n  - {name: box, docker: 'tcp://127.0.0.5:2375', slots: 2}\n  - name: k8s\n    slots: 4\n    kubernetes: {context: prod, namespace: agents, kubeconfig: /etc/kube.conf, schedule_timeout_sec: 60, egress_unenforced: accept, session_storage_class: fast-ssd}\n",
        )
        .unwrap();
        let hosts = d.hosts().unwrap();
        assert_eq!(hosts[0].target.to_string(), "tcp://127.0.0.5:2375");
        let cluster = hosts[1].target.cluster().unwrap();
        assert_eq!(hosts[1].target.to_string(), "k8s://prod/agents");
        assert_eq!(hosts[1].slots, 4);
        assert_eq!(
            cluster.kubeconfig.as_deref(),
            Some(std::path::Path::new("/etc/kube.conf"))
        );
        assert_eq!(cluster.schedule_timeout_sec, Some(60));
        assert!(cluster.egress_unenforced);
        assert_eq!(cluster.session_storage_class.as_deref(), Some("fast-ssd"));
        assert_eq!(hosts[0].target.cluster(), None);
        for (yaml, error) in [
            ("hosts:\n  - {name: a}\n", "hosts[0]: neither docker"),
            (
                "hosts:\n  - {name: a, docker: x, kubernetes: {context: c, namespace: n}}\n",
                "hosts[0]: both docker and kubernetes",
            ),
            (
                "hosts:\n  - {name: a, kubernetes: {context: c, namespace: N}}\n",
                "hosts[0].kubernetes: namespace \"N\"",
            ),
            (
                "hosts:\n  - {name: a, kubernetes: {context: c, namespace: n, egress_unenforced: yes}}\n",
                "hosts[0].kubernetes.egress_unenforced: \"yes\": the only value is `accept`",
            ),
            (
                "hosts:\n  - {name: a, kubernetes: {context: c, namespace: n, schedule_timeout_sec: 0}}\n",
                "hosts[0].kubernetes.schedule_timeout_sec: 0",
            ),
            (
                "hosts:\n  - {name: a, kubernetes: {context: c, namespace: n, session_storage_class: Fast_SSD}}\n",
                "hosts[0].kubernetes.session_storage_class: \"Fast_SSD\": a StorageClass's name",
            ),
            (
                "hosts:\n  - {name: a, kubernetes: {context: c, namespace: n, zone: x}}\n",
                "unknown field `zone`",
            ),
        ] {
            let e = parse(yaml)
                .and_then(|d| d.hosts().map_err(|e| e.to_string()))
                .unwrap_err();
            assert!(e.contains(error), "{yaml}: {e}");
        }
    }

    /// Each engine's part of a `hosts:` entry is read by the file's reader as its
    /// engine's type: what is wrong in it is named by its field, line and column,
    /// a key given twice is refused, and YAML's plain scalars read as text.
    #[test]
    fn a_hosts_entrys_engine_part_is_read_where_it_stands() {
        for (yaml, error) in [
            (
                "hosts:\n  - name: a\n    kubernetes:\n      context: c\n",
                "hosts[0].kubernetes: missing field `namespace` at line 4 column 7",
            ),
            (
                "hosts:\n  - name: a\n    kubernetes:\n      context: c\n      namespace: n\n      zone: x\n",
                "hosts[0].kubernetes: unknown field `zone`, expected one of",
            ),
            (
                "hosts:\n  - name: a\n    kubernetes: {context: c, namespace: n, namespace: m}\n",
                "duplicate field `namespace`",
            ),
            (
                "hosts:\n  - name: a\n    kubernetes: {context: c, namespace: n, schedule_timeout_sec: .nan}\n",
                "hosts[0].kubernetes.schedule_timeout_sec: invalid type: floating point `NaN`",
            ),
            (
                "hosts:\n  - name: a\n    kubernetes: [c, n]\n",
                "hosts[0].kubernetes: invalid type: sequence",
            ),
            (
                "hosts:\n  - {name: a, docker: ctx, kubernetes: .nan}\n",
                "hosts[0].kubernetes: invalid type: floating point `NaN`",
            ),
            // The entry's own fields are named where they stand, whatever its engine.
            (
                "hosts:\n  - {name: -k, kubernetes: {context: c, namespace: n}}\n",
                "hosts[0].name: \"-k\": 1 to 64 of",
            ),
            (
                "hosts:\n  - {name: k, slots: 0, kubernetes: {context: c, namespace: n}}\n",
                "hosts[0].slots: 0: must be between 1 and 64",
            ),
            (
                "hosts:\n  - {name: d, slots: 0, docker: ctx}\n",
                "hosts[0].slots: 0: must be between 1 and 64",
            ),
            (
                "hosts:\n  - {name: d, docker: 'a b'}\n",
                "hosts[0].docker: ",
            ),
        ] {
            let e = parse(yaml)
                .and_then(|d| d.hosts().map_err(|e| e.to_string()))
                .unwrap_err();
            assert!(e.contains(error), "{yaml}: {e}");
        }
        let d = parse("hosts:\n  - {name: a, docker: 123}\n").unwrap();
        assert_eq!(
            d.hosts().unwrap()[0].target.to_string(),
            "docker context 123"
        );
        let d = parse(
            "hosts:\n  - {name: k, kubernetes: {session_storage_class: s, namespace: n, context: c}}\n",
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&d.hosts[0]).unwrap(),
            r#"{"name":"k","kubernetes":{"context":"c","namespace":"n","session_storage_class":"s"},"slots":1}"#
        );
    }

    #[test]
    fn a_defaults_file_requires_a_test_unless_it_says_not() {
        let dir =
            std::env::temp_dir().join(format!("ar-defaults-{}", super::super::id::random_hex(8)));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("on.yaml"), "isolation: clone\n").unwrap();
        std::fs::write(dir.join("off.yaml"), "require_test: false\n").unwrap();
        assert_eq!(
            Defaults::load(&dir.join("on.yaml")).unwrap().require_test,
            Some(true)
        );
        assert_eq!(
            Defaults::load(&dir.join("off.yaml")).unwrap().require_test,
            Some(false)
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn prices_budgets_and_the_stall_limit_are_defaults_too() {
        let d = parse("runner:\n  meta: {model: m}\n  pricing:\n    m: {input: 1.25, output: 10}\n  budget: {max_tokens: 1000, max_cost_usd: 0.5, max_duration_sec: 60}\n  max_stalled_loops: 2\n").unwrap();
        let pricing = d.pricing();
        assert_eq!(pricing.price("m").map(|p| p.cached_input), Some(1.25));
        // The worker's model is the Task Builder's to choose: not checked here.
        let e = parse("runner:\n  meta: {model: m}\n  budget: {max_cost_usd: 0.5}\n").unwrap_err();
        assert!(e.contains("\"m\" (runner.meta.model) has no price"), "{e}");
        let e = parse("runner:\n  pricing: {m: {input: -1, output: 1}}\n").unwrap_err();
        assert!(e.contains("runner.pricing.m.input"), "{e}");
        let e = parse("runner:\n  budgets: {}\n").unwrap_err();
        assert!(e.contains("runner.budgets: unknown key"), "{e}");
        // A host of the defaults would go around the placement (SPEC §22).
        let e = parse("runner:\n  sandbox: {host: \"tcp://127.0.0.9:1\"}\n").unwrap_err();
        assert!(
            e.starts_with("runner.sandbox: not a default") && e.contains("`hosts:`"),
            "{e}"
        );
        assert!(Defaults::default().pricing().models.is_empty());
    }

    #[test]
    fn relative_paths_resolve_against_the_file() {
        let dir =
            std::env::temp_dir().join(format!("ar-defaults-{}", super::super::id::random_hex(8)));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("b.yaml"), "[]").unwrap();
        std::fs::write(dir.join("m.yaml"), "[]").unwrap();
        std::fs::write(
            dir.join("d.yaml"),
            "builder: {kind: scripted, script: b.yaml}\nrunner:\n  meta: {kind: scripted, script: m.yaml}\n",
        )
        .unwrap();
        let d = Defaults::load(&dir.join("d.yaml")).unwrap();
        let canon = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(d.builder().script, Some(canon.join("b.yaml")));
        assert_eq!(
            d.runner_meta("script"),
            Some(canon.join("m.yaml").to_str().unwrap())
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// `--kinds` with a kind whose model and endpoint the defaults do not give,
    /// while they give the workspace kind's: refused, naming the fix; `kinds.<kind>`
    /// entries are checked with their field paths.
    #[test]
    fn kinds_without_their_own_settings_are_refused_when_the_defaults_set_a_model() {
        let defaults = |yaml: &str| parse(yaml).unwrap();
        let kinds = vec!["codex-cli".to_string(), "claude-code-cli".to_string()];
        let plain = defaults("runner: {worker: {network: none}}\n");
        assert_eq!(plain.check_kind_settings(&kinds), Ok(()));
        let codex = defaults("runner: {worker: {model: gpt-5-codex, base_url: 'http://gw/v1'}}\n");
        let e = codex.check_kind_settings(&kinds).unwrap_err().to_string();
        assert!(
            e.contains("the claude-code-cli tries would get runner.worker.model (gpt-5-codex) and runner.worker.base_url (http://gw/v1), which the workspace defaults set for codex-cli")
                && e.contains("kinds: {claude-code-cli: {model: …, base_url: …}}"),
            "{e}"
        );
        assert_eq!(codex.check_kind_settings(&kinds[..1]), Ok(()));
        let both = defaults(
            "runner: {worker: {model: gpt-5-codex}}\nkinds: {claude-code-cli: {model: claude-x}}\n",
        );
        assert_eq!(both.check_kind_settings(&kinds), Ok(()));
        let claude_ws =
            defaults("runner: {worker: {type: docker_claude_code_cli, model: claude-x}}\n");
        assert!(
            claude_ws
                .check_kind_settings(&kinds)
                .unwrap_err()
                .to_string()
                .contains("the codex-cli tries")
        );
        let e = parse("kinds: {codex-cli: {base_url: gw}}\n").unwrap_err();
        assert!(e.starts_with("kinds.codex-cli.base_url"), "{e}");
        let e = parse("kinds: {cursor: {}}\n").unwrap_err();
        assert!(e.contains("\"cursor\" is no worker kind"), "{e}");
    }
}
