//! The approval gate and follow-ups in the pipeline (SPEC §23): with
//! `runner.meta.approve_plan` in the workspace defaults an attempt ends
//! `awaiting_approval` after Meta's plan, with no container of the task started;
//! `task reject --message` plans again with the message, `task approve` resumes the
//! runner with the plan, `task approve --criteria FILE` runs with the user's
//! criteria; `task run --resume ID --message` reaches Meta and the note; notifiers
//! hear `awaiting_approval` and of attempts that recovery records. Real binary, real
//! daemon (its event stream), the fake OpenAI server's request log, a webhook
//! receiver on 127.0.0.2.

use crate::support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use support::docker::{containers_labelled, docker_ok};
use support::fake_openai::FakeOpenAi;
use support::pipeline::{BUILDER_REPLY, Pipeline, alive, children_of, git, read, wait_for};
use support::task::{KEY, assert_no_container, assess, plan, run_worker};
use support::webhook::Receiver;

/// The message types the server was asked, in order.
fn asked(server: &FakeOpenAi) -> Vec<String> {
    server
        .received()
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

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// What the daemon did to containers of task `id` between `since` and now.
fn container_events(id: &str, since: u64) -> String {
    let filter = format!("label=agent-runner.task={id}");
    docker_ok(&[
        "events",
        "--since",
        &since.to_string(),
        "--until",
        &(now() + 1).to_string(),
        "--filter",
        "type=container",
        "--filter",
        &filter,
        "--format",
        "{{.Action}}",
    ])
}

/// A workspace whose Meta is `server` and whose plans await approval; `extra`
/// defaults after.
fn workspace(name: &str, git: bool, server: &FakeOpenAi, extra: &str) -> Pipeline {
    workspace_approving(name, git, server, extra, true)
}

/// `workspace`, whose plans await approval only with `approve`.
fn workspace_approving(
    name: &str,
    git: bool,
    server: &FakeOpenAi,
    extra: &str,
    approve: bool,
) -> Pipeline {
    let p = Pipeline::new(name, git);
    p.scratch.file("builder.yaml", BUILDER_REPLY);
    let isolation = if git { "isolation: clone\n" } else { "" };
    p.init_with(
        "defaults.yaml",
        &format!(
            "builder: {{kind: scripted, script: builder.yaml}}\n{isolation}require_test: false\nrunner:\n  meta: {{base_url: \"{}\", model: test-model, approve_plan: {approve}}}\n  worker: {{docker_image: \"{}\", network: none}}\n{extra}",
            server.url,
            support::docker::TEST_IMAGE
        ),
    );
    p
}

fn orchestrate(p: &Pipeline) -> support::Outcome {
    p.orchestrate_once(&[])
        .env("OPENAI_API_KEY", KEY)
        .env("AGENT_RUNNER_META_BACKOFF_MS", "10")
        .output()
}

#[test]
fn a_plan_awaits_approval_is_rejected_with_a_message_planned_again_and_approved() {
    let hook = Receiver::start("127.0.0.2", 200);
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        // After the rejection: a new plan.
        plan(&["AC-2"]),
        // After the approval.
        run_worker("@run: echo hi > out.txt\n@say: wrote out.txt"),
        assess(&["AC-2"], "done"),
    ]);
    let p = workspace(
        "approve-pipeline",
        true,
        &server,
        &format!(
            "notify:\n  - {{on: [awaiting_approval], url: \"{}\"}}\n",
            hook.url()
        ),
    );
    let id = support::pipeline::task_id("approve");
    p.new_task(&id, "Write out.txt");
    p.in_ws(&["task", "approve"], &[&id])
        .output()
        .code(1)
        .stderr_has("it has not run yet");
    let first_job = p.run_tasks(&[&id]).remove(0);
    let since = now().saturating_sub(1);
    orchestrate(&p).code(0);
    assert_eq!(
        asked(&server),
        ["plan_task"],
        "nothing paid for after the plan"
    );
    assert_eq!(
        container_events(&id, since).trim(),
        "",
        "no container of the task was created"
    );
    let attempts = p.attempts(&id);
    assert_eq!(
        attempts[0]["status"], "awaiting_approval",
        "{}",
        attempts[0]
    );
    assert_eq!(p.result(&first_job)["status"], "awaiting_approval");
    let list = p.in_ws(&["task", "list"], &[]).output();
    assert!(list.stdout.contains("AWAITING_APPROVAL"), "{}", list.stdout);
    let show = p.in_ws(&["task", "show"], &[&id]).output();
    assert!(
        show.stdout
            .contains("plan awaiting approval:\n    AC-1: criterion AC-1"),
        "{}",
        show.stdout
    );
    assert_eq!(p.show(&id)["status"], "AWAITING_APPROVAL");
    let told = hook.received();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(
        (&told[0].json()["event"], &told[0].json()["status"]),
        (
            &Value::from("awaiting_approval"),
            &Value::from("awaiting_approval")
        )
    );

    // Rejected: planned again, with the message, and awaiting again.
    let why = "Also check the README mentions out.txt";
    p.in_ws(&["task", "reject"], &[&id, "--message", "  "])
        .output()
        .code(1)
        .stderr_has("--message");
    let out = p
        .in_ws(&["task", "reject"], &[&id, "--message", why])
        .output();
    out.code(0);
    let reject_job = out.stdout.trim().to_string();
    orchestrate(&p).code(0);
    assert_eq!(asked(&server), ["plan_task", "plan_task"]);
    let replan = server.received()[1].message(1);
    assert!(
        replan.contains(why),
        "the message reaches Meta's plan:\n{replan}"
    );
    assert!(replan.contains("rejected"), "{replan}");
    let attempts = p.attempts(&id);
    assert_eq!(attempts[1]["status"], "awaiting_approval");
    assert_eq!(
        attempts[1]["clone_job"],
        first_job.as_str(),
        "the same clone"
    );
    assert_eq!(hook.received().len(), 2);
    assert_eq!(
        container_events(&id, since).trim(),
        "",
        "still no container"
    );

    // Approved: the runner resumes with the new plan; no third plan.
    let out = p.in_ws(&["task", "approve"], &[&id]).output();
    out.code(0);
    let approve_job = out.stdout.trim().to_string();
    let queued: Value =
        serde_json::from_str(&read(&p.ws().join(format!("ipc/queue/{approve_job}.json")))).unwrap();
    assert_eq!(queued["resume_from"], reject_job.as_str());
    orchestrate(&p).code(0);
    assert_eq!(
        asked(&server),
        [
            "plan_task",
            "plan_task",
            "next_action",
            "completion_assessment"
        ]
    );
    let next = server.received()[2].message(1);
    assert!(next.contains("criterion AC-2"), "{next}");
    assert!(!next.contains("criterion AC-1"), "{next}");
    let attempts = p.attempts(&id);
    assert_eq!(attempts[2]["status"], "succeeded", "{}", attempts[2]);
    let files = git(
        &p.root,
        &["ls-tree", "--name-only", &format!("agent-runner/{id}")],
    );
    assert!(files.contains("out.txt"), "{files}");
    assert_eq!(
        hook.received().len(),
        2,
        "only awaiting_approval is asked for"
    );

    // Nothing awaits approval now.
    for args in [
        vec!["approve", id.as_str()],
        vec!["reject", id.as_str(), "--message", "no"],
    ] {
        p.in_ws(&["task", args[0]], &args[1..])
            .output()
            .code(1)
            .stderr_has("succeeded: it awaits no approval");
    }
    assert_no_container(&id);
}

#[test]
fn approve_with_criteria_replaces_the_plan_and_a_follow_up_reaches_meta_and_the_note() {
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        // Approved with the user's criteria: no second plan.
        run_worker("@run: echo hi > out.txt\n@say: wrote out.txt"),
        assess(&["AC-1"], "done"),
        // The follow-up after COMPLETE.
        run_worker("@run: echo more > more.txt\n@say: wrote more.txt"),
        assess(&["AC-1"], "done again"),
    ]);
    let p = workspace("approve-criteria", false, &server, "");
    let id = support::pipeline::task_id("criteria");
    p.new_task(&id, "Write out.txt");
    p.run_tasks(&[&id]);
    orchestrate(&p).code(0);
    assert_eq!(p.attempts(&id)[0]["status"], "awaiting_approval");

    // A criteria file is checked before anything is enqueued.
    let bad = p.scratch.file(
        "bad.yaml",
        "acceptance_criteria:\n  - fine\n  - {not: text}\n",
    );
    p.in_ws(
        &["task", "approve"],
        &[&id, "--criteria", bad.to_str().unwrap()],
    )
    .output()
    .code(1)
    .stderr_has("line 3");
    let blank = p
        .scratch
        .file("blank.yaml", "acceptance_criteria: [ok, ' ']\n");
    p.in_ws(
        &["task", "approve"],
        &[&id, "--criteria", blank.to_str().unwrap()],
    )
    .output()
    .code(1)
    .stderr_has("acceptance_criteria[1]: empty");
    assert_eq!(p.ipc("queue"), Vec::<String>::new());

    let good = p.scratch.file(
        "criteria.yaml",
        "acceptance_criteria:\n  - out.txt holds the word hi\n",
    );
    p.in_ws(
        &["task", "approve"],
        &[&id, "--criteria", good.to_str().unwrap()],
    )
    .output()
    .code(0);
    orchestrate(&p).code(0);
    assert_eq!(
        asked(&server),
        ["plan_task", "next_action", "completion_assessment"],
        "the user's criteria need no plan"
    );
    let next = server.received()[1].message(1);
    assert!(next.contains("out.txt holds the word hi"), "{next}");
    assert!(!next.contains("criterion AC-1"), "{next}");
    let attempts = p.attempts(&id);
    assert_eq!(attempts[1]["status"], "succeeded", "{}", attempts[1]);
    assert_eq!(
        p.show(&id)["task"]["acceptance_criteria"],
        serde_json::json!(["out.txt holds the word hi"]),
        "the task's criteria now"
    );
    assert!(p.root.join("out.txt").exists());

    // A follow-up after COMPLETE: the same criteria plus the message.
    let message = "Please also write more.txt";
    p.in_ws(&["task", "run"], &[&id, "--message", message])
        .output()
        .code(2)
        .stderr_has("--resume");
    p.in_ws(&["task", "run"], &["--resume", &id, "--message", message])
        .output()
        .code(0);
    orchestrate(&p).code(0);
    let asked_now = asked(&server);
    assert_eq!(asked_now.len(), 5, "{asked_now:?}");
    let follow = server.received()[3].message(1);
    assert!(
        follow.contains(&format!("message_from_user: |-\n    {message}"))
            || follow.contains(&format!("message_from_user: {message}")),
        "the message is in the next next_action:\n{follow}"
    );
    assert!(follow.contains("out.txt holds the word hi"), "{follow}");
    let attempts = p.attempts(&id);
    assert_eq!(attempts[2]["status"], "succeeded", "{}", attempts[2]);
    assert!(p.root.join("more.txt").exists());
    let note = read(&p.root.join(format!(".agent-runner/task-{id}.md")));
    assert!(
        note.contains(&format!("- Follow-up message: {message}")),
        "{note}"
    );
    assert_no_container(&id);
}

/// A follow-up after an isolated attempt succeeded (its clone removed once its
/// branch came back) runs the task again from its start, the message in Meta's
/// plan and the note, in a new clone of the task's branch: the worker sees the
/// previous result, and the branch comes back with both. The branch gone (merged
/// and deleted by the user), the follow-up is refused, naming it.
#[test]
fn a_follow_up_after_an_isolated_success_builds_on_the_task_s_branch() {
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo hi > out.txt\n@say: wrote out.txt"),
        assess(&["AC-1"], "done"),
        // The follow-up: planned again with the message.
        plan(&["AC-1"]),
        run_worker("@run: cat out.txt > seen.txt; echo more > more.txt\n@say: wrote more.txt"),
        assess(&["AC-1"], "done again"),
    ]);
    let p = workspace_approving("follow-up-branch", true, &server, "", false);
    let id = support::pipeline::task_id("followup");
    let branch = format!("agent-runner/{id}");
    p.new_task(&id, "Write out.txt");
    let first_job = p.run_tasks(&[&id]).remove(0);
    orchestrate(&p).code(0);
    assert_eq!(p.attempts(&id)[0]["status"], "succeeded");
    let first_tip = git(&p.root, &["rev-parse", &branch]);
    assert!(
        !p.ws().join(format!("clones/{first_job}")).exists(),
        "the clone is removed once the branch is back"
    );

    let message = "also write more.txt";
    let out = p
        .in_ws(&["task", "run"], &["--resume", &id, "--message", message])
        .output();
    out.code(0);
    let follow_job = out.stdout.trim().to_string();
    orchestrate(&p).code(0);
    assert_eq!(
        asked(&server),
        [
            "plan_task",
            "next_action",
            "completion_assessment",
            "plan_task",
            "next_action",
            "completion_assessment"
        ]
    );
    let replan = server.received()[3].message(1);
    assert!(
        replan.contains(message),
        "the message reaches Meta's plan:\n{replan}"
    );
    let attempts = p.attempts(&id);
    assert_eq!(attempts[1]["status"], "succeeded", "{}", attempts[1]);
    assert_eq!(attempts[1]["message"], message);
    assert_eq!(attempts[1]["resumed_from"], first_job.as_str());
    assert_eq!(attempts[1]["branch"], branch.as_str());
    // The worker saw the first attempt's out.txt: its clone started from the branch.
    assert_eq!(
        git(&p.root, &["show", &format!("{branch}:seen.txt")]).trim(),
        "hi"
    );
    let files = git(&p.root, &["ls-tree", "--name-only", &branch]);
    assert!(
        files.contains("out.txt") && files.contains("more.txt"),
        "{files}"
    );
    // A fast-forward of the branch.
    let (ancestor, _) = support::pipeline::try_git(
        &p.root,
        &["merge-base", "--is-ancestor", first_tip.trim(), &branch],
    );
    assert!(ancestor, "the first result is in the follow-up's history");
    assert!(
        !p.root.join("more.txt").exists(),
        "root_dir's work tree untouched"
    );
    let note = read(std::path::Path::new(
        attempts[1]["result"]["note_path"].as_str().unwrap(),
    ));
    assert!(note.contains(message), "{note}");
    assert!(
        !p.ws().join(format!("clones/{follow_job}")).exists(),
        "the follow-up's clone is removed once its branch is back"
    );

    // The branch merged and deleted: nothing to build on.
    git(&p.root, &["branch", "-D", &branch]);
    let gone = format!("branch {branch} is no longer in root_dir");
    p.in_ws(&["task", "run"], &["--resume", &id, "--message", "more"])
        .output()
        .code(1)
        .stderr_has(&gone);
    assert_eq!(p.ipc("queue"), Vec::<String>::new());
    // Deleted after the follow-up was enqueued: its attempt fails, naming it,
    // before anything is paid for.
    git(&p.root, &["branch", &branch, first_tip.trim()]);
    p.in_ws(&["task", "run"], &["--resume", &id, "--message", "more"])
        .output()
        .code(0);
    git(&p.root, &["branch", "-D", &branch]);
    orchestrate(&p);
    let attempts = p.attempts(&id);
    assert_eq!(attempts[2]["status"], "failed", "{}", attempts[2]);
    let error = attempts[2]["error"].as_str().unwrap_or_default();
    assert!(error.contains(&gone), "{error}");
    assert_eq!(asked(&server).len(), 6, "no Meta call for it");
    assert_no_container(&id);
}

/// An attempt recorded by recovery (its orchestrator was killed) is told like any
/// other: before, nobody heard of it.
#[test]
fn an_attempt_recovery_records_is_told_to_the_notifiers() {
    let hook = Receiver::start("127.0.0.2", 200);
    let p = Pipeline::new("notify-recovered", false);
    p.init(
        BUILDER_REPLY,
        &support::pipeline::meta_script("@say: working\n@sleep: 120"),
        &format!("notify:\n  - {{on: [failed], url: \"{}\"}}\n", hook.url()),
    );
    let id = support::pipeline::task_id("recovered");
    p.new_task(&id, "Keep busy");
    let job = p.run_tasks(&[&id]).remove(0);
    let orchestrator = p.in_ws(&["orchestrate"], &[]).start();
    let log = p.root.join(format!(".agent-runner/logs/{id}/run-1.log"));
    wait_for(Duration::from_secs(90), || read(&log).contains("working"));
    let runner = children_of(orchestrator.id());
    assert_eq!(runner.len(), 1, "{runner:?}");
    orchestrator.kill();
    wait_for(Duration::from_secs(60), || !alive(runner[0]));
    wait_for(Duration::from_secs(60), || {
        containers_labelled("agent-runner.task", &id).is_empty()
    });
    assert!(hook.received().is_empty(), "the killed one told nobody");

    p.orchestrate_once(&[])
        .output()
        .code(1)
        .stderr_has(&format!("job {job}: task {id}: orchestrator stopped"));
    let told = hook.received();
    assert_eq!(told.len(), 1, "{told:?}");
    let body = told[0].json();
    assert_eq!(
        (&body["event"], &body["task_id"], &body["status"]),
        (
            &Value::from("failed"),
            &Value::from(id.as_str()),
            &Value::from("failed")
        )
    );
    // Told once: recording happens once.
    p.orchestrate_once(&[]).output().code(0);
    assert_eq!(hook.received().len(), 1);
}
