//! Resuming a task (SPEC §19): `run --resume` goes on from the state file the last
//! run left, after a SIGKILL, a failure or a raised limit; refused when the task
//! changed. Real binary, fake OpenAI server, the test worker image (whose fake codex
//! keeps its threads in ~/.codex/sessions and continues them with `codex exec resume`).

use crate::support;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::Scratch;
use support::docker::image_with_this_fake;
use support::fake_openai::FakeOpenAi;
use support::task::{
    assert_no_container, assess, note, plan, run_worker, runner, task_id, wait_for,
};
use support::task_yaml::TaskYaml;

/// A v1 task (as `support::task::v1_task`) whose worker image has this tree's fake
/// codex, which keeps its threads.
fn v1_task(id: &str, repo: &Path, server: &FakeOpenAi) -> TaskYaml {
    support::task::v1_task(id, repo, server).image(&image_with_this_fake())
}

/// The message types the server was asked, in order, from request `from` on.
fn asked(server: &FakeOpenAi, from: usize) -> Vec<String> {
    server.received()[from..]
        .iter()
        .map(|r| {
            r.message(1)
                .lines()
                .find_map(|l| l.strip_prefix("type: "))
                .unwrap_or("?")
                .to_string()
        })
        .collect()
}

fn state(repo: &Path, id: &str) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(repo.join(format!(".agent-runner/state/{id}.json"))).unwrap(),
    )
    .unwrap()
}

/// The thread ids a run log's `thread.started` events name.
fn threads(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "thread.started")
        .map(|e| e["thread_id"].as_str().unwrap().to_string())
        .collect()
}

fn result(stdout: &str) -> Value {
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

#[test]
fn a_run_killed_mid_task_resumes_without_a_new_plan_and_completes() {
    let dir = Scratch::new("resume-kill");
    let id = task_id("kill");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1", "AC-2"]),
        run_worker("@run: echo one > one.txt\n@say: wrote one.txt"),
        assess(&["AC-1"], "one of two"),
        run_worker("@say: working on two\n@sleep: 120"),
        // After the resume.
        run_worker("@recall\n@run: echo two > two.txt\n@say: wrote two.txt"),
        assess(&["AC-2"], "both done"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server);
    let first = runner(&yaml).arg("--json").start();
    let log2 = dir.join(&format!(".agent-runner/logs/{id}/run-2.log"));
    wait_for(Duration::from_secs(90), || {
        std::fs::read_to_string(&log2).is_ok_and(|l| l.contains("working on two"))
    });
    let thread_one = threads(
        &std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/run-1.log"))).unwrap(),
    );
    first.kill();
    // The container notices its owner is gone.
    wait_for(Duration::from_secs(20), || {
        support::docker::containers_labelled("agent-runner.task", &id).is_empty()
    });
    let saved = state(&dir.path, &id);
    assert_eq!(
        (&saved["state"], &saved["loops"]),
        (&Value::from("RUNNING"), &Value::from(1))
    );
    let before = server.received().len();
    assert_eq!(before, 4, "plan, a loop, the next action");

    let out = runner(&yaml).args(&["--json", "--resume"]).output();
    out.code(0);
    assert_eq!(
        asked(&server, before),
        ["next_action", "completion_assessment"],
        "no plan_task"
    );
    let resumed_request = server.received()[before].message(1);
    assert!(
        resumed_request.contains("previous_run: in RUNNING without an end"),
        "{resumed_request}"
    );
    assert!(
        resumed_request.contains("summary: wrote one.txt"),
        "{resumed_request}"
    );
    let result = result(&out.stdout);
    assert_eq!(
        (&result["state"], &result["loops"]),
        (&Value::from("COMPLETE"), &Value::from(2))
    );
    assert!(dir.path.join("two.txt").exists());
    // The worker went on with its session: the same thread, its earlier turn known.
    let log = std::fs::read_to_string(&log2).unwrap();
    assert_eq!(threads(&log), thread_one, "{log}");
    assert!(log.contains("recalled 1 earlier turn(s)"), "{log}");
    // The note has both runs and marks the resume.
    let note = note(&dir.path, &id);
    for part in [
        "- Resumed: at ",
        "## 8. Before the Resume",
        "The Task Note of the runs before",
        "wrote one.txt",
        "wrote two.txt",
        "- [x] AC-1",
        "- [x] AC-2",
    ] {
        assert!(note.contains(part), "note lacks {part:?}:\n{note}");
    }
    let saved = state(&dir.path, &id);
    assert_eq!(saved["state"], "COMPLETE");
    assert!(
        !dir.join(&format!(".agent-runner/state/{id}.session"))
            .exists(),
        "a complete task keeps no worker session"
    );
    assert_eq!(saved["history"].as_array().unwrap().len(), 2);
    assert_eq!(saved["worker_session"]["id"], thread_one[0].as_str());
    // The event log goes on across the resume.
    let events =
        std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/events.jsonl")))
            .unwrap();
    assert!(events.contains("\"reason\":\"started\"") && events.contains("\"reason\":\"resumed\""));
    assert!(events.contains("\"resumed_session\":true"), "{events}");
    assert_no_container(&id);
    // Nothing left to resume.
    runner(&yaml)
        .arg("--resume")
        .output()
        .code(1)
        .stderr_has("its last run ended COMPLETE: there is nothing to resume");
}

#[test]
fn a_resume_of_another_task_is_refused_naming_what_changed() {
    let dir = Scratch::new("resume-changed");
    let id = task_id("changed");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: tried"),
        assess(&[], "not yet"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server).set("runner.meta.max_loops", 1);
    runner(&yaml)
        .output()
        .code(1)
        .stdout_has("max_loops reached");
    let note_before = note(&dir.path, &id);
    let asked_before = server.received().len();
    let changed = yaml
        .clone()
        .set("task.prd.text", "Make out.txt say something else.");
    let out = runner(&changed).args(&["--json", "--resume"]).output();
    out.code(1).stderr_has(&format!(
        "cannot resume task {id}: the task changed since its last run: task.prd differ"
    ));
    assert_eq!(result(&out.stdout)["status"], "failed");
    assert_eq!(server.received().len(), asked_before, "nothing asked");
    assert_eq!(note(&dir.path, &id), note_before, "the note is untouched");
    assert_no_container(&id);
    // Another test command is another task too.
    let tested = yaml.test("true");
    runner(&tested)
        .arg("--resume")
        .output()
        .code(1)
        .stderr_has("task.test differ");
    // A task that never ran here has nothing to resume.
    let other = v1_task(&task_id("never"), &dir.path, &server);
    runner(&other)
        .arg("--resume")
        .output()
        .code(1)
        .stderr_has("no saved state");
}

/// Runner settings may change between runs: a task that ran out of loops goes on
/// with more, counting the loops of the whole task.
#[test]
fn a_task_that_ran_out_of_loops_goes_on_with_a_raised_limit() {
    let dir = Scratch::new("resume-loops");
    let id = task_id("loops");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: first try"),
        assess(&[], "not yet"),
        // After the resume.
        run_worker(
            "@run: cat \"$HOME\"/.codex/sessions/*/*/*/rollout-*.jsonl > prompt.txt\n@run: echo ok > out.txt\n@say: second try",
        ),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = |loops: u32| {
        v1_task(&id, &dir.path, &server)
            .test("grep -q ok out.txt")
            .set("runner.meta.max_loops", loops)
    };
    runner(yaml(1)).output().code(1);
    let again = runner(yaml(1)).args(&["--json", "--resume"]).output();
    again.code(1);
    assert!(
        result(&again.stdout)["error"]
            .as_str()
            .unwrap()
            .contains("max_loops reached (1) before this run: raise runner.meta.max_loops"),
        "{}",
        again.stdout
    );
    // The worker's session is gone (its directory emptied): the worker starts
    // afresh, told the history in its prompt.
    let sessions = dir.join(&format!(".agent-runner/state/{id}.session"));
    let kept = std::fs::read_dir(&sessions).unwrap().count();
    assert!(kept > 0, "the first run kept its thread");
    std::fs::remove_dir_all(&sessions).unwrap();
    let out = runner(yaml(2)).args(&["--json", "--resume"]).output();
    out.code(0)
        .stderr_has("the worker's session")
        .stderr_has("could not be continued (")
        .stderr_has("); it starts afresh with the history in its prompt");
    // The worker's prompt, as its (new) thread recorded it.
    let rollouts = support::pipeline::read(&dir.join("prompt.txt"));
    assert!(
        rollouts.contains("This task was resumed after 1 loop(s); the run before ended: FAILED: max_loops reached (1) before this run")
            && rollouts.contains("- loop 1: run_worker; worker completed (first try); tests failed"),
        "{rollouts}"
    );
    let result = result(&out.stdout);
    assert_eq!(
        (&result["state"], &result["loops"]),
        (&Value::from("COMPLETE"), &Value::from(2))
    );
    assert_eq!(result["validation"]["overall"], "passed");
    let note = note(&dir.path, &id);
    assert!(
        note.contains("max_loops reached (1)"),
        "the earlier end is kept"
    );
    assert!(
        note.contains("The worker's session could not be continued (")
            && note.contains("worker run 2 started afresh with the history"),
        "said in the note: {note}"
    );
    assert_no_container(&id);
}

/// The pipeline (SPEC §19): an attempt stopped by the user in its clone is
/// continued with `task run --resume` in the same clone and branch, without a new
/// plan, and its branch comes back with the work of both runs.
#[test]
fn task_run_resume_continues_a_stopped_attempt_in_its_clone() {
    use support::pipeline::{BUILDER_REPLY, Pipeline, git, read};
    let p = Pipeline::new("resume-pipeline", true);
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1", "AC-2"]),
        run_worker("@run: echo one > one.txt\n@say: working on it\n@sleep: 120"),
        // After the resume.
        run_worker("@recall\n@run: echo two > two.txt\n@say: wrote two.txt"),
        assess(&["AC-1", "AC-2"], "both done"),
    ]);
    p.scratch.file("builder.yaml", BUILDER_REPLY);
    p.init_with(
        "defaults.yaml",
        &format!(
            "builder: {{kind: scripted, script: builder.yaml}}\nisolation: clone\nrequire_test: false\nrunner:\n  meta: {{base_url: \"{}\", model: test-model}}\n  worker: {{docker_image: \"{}\", network: none}}\n",
            server.url,
            image_with_this_fake()
        ),
    );
    let orchestrate = || {
        p.orchestrate_once(&[])
            .env("OPENAI_API_KEY", support::task::KEY)
            .env("AGENT_RUNNER_META_BACKOFF_MS", "10")
    };
    let id = support::pipeline::task_id("continued");
    p.new_task(&id, "Write one.txt and two.txt");
    // Nothing to continue before it ran.
    p.in_ws(&["task", "run"], &["--resume", &id])
        .output()
        .code(1)
        .stderr_has("cannot be continued: it has not run yet");
    let first_job = p.run_tasks(&[&id]).remove(0);
    let first = orchestrate().start();
    let clone = p.ws().join("clones").join(&first_job);
    wait_for(Duration::from_secs(90), || {
        read(&clone.join(format!(".agent-runner/logs/{id}/events.jsonl"))).contains("working on it")
    });
    p.in_ws(&["task", "stop"], &[&id]).output().code(0);
    first.finish().code(1);
    assert_eq!(p.attempts(&id)[0]["error"], "stopped by the user");

    let out = p.in_ws(&["task", "run"], &["--resume", &id]).output();
    out.code(0);
    let job = out.stdout.trim().to_string();
    let queued: Value =
        serde_json::from_str(&read(&p.ws().join(format!("ipc/queue/{job}.json")))).unwrap();
    assert_eq!(
        (&queued["resume_from"], &queued["clone_job"]),
        (
            &Value::from(first_job.as_str()),
            &Value::from(first_job.as_str())
        )
    );
    // Queued once: a second request is refused.
    p.in_ws(&["task", "run"], &["--resume", &id])
        .output()
        .code(1)
        .stderr_has("already QUEUED");
    orchestrate().output().code(0);
    assert_eq!(
        asked(&server, 0),
        [
            "plan_task",
            "next_action",
            "next_action",
            "completion_assessment"
        ],
        "one plan for the whole task"
    );
    let attempts = p.attempts(&id);
    assert_eq!(attempts.len(), 2);
    assert_eq!(
        (
            &attempts[1]["status"],
            &attempts[1]["resumed_from"],
            &attempts[1]["clone_job"]
        ),
        (
            &Value::from("succeeded"),
            &Value::from(first_job.as_str()),
            &Value::from(first_job.as_str())
        )
    );
    // No Task Builder was asked; the test was chosen as today's pins say.
    assert_eq!(attempts[1]["test_source"], "none");
    let builder_log = read(&p.ws().join(format!("logs/{job}/builder.log")));
    assert!(
        builder_log.contains(&format!(
            "resumed: no Task Builder asked; the TaskConfig of job {first_job}"
        )),
        "{builder_log}"
    );
    // The branch holds the work of both runs; the clone has served.
    let branch = format!("agent-runner/{id}");
    let files = git(&p.root, &["ls-tree", "--name-only", &branch]);
    assert!(
        files.contains("one.txt") && files.contains("two.txt"),
        "{files}"
    );
    wait_for(Duration::from_secs(20), || !clone.exists());
    // Its note (kept in the job's log directory) marks the resume; the worker went
    // on with its session (the stopped loop did not count: it is loop 1 again).
    let kept = p.ws().join(format!("logs/{job}/agent-runner"));
    let note = read(&kept.join(format!("task-{id}.md")));
    assert!(
        note.contains("## 8. Before the Resume") && note.contains("wrote two.txt"),
        "{note}"
    );
    let log = read(&kept.join(format!("logs/{id}/run-1.log")));
    assert!(log.contains("recalled 1 earlier turn(s)"), "{log}");
    // The succeeded task has nothing more to continue.
    p.in_ws(&["task", "run"], &["--resume", &id])
        .output()
        .code(1)
        .stderr_has("succeeded: there is nothing to continue");
    assert_no_container(&id);
}

/// SPEC §19 with §15: the budget counts the whole task. A task stopped by its
/// token limit stays stopped when resumed with the same limit (no paid call starts),
/// and goes on with a raised one, without a new plan, counting the tokens of the
/// runs before; the result's `usage` is the run's own, `task_usage` the whole task's.
#[test]
fn a_task_out_of_budget_goes_on_with_a_raised_budget_counting_the_whole_task() {
    let dir = Scratch::new("resume-budget");
    let id = task_id("budget");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]).with_usage(1000, 0, 100),
        run_worker("@usage: 3000 0 0\n@run: echo one > one.txt\n@say: wrote one.txt")
            .with_usage(1000, 0, 100),
        // After the second resume.
        run_worker("@recall\n@run: echo ok > out.txt\n@say: wrote out.txt")
            .with_usage(1000, 0, 100),
        assess(&["AC-1"], "done").with_usage(1000, 0, 100),
    ]);
    let yaml = |max_tokens: u64| {
        format!(
            "{}  budget: {{max_tokens: {max_tokens}}}\n",
            v1_task(&id, &dir.path, &server).test("grep -q ok out.txt")
        )
    };
    // plan 1100 + next_action 1100 + the worker's 3000: the limit is reached after
    // the worker run, which counts as the task's first loop.
    let out = runner(yaml(5000)).arg("--json").output();
    out.code(1);
    let first = result(&out.stdout);
    assert_eq!(
        first["error"],
        "budget exhausted: max_tokens (5200 of 5000)"
    );
    assert_eq!(
        (&first["loops"], &first["usage"]["total_tokens"]),
        (&Value::from(1), &Value::from(5200))
    );
    assert!(first.get("task_usage").is_none(), "not a resumed run");
    let saved = state(&dir.path, &id);
    assert_eq!(
        (&saved["loops"], &saved["usage"]["total_tokens"]),
        (&Value::from(1), &Value::from(5200))
    );
    let events =
        std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/events.jsonl")))
            .unwrap();
    assert!(
        events.contains(r#""kind":"budget","limit":"max_tokens","message":"budget exhausted: max_tokens (5200 of 5000)""#),
        "{events}"
    );
    let asked_before = server.received().len();
    assert_eq!(asked_before, 2);

    // The same limit: the runs before used it up; nothing is asked.
    let same = runner(yaml(5000)).args(&["--json", "--resume"]).output();
    same.code(1);
    let same = result(&same.stdout);
    assert_eq!(same["error"], "budget exhausted: max_tokens (5200 of 5000)");
    assert_eq!(same["usage"]["total_tokens"], 0);
    assert_eq!(same["task_usage"]["total_tokens"], 5200);
    assert_eq!(
        server.received().len(),
        asked_before,
        "no paid call started"
    );

    // A raised limit: the task goes on where it stopped and completes.
    let out = runner(yaml(20000)).args(&["--json", "--resume"]).output();
    out.code(0);
    assert_eq!(
        asked(&server, asked_before),
        ["next_action", "completion_assessment"],
        "no plan_task"
    );
    let resumed = result(&out.stdout);
    assert_eq!(
        (
            &resumed["state"],
            &resumed["loops"],
            &resumed["budget"]["exhausted"]
        ),
        (&Value::from("COMPLETE"), &Value::from(2), &Value::Null)
    );
    // This run: next_action 1100, the worker's default 1200 + 60, the assessment 1100.
    assert_eq!(resumed["usage"]["total_tokens"], 3460);
    assert_eq!(resumed["task_usage"]["total_tokens"], 5200 + 3460);
    assert_eq!(resumed["task_usage"]["meta"]["calls"], 4);
    assert_eq!(resumed["task_usage"]["worker"]["runs"], 2);
    let log =
        std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/run-2.log"))).unwrap();
    assert!(
        log.contains("recalled 1 earlier turn(s)"),
        "the worker's session went on: {log}"
    );
    let note = note(&dir.path, &id);
    for part in [
        "- Usage: 3460 tokens",
        "- Usage of the whole task (the runs before the resume too): 8660 tokens",
        "## 8. Before the Resume",
        "budget exhausted: max_tokens (5200 of 5000)",
    ] {
        assert!(note.contains(part), "note lacks {part:?}:\n{note}");
    }
    assert_no_container(&id);
}

/// `max_duration_sec` counts the whole task too: a resumed run's deadline is what
/// the runs before left of it, so its sleeping worker is stopped when that is used
/// up, not after the whole limit again.
#[test]
fn a_resumed_task_has_only_the_time_left_of_its_deadline() {
    let dir = Scratch::new("resume-deadline");
    let id = task_id("deadline");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: sleeping\n@sleep: 120"),
        run_worker("@say: sleeping again\n@sleep: 120"),
    ]);
    let yaml = |max: u64| {
        format!(
            "{}  budget: {{max_duration_sec: {max}}}\n",
            v1_task(&id, &dir.path, &server)
        )
    };
    let out = runner(yaml(8)).arg("--json").output();
    out.code(1);
    let first = result(&out.stdout);
    assert!(
        first["error"]
            .as_str()
            .unwrap()
            .starts_with("budget exhausted: max_duration_sec ("),
        "{first}"
    );
    assert!(state(&dir.path, &id)["elapsed_ms"].as_u64().unwrap() >= 8000);
    // 14 s for the whole task: at most 6 s are left for this run (its sandbox starts
    // before its first paid call, SPEC §21, within them).
    let out = runner(yaml(14)).args(&["--json", "--resume"]).output();
    out.code(1);
    let resumed = result(&out.stdout);
    assert_eq!(
        resumed["budget"]["exhausted"], "max_duration_sec",
        "{resumed}"
    );
    assert!(
        resumed["duration_ms"].as_u64().unwrap() < 11_000,
        "the worker was stopped at the task's deadline, not 14 s into this run: {resumed}"
    );
    assert_eq!(
        server.received().len(),
        3,
        "plan, and one next_action per run: {resumed}\n{}",
        out.stderr
    );
    assert_no_container(&id);
}

/// SPEC §19 with §16: the replans of the runs before count against `max_replans`,
/// and the criteria keep every version, the earlier runs' included.
#[test]
fn a_resumed_task_counts_its_earlier_replans_and_keeps_every_criteria_version() {
    let dir = Scratch::new("resume-replan");
    let id = task_id("replan");
    let replan = support::fake_openai::Answer::chat(
        "type: next_action\ndecision:\n  action: replan\n  reason: AC-1 asks the impossible\n",
    );
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: first"),
        assess(&[], "not yet"),
        replan,
        plan(&["AC-2"]),
        run_worker("@say: second"),
        assess(&[], "not yet"),
        // After the resume.
        run_worker("@run: echo ok > out.txt\n@say: third"),
        assess(&["AC-2"], "done"),
    ]);
    let yaml = |loops: u32| {
        v1_task(&id, &dir.path, &server)
            .test("grep -q ok out.txt")
            .set("runner.meta.max_loops", loops)
            .set("runner.meta.max_replans", 1)
    };
    // Loop 1 a worker run, loop 2 the replan, loop 3 a worker run: out of loops.
    runner(yaml(3))
        .output()
        .code(1)
        .stdout_has("max_loops reached (3)");
    let saved = state(&dir.path, &id);
    assert_eq!(
        (&saved["loops"], &saved["replans"]),
        (&Value::from(3), &Value::from(1))
    );
    assert_eq!(saved["criteria_versions"].as_array().unwrap().len(), 2);
    assert_eq!(saved["history"][1]["action"], "replan");
    let before = server.received().len();
    let out = runner(yaml(4)).args(&["--json", "--resume"]).output();
    out.code(0);
    let next: Value = serde_norway::from_str(&server.received()[before].message(1)).unwrap();
    assert_eq!(next["type"], "next_action");
    assert!(
        next.get("replans_left").is_none(),
        "the one replan allowed was used before the resume: {next:?}"
    );
    let result = result(&out.stdout);
    assert_eq!(
        (&result["state"], &result["loops"], &result["replans"]),
        (&Value::from("COMPLETE"), &Value::from(4), &Value::from(1))
    );
    let note = note(&dir.path, &id);
    let this_run = &note[..note.find("## 8. Before the Resume").unwrap()];
    for part in [
        "Version 2 of 2",
        "- [x] AC-2",
        "### Version 1",
        "- [ ] AC-1",
        "- Replans: 1 of 1",
    ] {
        assert!(this_run.contains(part), "note lacks {part:?}:\n{this_run}");
    }
    assert_no_container(&id);
}

/// A state file edited by hand (or left by a broken disk) with the largest loop
/// count: the resumed run stops at once on its limit, never counting loops past
/// the largest number (which made its first checkpoint build 2^32 loop records).
#[test]
fn a_forged_state_file_with_the_largest_loop_count_ends_at_once() {
    let dir = Scratch::new("resume-forged");
    let id = task_id("forged");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: tried"),
        assess(&[], "not yet"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server).set("runner.meta.max_loops", 1);
    runner(&yaml).output().code(1);
    let path = dir.join(&format!(".agent-runner/state/{id}.json"));
    let mut saved = state(&dir.path, &id);
    saved["loops"] = Value::from(u32::MAX);
    saved["replans"] = Value::from(u32::MAX);
    saved["elapsed_ms"] = Value::from(u64::MAX);
    std::fs::write(&path, saved.to_string()).unwrap();
    let out = runner(&yaml).args(&["--json", "--resume"]).output();
    out.code(1);
    let result = result(&out.stdout);
    assert_eq!(result["loops"], Value::from(u32::MAX), "{}", out.stdout);
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("max_loops reached"),
        "{}",
        out.stdout
    );
    let back = state(&dir.path, &id);
    assert!(back["history"].as_array().unwrap().len() <= 100, "{back}");
    assert_no_container(&id);
}

/// A state file that is a link (to a state file that would do) or a FIFO is not
/// read: the refusal names the file, and a FIFO never blocks the run.
#[test]
fn a_state_file_that_is_a_link_or_a_fifo_is_refused_naming_it() {
    let dir = Scratch::new("resume-link");
    let id = task_id("link");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: tried"),
        assess(&[], "not yet"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server).set("runner.meta.max_loops", 1);
    runner(&yaml).output().code(1);
    let path = dir.join(&format!(".agent-runner/state/{id}.json"));
    let elsewhere = dir.join("elsewhere.json");
    std::fs::rename(&path, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    let asked = server.received().len();
    let out = runner(&yaml).arg("--resume").output();
    out.code(1)
        .stderr_has(&format!("cannot resume task {id}"))
        .stderr_has(&format!("{id}.json"));
    std::fs::remove_file(&path).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap();
    assert!(fifo.success());
    let out = runner(&yaml).arg("--resume").output();
    out.code(1)
        .stderr_has(&format!("cannot resume task {id}"))
        .stderr_has(&format!("{id}.json"));
    assert_eq!(server.received().len(), asked, "nothing asked");
    assert_no_container(&id);
}
