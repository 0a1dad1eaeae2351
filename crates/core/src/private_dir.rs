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
/// What `.agent-runner/.gitignore` keeps out of git: all of it, itself included
/// (the notes, logs, locks, the state of tasks with their workers' sessions), as
/// tools' caches ignore themselves from inside: a run leaves nothing untracked in
/// the user's repository, and the user's own `.gitignore` is not touched.
const GITIGNORE: &str = "*\n";
/// The files earlier agent-runners wrote, brought up to date.
const OLD_GITIGNORES: [&str; 2] = ["logs/\nlocks/\n", "logs/\nlocks/\nstate/\n"];

/// `<repo>/.agent-runner`, created (with its `.gitignore`) if missing. Fails if it
/// is a symlink or not a directory.
pub fn open(repo: &Path) -> std::io::Result<Dir> {
    let dir = Dir::open(repo)?.subdir(DIR_NAME)?;
    let ours = !dir.exists(".gitignore")?
        || dir
            .read(".gitignore", 64)
            .is_ok_and(|b| OLD_GITIGNORES.iter().any(|old| b == old.as_bytes()));
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

    /// After a run, `git status` in the user's repository shows nothing of ours
    /// (`.agent-runner/` was left untracked); an earlier agent-runner's file is
    /// brought up to date, the user's own left as it is.
    #[test]
    fn the_directory_ignores_itself() {
        let repo = scratch("ignored");
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(&repo)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        git(&["init", "-q"]);
        let dir = open(&repo).unwrap();
        dir.write_atomic("task-t-1.md", b"# note").unwrap();
        let logs = dir.subdir("logs").unwrap();
        logs.write_atomic("run-1.log", b"x").unwrap();
        assert_eq!(git(&["status", "--porcelain", "--untracked-files=all"]), "");
        for old in OLD_GITIGNORES {
            dir.write_atomic(".gitignore", old.as_bytes()).unwrap();
            open(&repo).unwrap();
            assert_eq!(dir.read(".gitignore", 64).unwrap(), GITIGNORE.as_bytes());
        }
        dir.write_atomic(".gitignore", b"logs/\n").unwrap();
        open(&repo).unwrap();
        assert_eq!(
            dir.read(".gitignore", 64).unwrap(),
            b"logs/\n",
            "the user's own"
        );
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
