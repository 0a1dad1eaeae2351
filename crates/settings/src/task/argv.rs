//! What of a task goes on a command line, and the rule that no credential does
//! (SPEC §6.1): every local user of the host can read every process's argv
//! (`/proc/<pid>/cmdline`), the container's processes included. Values reach the
//! container by name and files through the envelope (`worker::container::env`,
//! `worker::envelope::PrivateFile`): base URLs, keys, every `env` value, the test
//! command. What must stay on a command line is checked here: the agents'
//! `extra_args` (the worker's, Meta's codex's), the models, and the literal values
//! of the variables the docker client reads itself (`worker_env::RESERVED`). A
//! credential there (`secret::credential_in`, or a secret's value) is refused,
//! naming the field, with the way to pass it instead. So is what would undo the
//! way a kind keeps one off its command line (`Kind::refused_arg`).

use super::input_error::InputError;
use super::worker_env::RESERVED;
use super::{EnvValue, MetaBackend, MetaSettings, WorkerEnv, WorkerSettings};
use crate::agent::RunSpec;
use agent_runner_core::secret::{Secret, credential_in};

/// Secret values shorter than this are not looked for (a common word would be
/// found everywhere).
const MIN_SECRET_LEN: usize = 8;

/// Every credential in what goes on a command line of a task with `meta` and
/// `worker` (whose secret values are `secrets`), as problems.
pub fn check(
    meta: &MetaSettings,
    worker: &WorkerSettings,
    secrets: Vec<Secret>,
) -> Vec<InputError> {
    let secrets: Vec<Secret> = secrets
        .into_iter()
        .filter(|s| s.expose().len() >= MIN_SECRET_LEN)
        .collect();
    let mut problems = Vec::new();
    let mut look = |field: String, value: &str, how: &str| {
        let found = credential_in(value).or_else(|| {
            secrets
                .iter()
                .any(|s| value.contains(s.expose()))
                .then(|| "the value of a secret of this task".to_string())
        });
        if let Some(found) = found {
            problems.push(
                InputError::new(
                    field,
                    format!(
                        "holds a credential ({found}); it would go on a command line, \
                         which every user of this machine can read"
                    ),
                )
                .with_hint(how.to_string()),
            );
        }
    };
    let args_how = "pass it in runner.worker.env as env:VAR (it reaches the container by \
                    name) and name the variable here: for codex, a provider's `env_key` \
                    or `env_http_headers`; a base URL goes in base_url";
    for (n, arg) in worker.extra_args.iter().enumerate() {
        look(format!("runner.worker.extra_args[{n}]"), arg, args_how);
    }
    if let Some(model) = &worker.model {
        look("runner.worker.model".into(), model, "a model is a name");
    }
    env_on_command_line(&worker.env, "runner.worker.env", &mut look);
    if let MetaBackend::CodexCli(codex) = &meta.backend {
        for (n, arg) in codex.extra_args.iter().flatten().enumerate() {
            look(format!("runner.meta.extra_args[{n}]"), arg, args_how);
        }
        if let Some(model) = &codex.model {
            look("runner.meta.model".into(), model, "a model is a name");
        }
        env_on_command_line(codex.env.iter().flatten(), "runner.meta.env", &mut look);
    }
    problems.extend(refused_args(meta, worker));
    problems
}

/// Literal values of names the docker client reads: the only values on its
/// command line.
fn env_on_command_line<'a>(
    env: impl IntoIterator<Item = &'a WorkerEnv>,
    section: &str,
    look: &mut impl FnMut(String, &str, &str),
) {
    for entry in env {
        if let EnvValue::Literal(value) = &entry.value
            && RESERVED.contains(&entry.name)
        {
            look(
                format!("{section}.{}", entry.name),
                value,
                "the docker client reads this name itself, so its value goes on the \
                     docker command line: give this one without the credential",
            );
        }
    }
}

/// Arguments that would undo how a kind keeps a setting off its command line.
fn refused_args(meta: &MetaSettings, worker: &WorkerSettings) -> Vec<InputError> {
    let check = |kind: &dyn crate::agent::Kind,
                 args: &[String],
                 url: Option<&str>,
                 field: &str,
                 whose: &str| {
        let run = RunSpec {
            model: None,
            extra_args: args,
            base_url: url,
            workdir: "",
            root: false,
            mcp_servers: &[],
            settings_path: "",
        };
        kind.refused_arg(&run)
            .map(|(n, why)| InputError::new(format!("{field}[{n}]"), format!("{why}{whose}")))
    };
    let mut problems: Vec<InputError> = check(
        worker.kind,
        &worker.extra_args,
        worker.base_url.as_deref(),
        "runner.worker.extra_args",
        "",
    )
    .into_iter()
    .collect();
    if let MetaBackend::CodexCli(codex) = &meta.backend {
        let settings = codex.worker_settings(worker, meta.timeout);
        let (field, whose) = match codex.extra_args {
            Some(_) => ("runner.meta.extra_args", ""),
            // The worker's arguments, refused already, are not refused twice.
            None if !problems.is_empty() => return problems,
            None => (
                "runner.worker.extra_args",
                " (Meta's codex takes the worker's arguments)",
            ),
        };
        problems.extend(check(
            settings.kind,
            &settings.extra_args,
            settings.base_url.as_deref(),
            field,
            whose,
        ));
    }
    problems
}
