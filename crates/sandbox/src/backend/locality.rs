//! Locality proven before any bind mount (SPEC §22). A bind mount names a path on
//! the daemon's machine: a daemon elsewhere that happens to have the repository's
//! path would run the task on ITS files and report them done while the user's
//! repository is untouched. So before the first bind mount of a sandbox, a random
//! token is written into a fresh directory under agent-runner's private directory
//! and a container of that daemon, with the directory bind-mounted read-only, must
//! print it back. Anything else (no such path there, another file, no answer) and
//! the bind mount is refused with the fix, naming the daemon.
//!
//! Where the sandbox's main process is our bridge (a daemon reached through a
//! local socket), the proof costs no container of its own (SPEC §27): the token's
//! file is named to the bridge, which reads it through the repository's read-only
//! mount before anything else runs and says it in its ready line (`Pending`). A
//! daemon that does not see this machine's files fails the start (the bridge's
//! directory is not there) or says another token; either way the container is
//! removed before any exec, and nothing ran on that machine's files but our
//! bridge, which only read.

use std::path::Path;
use std::time::Duration;

use super::docker_cli::{DockerFault, fault_in, last_lines};
use super::{Backend, BackendError, Main, Mount, Net, PROJECT_DIR, Spec};
use agent_runner_core::fs::Dir;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::Ending;

/// Where the token's directory is in the probe container.
const TARGET: &str = "/agent-runner-locality";
/// Longest the probe may take (a daemon that answers runs it in well under a second).
const WITHIN: Duration = Duration::from_secs(30);

/// Proves that the daemon of `backend` sees this machine's files under
/// `private_dir`, with a container of `image`.
pub(crate) fn prove(
    backend: &dyn Backend,
    private_dir: &Path,
    image: &str,
    interrupt: Interrupt,
) -> Result<(), BackendError> {
    let pending = Pending::write(private_dir)?;
    let read = read_back(backend, &pending.dir(private_dir), image, interrupt);
    pending.discard(private_dir);
    let read = read?;
    if pending.is(&read) {
        return Ok(());
    }
    Err(not_local(
        backend,
        private_dir,
        &format!("it read {:?}", last_lines(&read, 1)),
    ))
}

/// A token written for the sandbox's main process to read as it starts; see the
/// module documentation.
#[derive(Debug)]
pub(crate) struct Pending {
    token: String,
    name: String,
}

impl Pending {
    /// Writes a fresh token under `private_dir`.
    pub(crate) fn write(private_dir: &Path) -> Result<Pending, BackendError> {
        let io = |e: std::io::Error| BackendError::Io(format!("the locality proof: {e}"));
        let token = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("locality-{token}");
        let dir = Dir::open(private_dir).map_err(io)?;
        let written = dir
            .subdir(&name)
            .and_then(|probe| probe.write_atomic("token", token.as_bytes()));
        if let Err(e) = written {
            let _ = dir.remove_tree(&name);
            return Err(io(e));
        }
        Ok(Pending { token, name })
    }

    /// The token's directory's name (`locality-<token>`).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The token's directory on this machine (to mount into a probe container).
    pub(crate) fn dir(&self, private_dir: &Path) -> std::path::PathBuf {
        private_dir.join(&self.name)
    }

    /// Whether what a container read back (`read`) is the token.
    pub(crate) fn is(&self, read: &str) -> bool {
        read.trim() == self.token
    }

    /// The token's file as the sandbox sees it (agent-runner's directory is mounted
    /// read-only in the project).
    pub(crate) fn in_sandbox(&self) -> String {
        format!(
            "{PROJECT_DIR}/{}/{}/token",
            agent_runner_core::private_dir::DIR_NAME,
            self.name
        )
    }

    /// Removes the token's directory and judges what the main process said after
    /// its pid (`said`, None when it said nothing more).
    pub(crate) fn settle(
        self,
        backend: &dyn Backend,
        private_dir: &Path,
        said: Option<&str>,
    ) -> Result<(), BackendError> {
        self.discard(private_dir);
        match said.map(str::trim) {
            Some(token) if self.is(token) => Ok(()),
            Some("-") => Err(not_local(
                backend,
                private_dir,
                "its main process found no token at that path",
            )),
            other => Err(not_local(
                backend,
                private_dir,
                &format!("its main process said {:?}", other.unwrap_or_default()),
            )),
        }
    }

    /// A start that failed: the refusal when the daemon did not see the
    /// bind-mounted directories (docker names the first missing one), after the
    /// token's directory is removed.
    pub(crate) fn failed_start(
        self,
        backend: &dyn Backend,
        private_dir: &Path,
        detail: &str,
    ) -> Option<BackendError> {
        self.discard(private_dir);
        detail
            .contains("bind source path does not exist")
            .then(|| not_local(backend, private_dir, &last_lines(detail, 1)))
    }

    /// Removes the token's directory.
    pub(crate) fn discard(&self, private_dir: &Path) {
        if let Ok(dir) = Dir::open(private_dir) {
            let _ = dir.remove_tree(&self.name);
        }
    }
}

/// What a container of `backend` reads at the token's path: its stdout, or the
/// error that says the daemon could not.
fn read_back(
    backend: &dyn Backend,
    dir: &Path,
    image: &str,
    interrupt: Interrupt,
) -> Result<String, BackendError> {
    let mut spec = Spec::new(
        image,
        Main {
            entrypoint: "cat".into(),
            args: vec![format!("{TARGET}/token")],
            own_init: false,
        },
    );
    spec.network = Net::Isolated;
    spec.mounts = vec![Mount::new(dir, TARGET, true)];
    let mut out = backend.run_once(&spec, WITHIN, interrupt)?;
    if !out.ok && no_cat(&out.stderr) {
        // An image with no `cat`: the file read from the created container.
        out = backend.read_unstarted(&spec, &format!("{TARGET}/token"))?;
        if out.ok {
            return Ok(tar_content(&out.stdout));
        }
    }
    if out.ok {
        return Ok(out.stdout);
    }
    match out.ending {
        Ending::Interrupted => return Err(BackendError::Interrupted),
        Ending::TimedOut => {
            return Err(BackendError::EngineUnreachable(format!(
                "host lost: {}: no answer within {} s to the locality proof",
                backend.daemon(),
                WITHIN.as_secs()
            )));
        }
        _ => {}
    }
    if super::docker_cli::no_such_image(&out.stderr) {
        return Err(BackendError::ImageMissing {
            what: super::DOCKER_IMAGE,
            image: image.to_string(),
            detail: "not present where sandboxes start".into(),
        });
    }
    if let Some(fix) = super::docker_cli::missing_part(&out.stderr) {
        // The engine cannot start any container (podman without catatonit): that,
        // with its fix, not a daemon elsewhere.
        return Err(BackendError::Failed {
            command: "docker run --init".into(),
            detail: format!("{fix}; {}", last_lines(&out.stderr, 1)),
        });
    }
    if fault_in(&out.stderr) == Some(DockerFault::Daemon) {
        return Err(BackendError::EngineUnreachable(format!(
            "{}: {}",
            backend.daemon(),
            last_lines(&out.stderr, 2)
        )));
    }
    Err(not_local(
        backend,
        dir,
        &last_lines(&format!("{}\n{}", out.stdout, out.stderr), 2),
    ))
}

/// Whether the probe failed because the image has no `cat`: the runtime says so, or
/// the init process (`--init`: docker's tini, podman's catatonit) does. Misreading
/// anything else as this costs only the read from the created container, which
/// proves locality the same way.
fn no_cat(stderr: &str) -> bool {
    fault_in(stderr) == Some(DockerFault::CannotExec)
        || (stderr.contains("[FATAL tini") && stderr.contains("exec cat failed"))
        || (stderr.contains("catatonit") && stderr.contains("failed to exec"))
}

/// The token in a one-file tar stream: the hex digits after the 512-byte header.
pub(crate) fn tar_content(tar: &str) -> String {
    tar.get(512..)
        .unwrap_or("")
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect()
}

/// The refusal, with the fix.
fn not_local(backend: &dyn Backend, dir: &Path, detail: &str) -> BackendError {
    BackendError::Refused(format!(
        "refusing to bind-mount the repository: {} does not see this machine's files \
         (a token written under {} was not read back by a container it started: \
         {detail}). A bind mount there would run the task on that machine's files, not \
         yours. Point DOCKER_HOST or the docker context at this machine's daemon \
         (unset DOCKER_HOST, `docker context use default`), or run agent-runner on the \
         machine of that daemon",
        backend.daemon(),
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::no_cat;

    #[test]
    fn an_image_without_cat_is_told_by_the_runtime_or_the_init() {
        assert!(no_cat(
            "docker: Error response from daemon: failed to create task: OCI runtime create failed: exec: \"cat\": executable file not found in $PATH"
        ));
        assert!(no_cat(
            "[FATAL tini (8)] exec cat failed: No such file or directory"
        ));
        assert!(!no_cat(
            "cat: /agent-runner-locality/token: No such file or directory"
        ));
    }
}
