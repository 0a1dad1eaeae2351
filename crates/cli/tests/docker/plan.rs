//! Plans from the command line (SPEC §13): `plan` (Meta decompose), `plan --patch`
//! (Meta plan_patch), `plan --show`, through a fake OpenAI server on 127.0.0.1 with
//! the workspace's Task Builder settings; what Meta was sent (trimmed, re-asked)
//! and what was written (task lines, `wbs.json`, `chat.jsonl`), all or nothing.
//! The last test runs a planned task with the orchestrator, the test worker image
//! and scripted replies.

use crate::support;

use std::collections::HashMap;

use serde_json::{Value, json};

use support::fake_openai::{Answer, FakeOpenAi};
use support::pipeline::{Pipeline, read};
use support::task::assert_no_container;

const KEY: &str = "sk-plan-test-key-0123456789abcdef";

/// A workspace whose Task Builder (and so its plans) is the fake server.
fn workspace(name: &str, server: &FakeOpenAi) -> Pipeline {
    let p = Pipeline::new(name, false);
    answered_by(&p, server);
    p
}

/// From now on, `server` answers the workspace's plans.
fn answered_by(p: &Pipeline, server: &FakeOpenAi) {
    p.init_with(
        "defaults.yaml",
        &format!(
            "builder: {{kind: meta, model: plan-model}}\nrunner:\n  meta: {{base_url: \"{}\"}}\n",
            server.url
        ),
    );
}

/// `plan -w ROOT ARGS...` with the key.
fn plan(p: &Pipeline, args: &[&str]) -> support::Outcome {
    p.in_ws(&["plan"], args)
        .env("OPENAI_API_KEY", KEY)
        .env("AGENT_RUNNER_META_BACKOFF_MS", "1")
        .output()
}

/// The request YAML (the user message) of a received request.
fn request(received: &support::fake_openai::Received) -> serde_norway::Value {
    serde_norway::from_str(&received.message(1)).unwrap()
}

/// The lines of task `id`'s file.
fn lines(p: &Pipeline, id: &str) -> Vec<Value> {
    read(&p.ws().join(format!("tasks/{id}.jsonl")))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn wbs(p: &Pipeline) -> Value {
    serde_json::from_str(&read(&p.ws().join("wbs.json"))).unwrap()
}

fn chat(p: &Pipeline) -> Vec<Value> {
    read(&p.ws().join("chat.jsonl"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `task list --json`: id → status.
fn statuses(p: &Pipeline) -> HashMap<String, String> {
    let out = p.in_ws(&["task", "list"], &["--json"]).output();
    out.code(0);
    let list: Value = serde_json::from_str(&out.stdout).unwrap();
    list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap().to_string(),
                t["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Every file of the workspace's plan (tasks, wbs.json) with its content.
fn plan_files(p: &Pipeline) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(p.ws().join("tasks"))
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                read(&e.path()),
            )
        })
        .collect();
    files.push(("wbs.json".into(), read(&p.ws().join("wbs.json"))));
    files.sort();
    files
}

/// A decompose reply: phase "Build" with tasks `(temp id, title, dependencies)`.
fn decomposition(tasks: &[(&str, &str, &[&str])]) -> String {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|(id, title, deps)| {
            json!({"id": id, "title": title, "description": format!("Do {title}."),
                   "acceptance_criteria": [format!("{title} is done")], "dependencies": deps,
                   "wbs_level": 3, "estimated_effort": "small"})
        })
        .collect();
    json!({"type": "decompose", "understanding": "Build the things.",
           "phases": [{"name": "Build", "milestone": "m1", "tasks": tasks}]})
    .to_string()
}

/// The ids the last `plan` created, in order (from `--json`).
fn created(out: &support::Outcome) -> Vec<String> {
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["op"] == "create")
        .map(|s| s["task_id"].as_str().unwrap().to_string())
        .collect()
}

fn patch_reply(operations: Value) -> String {
    json!({"type": "plan_patch", "version": 1,
           "payload": {"understanding": "Tidy the plan.", "operations": operations}})
    .to_string()
}

#[test]
fn decompose_writes_tasks_the_tree_and_the_conversation() {
    let reply = r#"```yaml
type: decompose
understanding: The user wants a product list page.
phases:
  - name: 実装設計
    milestone: design
    tasks:
      - id: temp-task-1
        title: コンポーネント設計
        description: 商品カードコンポーネントの Props と State を設計する
        wbs_level: 2
        estimated_effort: small
        acceptance_criteria:
          - Props が定義されていること
        suggested_impl:
          language: typescript
          file_paths: ["src/components/ProductCard.svelte"]
  - name: 実装
    milestone: implementation
    tasks:
      - id: temp-task-2
        title: コンポーネント実装
        description: 設計に基づきコードを実装する
        dependencies: ["temp-task-1", "existing-1"]
        wbs_level: 3
        estimated_effort: medium
        acceptance_criteria: [カードが表示される, テストが通る]
potential_conflicts:
  - file: "src/routes/products/+page.svelte"
    tasks: ["existing-1"]
    warning: "他のタスクで変更中の可能性があります"
  - "KEY in a conflict"
```"#;
    // Meta may repeat the key (the user pasted it before): it is masked wherever kept.
    let reply = reply.replace("KEY in", &format!("{KEY} in"));
    let server = FakeOpenAi::start(vec![Answer::chat(&reply)]);
    let p = workspace("plan-decompose", &server);
    p.new_task("existing-1", "An API for products");
    // An earlier conversation: 12 messages, longer than 300 characters.
    let earlier: String = (0..12)
        .map(|n| {
            let role = if n % 2 == 0 { "user" } else { "meta" };
            format!(
                "{}\n",
                json!({"at": "2026-01-01T00:00:00.000Z", "role": role, "text": format!("{n} {}", "x".repeat(400))})
            )
        })
        .collect();
    std::fs::write(p.ws().join("chat.jsonl"), earlier).unwrap();

    let out = plan(&p, &["商品一覧ページを作って"]);
    out.code(0)
        .stdout_has("understanding: The user wants a product list page.\nplan revision 1:\n")
        .stdout_has("potential conflicts:\n  - src/routes/products/+page.svelte (tasks existing-1): 他のタスクで変更中の可能性があります\n");
    assert!(!out.stdout.contains(KEY) && !out.stderr.contains(KEY));

    // What Meta was sent.
    let received = server.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].json()["model"], "plan-model");
    assert_eq!(
        received[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(received[0].message(0).contains("type: decompose"));
    let sent = request(&received[0]);
    assert_eq!(sent["type"].as_str(), Some("decompose"));
    assert_eq!(sent["message"].as_str(), Some("商品一覧ページを作って"));
    assert_eq!(sent["existing_tasks"][0]["id"].as_str(), Some("existing-1"));
    assert_eq!(
        sent["existing_tasks"][0]["status"].as_str(),
        Some("PENDING")
    );
    let conversation = sent["conversation"].as_sequence().unwrap();
    assert_eq!(conversation.len(), 10);
    assert!(conversation[0]["text"].as_str().unwrap().starts_with("2 x"));
    assert!(
        conversation[9]["text"]
            .as_str()
            .unwrap()
            .starts_with("11 x")
    );
    assert!(
        conversation
            .iter()
            .all(|m| m["text"].as_str().unwrap().chars().count() == 300)
    );

    // The tasks, with real ids and rewritten dependencies.
    let tree = wbs(&p);
    assert_eq!(tree["root_node_id"], "node-root");
    assert_eq!(tree["revision"], 1);
    let nodes = &tree["nodes"];
    let phases = nodes["node-root"]["children"].as_array().unwrap();
    assert_eq!(phases.len(), 2);
    let design = phases[0].as_str().unwrap();
    let build = phases[1].as_str().unwrap();
    assert_eq!(nodes[design]["title"], "実装設計");
    assert_eq!(nodes[design]["parent"], "node-root");
    assert!(nodes[design].get("task_id").is_none());
    let first = nodes[design]["children"][0].as_str().unwrap();
    let second = nodes[build]["children"][0].as_str().unwrap();
    assert!(first.starts_with("t-") && first.len() == 10, "{first}");
    assert_eq!(
        nodes[second],
        json!({"title": "コンポーネント実装", "parent": build, "children": [], "task_id": second})
    );
    let record = &lines(&p, second)[0];
    assert_eq!(record["type"], "task");
    assert_eq!(record["title"], "コンポーネント実装");
    assert_eq!(record["description"], "設計に基づきコードを実装する");
    assert_eq!(
        record["raw_prompt"],
        "コンポーネント実装\n\n設計に基づきコードを実装する"
    );
    assert_eq!(
        record["acceptance_criteria"],
        json!(["カードが表示される", "テストが通る"])
    );
    assert_eq!(record["depends_on"], json!([first, "existing-1"]));
    assert_eq!(record["phase"], "実装");
    assert_eq!(record["milestone"], "implementation");
    assert_eq!(record["wbs_level"], 3);
    assert_eq!(record["estimated_effort"], "medium");
    assert_eq!(record["plan_revision"], 1);
    assert_eq!(
        lines(&p, first)[0]["suggested_impl"],
        json!({"language": "typescript", "file_paths": ["src/components/ProductCard.svelte"]})
    );

    // The conversation: the message and Meta's understanding.
    let said = chat(&p);
    assert_eq!(said.len(), 14);
    assert_eq!(said[12]["role"], "user");
    assert_eq!(said[12]["text"], "商品一覧ページを作って");
    assert_eq!(said[13]["role"], "meta");
    assert_eq!(said[13]["text"], "The user wants a product list page.");
    assert_eq!(
        said[13]["potential_conflicts"],
        json!([{"file": "src/routes/products/+page.svelte", "tasks": ["existing-1"],
                "warning": "他のタスクで変更中の可能性があります"}, "*** in a conflict"])
    );

    // The task list and the tree view.
    let status = statuses(&p);
    assert_eq!(status[first], "PENDING");
    assert_eq!(status[second], "PENDING");
    let doc: Value =
        serde_json::from_str(&p.in_ws(&["plan"], &["--show", "--json"]).output().stdout).unwrap();
    let ids: Vec<&str> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["node-root", design, first, build, second]);
    assert_eq!(doc["nodes"][4]["depends_on"], json!([first, "existing-1"]));
    assert_eq!(doc["nodes"][4]["depth"], 2);
    assert_eq!(doc["outside_plan"][0]["id"], "existing-1");
    let shown = p.in_ws(&["plan"], &["--show"]).output();
    shown.code(0);
    assert_eq!(
        shown.stdout,
        format!(
            "Plan (revision 1)\n  実装設計 [design]\n    PENDING   {first}  コンポーネント設計\n  実装 [implementation]\n    PENDING   {second}  コンポーネント実装  (after {first}, existing-1)\nNot in the plan:\n  PENDING   existing-1  An API for products\n"
        )
    );
}

#[test]
fn a_reply_with_a_dependency_cycle_is_asked_again_with_the_error() {
    let ring = decomposition(&[("temp-1", "A", &["temp-2"]), ("temp-2", "B", &["temp-1"])]);
    let good = decomposition(&[("temp-1", "A", &[]), ("temp-2", "B", &["temp-1"])]);
    let server = FakeOpenAi::start(vec![Answer::chat(&ring), Answer::chat(&good)]);
    let p = workspace("plan-reask", &server);
    let out = plan(&p, &["--json", "build", "A", "then", "B"]);
    out.code(0);
    let received = server.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[1].roles(), ["system", "user", "assistant", "user"]);
    let reask = received[1].message(3);
    assert!(
        reask.starts_with(
            "Your reply was invalid: dependency cycle: temp-1 → temp-2 → temp-1; tasks that wait on each other can never run\n"
        ),
        "{reask}"
    );
    let ids = created(&out);
    assert_eq!(ids.len(), 2);
    assert_eq!(lines(&p, &ids[1])[0]["depends_on"], json!([ids[0]]));
    assert_eq!(chat(&p)[0]["text"], "build A then B");
}

#[test]
fn a_plan_meta_never_gets_right_changes_nothing() {
    let bad = decomposition(&[("temp-1", "A", &["t-nope"])]);
    let server = FakeOpenAi::start(vec![Answer::chat(&bad); 4]);
    let p = workspace("plan-invalid", &server);
    // A key pasted into the message is masked in what is sent and kept.
    let out = plan(&p, &["build", "A", "with", KEY]);
    out.code(1).stderr_has(
        "no valid decompose reply after 3 re-asks: phases[0].tasks[0].dependencies[0]: task \"t-nope\" does not exist",
    );
    assert_eq!(server.received().len(), 4);
    assert_eq!(std::fs::read_dir(p.ws().join("tasks")).unwrap().count(), 0);
    assert!(!p.ws().join("wbs.json").exists());
    let said = chat(&p);
    assert_eq!(said.len(), 1, "only the user's message");
    let text = said[0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("build A with ") && !text.contains(KEY),
        "{text}"
    );
    assert!(server.received().iter().all(|r| !r.body.contains(KEY)));
    let logs: Vec<_> = std::fs::read_dir(p.ws().join("logs/plans"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(logs.len(), 1);
    let log = read(&logs[0].path());
    assert!(
        log.contains("--- reply 4 ---") && !log.contains(KEY),
        "{log}"
    );
}

#[test]
fn a_patch_request_is_trimmed_by_status_priority_and_breadth_first() {
    // 230 tasks in three phases (234 nodes); tasks 3-5 wait on task 10.
    let mut tasks: Vec<Value> = Vec::new();
    for n in 0..230 {
        let deps: Vec<String> = if (3..6).contains(&n) {
            vec!["temp-10".into()]
        } else {
            vec![]
        };
        tasks.push(
            json!({"id": format!("temp-{n}"), "title": format!("Task number {n} of the big plan"),
            "description": "Some work.", "acceptance_criteria": ["It works"], "dependencies": deps,
            "wbs_level": 3, "estimated_effort": "small"}),
        );
    }
    let reply = json!({"type": "decompose", "understanding": "A big plan.", "phases": [
        {"name": "Build", "milestone": "m1", "tasks": tasks[..100]},
        {"name": "Test", "milestone": "m2", "tasks": tasks[100..180]},
        {"name": "Ship", "milestone": "m3", "tasks": tasks[180..]}]});
    let server = FakeOpenAi::start(vec![
        Answer::chat(&reply.to_string()),
        Answer::chat(&patch_reply(json!([]))),
    ]);
    let p = workspace("plan-trim", &server);
    let ids = created(plan(&p, &["--json", "a big plan"]).code(0));
    assert_eq!(ids.len(), 230);
    // Statuses: RUNNING, BLOCKED, QUEUED, FAILED, SUCCEEDED, the rest PENDING.
    let queued = p.run_tasks(&[
        &ids[0], &ids[1], &ids[2], &ids[3], &ids[4], &ids[5], &ids[6], &ids[7],
    ]);
    for job in &queued[..3] {
        std::fs::rename(
            p.ws().join(format!("ipc/queue/{job}.json")),
            p.ws().join(format!("ipc/running/{job}.json")),
        )
        .unwrap();
    }
    for (n, status) in [
        (20, "failed"),
        (21, "failed"),
        (22, "succeeded"),
        (150, "succeeded"),
    ] {
        let id = &ids[n];
        let attempt = json!({"type": "attempt", "attempt_id": format!("a-{n}"), "job_id": format!("j-{n}"),
            "task_id": id, "status": status, "started_at": "s", "finished_at": "f", "duration_ms": 1,
            "task_config": "c", "log_dir": "l"});
        let file = p.ws().join(format!("tasks/{id}.jsonl"));
        std::fs::write(&file, format!("{}{attempt}\n", read(&file))).unwrap();
    }
    let statuses = statuses(&p);
    let count = |s: &str| statuses.values().filter(|v| *v == s).count();
    assert_eq!(
        [
            count("RUNNING"),
            count("BLOCKED"),
            count("QUEUED"),
            count("FAILED"),
            count("SUCCEEDED")
        ],
        [3, 3, 2, 2, 2]
    );
    let chat_file = p.ws().join("chat.jsonl");
    let mut text = read(&chat_file);
    for n in 0..15 {
        text.push_str(&format!(
            "{}\n",
            json!({"at": "2026-01-01T00:00:00.000Z", "role": "user", "text": format!("m{n} {}", "長".repeat(500))})
        ));
    }
    std::fs::write(&chat_file, text).unwrap();

    let out = plan(&p, &["--patch", "tidy", "up"]);
    out.code(0).stdout_has("nothing changed");
    let received = server.received();
    assert_eq!(received.len(), 2);
    assert!(
        received[1].body.len() <= 64 * 1024,
        "{} bytes",
        received[1].body.len()
    );
    let sent = request(&received[1]);
    assert_eq!(sent["type"].as_str(), Some("plan_patch"));
    assert_eq!(sent["message"].as_str(), Some("tidy up"));
    // Tasks: by status priority, then id; 200 of 230.
    let rank = |s: &str| {
        [
            "RUNNING",
            "BLOCKED",
            "QUEUED",
            "PENDING",
            "FAILED",
            "SUCCEEDED",
        ]
        .iter()
        .position(|r| *r == s)
        .unwrap()
    };
    let mut expected: Vec<(usize, &String)> =
        statuses.iter().map(|(id, s)| (rank(s), id)).collect();
    expected.sort();
    let expected: Vec<&str> = expected
        .iter()
        .take(200)
        .map(|(_, id)| id.as_str())
        .collect();
    let sent_tasks = sent["tasks"].as_sequence().unwrap();
    let got: Vec<&str> = sent_tasks
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(got, expected);
    assert_eq!(sent["tasks_omitted"].as_u64(), Some(30));
    assert_eq!(sent_tasks[0]["status"].as_str(), Some("RUNNING"));
    assert_eq!(sent_tasks[3]["status"].as_str(), Some("BLOCKED"));
    assert_eq!(
        sent_tasks[3]["depends_on"][0].as_str(),
        Some(ids[10].as_str())
    );
    assert!(
        sent_tasks[3]["parent_id"]
            .as_str()
            .unwrap()
            .starts_with("phase-")
    );
    // Nodes: breadth-first from the root; 200 of 234.
    let tree = wbs(&p);
    let phases: Vec<&str> = tree["nodes"]["node-root"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut bfs = vec!["node-root"];
    bfs.extend(&phases);
    for phase in &phases {
        bfs.extend(
            tree["nodes"][phase]["children"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap()),
        );
    }
    // node_index: each node's children, from the root down: the same 200.
    let index = sent["wbs"]["node_index"].as_mapping().unwrap();
    let mut got = vec!["node-root".to_string()];
    let mut at = 0;
    while at < got.len() {
        let children = index
            .get(got[at].as_str())
            .map_or(vec![], |n| n["children"].as_sequence().unwrap().clone());
        got.extend(children.iter().map(|c| c.as_str().unwrap().to_string()));
        at += 1;
    }
    assert_eq!(got, bfs[..200]);
    assert_eq!(sent["wbs"]["nodes_omitted"].as_u64(), Some(34));
    assert_eq!(sent["wbs"]["root_node_id"].as_str(), Some("node-root"));
    assert_eq!(index[phases[0]]["title"].as_str(), Some("Build"));
    // The conversation: the last ten messages, 300 characters each at most.
    let conversation = sent["conversation"].as_sequence().unwrap();
    assert_eq!(conversation.len(), 10);
    assert!(
        conversation[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("m5 長")
    );
    assert!(
        conversation[9]["text"]
            .as_str()
            .unwrap()
            .starts_with("m14 長")
    );
    assert!(
        conversation
            .iter()
            .all(|m| m["text"].as_str().unwrap().chars().count() <= 300)
    );
}

/// A plan of four tasks a, b (after a), c, d in phase "Build"; their ids.
fn four_tasks(p: &Pipeline) -> [String; 4] {
    let out = plan(p, &["--json", "four", "tasks"]);
    out.code(0);
    created(&out).try_into().unwrap()
}

#[test]
fn a_patch_creates_updates_moves_and_deletes() {
    let server = FakeOpenAi::start(vec![Answer::chat(&decomposition(&[
        ("a", "A", &[]),
        ("b", "B", &["a"]),
        ("c", "C", &[]),
        ("d", "D", &[]),
    ]))]);
    let p = workspace("plan-patch", &server);
    let [a, b, c, d] = four_tasks(&p);
    let phase = wbs(&p)["nodes"][&a]["parent"].as_str().unwrap().to_string();
    let ops = json!([
        {"op": "create", "temp_id": "n", "title": "New", "description": "A new task",
         "acceptance_criteria": ["new works"], "dependencies": [c], "parent_id": phase, "position": {"after": a}},
        {"op": "update", "task_id": b, "title": "B2", "acceptance_criteria": ["only this"]},
        {"op": "move", "task_id": d, "parent_id": a, "position": {"index": 0}},
        {"op": "delete", "task_id": a, "cascade": false},
        {"op": "update", "task_id": c, "dependencies": [d]}
    ]);
    let server2 = FakeOpenAi::start(vec![Answer::chat(&patch_reply(ops))]);
    answered_by(&p, &server2);
    let out = plan(&p, &["--patch", "replace", "A"]);
    out.code(0);
    let n = {
        let tree = wbs(&p);
        tree["nodes"][&phase]["children"][1]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        out.stdout,
        format!(
            "understanding: Tidy the plan.\nplan revision 2:\n  created  {n}  New  (under Build, after {c})\n  updated  {b}  B2  (title, acceptance_criteria)\n  moved    {d}  D  (under A, position 0)\n  deleted  {a}  A\n  updated  {c}  C  (dependencies)\n"
        )
    );
    // The tree: a's child took its place; n after where a was.
    let tree = wbs(&p);
    assert_eq!(tree["revision"], 2);
    assert_eq!(tree["nodes"][&phase]["children"], json!([d, n, b, c]));
    assert_eq!(tree["nodes"][&d]["parent"], phase.as_str());
    assert!(tree["nodes"].get(&a).is_none());
    // The lines: one per changed task, stamped with the new revision.
    let b_lines = lines(&p, &b);
    assert_eq!(b_lines.len(), 2);
    let update = &b_lines[1];
    assert_eq!(update["type"], "update");
    assert_eq!(update["title"], "B2");
    assert_eq!(update["raw_prompt"], "B2\n\nDo B.");
    assert_eq!(update["acceptance_criteria"], json!(["only this"]));
    assert_eq!(update["depends_on"], json!([]), "a was deleted");
    assert_eq!(update["plan_revision"], 2);
    let a_lines = lines(&p, &a);
    assert_eq!(a_lines[1]["type"], "deleted");
    assert_eq!(a_lines[1]["reason"], "plan --patch: replace A");
    assert_eq!(lines(&p, &c)[1]["depends_on"], json!([d]));
    assert_eq!(lines(&p, &d).len(), 1, "a move is the tree's business");
    let new = &lines(&p, &n)[0];
    assert_eq!(new["depends_on"], json!([c]));
    assert_eq!(new["acceptance_criteria"], json!(["new works"]));
    let status = statuses(&p);
    assert!(!status.contains_key(&a), "deleted tasks are not listed");
    assert_eq!(status.len(), 4);
    let shown = p.in_ws(&["plan"], &["--show"]).output();
    assert_eq!(
        shown.stdout,
        format!(
            "Plan (revision 2)\n  Build [m1]\n    PENDING   {d}  D\n    PENDING   {n}  New  (after {c})\n    PENDING   {b}  B2\n    PENDING   {c}  C  (after {d})\n"
        )
    );
}

#[test]
fn a_patch_deleting_a_running_task_is_refused_and_changes_nothing() {
    let server = FakeOpenAi::start(vec![Answer::chat(&decomposition(&[
        ("a", "A", &[]),
        ("b", "B", &[]),
        ("c", "C", &[]),
        ("d", "D", &[]),
    ]))]);
    let p = workspace("plan-running", &server);
    let [a, b, ..] = four_tasks(&p);
    let job = p.run_tasks(&[&a]).remove(0);
    std::fs::rename(
        p.ws().join(format!("ipc/queue/{job}.json")),
        p.ws().join(format!("ipc/running/{job}.json")),
    )
    .unwrap();
    let before = plan_files(&p);
    let ops =
        json!([{"op": "update", "task_id": b, "title": "B2"}, {"op": "delete", "task_id": a}]);
    let server2 = FakeOpenAi::start(vec![Answer::chat(&patch_reply(ops))]);
    answered_by(&p, &server2);
    let out = plan(&p, &["--patch", "drop", "A"]);
    out.code(1).stderr_has(&format!(
        "error: the plan was not changed: payload.operations[1] (delete): task {a} is RUNNING (job {job}); a running task cannot be deleted"
    ));
    assert_eq!(server2.received().len(), 1, "not asked again");
    assert_eq!(plan_files(&p), before);
    assert_eq!(chat(&p).last().unwrap()["role"], "user");
}

#[test]
fn an_invalid_patch_is_asked_again_and_then_applied_whole() {
    let server = FakeOpenAi::start(vec![Answer::chat(&decomposition(&[
        ("a", "A", &[]),
        ("b", "B", &[]),
        ("c", "C", &[]),
        ("d", "D", &[]),
    ]))]);
    let p = workspace("plan-patch-reask", &server);
    let [a, b, c, _] = four_tasks(&p);
    // First a patch whose last operation names an unknown task, then one reusing a
    // temp_id: neither writes anything.
    let unknown = json!([{"op": "update", "task_id": a, "title": "A2"}, {"op": "delete", "task_id": "t-nope"}]);
    let reused = json!([{"op": "create", "temp_id": "x", "title": "X"}, {"op": "create", "temp_id": "x", "title": "Y"}]);
    let good = json!([{"op": "update", "task_id": a, "title": "A2"}, {"op": "move", "task_id": c, "position": {"before": b}}]);
    let server2 = FakeOpenAi::start(vec![
        Answer::chat(&patch_reply(unknown)),
        Answer::chat(&patch_reply(reused)),
        Answer::chat(&patch_reply(good)),
    ]);
    answered_by(&p, &server2);
    plan(&p, &["--patch", "rename", "A"]).code(0);
    let received = server2.received();
    assert_eq!(received.len(), 3);
    assert!(received[1].message(3).starts_with(
        "Your reply was invalid: payload.operations[1] (delete): task \"t-nope\" does not exist\n"
    ));
    assert!(received[2].message(5).starts_with(
        "Your reply was invalid: payload.operations[1].temp_id: \"x\" is used twice (first in operations[0])"
    ));
    let tree = wbs(&p);
    let phase = tree["nodes"][&a]["parent"].as_str().unwrap();
    assert_eq!(tree["nodes"][phase]["children"][1], c.as_str());
    assert_eq!(tree["revision"], 2);
    assert_eq!(lines(&p, &a).len(), 2);
    assert_eq!(std::fs::read_dir(p.ws().join("tasks")).unwrap().count(), 4);
}

#[test]
fn task_run_all_enqueues_every_task_not_succeeded_nor_deleted_nor_waiting() {
    let server = FakeOpenAi::start(vec![
        Answer::chat(&decomposition(&[
            ("a", "A", &[]),
            ("b", "B", &[]),
            ("c", "C", &[]),
            ("d", "D", &[]),
        ])),
        Answer::chat(&decomposition(&[("e", "E", &[])])),
    ]);
    let p = workspace("plan-run-all", &server);
    let [pending, failed, succeeded, queued] = four_tasks(&p);
    let extra = created(plan(&p, &["--json", "one", "more"]).code(0)).remove(0);
    for (id, status) in [(&failed, "failed"), (&succeeded, "succeeded")] {
        let attempt = json!({"type": "attempt", "attempt_id": "a-1", "job_id": "j-1", "task_id": id,
            "status": status, "started_at": "s", "finished_at": "f", "duration_ms": 1,
            "task_config": "c", "log_dir": "l"});
        let file = p.ws().join(format!("tasks/{id}.jsonl"));
        std::fs::write(&file, format!("{}{attempt}\n", read(&file))).unwrap();
    }
    let queued_job = p.run_tasks(&[&queued]).remove(0);
    let server2 = FakeOpenAi::start(vec![Answer::chat(&patch_reply(
        json!([{"op": "delete", "task_id": extra}]),
    ))]);
    answered_by(&p, &server2);
    plan(&p, &["--patch", "drop", "E"]).code(0);
    let out = p.in_ws(&["task", "run"], &["--all"]).output();
    out.code(0);
    let jobs: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(jobs.len(), 2, "{}", out.stdout);
    let mut enqueued: Vec<String> = p
        .ipc("queue")
        .iter()
        .filter(|name| !name.starts_with(&queued_job))
        .map(|name| {
            let job: Value =
                serde_json::from_str(&read(&p.ws().join("ipc/queue").join(name))).unwrap();
            job["task_id"].as_str().unwrap().to_string()
        })
        .collect();
    enqueued.sort();
    let mut expected = vec![pending, failed];
    expected.sort();
    assert_eq!(enqueued, expected);
}

#[test]
fn a_planned_task_runs_with_its_acceptance_criteria() {
    let p = Pipeline::new("plan-run", true);
    let decompose = "type: decompose\nunderstanding: Write out.txt.\nphases:\n  - name: Work\n    milestone: m1\n    tasks:\n      - id: w\n        title: Write out.txt\n        description: Write done into out.txt.\n        acceptance_criteria: [out.txt says done]\n        wbs_level: 3\n        estimated_effort: small\n";
    // One script for the Task Builder and plans: each takes the replies of its type.
    let builder = format!(
        "{}- {}",
        support::pipeline::BUILDER_REPLY,
        decompose.replace('\n', "\n  ").trim_end()
    );
    // The runner gets the criteria from the TaskConfig: no plan_task reply.
    let meta = "- type: next_action\n  decision: {action: run_worker, reason: start}\n  worker_call:\n    worker_type: codex-cli\n    mode: exec\n    prompt: |\n      Write out.txt.\n      @run: echo done > out.txt\n      @say: wrote out.txt\n- type: completion_assessment\n  summary: out.txt says done.\n  details: {passed_criteria: [AC-1]}\n";
    p.init(&builder, meta, "");
    let out = p.in_ws(&["plan"], &["--json", "write", "out.txt"]).output();
    out.code(0);
    let id = created(&out).remove(0);
    let job = p.run_tasks(&["--all"]).remove(0);
    p.orchestrate_once(&[]).output().code(0);
    let config: serde_norway::Value =
        serde_norway::from_str(&read(&p.ws().join(format!("logs/{job}/task-config.yaml"))))
            .unwrap();
    assert_eq!(
        config["task"]["acceptance_criteria"],
        serde_norway::from_str::<serde_norway::Value>("[out.txt says done]").unwrap()
    );
    assert_eq!(config["task"]["id"].as_str(), Some(id.as_str()));
    let result = p.result(&job);
    assert_eq!(result["status"], "succeeded", "{result}");
    let note = read(std::path::Path::new(result["note_path"].as_str().unwrap()));
    assert!(
        note.contains("AC-1") && note.contains("out.txt says done"),
        "{note}"
    );
    assert_eq!(statuses(&p)[&id], "SUCCEEDED");
    assert_no_container(&id);
}

#[test]
fn a_task_that_started_while_meta_was_thinking_is_not_deleted() {
    let server = FakeOpenAi::start(vec![Answer::chat(&decomposition(&[
        ("a", "A", &[]),
        ("b", "B", &[]),
        ("c", "C", &[]),
        ("d", "D", &[]),
    ]))]);
    let p = workspace("plan-started", &server);
    let [a, ..] = four_tasks(&p);
    let job = p.run_tasks(&[&a]).remove(0);
    let before = plan_files(&p);
    let ops = json!([{"op": "delete", "task_id": a}]);
    let server2 = FakeOpenAi::start(vec![
        Answer::chat(&patch_reply(ops)).delayed(std::time::Duration::from_millis(800)),
    ]);
    answered_by(&p, &server2);
    let running = p
        .in_ws(&["plan"], &["--patch", "drop", "A"])
        .env("OPENAI_API_KEY", KEY)
        .start();
    support::pipeline::wait_for(std::time::Duration::from_secs(10), || {
        server2.received().len() == 1
    });
    // An orchestrator claims the job meanwhile.
    std::fs::rename(
        p.ws().join(format!("ipc/queue/{job}.json")),
        p.ws().join(format!("ipc/running/{job}.json")),
    )
    .unwrap();
    running.finish().code(1).stderr_has(&format!(
        "the plan was not changed: task {a} is RUNNING (job {job})"
    ));
    assert_eq!(plan_files(&p), before);
}

/// SPEC §16: a plan_patch `update` may pin a task's test (the user names it in the
/// message); a decompose may not invent one (asked again without it).
#[test]
fn a_patch_update_pins_a_test_and_a_decompose_may_not() {
    let mut with_test: Value = serde_json::from_str(&decomposition(&[("a", "A", &[])])).unwrap();
    with_test["phases"][0]["tasks"][0]["test"] = json!({"command": "make check"});
    let server = FakeOpenAi::start(vec![
        Answer::chat(&with_test.to_string()),
        Answer::chat(&decomposition(&[("a", "A", &[])])),
    ]);
    let p = workspace("plan-test", &server);
    let out = plan(&p, &["--json", "build", "A"]);
    out.code(0);
    let received = server.received();
    assert_eq!(received.len(), 2);
    assert!(
        received[1].message(3).starts_with(
            "Your reply was invalid: phases[0].tasks[0].test: a decompose does not set tests"
        ),
        "{}",
        received[1].message(3)
    );
    let [id]: [String; 1] = created(&out).try_into().unwrap();
    assert_eq!(p.show(&id)["task"].get("test"), None);

    let pin = json!([{"op": "update", "task_id": id, "test": {"command": "cargo test --locked", "timeout_sec": 90}}]);
    let bad = json!([{"op": "update", "task_id": id, "test": {"command": "x", "cwd": "web"}}]);
    let server2 = FakeOpenAi::start(vec![
        Answer::chat(&patch_reply(bad)),
        Answer::chat(&patch_reply(pin)),
    ]);
    answered_by(&p, &server2);
    plan(
        &p,
        &["--patch", "verify", "A", "with", "cargo test --locked"],
    )
    .code(0);
    let received = server2.received();
    assert!(
        received[0]
            .message(0)
            .contains("test: {command: <shell command>, timeout_sec: <seconds>}   # only the command the user's message names"),
        "the schema offers it"
    );
    assert!(
        received[1].message(3).starts_with(
            "Your reply was invalid: payload.operations[0].test.cwd: unknown key (a test has command and timeout_sec)"
        ),
        "{}",
        received[1].message(3)
    );
    assert_eq!(
        p.show(&id)["task"]["test"],
        json!({"command": "cargo test --locked", "timeout_sec": 90})
    );
    let last = lines(&p, &id).pop().unwrap();
    assert_eq!(last["type"], "update");
    assert_eq!(last["test"]["command"], "cargo test --locked");
}
