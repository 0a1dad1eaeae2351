//! The bundler (SPEC §9, §12): one container per orchestrator brings every isolated
//! attempt's branch back, reading the worker-written clone's HEAD and refs as data
//! and never its git config. Real binary, real daemon, the test worker image.

use crate::support;

use support::docker::containers_labelled;
use support::pipeline::{BUILDER_REPLY, Pipeline, commit, git, meta_script, task_id};

/// git in the worker's container, as the worker would run it.
const GIT: &str = "git -c safe.directory='*' -c user.name=w -c user.email=w@localhost";

/// Runs one task whose worker does `directives`, in a clone; the orchestrator's exit
/// code and the attempt.
fn run_one(name: &str, directives: &str) -> (Pipeline, String, i32, serde_json::Value) {
    let p = Pipeline::new(name, true);
    p.init(
        BUILDER_REPLY,
        &meta_script(directives),
        "isolation: clone\n",
    );
    let id = task_id(name);
    p.new_task(&id, "Do it");
    p.run_tasks(&[&id]);
    let out = p.orchestrate_once(&[]).output();
    let attempt = p.attempts(&id).remove(0);
    assert_eq!(
        containers_labelled("agent-runner.task", &id),
        Vec::<String>::new()
    );
    let ws_id = p.ws().file_name().unwrap().to_str().unwrap().to_string();
    assert_eq!(
        containers_labelled("agent-runner.task", &format!("bundler-{ws_id}")),
        Vec::<String>::new()
    );
    (p, id, out.code.unwrap_or(-1), attempt)
}

#[test]
fn the_worker_s_commits_and_packed_refs_come_back_but_not_its_git_config() {
    let directives = format!(
        "@run: echo one > committed.txt && {GIT} add committed.txt && {GIT} commit -qm 'worker commit' && {GIT} pack-refs --all\n\
         @run: printf '[filter \"evil\"]\\n\\tclean = sed s/done/EVIL/\\n' >> .git/config; echo 'out.txt filter=evil' > .gitattributes && echo done > out.txt\n\
         @say: committed one file, left two"
    );
    let (p, id, code, attempt) = run_one("bundler-data", &directives);
    assert_eq!(
        (code, attempt["status"].as_str()),
        (0, Some("succeeded")),
        "{attempt}"
    );
    let branch = format!("agent-runner/{id}");
    let log = git(&p.root, &["log", "--format=%s", &branch]);
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [&format!("agent-runner: task {id}"), "worker commit", "init"],
        "the worker's commit (its branch only in packed-refs), then what it left"
    );
    assert_eq!(
        git(&p.root, &["show", &format!("{branch}:committed.txt")]),
        "one\n"
    );
    assert_eq!(
        git(&p.root, &["show", &format!("{branch}:out.txt")]),
        "done\n",
        "the worker's clean filter did not run: its .git/config is read-only, and never read"
    );
}

#[test]
fn a_head_that_is_a_link_is_not_followed() {
    let (_p, id, code, attempt) = run_one(
        "bundler-link",
        "@run: echo x > x.txt && ln -sf /etc/hostname .git/HEAD\n@say: linked HEAD",
    );
    assert_eq!(code, 1);
    let error = attempt["error"].as_str().unwrap();
    assert!(
        error.contains(&format!(
            "branch agent-runner/{id} could not be brought back"
        )) && error.contains("/.git/HEAD is a FIFO, a device or a link in .git"),
        "{error}"
    );
    assert_eq!(
        attempt["result"]["status"], "succeeded",
        "the runner itself succeeded"
    );
}

#[test]
fn a_branch_checked_out_in_the_root_during_the_run_is_not_overwritten() {
    let p = Pipeline::new("bundler-switched", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@say: working\n@sleep: 2\n@run: echo x > x.txt\n@say: wrote x.txt"),
        "isolation: clone\n",
    );
    let id = task_id("bundler-switched");
    p.new_task(&id, "Write x.txt");
    let job = p.run_tasks(&[&id]).remove(0);
    let orchestrator = p.orchestrate_once(&[]).start();
    let log = p
        .ws()
        .join(format!("clones/{job}/.agent-runner/logs/{id}/run-1.log"));
    support::pipeline::wait_for(std::time::Duration::from_secs(30), || {
        support::pipeline::read(&log).contains("working")
    });
    // The user checks the task's branch out while the worker works.
    git(
        &p.root,
        &["switch", "-q", "-c", &format!("agent-runner/{id}")],
    );
    orchestrator.finish().code(1);
    let attempt = p.attempts(&id).remove(0);
    let error = attempt["error"].as_str().unwrap();
    assert!(
        error.contains(&format!(
            "agent-runner/{id} is checked out in root_dir {}; switch to another branch",
            p.root.display()
        )),
        "{error}"
    );
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    assert!(!p.root.join("x.txt").exists());
}

#[test]
fn a_killed_orchestrator_leaves_no_bundler_and_the_next_one_removes_its_spares() {
    use std::time::Duration;
    use support::pipeline::{read, wait_for};
    let p = Pipeline::new("bundler-kill9", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@say: working\n@sleep: 120"),
        "isolation: clone\n",
    );
    let ids: Vec<String> = (1..=3).map(|n| task_id(&format!("kill9-{n}"))).collect();
    for id in &ids {
        p.new_task(id, "Keep busy");
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let jobs = p.run_tasks(&refs);
    let orchestrator = p.in_ws(&["orchestrate"], &[]).start();
    let ws_id = p.ws().file_name().unwrap().to_str().unwrap().to_string();
    let bundler = format!("bundler-{ws_id}");
    let entries = |dir: &str, prefix: &str| -> Vec<String> {
        std::fs::read_dir(p.ws().join(dir))
            .map(|read| {
                read.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(prefix))
                    .collect()
            })
            .unwrap_or_default()
    };
    wait_for(Duration::from_secs(30), || {
        let working = jobs.iter().zip(&ids).any(|(job, id)| {
            read(
                &p.ws()
                    .join(format!("clones/{job}/.agent-runner/logs/{id}/run-1.log")),
            )
            .contains("working")
        });
        working
            && !entries("clones", ".spare-").is_empty()
            && containers_labelled("agent-runner.task", &bundler).len() == 1
    });
    assert_eq!(entries("bundles", "").len(), 1);
    orchestrator.kill();
    // Its pipe closed: the bundler ends by itself, as the runner's container does.
    wait_for(Duration::from_secs(20), || {
        containers_labelled("agent-runner.task", &bundler).is_empty()
            && ids
                .iter()
                .all(|id| containers_labelled("agent-runner.task", id).is_empty())
    });
    // The next orchestrator (with nothing left to run) removes what it left.
    for name in p.ipc("queue") {
        std::fs::remove_file(p.ws().join("ipc/queue").join(name)).unwrap();
    }
    p.orchestrate_once(&[]).output().code(1);
    assert_eq!(entries("clones", ".spare-"), Vec::<String>::new());
    assert_eq!(entries("bundles", ""), Vec::<String>::new());
}

/// Should anything a worker wrote ever run code in the bundler (a git bug, say), it
/// could neither reach a network, nor change a clone, nor make a set-id file: every attempt's branch passes
/// through that one container. Shown by running commands in it as that code would.
#[test]
fn the_bundler_has_no_network_and_cannot_change_the_clones() {
    use std::time::Duration;
    use support::docker::{docker, docker_ok};
    use support::pipeline::{read, wait_for};
    let p = Pipeline::new("bundler-confined", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@say: working\n@sleep: 120"),
        "isolation: clone\n",
    );
    let id = task_id("bundler-confined");
    p.new_task(&id, "Keep busy");
    let job = p.run_tasks(&[&id]).remove(0);
    let orchestrator = p.in_ws(&["orchestrate"], &[]).start();
    let ws_id = p.ws().file_name().unwrap().to_str().unwrap().to_string();
    let label = format!("bundler-{ws_id}");
    let log = p
        .ws()
        .join(format!("clones/{job}/.agent-runner/logs/{id}/run-1.log"));
    wait_for(Duration::from_secs(30), || {
        read(&log).contains("working")
            && containers_labelled("agent-runner.task", &label).len() == 1
    });
    let bundler = containers_labelled("agent-runner.task", &label).remove(0);
    let links = docker_ok(&["exec", &bundler, "ls", "/sys/class/net"]);
    assert_eq!(
        links.split_whitespace().collect::<Vec<_>>(),
        ["lo"],
        "the bundler's network"
    );
    let planted = format!("/clones/{job}/planted");
    let (wrote, _, error) = docker(&["exec", &bundler, "touch", &planted]);
    assert!(
        !wrote && error.contains("Read-only file system"),
        "the bundler wrote into a clone: {error}"
    );
    assert!(!p.ws().join(format!("clones/{job}/planted")).exists());
    // Its output directory is on the host: no set-id file there either, nor in the
    // clone the attempt's worker writes (both under agent-runner's seccomp profile).
    let (made, _, error) = docker(&[
        "exec",
        &bundler,
        "sh",
        "-c",
        "cp /bin/busybox /out/setid && chmod 4755 /out/setid",
    ]);
    assert!(
        !made && error.contains("Operation not permitted"),
        "the bundler made a set-id file: {error}"
    );
    let worker = containers_labelled("agent-runner.task", &id).remove(0);
    let (made, _, error) = docker(&[
        "exec",
        &worker,
        "sh",
        "-c",
        "cp /bin/busybox /workspace/project/setid && chmod 4755 /workspace/project/setid",
    ]);
    assert!(
        !made && error.contains("Operation not permitted"),
        "the attempt's worker made a set-id file: {error}"
    );
    support::web::signal(orchestrator.id(), 15);
    orchestrator.finish();
    for name in [&id, &label] {
        assert_eq!(
            containers_labelled("agent-runner.task", name),
            Vec::<String>::new()
        );
    }
}

/// Commits `files` into the project (root_dir), on top of its first commit.
fn commit_files(p: &Pipeline, files: &[(&str, &str)]) {
    for (name, text) in files {
        std::fs::write(p.root.join(name), text).unwrap();
        git(&p.root, &["add", name]);
    }
    commit(&p.root, "files");
}

/// A worker's commit with a checked-out submodule whose own config has a clean
/// filter, the files stat-dirty: `git add` in the bundler would run `git status` in
/// it, and the filter with it. The filter rewires the bundler's repository so that
/// the next attempt's files are changed on their way back.
const SUBMODULE_ATTACK: &str = r#"set -e
G="git -c safe.directory=* -c user.name=w -c user.email=w@localhost"
git init -q sub
cd sub
echo data > f
$G add f
$G commit -qm sub
printf '[filter "x"]\n\tclean = sh ../payload.sh\n' >> .git/config
echo '* filter=x' > .gitattributes
touch -d '2000-01-01 00:00' f
cd ..
$G update-index --add --cacheinfo "160000,$(git -c safe.directory=* -C sub rev-parse HEAD),sub"
$G commit -qm 'a submodule'
"#;

/// What the filter would run in the bundler.
const PAYLOAD: &str = r#"printf '[filter "evil"]\n\tclean = sed s/good/EVIL/\n[core]\n\tattributesFile = /tmp/agent-runner-evil\n' >> /tmp/agent-runner-bundler/.git/config
echo '* filter=evil' > /tmp/agent-runner-evil
cat
"#;

#[test]
fn a_worker_s_submodule_config_does_not_run_in_the_bundler() {
    let p = Pipeline::new("bundler-submodule", true);
    commit_files(
        &p,
        &[("attack.sh", SUBMODULE_ATTACK), ("payload.sh", PAYLOAD)],
    );
    let worker = "@run: case $(git -c safe.directory='*' symbolic-ref --short HEAD) in *-evil-*) sh attack.sh ;; *) echo good > out.txt ;; esac\n@say: done";
    p.init(BUILDER_REPLY, &meta_script(worker), "isolation: clone\n");
    let (evil, good) = (task_id("sub-evil"), task_id("sub-good"));
    p.new_task(&evil, "Add a submodule");
    p.new_task(&good, "Write out.txt");
    // One at a time, in this order: the evil branch is bundled first.
    p.run_tasks(&[&evil]);
    p.run_tasks(&[&good]);
    p.orchestrate_once(&[]).output().code(0);
    for id in [&evil, &good] {
        assert_eq!(p.attempts(id)[0]["status"], "succeeded", "{id}");
        assert_eq!(
            containers_labelled("agent-runner.task", id),
            Vec::<String>::new()
        );
    }
    assert_eq!(
        git(&p.root, &["show", &format!("agent-runner/{good}:out.txt")]),
        "good\n",
        "the next attempt's files came back as its worker wrote them"
    );
    let tree = git(
        &p.root,
        &["ls-tree", &format!("agent-runner/{evil}"), "sub"],
    );
    assert!(
        tree.starts_with("160000 commit "),
        "the submodule came back: {tree}"
    );
}

/// Runs one task whose test command (as a worker-written test script could: the
/// runner's own snapshot after a worker run would trip on it too) runs `plant`; the
/// attempt's error.
fn planted_by_the_test(name: &str, plant: &str) -> String {
    let builder = BUILDER_REPLY.replace(
        "    project:\n",
        &format!("    test:\n      command: {plant:?}\n    project:\n"),
    );
    let p = Pipeline::new(name, true);
    p.init(
        &builder,
        &meta_script("@run: echo x > x.txt\n@say: wrote x.txt"),
        "isolation: clone\n",
    );
    let id = task_id(name);
    p.new_task(&id, "Write x.txt");
    let job = p.run_tasks(&[&id]).remove(0);
    p.orchestrate_once(&[]).output().code(1);
    let attempt = p.attempts(&id).remove(0);
    assert_eq!(attempt["result"]["status"], "succeeded", "{attempt}");
    let error = attempt["error"].as_str().unwrap().to_string();
    assert!(
        error.contains(&format!(
            "branch agent-runner/{id} could not be brought back"
        )),
        "{error}"
    );
    // The clone it points to is the worker's: git there would run its config.
    assert!(
        error.ends_with(&format!(
            "(its clone is kept in {}: the worker wrote all of it, .git included; look at its files, but run no git command in it)",
            p.ws().join("clones").join(&job).display()
        )),
        "{error}"
    );
    error
}

#[test]
fn a_fifo_in_the_clone_fails_the_attempt_instead_of_holding_up_the_bundler() {
    let error = planted_by_the_test("bundler-fifo", "[ -p .gitignore ] || mkfifo .gitignore");
    assert!(
        error.contains("/.gitignore is a FIFO, a device or a link in .git"),
        "{error}"
    );
}

#[test]
fn a_worker_s_refs_tags_and_shallow_file_reach_only_its_branch() {
    let directives = format!(
        "@run: echo evil > evil.txt && {GIT} add evil.txt && {GIT} commit -qm evil && c=$(git -c safe.directory='*' rev-parse HEAD) && for r in refs/heads/main refs/heads/master refs/remotes/origin/master refs/tags/v1 refs/tags/agent-runner; do {GIT} update-ref $r $c; done && {GIT} pack-refs --all && {GIT} symbolic-ref HEAD refs/heads/master && git -c safe.directory='*' rev-parse HEAD~1 > .git/shallow\n@say: moved refs"
    );
    let p = Pipeline::new("bundler-refs", true);
    let before = git(
        &p.root,
        &["for-each-ref", "--format=%(refname) %(objectname)"],
    );
    let head = git(&p.root, &["symbolic-ref", "HEAD"]);
    p.init(
        BUILDER_REPLY,
        &meta_script(&directives),
        "isolation: clone\n",
    );
    let id = task_id("bundler-refs");
    p.new_task(&id, "Do it");
    p.run_tasks(&[&id]);
    p.orchestrate_once(&[]).output().code(0);
    let after = git(
        &p.root,
        &["for-each-ref", "--format=%(refname) %(objectname)"],
    );
    let branch = format!("refs/heads/agent-runner/{id}");
    let added: Vec<&str> = after.lines().filter(|l| !before.contains(l)).collect();
    assert_eq!(added.len(), 1, "{after}");
    assert!(added[0].starts_with(&format!("{branch} ")), "{after}");
    assert!(
        before.lines().all(|l| after.contains(l)),
        "no other ref changed: {after}"
    );
    assert_eq!(git(&p.root, &["symbolic-ref", "HEAD"]), head);
    assert_eq!(
        git(&p.root, &["log", "--format=%s", &branch]),
        "evil\ninit\n",
        "the branch is what HEAD named, with its whole history"
    );
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    assert!(!p.root.join("evil.txt").exists());
}

#[test]
fn removing_a_succeeded_clone_follows_none_of_its_links() {
    let p = Pipeline::new("bundler-cleanup", true);
    let outside = p.scratch.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep.txt"), "keep\n").unwrap();
    let o = outside.display();
    // Links to a host directory, to /, to a host file, to the clones.
    let directives = format!(
        "@run: ln -s '{o}' escape && ln -s / root && mkdir d && ln -s '{o}/keep.txt' d/keep && ln -s .. up\n@say: linked"
    );
    p.init(
        BUILDER_REPLY,
        &meta_script(&directives),
        "isolation: clone\n",
    );
    let id = task_id("bundler-cleanup");
    let job = {
        p.new_task(&id, "Do it");
        p.run_tasks(&[&id]).remove(0)
    };
    p.orchestrate_once(&[]).output().code(0);
    let clone = p.ws().join("clones").join(&job);
    assert!(!clone.exists(), "the clone is removed");
    assert_eq!(
        std::fs::read_to_string(outside.join("keep.txt")).unwrap(),
        "keep\n"
    );
    assert!(p.root.join("README.md").is_file());
    assert!(p.ws().join("logs").join(&job).join("agent-runner").is_dir());
    let tree = git(
        &p.root,
        &["ls-tree", &format!("agent-runner/{id}"), "escape"],
    );
    assert!(
        tree.starts_with("120000 "),
        "the links came back as links: {tree}"
    );
    assert_eq!(
        containers_labelled("agent-runner.task", &id),
        Vec::<String>::new()
    );
}

#[test]
fn git_in_the_bundler_is_led_nowhere_by_links_or_alternates_in_git() {
    // git followed such a link and read its stdin: the orchestrator's requests (the
    // bundler waited for them) or pack-objects' object list (a broken bundle).
    let error = planted_by_the_test(
        "bundler-stdin",
        "c=.git/objects/info/commit-graphs; mkdir -p $c; [ -L $c/commit-graph-chain ] || ln -s /proc/self/fd/0 $c/commit-graph-chain",
    );
    assert!(
        error.contains(
            "/.git/objects/info/commit-graphs/commit-graph-chain is a FIFO, a device or a link in .git"
        ),
        "{error}"
    );
    // Alternates naming a directory of the clone, which could hold such links.
    let error = planted_by_the_test(
        "bundler-alternates",
        "mkdir -p elsewhere/info && echo \"$PWD/elsewhere\" > .git/objects/info/alternates",
    );
    assert!(
        error.contains("the clone borrows objects from elsewhere (.git/objects/info/alternates)"),
        "{error}"
    );
}

#[test]
fn the_bundler_has_the_worker_s_resource_limits() {
    let p = Pipeline::new("bundler-limits", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@say: working\n@sleep: 3\n@say: done"),
        "isolation: clone\n",
    );
    // The same defaults with limits (init again replaces them).
    let defaults = support::pipeline::read(&p.scratch.join("defaults.yaml")).replace(
        "network: none}",
        "network: none, limits: {memory: 300m, cpus: 1.5, pids: 321}}",
    );
    p.init_with("defaults-limits.yaml", &defaults);
    let id = task_id("bundler-limits");
    p.new_task(&id, "Work");
    p.run_tasks(&[&id]);
    let orchestrator = p.orchestrate_once(&[]).start();
    let ws_id = p.ws().file_name().unwrap().to_str().unwrap().to_string();
    let bundler = format!("bundler-{ws_id}");
    let mut names = Vec::new();
    support::pipeline::wait_for(std::time::Duration::from_secs(30), || {
        names = containers_labelled("agent-runner.task", &bundler);
        !names.is_empty()
    });
    let (ok, limits, _) = support::docker::docker(&[
        "inspect",
        "--format",
        "{{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} {{.HostConfig.PidsLimit}}",
        &names[0],
    ]);
    orchestrator.finish().code(0);
    assert!(ok);
    assert_eq!(limits.trim(), "314572800 1500000000 321");
}

#[test]
fn a_worker_moving_a_submodule_fetches_nothing_into_the_user_s_submodule() {
    let p = Pipeline::new("bundler-gitlink", true);
    let upstream = p.scratch.join("upstream");
    std::fs::create_dir(&upstream).unwrap();
    let commit = [
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@localhost",
        "commit",
    ];
    git(&upstream, &["init", "-q"]);
    git(
        &upstream,
        &[&commit[..], &["-q", "--allow-empty", "-m", "u1"]].concat(),
    );
    git(
        &p.root,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            upstream.to_str().unwrap(),
            "sub",
        ],
    );
    git(&p.root, &[&commit[..], &["-qm", "a submodule"]].concat());
    // Upstream moves on; the worker points the submodule at its new commit.
    git(
        &upstream,
        &[&commit[..], &["-q", "--allow-empty", "-m", "u2"]].concat(),
    );
    let u2 = git(&upstream, &["rev-parse", "HEAD"]);
    let directives = format!(
        "@run: {GIT} update-index --cacheinfo 160000,{},sub && {GIT} commit -qm 'move sub'\n@say: moved sub",
        u2.trim()
    );
    let sub_refs = || git(&p.root.join("sub"), &["for-each-ref"]);
    let before = sub_refs();
    p.init(
        BUILDER_REPLY,
        &meta_script(&directives),
        "isolation: clone\n",
    );
    let id = task_id("bundler-gitlink");
    p.new_task(&id, "Move sub");
    p.run_tasks(&[&id]);
    p.orchestrate_once(&[]).output();
    let attempt = p.attempts(&id).remove(0);
    assert_eq!(attempt["status"], "succeeded", "{attempt}");
    let tree = git(&p.root, &["ls-tree", &format!("agent-runner/{id}"), "sub"]);
    assert!(tree.contains(u2.trim()), "{tree}");
    assert_eq!(sub_refs(), before, "the submodule's refs did not move");
}

/// True while some process (a bundler's, in its container) runs `git add -A`.
fn hashing_in_a_bundler() -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        support::pipeline::read(&entry.path().join("cmdline")).starts_with("git\0add\0-A\0")
    })
}

#[test]
fn a_huge_bundle_does_not_hold_up_another_attempt_s_bring_back() {
    let p = Pipeline::new("bundler-huge", true);
    // 2 GiB of zeros take the bundler many seconds to hash; the other worker ends
    // a little later, while that goes on.
    let worker = "@run: case $(git -c safe.directory='*' symbolic-ref --short HEAD) in *huge*) truncate -s 2G big.bin ;; *) sleep 2; echo x > x.txt ;; esac\n@say: done";
    p.init(BUILDER_REPLY, &meta_script(worker), "isolation: clone\n");
    let (huge, quick) = (task_id("huge"), task_id("quick"));
    p.new_task(&huge, "Make a big file");
    p.new_task(&quick, "Write x.txt");
    p.run_tasks(&[&huge, &quick]);
    let orchestrator = p.orchestrate_once(&["--jobs", "2"]).start();
    support::pipeline::wait_for(std::time::Duration::from_secs(240), || {
        !p.attempts(&quick).is_empty()
    });
    let still_hashing = hashing_in_a_bundler();
    let out = orchestrator.finish();
    out.code(0);
    assert!(
        still_hashing,
        "the quick attempt was recorded only after the huge bundle was made"
    );
    assert_eq!(
        out.stderr.matches("bundler agent-runner-bundler-").count(),
        2,
        "a second bundler served the quick attempt"
    );
    for id in [&huge, &quick] {
        assert_eq!(p.attempts(id)[0]["status"], "succeeded", "{id}");
    }
    assert_eq!(
        git(&p.root, &["show", &format!("agent-runner/{quick}:x.txt")]),
        "x\n"
    );
    let size = git(
        &p.root,
        &["cat-file", "-s", &format!("agent-runner/{huge}:big.bin")],
    );
    assert_eq!(size.trim(), (2u64 << 30).to_string());
}
