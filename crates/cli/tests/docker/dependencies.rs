//! Dependency-ordered runs (SPEC §12–§13): a task starts only after every dependency
//! succeeded, from root_dir's HEAD merged with its dependencies' branches; a failed
//! dependency fails its dependents without running them; a cycle is refused, not
//! waited on. Real binary, real daemon, the test worker image.

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::docker::containers_labelled;
use support::pipeline::{Pipeline, commit, git, meta_script, task_id, try_git};

/// The worker: finds its task id from the clone's branch, lists what it sees into
/// `<task>.seen`, takes a second (so that attempts overlap), writes `<task>.txt`.
const WORKER: &str = "@run: t=$(git -c safe.directory='*' symbolic-ref --short HEAD); t=${t#agent-runner/}; ls > \"$t.seen\"; sleep 1; echo \"$t\" > \"$t.txt\"\n@say: wrote my file";

/// A builder reply whose test fails for tasks with `-fails-` in their id.
const BUILDER: &str = "- type: build_task_config\n  task:\n    instructions: Write your file.\n    test:\n      command: \"case $(git -c safe.directory='*' symbolic-ref --short HEAD) in *-fails-*) exit 1;; esac\"\n  runner:\n    meta: {model: gpt-4.1}\n    worker: {type: docker_codex_cli}\n";

/// The only attempt of task `id`.
fn attempt(p: &Pipeline, id: &str) -> Value {
    let attempts = p.attempts(id);
    assert_eq!(attempts.len(), 1, "{id}: {attempts:?}");
    attempts.into_iter().next().unwrap()
}

fn span(attempt: &Value) -> (String, String) {
    (
        attempt["started_at"].as_str().unwrap().to_string(),
        attempt["finished_at"].as_str().unwrap().to_string(),
    )
}

fn workspace_id(p: &Pipeline) -> String {
    p.ws().file_name().unwrap().to_str().unwrap().to_string()
}

fn assert_nothing_left(p: &Pipeline, ids: &[&str]) {
    for id in ids {
        assert_eq!(
            containers_labelled("agent-runner.task", id),
            Vec::<String>::new()
        );
    }
    assert_eq!(
        containers_labelled("agent-runner.task", &format!("bundler-{}", workspace_id(p))),
        Vec::<String>::new(),
        "the bundler went with the orchestrator"
    );
}

#[test]
fn a_dependent_starts_after_its_dependency_succeeded_and_builds_on_its_branch() {
    let p = Pipeline::new("deps-order", true);
    p.init(BUILDER, &meta_script(WORKER), "");
    let (a, b, c) = (task_id("dep-a"), task_id("dep-b"), task_id("dep-c"));
    p.new_task_after(&a, &[]);
    p.new_task_after(&b, &[&a]);
    p.new_task_after(&c, &[]);
    // B first in the queue: it must still wait for A.
    p.run_tasks(&[&b, &a, &c]);
    let out = p.orchestrate_once(&["--jobs", "2"]).output();
    out.code(0);
    let (sa, sb, sc) = (attempt(&p, &a), attempt(&p, &b), attempt(&p, &c));
    for (id, attempt) in [(&a, &sa), (&b, &sb), (&c, &sc)] {
        assert_eq!(attempt["status"], "succeeded", "{id}: {attempt}");
    }
    let (ta, tb, tc) = (span(&sa), span(&sb), span(&sc));
    assert!(
        ta.0 < tc.1 && tc.0 < ta.1,
        "A and C overlapped: {ta:?} {tc:?}"
    );
    assert!(tb.0 >= ta.1, "B started after A finished: {ta:?} {tb:?}");

    // B's clone started from A's branch: it saw A's file, and its branch holds both.
    let branch = |id: &str| format!("agent-runner/{id}");
    let (_, seen) = try_git(&p.root, &["show", &format!("{}:{b}.seen", branch(&b))]);
    assert!(seen.lines().any(|l| l == format!("{a}.txt")), "{seen}");
    assert!(!seen.contains(&c), "C is no dependency of B: {seen}");
    let (_, content) = try_git(&p.root, &["show", &format!("{}:{a}.txt", branch(&b))]);
    assert_eq!(content.trim(), a);
    let (ancestor, _) = try_git(
        &p.root,
        &["merge-base", "--is-ancestor", &branch(&a), &branch(&b)],
    );
    assert!(ancestor, "A's commit is in B's history");
    let (_, seen) = try_git(&p.root, &["show", &format!("{}:{a}.seen", branch(&a))]);
    assert!(!seen.contains(".txt"), "A started from HEAD alone: {seen}");

    // One bundler served the three attempts; the clones of succeeded attempts are gone.
    assert_eq!(
        out.stderr.matches("bundler agent-runner-bundler-").count(),
        1
    );
    let clones: Vec<_> = std::fs::read_dir(p.ws().join("clones"))
        .unwrap()
        .flatten()
        .collect();
    assert!(clones.is_empty(), "{clones:?}");
    assert_nothing_left(&p, &[&a, &b, &c]);
}

#[test]
fn a_failed_dependency_fails_its_dependent_without_running_it() {
    let p = Pipeline::new("deps-failed", true);
    p.init(BUILDER, &meta_script(WORKER), "");
    let (a, b, c) = (task_id("dep-fails-a"), task_id("dep-b"), task_id("dep-c"));
    p.new_task_after(&a, &[]);
    p.new_task_after(&b, &[&a]);
    p.new_task_after(&c, &[]);
    let jobs = p.run_tasks(&[&a, &b, &c]);
    let out = p.orchestrate_once(&["--jobs", "2"]).output();
    out.code(1);
    let (sa, sb, sc) = (attempt(&p, &a), attempt(&p, &b), attempt(&p, &c));
    assert_eq!(sa["status"], "failed", "{sa}");
    assert_eq!(sc["status"], "succeeded", "{sc}");
    assert_eq!(sb["status"], "failed");
    assert_eq!(sb["error"], format!("dependency {a} failed").as_str());
    assert_eq!(p.show(&b)["status"], "FAILED");
    let logs = p.ws().join("logs").join(&jobs[1]);
    assert!(
        !logs.join("runner.stderr.log").exists() && !logs.join("builder.log").exists(),
        "B was neither built nor run"
    );
    assert!(!p.ws().join("clones").join(&jobs[1]).exists());
    assert!(
        p.ws().join("clones").join(&jobs[0]).is_dir(),
        "A failed: its clone stays for inspection"
    );
    assert!(!p.ws().join("clones").join(&jobs[2]).exists());
    assert_nothing_left(&p, &[&a, &b, &c]);
}

#[test]
fn a_merge_conflict_between_dependencies_is_a_failed_attempt() {
    let p = Pipeline::new("deps-conflict", true);
    let worker = "@run: t=$(git -c safe.directory='*' symbolic-ref --short HEAD); echo \"$t\" > shared.txt\n@say: wrote shared.txt";
    p.init(BUILDER, &meta_script(worker), "");
    let (a, b, c) = (task_id("dep-a"), task_id("dep-b"), task_id("dep-c"));
    p.new_task_after(&a, &[]);
    p.new_task_after(&c, &[]);
    p.new_task_after(&b, &[&a, &c]);
    let jobs = p.run_tasks(&[&a, &c, &b]);
    p.orchestrate_once(&["--jobs", "2"]).output().code(1);
    assert_eq!(attempt(&p, &a)["status"], "succeeded");
    assert_eq!(attempt(&p, &c)["status"], "succeeded");
    let sb = attempt(&p, &b);
    assert_eq!(
        sb["error"],
        format!(
            "cannot prepare the attempt's clone: merging agent-runner/{c} into the attempt's start failed: conflict in shared.txt"
        )
        .as_str()
    );
    assert!(
        !p.ws()
            .join("logs")
            .join(&jobs[2])
            .join("runner.stderr.log")
            .exists(),
        "B did not run"
    );
    let (exists, _) = try_git(
        &p.root,
        &["rev-parse", "--verify", &format!("agent-runner/{b}")],
    );
    assert!(!exists, "no branch for B");
    assert_nothing_left(&p, &[&a, &b, &c]);
}

#[test]
fn a_dependency_cycle_is_refused_not_waited_on() {
    let p = Pipeline::new("deps-cycle", false);
    p.init(BUILDER, &meta_script("@say: never"), "");
    let (x, y, z) = (task_id("cyc-x"), task_id("cyc-y"), task_id("cyc-z"));
    p.new_task_after(&x, &[&y]);
    p.new_task_after(&y, &[&x]);
    p.new_task_after(&z, &[&x]);
    p.run_tasks(&[&z, &x, &y]);
    assert_eq!(p.show(&x)["status"], "BLOCKED");
    // A hang on the cycle fails at the deadline.
    p.orchestrate_once(&[])
        .deadline(Duration::from_secs(60))
        .output()
        .code(1);
    assert_eq!(
        attempt(&p, &x)["error"],
        format!("dependency cycle: {x} → {y} → {x}").as_str()
    );
    assert_eq!(
        attempt(&p, &y)["error"],
        format!("dependency cycle: {y} → {x} → {y}").as_str()
    );
    assert_eq!(
        attempt(&p, &z)["error"],
        format!("dependency {x} failed").as_str()
    );
    assert!(!p.root.join(".agent-runner").exists(), "nothing ran");
}

#[test]
fn once_says_which_jobs_it_leaves_waiting_and_why() {
    let p = Pipeline::new("deps-waiting", false);
    p.init(BUILDER, &meta_script("@say: never"), "");
    let (a, b) = (task_id("wait-a"), task_id("wait-b"));
    p.new_task_after(&a, &[]);
    p.new_task_after(&b, &[&a]);
    let job = p.run_tasks(&[&b]).remove(0);
    p.orchestrate_once(&[]).output().code(0).stderr_has(&format!(
        "job {job}: task {b} stays queued: its dependency {a} is PENDING (no job: enqueue it with `agent-runner task run`)"
    ));
    assert_eq!(p.ipc("queue"), [format!("{job}.json")]);
}

#[test]
fn a_dependency_s_files_reach_no_driver_of_the_user_s_git_config_on_the_host() {
    // The user's global config has a smudge filter (as `git lfs install` writes one);
    // the dependency's worker names it for every file.
    let p = Pipeline::new("deps-driver", true);
    let marker = p.scratch.join("smudged-on-the-host");
    let config = p.scratch.file(
        "gitconfig",
        format!(
            "[filter \"spy\"]\n\tsmudge = touch '{}' && cat\n\tclean = cat\n",
            marker.display()
        ),
    );
    let worker = "@run: echo '* filter=spy' > .gitattributes && t=$(git -c safe.directory='*' symbolic-ref --short HEAD) && echo x > \"${t#agent-runner/}.txt\"\n@say: wrote my file";
    p.init(BUILDER, &meta_script(worker), "isolation: clone\n");
    let (a, b) = (task_id("drv-a"), task_id("drv-b"));
    p.new_task_after(&a, &[]);
    p.new_task_after(&b, &[&a]);
    p.run_tasks(&[&a, &b]);
    p.orchestrate_once(&[])
        .env("GIT_CONFIG_GLOBAL", &config)
        .output()
        .code(0);
    for id in [&a, &b] {
        assert_eq!(attempt(&p, id)["status"], "succeeded", "{id}");
    }
    // B's clone had A's files checked out, .gitattributes included.
    let (_, seen) = try_git(&p.root, &["show", &format!("agent-runner/{b}:{a}.txt")]);
    assert_eq!(seen, "x\n");
    assert!(
        !marker.exists(),
        "host git ran the user's filter on worker-written files"
    );
    assert_nothing_left(&p, &[&a, &b]);
}

#[test]
fn a_dependency_s_symlink_does_not_lead_the_merge_of_the_next_one_out_of_the_clone() {
    // A turns the directory x into a link to a host directory; B writes x/y. The
    // dependent merges A, then B: x/y must not be written through A's link.
    let p = Pipeline::new("deps-symlink", true);
    std::fs::create_dir(p.root.join("x")).unwrap();
    std::fs::write(p.root.join("x/y"), "original\n").unwrap();
    git(&p.root, &["add", "x/y"]);
    commit(&p.root, "x/y");
    let outside = p.scratch.join("outside");
    std::fs::create_dir(&outside).unwrap();
    let worker = format!(
        "@run: case $(git -c safe.directory='*' symbolic-ref --short HEAD) in */lnk-*) rm -rf x && ln -s '{}' x ;; */dir-*) echo written-through > x/y ;; esac\n@say: done",
        outside.display()
    );
    p.init(BUILDER, &meta_script(&worker), "isolation: clone\n");
    let (a, b, c) = (task_id("lnk-a"), task_id("dir-b"), task_id("both-c"));
    p.new_task_after(&a, &[]);
    p.new_task_after(&b, &[]);
    p.new_task_after(&c, &[&a, &b]);
    p.run_tasks(&[&a, &b, &c]);
    p.orchestrate_once(&[]).output().code(1);
    assert_eq!(attempt(&p, &a)["status"], "succeeded");
    assert_eq!(attempt(&p, &b)["status"], "succeeded");
    let (_, link) = try_git(&p.root, &["ls-tree", &format!("agent-runner/{a}"), "x"]);
    assert!(
        link.starts_with("120000 "),
        "A's branch has the link: {link}"
    );
    let error = attempt(&p, &c)["error"].as_str().unwrap().to_string();
    assert!(
        error.contains(&format!(
            "merging agent-runner/{b} into the attempt's start failed: conflict in x"
        )),
        "{error}"
    );
    let written: Vec<_> = std::fs::read_dir(&outside).unwrap().flatten().collect();
    assert!(written.is_empty(), "{written:?}");
    assert_nothing_left(&p, &[&a, &b, &c]);
}

/// Writes a chain of `n` tasks, each depending on the one before, and a queued job
/// for each but the first (which has none: every job stays blocked). As a plan and
/// `task run --all` would leave them, without 500 processes to write them.
fn blocked_chain(p: &Pipeline, n: usize) {
    let ws_id = workspace_id(p);
    for i in 0..n {
        let deps: Vec<String> = (i > 0)
            .then(|| format!("c-{}", i - 1))
            .into_iter()
            .collect();
        let line = serde_json::json!({"type": "task", "id": format!("c-{i}"), "workspace_id": ws_id,
            "title": format!("Step {i}"), "raw_prompt": "Do the next step.",
            "created_at": "2026-01-01T00:00:00.000Z", "depends_on": deps});
        std::fs::write(
            p.ws().join(format!("tasks/c-{i}.jsonl")),
            format!("{line}\n"),
        )
        .unwrap();
        if i > 0 {
            let job = serde_json::json!({"workspace_id": ws_id, "task_id": format!("c-{i}"),
                "created_at": "2026-01-01T00:00:00.000Z"});
            std::fs::write(
                p.ws().join(format!("ipc/queue/j-c{i:04}.json")),
                job.to_string(),
            )
            .unwrap();
        }
    }
}

/// Bytes the process `pid` has read so far (`rchar`).
fn bytes_read(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn an_idle_orchestrator_with_500_blocked_jobs_reads_almost_nothing_until_something_changes() {
    let p = Pipeline::new("dep-idle", false);
    p.init(
        support::pipeline::BUILDER_REPLY,
        support::pipeline::QUICK_META,
        "",
    );
    blocked_chain(&p, 501);
    let orchestrator = p.in_ws(&["orchestrate"], &[]).start();
    // The first looks read the board, then the directories settle.
    std::thread::sleep(Duration::from_secs(3));
    let before = bytes_read(orchestrator.id());
    std::thread::sleep(Duration::from_secs(3));
    let read = bytes_read(orchestrator.id()) - before;
    // At most one look in 3 s (every 5 s while nothing changes), which reads the job
    // files (under 100 KB here); a look every 100 ms read every task file along the
    // chain for every job.
    assert!(
        read < 512 << 10,
        "an idle orchestrator read {read} bytes in 3 s"
    );
    // A change is still seen: the head of the chain enqueued runs.
    let job = p.run_tasks(&["c-0"]).remove(0);
    let result = p.ws().join(format!("ipc/results/{job}.json"));
    support::pipeline::wait_for(Duration::from_secs(30), || result.exists());
    support::task::send("-TERM", &orchestrator);
    let out = orchestrator.finish();
    out.stderr_has(&format!("job {job}: finished task c-0: succeeded"));
}

#[test]
fn a_dependency_s_committed_agent_runner_links_do_not_stop_its_dependents() {
    // A's worker commits `.agent-runner` as a link and `.agent-runner/logs` as a link
    // (a folder of links): checked out in a dependent's clone, either would stop its
    // runner before it starts.
    let p = Pipeline::new("deps-private", true);
    let worker = "@run: t=$(git -c safe.directory='*' symbolic-ref --short HEAD); G=\"git -c safe.directory=* -c user.name=w -c user.email=w@localhost\"; case $t in */plant-*) l=$(printf /etc | git -c safe.directory='*' hash-object -w --stdin) && $G update-index --add --cacheinfo 120000,$l,.agent-runner/logs && $G commit -qm 'a folder of links' && $G rm -q -r --cached .agent-runner && $G update-index --add --cacheinfo 120000,$l,.agent-runner && $G commit -qm 'a link' ;; esac; echo \"$t\" > \"${t#agent-runner/}.txt\"\n@say: wrote my file";
    p.init(BUILDER, &meta_script(worker), "isolation: clone\n");
    let (a, b) = (task_id("plant-a"), task_id("dep-b"));
    p.new_task_after(&a, &[]);
    p.new_task_after(&b, &[&a]);
    p.run_tasks(&[&a, &b]);
    p.orchestrate_once(&[]).output().code(0);
    for id in [&a, &b] {
        assert_eq!(attempt(&p, id)["status"], "succeeded", "{id}");
    }
    let (_, planted) = try_git(
        &p.root,
        &["ls-tree", &format!("agent-runner/{a}~1"), ".agent-runner"],
    );
    assert!(
        planted.starts_with("120000 "),
        "A's worker committed it: {planted}"
    );
    for id in [&a, &b] {
        let (_, tree) = try_git(
            &p.root,
            &[
                "ls-tree",
                "-r",
                &format!("agent-runner/{id}"),
                ".agent-runner",
            ],
        );
        assert_eq!(
            tree, "",
            "{id}'s branch keeps the start's .agent-runner (none)"
        );
    }
    let (_, seen) = try_git(&p.root, &["show", &format!("agent-runner/{b}:{a}.txt")]);
    assert_eq!(seen.trim(), format!("agent-runner/{a}"));
    assert_nothing_left(&p, &[&a, &b]);
}

#[test]
fn a_start_that_tracks_an_agent_runner_link_still_runs_and_keeps_it() {
    // root_dir's HEAD has `.agent-runner` committed as a link (a branch merged by the
    // user from an older version); each clone checks it out.
    let p = Pipeline::new("deps-private-head", true);
    let blob = {
        let out = std::process::Command::new("git")
            .args(["-c", "safe.directory=*", "hash-object", "-w", "--stdin"])
            .current_dir(&p.root)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(b"/etc")?;
                child.wait_with_output()
            })
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(
        &p.root,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("120000,{blob},.agent-runner"),
        ],
    );
    commit(&p.root, "a link");
    p.init(BUILDER, &meta_script(WORKER), "isolation: clone\n");
    let a = task_id("head-a");
    p.new_task_after(&a, &[]);
    p.run_tasks(&[&a]);
    p.orchestrate_once(&[]).output().code(0);
    assert_eq!(attempt(&p, &a)["status"], "succeeded");
    let (_, tree) = try_git(
        &p.root,
        &["ls-tree", &format!("agent-runner/{a}"), ".agent-runner"],
    );
    assert!(
        tree.starts_with(&format!("120000 blob {blob}")),
        "the branch keeps what its start had: {tree}"
    );
    assert_nothing_left(&p, &[&a]);
}
