//! `runner.meta` of `kind: codex-cli` (SPEC §18): Meta as one `codex exec` per
//! request in the sandbox image. It uses the worker's image, network, allow list and
//! limits, and the worker's codex model, arguments and environment when the worker
//! is codex too, unless `runner.meta` says otherwise; it logs in as codex on this host
//! does (the worker's login when the worker is codex).

use std::time::Duration;

use super::{Login, WorkerEnv, WorkerSettings};
use crate::agent::Kind;
use crate::agent::codex::CODEX;

/// `runner.meta` of `kind: codex-cli`, as given (`worker_settings` fills in the
/// rest from the worker).
#[derive(Debug, Clone)]
pub struct CodexMeta {
    /// codex's login on this host.
    pub login: Login,
    /// `runner.meta.model` (codex's `-m`); None: codex's own default.
    pub model: Option<String>,
    /// `runner.meta.base_url` (codex's `openai_base_url`).
    pub(crate) base_url: Option<String>,
    pub(crate) docker_image: Option<String>,
    pub(crate) extra_args: Option<Vec<String>>,
    pub env: Option<Vec<WorkerEnv>>,
}

impl CodexMeta {
    /// codex's `-m` next to `worker`: Meta's own, else the worker's when the worker is
    /// codex too; None: codex's own default, whose name (and price) is not known.
    pub(crate) fn model_next_to(&self, worker: &WorkerSettings) -> Option<String> {
        match &self.model {
            Some(model) => Some(model.clone()),
            None if worker.kind.name() == CODEX.name() => worker.model.clone(),
            None => None,
        }
    }

    /// The settings Meta's codex runs with, next to `worker`; each run may take up
    /// to `timeout` (`runner.meta.timeout_sec`), with or without output.
    pub fn worker_settings(&self, worker: &WorkerSettings, timeout: Duration) -> WorkerSettings {
        let same_cli = worker.kind.name() == CODEX.name();
        WorkerSettings {
            kind: &CODEX,
            docker_image: self
                .docker_image
                .clone()
                .unwrap_or_else(|| worker.docker_image.clone()),
            agent_from: worker.agent_from,
            max_run_time: timeout,
            idle_timeout: timeout,
            model: self.model_next_to(worker),
            extra_args: inherited(&self.extra_args, &worker.extra_args, same_cli),
            base_url: self.base_url.clone(),
            network: worker.network,
            allow: worker.allow.clone(),
            env: inherited(&self.env, &worker.env, same_cli),
            limits: worker.limits.clone(),
            // Meta's codex answers in an empty directory: no cache of the repository's.
            caches: Vec::new(),
            keep_untracked: worker.keep_untracked,
            transport: worker.transport,
            // Meta answers with its own knowledge: the worker's tools are the worker's.
            mcp_servers: Vec::new(),
            runtime: worker.runtime.clone(),
        }
    }
}

/// Meta's own setting, else the worker's when both are codex, else none.
fn inherited<T: Clone>(own: &Option<Vec<T>>, workers: &[T], same_cli: bool) -> Vec<T> {
    match own {
        Some(own) => own.clone(),
        None if same_cli => workers.to_vec(),
        None => Vec::new(),
    }
}
