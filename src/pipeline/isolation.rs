//! Isolated attempts (SPEC §12 `--jobs N`): each runs in its own clone of root_dir,
//! on branch `agent-runner/<task-id>`, and a succeeded attempt's branch is brought
//! back into root_dir's repository without touching the user's checked-out branch or
//! work tree.
//!
//! The clone is made with `git clone --local --no-hardlinks`: hard-linked object
//! files would let the worker (root in its container) rewrite root_dir's objects.
//! After the worker has run, the clone is worker-written, and no host git command
//! may touch it (SPEC §9: its `.git/config` could run code on the host). So the
//! branch leaves the clone as a `git bundle` made *inside a container* (the task's
//! worker image, the clone mounted read-only, `--network none`; started while the
//! runner works, so bundling costs a line on its stdin), with the worker's uncommitted
//! changes committed there on a private index; the host only copies the bundle file
//! (no symlink followed) and `git fetch`es it into root_dir, checking every object. Host git commands on root_dir run with hooks and fsmonitor off,
//! since an earlier non-isolated run may have let a worker write its config.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::interrupt::Interrupt;
use crate::owner::Owner;
use crate::process::{self, Capture, Held, HeldWait, Invocation, Limits, Stop};
use crate::timestamp::human;
use crate::worker::container::user_args;
use crate::worker::docker_cli::mount_spec;
use crate::worker::sweep::{LABEL_TASK, owner_labels};

const GIT_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest bundle brought back.
const MAX_BUNDLE: u64 = 4 << 30;
/// Where the clone is mounted in the bundling container.
const CLONE_MOUNT: &str = "/workspace/project";
const OUT_MOUNT: &str = "/out";

/// The bundler's main process. It reports ready, then waits for one request line on
/// stdin: `<branch> <base> <task-id>`, or end-of-file (nothing to bring back: it
/// exits). Then it commits what the worker left uncommitted (on a private index and
/// repository that borrows the clone's objects; the read-only clone is not changed),
/// points the branch at it, and bundles the branch minus the base commit into /out.
/// It prints `agent-runner-bundle bundled <sha>`, or `agent-runner-bundle unchanged
/// <sha>` when the branch is the base itself.
const BUNDLER_SCRIPT: &str = r#"set -eu
echo agent-runner-bundler-ready
read -r branch base task || exit 0
export HOME=/tmp GIT_CONFIG_NOSYSTEM=1
export GIT_CONFIG_COUNT=2 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*' GIT_CONFIG_KEY_1=core.hooksPath GIT_CONFIG_VALUE_1=/dev/null
g=/tmp/agent-runner-bundle
git init -q --template= "$g"
echo /workspace/project/.git/objects > "$g/.git/objects/info/alternates"
head=$(git --git-dir=/workspace/project/.git rev-parse --verify 'HEAD^{commit}')
export GIT_DIR="$g/.git" GIT_WORK_TREE=/workspace/project GIT_INDEX_FILE=/tmp/agent-runner-bundle.index
git read-tree "$head"
git add -A -- . ':(exclude).agent-runner'
tree=$(git write-tree)
commit=$head
if [ "$tree" != "$(git rev-parse "$head^{tree}")" ]; then
  commit=$(git -c user.name=agent-runner -c user.email=agent-runner@localhost commit-tree "$tree" -p "$head" -m "agent-runner: task $task")
fi
git update-ref "refs/heads/$branch" "$commit"
if [ "$commit" = "$base" ]; then echo "agent-runner-bundle unchanged $commit"; exit 0; fi
git bundle create -q /out/branch.bundle "refs/heads/$branch" "^$base"
echo "agent-runner-bundle bundled $commit"
"#;

/// An attempt's clone.
#[derive(Debug, Clone)]
pub struct AttemptClone {
    pub dir: PathBuf,
    /// `agent-runner/<task-id>`.
    pub branch: String,
    /// The commit it started from (root_dir's HEAD).
    pub base: String,
}

/// The branch of task `task_id`.
pub fn branch_name(task_id: &str) -> String {
    format!("agent-runner/{task_id}")
}

/// True when `root` is the top level of a git work tree.
pub fn is_git_root(root: &Path) -> bool {
    git_on_root(root, &["rev-parse", "--show-toplevel"], Interrupt::never())
        .is_ok_and(|out| Path::new(out.trim()) == root)
}

/// Clones `root` (HEAD, committed state) into `dir` on branch `agent-runner/<task_id>`.
pub fn prepare(
    root: &Path,
    dir: &Path,
    task_id: &str,
    interrupt: Interrupt,
) -> Result<AttemptClone, String> {
    let branch = branch_name(task_id);
    // One call for both: the commit to start from, and the checked-out branch.
    let head = git_on_root(
        root,
        &["rev-parse", "HEAD^{commit}", "--symbolic-full-name", "HEAD"],
        interrupt,
    )
    .map_err(|e| {
        format!("root_dir has no commit to start from (isolated attempts start from HEAD): {e}")
    })?;
    let mut lines = head.lines();
    let base = lines.next().unwrap_or_default().trim().to_string();
    if lines.next().map(str::trim) == Some(format!("refs/heads/{branch}").as_str()) {
        return Err(checked_out(&branch, root));
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let dir_s = dir.display().to_string();
    let root_s = root.display().to_string();
    git(
        None,
        &[
            "clone",
            "--quiet",
            "--local",
            "--no-hardlinks",
            "--",
            &root_s,
            &dir_s,
        ],
        interrupt,
    )?;
    // The clone is ours until the worker starts: host git may still run here.
    git(
        Some(dir),
        &["switch", "--quiet", "-C", &branch, &base],
        interrupt,
    )?;
    Ok(AttemptClone {
        dir: dir.to_path_buf(),
        branch,
        base,
    })
}

/// A container of the task's worker image with the clone mounted read-only and an
/// output directory of ours, started while the runner works, so that bundling
/// afterwards costs a line on its stdin, not a `docker run` (nor a `docker exec`).
/// Its main process reads a pipe held here: it ends with this value, or with the
/// orchestrator, however that ends (as the sandbox's keep-alive does).
pub struct Bundler {
    name: String,
    image: String,
    out: PathBuf,
    keepalive: Held,
}

const BUNDLER_RESULT: &str = "agent-runner-bundle ";
/// Time allowed for the bundler to start (if it has not yet) and make the bundle.
const BUNDLER_TIMEOUT: Duration = Duration::from_secs(300);

/// Starts the bundler container for `clone`; `work` is a directory of ours.
pub fn start_bundler(
    clone: &AttemptClone,
    image: &str,
    task_id: &str,
    work: &Path,
) -> Result<Bundler, String> {
    let out = work.join("bundle-out");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let name = format!("agent-runner-bundle-{task_id}-{}", super::id::random_hex(6));
    let mut args: Vec<String> = [
        "run",
        "-i",
        "--rm",
        "--init",
        "--pull",
        "never",
        "--network",
        "none",
    ]
    .map(String::from)
    .to_vec();
    args.extend(["--name".into(), name.clone()]);
    args.extend(["--security-opt".into(), "no-new-privileges".into()]);
    // The sandbox's labels: the start-up sweep removes it if this process dies
    // without taking it down (its pipe normally does).
    args.extend(["--label".into(), format!("{LABEL_TASK}={task_id}")]);
    for (label, value) in owner_labels(&Owner::this_process()) {
        args.extend(["--label".into(), format!("{label}={value}")]);
    }
    args.extend(user_args());
    args.extend([
        "--mount".into(),
        mount_spec(&clone.dir, CLONE_MOUNT, true),
        "--mount".into(),
        mount_spec(&out, OUT_MOUNT, false),
        "--entrypoint".into(),
        "/bin/sh".into(),
        image.into(),
        "-c".into(),
        BUNDLER_SCRIPT.into(),
    ]);
    let keepalive =
        process::spawn_held(&Invocation::new("docker").args(args)).map_err(|e| e.to_string())?;
    Ok(Bundler {
        name,
        image: image.to_string(),
        out,
        keepalive,
    })
}

impl Bundler {
    /// Removes the container (closing its pipe ends it; `--rm` removes it).
    pub fn stop(self) {
        if !self.keepalive.release(Duration::from_secs(10)) {
            let _ = run(
                &Invocation::new("docker").args(["rm", "-f", &self.name]),
                Interrupt::never(),
            );
        }
        let _ = std::fs::remove_dir_all(&self.out);
    }

    /// Asks the bundler for the bundle and waits for its answer.
    fn bundle(
        &mut self,
        clone: &AttemptClone,
        task_id: &str,
        interrupt: Interrupt,
    ) -> Result<Bundled, String> {
        let image = self.image.clone();
        let request = format!("{} {} {task_id}", clone.branch, clone.base);
        let answer = match self.keepalive.send_line(&request) {
            Ok(()) => self
                .keepalive
                .wait_for_line(BUNDLER_RESULT, BUNDLER_TIMEOUT, interrupt),
            Err(_) => Err(HeldWait::Ended(self.keepalive.stderr())),
        };
        let stderr = match answer {
            Ok(answer) => {
                if let Some(sha) = answer.strip_prefix("unchanged ") {
                    if sha.len() >= 40 && sha.chars().all(|c| c.is_ascii_hexdigit()) {
                        return Ok(Bundled::Unchanged(sha.to_string()));
                    }
                }
                if answer.starts_with("bundled ") {
                    return Ok(Bundled::Bundle);
                }
                format!("unexpected answer {answer:?}")
            }
            Err(HeldWait::Interrupted) => return Err("interrupted".into()),
            Err(HeldWait::TimedOut) => format!("no bundle within {}", human(BUNDLER_TIMEOUT)),
            Err(HeldWait::Ended(stderr)) => crate::text::tail(stderr.trim(), 600),
        };
        if stderr.contains("git: not found")
            || stderr.contains("\"git\": executable file not found")
        {
            return Err(format!(
                "the worker image {image} has no git, which bundling the branch needs: {stderr}"
            ));
        }
        Err(format!(
            "bundling the branch in a container of {image} failed: {stderr}"
        ))
    }
}

/// Brings the clone's branch back into `root` as `agent-runner/<task_id>`: bundled
/// by `bundler`, fetched on the host. `work` is a directory of ours.
pub fn bring_back(
    clone: &AttemptClone,
    root: &Path,
    bundler: &mut Bundler,
    task_id: &str,
    work: &Path,
    interrupt: Interrupt,
) -> Result<(), String> {
    let target = format!("refs/heads/{}", clone.branch);
    refuse_checked_out(root, &clone.branch, interrupt)?;
    match bundler.bundle(clone, task_id, interrupt)? {
        Bundled::Unchanged(sha) => {
            git_on_root(root, &["update-ref", &target, &sha], interrupt)?;
        }
        Bundled::Bundle => {
            // A file of ours, copied without following a link the container may
            // have put in its place.
            let bundle = work.join("branch.bundle");
            let _ = std::fs::remove_file(&bundle);
            super::safe_read::copy_regular(&bundler.out.join("branch.bundle"), &bundle, MAX_BUNDLE)
                .map_err(|e| format!("cannot take the bundle from the container: {e}"))?;
            let refspec = format!("+{target}:{target}");
            let fetched = git_on_root(
                root,
                &[
                    "-c",
                    "transfer.fsckObjects=true",
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    "--no-write-fetch-head",
                    &bundle.display().to_string(),
                    &refspec,
                ],
                interrupt,
            );
            let _ = std::fs::remove_file(&bundle);
            fetched?;
        }
    }
    Ok(())
}

/// An error if `branch` is root_dir's checked-out branch: updating it would change
/// the user's work tree under them.
fn refuse_checked_out(root: &Path, branch: &str, interrupt: Interrupt) -> Result<(), String> {
    match git_on_root(root, &["symbolic-ref", "-q", "HEAD"], interrupt) {
        Ok(head) if head.trim() == format!("refs/heads/{branch}") => Err(checked_out(branch, root)),
        _ => Ok(()),
    }
}

fn checked_out(branch: &str, root: &Path) -> String {
    format!(
        "{branch} is checked out in root_dir {}; switch to another branch so it can be updated",
        root.display()
    )
}

enum Bundled {
    Bundle,
    Unchanged(String),
}

/// `git -c core.hooksPath=/dev/null -c core.fsmonitor=false -C root ...`; stdout.
fn git_on_root(root: &Path, args: &[&str], interrupt: Interrupt) -> Result<String, String> {
    git(Some(root), args, interrupt)
}

fn git(dir: Option<&Path>, args: &[&str], interrupt: Interrupt) -> Result<String, String> {
    let mut invocation = Invocation::new("git").args([
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
    ]);
    if let Some(dir) = dir {
        invocation = invocation.args(["-C".to_string(), dir.display().to_string()]);
    }
    let invocation = invocation.args(args.iter().copied());
    let (ok, stdout, stderr) = run(&invocation, interrupt)?;
    if ok {
        Ok(stdout)
    } else {
        Err(format!(
            "`{}` failed: {}",
            invocation.display(),
            crate::text::tail(stderr.trim(), 600)
        ))
    }
}

/// Runs a short command; (success, stdout, stderr tail).
fn run(invocation: &Invocation, interrupt: Interrupt) -> Result<(bool, String, String), String> {
    let mut stdout = String::new();
    let mut on_line = |line: &[u8]| {
        if stdout.len() < 256 * 1024 {
            stdout.push_str(&String::from_utf8_lossy(line));
            stdout.push('\n');
        }
    };
    let mut capture = Capture::in_memory(16 * 1024).with_lines(64 * 1024, &mut on_line);
    let finished = process::run(
        invocation,
        &Limits::wall(GIT_TIMEOUT, interrupt),
        &mut capture,
        Stop::Terminate,
    )
    .map_err(|e| e.to_string())?;
    let stderr = capture.stderr();
    drop(capture);
    match finished.ending {
        process::Ending::Interrupted => Err("interrupted".into()),
        process::Ending::TimedOut => Err(format!("`{}` timed out", invocation.display())),
        _ => Ok((finished.success(), stdout, stderr)),
    }
}
