//! The repository copied to the sandbox's host (SPEC §22): nothing of this
//! machine's filesystem is mounted, so the daemon may be anywhere.
//!
//! In (`prepare`, once): a clone of what the run needs is made on this machine in
//! a repository of ours (`git init`, the user's objects borrowed as data, HEAD's
//! commit as the branch `agent-runner/<id>`, repacked so it borrows nothing, its
//! index read from HEAD), and the working tree's files as they are (what the user
//! has not committed too; `.git` and `.agent-runner/` left out) go with it into a
//! per-attempt volume on the daemon's host as ONE tar stream (`tar.rs`: links as
//! links, nothing outside the tree read, owners and modes kept, the volume's root
//! included) into one `docker cp -a -` through a container created (never started)
//! from the tools' empty image. The sandbox mounts that volume at
//! `PROJECT_DIR`; the user's `.git/config`, hooks and other branches never leave
//! this machine.
//!
//! Out (`finish`, the sandbox gone): the bundler (`bundler.sh`, the pipeline's) in
//! a container of the worker's image on the same host, no network, no
//! capabilities, the volume mounted READ-ONLY, bundles the branch (what the worker
//! left uncommitted committed on a private index) into a second volume, read out
//! with `docker cp` and landed here by `landing.rs` under its checks. Where the
//! image has no git (the bundler says so), the volume's tree comes back instead as
//! one tar stream and is committed here (`tree_back.rs`), then landed the same way.
//! A lost host (`daemon::lost`) gets no bring-back: nothing of it lands. Both volumes,
//! and the scratch directory here, are removed on every path; they carry the
//! sandbox's owner labels, so the start-up sweep removes those of a dead owner.
//!
//! Nothing the worker wrote reaches this machine but git objects (no mode beyond
//! 0755, no device, no link followed), so `after_run` has nothing to sweep.
//!
//! The carrier under the copy transport is the lifeline (`lifeline.rs`), which
//! mounts nothing of this machine either: egress and login files go through its
//! stream. Without the tools volume (its helper) the sandbox refuses
//! `network: allowlist` and a login file, naming the transport.

use super::daemon;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::carrier::{CALL_TIMEOUT, COPY_TIMEOUT, Carrier, failed};
use super::daemon::call;
use super::docker_cli::last_lines;
use super::endpoint::Endpoint;
use super::landing::{self, LandingError, UserRepo};
use super::privileges::Finding;
use super::session_volume::SessionVolume;
use super::sweep::{LABEL_TASK, owner_labels};
use super::tree_back::{Committed, TreeBack};
use super::{Backend, BackendError, Confinement, Main, Mount, Net, PROJECT_DIR, Spec, Transport};
use agent_runner_core::git::GitError;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;
use agent_runner_settings::task::{TransportChoice, WorkerLimits};

/// The bundler's script (the pipeline's too).
pub const BUNDLER_SCRIPT: &str = include_str!("bundler.sh");
/// The bundler's answer line.
pub(crate) const ANSWER: &str = "agent-runner-bundle work ";
/// The bundler's line when the image has no git (`bundler.sh`).
pub(crate) const NO_GIT: &str = "agent-runner-bundler-nogit";
/// Largest bundle brought back.
pub(crate) const MAX_BUNDLE: u64 = 4 << 30;

/// Why the clone of ours was not made, or a bundle not landed here (both copy
/// transports').
#[derive(Debug, thiserror::Error)]
pub(crate) enum CopyError {
    #[error("{}: not a directory's name", .0.display())]
    StageName(PathBuf),
    #[error(transparent)]
    Git(#[from] GitError),
    /// The bundle could not be created here or opened.
    #[error("cannot take the bundle: {0}")]
    TakeBundle(std::io::Error),
    #[error(transparent)]
    Landing(#[from] LandingError),
    #[error("cannot keep the bundle at {}: {source}", .path.display())]
    Keep {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The carrier of the bundle's volume.
    #[error(transparent)]
    Carrier(#[from] BackendError),
}

/// The transport a sandbox gets: the task's `runner.sandbox.transport`, else
/// `bind` for a daemon on this machine's unix socket and `copy` for any other
/// address (tcp://, ssh://, a context naming one), even on the loopback.
pub fn chosen(setting: Option<TransportChoice>, endpoint: Option<&Endpoint>) -> TransportChoice {
    match (setting, endpoint) {
        (Some(choice), _) => choice,
        (None, Some(e)) if !e.url.starts_with("unix://") => TransportChoice::Copy,
        (None, _) => TransportChoice::Bind,
    }
}

/// Tells the copy's own containers (the bundler) from the sandbox it serves.
pub const ROLE_LABEL: &str = agent_runner_settings::labels::ROLE;

/// Where a run whose branch is checked out keeps its work's bundle: in its private
/// directory (`<repo>/.agent-runner`), by task.
pub fn kept_bundle(private_dir: &Path, task_id: &str) -> PathBuf {
    private_dir.join(format!("work-{task_id}.bundle"))
}

/// What `finish` did with the work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BroughtBack {
    /// The branch is set to the commit.
    Branch { name: String, commit: String },
    /// The branch is checked out in the repository, so it is left as it is and the
    /// work as a checked bundle beside it (`kept_bundle`): in a pipeline's clone,
    /// whose branch is checked out, the orchestrator lands it from there.
    Kept { bundle: PathBuf, commit: String },
    /// The worker left nothing: no branch.
    Unchanged,
    /// Why the work could not be brought back.
    Failed(String),
}

impl std::fmt::Display for BroughtBack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BroughtBack::Branch { name, commit } => {
                write!(f, "the work is on the branch {name} ({commit})")
            }
            BroughtBack::Kept { bundle, commit } => write!(
                f,
                "the branch is checked out here, so the work ({commit}) is left as the bundle {} (`git fetch` it)",
                bundle.display()
            ),
            BroughtBack::Unchanged => write!(f, "the worker changed nothing: no branch made"),
            BroughtBack::Failed(why) => write!(f, "the work could not be brought back: {why}"),
        }
    }
}

/// See the module documentation.
pub(crate) struct Copy {
    repo: PathBuf,
    task_id: String,
    backend: Arc<dyn Backend>,
    image: String,
    limits: WorkerLimits,
    keep_untracked: bool,
    /// `<private_dir>/copy-<random>`: the clone and the bundle, removed at the end.
    scratch: PathBuf,
    /// The filled volume and the commit it started from.
    filled: Option<(String, String)>,
    /// A run's agent was found changed: the work stays where it is, and goes with
    /// the volume.
    discarded: bool,
    brought: Option<BroughtBack>,
    interrupt: Interrupt,
    /// The worker's session on the daemon's host (`session_volume.rs`), and whether
    /// this run starts it anew (not a resume); None: the task keeps none.
    session: Option<(SessionVolume, bool)>,
    /// Removals under way on threads of their own, joined at the end.
    tidying: Vec<std::thread::JoinHandle<()>>,
    /// A sandbox started on the copy: until then a new session volume holds
    /// nothing, and goes with the rest when the start does not come.
    started: bool,
}

/// What the copy transport needs of the task.
pub(crate) struct CopyTask<'a> {
    pub(crate) repo: PathBuf,
    pub(crate) private_dir: &'a Path,
    pub(crate) task_id: &'a str,
    pub(crate) worker: &'a agent_runner_settings::task::WorkerSettings,
    pub(crate) interrupt: Interrupt,
    /// The worker's session is kept (`worker::session`): `Some(resumed)`, a resumed
    /// run going on with the one the runs before left.
    pub(crate) session: Option<bool>,
}

impl Copy {
    pub(crate) fn new(backend: Arc<dyn Backend>, task: CopyTask) -> Copy {
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
        Copy {
            scratch: task.private_dir.join(format!("copy-{suffix}")),
            repo: task.repo.clone(),
            task_id: task.task_id.to_string(),
            backend,
            image: task.worker.docker_image.clone(),
            limits: task.worker.limits.clone(),
            keep_untracked: task.worker.keep_untracked,
            filled: None,
            discarded: false,
            brought: None,
            interrupt: task.interrupt,
            session: task
                .session
                .map(|resumed| (SessionVolume::of(&task.repo, task.task_id), !resumed)),
            tidying: Vec::new(),
            started: false,
        }
    }

    fn branch(&self) -> String {
        format!("agent-runner/{}", self.task_id)
    }

    /// The sandbox's labels: the task, its owner and an expiry (the sweep's).
    fn labels(&self) -> Vec<String> {
        let mut labels = vec![format!("{LABEL_TASK}={}", self.task_id)];
        labels.extend(
            owner_labels(&Owner::this_process())
                .into_iter()
                .chain([super::sweep::expiry_label(super::sweep::LIFETIME)])
                .map(|(label, value)| format!("{label}={value}")),
        );
        labels
    }

    /// A new labelled volume.
    fn create_volume(&self, name: &str) -> Result<(), BackendError> {
        let mut args = vec!["volume".to_string(), "create".into()];
        for label in self.labels() {
            args.extend(["--label".into(), label]);
        }
        args.push(name.to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = call(&args, CALL_TIMEOUT, self.interrupt)?;
        match out.ok {
            true => Ok(()),
            false => Err(failed("docker volume create", &out.stderr)),
        }
    }

    /// The clone here, then the volume filled from it and the working tree.
    fn fill(&mut self) -> Result<(), BackendError> {
        let io = |what: &str| {
            let what = what.to_string();
            move |e: String| BackendError::Io(format!("the copy transport: {what}: {e}"))
        };
        let user = UserRepo::open(&self.repo).map_err(|e| io("the repository")(e.to_string()))?;
        let (_, head) = user
            .head()
            .map_err(|e| io("the repository's HEAD")(e.to_string()))?;
        let stage = self.scratch.join("stage");
        std::fs::create_dir_all(&self.scratch)
            .map_err(|e| io("the scratch directory")(e.to_string()))?;
        self.clone_head(&user, &head, &stage)
            .map_err(|e| io("the clone")(e.to_string()))?;
        let volume = format!(
            "agent-runner-copy-{}-{}",
            self.task_id,
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        self.create_volume(&volume)?;
        self.filled = Some((volume.clone(), head));
        let carrier = Carrier::create(&volume, PROJECT_DIR, &self.labels(), self.interrupt)?;
        // Into the volume's parent, the volume's root an entry of the stream: so it
        // gets the repository's owner and mode too (Docker applies none to the
        // directory it extracts into), and the worker may create files at the top.
        let (parent, top) = PROJECT_DIR.rsplit_once('/').unwrap_or(("/", PROJECT_DIR));
        let skipped = carrier.copy_in(parent, |tar| {
            tar.tree(
                &self.repo,
                &format!("{top}/"),
                &[".git", agent_runner_core::private_dir::DIR_NAME],
            )?;
            tar.tree(&stage.join(".git"), &format!("{top}/.git/"), &[])
        })?;
        self.tidying.push(carrier.remove_aside());
        if !skipped.is_empty() {
            log::warn!(
                "the copy transport left out what is neither a file, a directory nor a symlink: {}",
                skipped.join(", ")
            );
        }
        Ok(())
    }

    fn clone_head(&self, user: &UserRepo, head: &str, stage: &Path) -> Result<(), CopyError> {
        clone_head(
            &self.scratch,
            user,
            head,
            &self.branch(),
            stage,
            self.interrupt,
        )
    }

    /// The bundler's run against the volume (read-only), its bundle read out and
    /// landed.
    /// Removes `volume` on every path.
    fn bring_back(&self, volume: &str, base: &str) -> BroughtBack {
        let out = format!("{volume}-out");
        if let Err(e) = self.create_volume(&out) {
            remove_volume(volume);
            return BroughtBack::Failed(e.to_string());
        }
        let branch = self.branch();
        let caches = if self.keep_untracked { "keep" } else { "drop" };
        let request = format!("work {} {branch} {caches} {base}", self.task_id);
        let spec = self.bundler_spec(volume, &out, request);
        let said = self.backend.run_once(&spec, COPY_TIMEOUT, self.interrupt);
        if let Ok(said) = &said
            && said.stdout.lines().any(|l| l == NO_GIT)
        {
            // No git in the image: the tree comes back, committed here.
            remove_volume(&out);
            let brought = self.tree_back(volume, base);
            remove_volume(volume);
            return brought;
        }
        // The work's volume is done with: removed while the bundle is read out.
        let brought = std::thread::scope(|scope| {
            scope.spawn(|| remove_volume(volume));
            match said {
                Ok(said) => self.answered(&said, &out, base),
                Err(e) => BroughtBack::Failed(format!("the bundler: {e}")),
            }
        });
        remove_volume(&out);
        brought
    }

    /// Where the image has no git (`tree_back.rs`): the volume's tree read out as
    /// one tar stream and committed here, then landed as the bundler's bundle is.
    fn tree_back(&self, volume: &str, base: &str) -> BroughtBack {
        let started = std::time::Instant::now();
        let carrier = match Carrier::create(volume, PROJECT_DIR, &self.labels(), self.interrupt) {
            Ok(carrier) => carrier,
            Err(e) => return BroughtBack::Failed(e.to_string()),
        };
        let branch = self.branch();
        let scratch = self.scratch.join("tree");
        if let Err(e) = std::fs::create_dir_all(&scratch) {
            return BroughtBack::Failed(format!("{}: {e}", scratch.display()));
        }
        let user = match UserRepo::open(&self.repo) {
            Ok(user) => user,
            Err(e) => return BroughtBack::Failed(e.to_string()),
        };
        let back = TreeBack {
            objects: user.objects(),
            scratch: &scratch,
            task_id: &self.task_id,
            branch: &branch,
            base,
            keep_untracked: self.keep_untracked,
            interrupt: self.interrupt,
        };
        let committed = carrier.stream_out(PROJECT_DIR, |tar| back.commit(tar));
        drop(carrier);
        log::info!(
            "the work's tree read out and committed here (the image has no git) in {}",
            agent_runner_core::timestamp::human(started.elapsed())
        );
        match committed {
            Ok(Committed::Unchanged) => BroughtBack::Unchanged,
            Ok(Committed::Bundle { path, commit }) => {
                match self.land_file(&path, &commit, &branch, base) {
                    Ok(None) => BroughtBack::Branch {
                        name: branch,
                        commit,
                    },
                    Ok(Some(bundle)) => BroughtBack::Kept { bundle, commit },
                    Err(e) => BroughtBack::Failed(e.to_string()),
                }
            }
            Err(e) => BroughtBack::Failed(format!("the work's tree: {e}")),
        }
    }

    /// What the bundler `said`: its bundle read out of `out` and landed.
    fn answered(&self, said: &super::Output, out: &str, base: &str) -> BroughtBack {
        let branch = self.branch();
        let answer = said
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix(ANSWER))
            .map(str::to_string);
        let Some(answer) = answer else {
            return BroughtBack::Failed(format!(
                "the bundler in {} answered nothing: {}",
                self.image,
                last_lines(&said.stderr, 3)
            ));
        };
        let (verdict, rest) = answer.split_once(' ').unwrap_or((&answer, ""));
        match verdict {
            "unchanged" => BroughtBack::Unchanged,
            "bundled" if landing::is_object_id(rest) => {
                match self.read_out(out, rest, &branch, base) {
                    Ok(None) => BroughtBack::Branch {
                        name: branch,
                        commit: rest.to_string(),
                    },
                    Ok(Some(bundle)) => BroughtBack::Kept {
                        bundle,
                        commit: rest.to_string(),
                    },
                    Err(e) => BroughtBack::Failed(e.to_string()),
                }
            }
            "failed" => BroughtBack::Failed(format!("the bundler: {rest}")),
            _ => BroughtBack::Failed(format!("the bundler answered {answer:?}")),
        }
    }

    /// The bundler's container: the worker's image, no network, no capabilities,
    /// the worker's limits; the work's volume READ-ONLY (what the worker wrote is
    /// read, never written, and nothing there can steer a write), `out` for the
    /// bundle.
    fn bundler_spec(&self, volume: &str, out: &str, request: String) -> Spec {
        let mut spec = Spec::new(
            &self.image,
            Main::shell(
                "printf '%s\\n' \"$1\" | sh -c \"$2\"",
                [
                    "agent-runner-bundler".into(),
                    request,
                    BUNDLER_SCRIPT.into(),
                ],
            ),
        );
        spec.labels = self
            .labels()
            .into_iter()
            .filter_map(|l| {
                l.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .chain([(ROLE_LABEL.to_string(), "bundler".to_string())])
            .collect();
        spec.network = Net::Isolated;
        spec.confinement = Some(Confinement { keep: &[] });
        spec.limits = Some(self.limits.clone());
        spec.mounts = vec![
            Mount::volume(volume, "/clones/work"),
            Mount {
                readonly: false,
                ..Mount::volume(out, "/out")
            },
        ];
        spec
    }

    /// The bundle out of volume `out`, then landed; or, the branch checked out in
    /// the repository, checked and kept beside it (its path).
    fn read_out(
        &self,
        out: &str,
        commit: &str,
        branch: &str,
        base: &str,
    ) -> Result<Option<PathBuf>, CopyError> {
        let carrier = Carrier::create(out, "/out", &self.labels(), self.interrupt)?;
        let path = self.scratch.join("work.bundle");
        let file = agent_runner_core::fs::Dir::open(&self.scratch)
            .and_then(|dir| dir.create("work.bundle"))
            .map_err(CopyError::TakeBundle)?;
        carrier.copy_out("/out/work.bundle", file, MAX_BUNDLE)?;
        drop(carrier);
        self.land_file(&path, commit, branch, base)
    }

    fn land_file(
        &self,
        path: &Path,
        commit: &str,
        branch: &str,
        base: &str,
    ) -> Result<Option<PathBuf>, CopyError> {
        land_file(
            &self.repo,
            &self.scratch,
            &self.task_id,
            path,
            commit,
            branch,
            base,
            self.interrupt,
        )
    }

    fn clean_up(&mut self) {
        for tidying in self.tidying.drain(..) {
            let _ = tidying.join();
        }
        if !self.started
            && let Some((session, true)) = self.session.take()
        {
            session.forget();
        }
        if let Some((volume, _)) = self.filled.take() {
            remove_volume(&volume);
        }
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

impl Transport for Copy {
    fn prepare(
        &mut self,
        _backend: &dyn Backend,
        _image: &str,
        _interrupt: Interrupt,
        _carrier: Option<&mut dyn super::Carrier>,
    ) -> Result<(), BackendError> {
        if self.filled.is_some() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        // The session volume's calls (up to eight round trips to the daemon's host)
        // go on while the repository is cloned and copied: neither needs the other.
        let session = self.session.clone();
        let stage = self.scratch.join("session");
        let interrupt = self.interrupt;
        let (filled, opened) = std::thread::scope(|scope| {
            let opening = scope.spawn(move || match &session {
                Some((session, fresh)) => session.open(*fresh, &stage, interrupt),
                None => Ok(None),
            });
            let filled = self.fill();
            let opened = opening.join().unwrap_or_else(|_| {
                Err(BackendError::Io(
                    "the worker's session volume: its thread failed".into(),
                ))
            });
            (filled, opened)
        });
        let opened = opened.map(|removing| self.tidying.extend(removing));
        if filled.is_err() || opened.is_err() {
            self.clean_up();
        }
        filled?;
        opened?;
        log::info!(
            "repository copied to the sandbox's host in {}",
            agent_runner_core::timestamp::human(started.elapsed())
        );
        Ok(())
    }

    fn started(
        &mut self,
        _: &dyn Backend,
        _: Option<&str>,
        _: &dyn super::Instance,
    ) -> Result<(), BackendError> {
        self.started = true;
        Ok(())
    }

    fn mounts(&mut self) -> Result<Vec<Mount>, BackendError> {
        let (volume, _) = self
            .filled
            .as_ref()
            .ok_or_else(|| BackendError::Io("the copy transport's volume is not filled".into()))?;
        let mut mounts = vec![Mount {
            readonly: false,
            ..Mount::volume(volume, PROJECT_DIR)
        }];
        mounts.extend(self.session.as_ref().map(|(session, _)| session.mount()));
        Ok(mounts)
    }

    fn after_run(&mut self) -> Vec<Finding> {
        Vec::new()
    }

    fn finish(&mut self) -> Vec<Finding> {
        if self.discarded {
            // The volume goes with the work in it (`clean_up`).
            self.clean_up();
            return Vec::new();
        }
        if let Some((volume, base)) = self.filled.take() {
            let started = std::time::Instant::now();
            // Nothing of a lost attempt lands (SPEC §22), and nothing more waits on
            // its host: what is left there carries an expiry for the sweeps.
            let brought = match daemon::lost() {
                Some(lost) => BroughtBack::Failed(lost),
                None => self.bring_back(&volume, &base),
            };
            log::info!(
                "{brought} (in {})",
                agent_runner_core::timestamp::human(started.elapsed())
            );
            self.brought = Some(brought);
        }
        self.clean_up();
        Vec::new()
    }

    fn brought_back(&mut self) -> Option<BroughtBack> {
        self.brought.take()
    }

    fn forget_session(&mut self) {
        if let Some((session, _)) = self.session.take() {
            session.forget();
        }
    }

    fn discard(&mut self) {
        self.discarded = true;
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        self.clean_up();
    }
}

/// `stage` (in `scratch`): a repository of ours on `branch` at `head`, with the
/// objects it needs copied out of the user's (read as data), and an index of HEAD.
pub(crate) fn clone_head(
    scratch: &Path,
    user: &UserRepo,
    head: &str,
    branch: &str,
    stage: &Path,
    interrupt: Interrupt,
) -> Result<(), CopyError> {
    let git = |args: &[&str], cwd: &Path| {
        let invocation = landing::clean(cwd, args)
            .env("GIT_DIR", &stage.join(".git").display().to_string())
            .env(
                "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                &user.objects().display().to_string(),
            );
        landing::run(&invocation, interrupt)
    };
    let branch = format!("refs/heads/{branch}");
    let name = stage
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| CopyError::StageName(stage.to_path_buf()))?;
    landing::run(
        &landing::clean(scratch, &["init", "-q", "--template=", name]),
        interrupt,
    )?;
    git(&["update-ref", &branch, head], stage)?;
    git(&["symbolic-ref", "HEAD", &branch], stage)?;
    // No delta search on large files: on a 50 MB repository of 10 MB files it
    // took 6.8 s of CPU against 2.1 s (bench/copy.py); source files keep theirs.
    git(
        &["-c", "core.bigFileThreshold=1m", "repack", "-a", "-d", "-q"],
        stage,
    )?;
    git(&["read-tree", head], stage)?;
    Ok(())
}

/// The bundle at `path` landed in `repo` as `branch`; or, the branch checked out
/// there, checked and kept beside it (its path: `kept_bundle` of the private
/// directory that holds `scratch`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn land_file(
    repo: &Path,
    scratch: &Path,
    task_id: &str,
    path: &Path,
    commit: &str,
    branch: &str,
    base: &str,
    interrupt: Interrupt,
) -> Result<Option<PathBuf>, CopyError> {
    let (file, _) = agent_runner_core::fs::read::open_regular(path, MAX_BUNDLE)
        .map_err(CopyError::TakeBundle)?;
    let keep = landing::checked_out(repo, branch)?;
    landing::land(repo, file, commit, branch, base, scratch, keep, interrupt)?;
    if !keep {
        return Ok(None);
    }
    let kept = kept_bundle(scratch.parent().unwrap_or(scratch), task_id);
    std::fs::rename(path, &kept).map_err(|source| CopyError::Keep {
        path: kept.clone(),
        source,
    })?;
    Ok(Some(kept))
}

fn remove_volume(name: &str) {
    match call(
        &["volume", "rm", "-f", name],
        CALL_TIMEOUT,
        Interrupt::never(),
    ) {
        Ok(out) if out.ok => {}
        Ok(out) => log::warn!(
            "cannot remove volume {name}: {}",
            last_lines(&out.stderr, 2)
        ),
        Err(e) => log::warn!("cannot remove volume {name}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::endpoint::Source;
    use super::*;

    fn at(url: &str) -> Endpoint {
        Endpoint {
            url: url.into(),
            source: Source::DockerHost,
            tls: false,
        }
    }

    #[test]
    fn the_bundler_reads_the_work_read_only_without_network_or_capabilities() {
        let worker = agent_runner_settings::task::test_task("").worker;
        let copy = Copy::new(
            Arc::new(super::super::Docker::default()),
            CopyTask {
                repo: "/r".into(),
                private_dir: Path::new("/r/.agent-runner"),
                task_id: "t",
                worker: &worker,
                interrupt: Interrupt::never(),
                session: None,
            },
        );
        let spec = copy.bundler_spec("work-vol", "out-vol", "work t agent-runner/t drop x".into());
        let mounts: Vec<(String, String, bool, bool)> = spec
            .mounts
            .iter()
            .map(|m| {
                (
                    m.source.display().to_string(),
                    m.target.clone(),
                    m.readonly,
                    m.volume,
                )
            })
            .collect();
        assert_eq!(
            mounts,
            [
                ("work-vol".into(), "/clones/work".into(), true, true),
                ("out-vol".into(), "/out".into(), false, true),
            ]
        );
        assert_eq!(spec.network, Net::Isolated);
        assert_eq!(spec.confinement, Some(Confinement { keep: &[] }));
        assert!(spec.labels.iter().any(|(k, v)| k == LABEL_TASK && v == "t"));
    }

    #[test]
    fn copy_is_the_default_beyond_this_machines_unix_socket() {
        use TransportChoice::{Bind, Copy};
        assert_eq!(chosen(None, None), Bind);
        assert_eq!(chosen(None, Some(&at("unix:///var/run/docker.sock"))), Bind);
        for url in [
            "tcp://127.0.0.2:2375",
            "tcp://10.0.0.1:2376",
            "ssh://me@build",
        ] {
            assert_eq!(chosen(None, Some(&at(url))), Copy, "{url}");
            assert_eq!(chosen(Some(Bind), Some(&at(url))), Bind, "{url}");
        }
        assert_eq!(chosen(Some(Copy), None), Copy);
    }
}
