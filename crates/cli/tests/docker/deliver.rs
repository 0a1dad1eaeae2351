//! Delivery (SPEC §23): a verified attempt's branch pushed to a bare repository
//! made here, the PR command run with its documented environment, and a push that
//! fails changing nothing already done, retried with `task deliver`. Host git never
//! reads root_dir's repository configuration, planted as in `isolation.rs`. Real
//! binary, real daemon, the test worker image.

use crate::support;

use std::path::Path;

use serde_json::Value;
use support::pipeline::{BUILDER_REPLY, Pipeline, git, meta_script, read, task_id, try_git};

/// The worker writes what the pinned test checks.
const WORKER: &str = "@run: echo done > out.txt\n@say: wrote out.txt";

/// `git init --bare` of `dir`.
fn bare(dir: &Path) {
    let out =
        support::Run::program("git", &["init", "-q", "--bare", dir.to_str().unwrap()]).output();
    out.code(0);
}

/// A PR command: writes its variables and working directory to `record`, then
/// prints a line of progress and the PR's URL last.
fn pr_script(p: &Pipeline, record: &Path) -> String {
    let script = p.scratch.file(
        "pr.sh",
        format!(
            "env | grep '^AGENT_RUNNER_' | sort > '{r}'\necho \"cwd=$(pwd)\" >> '{r}'\necho \"title=$AGENT_RUNNER_TITLE\" >> '{r}'\ncat \"$AGENT_RUNNER_NOTE\" > '{r}.note'\necho 'Creating pull request...'\necho https://forge.test/o/r/pull/7\n",
            r = record.display()
        ),
    );
    format!("sh {}", script.display())
}

fn defaults(push_url: &Path, pr_command: &str) -> String {
    format!(
        "isolation: clone\ntask:\n  test: {{command: test -s out.txt, timeout_sec: 60}}\ndeliver:\n  push_url: {}\n  pr_command: {pr_command}\n",
        push_url.display()
    )
}

/// The one attempt line of task `id`.
fn attempt(p: &Pipeline, id: &str) -> Value {
    let attempts = p.attempts(id);
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    attempts.into_iter().next().unwrap()
}

/// The commit of `branch` in repository `dir`, or empty.
fn tip(dir: &Path, branch: &str) -> String {
    let (_, out) = try_git(
        dir,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ],
    );
    out.trim().to_string()
}

#[test]
fn a_verified_attempt_is_pushed_and_its_pr_command_gets_the_documented_environment() {
    let p = Pipeline::new("deliver", true);
    let remote = p.scratch.join("remote.git");
    bare(&remote);
    let record = p.scratch.join("pr-env.txt");
    let told = p.scratch.join("told.json");
    p.init(
        BUILDER_REPLY,
        &meta_script(WORKER),
        &format!(
            "{}notify:\n  - {{on: [succeeded], command: \"cat > '{}'\"}}\n",
            defaults(&remote, &pr_script(&p, &record)),
            told.display()
        ),
    );
    let id = task_id("deliver");
    let marker = p.scratch.join("pwned");
    // A title that would run if it were spliced into the command line.
    let title = format!(
        "Fix it $(touch {}-title); `touch {}-tick`",
        marker.display(),
        marker.display()
    );
    p.in_ws(
        &["task", "new"],
        &["--id", &id, "--title", &title, "Write out.txt"],
    )
    .output()
    .code(0);
    p.run_tasks(&[&id]);
    // root_dir's .git says to push elsewhere (ext::) and to run hooks: never read.
    let original = super::isolation::plant(&p.root, &p.scratch.path, &marker);
    let out = p.orchestrate_once(&[]).output();
    super::isolation::unplant_and_check(&p, original);
    out.code(0);
    let a = attempt(&p, &id);
    assert_eq!(a["status"], "succeeded", "{a}");
    assert_eq!(a["verified"], true, "{a}");
    let branch = format!("agent-runner/{id}");
    let local = tip(&p.root, &branch);
    assert_eq!(local.len(), 40, "the branch is back in root_dir");
    assert_eq!(
        tip(&remote, &branch),
        local,
        "pushed to the bare repository"
    );
    let delivery = &a["delivery"];
    assert_eq!(delivery["pushed"], local.as_str(), "{a}");
    assert_eq!(delivery["branch"], branch.as_str());
    assert_eq!(
        delivery["pr"], "https://forge.test/o/r/pull/7",
        "the last line"
    );
    assert!(delivery.get("error").is_none(), "{delivery}");
    let env = read(&record);
    let note = p.ws().join(format!(
        "logs/{}/agent-runner/task-{id}.md",
        a["job_id"].as_str().unwrap()
    ));
    for line in [
        format!("AGENT_RUNNER_BRANCH={branch}"),
        format!("AGENT_RUNNER_TASK_ID={id}"),
        format!("AGENT_RUNNER_NOTE={}", note.display()),
        format!("title={title}"),
    ] {
        assert!(env.lines().any(|l| l == line), "{line} not in:\n{env}");
    }
    assert!(
        read(&p.scratch.join("pr-env.txt.note")).contains("# "),
        "the note is readable at AGENT_RUNNER_NOTE"
    );
    let cwd = env.lines().find_map(|l| l.strip_prefix("cwd=")).unwrap();
    assert!(
        !Path::new(cwd).starts_with(&p.root),
        "never in the repository: {cwd}"
    );
    let show = p.in_ws(&["task", "show"], &[&id]).output();
    show.code(0);
    assert!(
        show.stdout
            .contains("delivered: https://forge.test/o/r/pull/7"),
        "{}",
        show.stdout
    );
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    let told: Value = serde_json::from_str(&read(&told)).expect("notified");
    assert_eq!(told["pr"], "https://forge.test/o/r/pull/7", "{told}");
    assert_eq!(told["branch"], branch.as_str());
    assert_eq!(told["verified"], true);
}

#[test]
fn a_failed_push_changes_nothing_done_and_task_deliver_retries_it() {
    let p = Pipeline::new("deliver-fail", true);
    let remote = p.scratch.join("not-yet.git");
    let record = p.scratch.join("pr-env.txt");
    p.init(
        BUILDER_REPLY,
        &meta_script(WORKER),
        &defaults(&remote, &pr_script(&p, &record)),
    );
    let id = task_id("deliver-fail");
    p.new_task(&id, "Write out.txt");
    let job = p.run_tasks(&[&id]).remove(0);
    p.orchestrate_once(&[]).output().code(0);
    let a = attempt(&p, &id);
    assert_eq!(
        a["status"], "succeeded",
        "a failed delivery fails nothing: {a}"
    );
    assert_eq!(p.result(&job)["status"], "succeeded");
    let branch = format!("agent-runner/{id}");
    assert_eq!(
        tip(&p.root, &branch).len(),
        40,
        "the branch is still brought back"
    );
    let error = a["delivery"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("cannot push") && error.contains("not-yet.git"),
        "{a}"
    );
    assert!(a["delivery"].get("pushed").is_none());
    assert!(!record.exists(), "no PR command after a failed push");
    let show = p.in_ws(&["task", "show"], &[&id]).output();
    assert!(
        show.stdout.contains("delivery failed: cannot push"),
        "{}",
        show.stdout
    );

    // Retried once the remote exists: a `delivery` line, the attempt unchanged.
    bare(&remote);
    let again = p.in_ws(&["task", "deliver"], &[&id]).output();
    again.code(0);
    assert_eq!(
        again.stdout.trim(),
        "delivered: https://forge.test/o/r/pull/7"
    );
    assert_eq!(tip(&remote, &branch), tip(&p.root, &branch));
    assert_eq!(attempt(&p, &id), a, "the attempt line is as it was");
    let shown = p.show(&id);
    let latest = shown["attempts"]
        .as_array()
        .and_then(|l| l.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        latest["delivery"]["pr"], "https://forge.test/o/r/pull/7",
        "{shown}"
    );

    // A failing PR command is reported, exit 1, and recorded too.
    let failing = p
        .scratch
        .file("fail.sh", "echo 'gh: not logged in' >&2\nexit 4\n");
    p.init_with(
        "defaults-2.yaml",
        &format!(
            "require_test: false\nbuilder: {{kind: scripted, script: builder.yaml}}\n{}",
            defaults(&remote, &format!("sh {}", failing.display()))
        ),
    );
    let failed = p.in_ws(&["task", "deliver"], &[&id]).output();
    failed.code(1);
    assert!(
        failed.stdout.contains("gh: not logged in"),
        "{}",
        failed.stdout
    );
}

#[test]
fn only_a_verified_attempt_with_a_branch_is_delivered_and_a_push_url_holds_no_token() {
    let p = Pipeline::new("deliver-refuse", true);
    let with_token = p.scratch.file(
        "token.yaml",
        "deliver: {push_url: \"https://bot:ghp_secret@forge.test/o/r.git\"}\n",
    );
    let out = p
        .cmd(&[
            "workspace",
            "init",
            p.root.to_str().unwrap(),
            "--defaults",
            with_token.to_str().unwrap(),
        ])
        .output();
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("deliver.push_url") && !out.stderr.contains("ghp_secret"),
        "{}",
        out.stderr
    );
    let id = task_id("deliver-refuse");
    p.init(
        BUILDER_REPLY,
        &meta_script(WORKER),
        &defaults(&p.scratch.join("r.git"), "true"),
    );
    p.new_task(&id, "Write out.txt");
    let none = p.in_ws(&["task", "deliver"], &[&id]).output();
    assert_ne!(none.code, Some(0));
    assert!(none.stderr.contains("has no attempt"), "{}", none.stderr);

    // Run in place: verified, but no branch to push; the refusal is recorded.
    let in_place = defaults(&p.scratch.join("r.git"), "true").replace("isolation: clone\n", "");
    p.init(BUILDER_REPLY, &meta_script(WORKER), &in_place);
    p.run_tasks(&[&id]);
    p.orchestrate_once(&[]).output().code(0);
    let a = &p.attempts(&id)[0];
    assert_eq!(a["status"], "succeeded", "{a}");
    let error = a["delivery"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("ran in root_dir"), "{a}");
    let again = p.in_ws(&["task", "deliver"], &[&id]).output();
    assert_ne!(again.code, Some(0));
    assert!(
        again.stderr.contains("isolation: clone"),
        "{}",
        again.stderr
    );
}
