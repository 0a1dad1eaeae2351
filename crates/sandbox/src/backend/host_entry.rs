//! `defaults.hosts[i]` of a workspace (SPEC §22, §25): a host by name, where its
//! sandboxes run under the key of its engine (`docker: URL-or-context`,
//! `kubernetes: {context, namespace, …}`), and how many attempts it runs at once.
//! Each engine's key is a field here, typed as its engine reads it, so that the
//! file's reader names the field, line and column of what is wrong in it (a value
//! read whole first and checked after would lose them); its engine then makes the
//! host of it (`Engine::host`). This field is a new engine's setting: with its own
//! file and its line in `ENGINES`, the one place outside its file it is named.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::engines;
use super::host::{HostError, HostSpec};
use super::kubernetes::entry::ClusterEntry;

/// A `hosts:` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    pub name: String,
    /// A Docker daemon by URL or docker context (`docker_engine.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    docker: Option<String>,
    /// A cluster's namespace (`kubernetes/entry.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kubernetes: Option<ClusterEntry>,
    #[serde(default = "one")]
    pub slots: usize,
}

fn one() -> usize {
    1
}

impl HostEntry {
    /// The entry as a host of the pool; errors name the field under `at`.
    pub fn spec(&self, at: &str) -> Result<HostSpec, HostError> {
        match self.engines(at)?[..] {
            [(key, ref value)] => engines::host(key, at, &self.name, value, self.slots)
                .unwrap_or_else(|| {
                    Err(HostError::UnknownEngine {
                        at: at.to_string(),
                        key,
                    })
                }),
            [] => Err(HostError::NoEngine {
                at: at.to_string(),
                engines: either(&engines::entry_forms()),
            }),
            [(first, _), (second, _), ..] => Err(HostError::TwoEngines {
                at: at.to_string(),
                first,
                second,
            }),
        }
    }

    /// Each engine key the entry has, with its value, in the engines' order.
    fn engines(&self, at: &str) -> Result<Vec<(&'static str, Value)>, HostError> {
        let mut found = Vec::new();
        if let Some(docker) = &self.docker {
            found.push(("docker", Value::String(docker.clone())));
        }
        if let Some(cluster) = &self.kubernetes {
            let value = serde_json::to_value(cluster)
                .map_err(|e| HostError::field(format!("{at}.kubernetes"), e))?;
            found.push(("kubernetes", value));
        }
        Ok(found)
    }
}

/// `a nor b`, `a, b nor c`.
fn either(forms: &[String]) -> String {
    match forms {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} nor {last}", init.join(", ")),
    }
}
