//! The repository copied into the running sandbox and the work read out of it, by
//! execs (SPEC §25 "Copy is the only transport"): for an engine whose sandboxes
//! keep no volume of ours once they are gone (`Backend::files_by_exec`: a Pod's
//! `emptyDir`s go with it), so nothing can be filled before the start or read
//! after the end.
//!
//! In (`prepare`, then `started`): the same clone of ours as `copy.rs` makes (HEAD
//! as the branch `agent-runner/<id>`, the user's `.git/config`, hooks and other
//! branches left here) and the working tree's files, as ONE tar stream written
//! here before the start (`tar.rs`: links as links, nothing outside the tree
//! read), fed to `tar -x` of the tools' shell in the sandbox once it runs, before
//! anything of the worker's does. The sandbox mounts an empty volume of its own at
//! `PROJECT_DIR`.
//!
//! Out (`before_removal`, the sandbox quiet after its last run: every process of
//! the worker's ended by the helper, PID 1): the bundler (`bundler.sh`, the copy's)
//! runs in the sandbox, no network, over the work as the sandbox's second, READ-ONLY
//! mount of the same volume, writing only into a directory made fresh under a
//! name the worker could not know; the bundle streams out of the same exec,
//! bounded;
//! an image without git gets its tree read out as a tar stream instead
//! (`tree_back.rs`). `finish` lands either here under `landing.rs`'s checks. The
//! bundler runs where the worker ran, so the worker could have steered it: what
//! it can change is only what its own work is, which it writes anyway; what
//! reaches this machine is checked here as for every bundle, and nothing of the
//! sandbox is read but the two execs' output.
//!
//! The worker's session is kept across sandboxes only where the engine keeps it
//! (`Backend::session_volume`: a cluster's PersistentVolumeClaim where its entry
//! names `session_storage_class`), mounted at `SESSION_DIR` and removed when the
//! task is finished (`forget_session`); elsewhere a resumed task starts the agent
//! afresh with its history (SPEC §25). `after_run` has nothing to sweep.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::copy::{self, CopyError, MAX_BUNDLE, NO_GIT};
use super::file_sink::{FileSink, SinkError};
use super::landing::{self, LandingError, UserRepo};
use super::privileges::Finding;
use super::session_volume::SessionVolume;
use super::tools::SHELL;
use super::tree_back::{Committed, TreeBack, TreeBackError};
use super::{
    Backend, BackendError, BroughtBack, Carrier, CopyTask, Exec, Instance, Mount, PROJECT_DIR,
    Transport,
};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{Capture, Limits, Stop};

/// The longest an exec of the copy may take (a large repository over a slow link).
const EXEC_TIMEOUT: Duration = Duration::from_secs(600);
/// The empty volume the sandbox mounts at `PROJECT_DIR`.
const VOLUME: &str = "agent-runner-project";
/// Where the sandbox mounts the same volume again, read-only, for the bundler
/// (`$AR_CLONES/<job>`): the work is bundled from a mount nothing can write
/// through, as the copy transport's bundler reads it (SPEC §25).
const CLONES: &str = "/agent-runner-clones";
/// The bundler's name for the clone.
const JOB: &str = "work";
/// The bundler's answer line for that job.
const ANSWER: &str = "agent-runner-bundle work ";

/// Why an exec of the copy failed: in the engine, or its command.
#[derive(Debug, thiserror::Error)]
enum ExecError {
    #[error(transparent)]
    Engine(#[from] BackendError),
    /// `code`: its exit code, or "by a signal"; the last lines of its output.
    #[error("exited {code} ({stderr}): {stdout}")]
    Exited {
        code: String,
        stderr: String,
        stdout: String,
    },
}

/// Why the repository was not staged, or the work not read out or committed.
#[derive(Debug, thiserror::Error)]
enum ExecCopyError {
    #[error("the repository: {0}")]
    Repository(LandingError),
    #[error("the repository's HEAD: {0}")]
    Head(LandingError),
    #[error("{}: {source}", .path.display())]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the clone: {0}")]
    Clone(CopyError),
    #[error("the stream of the repository: {0}")]
    Stream(std::io::Error),
    #[error(transparent)]
    Sink(#[from] SinkError),
    #[error("the bundler: {0}")]
    Bundler(ExecError),
    #[error("the work's tree: {0}")]
    Tree(ExecError),
    /// No answer line; the last lines it said.
    #[error("the bundler answered nothing: {0}")]
    Unanswered(String),
    /// The bundler's own "failed" answer.
    #[error("the bundler: {0}")]
    BundlerFailed(String),
    #[error("the bundler answered {0:?}")]
    Answered(String),
    #[error(transparent)]
    Landing(#[from] LandingError),
    #[error(transparent)]
    Commit(#[from] TreeBackError),
}

/// See the module documentation.
pub(crate) struct ExecCopy {
    repo: PathBuf,
    task_id: String,
    keep_untracked: bool,
    interrupt: Interrupt,
    /// `<private_dir>/copy-<random>`: the clone, the stream, the bundle; removed
    /// at the end.
    scratch: PathBuf,
    /// The tar stream of the clone and the working tree, and the commit it
    /// starts from; sent at the start.
    stream: Option<(PathBuf, String)>,
    /// The commit the sandbox started from, once the stream went in.
    base: Option<String>,
    /// What `before_removal` read out, for `finish` to land.
    out: Option<Result<Out, ExecCopyError>>,
    discarded: bool,
    brought: Option<BroughtBack>,
    backend: Arc<dyn Backend>,
    /// The worker's session the engine keeps, and whether it is made anew before
    /// the next start (a new run: not a resume); None: the task keeps none.
    session: Option<(SessionVolume, bool)>,
}

/// What the sandbox gave back.
enum Out {
    Unchanged,
    Bundle {
        path: PathBuf,
        commit: String,
    },
    /// The tree as a tar stream (an image without git).
    Tree(PathBuf),
}

impl ExecCopy {
    pub(crate) fn new(backend: Arc<dyn Backend>, task: CopyTask) -> ExecCopy {
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
        ExecCopy {
            scratch: task.private_dir.join(format!("copy-{suffix}")),
            repo: task.repo.clone(),
            task_id: task.task_id.to_string(),
            keep_untracked: task.worker.keep_untracked,
            interrupt: task.interrupt,
            stream: None,
            base: None,
            out: None,
            discarded: false,
            brought: None,
            session: task
                .session
                .filter(|_| backend.keeps_sessions())
                .map(|resumed| (SessionVolume::of(&task.repo, task.task_id), !resumed)),
            backend,
        }
    }

    fn branch(&self) -> String {
        format!("agent-runner/{}", self.task_id)
    }

    /// The clone here and the stream of it and the working tree, in a file.
    fn write_stream(&self) -> Result<(PathBuf, String), ExecCopyError> {
        let user = UserRepo::open(&self.repo).map_err(ExecCopyError::Repository)?;
        let (_, head) = user.head().map_err(ExecCopyError::Head)?;
        let stage = self.scratch.join("stage");
        std::fs::create_dir_all(&self.scratch).map_err(|source| ExecCopyError::File {
            path: self.scratch.clone(),
            source,
        })?;
        copy::clone_head(
            &self.scratch,
            &user,
            &head,
            &self.branch(),
            &stage,
            self.interrupt,
        )
        .map_err(ExecCopyError::Clone)?;
        let path = self.scratch.join("in.tar");
        let file = agent_runner_core::fs::Dir::open(&self.scratch)
            .and_then(|dir| dir.create("in.tar"))
            .map_err(|source| ExecCopyError::File {
                path: path.clone(),
                source,
            })?;
        let top = PROJECT_DIR
            .rsplit_once('/')
            .map_or(PROJECT_DIR, |(_, top)| top);
        let mut tar = super::TarWriter::new(std::io::BufWriter::with_capacity(1 << 16, file));
        let written = tar
            .tree(
                &self.repo,
                &format!("{top}/"),
                &[".git", agent_runner_core::private_dir::DIR_NAME],
            )
            .and_then(|()| tar.tree(&stage.join(".git"), &format!("{top}/.git/"), &[]));
        let skipped = std::mem::take(&mut tar.skipped);
        written
            .and_then(|()| tar.finish().map(drop))
            .map_err(ExecCopyError::Stream)?;
        if !skipped.is_empty() {
            log::warn!(
                "the copy left out what is neither a file, a directory nor a symlink: {}",
                skipped.join(", ")
            );
        }
        let _ = std::fs::remove_dir_all(&stage);
        Ok((path, head))
    }

    /// Runs `command` in the sandbox with `stdin` streamed from a file; its stdout
    /// into `sink` when given (else kept in memory): its stdout's tail, or why it
    /// failed.
    fn exec(
        &self,
        instance: &dyn Instance,
        command: Vec<String>,
        stdin: Option<std::fs::File>,
        sink: Option<&mut FileSink>,
    ) -> Result<String, ExecError> {
        let exec = Exec {
            workdir: Some("/".into()),
            env: Vec::new(),
            command,
            stdin: Vec::new(),
            stdin_file: stdin.map(std::sync::Arc::new),
        };
        let limits = Limits::wall(EXEC_TIMEOUT, self.interrupt);
        let mut capture = Capture::in_memory(64 * 1024);
        if let Some(sink) = sink {
            capture = capture.with_filter(sink);
        }
        let finished = instance.exec(exec, &limits, &mut capture, Stop::Terminate)?;
        if !finished.success() {
            return Err(ExecError::Exited {
                code: finished
                    .code()
                    .map_or("by a signal".into(), |c| c.to_string()),
                stderr: super::docker_cli::last_lines(&capture.stderr(), 3),
                stdout: super::docker_cli::last_lines(&capture.tail(), 2),
            });
        }
        Ok(capture.tail())
    }

    /// The bundler in the sandbox over a fresh directory, then its bundle (or the
    /// tree) read out into the scratch directory.
    fn read_out(&self, instance: &dyn Instance, base: &str) -> Result<Out, ExecCopyError> {
        let dir = format!(
            "/tmp/agent-runner-out-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let caches = if self.keep_untracked { "keep" } else { "drop" };
        let request = format!("{JOB} {} {} {caches} {base}", self.task_id, self.branch());
        // `mkdir` (not -p) fails on anything already there by that name. One
        // exec: the bundler's answer on stderr, then the bundle on stdout.
        let script = format!(
            "set -e; umask 077; mkdir \"$3\" \"$3/out\" \"$3/tmp\"; \
             printf '%s\\n' \"$1\" | AR_CLONES=\"$4\" AR_OUT=\"$3/out\" AR_TMP=\"$3/tmp\" \"$0\" -c \"$2\" >&2; \
             if [ -f \"$3/out/{JOB}.bundle\" ]; then exec cat \"$3/out/{JOB}.bundle\"; fi"
        );
        let bundle = self.scratch.join("work.bundle");
        let mut sink = FileSink::create(&self.scratch, "work.bundle", MAX_BUNDLE)?;
        let said = self
            .exec(
                instance,
                vec![
                    SHELL.into(),
                    "-c".into(),
                    script,
                    SHELL.into(),
                    request,
                    copy::BUNDLER_SCRIPT.into(),
                    dir,
                    CLONES.into(),
                ],
                None,
                Some(&mut sink),
            )
            .map_err(ExecCopyError::Bundler)?;
        sink.done()?;
        if said.lines().any(|l| l == NO_GIT) {
            let path = self.scratch.join("out.tar");
            let mut sink = FileSink::create(&self.scratch, "out.tar", MAX_BUNDLE)?;
            let (parent, top) = PROJECT_DIR.rsplit_once('/').unwrap_or(("/", PROJECT_DIR));
            self.exec(
                instance,
                vec![
                    SHELL.into(),
                    "-c".into(),
                    "cd \"$1\" && exec tar -c -f - \"$2\"".into(),
                    SHELL.into(),
                    parent.into(),
                    top.into(),
                ],
                None,
                Some(&mut sink),
            )
            .map_err(ExecCopyError::Tree)?;
            sink.done()?;
            return Ok(Out::Tree(path));
        }
        let answer = said
            .lines()
            .find_map(|l| l.strip_prefix(ANSWER))
            .ok_or_else(|| ExecCopyError::Unanswered(super::docker_cli::last_lines(&said, 3)))?;
        let (verdict, rest) = answer.split_once(' ').unwrap_or((answer, ""));
        match verdict {
            "unchanged" => Ok(Out::Unchanged),
            "bundled" if landing::is_object_id(rest) => Ok(Out::Bundle {
                path: bundle,
                commit: rest.to_string(),
            }),
            "failed" => Err(ExecCopyError::BundlerFailed(rest.to_string())),
            _ => Err(ExecCopyError::Answered(answer.to_string())),
        }
    }

    /// What `read_out` gave, landed here.
    fn land(&self, out: Out, base: &str) -> BroughtBack {
        let branch = self.branch();
        let (path, commit) = match out {
            Out::Unchanged => return BroughtBack::Unchanged,
            Out::Bundle { path, commit } => (path, commit),
            Out::Tree(tar) => match self.commit_tree(&tar, base) {
                Ok(Committed::Unchanged) => return BroughtBack::Unchanged,
                Ok(Committed::Bundle { path, commit }) => (path, commit),
                Err(e) => return BroughtBack::Failed(format!("the work's tree: {e}")),
            },
        };
        match copy::land_file(
            &self.repo,
            &self.scratch,
            &self.task_id,
            &path,
            &commit,
            &branch,
            base,
            self.interrupt,
        ) {
            Ok(None) => BroughtBack::Branch {
                name: branch,
                commit,
            },
            Ok(Some(bundle)) => BroughtBack::Kept { bundle, commit },
            Err(e) => BroughtBack::Failed(e.to_string()),
        }
    }

    /// The stream written by `prepare` fed to `tar -x` in the sandbox.
    fn stream_in(&mut self, instance: &dyn Instance) -> Result<(), BackendError> {
        let Some((path, head)) = self.stream.take() else {
            return Ok(());
        };
        let started = std::time::Instant::now();
        let io = |e: String| BackendError::Io(format!("the copy transport: {e}"));
        // Streamed from the file as `docker cp -a -` streams: memory stays bounded
        // whatever the repository's size. Unlinked once open, the file's space
        // goes with the exec.
        let (file, _) = agent_runner_core::fs::read::open_regular(&path, u64::MAX)
            .map_err(|e| io(format!("{}: {e}", path.display())))?;
        let _ = std::fs::remove_file(&path);
        let (parent, _) = PROJECT_DIR.rsplit_once('/').unwrap_or(("/", ""));
        self.exec(
            instance,
            vec![
                SHELL.into(),
                "-c".into(),
                "exec tar -x -f - -C \"$1\"".into(),
                SHELL.into(),
                parent.into(),
            ],
            Some(file),
            None,
        )
        .map_err(|e| io(format!("the repository into {}: {e}", instance.name())))?;
        log::info!(
            "repository copied into the sandbox in {}",
            agent_runner_core::timestamp::human(started.elapsed())
        );
        self.base = Some(head);
        Ok(())
    }

    /// The tree read out of an image without git, committed here.
    fn commit_tree(&self, tar: &Path, base: &str) -> Result<Committed, ExecCopyError> {
        let scratch = self.scratch.join("tree");
        std::fs::create_dir_all(&scratch).map_err(|source| ExecCopyError::File {
            path: scratch.clone(),
            source,
        })?;
        let user = UserRepo::open(&self.repo)?;
        let (file, _) =
            agent_runner_core::fs::read::open_regular(tar, MAX_BUNDLE).map_err(|source| {
                ExecCopyError::File {
                    path: tar.to_path_buf(),
                    source,
                }
            })?;
        let branch = self.branch();
        TreeBack {
            objects: user.objects(),
            scratch: &scratch,
            task_id: &self.task_id,
            branch: &branch,
            base,
            keep_untracked: self.keep_untracked,
            interrupt: self.interrupt,
        }
        .commit(std::io::BufReader::new(file))
        .map_err(ExecCopyError::from)
    }
}

impl Transport for ExecCopy {
    fn prepare(
        &mut self,
        _backend: &dyn Backend,
        _image: &str,
        _interrupt: Interrupt,
        _carrier: Option<&mut dyn Carrier>,
    ) -> Result<(), BackendError> {
        if self.stream.is_some() || self.base.is_some() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let stream = self
            .write_stream()
            .map_err(|e| BackendError::Io(format!("the copy transport: {e}")))?;
        log::info!(
            "repository staged for the sandbox in {}",
            agent_runner_core::timestamp::human(started.elapsed())
        );
        self.stream = Some(stream);
        Ok(())
    }

    fn started(
        &mut self,
        _backend: &dyn Backend,
        _said: Option<&str>,
        instance: &dyn Instance,
    ) -> Result<(), BackendError> {
        self.stream_in(instance)
    }

    fn mounts(&mut self) -> Result<Vec<Mount>, BackendError> {
        let mut mounts = vec![
            Mount {
                readonly: false,
                ..Mount::volume(VOLUME, PROJECT_DIR)
            },
            Mount::volume(VOLUME, format!("{CLONES}/{JOB}")),
        ];
        if let Some((session, fresh)) = &mut self.session {
            let (task_id, key) = session.task_and_key();
            let kept = self.backend.session_volume(task_id, key, *fresh)?;
            // Made anew once per run: the next sandbox of this run goes on with it.
            *fresh = false;
            mounts.extend(kept);
        }
        Ok(mounts)
    }

    fn after_run(&mut self) -> Vec<Finding> {
        Vec::new()
    }

    fn before_removal(&mut self, instance: &dyn Instance) {
        if self.discarded || self.out.is_some() {
            return;
        }
        let Some(base) = self.base.clone() else {
            return;
        };
        let started = std::time::Instant::now();
        let out = self.read_out(instance, &base);
        log::info!(
            "the work read out of the sandbox in {}",
            agent_runner_core::timestamp::human(started.elapsed())
        );
        self.out = Some(out);
    }

    fn finish(&mut self) -> Vec<Finding> {
        if let (false, Some(out), Some(base)) = (self.discarded, self.out.take(), self.base.take())
        {
            let brought = match out {
                Ok(out) => self.land(out, &base),
                Err(e) => BroughtBack::Failed(e.to_string()),
            };
            log::info!("{brought}");
            self.brought = Some(brought);
        } else if self.base.take().is_some() && !self.discarded {
            self.brought = Some(BroughtBack::Failed(
                "the sandbox was gone before its work could be read out".into(),
            ));
        }
        let _ = std::fs::remove_dir_all(&self.scratch);
        Vec::new()
    }

    fn brought_back(&mut self) -> Option<BroughtBack> {
        self.brought.take()
    }

    fn forget_session(&mut self) {
        if let Some((session, _)) = self.session.take() {
            self.backend.forget_session_volume(session.task_and_key().1);
        }
    }

    fn discard(&mut self) {
        self.discarded = true;
    }
}

impl Drop for ExecCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_core::process::{self, Finished, HeldWait, Invocation};

    /// A sandbox whose exec runs the command's stdin into `wc -c` here, as an
    /// engine's client would pass it on.
    struct Counting {
        said: std::sync::Mutex<String>,
    }

    impl Instance for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        fn exec(
            &self,
            exec: Exec,
            limits: &Limits,
            capture: &mut Capture,
            stop: Stop,
        ) -> Result<Finished, BackendError> {
            let mut invocation = Invocation::new("wc").arg("-c").stdin(exec.stdin);
            if let Some(file) = exec.stdin_file {
                invocation = invocation.stdin_shared(file);
            }
            let finished = process::run(&invocation, limits, capture, stop)
                .map_err(|e| BackendError::Io(e.to_string()))?;
            *self.said.lock().unwrap() = capture.tail();
            Ok(finished)
        }
        fn is_alive(&mut self) -> bool {
            true
        }
        fn gone(&self) -> BackendError {
            BackendError::Io("gone".into())
        }
        fn diagnose(&mut self, _image: &str, _stderr: &str) -> BackendError {
            BackendError::Io("diagnosed".into())
        }
        fn send_line(&mut self, _line: &str) -> std::io::Result<()> {
            Ok(())
        }
        fn read_line(&mut self, _: &str, _: Duration, _: Interrupt) -> Result<String, HeldWait> {
            Err(HeldWait::TimedOut)
        }
        fn stderr(&self) -> String {
            String::new()
        }
        fn remove(self: Box<Self>, _within: Duration) -> crate::backend::Removal {
            crate::backend::Removal {
                took: Duration::ZERO,
                left: false,
            }
        }
    }

    /// This process's peak resident memory since the last reset, in KiB.
    fn peak_kib() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    #[test]
    fn a_large_repository_streams_in_with_memory_bounded() {
        const SIZE: u64 = 256 << 20;
        let scratch = std::env::temp_dir().join(format!(
            "agent-runner-exec-copy-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&scratch).unwrap();
        let path = scratch.join("in.tar");
        // A sparse file: its pages cost memory only when something holds them.
        std::fs::File::create(&path)
            .and_then(|f| f.set_len(SIZE))
            .unwrap();
        let mut copy = ExecCopy {
            repo: scratch.clone(),
            task_id: "t".into(),
            keep_untracked: false,
            interrupt: Interrupt::never(),
            scratch: scratch.join("copy"),
            stream: Some((path.clone(), "0".repeat(40))),
            base: None,
            out: None,
            discarded: false,
            brought: None,
            // Not asked: the stream in is one exec of the instance's.
            backend: Arc::new(super::super::docker::Docker::default()),
            session: None,
        };
        let instance = Counting {
            said: Default::default(),
        };
        // The peak from here on (`clear_refs` 5 resets it, Linux ≥ 4.0).
        let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
        let before = peak_kib();
        let streamed = copy.stream_in(&instance);
        let _ = std::fs::remove_dir_all(&scratch);
        streamed.unwrap();
        let grown = peak_kib().saturating_sub(if reset { before } else { 0 });
        assert_eq!(instance.said.lock().unwrap().trim(), SIZE.to_string());
        assert_eq!(copy.base.as_deref(), Some("0".repeat(40).as_str()));
        assert!(!path.exists(), "the stream's file is removed once open");
        // Whole in memory, the stream would add its 256 MiB.
        assert!(
            grown < 64 << 10,
            "the peak memory grew by {grown} KiB streaming {SIZE} bytes"
        );
    }
}
