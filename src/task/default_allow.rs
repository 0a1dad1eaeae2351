//! The allow list a task gets when it names none (SPEC §17): what the worker needs to
//! reach its model, and nothing else.
//!
//! For codex (checked against codex-cli 0.169.0 through this proxy, see the README):
//! - with an API key (`CODEX_API_KEY`, or `OPENAI_API_KEY` in auth.json): the API
//!   host, `api.openai.com`;
//! - with a ChatGPT login (`tokens` in auth.json): `chatgpt.com` (codex's model
//!   requests go to its backend API) and `auth.openai.com` (token refresh);
//! - the host of every base URL the task configures for it: `OPENAI_BASE_URL` in
//!   `runner.worker.env`, and `base_url` values in `-c`/`--config` options of
//!   `runner.worker.extra_args` (a custom model provider).
//!
//! Codex also tries github.com and api.github.com (its update check) and
//! ab.chatgpt.com (feature flags); refusing them does not fail a run, and they are
//! left out: a prompt-injected worker could use an allowed host as a way out.
//!
//! Other agents in the sandbox image (the Meta `codex-cli` provider of §18) add
//! their base URLs through `also`.

use super::{CodexAuth, EnvValue, WorkerEnv};
use crate::egress::rules::{AllowList, Origin, Rule};

/// The API host codex uses with an API key.
pub const API_HOST: &str = "api.openai.com";
/// The hosts codex uses with a ChatGPT login.
pub const CHATGPT_HOSTS: [&str; 2] = ["chatgpt.com", "auth.openai.com"];

/// The default list for codex with `auth`, the worker's `env` and `extra_args`, and
/// the base URLs in `also`.
pub fn codex(
    auth: &CodexAuth,
    env: &[WorkerEnv],
    extra_args: &[String],
    also: &[&str],
) -> AllowList {
    let mut entries: Vec<String> = Vec::new();
    let mut why: Vec<String> = Vec::new();
    let key_in_env = env.iter().any(|e| e.name == "CODEX_API_KEY");
    match auth {
        CodexAuth::File { login, .. } if login.chatgpt => {
            entries.extend(CHATGPT_HOSTS.map(String::from));
            why.push("codex with a ChatGPT login".into());
            if login.api_key {
                entries.push(API_HOST.into());
                why.push("its API key".into());
            }
        }
        CodexAuth::File { .. } | CodexAuth::ApiKey(_) | CodexAuth::None => {
            entries.push(API_HOST.into());
            why.push(if matches!(auth, CodexAuth::None) && !key_in_env {
                "codex's default API host".into()
            } else {
                "codex with an API key".into()
            });
        }
    }
    let mut urls: Vec<(String, &str)> = Vec::new();
    for entry in env {
        if let (true, EnvValue::Literal(url)) = (entry.name == "OPENAI_BASE_URL", &entry.value) {
            urls.push((url.clone(), "OPENAI_BASE_URL in runner.worker.env"));
        }
    }
    urls.extend(
        config_base_urls(extra_args)
            .into_iter()
            .map(|u| (u, "base_url in runner.worker.extra_args")),
    );
    urls.extend(also.iter().map(|u| (u.to_string(), "an agent's base URL")));
    for (url, source) in urls {
        if let Some(entry) = url_entry(&url) {
            if !entries.contains(&entry) {
                entries.push(entry);
                if !why.iter().any(|w| w == source) {
                    why.push(source.to_string());
                }
            }
        }
    }
    AllowList {
        rules: entries.iter().filter_map(|e| Rule::parse(e).ok()).collect(),
        origin: Origin::Default(why.join(", ")),
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

/// `base_url = "…"` values in codex `-c`/`--config` options: a key ending in
/// `base_url`, or an inline table holding one.
fn config_base_urls(args: &[String]) -> Vec<String> {
    let mut values = Vec::new();
    let mut next_is_config = false;
    for arg in args {
        let config = if next_is_config {
            Some(arg.as_str())
        } else {
            arg.strip_prefix("--config=")
                .or_else(|| arg.strip_prefix("-c").filter(|rest| !rest.is_empty()))
        };
        next_is_config = arg == "-c" || arg == "--config";
        if let Some(config) = config {
            values.push(config);
        }
    }
    let mut urls = Vec::new();
    for value in values {
        let mut rest = value;
        while let Some(at) = rest.find("base_url") {
            rest = &rest[at + "base_url".len()..];
            let after = rest.trim_start();
            let Some(after) = after.strip_prefix('=') else {
                continue;
            };
            let after = after.trim_start();
            let Some(quote) = after.chars().next().filter(|c| *c == '"' || *c == '\'') else {
                continue;
            };
            if let Some(end) = after[1..].find(quote) {
                urls.push(after[1..1 + end].to_string());
            }
        }
    }
    urls
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;
    use crate::task::Login;

    fn literal(name: &str, value: &str) -> WorkerEnv {
        WorkerEnv {
            name: name.into(),
            value: EnvValue::Literal(value.into()),
        }
    }

    fn file(chatgpt: bool, api_key: bool) -> CodexAuth {
        CodexAuth::File {
            path: "/home/u/.codex/auth.json".into(),
            secrets: vec![],
            login: Login { chatgpt, api_key },
        }
    }

    #[test]
    fn the_api_host_for_a_key_and_the_chatgpt_hosts_for_a_login() {
        let key = CodexAuth::ApiKey(Secret::new("sk-x".into()));
        assert_eq!(codex(&key, &[], &[], &[]).entries(), ["api.openai.com"]);
        assert_eq!(
            codex(&file(false, true), &[], &[], &[]).entries(),
            ["api.openai.com"]
        );
        assert_eq!(
            codex(&file(true, false), &[], &[], &[]).entries(),
            ["chatgpt.com", "auth.openai.com"]
        );
        assert_eq!(
            codex(&file(true, true), &[], &[], &[]).entries(),
            ["chatgpt.com", "auth.openai.com", "api.openai.com"]
        );
        let list = codex(&CodexAuth::None, &[], &[], &[]);
        assert_eq!(list.entries(), ["api.openai.com"]);
        assert_eq!(
            list.origin,
            Origin::Default("codex's default API host".into())
        );
    }

    #[test]
    fn configured_base_urls_add_their_hosts() {
        let env = [
            literal("OPENAI_BASE_URL", "https://llm.corp.example/v1"),
            literal("OTHER", "https://not-a-base-url.example"),
        ];
        let args: Vec<String> = [
            "-c",
            "model_providers.fake={name=\"fake\",base_url=\"http://127.0.0.2:4000/v1\",wire_api=\"responses\"}",
            "--config=model_providers.b.base_url='https://b.example:8443/api'",
            "-cmodel_providers.c.base_url = \"https://user:pw@c.example\"",
            "--model",
            "base_url=\"https://ignored.example\"",
        ]
        .map(String::from)
        .into();
        let list = codex(
            &CodexAuth::ApiKey(Secret::new("k".into())),
            &env,
            &args,
            &["http://meta.example:9000/v1"],
        );
        assert_eq!(
            list.entries(),
            [
                "api.openai.com",
                "llm.corp.example",
                "127.0.0.2:4000",
                "b.example:8443",
                "c.example",
                "meta.example:9000",
            ]
        );
        assert_eq!(
            list.origin,
            Origin::Default(
                "codex with an API key, OPENAI_BASE_URL in runner.worker.env, base_url in runner.worker.extra_args, an agent's base URL".into()
            )
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
    }
}
