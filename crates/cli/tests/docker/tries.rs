//! Best of N (SPEC §23): `task run --tries N [--kinds …]` runs N tries of one task
//! at once, each in its own clone, and judges them: verified first, then criteria,
//! then Meta's `judge` message, then the smaller diff. The fake codex behaves per
//! try by reading its clone's branch (`.git/HEAD` names `…-try-<k>`). Real binary,
//! real daemon, the test worker image; the judge per Meta wire format against the
//! fake server, its request checked with the official SDKs' types.

use crate::support;

use std::path::Path;

use serde_json::{Value, json};
use support::fake_openai::{Answer, FakeOpenAi};
use support::pipeline::{BUILDER_REPLY, Pipeline, git, meta_script, read, task_id, try_git};

/// Writes `ok` in try `k`'s clone only (the pinned test wants it), `no` elsewhere.
fn only_try_passes(k: u32) -> String {
    format!(
        "@run: case $(cat .git/HEAD) in *-try-{k}) echo ok > out.txt ;; *) echo no > out.txt ;; esac\n@say: wrote out.txt"
    )
}

/// Every try passes; try 1 also writes NOTES.md (the bigger diff).
const BOTH_PASS: &str = "@run: echo ok > out.txt; case $(cat .git/HEAD) in *-try-1) printf 'a\\nb\\nc\\n' > NOTES.md ;; esac\n@say: wrote out.txt";

const TEST: &str = "task:\n  test: {command: grep -qx ok out.txt, timeout_sec: 60}\n";

/// The commit of `branch` in `dir`, or empty.
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

/// The attempt lines of task `id`: its tries, then the judged line.
fn tries_and_whole(p: &Pipeline, id: &str, n: usize) -> (Vec<Value>, Value) {
    let mut attempts = p.attempts(id);
    assert_eq!(attempts.len(), n + 1, "{attempts:#?}");
    let whole = attempts.pop().unwrap();
    assert!(
        whole["tries"].is_object(),
        "the judged line is last: {whole}"
    );
    assert!(attempts.iter().all(|a| a["try_of"].is_object()));
    (attempts, whole)
}

fn enqueue(p: &Pipeline, id: &str, extra: &[&str]) -> Vec<String> {
    let mut rest = vec![id];
    rest.extend(extra);
    let out = p.in_ws(&["task", "run"], &rest).output();
    out.code(0);
    out.stdout.lines().map(str::to_string).collect()
}

#[test]
fn best_of_3_where_only_one_try_passes_the_pinned_test() {
    let p = Pipeline::new("tries-one", true);
    // The winner is delivered: its PR command gets the winner's note.
    let remote = p.scratch.join("remote.git");
    support::Run::program("git", &["init", "-q", "--bare", remote.to_str().unwrap()])
        .output()
        .code(0);
    let body = p.scratch.join("pr-body.md");
    p.init(
        BUILDER_REPLY,
        &meta_script(&only_try_passes(2)),
        &format!(
            "  budget: {{max_tokens: 50000}}\n{TEST}deliver:\n  push_url: {}\n  pr_command: \"test -s \\\"$AGENT_RUNNER_NOTE\\\" && cat \\\"$AGENT_RUNNER_NOTE\\\" >> '{}' && echo https://forge.test/pull/1\"\n",
            remote.display(),
            body.display()
        ),
    );
    let id = task_id("tries-one");
    p.new_task(&id, "Write ok into out.txt");
    let jobs = enqueue(&p, &id, &["--tries", "3"]);
    assert_eq!(jobs.len(), 3, "one job per try");
    let out = p.orchestrate_once(&["--jobs", "3"]).output();
    out.code(0);
    let (tries, whole) = tries_and_whole(&p, &id, 3);
    let winner = tries.iter().find(|a| a["try_of"]["k"] == 2).unwrap();
    assert_eq!(winner["status"], "succeeded", "{winner}");
    for loser in tries.iter().filter(|a| a["try_of"]["k"] != 2) {
        assert_eq!(loser["status"], "failed", "its test failed: {loser}");
    }
    assert_eq!(whole["status"], "succeeded", "{whole}");
    assert_eq!(whole["verified"], true);
    let table = &whole["tries"];
    assert_eq!(table["winner"], 2, "{table}");
    assert_eq!(table["rows"].as_array().unwrap().len(), 3);
    let branch = format!("agent-runner/{id}");
    assert_eq!(whole["branch"], branch.as_str());
    let commit = tip(&p.root, &branch);
    assert_eq!(commit.len(), 40, "the winner is the task's branch");
    assert_eq!(
        git(&p.root, &["show", &format!("{commit}:out.txt")]),
        "ok\n"
    );
    assert_eq!(
        tip(&p.root, &format!("{branch}-try-2")),
        "",
        "renamed, not copied"
    );
    // The tries that did not win are kept for review, failed ones too (SPEC §23).
    for k in [1, 3] {
        let kept = tip(&p.root, &format!("{branch}-try-{k}"));
        assert_eq!(kept.len(), 40, "failed try {k} is kept as its branch");
        assert_eq!(git(&p.root, &["show", &format!("{kept}:out.txt")]), "no\n");
        let row = &table["rows"][k as usize - 1];
        assert_eq!(row["branch"], format!("{branch}-try-{k}").as_str(), "{row}");
    }
    // The winner's note is the judged line's: delivered, shown, served.
    assert_eq!(
        whole["delivery"]["pr"], "https://forge.test/pull/1",
        "{whole}"
    );
    let delivered = read(&body);
    assert!(
        delivered.starts_with("# ") && delivered.contains(&id),
        "AGENT_RUNNER_NOTE names the winner's note: {delivered:?}"
    );
    std::fs::remove_file(&body).unwrap();
    p.in_ws(&["task", "deliver"], &[&id]).output().code(0);
    assert_eq!(read(&body), delivered, "`task deliver` gives the same note");
    // Budgets: each try ran with the task's, the whole is bounded by 3 × it.
    for t in &tries {
        let config = read(Path::new(t["task_config"].as_str().unwrap()));
        assert!(config.contains("max_tokens: 50000"), "{config}");
    }
    assert_eq!(table["budget"]["max_tokens"], 150000, "{table}");
    assert_eq!(table["budget"]["tries"], 3);
    let spent: u64 = tries
        .iter()
        .filter_map(|t| t["usage"]["total_tokens"].as_u64())
        .sum();
    assert_eq!(table["tokens"].as_u64(), Some(spent), "{table}");
    // The task is as its judged line says; `task show` has the table.
    let show = p.in_ws(&["task", "show"], &[&id]).output();
    show.code(0);
    assert!(
        show.stdout.contains("status:      SUCCEEDED"),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains("winner: try 2 (verified)")
            || show.stdout.contains("winner: try 2 (only)"),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("try 3 of 3"), "{}", show.stdout);
    let winner_job = winner["job_id"].as_str().unwrap();
    let note = p
        .ws()
        .join(format!("logs/{winner_job}/agent-runner/task-{id}.md"));
    assert!(
        show.stdout
            .contains(&format!("  note:        {}\n", note.display())),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains(&format!(
            "  task config: {}\n",
            p.ws()
                .join(format!("logs/{winner_job}/task-config.yaml"))
                .display()
        )),
        "{}",
        show.stdout
    );
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    // The web view's task page has the comparison.
    let served = support::web::Served::start(&p, &[]);
    let page = served.get(&format!("/tasks/{id}")).status(200).text();
    let table = page
        .split("<section id=\"tries\">")
        .nth(1)
        .expect("the tries section");
    assert_eq!(
        table
            .matches("<tr class=\"winner\"><td class=\"n\">2</td>")
            .count(),
        1,
        "{table}"
    );
    assert!(table.contains(&format!("<code>{branch}</code>")), "{table}");
    assert!(table.contains("Winner: try 2 ("), "{table}");
    assert!(page.contains("<h2>Task Note</h2>"), "{page}");
    served.stop();

    // A follow-up goes on from the winner, on the task's branch.
    let out = p
        .in_ws(
            &["task", "run"],
            &["--resume", &id, "--message", "also say why"],
        )
        .output();
    out.code(0);
    let job = out.stdout.trim();
    let queued: Value =
        serde_json::from_str(&read(&p.ws().join(format!("ipc/queue/{job}.json")))).unwrap();
    assert_eq!(queued["resume_from"], winner_job, "{queued}");
    p.orchestrate_once(&[]).output();
    let attempts = p.attempts(&id);
    let follow = attempts.last().unwrap();
    assert_eq!(follow["job_id"], job, "{follow}");
    assert_eq!(follow["message"], "also say why", "{follow}");
    assert!(follow["result"].is_object(), "the runner ran: {follow}");
}

/// Two verified tries: the `judge` reply from `builder.script` decides, over the
/// smaller diff; a judge naming a try that does not exist is not followed.
#[test]
fn two_verified_tries_are_decided_by_the_judge_and_an_unknown_winner_falls_back_to_the_smaller_diff()
 {
    for (judge, winner, rule) in [(1, 1, "judge"), (9, 2, "diff")] {
        let p = Pipeline::new("tries-judge", true);
        // Both tries are verified: only the judged line is delivered and told.
        let remote = p.scratch.join("remote.git");
        support::Run::program("git", &["init", "-q", "--bare", remote.to_str().unwrap()])
            .output()
            .code(0);
        let told = p.scratch.join("told.jsonl");
        p.init(
            &format!("{BUILDER_REPLY}- type: judge\n  winner: {judge}\n  why: try {judge} also wrote notes\n"),
            &meta_script(BOTH_PASS),
            &format!(
                "{TEST}deliver: {{push_url: {}}}\nnotify:\n  - {{on: [succeeded, failed], command: \"cat >> '{}'; echo >> '{}'\"}}\n",
                remote.display(),
                told.display(),
                told.display()
            ),
        );
        let id = task_id("tries-judge");
        p.new_task(&id, "Write ok into out.txt");
        enqueue(&p, &id, &["--tries", "2"]);
        p.orchestrate_once(&["--jobs", "2"]).output().code(0);
        let (tries, whole) = tries_and_whole(&p, &id, 2);
        assert!(tries.iter().all(|t| t["verified"] == true), "{tries:?}");
        let table = &whole["tries"];
        assert_eq!(
            (&table["winner"], &table["rule"]),
            (&json!(winner), &json!(rule)),
            "{table}"
        );
        let rows = table["rows"].as_array().unwrap();
        assert_eq!(rows[0]["diff"], json!([2, 4, 0]), "{table}");
        assert_eq!(rows[1]["diff"], json!([1, 1, 0]), "{table}");
        let branch = format!("agent-runner/{id}");
        let loser = 3 - winner;
        assert_eq!(tip(&p.root, &branch).len(), 40);
        assert_eq!(
            tip(&p.root, &format!("{branch}-try-{loser}")).len(),
            40,
            "the loser kept for review"
        );
        assert_eq!(tip(&p.root, &format!("{branch}-try-{winner}")), "");
        let pushed = git(&remote, &["for-each-ref", "--format=%(refname)"]);
        assert_eq!(
            pushed.trim(),
            format!("refs/heads/{branch}"),
            "only the winner is pushed"
        );
        assert_eq!(whole["delivery"]["branch"], branch.as_str(), "{whole}");
        let told: Vec<Value> = read(&told)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(told.len(), 1, "only the judged line is told: {told:?}");
        assert_eq!(told[0]["branch"], branch.as_str());
        let has_notes = try_git(&p.root, &["cat-file", "-e", &format!("{branch}:NOTES.md")]).0;
        assert_eq!(has_notes, winner == 1);
        if judge == 9 {
            let error = table["judge_error"].as_str().unwrap_or_default();
            assert!(
                error.contains("9 is not one of the tries shown (1, 2)")
                    || error.contains("no reply left"),
                "{table}"
            );
        } else {
            assert_eq!(table["why"], "try 1 also wrote notes");
            let log = read(&p.ws().join(format!(
                "logs/{}/judge.log",
                whole["job_id"].as_str().unwrap()
            )));
            assert!(
                log.contains("type: judge") && log.contains("try: 2"),
                "{log}"
            );
        }
    }
}

#[test]
fn kinds_alternate_over_the_tries() {
    let p = Pipeline::new("tries-kinds", true);
    p.init(BUILDER_REPLY, &meta_script(&only_try_passes(1)), TEST);
    let id = task_id("tries-kinds");
    p.new_task(&id, "Write ok into out.txt");
    let refused = p
        .in_ws(
            &["task", "run"],
            &[&id, "--tries", "3", "--kinds", "codex-cli,cursor"],
        )
        .output();
    refused.code(1);
    assert!(
        refused
            .stderr
            .contains("--kinds: \"cursor\" is no worker kind"),
        "{}",
        refused.stderr
    );
    let zero = p.in_ws(&["task", "run"], &[&id, "--tries", "0"]).output();
    zero.code(1);
    assert!(
        zero.stderr.contains("--tries: 0 is not between 1 and 8"),
        "{}",
        zero.stderr
    );
    enqueue(
        &p,
        &id,
        &["--tries", "3", "--kinds", "codex-cli,claude-code-cli"],
    );
    p.orchestrate_once(&["--jobs", "3"]).output();
    let (tries, whole) = tries_and_whole(&p, &id, 3);
    let kinds: Vec<&str> = whole["tries"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["codex-cli", "claude-code-cli", "codex-cli"]);
    for t in &tries {
        let config = read(Path::new(t["task_config"].as_str().unwrap()));
        let wanted = if t["try_of"]["k"] == 2 {
            "docker_claude_code_cli"
        } else {
            "docker_codex_cli"
        };
        assert!(
            config.contains(&format!("type: {wanted}")),
            "try {}: {config}",
            t["try_of"]["k"]
        );
    }
    assert_eq!(whole["tries"]["winner"], 1, "{whole}");
}

#[test]
fn defaults_tries_is_validated_with_its_field_path() {
    let p = Pipeline::new("tries-defaults", true);
    let file = p.scratch.file("bad.yaml", "tries: 99\n");
    let out = p
        .cmd(&[
            "workspace",
            "init",
            p.root.to_str().unwrap(),
            "--defaults",
            file.to_str().unwrap(),
        ])
        .output();
    out.code(1);
    assert!(
        out.stderr.contains("tries: 99 is not between 1 and 8"),
        "{}",
        out.stderr
    );
}

/// The judge through each HTTP wire format: every Meta call of the pipeline goes to
/// one fake server, in order (`--jobs 1`: the tries run one after another), the
/// judge last, shown both tries' summaries; its request checked with the SDKs.
#[test]
fn the_judge_message_in_every_wire_format() {
    let builder = json!({"type": "build_task_config",
        "task": {"id": "x", "title": "t", "instructions": "Write ok into out.txt.", "project": {"root_dir": "/x"}},
        "runner": {"worker": {"type": "docker_codex_cli"}}});
    let plan = json!({"type": "plan_task", "acceptance_criteria": [{"id": "AC-1", "description": "out.txt says ok"}]});
    let work = json!({"type": "next_action", "decision": {"action": "run_worker", "reason": "work"},
        "worker_call": {"worker_type": "codex-cli", "mode": "exec", "prompt": BOTH_PASS}});
    let assess = |summary: &str| {
        json!({"type": "completion_assessment", "summary": summary,
        "details": {"passed_criteria": ["AC-1"], "remaining_risks": []}, "all_criteria_satisfied": true})
    };
    let judge = json!({"type": "judge", "winner": 1, "why": "try 1 documents its change"});
    // The formats run at once, each with its own server, project and task: the
    // test waits on containers and Meta round trips far more than it computes.
    let check = |kind: &str, key_var: &str, shape: &str| {
        let answer = |reply: &Value| -> Answer {
            match shape {
                "chat" => Answer::chat(&reply.to_string()),
                "responses" => super::meta_apis::response(reply),
                _ => super::meta_apis::message(reply),
            }
        };
        let script: Vec<Answer> = [
            &builder,
            &plan,
            &work,
            &assess("Try one: out.txt and notes."),
            &builder,
            &plan,
            &work,
            &assess("Try two: out.txt only."),
            &judge,
        ]
        .into_iter()
        .map(answer)
        .collect();
        let server = FakeOpenAi::start(script);
        let p = Pipeline::new(&format!("tries-wire-{shape}"), true);
        let base = if shape == "messages" {
            server.url.trim_end_matches("/v1").to_string()
        } else {
            server.url.clone()
        };
        p.init_with(
            "defaults.yaml",
            &format!(
                "require_test: false\nrunner:\n  meta: {{kind: {kind}, base_url: \"{base}\", model: judge-model}}\n  worker: {{docker_image: \"{}\", network: none}}\n{TEST}",
                support::docker::TEST_IMAGE
            ),
        );
        let id = task_id(&format!("tries-wire-{shape}"));
        p.new_task(&id, "Write ok into out.txt");
        enqueue(&p, &id, &["--tries", "2"]);
        let out = p
            .orchestrate_once(&["--jobs", "1"])
            .env(key_var, "sk-test-key-0123456789abcdef")
            .env("AGENT_RUNNER_META_BACKOFF_MS", "10")
            .output();
        let (_, whole) = tries_and_whole(&p, &id, 2);
        out.code(0);
        let table = &whole["tries"];
        assert_eq!(
            (&table["winner"], &table["rule"]),
            (&json!(1), &json!("judge")),
            "{kind}: {table}"
        );
        assert_eq!(table["why"], "try 1 documents its change");
        let got = server.received();
        assert_eq!(got.len(), 9, "{kind}: every answer used");
        let last = &got[8].body;
        assert!(last.contains("judge"), "{kind}: {last}");
        assert!(
            last.contains("Try one: out.txt and notes.") && last.contains("Try two: out.txt only."),
            "{kind}: the judge sees both summaries: {last}"
        );
        if shape != "chat" {
            super::meta_apis::sdk_check(kind, "request", last);
        }
    };
    support::each_at_once(
        [
            ("openai-chat", "OPENAI_API_KEY", "chat"),
            ("openai-responses", "OPENAI_API_KEY", "responses"),
            ("anthropic-messages", "ANTHROPIC_API_KEY", "messages"),
        ],
        |(kind, key_var, shape)| check(kind, key_var, shape),
    );
}
