//! Isolated attempts against a hostile root_dir repository (issue 18): an earlier
//! worker (or a config of the user's that includes a work tree file) may have
//! written root_dir's `.git`, so no host git runs there; a clone holds only what its
//! attempt needs; what is planted in the object store fails the attempt at once; a
//! killed orchestrator leaves no branch its record does not know of. Real binary,
//! real daemon, the test worker image.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::docker::containers_labelled;
use support::pipeline::{
    BUILDER_REPLY, Pipeline, alive, children_of, commit, git, meta_script, read, task_id, try_git,
    wait_for,
};

/// The worker: writes `<task>.txt`, named after its clone's branch.
const WORKER: &str = "@run: t=$(git -c safe.directory='*' symbolic-ref --short HEAD); echo \"$t\" > \"${t#agent-runner/}.txt\"\n@say: wrote my file";

/// The only attempt of task `id`.
fn attempt(p: &Pipeline, id: &str) -> Value {
    let attempts = p.attempts(id);
    assert_eq!(attempts.len(), 1, "{id}: {attempts:?}");
    attempts.into_iter().next().unwrap()
}

fn assert_no_containers(p: &Pipeline, ids: &[&str]) {
    for id in ids {
        assert_eq!(
            containers_labelled("agent-runner.task", id),
            Vec::<String>::new()
        );
    }
    let ws = p.ws().file_name().unwrap().to_str().unwrap().to_string();
    assert_eq!(
        containers_labelled("agent-runner.task", &format!("bundler-{ws}")),
        Vec::<String>::new()
    );
}

/// Every hook git knows of.
const HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "post-index-change",
    "fsmonitor-watchman",
];

/// Plants in `root`'s `.git` what would run `touch <marker>-<what>` if host git ran
/// there or read its config: the config of issue 18's attack (`ext::` through
/// `url.*.insteadOf`), an include, fsmonitor, hooks (in `.git/hooks` and in a
/// `core.hooksPath`), drivers chosen by `.git/info/attributes`, and more. Returns
/// the config as it was.
pub(super) fn plant(root: &Path, scratch: &Path, marker: &Path) -> Vec<u8> {
    let m = marker.display();
    let hooks = scratch.join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for dir in [root.join(".git/hooks"), hooks.clone()] {
        std::fs::create_dir_all(&dir).unwrap();
        for hook in HOOKS {
            let path = dir.join(hook);
            std::fs::write(&path, format!("#!/bin/sh\ntouch '{m}-hook-{hook}'\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    let included = scratch.join("included");
    std::fs::write(
        &included,
        format!("[core]\n\tfsmonitor = \"touch '{m}-include'; false\"\n"),
    )
    .unwrap();
    let config_path = root.join(".git/config");
    let original = std::fs::read(&config_path).unwrap();
    let planted = format!(
        "[protocol \"ext\"]\n\tallow = always\n\
         [url \"ext::sh -c touch% {m}-ext% #\"]\n\tinsteadOf = /\n\
         [include]\n\tpath = {inc}\n\
         [core]\n\tfsmonitor = \"touch '{m}-fsmonitor'; false\"\n\thooksPath = {hooks}\n\
         \tsshCommand = touch '{m}-ssh'\n\talternateRefsCommand = touch '{m}-altrefs'\n\
         \tpager = touch '{m}-pager'\n\teditor = touch '{m}-editor'\n\
         [filter \"x\"]\n\tclean = touch '{m}-clean'\n\tsmudge = touch '{m}-smudge'\n\tprocess = touch '{m}-process'\n\
         [merge \"x\"]\n\tdriver = touch '{m}-merge'\n\
         [diff \"x\"]\n\ttextconv = touch '{m}-textconv'\n\
         [credential]\n\thelper = !touch '{m}-credential'\n\
         [uploadpack]\n\tpackObjectsHook = touch '{m}-upload'\n\
         [fetch]\n\tfsckObjects = false\n\
         [gc]\n\tauto = 1\n[maintenance]\n\tauto = true\n",
        inc = included.display(),
        hooks = hooks.display(),
    );
    let mut config = original.clone();
    config.extend_from_slice(planted.as_bytes());
    std::fs::write(&config_path, config).unwrap();
    std::fs::create_dir_all(root.join(".git/info")).unwrap();
    std::fs::write(
        root.join(".git/info/attributes"),
        "* filter=x merge=x diff=x\n",
    )
    .unwrap();
    original
}

/// Asserts that nothing `plant` put in (with marker `pwned` in the scratch
/// directory) ran, then takes it out again: host git of the test's own from here on.
pub(super) fn unplant_and_check(p: &Pipeline, original: Vec<u8>) {
    let ran: Vec<String> = std::fs::read_dir(&p.scratch.path)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pwned"))
        .collect();
    std::fs::write(p.root.join(".git/config"), original).unwrap();
    std::fs::remove_dir_all(p.root.join(".git/hooks")).unwrap();
    std::fs::remove_file(p.root.join(".git/info/attributes")).unwrap();
    assert_eq!(ran, Vec::<String>::new(), "ran on the host");
}

#[test]
fn nothing_in_root_dir_s_git_config_hooks_or_info_runs_on_the_host() {
    let p = Pipeline::new("iso-config", true);
    p.init(BUILDER_REPLY, &meta_script(WORKER), "isolation: clone\n");
    let (a, b, c) = (task_id("cfg-a"), task_id("cfg-b"), task_id("cfg-c"));
    p.new_task_after(&a, &[]);
    p.new_task_after(&b, &[&a]);
    p.new_task_after(&c, &[]);
    p.run_tasks(&[&a, &b, &c]);
    let marker = p.scratch.join("pwned");
    let original = plant(&p.root, &p.scratch.path, &marker);
    // Clones (and spares), a merge of A into B, three branches brought back.
    let out = p.orchestrate_once(&["--jobs", "2"]).output();
    unplant_and_check(&p, original);
    out.code(0);
    for id in [&a, &b, &c] {
        assert_eq!(attempt(&p, id)["status"], "succeeded", "{id}");
    }
    let (_, seen) = try_git(&p.root, &["show", &format!("agent-runner/{b}:{a}.txt")]);
    assert_eq!(seen, format!("agent-runner/{a}\n"), "B was merged with A");
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    assert_no_containers(&p, &[&a, &b, &c]);
}

#[test]
fn a_clone_holds_only_its_base_and_dependencies_not_other_branches_the_stash_or_loose_objects() {
    let p = Pipeline::new("iso-minimal", true);
    // A branch with a secret, a stash, an object nothing references.
    git(&p.root, &["switch", "-q", "-c", "secret"]);
    std::fs::write(p.root.join(".env"), "TOKEN=secret\n").unwrap();
    git(&p.root, &["add", ".env"]);
    commit(&p.root, "secret");
    let secret = git(&p.root, &["rev-parse", "HEAD"]).trim().to_string();
    let env_blob = git(&p.root, &["rev-parse", "HEAD:.env"]).trim().to_string();
    git(&p.root, &["switch", "-q", "-"]);
    std::fs::write(p.root.join("README.md"), "stashed\n").unwrap();
    git(
        &p.root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@localhost",
            "stash",
            "-q",
        ],
    );
    let stash = git(&p.root, &["rev-parse", "stash@{0}"]).trim().to_string();
    let loose = p.scratch.file("loose", "dropped key\n");
    let dangling = git(&p.root, &["hash-object", "-w", loose.to_str().unwrap()])
        .trim()
        .to_string();
    let shas = [&secret, &env_blob, &stash, &dangling].map(|s| s.as_str());
    let worker = format!(
        "@run: for s in {}; do git -c safe.directory='*' cat-file -e $s 2>/dev/null && echo $s; done > seen.txt; git -c safe.directory='*' for-each-ref --format='%(refname)' > refs.txt; ls .git/objects/info | grep -c alternates > info.txt\n@say: looked",
        shas.join(" ")
    );
    p.init(BUILDER_REPLY, &meta_script(&worker), "isolation: clone\n");
    let id = task_id("iso-minimal");
    p.new_task_after(&id, &[]);
    p.run_tasks(&[&id]);
    p.orchestrate_once(&[]).output().code(0);
    let branch = format!("agent-runner/{id}");
    let show = |file: &str| git(&p.root, &["show", &format!("{branch}:{file}")]);
    assert_eq!(show("seen.txt"), "", "the clone had none of them");
    assert_eq!(show("refs.txt"), format!("refs/heads/{branch}\n"));
    assert_eq!(show("info.txt"), "0\n", "and borrows no objects");
    assert_no_containers(&p, &[&id]);
}

#[test]
fn a_fifo_in_root_dir_s_object_store_fails_the_attempt_at_once() {
    let p = Pipeline::new("iso-fifo", true);
    p.init(BUILDER_REPLY, &meta_script(WORKER), "isolation: clone\n");
    let id = task_id("iso-fifo");
    p.new_task_after(&id, &[]);
    p.run_tasks(&[&id]);
    let dir = p.root.join(".git/objects/ab");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("cdef0123456789abcdef0123456789abcdef01");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // git would wait on it for 300 s.
    let mut run = p.orchestrate_once(&[]).start();
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while run.child().try_wait().unwrap().is_none() {
        if std::time::Instant::now() > until {
            let _ = run.child().kill();
            panic!("the attempt hangs on the FIFO");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    run.finish().code(1);
    let error = attempt(&p, &id)["error"].as_str().unwrap().to_string();
    assert!(
        error.starts_with("cannot prepare the attempt's clone: ")
            && error.contains(&format!("{} is a FIFO", fifo.display())),
        "{error}"
    );
    assert_no_containers(&p, &[&id]);
}

#[test]
fn a_branch_checked_out_in_a_worktree_is_named_in_the_error_and_not_moved() {
    let p = Pipeline::new("iso-worktree", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@say: working\n@sleep: 2\n@run: echo x > x.txt\n@say: wrote x.txt"),
        "isolation: clone\n",
    );
    let id = task_id("iso-worktree");
    p.new_task_after(&id, &[]);
    let job = p.run_tasks(&[&id]).remove(0);
    let orchestrator = p.orchestrate_once(&[]).start();
    let log = p
        .ws()
        .join(format!("clones/{job}/.agent-runner/logs/{id}/run-1.log"));
    wait_for(Duration::from_secs(30), || read(&log).contains("working"));
    // The user checks the task's branch out in a worktree while the worker works.
    let worktree = p.scratch.join("wt");
    let branch = format!("agent-runner/{id}");
    git(
        &p.root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            &branch,
            worktree.to_str().unwrap(),
        ],
    );
    orchestrator.finish().code(1);
    let error = attempt(&p, &id)["error"].as_str().unwrap().to_string();
    assert!(
        error.contains(&format!(
            "{branch} is checked out in {}, a worktree of root_dir {}",
            worktree.display(),
            p.root.display()
        )),
        "{error}"
    );
    assert!(!worktree.join("x.txt").exists());
    assert_eq!(git(&worktree, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&p.root, &["rev-parse", &branch]),
        git(&p.root, &["rev-parse", "HEAD"]),
        "the branch did not move"
    );
}

#[test]
fn an_orchestrator_killed_while_bringing_a_branch_back_leaves_no_branch_and_nothing_behind() {
    let p = Pipeline::new("iso-kill9", true);
    // 2 GiB of zeros: the bundler hashes them for seconds.
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: truncate -s 2G big.bin\n@say: made a big file"),
        "isolation: clone\n",
    );
    let id = task_id("iso-kill9");
    p.new_task_after(&id, &[]);
    let job = p.run_tasks(&[&id]).remove(0);
    let mut orchestrator = p.in_ws(&["orchestrate"], &[]).start();
    let pid = orchestrator.id();
    // Host git is landing the bundle (the 2 GiB blob takes seconds to index).
    let cmdline = |pid: u32| read(Path::new(&format!("/proc/{pid}/cmdline")));
    let mut landing = None;
    let until = std::time::Instant::now() + Duration::from_secs(90);
    while landing.is_none() {
        assert!(
            std::time::Instant::now() < until,
            "no git landing the bundle"
        );
        landing = children_of(pid).into_iter().find(|child| {
            let line = cmdline(*child);
            // Host tools run by absolute path (a worker's `./git` never runs).
            line.split('\0')
                .next()
                .is_some_and(|argv0| argv0.ends_with("/git"))
                && (line.contains("\0index-pack\0") || line.contains("\0fetch\0"))
        });
        std::thread::sleep(Duration::from_millis(5));
    }
    orchestrator.child().kill().unwrap();
    orchestrator.child().wait().unwrap();
    assert_eq!(
        p.attempts(&id),
        Vec::<Value>::new(),
        "killed before recording"
    );
    let landing = landing.unwrap();
    wait_for(Duration::from_secs(10), || !alive(landing));
    let ws = p.ws().file_name().unwrap().to_str().unwrap().to_string();
    wait_for(Duration::from_secs(30), || {
        containers_labelled("agent-runner.task", &format!("bundler-{ws}")).is_empty()
    });
    // Nothing it started goes on to move the branch.
    std::thread::sleep(Duration::from_secs(3));
    let branch = format!("agent-runner/{id}");
    let (moved, _) = try_git(&p.root, &["rev-parse", "--verify", &branch]);
    assert!(
        !moved,
        "the branch was brought back after the orchestrator died"
    );
    // The next one records the attempt and removes what the killed one left.
    p.orchestrate_once(&[]).output().code(1);
    let recorded = attempt(&p, &id);
    assert_eq!(recorded["status"], "failed");
    assert!(recorded["branch"].is_null(), "{recorded}");
    assert!(
        recorded["error"]
            .as_str()
            .unwrap()
            .starts_with("orchestrator stopped"),
        "{recorded}"
    );
    let (moved, _) = try_git(&p.root, &["rev-parse", "--verify", &branch]);
    assert!(!moved);
    let logs: Vec<String> = std::fs::read_dir(p.ws().join("logs").join(&job))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        logs.iter()
            .all(|n| !n.contains("bundle") && !n.contains("branch")),
        "{logs:?}"
    );
    let bundles: Vec<_> = std::fs::read_dir(p.ws().join("bundles"))
        .unwrap()
        .flatten()
        .collect();
    assert!(bundles.is_empty(), "{bundles:?}");
    assert_no_containers(&p, &[&id]);
}
