//! `runner.meta` of a Meta reached over HTTP (SPEC §20): which API (`kind`, and why
//! when it was not given), its base URL, how it authenticates (a key, headers), the
//! reasoning effort (given, split off the model's name, or the built-in default's),
//! and whether replies are held to their schema.

use std::collections::BTreeMap;

use super::env_ref;
use super::fields::{choice, non_empty};
use super::host::{Host, Var};
use super::input_error::{InputError, InputErrors};
use super::{ApiKey, EnvValue};
use agent_runner_core::secret::Secret;
use agent_runner_core::text::cut_chars;

/// The built-in Meta model (the seed's `gpt-5.1-codex-max-high`, read as the
/// model and its effort: SPEC §20's decision).
pub const DEFAULT_META_MODEL: &str = "gpt-5.1-codex-max";
/// The built-in default's reasoning effort.
pub(crate) const DEFAULT_EFFORT: EffortLevel = EffortLevel::High;
/// The built-in model of `kind: anthropic-messages`.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The host whose API is the Responses API; a base URL naming another one speaks
/// Chat Completions unless a kind says otherwise.
const OPENAI_HOST: &str = "api.openai.com";
/// Headers agent-runner sets itself or that belong to the connection.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-type",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "anthropic-version",
];

/// The kinds of `runner.meta.kind`.
pub(crate) const KINDS: [&str; 5] = [
    "openai-responses",
    "openai-chat",
    "anthropic-messages",
    "codex-cli",
    "scripted",
];

/// An HTTP API Meta speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    OpenAiResponses,
    OpenAiChat,
    AnthropicMessages,
}

impl Wire {
    /// Its `runner.meta.kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Wire::OpenAiResponses => "openai-responses",
            Wire::OpenAiChat => "openai-chat",
            Wire::AnthropicMessages => "anthropic-messages",
        }
    }

    /// The header a key goes in.
    pub fn auth_header(self) -> &'static str {
        match self {
            Wire::AnthropicMessages => "x-api-key",
            _ => "Authorization",
        }
    }

    fn default_key_var(self) -> &'static str {
        match self {
            Wire::AnthropicMessages => "ANTHROPIC_API_KEY",
            _ => "OPENAI_API_KEY",
        }
    }

    fn base_url_var(self) -> &'static str {
        match self {
            Wire::AnthropicMessages => "ANTHROPIC_BASE_URL",
            _ => "OPENAI_BASE_URL",
        }
    }

    fn default_base_url(self) -> &'static str {
        match self {
            Wire::AnthropicMessages => DEFAULT_ANTHROPIC_BASE_URL,
            _ => DEFAULT_BASE_URL,
        }
    }
}

/// `runner.meta` of an HTTP kind.
#[derive(Debug, Clone)]
pub struct MetaApi {
    pub wire: Wire,
    pub base_url: String,
    /// None: `runner.meta.headers` carries the authentication.
    pub api_key: Option<ApiKey>,
    /// `runner.meta.headers`, in name order; every value is a secret.
    pub headers: Vec<MetaHeader>,
    /// Replies held to their JSON Schema: always but with `openai-chat`, whose
    /// replies are YAML text unless `structured: true`.
    pub structured: bool,
}

/// One `runner.meta.headers` entry.
#[derive(Debug, Clone)]
pub struct MetaHeader {
    pub name: String,
    pub value: EnvValue,
}

impl MetaHeader {
    /// The value, as it goes in the request.
    pub fn value(&self) -> Secret {
        Secret::new(self.value.expose().to_string())
    }
}

/// How hard a reasoning model thinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffortLevel {
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

const LEVELS: [(&str, EffortLevel); 5] = [
    ("minimal", EffortLevel::Minimal),
    ("low", EffortLevel::Low),
    ("medium", EffortLevel::Medium),
    ("high", EffortLevel::High),
    ("xhigh", EffortLevel::Xhigh),
];

impl EffortLevel {
    pub fn as_str(self) -> &'static str {
        LEVELS
            .iter()
            .find(|(_, level)| *level == self)
            .map_or("high", |(name, _)| name)
    }

    /// Anthropic's extended-thinking budget in tokens (SPEC §20); None for the
    /// levels it has no budget for.
    pub fn thinking_budget(self) -> Option<u32> {
        match self {
            EffortLevel::Low => Some(2_048),
            EffortLevel::Medium => Some(8_192),
            EffortLevel::High => Some(24_576),
            EffortLevel::Minimal | EffortLevel::Xhigh => None,
        }
    }
}

/// The reasoning effort Meta asks for, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effort {
    pub level: EffortLevel,
    pub from: EffortSource,
}

/// Where an effort came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EffortSource {
    /// `runner.meta.reasoning_effort`.
    Setting,
    /// Split off the model's name as written (`gpt-5.1-codex-max-high`).
    ModelName(String),
    /// The built-in default model's.
    Default,
}

impl Effort {
    /// Where it came from, for `validate`.
    pub fn origin(&self) -> String {
        match &self.from {
            EffortSource::Setting => "runner.meta.reasoning_effort".into(),
            EffortSource::ModelName(model) => format!("split off the model name {model}"),
            EffortSource::Default => "the built-in default's".into(),
        }
    }
}

/// The kind of Meta: an API, or one of the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chosen {
    Api(Wire),
    CodexCli,
    Scripted,
}

/// `runner.meta.kind`, or the default and why: `openai-responses`, unless a base
/// URL (`runner.meta.base_url`, else `OPENAI_BASE_URL`) names another host than
/// OpenAI's, whose server most likely speaks Chat Completions.
pub(crate) fn kind(
    kind: Option<&str>,
    base_url: Option<&str>,
    host: &Host,
) -> Result<(Chosen, String), InputError> {
    if let Some(kind) = kind {
        let kind = choice(kind, "runner.meta.kind", &KINDS)?;
        let chosen = match kind {
            "openai-chat" => Chosen::Api(Wire::OpenAiChat),
            "anthropic-messages" => Chosen::Api(Wire::AnthropicMessages),
            "codex-cli" => Chosen::CodexCli,
            "scripted" => Chosen::Scripted,
            _ => Chosen::Api(Wire::OpenAiResponses),
        };
        return Ok((chosen, "runner.meta.kind".into()));
    }
    let given = match non_empty(base_url.map(str::to_string)) {
        Some(url) => Some((url, "runner.meta.base_url")),
        None => match host.var("OPENAI_BASE_URL") {
            Var::Set(url) if !url.trim().is_empty() => Some((url, "OPENAI_BASE_URL")),
            _ => None,
        },
    };
    match given {
        Some((url, from)) if url_host(&url).as_deref() != Some(OPENAI_HOST) => Ok((
            Chosen::Api(Wire::OpenAiChat),
            format!(
                "the default for {from} naming another host than {OPENAI_HOST} (Chat Completions, which compatible servers speak); set runner.meta.kind for another"
            ),
        )),
        _ => Ok((
            Chosen::Api(Wire::OpenAiResponses),
            "the default (runner.meta.kind not given)".into(),
        )),
    }
}

/// The host of an http(s) URL, lower case, without user, port or brackets.
fn url_host(url: &str) -> Option<String> {
    let rest = url.trim().split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => host_port.split(':').next()?,
    };
    Some(host.trim_end_matches('.').to_ascii_lowercase())
}

/// `runner.meta.reasoning_effort`.
pub(crate) fn effort_setting(value: &str) -> Result<EffortLevel, InputError> {
    let names: Vec<&str> = LEVELS.iter().map(|(name, _)| *name).collect();
    let name = choice(value, "runner.meta.reasoning_effort", &names)?;
    Ok(level(name).unwrap_or(EffortLevel::High))
}

fn level(name: &str) -> Option<EffortLevel> {
    LEVELS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, level)| *level)
}

/// `model` without an effort suffix (`-minimal`, `-low`, `-medium`, `-high`,
/// `-xhigh`), and that effort; None when it has none.
pub(crate) fn split_effort(model: &str) -> Option<(String, EffortLevel)> {
    let (name, suffix) = model.rsplit_once('-')?;
    let level = level(suffix)?;
    // `-xhigh` is not `-x` + `high`: rsplit_once took the whole suffix.
    (!name.is_empty()).then(|| (name.to_string(), level))
}

/// The model and effort Meta runs with: `model` as given or the kind's default,
/// its effort suffix split off on `openai-responses` (the seeds spell models so),
/// `effort` (`runner.meta.reasoning_effort`) if given. Both an effort in the name
/// and one given is an error: which one was meant cannot be known.
pub(crate) fn model_and_effort(
    wire: Wire,
    model: Option<String>,
    effort: Option<EffortLevel>,
) -> Result<(String, Option<Effort>), InputError> {
    let given = |level| Effort {
        level,
        from: EffortSource::Setting,
    };
    let Some(model) = model else {
        return Ok(match wire {
            Wire::AnthropicMessages => (DEFAULT_ANTHROPIC_MODEL.into(), effort.map(given)),
            _ => (
                DEFAULT_META_MODEL.into(),
                Some(effort.map_or(
                    Effort {
                        level: DEFAULT_EFFORT,
                        from: EffortSource::Default,
                    },
                    given,
                )),
            ),
        });
    };
    match (wire, split_effort(&model), effort) {
        (Wire::OpenAiResponses, Some((_, suffix)), Some(level)) => Err(InputError::new(
            "runner.meta.reasoning_effort",
            format!(
                "is {}, and the model name {:?} ends in the effort -{}: give the effort once",
                level.as_str(),
                cut_chars(&model, 80),
                suffix.as_str()
            ),
        )
        .with_hint(
            "remove the suffix from runner.meta.model, or remove runner.meta.reasoning_effort",
        )),
        (Wire::OpenAiResponses, Some((name, level)), None) => Ok((
            name,
            Some(Effort {
                level,
                from: EffortSource::ModelName(model),
            }),
        )),
        (_, _, effort) => Ok((model, effort.map(given))),
    }
}

/// The API's settings: base URL, key, headers, structured replies.
pub(crate) fn api(
    wire: Wire,
    raw: ApiRaw,
    host: &Host,
    problems: &mut InputErrors,
) -> Option<MetaApi> {
    if raw.script.is_some() {
        problems.push(InputError::new(
            "runner.meta.script",
            "only used with `kind: scripted`",
        ));
    }
    let structured = match (wire, raw.structured) {
        (Wire::OpenAiChat, structured) => Some(structured.unwrap_or(false)),
        (_, None) => Some(true),
        (_, Some(_)) => problems.take(Err(InputError::new(
            "runner.meta.structured",
            format!(
                "only used with `kind: openai-chat`; {} always holds replies to their schema",
                wire.as_str()
            ),
        ))),
    };
    let base_url = problems.take(base_url(wire, raw.base_url, host));
    let headers = headers(wire, raw.headers.unwrap_or_default(), host, problems);
    let api_key = headers
        .as_ref()
        .and_then(|headers| api_key(wire, raw.api_key, headers, host, problems));
    Some(MetaApi {
        wire,
        base_url: base_url?,
        api_key: api_key?,
        headers: headers?,
        structured: structured?,
    })
}

/// The raw keys `api` reads.
pub(crate) struct ApiRaw {
    pub(crate) base_url: Option<String>,
    pub(crate) api_key: Option<String>,
    pub(crate) headers: Option<BTreeMap<String, String>>,
    pub(crate) structured: Option<bool>,
    pub(crate) script: Option<String>,
}

/// The key: `runner.meta.api_key`, else the kind's variable. None when a header
/// authenticates: one of `headers` is the kind's own key header, or the key was
/// not given, its variable is not set, and `headers` are there (Azure's
/// `api-key`, a gateway's token).
fn api_key(
    wire: Wire,
    given: Option<String>,
    headers: &[MetaHeader],
    host: &Host,
    problems: &mut InputErrors,
) -> Option<Option<ApiKey>> {
    let field = "runner.meta.api_key";
    let own_header = headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(wire.auth_header()));
    let given = non_empty(given);
    if let Some(header) = own_header {
        if given.is_some() {
            problems.push(InputError::new(
                field,
                format!(
                    "is given, and runner.meta.headers.{} sets the same header: keep one",
                    header.name
                ),
            ));
            return None;
        }
        return Some(None);
    }
    let default_var = wire.default_key_var();
    let spec = given.unwrap_or_else(|| format!("env:{default_var}"));
    match problems.take(env_ref::variable(&spec, field))? {
        Some(var) => {
            if var == default_var && !headers.is_empty() && matches!(host.var(&var), Var::Unset) {
                return Some(None);
            }
            let resolved = env_ref::resolve(&var, field, host).map_err(|e| {
                if var == "OPENAI_API_KEY" {
                    let hint = e.hint.clone().unwrap_or_default();
                    e.with_hint(format!(
                        "{hint}; with only an Anthropic key, set runner.meta.kind: anthropic-messages (it reads ANTHROPIC_API_KEY)"
                    ))
                } else {
                    e
                }
            });
            let value = problems.take(resolved)?;
            Some(Some(ApiKey {
                source: format!("env:{var}"),
                value,
            }))
        }
        None => Some(Some(ApiKey {
            source: "literal".into(),
            value: Secret::new(spec),
        })),
    }
}

/// `runner.meta.base_url`, else the kind's variable, else its default. A variable
/// that is set but unusable is an error: falling back would send the key elsewhere.
fn base_url(wire: Wire, value: Option<String>, host: &Host) -> Result<String, InputError> {
    let var = wire.base_url_var();
    let (url, field, from_host) = match non_empty(value) {
        Some(url) => (url, "runner.meta.base_url", false),
        None => match host.var(var) {
            Var::Set(url) if !url.trim().is_empty() => (url, var, true),
            Var::NotUtf8 => {
                return Err(
                    InputError::new(var, "environment variable is not valid UTF-8")
                        .with_hint("unset it to use the default endpoint, or set a valid URL")
                        .environment(),
                );
            }
            _ => return Ok(wire.default_base_url().to_string()),
        },
    };
    super::fields::url_value(&url, field).map_err(|error| {
        if from_host {
            error.environment()
        } else {
            error
        }
    })
}

/// `runner.meta.headers`: names that are HTTP tokens and none agent-runner sets
/// itself, values `env:VAR` (resolved) or literals, never with a line break or
/// another control character (which would forge more headers).
fn headers(
    wire: Wire,
    raw: BTreeMap<String, String>,
    host: &Host,
    problems: &mut InputErrors,
) -> Option<Vec<MetaHeader>> {
    let mut out = Vec::new();
    let mut complete = true;
    for (name, value) in raw {
        let field = format!("runner.meta.headers.{}", cut_chars(&name, 60));
        let mut fail = |error: InputError| {
            problems.push(error);
            complete = false;
        };
        if name.is_empty() || name.len() > 100 || !name.bytes().all(is_token_byte) {
            fail(InputError::new(
                field,
                "is not a header name (letters, digits and !#$%&'*+-.^_`|~)",
            ));
            continue;
        }
        let lower = name.to_ascii_lowercase();
        if RESERVED_HEADERS.contains(&lower.as_str()) {
            fail(InputError::new(
                field,
                format!("is set by agent-runner for {}; remove it", wire.as_str()),
            ));
            continue;
        }
        let value = match env_ref::variable(&value, &field) {
            Err(e) => {
                fail(e);
                continue;
            }
            Ok(Some(var)) => match env_ref::resolve(&var, &field, host) {
                Ok(secret) => EnvValue::FromHost { var, value: secret },
                Err(e) => {
                    fail(e);
                    continue;
                }
            },
            Ok(None) => EnvValue::Literal(value),
        };
        if value.expose().chars().any(char::is_control) {
            // Never the value itself: it is most likely a credential.
            fail(InputError::new(
                field,
                "holds a line break or another control character, which no header value may",
            ));
            continue;
        }
        out.push(MetaHeader { name, value });
    }
    complete.then_some(out)
}

/// RFC 9110's `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effort_suffixes_are_split_whole() {
        assert_eq!(
            split_effort("gpt-5.1-codex-max-high"),
            Some(("gpt-5.1-codex-max".into(), EffortLevel::High))
        );
        assert_eq!(
            split_effort("o4-mini-xhigh"),
            Some(("o4-mini".into(), EffortLevel::Xhigh))
        );
        assert_eq!(
            split_effort("m-minimal"),
            Some(("m".into(), EffortLevel::Minimal))
        );
        for none in [
            "gpt-5.1-codex-max",
            "gpt-4o-mini",
            "high",
            "-high",
            "x-HIGH",
        ] {
            assert_eq!(split_effort(none), None, "{none}");
        }
    }

    #[test]
    fn hosts_of_urls() {
        for (url, host) in [
            ("https://api.openai.com/v1", "api.openai.com"),
            ("https://API.OpenAI.com.:443/v1", "api.openai.com"),
            ("http://user:pw@gw.example:4000/v1", "gw.example"),
            ("http://[::1]:8080/v1", "::1"),
            (
                "https://x.openai.azure.com/openai/v1?api-version=1",
                "x.openai.azure.com",
            ),
        ] {
            assert_eq!(url_host(url).as_deref(), Some(host), "{url}");
        }
        assert_eq!(url_host("no-scheme"), None);
    }

    #[test]
    fn budgets_of_anthropic() {
        assert_eq!(EffortLevel::Low.thinking_budget(), Some(2_048));
        assert_eq!(EffortLevel::Medium.thinking_budget(), Some(8_192));
        assert_eq!(EffortLevel::High.thinking_budget(), Some(24_576));
        assert_eq!(EffortLevel::Xhigh.thinking_budget(), None);
    }
}
