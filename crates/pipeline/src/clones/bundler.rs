//! The bundler: how a succeeded isolated attempt's branch leaves its worker-written
//! clone (SPEC §9, §12). No host git command may run in that clone (its `.git/config`
//! could run code on the host), so the branch is made into a `git bundle` inside a
//! container of the worker image; the host only reads the bundle file, and checks
//! it before anything of it reaches root_dir (see `bring_back`).
//!
//! A long-lived container per orchestrator (and worker image) serves the attempts:
//! a container start costs about as much CPU as a whole scripted attempt, so one per
//! attempt slowed `--jobs 3` by 1.7x. It is started at the first isolated attempt,
//! alongside that attempt's runner, by the sandbox's backend (`backend::open`) and
//! held like the sandbox: its main process's stdin is ours, so it ends with the
//! orchestrator however that ends, and it carries the sweep's owner labels. It has no
//! network, no capabilities, the sandbox's seccomp profile (no set-id file in its
//! output) and the worker's resource limits (what it reads is the worker's: a loose
//! object that inflates to gigabytes, say), sees the workspace's `clones/` read-only
//! and an output directory of this orchestrator read-write, and takes one request
//! per line on its stdin; git never sees that stdin (a worker's link to
//! `/proc/self/fd/0` would read it).
//!
//! One attempt must not hold up the others' bring-back (a worker's 4 GiB file takes
//! a minute to hash): a request that finds every bundler busy waits `SPARE_WAIT` for
//! one, then starts another, which serves it and stays ready; one idle bundler per
//! image is kept, the others are stopped when they are done.
//!
//! Since one container reads every clone, nothing a worker wrote may steer it: the
//! clone's HEAD and refs are read as data (the HEAD file, then the ref's file or
//! `packed-refs`), and every git command runs against a private repository (our
//! config, hooks off) that borrows the clone's objects and uses its files as the
//! work tree. The clone's `.git/config`, hooks, index and info files are never read,
//! and git never runs in a submodule's repository (its config is the worker's too).

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;
use agent_runner_core::process::HeldWait;
use agent_runner_core::timestamp::human;
use agent_runner_sandbox::backend::sweep::{LABEL_TASK, owner_labels};
use agent_runner_sandbox::backend::{
    Backend, BackendError, Confinement, Instance, Main, Mount, Net, Spec,
};
use agent_runner_settings::task::{WorkerLimits, WorkerSettings};

/// Where the workspace's `clones/` is mounted in the bundler.
const CLONES_MOUNT: &str = "/clones";
/// Where the bundles go.
const OUT_MOUNT: &str = "/out";
const READY: &str = "agent-runner-bundler-ready";
const ANSWER: &str = "agent-runner-bundle ";
/// Time allowed for the container to start (the first request waits for it).
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Time allowed for one bundle.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a request waits for a busy bundler before it starts one of its own
/// (most bundles take 30–200 ms).
const SPARE_WAIT: Duration = Duration::from_secs(2);

/// The bundler's main process. Each request line is `<job-id> <task-id> <branch>
/// <have>...`: bundle the clone `/clones/<job-id>` as `<branch>`, without the
/// commits the host already has (`<have>`: the commit the clone started from, then
/// the branches merged into it). What the worker left uncommitted is committed on a
/// private index; submodules stay as the clone's HEAD has them, and `.agent-runner`
/// as the start had it. The answer is one
/// line: `agent-runner-bundle <job-id> bundled <sha>` (the bundle is
/// `/out/<job-id>.bundle`), `... unchanged <sha>` (the branch is a commit the host
/// has), or `... failed <reason>`. End-of-file ends it.
const SCRIPT: &str = agent_runner_sandbox::backend::BUNDLER_SCRIPT;

/// One bundle request.
pub(crate) struct Request<'a> {
    pub(crate) job_id: &'a str,
    pub(crate) task_id: &'a str,
    /// `agent-runner/<task-id>`.
    pub(crate) branch: &'a str,
    /// Commits the host's repository has (the clone's start, merged branches).
    pub(crate) haves: &'a [String],
    /// `runner.worker.keep_untracked`: untracked build caches stay in the branch.
    pub(crate) keep_untracked: bool,
}

/// What a request produced.
pub(crate) enum Bundled {
    /// The bundle, opened (its file is gone), and the commit the branch is.
    Bundle { file: File, commit: String },
    /// The branch is this commit, which the host has.
    Unchanged(String),
}

/// The bundlers of one orchestrator, per worker image and limits, started on use.
#[derive(Clone)]
pub(crate) struct Bundlers(Arc<Shared>);

struct Shared {
    state: Mutex<State>,
    /// Signalled when a bundler becomes idle.
    freed: Condvar,
}

struct State {
    /// Where the bundlers run.
    backend: Arc<dyn Backend>,
    clones: PathBuf,
    /// This orchestrator's directory: `out/` (the bundlers write there) and the
    /// landing repositories.
    dir: PathBuf,
    workspace_id: String,
    /// By `key`.
    pools: HashMap<String, Pool>,
}

#[derive(Default)]
struct Pool {
    idle: Vec<Bundler>,
    busy: usize,
}

struct Bundler {
    name: String,
    container: Box<dyn Instance>,
    ready: bool,
}

impl Bundlers {
    /// Bundlers for the clones in `clones`, using `dir` (a directory of this
    /// orchestrator's, created when the first one starts and removed by `stop`).
    pub(crate) fn new(clones: PathBuf, dir: PathBuf, workspace_id: &str) -> Bundlers {
        Bundlers(Arc::new(Shared {
            state: Mutex::new(State {
                backend: agent_runner_sandbox::backend::open(),
                clones,
                dir,
                workspace_id: workspace_id.to_string(),
                pools: HashMap::new(),
            }),
            freed: Condvar::new(),
        }))
    }

    /// Starts a bundler for `worker`'s image and limits if there is none yet,
    /// without waiting for it: an attempt calls this as its runner starts, so the
    /// two start side by side.
    pub(crate) fn start(&self, worker: &WorkerSettings) -> Result<(), BundlerError> {
        let mut state = self.lock()?;
        let pool = state.pools.entry(key(worker)).or_default();
        if pool.busy > 0 || !pool.idle.is_empty() {
            return Ok(());
        }
        let bundler = state.spawn(&worker.docker_image, &worker.limits)?;
        state
            .pools
            .entry(key(worker))
            .or_default()
            .idle
            .push(bundler);
        Ok(())
    }

    /// Bundles a clone's branch; the bundle is taken out of the bundlers' reach.
    pub(crate) fn bundle(
        &self,
        worker: &WorkerSettings,
        request: &Request,
        interrupt: Interrupt,
    ) -> Result<(Bundled, Vec<String>), BundlerError> {
        let image = worker.docker_image.as_str();
        let (mut bundler, out) = self.take(worker)?;
        let answer = bundler.ask(request, interrupt);
        let made = out.join(format!("{}.bundle", request.job_id));
        let left_out = out.join(format!("{}.left-out", request.job_id));
        let bundled = match answer {
            Ok(answer) => {
                self.give_back(worker, bundler);
                read_answer(&answer, image, &made)
            }
            Err(e) => {
                // Whatever state it is in, it serves no other request.
                self.give_up(worker, bundler);
                Err(explain(image, e))
            }
        };
        let _ = std::fs::remove_file(&made);
        let paths = left_out_paths(&left_out);
        let _ = std::fs::remove_file(&left_out);
        bundled.map(|bundled| (bundled, paths))
    }

    /// Where the landing repository of job `job_id` goes (a directory of ours).
    pub(crate) fn landing(&self, job_id: &str) -> PathBuf {
        let dir = self.lock().map(|s| s.dir.clone()).unwrap_or_default();
        dir.join("landing").join(job_id)
    }

    /// Stops every bundler and removes the directory.
    pub(crate) fn stop(&self) {
        let Ok(mut state) = self.lock() else { return };
        let idle: Vec<Bundler> = state
            .pools
            .values_mut()
            .flat_map(|pool| pool.idle.drain(..))
            .collect();
        let dir = state.dir.clone();
        drop(state);
        for bundler in idle {
            bundler.stop();
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    /// An idle bundler of `worker`'s, or a new one when there is none, or when all
    /// have been busy for `SPARE_WAIT`; and the output directory.
    fn take(&self, worker: &WorkerSettings) -> Result<(Bundler, PathBuf), BundlerError> {
        let key = key(worker);
        let deadline = Instant::now() + SPARE_WAIT;
        let mut state = self.lock()?;
        loop {
            let out = state.out();
            let pool = state.pools.entry(key.clone()).or_default();
            while let Some(mut bundler) = pool.idle.pop() {
                if bundler.container.is_alive() {
                    pool.busy += 1;
                    return Ok((bundler, out));
                }
                bundler.stop();
            }
            let now = Instant::now();
            if pool.busy == 0 || now >= deadline {
                let bundler = state.spawn(&worker.docker_image, &worker.limits)?;
                state.pools.entry(key).or_default().busy += 1;
                return Ok((bundler, out));
            }
            state = self
                .0
                .freed
                .wait_timeout(state, deadline - now)
                .map_err(|_| BundlerError::Poisoned)?
                .0;
        }
    }

    /// A bundler that answered goes back to the pool, or is stopped if another is
    /// idle there already.
    fn give_back(&self, worker: &WorkerSettings, bundler: Bundler) {
        let surplus = match self.lock() {
            Ok(mut state) => {
                let pool = state.pools.entry(key(worker)).or_default();
                pool.busy = pool.busy.saturating_sub(1);
                if pool.idle.is_empty() {
                    pool.idle.push(bundler);
                    None
                } else {
                    Some(bundler)
                }
            }
            Err(_) => Some(bundler),
        };
        self.0.freed.notify_one();
        if let Some(bundler) = surplus {
            bundler.stop();
        }
    }

    /// A bundler that failed a request is stopped.
    fn give_up(&self, worker: &WorkerSettings, bundler: Bundler) {
        if let Ok(mut state) = self.lock() {
            let pool = state.pools.entry(key(worker)).or_default();
            pool.busy = pool.busy.saturating_sub(1);
        }
        self.0.freed.notify_one();
        bundler.stop();
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>, BundlerError> {
        self.0.state.lock().map_err(|_| BundlerError::Poisoned)
    }
}

/// The bundle or commit an answer names; a bundle is opened without following a
/// link the container may have put there, and is its own file from then on.
fn read_answer(answer: &str, image: &str, made: &std::path::Path) -> Result<Bundled, BundlerError> {
    let mut words = answer.splitn(2, ' ');
    let (verdict, rest) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    match verdict {
        "unchanged" if is_sha(rest) => Ok(Bundled::Unchanged(rest.to_string())),
        "bundled" if is_sha(rest) => agent_runner_core::fs::read::open_regular(made, MAX_BUNDLE)
            .map(|(file, _)| Bundled::Bundle {
                file,
                commit: rest.to_string(),
            })
            .map_err(BundlerError::TakeBundle),
        "failed" => Err(explain(image, HeldWait::Ended(rest.to_string()))),
        _ => Err(BundlerError::Answer(answer.to_string())),
    }
}

/// Largest bundle brought back.
const MAX_BUNDLE: u64 = 4 << 30;

impl State {
    /// Where the bundlers write.
    fn out(&self) -> PathBuf {
        self.dir.join("out")
    }

    fn spawn(&self, image: &str, limits: &WorkerLimits) -> Result<Bundler, BundlerError> {
        let out = self.out();
        for dir in [&self.clones, &out] {
            crate::store::workspace::create_dir(dir).map_err(|source| BundlerError::CreateDir {
                path: dir.clone(),
                source,
            })?;
        }
        let name = format!(
            "agent-runner-bundler-{}-{}",
            self.workspace_id,
            crate::store::id::random_hex(6)
        );
        let mut spec = Spec::new(image, Main::shell(SCRIPT, []));
        spec.name = Some(name.clone());
        // The sandbox's labels: the start-up sweep removes it if this process dies
        // without taking it down (its pipe normally does).
        spec.labels = vec![(LABEL_TASK.to_string(), label_value(&self.workspace_id))];
        spec.labels.extend(
            owner_labels(&Owner::this_process())
                .into_iter()
                .map(|(label, value)| (label.to_string(), value)),
        );
        spec.held = true;
        spec.network = Net::Isolated;
        spec.confinement = Some(Confinement { keep: &[] });
        spec.limits = Some(limits.clone());
        spec.as_user = true;
        spec.mounts = vec![
            Mount::new(&self.clones, CLONES_MOUNT, true),
            Mount::new(&out, OUT_MOUNT, false),
        ];
        let started = self.backend.start(&spec).map_err(BundlerError::Start)?;
        log::info!("bundler {name} starting ({image})");
        Ok(Bundler {
            name,
            container: started.instance,
            ready: false,
        })
    }
}

/// Which bundler serves `worker`: one per image and limits.
fn key(worker: &WorkerSettings) -> String {
    format!("{}\0{:?}", worker.docker_image, worker.limits)
}

/// The `agent-runner.task` label of a workspace's bundlers.
pub(crate) fn label_value(workspace_id: &str) -> String {
    format!("bundler-{workspace_id}")
}

impl Bundler {
    /// Sends `request` and waits for its answer (after the ready line, the first time).
    fn ask(&mut self, request: &Request, interrupt: Interrupt) -> Result<String, HeldWait> {
        if !self.ready {
            self.container.read_line(READY, START_TIMEOUT, interrupt)?;
            self.ready = true;
        }
        let line = format!(
            "{} {} {} {} {}",
            request.job_id,
            request.task_id,
            request.branch,
            if request.keep_untracked {
                "keep"
            } else {
                "drop"
            },
            request.haves.join(" ")
        );
        if self.container.send_line(&line).is_err() {
            return Err(HeldWait::Ended(self.container.stderr()));
        }
        let prefix = format!("{ANSWER}{} ", request.job_id);
        self.container
            .read_line(&prefix, REQUEST_TIMEOUT, interrupt)
    }

    /// Ends the container: closing its stdin ends its script, and `--rm` removes it.
    fn stop(self) {
        let removal = self.container.remove(Duration::from_secs(10));
        if removal.left {
            log::warn!(
                "bundler {} was not confirmed removed within {}: the next sweep of its host removes it",
                self.name,
                human(removal.took)
            );
        } else {
            log::debug!("bundler {} removed in {}", self.name, human(removal.took));
        }
    }
}

/// The paths the bundler left out of the branch: NUL-separated in a file the
/// bundler wrote (read bounded, as any file of a container's).
fn left_out_paths(file: &std::path::Path) -> Vec<String> {
    let bytes = agent_runner_core::fs::read::whole(file, MAX_LEFT_OUT).unwrap_or_default();
    bytes
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| agent_runner_core::text::escape_controls(&String::from_utf8_lossy(p)))
        .collect()
}

/// Largest list of left-out paths read.
const MAX_LEFT_OUT: u64 = 4 << 20;

/// The message for a request that got no answer, or a failed one.
fn explain(image: &str, wait: HeldWait) -> BundlerError {
    let detail = match wait {
        HeldWait::Interrupted => return BundlerError::Interrupted,
        HeldWait::TimedOut => format!("no answer within {}", human(REQUEST_TIMEOUT)),
        HeldWait::Ended(stderr) => agent_runner_core::text::tail(stderr.trim(), 600),
    };
    let image = image.to_string();
    if detail.contains("git: not found") || detail.contains("\"git\": executable file not found") {
        return BundlerError::NoGit { image, detail };
    }
    BundlerError::Failed { image, detail }
}

/// Why a branch was not bundled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BundlerError {
    #[error("the bundlers are unusable after a crash of another attempt")]
    Poisoned,
    #[error("interrupted")]
    Interrupted,
    #[error("the worker image {image} has no git, which bundling the branch needs: {detail}")]
    NoGit { image: String, detail: String },
    /// `detail`: no answer in time, or the tail of the bundler's stderr.
    #[error("bundling the branch in a container of {image} failed: {detail}")]
    Failed { image: String, detail: String },
    #[error("cannot take the bundle from the bundler: {0}")]
    TakeBundle(std::io::Error),
    #[error("the bundler answered {0:?}")]
    Answer(String),
    #[error("cannot create {}: {source}", .path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start a bundler container: {0}")]
    Start(BackendError),
}

fn is_sha(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}
