//! No credential in what goes on a command line (`task::argv`): refused, naming
//! the field, with the way to pass it instead.

use super::*;

const V1: &str = "version: 1\ntask:\n  prd: {text: x}\n";

#[test]
fn credentials_in_extra_args_are_refused_where_they_stand() {
    for (worker, field, found) in [
        (
            "extra_args: ['-c', 'model_providers.gw={base_url=\"http://u:hunter2@gw/v1\"}']",
            "runner.worker.extra_args[1]",
            "a password in a URL",
        ),
        (
            "extra_args: ['-c', 'model_providers.gw.experimental_bearer_token=\"sk-live-0123456789\"']",
            "runner.worker.extra_args[1]",
            "a value given to `model_providers.gw.experimental_bearer_token`",
        ),
        (
            "kind: claude-code-cli\n    extra_args: ['--settings', '{\"env\": {\"ANTHROPIC_API_KEY\": \"sk-ant-0123456789\"}}']",
            "runner.worker.extra_args[1]",
            "a value given to `ANTHROPIC_API_KEY`",
        ),
        (
            // The API key of this task, spelled out.
            "extra_args: ['-c', 'x=sk-test-0123456789']",
            "runner.worker.extra_args[1]",
            "the value of a secret of this task",
        ),
        (
            "env: {HTTPS_PROXY: 'http://proxyuser:proxypass@proxy.corp:3128'}\n    network: bridge",
            "runner.worker.env.HTTPS_PROXY",
            "a password in a URL",
        ),
    ] {
        let e = err(&format!("{V1}runner:\n  worker:\n    {worker}\n"));
        assert_error(&e, field, found);
        assert!(
            e.message.contains("every user of this machine can read"),
            "{e}"
        );
        assert!(e.hint.as_deref().is_some_and(|h| !h.is_empty()), "{e}");
    }
    // Meta's codex has its own arguments.
    let e = err(&format!(
        "{V1}runner:\n  meta: {{kind: codex-cli, extra_args: ['-c', 'api_key=\"sk-0123456789abc\"']}}\n"
    ));
    assert_error(
        &e,
        "runner.meta.extra_args[1]",
        "a value given to `api_key`",
    );
}

#[test]
fn what_names_a_variable_or_is_no_credential_passes() {
    let task = ok(&format!(
        "{V1}runner:\n  worker:\n    model: gpt-5-codex\n    network: bridge\n    extra_args: ['-c', 'model_providers.gw={{name=\"gw\",base_url=\"http://gw.example/v1\",env_key=\"GW_KEY\",wire_api=\"responses\"}}', '-c', 'model_provider=gw', '--disable', 'plugins']\n    env:\n      GW_KEY: env:OPENAI_API_KEY\n      HTTPS_PROXY: http://proxy.corp:3128\n      ANTHROPIC_BASE_URL: 'http://user:pw-literal@gw.example/'\n"
    ));
    assert_eq!(task.worker.extra_args.len(), 6);
    // A literal that is not on a command line (it goes by name) is masked instead.
    assert!(
        task.secrets().iter().any(|s| s.expose() == "pw-literal"),
        "{:?}",
        task.secrets()
    );
}

#[test]
fn agent_runner_s_own_variable_names_are_refused() {
    for name in ["AGENT_RUNNER_FILE_NAME", "agent_runner_file"] {
        let e = err(&format!("{V1}runner:\n  worker:\n    env: {{{name}: x}}\n"));
        assert_error(
            &e,
            &format!("runner.worker.env.{name}"),
            "names starting with AGENT_RUNNER_ are agent-runner's own",
        );
    }
}

#[test]
fn a_codex_profile_is_refused() {
    // A profile would be a file in the container: only the worker could write it.
    for (url, arg) in [
        ("    base_url: http://gw.example/v1\n", "-p"),
        ("", "--profile"),
        ("", "--profile=mine"),
        ("", "-pmine"),
    ] {
        let e = err(&format!(
            "{V1}runner:\n  worker:\n{url}    extra_args: ['--disable', 'plugins', '{arg}', 'x']\n"
        ));
        assert_error(
            &e,
            "runner.worker.extra_args[2]",
            "codex's -p/--profile cannot be used",
        );
    }
    ok(&format!(
        "{V1}runner:\n  worker:\n    extra_args: ['--disable', 'plugins']\n"
    ));
    // Meta's codex takes the worker's arguments (refused once) or its own.
    let e = err(&format!(
        "{V1}runner:\n  meta: {{kind: codex-cli, base_url: 'http://gw.example/v1'}}\n  worker:\n    extra_args: ['--profile', 'mine']\n"
    ));
    assert_error(
        &e,
        "runner.worker.extra_args[0]",
        "codex's -p/--profile cannot be used",
    );
    let e = err(&format!(
        "{V1}runner:\n  meta: {{kind: codex-cli, extra_args: ['-c', 'x=1', '-p', 'mine']}}\n"
    ));
    assert_error(
        &e,
        "runner.meta.extra_args[2]",
        "codex's -p/--profile cannot be used",
    );
}
