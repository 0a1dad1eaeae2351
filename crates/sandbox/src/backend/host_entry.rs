//! `defaults.hosts[i]` of a workspace (SPEC §22, §25): a host by name, where its
//! sandboxes run under the key of its engine (`docker: URL-or-context`,
//! `kubernetes: {context, namespace, …}`: each engine reads its own,
//! `Engine::entry`), and how many attempts it runs at once. Read and written as the
//! workspace's defaults are (`{name, <engine>: …, slots}`).

use std::sync::OnceLock;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::engines;
use super::host::HostSpec;

/// A `hosts:` entry, its engine's part checked as it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEntry {
    pub name: String,
    /// Each engine key the entry has, with its value (one, once checked by `spec`).
    engines: Vec<(&'static str, Value)>,
    pub slots: usize,
}

impl HostEntry {
    /// The entry as a host of the pool; errors name the field under `at`.
    pub fn spec(&self, at: &str) -> Result<HostSpec, String> {
        match &self.engines[..] {
            [(key, value)] => engines::host(key, at, &self.name, value, self.slots)
                .unwrap_or_else(|| Err(format!("{at}: no engine {key}"))),
            [] => Err(format!("{at}: neither {}", either(&engines::entry_forms()))),
            [(first, _), (second, _), ..] => Err(format!(
                "{at}: both {first} and {second}: a host is one or the other"
            )),
        }
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

/// The fields of an entry: `name`, each engine's key, `slots`.
fn fields() -> &'static [&'static str] {
    static FIELDS: OnceLock<Vec<&'static str>> = OnceLock::new();
    FIELDS.get_or_init(|| {
        let mut fields = vec!["name"];
        fields.extend(engines::entry_keys());
        fields.push("slots");
        fields
    })
}

impl<'de> Deserialize<'de> for HostEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<HostEntry, D::Error> {
        deserializer.deserialize_map(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = HostEntry;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("struct HostEntry")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<HostEntry, A::Error> {
        let mut name: Option<String> = None;
        let mut slots: Option<usize> = None;
        let mut found: Vec<(&'static str, Value)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "name" if name.is_some() => return Err(de::Error::duplicate_field("name")),
                "name" => name = Some(map.next_value()?),
                "slots" if slots.is_some() => return Err(de::Error::duplicate_field("slots")),
                "slots" => slots = Some(map.next_value()?),
                other => {
                    let Some(field) = engines::entry_keys().find(|k| *k == other) else {
                        return Err(de::Error::unknown_field(other, fields()));
                    };
                    if found.iter().any(|(k, _)| *k == field) {
                        return Err(de::Error::duplicate_field(field));
                    }
                    let value: Value = map.next_value()?;
                    if value.is_null() {
                        continue;
                    }
                    let checked = engines::entry(field, value)
                        .unwrap_or_else(|| Err(format!("no engine {field}")))
                        .map_err(de::Error::custom)?;
                    found.push((field, checked));
                }
            }
        }
        let name = name.ok_or_else(|| de::Error::missing_field("name"))?;
        // In the engines' order, whatever the file's.
        found.sort_by_key(|(key, _)| engines::entry_keys().position(|k| k == *key));
        Ok(HostEntry {
            name,
            engines: found,
            slots: slots.unwrap_or(1),
        })
    }
}

impl Serialize for HostEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.engines.len() + 2))?;
        map.serialize_entry("name", &self.name)?;
        for (key, value) in &self.engines {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry("slots", &self.slots)?;
        map.end()
    }
}
