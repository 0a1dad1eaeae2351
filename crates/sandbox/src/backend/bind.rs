//! The repository bind-mounted (SPEC §6.1, §9): the sandbox works on the user's
//! files in place, so it sees them read-write at `PROJECT_DIR`, but not what
//! agent-runner keeps there (`.agent-runner/`, read-only over it) nor what git on the
//! host would run (`.git`'s configuration, read-only: `git_dir.rs`). The agent's
//! session directory (`worker::session`), a host directory of the task's, is mounted
//! read-write at `SESSION_DIR`.
//!
//! Since the work is in place, what the worker wrote is checked on the host: after
//! each run (the sandbox quiet) and once more when the sandbox is gone, set-id bits
//! and device nodes are removed from the repository (`privileges.rs`) and a
//! `.git/commondir` redirect deleted (`git_dir::remove_redirect`). The session
//! directory lies under `.agent-runner/` and is swept with the repository.
//!
//! Before the first mount, the daemon must prove it sees this machine's files
//! (`locality.rs`): a remote daemon with the same path would work on its own copy.

use std::path::PathBuf;

use super::locality::Pending;
use super::privileges::{self, Finding, Fix};
use super::{
    Backend, BackendError, Carrier, Mount, PROJECT_DIR, SESSION_DIR, Transport, git_dir, locality,
};
use agent_runner_core::interrupt::Interrupt;

/// See the module documentation.
pub(crate) struct Bind {
    repo: PathBuf,
    /// `<repo>/.agent-runner`, already created.
    private_dir: PathBuf,
    session_dir: Option<PathBuf>,
    /// The daemon was seen to share this machine's files (`locality.rs`).
    proven: bool,
    /// The token the next start's main process is to say (`locality::Pending`).
    pending: Option<Pending>,
}

impl Bind {
    /// `repo` with agent-runner's own directory `private_dir` in it, and the agent's
    /// session directory, if it keeps one.
    pub(crate) fn new(repo: PathBuf, private_dir: PathBuf, session_dir: Option<PathBuf>) -> Bind {
        Bind {
            repo,
            private_dir,
            session_dir,
            proven: false,
            pending: None,
        }
    }

    /// Removes set-id bits and device nodes from the repository, and a redirect of
    /// its `.git`; what was found.
    fn sweep(&self) -> Vec<Finding> {
        let redirect = git_dir::remove_redirect(&self.repo);
        match privileges::sweep(&self.repo) {
            Ok(mut found) => {
                found.extend(redirect);
                for finding in found.iter().take(10) {
                    log::warn!("repository sweep: {finding}");
                }
                if found.len() > 10 {
                    log::warn!("repository sweep: … and {} more", found.len() - 10);
                }
                found
            }
            Err(e) => vec![Finding {
                path: ".".into(),
                what: Fix::Failed(format!("cannot open the repository: {e}")),
            }],
        }
    }
}

impl Drop for Bind {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.take() {
            pending.discard(&self.private_dir);
        }
    }
}

impl Transport for Bind {
    fn prepare(
        &mut self,
        backend: &dyn Backend,
        image: &str,
        interrupt: Interrupt,
        carrier: Option<&mut dyn Carrier>,
    ) -> Result<(), BackendError> {
        if self.proven {
            return Ok(());
        }
        // The proof is the start's (or its own container's, just before it).
        let Some(carrier) = carrier else {
            return Ok(());
        };
        // A daemon behind a tcp:// or ssh:// endpoint starts the lifeline or the
        // image's keep-alive, which are not asked: the proof's own container.
        if !backend.remote() {
            let pending = match self.pending.take() {
                Some(pending) => pending,
                None => Pending::write(&self.private_dir)?,
            };
            if carrier.prove_locality(&pending.in_sandbox()) {
                self.pending = Some(pending);
                return Ok(());
            }
            pending.discard(&self.private_dir);
        }
        let started = std::time::Instant::now();
        locality::prove(backend, &self.private_dir, image, interrupt)?;
        log::info!(
            "locality proven in {}",
            agent_runner_core::timestamp::human(started.elapsed())
        );
        self.proven = true;
        Ok(())
    }

    fn started(
        &mut self,
        backend: &dyn Backend,
        said: Option<&str>,
        _: &dyn super::Instance,
    ) -> Result<(), BackendError> {
        if let Some(pending) = self.pending.take() {
            pending.settle(backend, &self.private_dir, said)?;
            log::debug!("locality proven by the sandbox's main process as it started");
            self.proven = true;
        }
        Ok(())
    }

    fn start_failed(&mut self, backend: &dyn Backend, detail: &str) -> Option<BackendError> {
        self.pending
            .take()?
            .failed_start(backend, &self.private_dir, detail)
    }

    fn mounts(&mut self) -> Result<Vec<Mount>, BackendError> {
        let git = git_dir::mounts(&self.repo).map_err(|e| BackendError::Io(e.to_string()))?;
        let mut mounts = vec![
            Mount::new(&self.repo, PROJECT_DIR, false),
            Mount::new(
                &self.private_dir,
                format!("{PROJECT_DIR}/{}", agent_runner_core::private_dir::DIR_NAME),
                true,
            ),
        ];
        mounts.extend(
            git.into_iter()
                .map(|m| Mount::new(m.source, format!("{PROJECT_DIR}/{}", m.target), m.readonly)),
        );
        if let Some(dir) = &self.session_dir {
            mounts.push(Mount::new(dir, SESSION_DIR, false));
        }
        Ok(mounts)
    }

    fn after_run(&mut self) -> Vec<Finding> {
        self.sweep()
    }

    fn finish(&mut self) -> Vec<Finding> {
        self.sweep()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_repository_is_mounted_with_its_own_files_read_only_and_swept_in_place() {
        let repo = std::env::temp_dir().join(format!(
            "agent-runner-bind-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let private = repo.join(".agent-runner");
        let session = private.join("state/t.session");
        std::fs::create_dir_all(&session).unwrap();
        let mut bind = Bind::new(repo.clone(), private.clone(), Some(session.clone()));
        let shown: Vec<(String, bool)> = bind
            .mounts()
            .unwrap()
            .into_iter()
            .map(|m| (m.target, m.readonly))
            .collect();
        let at = |path: &str| format!("{PROJECT_DIR}{path}");
        assert_eq!(
            shown,
            [
                (at(""), false),
                (at("/.agent-runner"), true),
                (at("/.git"), false),
                (at("/.git/config"), true),
                (at("/.git/hooks"), true),
                (at("/.git/info"), true),
                (SESSION_DIR.to_string(), false),
            ]
        );
        // What the worker leaves is checked on the host: in the repository and in
        // the session directory under it.
        for file in [repo.join("suid"), session.join("sgid")] {
            std::fs::write(&file, "x").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o6755)).unwrap();
        }
        std::fs::write(repo.join(".git/commondir"), "/elsewhere\n").unwrap();
        let mut found: Vec<String> = bind.after_run().iter().map(|f| f.path.clone()).collect();
        found.sort();
        assert_eq!(
            found,
            [
                ".agent-runner/state/t.session/sgid",
                ".git/commondir",
                "suid"
            ]
        );
        assert_eq!(bind.finish(), [], "nothing left for the last sweep");
        std::fs::remove_dir_all(&repo).unwrap();
    }

    #[test]
    fn a_git_directory_that_is_a_link_is_refused() {
        let repo = std::env::temp_dir().join(format!(
            "agent-runner-bind-link-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&repo).unwrap();
        std::os::unix::fs::symlink("/tmp", repo.join(".git")).unwrap();
        let e = Bind::new(repo.clone(), repo.join(".agent-runner"), None)
            .mounts()
            .unwrap_err();
        assert!(
            matches!(&e, BackendError::Io(m) if m.contains(".git is a symlink")),
            "{e}"
        );
        std::fs::remove_dir_all(&repo).unwrap();
    }
}
