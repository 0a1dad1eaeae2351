//! `runner.meta` of the HTTP kinds (SPEC §20): which API and why, the seed's
//! default read as a model and its effort, efforts per API, keys and headers.

use super::*;

const V1: &str = "version: 1\ntask:\n  prd: {text: x}\n";
const ANTHROPIC: (&str, &str) = ("ANTHROPIC_API_KEY", "sk-ant-test-0123456789");

fn meta(yaml_meta: &str, vars: &[(&str, &str)]) -> Result<Task, InputErrors> {
    let dir = Scratch::new();
    parse_in(&dir.0, vars, &format!("{V1}runner:\n  meta: {yaml_meta}\n"))
}

fn api(task: &Task) -> &MetaApi {
    match &task.meta.backend {
        MetaBackend::Api(api) => api,
        other => panic!("{other:?}"),
    }
}

fn effort(task: &Task) -> Option<(&'static str, EffortSource)> {
    task.meta
        .reasoning_effort
        .as_ref()
        .map(|e| (e.level.as_str(), e.from.clone()))
}

#[test]
fn the_kind_is_responses_unless_a_base_url_names_another_host() {
    let task = meta("{}", &[KEY]).unwrap();
    assert_eq!(api(&task).wire, Wire::OpenAiResponses);
    for url in [
        "https://api.openai.com/v1",
        "https://API.openai.com:443/v1/",
    ] {
        let task = meta(&format!("{{base_url: '{url}'}}"), &[KEY]).unwrap();
        assert_eq!(api(&task).wire, Wire::OpenAiResponses, "{url}");
    }
    let task = meta("{base_url: 'http://litellm:4000/v1'}", &[KEY]).unwrap();
    assert_eq!(api(&task).wire, Wire::OpenAiChat);
    assert_eq!(
        task.meta.kind_reason,
        "the default for runner.meta.base_url naming another host than api.openai.com (Chat Completions, which compatible servers speak); set runner.meta.kind for another"
    );
    // A kind given wins, and says so.
    let task = meta(
        "{kind: openai-responses, base_url: 'http://gw:4000/v1'}",
        &[KEY],
    )
    .unwrap();
    assert_eq!(api(&task).wire, Wire::OpenAiResponses);
    assert_eq!(task.meta.kind_reason, "runner.meta.kind");
    let out = resolved_yaml(&task);
    assert!(
        out.contains("kind: openai-responses\n    kind_from: runner.meta.kind\n"),
        "{out}"
    );
}

#[test]
fn effort_suffixes_are_split_on_responses_only() {
    let task = meta("{model: gpt-5.1-codex-max-high}", &[KEY]).unwrap();
    assert_eq!(task.meta.model, "gpt-5.1-codex-max");
    assert_eq!(
        effort(&task),
        Some((
            "high",
            EffortSource::ModelName("gpt-5.1-codex-max-high".into())
        ))
    );
    let out = resolved_yaml(&task);
    assert!(
        out.contains("reasoning_effort: high (split off the model name gpt-5.1-codex-max-high)"),
        "{out}"
    );
    let task = meta("{model: o4-mini-low, reasoning_effort: medium}", &[KEY]);
    assert_error(
        &first(task.unwrap_err()),
        "runner.meta.reasoning_effort",
        "ends in the effort -low: give the effort once",
    );
    let task = meta("{model: gpt-5, reasoning_effort: minimal}", &[KEY]).unwrap();
    assert_eq!(
        (task.meta.model.as_str(), effort(&task)),
        ("gpt-5", Some(("minimal", EffortSource::Setting)))
    );
    // Chat: the name goes as written (a gateway may mean it so).
    let task = meta(
        "{kind: openai-chat, model: my-model-high, base_url: 'http://gw/v1'}",
        &[KEY],
    )
    .unwrap();
    assert_eq!(
        (task.meta.model.as_str(), effort(&task)),
        ("my-model-high", None)
    );
    assert_error(
        &first(meta("{reasoning_effort: extreme}", &[KEY]).unwrap_err()),
        "runner.meta.reasoning_effort",
        "must be one of minimal, low, medium, high, xhigh",
    );
}

#[test]
fn another_model_replaces_the_effort_that_came_with_the_model() {
    let mut task = meta("{}", &[KEY]).unwrap();
    task.meta.set_model("gpt-4.1").unwrap();
    assert_eq!((task.meta.model.as_str(), effort(&task)), ("gpt-4.1", None));
    task.meta.set_model("o3-xhigh").unwrap();
    assert_eq!(
        (task.meta.model.as_str(), effort(&task)),
        (
            "o3",
            Some(("xhigh", EffortSource::ModelName("o3-xhigh".into())))
        )
    );
    let mut task = meta("{model: o3, reasoning_effort: low}", &[KEY]).unwrap();
    task.meta.set_model("o4").unwrap();
    assert_eq!(
        effort(&task),
        Some(("low", EffortSource::Setting)),
        "the setting stays"
    );
    assert!(
        task.meta
            .set_model("o4-high")
            .unwrap_err()
            .to_string()
            .contains("give the effort once")
    );
}

#[test]
fn anthropic_reads_its_own_key_and_has_three_budgets() {
    let task = meta("{kind: anthropic-messages}", &[ANTHROPIC]).unwrap();
    let settings = api(&task);
    assert_eq!(settings.wire, Wire::AnthropicMessages);
    assert_eq!(settings.base_url, DEFAULT_ANTHROPIC_BASE_URL);
    let key = settings.api_key.as_ref().unwrap();
    assert_eq!(
        (key.source.as_str(), key.value.expose()),
        ("env:ANTHROPIC_API_KEY", ANTHROPIC.1)
    );
    assert_eq!(task.meta.model, DEFAULT_ANTHROPIC_MODEL);
    assert_eq!(effort(&task), None, "no thinking unless asked");
    let task = meta(
        "{kind: anthropic-messages, reasoning_effort: medium}",
        &[ANTHROPIC],
    )
    .unwrap();
    assert_eq!(
        task.meta.reasoning_effort.unwrap().level.thinking_budget(),
        Some(8_192)
    );
    assert_error(
        &first(
            meta(
                "{kind: anthropic-messages, reasoning_effort: xhigh}",
                &[ANTHROPIC],
            )
            .unwrap_err(),
        ),
        "runner.meta.reasoning_effort",
        "xhigh has no extended-thinking budget on anthropic-messages",
    );
    let e = first(meta("{kind: anthropic-messages}", &[KEY]).unwrap_err());
    assert_error(&e, "runner.meta.api_key", "ANTHROPIC_API_KEY is not set");
    // ANTHROPIC_BASE_URL is its base URL, as for the SDK and Claude Code.
    let task = meta(
        "{kind: anthropic-messages}",
        &[ANTHROPIC, ("ANTHROPIC_BASE_URL", "http://gw:4000/")],
    )
    .unwrap();
    assert_eq!(api(&task).base_url, "http://gw:4000");
}

#[test]
fn without_an_openai_key_the_error_names_the_anthropic_kind() {
    let e = first(meta("{}", &[ANTHROPIC]).unwrap_err());
    assert_error(&e, "runner.meta.api_key", "OPENAI_API_KEY is not set");
    assert!(
        e.hint
            .as_deref()
            .unwrap()
            .contains("runner.meta.kind: anthropic-messages"),
        "{e:?}"
    );
}

#[test]
fn temperature_and_reasoning_do_not_go_together() {
    for yaml in [
        "{temperature: 0.2}",
        "{model: o3-high, temperature: 0.2}",
        "{kind: anthropic-messages, reasoning_effort: low, temperature: 0.2}",
    ] {
        assert_error(
            &first(meta(yaml, &[KEY, ANTHROPIC]).unwrap_err()),
            "runner.meta.temperature",
            "is not accepted with a reasoning effort",
        );
    }
    let task = meta("{model: gpt-4.1, temperature: 0.2}", &[KEY]).unwrap();
    assert_eq!(task.meta.temperature, Some(0.2));
}

#[test]
fn headers_carry_secrets_by_name_and_nothing_else() {
    let vars = [KEY, ("AZURE_KEY", "azure-secret-0123456789")];
    let task = meta(
        "{base_url: 'https://x.openai.azure.com/openai/v1', headers: {api-key: 'env:AZURE_KEY', X-Team: literal-token-0123456789}}",
        &vars[1..],
    )
    .unwrap();
    let settings = api(&task);
    assert!(
        settings.api_key.is_none(),
        "no OPENAI_API_KEY: the headers authenticate"
    );
    let headers: Vec<(&str, String)> = settings
        .headers
        .iter()
        .map(|h| (h.name.as_str(), h.value().expose().to_string()))
        .collect();
    assert_eq!(
        headers,
        [
            ("X-Team", "literal-token-0123456789".to_string()),
            ("api-key", "azure-secret-0123456789".to_string())
        ]
    );
    let secrets: Vec<String> = task
        .secrets()
        .iter()
        .map(|s| s.expose().to_string())
        .collect();
    assert!(
        secrets.contains(&"azure-secret-0123456789".to_string()),
        "{secrets:?}"
    );
    assert!(
        secrets.contains(&"literal-token-0123456789".to_string()),
        "{secrets:?}"
    );
    let out = resolved_yaml(&task);
    assert!(
        !out.contains("azure-secret") && !out.contains("literal-token"),
        "{out}"
    );
    assert!(out.contains("api-key: '*** (env:AZURE_KEY)'"), "{out}");
    assert!(
        out.contains("api_key: none (runner.meta.headers authenticate)"),
        "{out}"
    );
    // With the key set it is sent too.
    let task = meta("{headers: {X-Team: t}}", &vars).unwrap();
    assert!(api(&task).api_key.is_some());
    // The kind's own key header in headers replaces the key; both is an error.
    let task = meta("{headers: {Authorization: 'env:AZURE_KEY'}}", &vars).unwrap();
    assert!(api(&task).api_key.is_none());
    assert_error(
        &first(
            meta(
                "{api_key: 'env:OPENAI_API_KEY', headers: {authorization: x}}",
                &vars,
            )
            .unwrap_err(),
        ),
        "runner.meta.api_key",
        "sets the same header: keep one",
    );
    for (yaml, path, words) in [
        (
            "{headers: {'Bad Name': x}}",
            "runner.meta.headers.Bad Name",
            "is not a header name",
        ),
        (
            "{headers: {Content-Length: '1'}}",
            "runner.meta.headers.Content-Length",
            "is set by agent-runner",
        ),
        (
            "{headers: {Host: evil}}",
            "runner.meta.headers.Host",
            "is set by agent-runner",
        ),
        (
            "{headers: {X-A: \"a\\r\\nX-Injected: 1\"}}",
            "runner.meta.headers.X-A",
            "line break",
        ),
        (
            "{headers: {X-A: 'env:UNSET_VAR'}}",
            "runner.meta.headers.X-A",
            "UNSET_VAR is not set",
        ),
    ] {
        assert_error(&first(meta(yaml, &vars).unwrap_err()), path, words);
    }
    let e = first(
        meta(
            "{headers: {X-A: 'env:MULTI'}}",
            &[KEY, ("MULTI", "a\nb-secret-value")],
        )
        .unwrap_err(),
    );
    assert_error(&e, "runner.meta.headers.X-A", "line break");
    assert!(!e.to_string().contains("b-secret-value"), "{e}");
}

#[test]
fn http_settings_belong_to_the_http_kinds() {
    let dir = Scratch::new();
    let script = dir.file("s.yaml", b"[]");
    for key in [
        "reasoning_effort: low",
        "headers: {X-A: b}",
        "structured: true",
    ] {
        let e = first(
            meta(
                &format!("{{kind: scripted, script: '{}', {key}}}", script.display()),
                &[KEY],
            )
            .unwrap_err(),
        );
        assert!(e.path.starts_with("runner.meta."), "{e}");
        assert!(e.message.contains("not used by `kind: scripted`"), "{e}");
    }
    assert_error(
        &first(meta("{structured: false}", &[KEY]).unwrap_err()),
        "runner.meta.structured",
        "only used with `kind: openai-chat`",
    );
    let task = meta("{kind: openai-chat, structured: true}", &[KEY]).unwrap();
    assert!(api(&task).structured);
    assert_error(
        &first(meta("{kind: openai-chat, structured: yes please}", &[KEY]).unwrap_err()),
        "runner.meta.structured",
        "expected true or false",
    );
}
