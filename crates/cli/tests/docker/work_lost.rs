//! A task whose criteria passed but whose work could not be brought back (the copy
//! transport, SPEC §22) is not COMPLETE: FAILED, a non-zero exit, the reason on the
//! final line, in the result, the Task Note and the state file. Locally, with
//! `runner.sandbox.transport: copy`.

use crate::support;

use std::path::Path;

use serde_json::Value;
use support::fake_openai::FakeOpenAi;
use support::task::*;

fn git(repo: &Path, args: &[&str]) -> String {
    let out = support::Run::program("git", args).cwd(repo).output();
    assert_eq!(out.code, Some(0), "git {args:?}: {}", out.stderr);
    out.stdout.trim().to_string()
}

/// Runs a task whose worker runs `worker` and whose criteria pass (`--json` with
/// `json`); its outcome.
fn run(repo: &Path, id: &str, worker: &str, json: bool) -> support::Outcome {
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(&format!("{worker}\n@say: done")),
        assess(&["AC-1"], "out.txt says ok"),
    ]);
    let out = runner(
        v1_task(id, repo, &server)
            .test("grep -qx ok out.txt")
            .set("runner.sandbox.transport", "copy"),
    )
    .args(if json { &["--json"][..] } else { &[] })
    .output();
    // The session a failed task keeps for its resume (docker::copy_session).
    let filter = format!("label=agent-runner.task={id}");
    for volume in support::docker::docker_ok(&["volume", "ls", "-q", "--filter", &filter]).lines() {
        support::docker::docker_ok(&["volume", "rm", volume]);
    }
    out
}

/// FAILED with `why` everywhere it is told: the result's `error` (`--json`) or the
/// final line, the note, the state file.
fn failed_saying(repo: &Path, id: &str, out: &support::Outcome, why: &str) {
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let last = out.stdout.lines().last().unwrap_or_default();
    let told = match serde_json::from_str::<Value>(last) {
        Ok(result) => {
            assert_eq!(
                (&result["status"], &result["state"]),
                (&Value::from("failed"), &Value::from("FAILED")),
                "{result}"
            );
            result["error"].as_str().unwrap().to_string()
        }
        Err(_) => last
            .strip_prefix(&format!("FAILED: task {id}: "))
            .unwrap_or_else(|| panic!("{last}"))
            .to_string(),
    };
    assert!(
        told.starts_with("all criteria passed, but the work could not be brought back: ")
            && told.contains(why),
        "{told}"
    );
    assert_eq!(
        told.matches("could not be brought back").count(),
        1,
        "said once: {told}"
    );
    let note = note(repo, id);
    assert!(note.contains(why), "{note}");
    let state =
        std::fs::read_to_string(repo.join(format!(".agent-runner/state/{id}.json"))).unwrap();
    assert!(state.contains("\"state\":\"FAILED\""), "{state}");
    assert_no_container(id);
}

#[test]
fn a_bundler_that_fails_on_what_the_worker_left_fails_the_task() {
    let dir = support::Scratch::new("work-lost-fifo");
    support::git_repo(&dir.path, "out.txt", "wrong\n");
    let id = task_id("fifo");
    let out = run(
        &dir.path,
        &id,
        "@run: echo ok > out.txt; mkfifo pipe",
        false,
    );
    failed_saying(&dir.path, &id, &out, "pipe is a FIFO");
    assert!(
        git(
            &dir.path,
            &["branch", "--list", &format!("agent-runner/{id}")]
        )
        .is_empty()
    );
}

#[test]
fn a_bundle_the_landing_refuses_fails_the_task() {
    let dir = support::Scratch::new("work-lost-landing");
    support::git_repo(&dir.path, "out.txt", "wrong\n");
    let id = task_id("landing");
    // The branch exists already, at a commit the work does not build on.
    let branch = format!("agent-runner/{id}");
    git(&dir.path, &["checkout", "-q", "-b", &branch]);
    git(
        &dir.path,
        &[
            "-c",
            "user.name=u",
            "-c",
            "user.email=u@u",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "mine",
        ],
    );
    let mine = git(&dir.path, &["rev-parse", "HEAD"]);
    git(&dir.path, &["checkout", "-q", "-"]);
    let out = run(
        &dir.path,
        &id,
        "@run: echo ok > out.txt; git -c user.name=w -c user.email=w@w commit -qam ok",
        true,
    );
    failed_saying(&dir.path, &id, &out, "which the work does not build on");
    assert_eq!(
        git(&dir.path, &["rev-parse", &branch]),
        mine,
        "the user's branch is left as it is"
    );
}
