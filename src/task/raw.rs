//! The Task YAML exactly as written, in its two shapes. No defaults, no checks beyond
//! types and unknown keys: that is `Task`'s job.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_yaml::Value;

/// Shape v1 (`version: 1`, SPEC §3.1).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTaskV1 {
    pub version: Option<Value>,
    pub task: Option<RawTaskSection>,
    pub runner: Option<RawRunner>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTaskSection {
    pub id: Option<String>,
    pub title: Option<String>,
    pub repo: Option<String>,
    pub prd: Option<RawPrd>,
    pub test: Option<RawTest>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrd {
    pub path: Option<String>,
    pub text: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTest {
    pub command: Option<String>,
    pub cwd: Option<String>,
    pub timeout_sec: Option<u64>,
}

/// `runner:` is shared by both shapes; `worker.type` belongs to TaskConfig and
/// `worker.kind` to v1, which `Task` checks.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRunner {
    pub meta: Option<RawMeta>,
    pub worker: Option<RawWorker>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMeta {
    pub kind: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub temperature: Option<f64>,
    pub system_prompt: Option<String>,
    pub max_loops: Option<u32>,
    pub timeout_sec: Option<u64>,
    pub script: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorker {
    pub kind: Option<String>,
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub docker_image: Option<String>,
    pub max_run_time_sec: Option<u64>,
    pub model: Option<String>,
    pub extra_args: Option<Vec<String>>,
    pub idle_timeout_sec: Option<u64>,
    pub network: Option<String>,
    pub env: Option<BTreeMap<String, String>>,
}

/// Shape "TaskConfig" (the IDE pipeline, SPEC §3.2): no `version` key.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTaskConfig {
    pub task: Option<RawTaskConfigSection>,
    pub runner: Option<RawRunner>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTaskConfigSection {
    pub id: Option<String>,
    pub title: Option<String>,
    pub instructions: Option<String>,
    pub project: Option<RawProject>,
    pub test: Option<RawTest>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProject {
    pub root_dir: Option<String>,
}
