//! agent-runner's own directory inside the repository, `<repo>/.agent-runner/`: the
//! Task Note, logs, locks. The worker writes the repository (as root in its
//! container, while agent-runner often runs as root on the host), so the directory
//! is reached only through `fs::Dir` (SPEC §9): a symlink in its place is refused,
//! never followed.
//!
//! While a task runs, `.agent-runner/` is also mounted read-only into the container,
//! so the worker cannot change it under us; `fs::Dir`'s rules cover everything else
//! (a worker of an earlier run, or anything written before the container started).

use std::path::Path;

use crate::fs::Dir;

/// Name of agent-runner's directory in a repository.
pub const DIR_NAME: &str = ".agent-runner";
/// What `.agent-runner/.gitignore` keeps out of git: logs, locks, and the state
/// of tasks with their workers' sessions (SPEC §19).
const GITIGNORE: &str = "logs/\nlocks/\nstate/\n";
/// The file an earlier agent-runner wrote, brought up to date.
const OLD_GITIGNORE: &str = "logs/\nlocks/\n";

/// `<repo>/.agent-runner`, created (with its `.gitignore`) if missing. Fails if it
/// is a symlink or not a directory.
pub fn open(repo: &Path) -> std::io::Result<Dir> {
    let dir = Dir::open(repo)?.subdir(DIR_NAME)?;
    let ours = !dir.exists(".gitignore")?
        || dir
            .read(".gitignore", 64)
            .is_ok_and(|b| b == OLD_GITIGNORE.as_bytes());
    if ours {
        dir.write_atomic(".gitignore", GITIGNORE.as_bytes())?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::testing::scratch;

    #[test]
    fn creates_the_directory_and_its_gitignore() {
        let repo = scratch("create");
        let dir = open(&repo).unwrap();
        assert_eq!(dir.path(), repo.join(".agent-runner"));
        assert_eq!(
            std::fs::read_to_string(repo.join(".agent-runner/.gitignore")).unwrap(),
            GITIGNORE
        );
        dir.write_atomic("note.md", b"one").unwrap();
        dir.write_atomic("note.md", b"two").unwrap();
        assert_eq!(dir.read("note.md", 100).unwrap(), b"two");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
        let _ = std::fs::remove_dir_all(repo);
    }

    #[test]
    fn a_symlinked_private_dir_is_refused_and_its_target_untouched() {
        let repo = scratch("swap");
        let elsewhere = scratch("swap-target");
        std::os::unix::fs::symlink(&elsewhere, repo.join(".agent-runner")).unwrap();
        let e = open(&repo).unwrap_err();
        assert!(e.to_string().contains("is a symlink"), "{e}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(repo);
        let _ = std::fs::remove_dir_all(elsewhere);
    }
}
