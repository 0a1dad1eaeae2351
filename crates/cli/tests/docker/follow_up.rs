//! Follow-up messages for `agent-runner run` (SPEC §23): `run --resume --message`
//! after COMPLETE goes on with the same criteria (unticked) and the message, which
//! reaches Meta's next `next_action`, the worker's first prompt and the note. Real
//! binary, real daemon, the fake OpenAI server's request log; the test worker's fake
//! codex carries out the `@run:` lines of its prompt, so a directive in the message
//! shows that the worker was given it.

use crate::support;

use serde_json::Value;
use support::Scratch;
use support::fake_openai::FakeOpenAi;
use support::task::{assert_no_container, assess, note, plan, run_worker, runner, task_id};

fn result(stdout: &str) -> Value {
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

#[test]
fn a_follow_up_after_complete_reaches_meta_the_worker_and_the_note() {
    let dir = Scratch::new("follow-up");
    let id = task_id("follow");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo one > one.txt\n@say: wrote one.txt"),
        assess(&["AC-1"], "done"),
        // The follow-up.
        run_worker("@run: echo two > two.txt\n@say: wrote two.txt"),
        assess(&["AC-1"], "done again"),
    ]);
    let yaml = support::task::v1_task(&id, &dir.path, &server)
        .image(&support::docker::image_with_this_fake());
    runner(&yaml).output().code(0);
    let before = server.received().len();
    assert_eq!(before, 3);

    // A message needs --resume; an empty one is refused before anything runs.
    runner(&yaml)
        .args(&["--message", "more"])
        .output()
        .code(2)
        .stderr_has("--resume");
    runner(&yaml)
        .args(&["--resume", "--message", "  "])
        .output()
        .code(1)
        .stderr_has("--message");
    assert_eq!(server.received().len(), before, "nothing asked");

    let message = "Please also keep a record.\n@run: echo seen > from-message.txt";
    let out = runner(&yaml)
        .args(&["--json", "--resume", "--message", message])
        .output();
    out.code(0);
    let result = result(&out.stdout);
    assert_eq!(
        (&result["state"], &result["loops"]),
        (&Value::from("COMPLETE"), &Value::from(2))
    );
    let asked = server.received()[before].message(1);
    assert!(asked.starts_with("type: next_action"), "{asked}");
    assert!(
        asked.contains("message_from_user: |-\n    Please also keep a record."),
        "the message is in the next next_action:\n{asked}"
    );
    assert!(
        asked.contains("passed: false"),
        "the same criteria, to be met again:\n{asked}"
    );
    assert!(dir.path.join("two.txt").exists());
    assert!(
        dir.path.join("from-message.txt").exists(),
        "the worker was given the message"
    );
    let note = note(&dir.path, &id);
    assert!(
        note.contains("- Follow-up message: Please also keep a record."),
        "{note}"
    );
    assert_no_container(&id);
}
