//! `defaults.hosts[i]` of a workspace (SPEC §22, §25): a host by name, where its
//! sandboxes run under the key of its engine (`docker: URL-or-context`,
//! `kubernetes: {context, namespace, …}`), and how many attempts it runs at once.
//! Each engine's key is a field here, typed as its engine reads it (an
//! `EntryPart`), so that the file's reader names the field, line and column of what
//! is wrong in it (a value read whole first and checked after would lose them).
//! This field is a new engine's setting: with its own file and its line in
//! `ENGINES`, the one place outside its file it is named.

use serde::{Deserialize, Serialize};

use super::docker_engine::{DOCKER, DockerEntry};
use super::engine::{Engine, EntryPart};
use super::engines;
use super::host::{HostError, HostSpec};
use super::kubernetes::entry::{ClusterEntry, KUBERNETES};

/// A `hosts:` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    pub name: String,
    /// A Docker daemon by URL or docker context (`docker_engine.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    docker: Option<DockerEntry>,
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
        match self.engines()[..] {
            [(key, part)] => HostSpec::checked(at, &self.name, self.slots, || {
                part.target(&format!("{at}.{key}"))
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

    /// Each engine key the entry has, with its part, in the engines' order.
    fn engines(&self) -> Vec<(&'static str, &dyn EntryPart)> {
        let mut found: Vec<(&'static str, &dyn EntryPart)> = Vec::new();
        if let Some(docker) = &self.docker {
            found.push((DOCKER.key(), docker));
        }
        if let Some(cluster) = &self.kubernetes {
            found.push((KUBERNETES.key(), cluster));
        }
        found
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
