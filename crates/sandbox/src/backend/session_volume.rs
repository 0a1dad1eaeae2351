//! The worker's session on the sandbox's host under the copy transport (SPEC §22):
//! nothing of this machine is mounted there, so the directory that keeps the
//! agent's session across containers (`worker::session`) is a volume of the task on
//! the daemon's host, mounted read-write at `SESSION_DIR`.
//!
//! Its name is a digest of this machine, the repository and the task id (with the
//! id's safe characters in front, for people): another task's volume (another
//! repository's task of the same id, an id with characters a volume name cannot
//! hold) never has it. Its labels say whose it is (`agent-runner.task`, and the
//! digest in `agent-runner.session`), and a volume of that name whose labels say
//! otherwise is refused, never mounted. It has no owner labels, since it must
//! outlive its run, but an expiry: the sweeps remove it once that passed.
//!
//! A new run of the task starts with a new, empty volume; a resumed one finds the
//! runs before's; it is removed when the task ends COMPLETE (`forget`). Only the
//! agent's session directory is in it: the login file goes into the sandbox's
//! tmpfs through the lifeline.

use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use super::carrier::Carrier;
use super::daemon::call;
use super::docker_cli::last_lines;
use super::sweep::{LABEL_TASK, LIFETIME, expiry_label};
use super::{BackendError, Mount, SESSION_DIR, volume_labels};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_settings::labels::ROLE as ROLE_LABEL;

/// The label that holds the volume's digest.
const LABEL_SESSION: &str = agent_runner_settings::labels::SESSION;
/// Short docker calls.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of the task id the name shows.
const SHOWN: usize = 40;

/// See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionVolume {
    pub(crate) name: String,
    task_id: String,
    /// The digest of this machine, the repository and the task.
    key: String,
}

impl SessionVolume {
    /// The session volume of task `task_id` of `repo`, run from this machine.
    pub(crate) fn of(repo: &Path, task_id: &str) -> SessionVolume {
        let machine = agent_runner_core::owner::Owner::this_process().host;
        let whose = format!("{machine}\0{}\0{task_id}", repo.display());
        let digest = ring::digest::digest(&ring::digest::SHA256, whose.as_bytes());
        let key: String = digest.as_ref()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let shown: String = task_id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || "_.-".contains(*c))
            .take(SHOWN)
            .collect();
        SessionVolume {
            name: format!("agent-runner-session-{shown}-{key}"),
            task_id: task_id.to_string(),
            key,
        }
    }

    /// Makes it ready before the sandbox starts: with `fresh`, a new one (what a
    /// run before left removed); else the one the runs before left, checked to be
    /// this task's, or a new one when there is none (the worker then starts
    /// afresh). `stage`: a directory of ours for its owner (removed after). The
    /// removal of the container that set its owner, under way: the sandbox may
    /// start meanwhile (`Copy::clean_up` joins it).
    pub(crate) fn open(
        &self,
        fresh: bool,
        stage: &Path,
        interrupt: Interrupt,
    ) -> Result<Option<JoinHandle<()>>, BackendError> {
        if fresh {
            let out = call(&["volume", "rm", "-f", &self.name], CALL_TIMEOUT, interrupt)?;
            if !out.ok {
                return Err(failed("docker volume rm", &out.stderr));
            }
        } else if self.exists(interrupt)? {
            return self.check(interrupt).map(|()| None);
        }
        self.create(interrupt)?;
        self.check(interrupt)?;
        self.own(stage, interrupt).map(Some)
    }

    /// Whether there is a volume of this name (whoever's).
    fn exists(&self, interrupt: Interrupt) -> Result<bool, BackendError> {
        Ok(volume_labels::read(&self.name, &[LABEL_TASK], interrupt)?.is_some())
    }

    /// Refuses a volume of this name that is not this task's session (made by
    /// someone else, or for another task).
    fn check(&self, interrupt: Interrupt) -> Result<(), BackendError> {
        volume_labels::check(
            &self.name,
            &[
                (LABEL_TASK.to_string(), self.task_id.clone()),
                (LABEL_SESSION.to_string(), self.key.clone()),
            ],
            &format!("the worker session of task {}", self.task_id),
            interrupt,
        )
    }

    fn create(&self, interrupt: Interrupt) -> Result<(), BackendError> {
        let (expires, at) = expiry_label(LIFETIME);
        let labels = [
            format!("{LABEL_TASK}={}", self.task_id),
            format!("{LABEL_SESSION}={}", self.key),
            format!("{ROLE_LABEL}=session"),
            format!("{expires}={at}"),
        ];
        let mut args = vec!["volume", "create"];
        for label in &labels {
            args.extend(["--label", label.as_str()]);
        }
        args.push(&self.name);
        let out = call(&args, CALL_TIMEOUT, interrupt)?;
        match out.ok {
            true => Ok(()),
            false => Err(failed("docker volume create", &out.stderr)),
        }
    }

    /// A new volume's top directory is root's: made the worker's (this machine's
    /// user, as the sandbox runs), mode 0700, by copying an empty directory of ours
    /// over it with its owner (one tar stream, `docker cp -a -`).
    fn own(&self, stage: &Path, interrupt: Interrupt) -> Result<JoinHandle<()>, BackendError> {
        let io = |e: std::io::Error| {
            BackendError::Io(format!(
                "the worker's session volume: {}: {e}",
                stage.display()
            ))
        };
        let (parent, leaf) = SESSION_DIR.rsplit_once('/').unwrap_or(("", SESSION_DIR));
        let dir = stage.join(leaf);
        std::fs::create_dir_all(&dir).map_err(io)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
        let labels = [format!("{LABEL_TASK}={}", self.task_id)];
        let carrier = Carrier::create(&self.name, SESSION_DIR, &labels, interrupt)?;
        let copied = carrier.copy_in(parent, |tar| tar.tree(&dir, &format!("{leaf}/"), &[]));
        let removing = carrier.remove_aside();
        let _ = std::fs::remove_dir_all(stage);
        match copied {
            Ok(_) => Ok(removing),
            Err(e) => {
                let _ = removing.join();
                Err(e)
            }
        }
    }

    /// Where the sandbox has it: read-write at `SESSION_DIR`.
    pub(crate) fn mount(&self) -> Mount {
        Mount {
            readonly: false,
            ..Mount::volume(&self.name, SESSION_DIR)
        }
    }

    /// Removes it: the task is finished for good.
    pub(crate) fn forget(&self) {
        match call(
            &["volume", "rm", "-f", &self.name],
            CALL_TIMEOUT,
            Interrupt::never(),
        ) {
            Ok(out) if out.ok => log::info!("the worker's session volume {} removed", self.name),
            Ok(out) => log::warn!(
                "cannot remove the worker's session volume {}: {}",
                self.name,
                last_lines(&out.stderr, 2)
            ),
            Err(e) => log::warn!(
                "cannot remove the worker's session volume {}: {e}",
                self.name
            ),
        }
    }
}

fn failed(command: &str, stderr: &str) -> BackendError {
    BackendError::Failed {
        command: command.into(),
        detail: last_lines(stderr, 3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_task_of_each_repository_has_a_volume_name_of_its_own() {
        let a = SessionVolume::of(Path::new("/r"), "fix-1");
        assert!(
            a.name.starts_with("agent-runner-session-fix-1-"),
            "{}",
            a.name
        );
        assert_eq!(a, SessionVolume::of(Path::new("/r"), "fix-1"), "stable");
        assert_ne!(a.name, SessionVolume::of(Path::new("/other"), "fix-1").name);
        // Ids that read the same once odd characters are dropped stay apart.
        let odd = SessionVolume::of(Path::new("/r"), "fix/1");
        let odd2 = SessionVolume::of(Path::new("/r"), "fix 1");
        assert_ne!(odd.name, odd2.name);
        for v in [&odd, &odd2] {
            assert!(
                v.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)),
                "{}",
                v.name
            );
        }
        let long = SessionVolume::of(Path::new("/r"), &"x".repeat(300));
        assert!(long.name.len() < 100, "{}", long.name);
        let m = a.mount();
        assert!(m.volume && !m.readonly && m.target == SESSION_DIR);
    }
}
