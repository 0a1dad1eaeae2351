//! The Meta client against a real HTTP server on 127.0.0.1 (scripted answers),
//! through the real ureq client.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use agent_runner_core::secret::{Redactor, Secret};
use agent_runner_meta::openai_chat::OpenAiChat;
use agent_runner_meta::scripted::Scripted;
use agent_runner_meta::{HttpMeta, MetaError};
use agent_runner_run::context::TaskContext;
use agent_runner_run::runner::Action;
use agent_runner_run::runner::meta::{Meta, MetaAgent};
use agent_runner_settings::task::{self, Host};
use support::Scratch;
use support::fake_openai::{Answer, FakeOpenAi};

const KEY: &str = "sk-meta-test-key-0123456789abcdef";

const PLAN: &str = "type: plan_task\nacceptance_criteria:\n  - id: AC-1\n    description: hello.txt exists\n  - description: tests pass\n";
const NEXT: &str = "type: next_action\ndecision:\n  action: run_worker\n  reason: nothing done yet\nworker_call:\n  worker_type: codex-cli\n  mode: exec\n  prompt: Create hello.txt\n";

fn context(dir: &Scratch, extra: &str) -> TaskContext {
    let yaml = format!(
        "version: 1\ntask:\n  id: meta-test\n  title: Meta test\n  prd:\n    text: Create hello.txt with hello in it.\n  test:\n    command: test -f hello.txt\n{extra}"
    );
    let var = |name: &str| (name == "OPENAI_API_KEY").then(|| KEY.into());
    TaskContext::new(
        task::parse(
            &yaml,
            &Host {
                var: &var,
                cwd: Ok(dir.path.clone()),
            },
        )
        .unwrap(),
    )
}

fn agent(
    server: &FakeOpenAi,
    temperature: Option<f64>,
    timeout: Duration,
) -> MetaAgent<HttpMeta<OpenAiChat>> {
    let key = Secret::new(KEY.into());
    let chat = OpenAiChat::backend(&server.url, "test-model", temperature, key.clone(), timeout)
        .with_backoff(Duration::from_millis(50));
    MetaAgent::new(chat, None, Redactor::new([&key]))
}

fn no_key_anywhere(texts: &[&str]) {
    for text in texts {
        assert!(!text.contains(KEY), "API key leaked into: {text}");
    }
}

#[test]
fn plan_task_request_and_reply() {
    let dir = Scratch::new("meta-plan");
    let server = FakeOpenAi::start(vec![Answer::chat(PLAN)]);
    let ctx = context(&dir, "");
    let outcome = agent(&server, None, Duration::from_secs(10)).plan_task(&ctx);
    let plan = outcome.reply.unwrap();
    let ids: Vec<(&str, &str)> = plan
        .criteria
        .iter()
        .map(|c| (c.id.as_str(), c.description.as_str()))
        .collect();
    assert_eq!(ids, [("AC-1", "hello.txt exists"), ("AC-2", "tests pass")]);
    assert_eq!(outcome.call.attempts, 1);
    assert_eq!(outcome.call.replies, [PLAN]);
    let got = server.received();
    assert_eq!(got.len(), 1);
    let request = &got[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    let body = request.json();
    assert_eq!(body["model"], "test-model");
    assert!(
        body.get("temperature").is_none(),
        "temperature only when configured: {body}"
    );
    assert_eq!(request.roles(), ["system", "user"]);
    assert!(
        request
            .message(0)
            .contains("type: plan_task\nacceptance_criteria:"),
        "schema in the system prompt"
    );
    let user: serde_norway::Value = serde_norway::from_str(&request.message(1)).unwrap();
    assert_eq!(user["type"], "plan_task");
    assert_eq!(user["task"]["id"], "meta-test");
    assert_eq!(user["task"]["prd"], "Create hello.txt with hello in it.");
    assert_eq!(user["task"]["test_command"], "test -f hello.txt");
    assert_eq!(outcome.call.request, request.message(1));
}

#[test]
fn temperature_is_sent_when_configured() {
    let dir = Scratch::new("meta-temp");
    let server = FakeOpenAi::start(vec![Answer::chat(PLAN)]);
    agent(&server, Some(0.2), Duration::from_secs(10))
        .plan_task(&context(&dir, ""))
        .reply
        .unwrap();
    assert_eq!(server.received()[0].json()["temperature"], 0.2);
}

#[test]
fn server_errors_are_retried_with_backoff() {
    let dir = Scratch::new("meta-500");
    let server = FakeOpenAi::start(vec![
        Answer::error(500, "boom"),
        Answer::error(503, "busy"),
        Answer::chat(NEXT),
    ]);
    let outcome = agent(&server, None, Duration::from_secs(10)).next_action(&context(&dir, ""));
    let next = outcome.reply.unwrap();
    assert_eq!(
        next.action,
        Action::RunWorker {
            prompt: "Create hello.txt".into()
        }
    );
    assert_eq!(outcome.call.attempts, 3);
    let got = server.received();
    assert_eq!(got.len(), 3);
    assert!(
        got[1].at - got[0].at >= Duration::from_millis(50),
        "first backoff"
    );
    assert!(
        got[2].at - got[1].at >= Duration::from_millis(100),
        "second backoff doubles"
    );
}

#[test]
fn retry_after_is_honoured() {
    let dir = Scratch::new("meta-429");
    let server = FakeOpenAi::start(vec![
        Answer::error(429, "slow down").header("Retry-After", "1"),
        Answer::chat(PLAN),
    ]);
    let outcome = agent(&server, None, Duration::from_secs(10)).plan_task(&context(&dir, ""));
    assert!(outcome.reply.is_ok());
    let got = server.received();
    assert!(
        got[1].at - got[0].at >= Duration::from_secs(1),
        "waited {:?}",
        got[1].at - got[0].at
    );
}

#[test]
fn gives_up_after_three_retries() {
    let dir = Scratch::new("meta-500x4");
    let server = FakeOpenAi::start((0..5).map(|_| Answer::error(500, "still down")).collect());
    let outcome = agent(&server, None, Duration::from_secs(10)).plan_task(&context(&dir, ""));
    let MetaError::Failed(e) = outcome.reply.unwrap_err() else {
        panic!()
    };
    assert!(
        e.contains("HTTP 500")
            && e.contains("still down")
            && e.contains("gave up after 4 attempts"),
        "{e}"
    );
    assert_eq!(server.received().len(), 4);
    assert_eq!(outcome.call.attempts, 4);
    assert_eq!(outcome.call.error.as_deref(), Some(e.as_str()));
}

#[test]
fn responses_cut_off_or_not_json_are_retried() {
    let dir = Scratch::new("meta-broken");
    let server = FakeOpenAi::start(vec![
        // Garbled HTTP, then cut in the head, then in the body.
        Answer::garbled(),
        Answer::chat(PLAN).cut_at(20),
        Answer::chat(PLAN).cut_at(150),
        Answer::html(200, "<html><body>Proxy login required</body></html>"),
        Answer::chat(PLAN),
    ]);
    let ctx = context(&dir, "");
    // Five answers need four retries: more than a call makes, so ask twice.
    let mut meta = agent(&server, None, Duration::from_secs(5));
    let first = meta.plan_task(&ctx);
    assert_eq!(first.call.attempts, 4, "each broken answer was retried");
    assert!(
        first
            .call
            .error
            .as_deref()
            .is_some_and(|e| e.contains("gave up after 4 attempts")),
        "{:?}",
        first.call.error
    );
    let outcome = meta.plan_task(&ctx);
    assert!(outcome.reply.is_ok(), "{:?}", outcome.reply.err());
    assert_eq!((outcome.call.attempts, server.received().len()), (1, 5));

    let server = FakeOpenAi::start(vec![
        Answer::html(200, "<html>Proxy login required</html>");
        4
    ]);
    let outcome = agent(&server, None, Duration::from_secs(5)).plan_task(&ctx);
    let Err(MetaError::Failed(message)) = outcome.reply else {
        panic!("{:?}", outcome.reply.err());
    };
    assert!(
        message.contains("the response is not JSON")
            && message.contains("<html>Proxy login required</html>")
            && message.contains("gave up after 4 attempts"),
        "{message}"
    );
}

#[test]
fn client_errors_fail_at_once_with_the_api_message() {
    let dir = Scratch::new("meta-401");
    // Some APIs echo the key back; it must still not show.
    let server = FakeOpenAi::start(vec![Answer::error(
        401,
        &format!("Incorrect API key provided: {KEY}"),
    )]);
    let outcome = agent(&server, None, Duration::from_secs(10)).plan_task(&context(&dir, ""));
    let MetaError::Failed(e) = outcome.reply.unwrap_err() else {
        panic!()
    };
    assert!(
        e.starts_with("HTTP 401 from POST ") && e.ends_with("Incorrect API key provided: ***"),
        "{e}"
    );
    assert_eq!(server.received().len(), 1);
    no_key_anywhere(&[
        &e,
        outcome.call.error.as_deref().unwrap(),
        &outcome.call.request,
    ]);
}

/// Issue 41 (attack round 5, finding 3): ureq followed 301/302/303 to another host
/// and sent `x-api-key` and every `runner.meta.headers` value there (it drops only
/// `Authorization`). No wire format follows a redirect now: it fails the call at
/// once, naming where it points, and the other host gets nothing.
#[test]
fn meta_follows_no_redirect_and_sends_its_keys_nowhere_else() {
    const TEAM: &str = "team-token-fedcba9876543210";
    let elsewhere = support::destination::Destination::start("elsewhere", "127.0.0.2");
    for kind in ["openai-chat", "openai-responses", "anthropic-messages"] {
        for status in [301, 302, 303, 307, 308] {
            let dir = Scratch::new("meta-redirect");
            let location = format!("http://{}/v1/stolen", elsewhere.authority());
            let server = FakeOpenAi::start(vec![
                Answer::redirect(status, &location),
                Answer::redirect(status, &location),
            ]);
            let extra = format!(
                "runner:\n  meta:\n    kind: {kind}\n    model: m\n    base_url: {}\n    api_key: env:META_KEY\n    headers:\n      X-Team: env:TEAM_TOKEN\n",
                server.url
            );
            let yaml = format!(
                "version: 1\ntask:\n  id: meta-redirect\n  title: Meta redirect\n  prd:\n    text: Create hello.txt.\n  test:\n    command: test -f hello.txt\n{extra}"
            );
            let var = |name: &str| match name {
                "META_KEY" => Some(KEY.into()),
                "TEAM_TOKEN" => Some(TEAM.into()),
                _ => None,
            };
            let task = task::parse(
                &yaml,
                &Host {
                    var: &var,
                    cwd: Ok(dir.path.clone()),
                },
            )
            .unwrap();
            let secrets = [Secret::new(KEY.into()), Secret::new(TEAM.into())];
            let redactor = Redactor::new(&secrets);
            let backend = agent_runner_meta::open(agent_runner_meta::Opening {
                meta: &task.meta,
                worker: &task.worker,
                task_id: &task.id,
                redactor: redactor.clone(),
                interrupt: agent_runner_core::interrupt::Interrupt::never(),
                deadline: agent_runner_core::deadline::Deadline::none(),
                scratch: agent_runner_meta::CodexScratch {
                    open: agent_runner_sandbox::worker::scratch::open,
                    dir: dir.path.join("scratch"),
                    remove_after: true,
                    logs: None,
                    within: None,
                },
            })
            .unwrap();
            let outcome =
                MetaAgent::new(backend, None, redactor).plan_task(&TaskContext::new(task));
            let MetaError::Failed(e) = outcome.reply.unwrap_err() else {
                panic!("{kind} {status}: not a failure")
            };
            assert!(
                e.starts_with(&format!("HTTP {status} from POST {}", server.url))
                    && e.contains(&format!("a redirect to {location}, not followed"))
                    && e.contains("runner.meta.base_url"),
                "{kind} {status}: {e}"
            );
            assert_eq!(server.received().len(), 1, "{kind} {status}: not retried");
            assert_eq!(
                server.received()[0].header("X-Team"),
                Some(TEAM),
                "{kind}: the header went to the API itself"
            );
            no_key_anywhere(&[&e]);
        }
    }
    assert_eq!(
        elsewhere.heads(),
        Vec::<String>::new(),
        "the redirect's host got a request"
    );
}

#[test]
fn slow_replies_time_out_and_are_retried() {
    let dir = Scratch::new("meta-slow");
    let server = FakeOpenAi::start(
        (0..4)
            .map(|_| Answer::chat(PLAN).delayed(Duration::from_millis(2500)))
            .collect(),
    );
    let started = Instant::now();
    let outcome = agent(&server, None, Duration::from_secs(1)).plan_task(&context(&dir, ""));
    let MetaError::Failed(e) = outcome.reply.unwrap_err() else {
        panic!()
    };
    assert!(
        e.contains("timed out") && e.contains("gave up after 4 attempts"),
        "{e}"
    );
    assert_eq!(server.received().len(), 4);
    assert!(started.elapsed() >= Duration::from_secs(4));
}

#[test]
fn fenced_and_json_replies_are_accepted() {
    let dir = Scratch::new("meta-fence");
    let json =
        r#"{"type": "next_action", "decision": {"action": "mark_complete", "reason": "done"}}"#;
    let server = FakeOpenAi::start(vec![
        Answer::chat(&format!("```yaml\n{PLAN}```")),
        Answer::chat(&format!("```json\n{json}\n```")),
        Answer::chat(json),
    ]);
    let mut meta = agent(&server, None, Duration::from_secs(10));
    let ctx = context(&dir, "");
    assert_eq!(meta.plan_task(&ctx).reply.unwrap().criteria.len(), 2);
    assert_eq!(
        meta.next_action(&ctx).reply.unwrap().action,
        Action::MarkComplete
    );
    assert_eq!(meta.next_action(&ctx).reply.unwrap().reason, "done");
}

#[test]
fn invalid_replies_are_asked_again_with_the_error() {
    let dir = Scratch::new("meta-reask");
    let server = FakeOpenAi::start(vec![
        Answer::chat("Sure! Here is my plan: do it."),
        Answer::chat(PLAN),
    ]);
    let outcome = agent(&server, None, Duration::from_secs(10)).plan_task(&context(&dir, ""));
    assert!(outcome.reply.is_ok());
    assert_eq!(outcome.call.replies.len(), 2);
    let got = server.received();
    assert_eq!(got[1].roles(), ["system", "user", "assistant", "user"]);
    assert_eq!(got[1].message(2), "Sure! Here is my plan: do it.");
    assert!(got[1].message(3).starts_with("Your reply was invalid: `type: plan_task` is missing\nAnswer again with exactly one YAML document of type plan_task"), "{}", got[1].message(3));
}

#[test]
fn a_maximal_nested_reply_is_refused_before_it_is_parsed_and_asked_again() {
    let dir = Scratch::new("meta-nested");
    // As large as the client takes (8 MiB of body); serde_norway would spend hours on it.
    let nested = format!(
        "type: plan_task\nacceptance_criteria: {}",
        "{a: ".repeat(2_000_000)
    );
    let tagged = "type: plan_task\nacceptance_criteria: !!seq [{description: a}]\n";
    let server = FakeOpenAi::start(vec![
        Answer::chat(&nested),
        Answer::chat(tagged),
        Answer::chat(PLAN),
    ]);
    let started = Instant::now();
    let outcome = agent(&server, None, Duration::from_secs(30)).plan_task(&context(&dir, ""));
    eprintln!("two refusals and a plan in {:?}", started.elapsed());
    assert!(outcome.reply.is_ok());
    let got = server.received();
    assert_eq!(got.len(), 3);
    assert!(
        got[1].message(3).starts_with(
            "Your reply was invalid: not valid YAML: YAML nested deeper than 32 levels at line 2 column 146\n"
        ),
        "{}",
        got[1].message(3)
    );
    assert!(
        got[2].message(5).starts_with(
            "Your reply was invalid: not valid YAML: YAML tag tag:yaml.org,2002:seq refused"
        ),
        "{}",
        got[2].message(5)
    );
}

#[test]
fn wrong_type_is_asked_again() {
    let dir = Scratch::new("meta-type");
    let server = FakeOpenAi::start(vec![Answer::chat(PLAN), Answer::chat(NEXT)]);
    let outcome = agent(&server, None, Duration::from_secs(10)).next_action(&context(&dir, ""));
    assert!(outcome.reply.is_ok());
    assert!(
        server.received()[1]
            .message(3)
            .contains("`type` is \"plan_task\", expected \"next_action\"")
    );
}

#[test]
fn four_invalid_replies_fail_the_call() {
    let dir = Scratch::new("meta-garbage");
    let server = FakeOpenAi::start(
        (0..4)
            .map(|n| Answer::chat(&format!("garbage {n}")))
            .collect(),
    );
    let outcome = agent(&server, None, Duration::from_secs(10)).plan_task(&context(&dir, ""));
    let MetaError::Failed(e) = outcome.reply.unwrap_err() else {
        panic!()
    };
    assert_eq!(
        e,
        "no valid plan_task reply after 3 re-asks: expected one YAML mapping with a `type` key; the last reply began: \"garbage 3\""
    );
    assert_eq!(server.received().len(), 4);
    assert_eq!(outcome.call.attempts, 4);
}

#[test]
fn scripted_replies_in_order_then_a_clear_end() {
    let dir = Scratch::new("meta-scripted");
    let script = dir.file("script.yaml", format!("- {}\n- \"not yaml: [\"\n- type: next_action\n  decision: {{action: mark_complete, reason: ok}}\n", serde_norway::to_string(&serde_norway::from_str::<serde_norway::Value>(PLAN).unwrap()).unwrap().replace('\n', "\n  ")));
    let mut meta = MetaAgent::new(Scripted::load(&script).unwrap(), None, Redactor::default());
    let ctx = context(&dir, "");
    assert_eq!(meta.plan_task(&ctx).reply.unwrap().criteria.len(), 2);
    let outcome = meta.next_action(&ctx);
    assert_eq!(outcome.reply.unwrap().action, Action::MarkComplete);
    assert_eq!(
        outcome.call.attempts, 2,
        "the invalid entry was re-asked past"
    );
    let MetaError::Failed(e) = meta.completion_assessment(&ctx).reply.unwrap_err() else {
        panic!()
    };
    assert_eq!(
        e,
        format!(
            "the Meta script {} has no reply left (all 3 used)",
            script.display()
        )
    );
    assert!(
        Scripted::load(Path::new("/nonexistent/script.yaml"))
            .unwrap_err()
            .to_string()
            .starts_with("cannot read")
    );
    let not_list = dir.file("map.yaml", "type: plan_task\n");
    assert!(
        Scripted::load(&not_list)
            .unwrap_err()
            .to_string()
            .ends_with("expected a YAML list of Meta replies")
    );
}
