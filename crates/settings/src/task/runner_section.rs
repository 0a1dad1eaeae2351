//! A `runner:` section on its own (a workspace's defaults, SPEC §11), resolved as
//! the same keys of a TaskConfig would be, with the same checks: the Task Builder
//! and plans get Meta's settings from it, and open their Meta as `run` does
//! (`meta::open`), without writing a Task YAML to parse.

use serde_norway::Value;

use super::bounds::{self, RawBounds};
use super::build;
use super::host::Host;
use super::input_error::{InputError, InputErrors};
use super::raw::RawRunner;
use super::{Bounds, Login, MetaSettings, Shape, WorkerSettings, settings};
use agent_runner_core::secret::Secret;

/// The settings of a `runner:` section.
#[derive(Debug, Clone)]
pub struct RunnerSettings {
    pub meta: MetaSettings,
    pub worker: WorkerSettings,
    /// How the worker's agent logs in.
    pub login: Login,
    pub bounds: Bounds,
}

impl RunnerSettings {
    /// Every secret value of these settings, for masking.
    pub fn secrets(&self) -> Vec<Secret> {
        super::secrets_of(&self.meta, &self.worker, &self.login)
    }
}

/// Resolves `runner` (a JSON value: `meta`, `worker`, ...) as a TaskConfig's
/// `runner:`, every problem reported with its field path.
pub fn runner_settings(
    runner: &serde_json::Value,
    host: &Host,
) -> Result<RunnerSettings, InputErrors> {
    let mut problems = InputErrors::default();
    let value: Value = serde_norway::to_value(runner)
        .map_err(|e| InputErrors::from(InputError::new("runner", e.to_string())))?;
    let Value::Mapping(map) = &value else {
        return Err(
            InputError::new("runner", "expected a mapping with `meta` and `worker`").into(),
        );
    };
    let checked = super::structure::check_runner(map, Shape::TaskConfig, &mut problems);
    let raw: Option<RawRunner> = match serde_norway::from_value(checked.value) {
        Ok(raw) => Some(raw),
        Err(e) => {
            problems.push(InputError::new("runner", e.to_string()));
            None
        }
    };
    let settings = raw.and_then(|raw| resolve(raw, host, &mut problems));
    if let Some(settings) = &settings {
        for problem in super::argv::check(&settings.meta, &settings.worker, settings.secrets()) {
            problems.push(problem);
        }
    }
    match settings {
        Some(settings) if problems.is_empty() => Ok(settings),
        _ if problems.is_empty() => {
            Err(InputError::new("runner", "invalid settings (no details available)").into())
        }
        _ => Err(problems.into_report(&checked.covered)),
    }
}

fn resolve(raw: RawRunner, host: &Host, problems: &mut InputErrors) -> Option<RunnerSettings> {
    let bounds = bounds::bounds(
        RawBounds {
            pricing: raw.pricing,
            budget: raw.budget,
            max_stalled_loops: raw.max_stalled_loops,
        },
        problems,
    );
    // Shape v1's rule for the model: the built-in default when none is given (a
    // workspace need not name one); the worker's `type` is the TaskConfig's.
    let meta = settings::meta(raw.meta.unwrap_or_default(), Shape::V1, host, problems);
    let (worker, login) = build::worker(
        raw.worker.unwrap_or_default(),
        Shape::TaskConfig,
        meta.as_ref(),
        host,
        problems,
    );
    let meta = meta.map(|meta| build::codex_model_named(meta, worker.as_ref()));
    let bounds = build::priced(bounds, meta.as_ref(), worker.as_ref(), problems);
    Some(RunnerSettings {
        meta: meta?,
        worker: worker?,
        login: login?,
        bounds: bounds?,
    })
}
