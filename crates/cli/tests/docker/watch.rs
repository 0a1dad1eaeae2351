//! Watching a run (SPEC §19): the event log a run writes as it goes.

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::Scratch;
use support::fake_openai::FakeOpenAi;
use support::pipeline::{
    BUILDER_REPLY, Pipeline, QUICK_META, meta_script, task_id as pipeline_task_id,
};
use support::task::{KEY, assert_no_container, assess, plan, run_worker, runner, task_id, v1_task};

fn events(repo: &std::path::Path, id: &str) -> Vec<Value> {
    std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/events.jsonl")))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let mut kind = e["kind"].as_str().unwrap().to_string();
            for detail in ["phase", "item", "to", "type"] {
                if let Some(d) = e[detail].as_str() {
                    kind = format!("{kind}:{d}");
                }
            }
            kind
        })
        .collect()
}

#[test]
fn a_reader_sees_the_worker_s_run_and_commands_before_it_ends() {
    let dir = Scratch::new("watch-live");
    let id = task_id("live");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(&format!(
            "@run: echo started > started.txt\n@say: the key is {KEY}\n@sleep: 4\n@say: slept"
        )),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server).test("true");
    let running = runner(&yaml).arg("--json").start();
    // While the worker sleeps: its run has started, its command finished, its first
    // message is there, and nothing says the run ended.
    let mut seen = Vec::new();
    support::task::wait_for(Duration::from_secs(60), || {
        seen = kinds(&events(&dir.path, &id));
        seen.iter().any(|k| k == "worker_item:agent_message")
    });
    assert!(
        !seen.iter().any(|k| k == "worker_run:finished"),
        "seen only after the run: {seen:?}"
    );
    assert_eq!(
        seen,
        [
            "state:PENDING",
            "state:PLANNING",
            "meta:plan_task",
            "state:RUNNING",
            "meta:next_action",
            "worker_run:started",
            "worker_item:command_started",
            "worker_item:command_finished",
            "worker_item:agent_message",
        ]
    );
    let out = running.finish();
    out.code(0);
    let all = events(&dir.path, &id);
    assert_eq!(
        kinds(&all)[9..],
        [
            "worker_item:agent_message",
            "worker_run:finished",
            "state:VALIDATING",
            "test:started",
            "test:finished",
            "meta:completion_assessment",
            "state:COMPLETE",
        ]
    );
    let text = std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/events.jsonl")))
        .unwrap();
    assert!(!text.contains(KEY), "masked: {text}");
    assert!(text.contains("the key is ***"), "{text}");
    let finished = all.iter().find(|e| e["phase"] == "finished").unwrap();
    assert_eq!(
        (
            &finished["outcome"],
            &finished["exit_code"],
            &finished["summary"]
        ),
        (
            &Value::from("completed"),
            &Value::from(0),
            &Value::from("slept")
        )
    );
    let command = &all[7];
    assert_eq!(command["exit_code"], 0);
    assert_eq!(command["text"], "/bin/sh -lc 'echo started > started.txt'");
    assert_no_container(&id);
}

/// A worker that prints events as fast as it can (each a command started) cannot
/// fill the host's disk through the event log: its events stop at the bound, after
/// one line saying so, and the run's own events still come to the end.
#[test]
fn a_flood_of_worker_events_stops_at_the_bound_and_the_run_s_end_is_still_told() {
    let dir = Scratch::new("watch-flood");
    let id = task_id("flood");
    let command = "x".repeat(300);
    // The fake codex's own stdout is the run's: found by its flag (the pattern does
    // not match itself), written to from the command it runs.
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(&format!(
            "@run: p=$(grep -l 'skip-git-rep[o]' /proc/[0-9]*/cmdline | head -n 1); i=0; \
             while [ $i -lt 20000 ]; do i=$((i+1)); \
             echo '{{\"type\":\"item.started\",\"item\":{{\"id\":\"f'$i'\",\"type\":\"command_execution\",\"command\":\"{command}\",\"status\":\"in_progress\"}}}}'; \
             done > ${{p%/cmdline}}/fd/1\n@say: flooded"
        )),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server).test("true");
    runner(&yaml).output().code(0);
    let path = dir.join(&format!(".agent-runner/logs/{id}/events.jsonl"));
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(
        size <= (4 << 20) + 1024 && size > (4 << 20) - 8192,
        "{size} bytes; the worker's log begins: {}",
        std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/run-1.log")))
            .unwrap_or_default()
            .chars()
            .take(2000)
            .collect::<String>()
    );
    let all = events(&dir.path, &id);
    let cut: Vec<usize> = (0..all.len())
        .filter(|&n| all[n]["kind"] == "truncated")
        .collect();
    assert_eq!(cut.len(), 1, "one truncated line");
    assert_eq!(all[cut[0]]["dropped"], "worker_item, egress_denied");
    assert_eq!(all[cut[0]]["limit_bytes"], 4 << 20);
    let after = kinds(&all[cut[0] + 1..]);
    assert_eq!(
        after,
        [
            "worker_run:finished",
            "state:VALIDATING",
            "test:started",
            "test:finished",
            "meta:completion_assessment",
            "state:COMPLETE",
        ]
    );
    assert_no_container(&id);
}

/// Lines of a child's stdout as they come, on a channel.
fn lines_of(running: &mut support::Running) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stdout = running.child().stdout.take().unwrap();
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// Waits for a line containing `text`; all lines seen until then.
fn until_line(lines: &std::sync::mpsc::Receiver<String>, text: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let until = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                let done = line.contains(text);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(e) => panic!("no line with {text:?} ({e}); seen: {seen:#?}"),
        }
    }
}

#[test]
fn task_logs_follows_a_queued_job_to_its_end_and_exits_with_its_status() {
    let p = Pipeline::new("watch-logs", false);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: echo hi > hi.txt\n@say: wrote hi.txt\n@sleep: 3\n@say: done"),
        "",
    );
    let id = pipeline_task_id("logs");
    p.new_task(&id, "Write hi.txt");
    p.run_tasks(&[&id]);
    // Started while the job waits in the queue: it waits, then follows.
    let mut follow = p.in_ws(&["task", "logs"], &["-f", &id]).start();
    let lines = lines_of(&mut follow);
    let orchestrator = p.orchestrate_once(&[]).start();
    let seen = until_line(&lines, "says: wrote hi.txt");
    assert!(
        seen.iter().any(|l| l.ends_with("worker run 1 started")),
        "{seen:#?}"
    );
    assert!(
        seen.iter()
            .any(|l| l.contains("run 1 $ /bin/sh -lc 'echo hi > hi.txt' → exit 0")),
        "{seen:#?}"
    );
    assert!(
        !seen.iter().any(|l| l.contains("worker run 1 completed")),
        "seen while the worker still sleeps: {seen:#?}"
    );
    let rest = until_line(&lines, "state VALIDATING → COMPLETE");
    assert!(
        rest.iter().any(|l| l.contains("worker run 1 completed")),
        "{rest:#?}"
    );
    let out = follow.finish();
    out.code(0).stderr_has("job ").stderr_has("succeeded in");
    orchestrator.finish().code(0);

    // Once recorded: without -f, the last attempt's events; with -f, its status.
    let again = p.in_ws(&["task", "logs"], &[&id]).output();
    again.code(0);
    assert!(
        again.stdout.starts_with(char::is_numeric),
        "{}",
        again.stdout
    );
    assert!(
        again.stdout.contains("state PENDING: started"),
        "{}",
        again.stdout
    );
    p.in_ws(&["task", "logs"], &["-f", &id]).output().code(0);
    p.in_ws(&["task", "logs"], &["-f", "no-such-task"])
        .output()
        .code(1)
        .stderr_has("task no-such-task not found");
}

#[test]
fn task_logs_f_exits_1_with_a_failed_attempt() {
    let p = Pipeline::new("watch-logs-failed", false);
    // Meta never ticks the criterion, and runs out of replies.
    p.init(BUILDER_REPLY, &QUICK_META.replace("[AC-1]", "[]"), "");
    let id = pipeline_task_id("fails");
    p.new_task(&id, "Nothing to do");
    p.in_ws(&["task", "logs"], &[&id])
        .output()
        .code(1)
        .stderr_has("has not run yet");
    p.run_tasks(&[&id]);
    let follow = p.in_ws(&["task", "logs"], &["-f", &id]).start();
    p.orchestrate_once(&[]).output().code(1);
    let out = follow.finish();
    out.code(1).stderr_has("failed in");
    assert!(out.stdout.contains("→ FAILED"), "{}", out.stdout);
}

/// `task stop ID` run to its end.
fn stop(p: &Pipeline, id: &str) -> support::Outcome {
    p.in_ws(&["task", "stop"], &[id]).output()
}

#[test]
fn stopping_a_queued_job_cancels_it_and_leaves_the_task_as_it_was() {
    let p = Pipeline::new("watch-cancel", false);
    p.init(BUILDER_REPLY, QUICK_META, "");
    let id = pipeline_task_id("cancel");
    p.new_task(&id, "Nothing to do");
    let job = p.run_tasks(&[&id]).remove(0);
    let out = stop(&p, &id);
    out.code(0)
        .stderr_has(&format!("job {job} removed from the queue (cancelled)"))
        .stderr_has("attempt cancelled: cancelled by the user before it ran");
    assert_eq!(p.ipc("queue"), Vec::<String>::new());
    let attempts = p.attempts(&id);
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(
        (&attempts[0]["status"], &attempts[0]["job_id"]),
        (&Value::from("cancelled"), &Value::from(job.as_str()))
    );
    assert_eq!(p.show(&id)["status"], "PENDING", "it never ran");
    // Nothing left to stop, nothing left to run.
    stop(&p, &id)
        .code(1)
        .stderr_has("has no queued or running job");
    let orchestrated = p.orchestrate_once(&[]).output();
    orchestrated.code(0);
    assert!(
        !orchestrated.stderr.contains("claimed"),
        "{}",
        orchestrated.stderr
    );
    stop(&p, "no-such-task").code(1).stderr_has("not found");
}

#[test]
fn stopping_a_running_attempt_ends_it_alone_with_its_note_and_no_container() {
    let p = Pipeline::new("watch-stop", true);
    // Each worker says which task it is, then works for a while: 40 s for the one
    // to stop, 3 s for the other.
    p.init(
        BUILDER_REPLY,
        &meta_script(
            "@run: sleep $(cat /workspace/project/sleep.txt 2>/dev/null || echo 3)\n@say: done",
        ),
        "",
    );
    let (slow, quick) = (pipeline_task_id("slow"), pipeline_task_id("quick"));
    p.new_task(&slow, "Work slowly");
    p.new_task(&quick, "Work quickly");
    std::fs::write(p.root.join("sleep.txt"), "40").unwrap();
    support::pipeline::git(&p.root, &["add", "sleep.txt"]);
    support::pipeline::commit(&p.root, "slow");
    let slow_job = p.run_tasks(&[&slow]).remove(0);
    let orchestrator = p.orchestrate_once(&["--jobs", "2"]).start();
    // The slow one is at work (its clone has sleep.txt = 40); then the quick one
    // is enqueued into a root whose sleep.txt says 3.
    let clone = p.ws().join("clones").join(&slow_job);
    let events = clone.join(format!(".agent-runner/logs/{slow}/events.jsonl"));
    support::pipeline::wait_for(Duration::from_secs(90), || {
        support::pipeline::read(&events).contains("command_started")
    });
    std::fs::write(p.root.join("sleep.txt"), "3").unwrap();
    support::pipeline::git(&p.root, &["commit", "-qam", "quick"]);
    let quick_job = p.run_tasks(&[&quick]).remove(0);
    let quick_events = p
        .ws()
        .join("clones")
        .join(&quick_job)
        .join(format!(".agent-runner/logs/{quick}/events.jsonl"));
    support::pipeline::wait_for(Duration::from_secs(90), || {
        support::pipeline::read(&quick_events).contains("worker_run")
    });
    let out = stop(&p, &slow);
    out.code(0)
        .stderr_has(&format!(
            "stopping job {slow_job} (SIGTERM to its agent-runner, pid "
        ))
        .stderr_has("attempt failed: stopped by the user");
    let attempts = p.attempts(&slow);
    assert_eq!(attempts[0]["status"], "failed");
    assert_eq!(attempts[0]["error"], "stopped by the user");
    // It cleaned up: no container, and its note says how it ended.
    assert_no_container(&slow);
    let note = support::pipeline::read(&clone.join(format!(".agent-runner/task-{slow}.md")));
    assert!(note.contains("interrupted"), "{note}");
    // The other attempt ran on to its end.
    let finished = orchestrator.finish();
    finished.code(1);
    let quick_attempts = p.attempts(&quick);
    assert_eq!(
        quick_attempts[0]["status"], "succeeded",
        "{quick_attempts:?}"
    );
    assert_no_container(&quick);
}

/// Stops at every moment of a short attempt, from before its claim to after its
/// end: whatever the moment, the attempt is recorded once, as it really ended
/// (cancelled, stopped by the user, or its own outcome), `task stop` says which,
/// and no container is left.
#[test]
fn a_stop_racing_the_attempt_s_own_end_is_told_apart() {
    let p = Pipeline::new("watch-race", false);
    p.init(BUILDER_REPLY, &meta_script("@sleep: 1\n@say: done"), "");
    let mut outcomes = std::collections::BTreeMap::new();
    // Round 0 stops after the attempt's end and times it; the others stop at
    // moments from 0 to 1.4 times that, so they spread over the attempt and past
    // its end however loaded the machine is.
    let mut whole = Duration::ZERO;
    for round in 0..9u32 {
        let id = pipeline_task_id(&format!("race{round}"));
        p.new_task(&id, "Sleep a second");
        let job = p.run_tasks(&[&id]).remove(0);
        let started = std::time::Instant::now();
        let orchestrator = p.orchestrate_once(&[]).start();
        let said = if round == 0 {
            orchestrator.finish();
            whole = started.elapsed();
            stop(&p, &id)
        } else {
            let moment = whole * (round - 1) / 5;
            eprintln!("round {round}: stop at {moment:?} of {whole:?}");
            std::thread::sleep(moment);
            let said = stop(&p, &id);
            orchestrator.finish();
            said
        };
        let attempts = p.attempts(&id);
        assert_eq!(attempts.len(), 1, "recorded once: {attempts:?}");
        let (status, error) = (
            attempts[0]["status"].as_str().unwrap(),
            attempts[0]["error"].as_str().unwrap_or(""),
        );
        let kind = match (status, error) {
            ("cancelled", "cancelled by the user before it ran") => "cancelled",
            ("failed", "stopped by the user") => "stopped",
            ("succeeded", "") => "ran to its end",
            other => panic!("round {round}: {other:?}\n{}", said.stderr),
        };
        match said.code {
            Some(0) => {
                assert!(
                    said.stderr
                        .contains(&format!("job {job}: attempt {status}")),
                    "round {round}: {}",
                    said.stderr
                );
            }
            _ => {
                assert_eq!(kind, "ran to its end", "round {round}: {}", said.stderr);
                assert!(
                    said.stderr.contains("has already ended")
                        || said.stderr.contains("has no queued or running job"),
                    "round {round}: {}",
                    said.stderr
                );
            }
        }
        assert_no_container(&id);
        *outcomes.entry(kind).or_insert(0) += 1;
    }
    eprintln!("{outcomes:?}");
    assert!(
        outcomes.len() >= 2,
        "the rounds hit different moments: {outcomes:?}"
    );
}

/// A runner named in the owner file whose pid now belongs to another process (it
/// started at another time) is never signalled.
#[test]
fn stop_never_signals_a_reused_pid() {
    let p = Pipeline::new("watch-reuse", false);
    p.init(BUILDER_REPLY, QUICK_META, "");
    let id = pipeline_task_id("reuse");
    p.new_task(&id, "Nothing to do");
    let job = p.run_tasks(&[&id]).remove(0);
    // Claimed by this test (alive), with a "runner" whose pid is a sleep that
    // started later than the owner file says.
    let ws = p.ws();
    std::fs::rename(
        ws.join(format!("ipc/queue/{job}.json")),
        ws.join(format!("ipc/running/{job}.json")),
    )
    .unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let stat = |pid: u32| {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        s[s.rfind(')').unwrap() + 2..]
            .split_whitespace()
            .nth(19)
            .unwrap()
            .to_string()
    };
    let trimmed = |path: &str| std::fs::read_to_string(path).unwrap().trim().to_string();
    let me = std::process::id();
    let owner = |pid: u32, start: &str| {
        serde_json::json!({
            "pid": pid, "start_time": start,
            "host": trimmed("/proc/sys/kernel/hostname"),
            "boot_id": trimmed("/proc/sys/kernel/random/boot_id"),
            "pid_namespace": std::fs::read_link("/proc/self/ns/pid").unwrap().display().to_string(),
        })
    };
    let started: u64 = stat(sleeper.id()).parse().unwrap();
    let mut claimant = owner(me, &stat(me));
    claimant["claimed_at"] = "2026-01-01T00:00:00.000Z".into();
    claimant["runner"] = owner(sleeper.id(), &(started - 1).to_string());
    std::fs::write(
        ws.join(format!("ipc/running/{job}.owner.json")),
        claimant.to_string(),
    )
    .unwrap();
    stop(&p, &id).code(1).stderr_has("has already ended");
    assert!(sleeper.try_wait().unwrap().is_none(), "the sleep lives on");
    // With its real start time it is the runner, and is stopped.
    claimant["runner"] = owner(sleeper.id(), &started.to_string());
    std::fs::write(
        ws.join(format!("ipc/running/{job}.owner.json")),
        claimant.to_string(),
    )
    .unwrap();
    let out = p.in_ws(&["task", "stop"], &[&id]).start();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(sleeper.wait().unwrap().signal(), Some(libc::SIGTERM));
    drop(out);
}
