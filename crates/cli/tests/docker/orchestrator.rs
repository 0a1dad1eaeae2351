//! The orchestrator under concurrency and signals: two orchestrators on one queue,
//! `--jobs 3` with clones and branches, SIGTERM, and SIGKILL of the orchestrator or
//! of its runner. Real binary, real daemon, the test worker image.

use crate::support;

use std::collections::HashSet;
use std::time::Duration;

use support::docker::containers_labelled;
use support::pipeline::{
    BUILDER_REPLY, Pipeline, QUICK_META, alive, children_of, git, meta_script, read, task_id,
    wait_for,
};
use support::prerequisite::needs;

#[test]
fn two_orchestrators_run_each_of_20_jobs_exactly_once() {
    let p = Pipeline::new("orch-twice", false);
    p.init(BUILDER_REPLY, QUICK_META, "");
    let ids: Vec<String> = (0..20).map(|n| format!("twice-{n:02}")).collect();
    for id in &ids {
        p.new_task(id, "Nothing to do");
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let jobs = p.run_tasks(&refs);
    assert_eq!(jobs.len(), 20);
    let first = p.orchestrate_once(&[]).start();
    let second = p.orchestrate_once(&[]).start();
    let (a, b) = (first.finish(), second.finish());
    a.code(0);
    b.code(0);
    let claims = |stderr: &str| -> Vec<String> {
        stderr
            .lines()
            .filter_map(|l| {
                l.split_once(" job ")?
                    .1
                    .split_once(": claimed ")
                    .map(|(j, _)| j.to_string())
            })
            .collect()
    };
    let (ca, cb) = (claims(&a.stderr), claims(&b.stderr));
    eprintln!("claims: {} and {}", ca.len(), cb.len());
    let all: HashSet<&String> = ca.iter().chain(&cb).collect();
    assert_eq!(ca.len() + cb.len(), 20, "no job claimed twice");
    assert_eq!(all, jobs.iter().collect(), "every job claimed");
    for id in &ids {
        let attempts = p.attempts(id);
        assert_eq!(attempts.len(), 1, "{id}: {attempts:?}");
        assert_eq!(attempts[0]["status"], "succeeded");
    }
    assert_eq!(p.ipc("results").len(), 20);
    assert_eq!(p.ipc("running"), Vec::<String>::new());
    assert_eq!(p.ipc("queue"), Vec::<String>::new());
}

#[test]
fn jobs_3_run_in_clones_and_bring_back_three_branches_without_touching_the_root() {
    let p = Pipeline::new("orch-branches", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: cat /proc/sys/kernel/random/uuid > shared.txt\n@say: wrote shared.txt"),
        "",
    );
    let ids: Vec<String> = (1..=3).map(|n| task_id(&format!("branch{n}"))).collect();
    for id in &ids {
        p.new_task(id, "Write shared.txt");
    }
    let head = git(&p.root, &["rev-parse", "HEAD"]);
    let branch = git(&p.root, &["symbolic-ref", "HEAD"]);
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    p.run_tasks(&refs);
    let out = p.orchestrate_once(&["--jobs", "3"]).output();
    out.code(0)
        .stderr_has("up to 3 attempt(s) at once, each in its own clone");
    // The user's branch, HEAD and work tree are as they were.
    assert_eq!(git(&p.root, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&p.root, &["symbolic-ref", "HEAD"]), branch);
    assert_eq!(
        git(&p.root, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    assert!(!p.root.join("shared.txt").exists());
    let mut contents = HashSet::new();
    let mut spans = Vec::new();
    for id in &ids {
        let name = format!("agent-runner/{id}");
        let tip = git(&p.root, &["rev-parse", &name]);
        assert_eq!(
            git(&p.root, &["rev-parse", &format!("{name}^")]),
            head,
            "one commit on the user's HEAD"
        );
        let content = git(&p.root, &["show", &format!("{name}:shared.txt")]);
        assert_eq!(content.trim().len(), 36, "a uuid: {content}");
        contents.insert(content);
        let files = git(&p.root, &["show", "--name-only", "--format=", tip.trim()]);
        assert_eq!(
            files.trim(),
            "shared.txt",
            ".agent-runner/ stays out of the commit"
        );
        let attempt = &p.attempts(id)[0];
        assert_eq!(attempt["status"], "succeeded", "{attempt}");
        assert_eq!(attempt["branch"], name.as_str());
        spans.push((
            attempt["started_at"].as_str().unwrap().to_string(),
            attempt["finished_at"].as_str().unwrap().to_string(),
        ));
        assert_eq!(
            containers_labelled("agent-runner.task", id),
            Vec::<String>::new()
        );
    }
    assert_eq!(
        contents.len(),
        3,
        "three different changes to the same file"
    );
    let last_start = spans.iter().map(|s| &s.0).max().unwrap();
    let first_end = spans.iter().map(|s| &s.1).min().unwrap();
    assert!(
        last_start < first_end,
        "the three attempts overlapped: {spans:?}"
    );
}

#[test]
fn a_branch_checked_out_in_a_linked_worktree_is_not_moved() {
    // No worker run: the branch comes back unchanged, by update-ref, which (unlike
    // fetch) does not look at worktrees by itself.
    let p = Pipeline::new("orch-worktree", true);
    p.init(BUILDER_REPLY, QUICK_META, "isolation: clone\n");
    let id = task_id("worktree");
    p.new_task(&id, "Nothing to do");
    let linked = p.scratch.join("linked");
    let branch = format!("agent-runner/{id}");
    git(
        &p.root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            &branch,
            linked.to_str().unwrap(),
        ],
    );
    std::fs::write(linked.join("mine.txt"), "the user's work\n").unwrap();
    git(&linked, &["add", "mine.txt"]);
    support::pipeline::commit(&linked, "mine");
    let tip = git(&linked, &["rev-parse", "HEAD"]);
    p.run_tasks(&[&id]);
    p.orchestrate_once(&[]).output().code(1);
    let error = p.attempts(&id)[0]["error"].as_str().unwrap().to_string();
    assert!(
        error.contains(&format!("{branch} is checked out in {}", linked.display())),
        "{error}"
    );
    assert_eq!(git(&linked, &["rev-parse", "HEAD"]), tip);
    assert_eq!(git(&linked, &["status", "--porcelain"]), "");
}

#[test]
fn a_branch_checked_out_in_the_root_is_not_overwritten() {
    let p = Pipeline::new("orch-checked-out", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: echo x > x.txt\n@say: wrote x.txt"),
        "isolation: clone\n",
    );
    let id = task_id("checked");
    p.new_task(&id, "Write x.txt");
    git(
        &p.root,
        &["switch", "-q", "-c", &format!("agent-runner/{id}")],
    );
    p.run_tasks(&[&id]);
    p.orchestrate_once(&[]).output().code(1);
    let attempt = &p.attempts(&id)[0];
    let error = attempt["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("agent-runner/{id} is checked out in root_dir")),
        "{error}"
    );
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    assert_eq!(
        containers_labelled("agent-runner.task", &id),
        Vec::<String>::new()
    );
}

/// A workspace with one queued task whose worker says "working" and sleeps, and an
/// orchestrator (`extra` flags) running it; returns once the worker is at it, with
/// the orchestrator and the runner's pid.
fn busy(name: &str, extra: &[&str]) -> (Pipeline, String, String, support::Running, u32) {
    let p = Pipeline::new(name, false);
    let id = task_id(name);
    p.init(
        BUILDER_REPLY,
        &meta_script("@say: working\n@sleep: 120"),
        "",
    );
    p.new_task(&id, "Keep busy");
    let job = p.run_tasks(&[&id]).remove(0);
    let orchestrator = p.in_ws(&["orchestrate"], extra).start();
    let log = p.root.join(format!(".agent-runner/logs/{id}/run-1.log"));
    wait_for(Duration::from_secs(30), || read(&log).contains("working"));
    let runner = children_of(orchestrator.id());
    assert_eq!(runner.len(), 1, "one agent-runner child: {runner:?}");
    (p, id, job, orchestrator, runner[0])
}

#[test]
fn sigkill_of_the_orchestrator_stops_its_runner_and_the_next_start_records_it() {
    let (p, id, job, orchestrator, runner) = busy("orch-kill9", &[]);
    assert_eq!(containers_labelled("agent-runner.task", &id).len(), 1);
    orchestrator.kill();
    // The runner notices (parent-death signal), cleans up and writes its note.
    wait_for(Duration::from_secs(20), || !alive(runner));
    wait_for(Duration::from_secs(10), || {
        containers_labelled("agent-runner.task", &id).is_empty()
    });
    let note = read(&p.root.join(format!(".agent-runner/task-{id}.md")));
    assert!(note.contains("interrupted"), "{note}");
    assert_eq!(
        p.ipc("running"),
        [format!("{job}.json"), format!("{job}.owner.json")],
        "left to recovery"
    );
    assert!(p.attempts(&id).is_empty());

    let out = p.orchestrate_once(&[]).output();
    out.code(1)
        .stderr_has(&format!("job {job}: task {id}: orchestrator stopped"));
    let attempts = p.attempts(&id);
    assert_eq!(attempts.len(), 1);
    assert!(
        attempts[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("orchestrator stopped (pid "),
        "{}",
        attempts[0]
    );
    assert_eq!(p.result(&job)["status"], "failed");
    assert_eq!(p.ipc("running"), Vec::<String>::new());
    assert_eq!(p.ipc("queue"), Vec::<String>::new(), "not run again");
    assert!(
        !p.root
            .join(format!(".agent-runner/logs/{id}/run-2.log"))
            .exists()
    );
    let runs = read(&p.ws().join(format!("logs/{job}/runner.stderr.log")))
        .matches("worker run 1/")
        .count();
    assert!(
        runs >= 1
            && !read(&p.ws().join(format!("logs/{job}/runner.stderr.log")))
                .contains("worker run 2/")
    );
    // Recording happens once, however often orchestrators start.
    p.orchestrate_once(&[]).output().code(0);
    assert_eq!(p.attempts(&id).len(), 1);
    assert_eq!(
        containers_labelled("agent-runner.task", &id),
        Vec::<String>::new()
    );
}

#[test]
fn sigterm_stops_the_runner_records_interrupted_and_exits_130() {
    let (p, id, job, orchestrator, runner) = busy("orch-sigterm", &[]);
    let status = std::process::Command::new("kill")
        .args(["-TERM", &orchestrator.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = orchestrator.finish();
    out.code(130)
        .stderr_has("interrupted: stopping 1 attempt(s)");
    assert!(!alive(runner));
    let attempts = p.attempts(&id);
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["error"], "interrupted");
    assert_eq!(
        attempts[0]["result"]["state"], "FAILED",
        "the runner's own result: {}",
        attempts[0]
    );
    assert_eq!(p.result(&job)["error"], "interrupted");
    assert!(read(&p.root.join(format!(".agent-runner/task-{id}.md"))).contains("interrupted"));
    assert_eq!(p.ipc("running"), Vec::<String>::new());
    assert_eq!(
        containers_labelled("agent-runner.task", &id),
        Vec::<String>::new()
    );
}

#[test]
fn a_killed_runner_is_a_failed_attempt() {
    let (p, id, job, orchestrator, runner) = busy("orch-runner-killed", &["--once"]);
    let status = std::process::Command::new("kill")
        .args(["-KILL", &runner.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = orchestrator.finish();
    out.code(1);
    let attempts = p.attempts(&id);
    assert_eq!(attempts.len(), 1);
    let error = attempts[0]["error"].as_str().unwrap();
    assert!(
        error.starts_with("agent-runner printed no result (killed by signal 9); see "),
        "{error}"
    );
    assert!(attempts[0].get("result").is_none());
    assert_eq!(p.result(&job)["status"], "failed");
    wait_for(Duration::from_secs(10), || {
        containers_labelled("agent-runner.task", &id).is_empty()
    });
}

#[test]
#[ignore = "needs root"]
fn as_a_non_root_user_isolated_attempts_bring_their_branches_back() {
    needs!(Root);
    use std::os::unix::fs::MetadataExt;
    let p = Pipeline::new("orch-nonroot", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: id -u > who.txt\n@say: wrote who.txt"),
        "",
    );
    let ids: Vec<String> = (1..=2).map(|n| task_id(&format!("nonroot{n}"))).collect();
    for id in &ids {
        p.new_task(id, "Say who you are");
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    p.run_tasks(&refs);
    let uid = 4242;
    let user = support::OtherUser::new(uid, &p.scratch.path);
    let out = user
        .run(&[
            "orchestrate",
            "-w",
            p.root.to_str().unwrap(),
            "--once",
            "--jobs",
            "2",
        ])
        .env("AGENT_RUNNER_HOME", &p.home)
        .env("HOME", &p.scratch.path)
        .output();
    out.code(0);
    for id in &ids {
        let who = git(&p.root, &["show", &format!("agent-runner/{id}:who.txt")]);
        assert_eq!(who.trim(), "4242", "the worker ran as the user");
        let attempt = &p.attempts(id)[0];
        let job = attempt["job_id"].as_str().unwrap();
        // The user could remove the clone the worker wrote in; the note moved out.
        wait_for(Duration::from_secs(10), || {
            !p.ws().join("clones").join(job).exists()
        });
        let note = attempt["result"]["note_path"].as_str().unwrap();
        assert_eq!(
            note,
            p.ws()
                .join(format!("logs/{job}/agent-runner/task-{id}.md"))
                .to_str()
                .unwrap()
        );
        let meta = std::fs::metadata(note).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (uid, uid));
        assert_eq!(
            containers_labelled("agent-runner.task", id),
            Vec::<String>::new()
        );
    }
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
}

#[test]
fn a_worker_image_without_git_fails_the_bring_back_clearly() {
    let p = Pipeline::new("orch-nogit", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: echo x > x.txt\n@say: wrote x.txt"),
        "isolation: clone\n",
    );
    p.init_with(
        "defaults.yaml",
        &read(&p.scratch.join("defaults.yaml")).replace(
            "agent-runner-test-worker:latest",
            "agent-runner-test-worker:nogit",
        ),
    );
    let id = task_id("nogit");
    p.new_task(&id, "Write x.txt");
    p.run_tasks(&[&id]);
    p.orchestrate_once(&[]).output().code(1);
    let attempt = &p.attempts(&id)[0];
    let error = attempt["error"].as_str().unwrap();
    assert!(
        error.contains(
            "could not be brought back: the worker image agent-runner-test-worker:nogit has no git"
        ),
        "{error}"
    );
    assert_eq!(
        attempt["result"]["status"], "succeeded",
        "the runner itself succeeded"
    );
    assert_eq!(
        containers_labelled("agent-runner.task", &id),
        Vec::<String>::new()
    );
}

#[test]
fn later_attempts_start_from_spare_clones_made_ahead() {
    let p = Pipeline::new("orch-spares", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: ls > seen.txt\n@say: listed"),
        "isolation: clone\n",
    );
    let ids: Vec<String> = (1..=3).map(|n| task_id(&format!("spare{n}"))).collect();
    for id in &ids {
        p.new_task(id, "List the files");
    }
    let head = git(&p.root, &["rev-parse", "HEAD"]);
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    p.run_tasks(&refs);
    let out = p.orchestrate_once(&[]).env("RUST_LOG", "debug").output();
    out.code(0);
    assert_eq!(
        out.stderr.matches(": a spare clone taken").count(),
        2,
        "the first attempt cloned; the others found one ready"
    );
    for id in &ids {
        let name = format!("agent-runner/{id}");
        assert_eq!(git(&p.root, &["rev-parse", &format!("{name}^")]), head);
        assert_eq!(
            git(&p.root, &["show", &format!("{name}:seen.txt")]),
            "README.md\nseen.txt\n",
            "a clean start: nothing of another attempt"
        );
    }
    let left: Vec<_> = std::fs::read_dir(p.ws().join("clones"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "no clone and no spare left: {left:?}");
}
