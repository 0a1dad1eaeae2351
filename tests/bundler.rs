//! The bundler (SPEC §9, §12): one container per orchestrator brings every isolated
//! attempt's branch back, reading the worker-written clone's HEAD and refs as data
//! and never its git config. Real binary, real daemon, the test worker image.

mod support;

use support::docker::containers_labelled;
use support::pipeline::{BUILDER_REPLY, Pipeline, git, meta_script, task_id};

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
         @run: printf '[filter \"evil\"]\\n\\tclean = sed s/done/EVIL/\\n' >> .git/config && echo 'out.txt filter=evil' > .gitattributes && echo done > out.txt\n\
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
        "the worker's clean filter did not run: its .git/config was never read"
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
        )) && error.contains("/.git/HEAD is not a plain file"),
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
    let mut orchestrator = p.in_ws(&["orchestrate"], &[]).start();
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
    orchestrator.child().kill().unwrap();
    orchestrator.child().wait().unwrap();
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
