//! Before any run of an evaluation: each config in play made into the TaskConfig
//! its runs will get (the workspace's defaults, the config's runner settings over
//! them) and read by the runner's own parser against this machine (files, the
//! environment), and the images its runs and the graders need found where they
//! will run. A config that cannot run is named with the field at fault and nothing
//! runs: otherwise each of its runs would end as an agent_failed or an infra_error
//! that says nothing of the config (a misspelt script, an image nobody built).
//!
//! Only what is the same on every run is checked here; a host lost or an image
//! missing on one host of several stays the run's infra_error (retried elsewhere).

use std::collections::BTreeMap;
use std::time::Duration;

use super::error::EvalError;
use super::suite::{Config, Suite};
use crate::Workspace;
use crate::orchestrator::task_config::{self, Invariants};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_sandbox::backend::engine::{ImageAnswer, PullError};
use agent_runner_sandbox::backend::host::HostSpec;
use agent_runner_sandbox::backend::{Backend, BackendError};

/// Longest a host's image lookup may take.
const LOOKUP: Duration = Duration::from_secs(30);
/// Longest a `docker pull` on a host may take.
const PULL: Duration = Duration::from_secs(600);

/// Checks `configs` (with their index in the suite) and the suite's grader images
/// on `hosts` (none: the default daemon, through `backend`).
pub(crate) fn check(
    ws: &Workspace,
    suite: &Suite,
    configs: &[(usize, &Config)],
    hosts: &[HostSpec],
    backend: &dyn Backend,
    interrupt: Interrupt,
) -> Result<(), EvalError> {
    let mut problems = Vec::new();
    // image → the fields that name it, for one lookup per image.
    let mut images: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (i, config) in configs {
        match task_of(ws, suite, config) {
            Ok(task) => images
                .entry(task.worker.docker_image.clone())
                .or_default()
                .push(image_field(*i, config)),
            Err(errors) => problems.extend(
                errors
                    .into_iter()
                    .map(|e| format!("config {}: {}", config.name, in_suite(*i, &e))),
            ),
        }
    }
    for (i, case) in suite.cases.iter().enumerate() {
        images
            .entry(case.grader.image.clone())
            .or_default()
            .push(format!(
                "case {}: cases[{i}].grader.image (or the suite's image)",
                case.id
            ));
    }
    if problems.is_empty() {
        for (image, fields) in &images {
            if interrupt.is_set() {
                return Err(EvalError::Interrupted);
            }
            if let Err(why) = available(image, hosts, backend, interrupt) {
                problems.push(format!("{}: {why}", fields.join(", ")));
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(EvalError::CannotRun {
        path: suite.path.clone(),
        problems,
    })
}

/// The field a config's worker image comes from: its own, else the defaults'.
fn image_field(i: usize, config: &Config) -> String {
    let unset = if config.runner["worker"]["docker_image"].is_string() {
        ""
    } else {
        " (unset: the workspace's default or agent-runner's)"
    };
    format!(
        "config {}: configs[{i}].runner.worker.docker_image{unset}",
        config.name
    )
}

/// A TaskConfig problem at `runner.…` as the config's field.
fn in_suite(i: usize, problem: &str) -> String {
    match problem.strip_prefix("runner.") {
        Some(rest) => format!("configs[{i}].runner.{rest}"),
        None => problem.to_string(),
    }
}

/// The task a run of `config` gets, as the orchestrator builds its TaskConfig
/// (`attempt.rs`), read as `agent-runner run` reads it; else each problem as
/// `field: message`.
fn task_of(
    ws: &Workspace,
    suite: &Suite,
    config: &Config,
) -> Result<agent_runner_settings::task::Task, Vec<String>> {
    let invariants = Invariants {
        task_id: "eval-preflight",
        title: "an evaluation's config, checked",
        raw_prompt: "an evaluation's config, checked",
        root_dir: &ws.root_dir,
        acceptance_criteria: &[],
        test: None,
        setup: ws.defaults.setup(),
    };
    let draft = crate::store::eval_task::draft(invariants.raw_prompt);
    let yaml = task_config::complete(draft, &invariants, ws.defaults.runner.as_ref())
        .and_then(|yaml| task_config::with_runner(&yaml, &suite.runner_of(config)))
        .map_err(|e| vec![format!("runner: {e}")])?;
    let var = |name: &str| std::env::var_os(name);
    let host = agent_runner_settings::task::Host {
        var: &var,
        cwd: Ok(ws.root_dir.clone()),
    };
    agent_runner_settings::task::parse(&yaml, &host).map_err(|errors| {
        errors
            .iter()
            .map(|e| format!("{}: {}", e.path(), e.message))
            .collect()
    })
}

/// Why an image the suite needs is where none of its runs can start.
#[derive(Debug, thiserror::Error)]
enum Unavailable {
    /// The default daemon's pull.
    #[error(transparent)]
    Pull(#[from] BackendError),
    /// `hosts`: those that answered, none having it; `host`: the first, whose
    /// pull failed (the end of its stderr).
    #[error(
        "docker image {image} is on none of the hosts ({hosts}) and `docker pull` on {host} failed: {stderr}"
    )]
    PullOnHost {
        image: String,
        hosts: String,
        host: String,
        stderr: String,
    },
    /// The host's pull could not be asked.
    #[error("docker image {image}: {detail}")]
    Call { image: String, detail: String },
}

/// Ok when `image` is on one of `hosts` that answers (pulled on the first that
/// answers when none has it), or on the default daemon without hosts; else why
/// not. A daemon that does not answer proves nothing: its runs say it.
fn available(
    image: &str,
    hosts: &[HostSpec],
    backend: &dyn Backend,
    interrupt: Interrupt,
) -> Result<(), Unavailable> {
    if hosts.is_empty() {
        return match backend.has_image(image, interrupt) {
            Ok(true) | Err(_) => Ok(()),
            Ok(false) => Ok(backend.pull(image, interrupt)?),
        };
    }
    // An engine that cannot tell (a cluster pulls its images itself): its runs say
    // it when the image is not where it pulls (SPEC §25). Nothing the others
    // answer changes that, so they are not asked.
    if hosts.iter().any(|h| !h.target.tells_images()) {
        return Ok(());
    }
    let mut answered = Vec::new();
    for host in hosts {
        match host.target.has_image(image, LOOKUP, interrupt) {
            ImageAnswer::Present | ImageAnswer::CannotTell => return Ok(()),
            ImageAnswer::Missing => answered.push(host),
            ImageAnswer::NoAnswer => {}
        }
    }
    let Some(first) = answered.first() else {
        return Ok(());
    };
    match first.target.pull(image, PULL, interrupt) {
        Ok(()) => Ok(()),
        Err(PullError::Refused(stderr)) => Err(Unavailable::PullOnHost {
            image: image.to_string(),
            hosts: answered
                .iter()
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            host: first.name.clone(),
            stderr: agent_runner_core::text::cut_chars(stderr.trim(), 300),
        }),
        Err(PullError::Call(e)) => Err(Unavailable::Call {
            image: image.to_string(),
            detail: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A pool with a cluster in it is not checked beforehand: the cluster's runs
    /// say it when the image is missing. Its daemons are not asked either (one
    /// that hangs would hold the evaluation up to `LOOKUP` per image for nothing).
    #[test]
    fn a_pool_with_a_cluster_asks_none_of_its_daemons() {
        let dir =
            std::env::temp_dir().join(format!("ar-preflight-{}", crate::store::id::random_hex(8)));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("daemon.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        listener.set_nonblocking(true).unwrap();
        let host = |name: &str, target: &str| HostSpec::parse_flag(&format!("{name}={target}"));
        let hosts = [
            host("d", &format!("unix://{}", socket.display())).unwrap(),
            host("k", "k8s://c/n").unwrap(),
        ];
        let backend = agent_runner_sandbox::backend::Docker::default();
        let checked = available("img:1", &hosts, &backend, Interrupt::never());
        let asked = listener.accept().is_ok();
        std::fs::remove_dir_all(&dir).ok();
        assert!(checked.is_ok());
        assert!(!asked, "the daemon was asked");
    }
}
