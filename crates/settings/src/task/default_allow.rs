//! The allow list a task gets when it names none (SPEC §17): what its agents need to
//! reach their models, and nothing else. Each kind says what it needs for its login
//! and settings (`agent::Kind::needs`, checked against the real CLIs through a
//! logging proxy: testdata/codex/README.md, testdata/claude/README.md); the worker's
//! agent always, and Meta's codex when Meta runs in the sandbox too
//! (`runner.meta.kind: codex-cli`, SPEC §18).

use super::{Login, MetaBackend, WorkerSettings};
use crate::agent::{HostsSpec, Kind, Need};
use crate::allow::rules::{AllowList, Origin, Rule};

/// The default list for `worker` (whose own `allow` is not used) logged in with
/// `login`, and Meta's codex of `meta`.
pub(crate) fn for_task(
    worker: &WorkerSettings,
    login: &Login,
    meta: Option<&MetaBackend>,
) -> AllowList {
    let needed = needed(worker, login, meta);
    let mut why: Vec<String> = Vec::new();
    for (_, reason) in &needed {
        if !why.contains(reason) {
            why.push(reason.clone());
        }
    }
    AllowList {
        rules: needed
            .iter()
            .filter_map(|(entry, _)| Rule::parse(entry).ok())
            .collect(),
        origin: Origin::Default(why.join(", ")),
    }
}

/// Each allow entry the task's agents need, once, with why (the first reason given).
pub(crate) fn needed(
    worker: &WorkerSettings,
    login: &Login,
    meta: Option<&MetaBackend>,
) -> Vec<(String, String)> {
    let mut needs = needs_of(worker.kind, worker, login);
    if let Some(MetaBackend::CodexCli(codex)) = meta {
        let settings = codex.worker_settings(worker, std::time::Duration::from_secs(1));
        needs.extend(
            needs_of(settings.kind, &settings, &codex.login)
                .into_iter()
                .map(|need| Need {
                    why: format!("Meta's codex: {}", need.why),
                    ..need
                }),
        );
    }
    let mut entries: Vec<(String, String)> = Vec::new();
    for need in needs {
        let Some(entry) = entry_of(&need.destination) else {
            continue;
        };
        if !entries.iter().any(|(e, _)| *e == entry) {
            entries.push((entry, need.why));
        }
    }
    entries
}

pub(crate) fn needs_of(kind: &dyn Kind, settings: &WorkerSettings, login: &Login) -> Vec<Need> {
    let env: Vec<(&str, Option<&str>)> = settings
        .env
        .iter()
        .map(|e| {
            let literal = match &e.value {
                super::EnvValue::Literal(value) => Some(value.as_str()),
                super::EnvValue::FromHost { .. } => None,
            };
            (e.name.as_str(), literal)
        })
        .collect();
    kind.needs(&HostsSpec {
        login,
        env: &env,
        extra_args: &settings.extra_args,
        base_url: settings.base_url.as_deref(),
    })
}

/// The allow entry of a destination: a host as it is, a URL's host with its port
/// when it names one.
fn entry_of(destination: &str) -> Option<String> {
    if destination.contains("://") {
        url_entry(destination)
    } else {
        Rule::parse(destination).ok().map(|r| r.to_string())
    }
}

/// The allow entry for a base URL: its host, with its port when it names one.
pub fn url_entry(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let rule = Rule::parse(authority).ok()?;
    Some(rule.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::test_task;
    use agent_runner_core::secret::Secret;

    #[test]
    fn the_worker_agent_and_meta_codex_are_both_let_through() {
        let task = test_task("runner:\n  worker:\n    kind: claude-code-cli\n");
        let key = Login::Key {
            var: "ANTHROPIC_API_KEY",
            value: Secret::new("k".into()),
        };
        let list = for_task(&task.worker, &key, None);
        assert_eq!(list.entries(), ["api.anthropic.com"]);
        assert_eq!(
            list.origin,
            Origin::Default("claude with an API key".into())
        );
        let task = test_task(
            "runner:\n  meta: {kind: codex-cli, base_url: 'http://127.0.0.2:7000/v1'}\n  worker:\n    kind: claude-code-cli\n    base_url: http://127.0.0.3:9000\n",
        );
        let MetaBackend::CodexCli(codex) = &task.meta.backend else {
            panic!("{:?}", task.meta.backend)
        };
        assert_eq!(codex.base_url.as_deref(), Some("http://127.0.0.2:7000/v1"));
        let list = for_task(&task.worker, &key, Some(&task.meta.backend));
        assert_eq!(list.entries(), ["127.0.0.3:9000", "127.0.0.2:7000"]);
        assert_eq!(
            list.origin,
            Origin::Default("base_url, Meta's codex: base_url".into())
        );
        assert_eq!(
            list.entries(),
            task.worker.allow.entries(),
            "the task's default"
        );
    }

    #[test]
    fn base_urls_that_are_no_urls_add_nothing() {
        for url in [
            "",
            "api.example.com",
            "ftp://x.example",
            "http://",
            "http://[::1/",
        ] {
            assert_eq!(url_entry(url), None, "{url:?}");
        }
        assert_eq!(
            url_entry("http://[::1]:8080/v1").as_deref(),
            Some("[::1]:8080")
        );
        assert_eq!(
            entry_of("https://user:pw@c.example").as_deref(),
            Some("c.example")
        );
        assert_eq!(
            entry_of("api.openai.com").as_deref(),
            Some("api.openai.com")
        );
    }
}
