//! Raw document → `Task`: the `task` section's rules (id, title, repo, PRD, tests,
//! acceptance criteria) for both shapes, the runner settings, the agents' logins, and the
//! masking of secrets in the texts the task carries. Every problem is recorded; a
//! task is built only when there is none.

use std::path::Path;

use super::auth;
use super::bounds::{self, RawBounds};
use super::document::RawDocument;
use super::fields::{non_empty, one_line, required, seconds};
use super::host::Host;
use super::input_error::{InputError, InputErrors};
use super::paths::{prd_file, relative_dir, repo_dir};
use super::raw::{RawPrd, RawRunner, RawSetup, RawTaskConfig, RawTaskV1, RawTest, RawWorker};
use super::settings;
use super::structure::inline;
use super::{
    Bounds, DEFAULT_TEST_TIMEOUT_SEC, Login, MAX_ACCEPTANCE_CRITERIA, MetaBackend, MetaSettings,
    Prd, PrdSource, SetupSpec, Shape, Task, TestSpec, WorkerSettings,
};
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::cut_chars;

/// The task, or `None` when `problems` has gained a problem.
pub fn task(raw: RawDocument, host: &Host, problems: &mut InputErrors) -> Option<Task> {
    let task = match raw {
        RawDocument::V1(raw) => from_v1(raw, host, problems),
        RawDocument::TaskConfig(raw) => from_task_config(raw, host, problems),
    };
    task.map(masked)
}

fn from_v1(raw: RawTaskV1, host: &Host, problems: &mut InputErrors) -> Option<Task> {
    match &raw.version {
        Some(serde_norway::Value::Number(n)) if n.as_u64() == Some(1) => {}
        Some(other) => problems.push(InputError::new(
            "version",
            format!("must be 1 (got {})", inline(other)),
        )),
        None => problems.push(InputError::new("version", "must be 1 (got null)")),
    }
    let section = raw.task.unwrap_or_default();
    let id = problems.take(task_id(section.id));
    let title = problems.take(title(section.title, false));
    // The repo first (the PRD may not be linked out of it), its problems reported
    // after the PRD's, in the document's order.
    let repo = repo_dir(section.repo.as_deref().unwrap_or("."), "task.repo", host);
    let prd = prd(section.prd, host, repo.as_deref().ok(), problems);
    let test = test_spec(section.test, problems);
    let criteria = problems.take(acceptance_criteria(section.acceptance_criteria));
    let repo = problems.take(repo);
    let runner = raw.runner.unwrap_or_default();
    let runner = runner_parts(runner, section.setup, Shape::V1, host, problems);
    let (id, id_generated) = id?;
    Some(Task {
        shape: Shape::V1,
        title: title?.unwrap_or_else(|| id.clone()),
        id,
        id_generated,
        repo: repo?,
        prd: prd?,
        test,
        setup: runner.setup?,
        acceptance_criteria: criteria?,
        meta: runner.meta?,
        worker: runner.worker?,
        login: runner.login?,
        bounds: runner.bounds?,
        sandbox_host: runner.sandbox_host?,
    })
}

/// What the `runner` section makes of a task, with `task.setup` (whose allow
/// rules depend on the worker's network).
struct RunnerParts {
    setup: Option<Option<SetupSpec>>,
    bounds: Option<Bounds>,
    meta: Option<MetaSettings>,
    worker: Option<WorkerSettings>,
    login: Option<Login>,
    sandbox_host: Option<Option<String>>,
}

/// The `runner` section and `task.setup` of either shape, read in one order so that
/// both report their problems alike, in the document's order. The shapes differ
/// only in what is required: a TaskConfig names `runner.meta` and `runner.worker`,
/// a v1 task may leave them to their defaults.
fn runner_parts(
    runner: RawRunner,
    setup: Option<RawSetup>,
    shape: Shape,
    host: &Host,
    problems: &mut InputErrors,
) -> RunnerParts {
    let must_name = matches!(shape, Shape::TaskConfig);
    let setup = super::setup::setup_spec(setup, network_of(&runner), host, problems);
    let bounds = bounds::bounds(
        RawBounds {
            pricing: runner.pricing,
            budget: runner.budget,
            max_stalled_loops: runner.max_stalled_loops,
        },
        problems,
    );
    let meta = match runner.meta {
        None if must_name => problems.take(Err(required("runner.meta"))),
        meta => settings::meta(meta.unwrap_or_default(), shape, host, problems),
    };
    let (worker, login) = match runner.worker {
        None if must_name => (problems.take(Err(required("runner.worker"))), None),
        raw => worker(
            raw.unwrap_or_default(),
            shape,
            meta.as_ref(),
            host,
            problems,
        ),
    };
    let sandbox_host = sandbox_host(runner.sandbox.as_ref(), problems);
    let worker = with_transport(worker, runner.sandbox, problems);
    let meta = meta.map(|meta| codex_model_named(meta, worker.as_ref()));
    let bounds = priced(bounds, meta.as_ref(), worker.as_ref(), problems);
    RunnerParts {
        setup,
        bounds,
        meta,
        worker,
        login,
        sandbox_host,
    }
}

/// `runner.worker.network` as written, when it is one we know (for the rules of
/// `task.setup.allow`; the worker's own section reports a bad one).
fn network_of(runner: &RawRunner) -> Option<super::Network> {
    use super::Network;
    let network = runner.worker.as_ref().map(|w| w.network.as_deref());
    match network.flatten() {
        None => Some(Network::Allowlist),
        Some("allowlist") => Some(Network::Allowlist),
        Some("none") => Some(Network::None),
        Some("host") => Some(Network::Host),
        Some("bridge") => Some(Network::Bridge),
        Some(_) => None,
    }
}

/// `runner.worker` and the login of its agent. The login is resolved first (the
/// default allow list depends on it) and its problem recorded after the worker's,
/// in the document's order.
pub(crate) fn worker(
    raw: RawWorker,
    shape: Shape,
    meta: Option<&MetaSettings>,
    host: &Host,
    problems: &mut InputErrors,
) -> (Option<WorkerSettings>, Option<Login>) {
    let kind = settings::worker_kind(&raw, shape, problems);
    let login = kind.map(|kind| auth::resolve(kind, host));
    let worker = settings::worker(
        raw,
        kind,
        host,
        login.as_ref().and_then(|l| l.as_ref().ok()),
        meta.map(|m| &m.backend),
        problems,
    );
    (worker, login.and_then(|l| problems.take(l)))
}

/// The worker's settings with `runner.sandbox.transport`.
fn with_transport(
    worker: Option<WorkerSettings>,
    raw: Option<super::raw::RawSandbox>,
    problems: &mut InputErrors,
) -> Option<WorkerSettings> {
    let runtime = super::mcp::runtime(raw.as_ref().and_then(|r| r.runtime.clone()), problems);
    let transport = settings::transport(raw, problems)?;
    let runtime = runtime?;
    worker.map(|w| WorkerSettings {
        transport,
        runtime,
        ..w
    })
}

fn from_task_config(raw: RawTaskConfig, host: &Host, problems: &mut InputErrors) -> Option<Task> {
    let Some(section) = raw.task else {
        problems.push(required("task"));
        return None;
    };
    let id = match non_empty(section.id) {
        None => problems.take(Err(required("task.id"))),
        Some(id) => problems.take(task_id(Some(id))).map(|(id, _)| id),
    };
    let title = problems.take(title(section.title, true)).flatten();
    let text = non_empty(section.instructions);
    if text.is_none() {
        problems.push(required("task.instructions"));
    }
    let repo = match section.project.and_then(|p| non_empty(p.root_dir)) {
        None => problems.take(Err(required("task.project.root_dir"))),
        Some(root_dir) => problems.take(repo_dir(&root_dir, "task.project.root_dir", host)),
    };
    let test = test_spec(section.test, problems);
    let criteria = problems.take(acceptance_criteria(section.acceptance_criteria));
    let runner = raw.runner;
    if runner.is_none() {
        problems.push(required("runner"));
    }
    let runner = runner.unwrap_or_default();
    let runner = runner_parts(runner, section.setup, Shape::TaskConfig, host, problems);
    Some(Task {
        shape: Shape::TaskConfig,
        id: id?,
        id_generated: false,
        title: title?,
        repo: repo?,
        prd: Prd {
            source: PrdSource::Inline,
            text: text?,
        },
        test,
        setup: runner.setup?,
        acceptance_criteria: criteria?,
        meta: runner.meta?,
        worker: runner.worker?,
        login: runner.login?,
        bounds: runner.bounds?,
        sandbox_host: runner.sandbox_host?,
    })
}

/// `runner.sandbox.host` as written (checked by the CLI as it reads a task:
/// `backend` builds on this module, so the check cannot live here).
fn sandbox_host(
    sandbox: Option<&super::raw::RawSandbox>,
    _problems: &mut InputErrors,
) -> Option<Option<String>> {
    Some(sandbox.and_then(|s| s.host.clone()))
}

/// Meta's settings, its model named as Meta's codex will run it: the worker's when
/// Meta's codex takes it from a codex worker.
pub(crate) fn codex_model_named(
    mut meta: MetaSettings,
    worker: Option<&WorkerSettings>,
) -> MetaSettings {
    if let (MetaBackend::CodexCli(codex), Some(worker)) = (&meta.backend, worker)
        && let Some(model) = codex.model_next_to(worker)
    {
        meta.model = model;
    }
    meta
}

/// `bounds`, unless a cost limit meets a model without a price (recorded).
pub(crate) fn priced(
    bounds: Option<Bounds>,
    meta: Option<&MetaSettings>,
    worker: Option<&WorkerSettings>,
    problems: &mut InputErrors,
) -> Option<Bounds> {
    let bounds = bounds?;
    if let (Some(meta), Some(worker)) = (meta, worker)
        && let Some(problem) = bounds::unpriced(&bounds, meta, worker)
    {
        problems.push(problem);
        return None;
    }
    Some(bounds)
}

/// `(id, generated)`; the id becomes part of a file name and a container name.
fn task_id(id: Option<String>) -> Result<(String, bool), InputError> {
    let Some(id) = non_empty(id) else {
        return Ok((uuid::Uuid::new_v4().to_string(), true));
    };
    if !super::id::is_valid(&id) {
        return Err(InputError::new(
            "task.id",
            format!("must be {} (got {:?})", super::id::RULE, cut_chars(&id, 60)),
        )
        .with_hint("the id names the Task Note file, the container and the branch"));
    }
    Ok((id, false))
}

/// `task.title`: one line; `None` when absent and not required.
fn title(title: Option<String>, required_here: bool) -> Result<Option<String>, InputError> {
    match non_empty(title) {
        Some(title) => one_line(title, "task.title").map(Some),
        None if required_here => Err(required("task.title")),
        None => Ok(None),
    }
}

/// `task.prd` of shape v1: exactly one of `path` and `text`.
/// `task.prd`; `repo` (when valid) is where a PRD file may not be linked out of.
fn prd(
    raw: Option<RawPrd>,
    host: &Host,
    repo: Option<&Path>,
    problems: &mut InputErrors,
) -> Option<Prd> {
    let Some(raw) = raw else {
        problems.push(
            InputError::new("task.prd", "required: give `path` or `text`")
                .with_hint("task:\n  prd:\n    path: ./docs/TASK.md"),
        );
        return None;
    };
    let result = match (non_empty(raw.path), non_empty(raw.text)) {
        (Some(path), None) => prd_file(&path, host, repo),
        (None, Some(text)) => Ok(Prd {
            source: PrdSource::Inline,
            text,
        }),
        (Some(_), Some(_)) => Err(InputError::new(
            "task.prd",
            "give exactly one of `path` and `text` (got both)",
        )),
        (None, None) => Err(InputError::new(
            "task.prd",
            "give exactly one of `path` and `text` (got neither, or both empty)",
        )),
    };
    problems.take(result)
}

/// `task.test`, each of its problems recorded (None when absent or invalid).
fn test_spec(raw: Option<RawTest>, problems: &mut InputErrors) -> Option<TestSpec> {
    let raw = raw?;
    let command = problems.take(non_empty(raw.command).ok_or_else(|| {
        InputError::new(
            "task.test.command",
            "required when `task.test` is present (got empty)",
        )
    }));
    let cwd = problems.take(relative_dir(
        raw.cwd.as_deref().unwrap_or("."),
        "task.test.cwd",
    ));
    let timeout = problems.take(seconds(
        raw.timeout_sec,
        DEFAULT_TEST_TIMEOUT_SEC,
        "task.test.timeout_sec",
    ));
    Some(TestSpec {
        command: command?,
        cwd: cwd?,
        timeout: timeout?,
    })
}

/// `task.acceptance_criteria`: at most `MAX_ACCEPTANCE_CRITERIA` non-blank strings.
fn acceptance_criteria(raw: Option<Vec<String>>) -> Result<Vec<String>, InputError> {
    let criteria = raw.unwrap_or_default();
    if criteria.len() > MAX_ACCEPTANCE_CRITERIA {
        return Err(InputError::new(
            "task.acceptance_criteria",
            format!(
                "at most {MAX_ACCEPTANCE_CRITERIA} criteria (got {})",
                criteria.len()
            ),
        ));
    }
    if let Some(n) = criteria.iter().position(|c| c.trim().is_empty()) {
        return Err(InputError::new(
            format!("task.acceptance_criteria[{n}]"),
            "must not be empty",
        ));
    }
    Ok(criteria.into_iter().map(|c| c.trim().to_string()).collect())
}

/// The task with its secrets masked in every text it carries to Meta, the note and
/// `validate`, before anything cuts those texts (SPEC §10): a cut can then never
/// leave a prefix of a secret.
fn masked(mut task: Task) -> Task {
    let redactor = Redactor::new(&task.secrets());
    if redactor.is_empty() {
        return task;
    }
    task.title = redactor.redact(&task.title);
    task.prd.text = redactor.redact(&task.prd.text);
    for criterion in &mut task.acceptance_criteria {
        *criterion = redactor.redact(criterion);
    }
    if let Some(prompt) = &mut task.meta.system_prompt {
        *prompt = redactor.redact(prompt);
    }
    task
}
