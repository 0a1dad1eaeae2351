//! Evaluation (SPEC §26) from the command line: a generated suite of real small
//! projects with planted bugs (testdata/demo-eval/make-suite.sh), held-out graders
//! and the test image's fake codex driven by a scripted Meta; the real binary, the
//! real daemon. Exact outcomes, the grader out of the worker's reach, `validate`,
//! resuming, a killed evaluation resumed.

use crate::support;

use std::time::Duration;

use support::docker::containers_labelled;
use support::eval_suite::{EvalSuite, without_times};
use support::pipeline::{git, wait_for};

/// No container of `tasks` (their sandboxes and their gradings) is left.
fn nothing_left(tasks: &[String]) {
    for task in tasks {
        for label in [task.clone(), format!("eval-grade-{task}")] {
            assert_eq!(
                containers_labelled("agent-runner.task", &label),
                Vec::<String>::new(),
                "left behind: {label}"
            );
        }
    }
}

#[test]
fn an_eval_has_one_exact_outcome_per_run_and_resumes_with_the_same_summary() {
    // The slow case runs past the budget, so the test lasts at least that long; the
    // search reads every file of the sandbox (the tools volume's too), as a fixed
    // string, which takes seconds even on a loaded machine.
    let s = EvalSuite::with_budget("eval-outcomes", &["fixed", "wrong", "slow", "search"], 60);
    let (fixed, wrong, slow, search) = (
        s.case("fixed", 1),
        s.case("wrong", 2),
        s.case("slow", 3),
        s.case("search", 4),
    );
    let out = s.cmd(&["validate"], &[]).output();
    out.code(0);
    assert_eq!(
        out.stdout,
        format!(
            "case {fixed}: ok (fails on the base, passes with the solution)\ncase {wrong}: ok (fails on the base)\ncase {slow}: ok (fails on the base)\ncase {search}: ok (fails on the base)\n"
        )
    );
    let out = s.run(&["--jobs", "2"]).output();
    out.code(0);
    let dir = s.dir();
    out.stdout_has(&format!("results: {}", dir.join("results.jsonl").display()))
        .stdout_has(&format!("summary: {}", dir.join("summary.json").display()))
        .stdout_has("scripted  2/4       50.0%");
    let outcomes = s.outcomes();
    assert_eq!(outcomes[&fixed], "resolved", "{:#?}", s.results());
    assert_eq!(outcomes[&wrong], "unresolved", "{:#?}", s.results());
    assert_eq!(outcomes[&slow], "agent_failed", "{:#?}", s.results());
    assert_eq!(outcomes[&search], "resolved", "{:#?}", s.results());
    assert_eq!(s.results().len(), 4, "one line per run");
    let slow_line = s
        .results()
        .into_iter()
        .find(|l| l["case"] == slow.as_str())
        .unwrap();
    assert!(
        slow_line["reason"]
            .as_str()
            .unwrap()
            .contains("max_duration_sec"),
        "{slow_line}"
    );
    // The worker searched its whole sandbox for the grader and found nothing.
    let branch = format!("agent-runner/eval-{search}-scripted-1");
    let found = git(&s.root, &["show", &format!("{branch}:found.txt")]);
    assert_eq!(found, "", "the worker found the grader");
    let searched: u64 = git(&s.root, &["show", &format!("{branch}:searched.txt")])
        .trim()
        .parse()
        .unwrap();
    assert!(searched > 20, "it searched {searched} files");
    // Nor is the grader in the eval's repository, whatever ref.
    let (ok, _) = support::pipeline::try_git(&s.root, &["grep", "-q", "GRADER-MARK", "--all"]);
    assert!(!ok, "the grader is in the eval's repository");
    let summary = s.summary();
    let config = &summary["configs"][0];
    assert_eq!(
        (config["resolved"].as_u64(), config["total"].as_u64()),
        (Some(2), Some(4)),
        "{summary:#}"
    );
    assert_eq!(config["pass_at_1"], 0.5);
    assert_eq!(summary["suite"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(config["agents"]["worker"], "codex-cli");
    // Again: nothing left to run, the same summary apart from times.
    let again = s.run(&["--jobs", "2"]).output();
    again.code(0).stderr_has("0 run(s) to do");
    assert_eq!(s.results().len(), 4);
    assert_eq!(without_times(s.summary()), without_times(summary.clone()));
    // --rerun unresolved runs that one again, and adds its line.
    let rerun = s.run(&["--rerun", "unresolved"]).output();
    rerun.code(0).stderr_has("1 run(s) to do");
    assert_eq!(s.results().len(), 5);
    assert_eq!(without_times(s.summary()), without_times(summary));
    nothing_left(&s.task_ids(&[fixed, wrong, slow, search]));
}

#[test]
fn validate_refuses_a_grader_that_passes_on_the_base() {
    let s = EvalSuite::new("eval-validate", &["fixed", "wrong"]);
    let wrong = s.case("wrong", 2);
    s.scratch
        .file(&format!("graders/{wrong}/grade.sh"), "true\n");
    let out = s.cmd(&["validate"], &[]).output();
    out.code(1)
        .stdout_has(&format!(
            "case {wrong}: INVALID: the grader passes on the base"
        ))
        .stderr_has("1 of 2 case(s) invalid");
    // A solution the grader fails is named too, and one that does not apply.
    let fixed = s.case("fixed", 1);
    let patch = format!("solutions/{fixed}.patch");
    s.scratch.file(
        &patch,
        "--- a/README.md\n+++ b/README.md\n@@ -1,3 +1,3 @@\n-# calc\n+# calc!\n \n A small project with a planted bug.\n",
    );
    let out = s.cmd(&["validate"], &[]).output();
    out.code(1).stdout_has(&format!(
        "case {fixed}: INVALID: the grader fails with the solution (exit 1)"
    ));
    s.scratch.file(
        &patch,
        "--- a/nothing.txt\n+++ b/nothing.txt\n@@ -1 +1 @@\n-a\n+b\n",
    );
    let out = s.cmd(&["validate"], &[]).output();
    out.code(1)
        .stdout_has(&format!("case {fixed}: INVALID: the solution"))
        .stdout_has("does not apply to the base");
}

#[test]
fn a_killed_eval_resumed_gives_the_same_totals_and_leaves_nothing_behind() {
    let s = EvalSuite::new("eval-killed", &["fixed", "wrong"]);
    let running = s.run(&["--jobs", "2"]).start();
    // Killed while its attempts run.
    wait_for(Duration::from_secs(120), || {
        let workspaces = s.home.join("workspaces");
        std::fs::read_dir(&workspaces)
            .into_iter()
            .flatten()
            .flatten()
            .any(|w| {
                std::fs::read_dir(w.path().join("ipc/running"))
                    .into_iter()
                    .flatten()
                    .count()
                    > 0
            })
    });
    std::thread::sleep(Duration::from_millis(1500));
    running.kill();
    let tasks = s.task_ids(&[s.case("fixed", 1), s.case("wrong", 2)]);
    // The runners end with it (SIGTERM from their parent's death) and take their sandboxes.
    wait_for(Duration::from_secs(60), || {
        tasks
            .iter()
            .all(|t| containers_labelled("agent-runner.task", t).is_empty())
    });
    let out = s.run(&["--jobs", "2"]).output();
    out.code(0);
    let outcomes = s.outcomes();
    assert_eq!(
        outcomes[&s.case("fixed", 1)],
        "resolved",
        "{:#?}",
        s.results()
    );
    assert_eq!(
        outcomes[&s.case("wrong", 2)],
        "unresolved",
        "{:#?}",
        s.results()
    );
    let config = &s.summary()["configs"][0];
    assert_eq!(
        (
            config["resolved"].as_u64(),
            config["total"].as_u64(),
            config["pending"].as_u64()
        ),
        (Some(1), Some(2), Some(0))
    );
    // A run the kill cut short is an infra_error retried, never an agent's failure.
    for line in s.results() {
        assert_ne!(line["outcome"], "agent_failed", "{line}");
    }
    nothing_left(&tasks);
}

#[test]
#[ignore = "needs chromium"]
fn the_web_view_charts_each_config_of_an_eval() {
    support::prerequisite::needs!(Chromium);
    let s = EvalSuite::new("eval-web", &["fixed", "wrong"]);
    // A suite name that is markup stays text.
    let hostile = "<img src=x onerror=\"window.pwned=1\">";
    let suite = std::fs::read_to_string(&s.suite).unwrap();
    let mut suite = suite.replace("name: demo", &format!("name: '{hostile}'"));
    // A second config, not run: its chart shows its runs pending and no rate.
    let scripted = suite.split_once("configs:\n").unwrap().1.to_string();
    suite.push_str(&scripted.replace("name: scripted", "name: other"));
    std::fs::write(&s.suite, suite).unwrap();
    s.run(&["--jobs", "2", "--config", "scripted"])
        .output()
        .code(0);
    let browser = support::webdriver::Browser::start();
    let web = support::web::Served::start_run(
        support::Run::new(&[
            "serve",
            "-w",
            s.root.to_str().unwrap(),
            "--addr",
            "127.0.0.1:0",
        ])
        .env("AGENT_RUNNER_HOME", &s.home),
    );
    browser.open(&web.url("/"));
    browser.click("nav a[href='/evals']");
    let chart = browser.wait_for(
        Duration::from_secs(10),
        "const f = document.querySelector('figure.eval-chart[data-config=\"scripted\"] svg'); if (!f) return null; \
         const w = (c) => { const r = f.querySelector('rect.bar.' + c); return r ? Number(r.getAttribute('width')) : null; }; \
         return [w('resolved'), w('unresolved'), Number(f.querySelector('circle.pass1').getAttribute('cx')), f.getAttribute('aria-label')];",
        serde_json::json!([]),
    );
    // Half the bar each; pass@1 in the middle of the 0–100 % axis.
    assert_eq!(chart[0], 190.0, "{chart}");
    assert_eq!(chart[1], 190.0, "{chart}");
    assert_eq!(chart[2], 200.0, "{chart}");
    assert_eq!(chart[3], "scripted: 1 of 2 resolved, pass@1 50.0%");
    assert_eq!(
        browser.text("tr[data-config='scripted'] td.resolved"),
        "1/2"
    );
    let other = browser.run(
        "const f = document.querySelector('figure.eval-chart[data-config=\"other\"] svg'); \
         return [document.querySelectorAll('figure.eval-chart').length, \
                 Number(f.querySelector('rect.bar.pending').getAttribute('width')), \
                 f.querySelector('text.na').textContent, f.querySelectorAll('rect.bar.resolved').length];",
        serde_json::json!([]),
    );
    assert_eq!(other[0], 2, "a chart per config: {other}");
    assert_eq!(other[1], 380.0, "every run of other pending: {other}");
    assert_eq!(other[2], "pass@1 n/a", "{other}");
    assert_eq!(other[3], 0, "{other}");
    assert_eq!(browser.text("tr[data-config='other'] td.pass1"), "n/a");
    assert!(browser.text("section.eval h2").contains(hostile));
    assert_eq!(
        browser.run("return window.pwned === undefined", serde_json::json!([])),
        true
    );
    browser.screenshot("eval-web-chart");
    let (code, _) = web.stop();
    assert!(code.is_some());
    nothing_left(&s.task_ids(&[s.case("fixed", 1), s.case("wrong", 2)]));
}

#[test]
fn a_host_lost_mid_eval_is_an_infra_error_retried_on_the_other_host() {
    use support::remote_hosts::{Has, OwnHost};
    let lost = OwnHost::start(Has::Prepared);
    let host = &lost.0;
    let s = EvalSuite::in_dir(host.shared.as_ref().unwrap(), "eval-lost", &["sleepy"], 120);
    let case = s.case("sleepy", 1);
    let task = format!("eval-{case}-scripted-1");
    // `gone` is named first: on a tie it gets the attempt.
    let running = s
        .run(&[
            "--host",
            &format!("gone={}:1", host.url),
            "--host",
            "here=unix:///var/run/docker.sock:1",
        ])
        .start();
    wait_for(Duration::from_secs(120), || {
        !support::docker::containers_labelled_on(&["-H", &host.url], "agent-runner.task", &task)
            .is_empty()
    });
    std::thread::sleep(Duration::from_secs(2));
    // The host goes: its container (daemon and relay) removed.
    support::docker::docker_ok(&["rm", "-f", &host.container]);
    let out = running.finish();
    out.code(0);
    let results = s.results();
    assert_eq!(results.len(), 1, "{results:#?}\n{}", out.stderr);
    let line = &results[0];
    assert_eq!(line["outcome"], "resolved", "{line}\n{}", out.stderr);
    assert_eq!(line["host"], "here", "{line}");
    let retried = line["infra_retried"][0].as_str().unwrap_or_default();
    assert!(retried.starts_with("host lost: gone: "), "{line}");
    let config = &s.summary()["configs"][0];
    assert_eq!(
        (
            config["resolved"].as_u64(),
            config["total"].as_u64(),
            config["infra_retried"].as_u64()
        ),
        (Some(1), Some(1), Some(1)),
        "{config}"
    );
    out.stdout_has("0 (+1 retried)");
    nothing_left(&[task]);
    drop(lost);
}

#[test]
#[ignore = "needs sandbox-image"]
fn a_python_project_and_a_shell_one_are_graded_by_their_held_out_tests() {
    // The Debian base the real worker image is made from carries python3 and pytest.
    support::prerequisite::needs!(SandboxImage);
    let python = support::docker::image_with_python();
    let s = EvalSuite::with_env(
        "eval-python",
        &["pyfixed", "pywrong", "fixed"],
        &[("PYTHON_IMAGE", &python)],
    );
    let (pyfixed, pywrong, fixed) = (
        s.case("pyfixed", 1),
        s.case("pywrong", 2),
        s.case("fixed", 3),
    );
    // pytest fails on each base and passes with the solution.
    let out = s.cmd(&["validate"], &[]).output();
    out.code(0);
    assert_eq!(
        out.stdout,
        format!(
            "case {pyfixed}: ok (fails on the base, passes with the solution)\ncase {pywrong}: ok (fails on the base)\ncase {fixed}: ok (fails on the base, passes with the solution)\n"
        )
    );
    s.run(&["--jobs", "2"])
        .output()
        .code(0)
        .stdout_has("scripted  2/3       66.7%");
    let line = |case: &str| {
        s.results()
            .into_iter()
            .find(|l| l["case"] == case)
            .unwrap_or_else(|| panic!("no line of {case}: {:#?}", s.results()))
    };
    let resolved = line(&pyfixed);
    assert_eq!(resolved["outcome"], "resolved", "{resolved:#}");
    let tail = resolved["grade"]["tail"].as_str().unwrap();
    assert!(tail.contains("2 passed"), "{tail}");
    // Half fixed: the held-out edge case fails, and pytest's exit says so.
    let unresolved = line(&pywrong);
    assert_eq!(unresolved["outcome"], "unresolved", "{unresolved:#}");
    assert_eq!(unresolved["reason"], "the grader failed (exit 1)");
    let tail = unresolved["grade"]["tail"].as_str().unwrap();
    assert!(
        tail.contains("FAILED test_held.py::test_edges") && tail.contains("1 failed, 1 passed"),
        "{tail}"
    );
    assert_eq!(line(&fixed)["outcome"], "resolved");
    // The held-out tests are nowhere in the eval's repository.
    let (ok, _) = support::pipeline::try_git(&s.root, &["grep", "-q", "GRADER-MARK", "--all"]);
    assert!(!ok, "the grader is in the eval's repository");
    nothing_left(&s.task_ids(&[pyfixed, pywrong, fixed]));
}

#[test]
fn an_attempt_on_a_host_is_graded_on_that_host() {
    use support::remote_hosts::{Has, OwnHost};
    let own = OwnHost::start(Has::Prepared);
    let host = &own.0;
    // The graders' image is on that host only: graded here, the run would be an
    // infra_error (no such image).
    let grader_image = format!("agent-runner-test-grader:{}", support::short_id());
    host.docker_ok(&["tag", support::docker::TEST_IMAGE, &grader_image]);
    let s = EvalSuite::in_dir(
        host.shared.as_ref().unwrap(),
        "eval-on-host",
        &["fixed"],
        60,
    );
    let suite = std::fs::read_to_string(&s.suite).unwrap();
    let top = format!("\nimage: {}\n", support::docker::TEST_IMAGE);
    assert!(suite.contains(&top), "{suite}");
    std::fs::write(
        &s.suite,
        suite.replace(&top, &format!("\nimage: {grader_image}\n")),
    )
    .unwrap();
    let case = s.case("fixed", 1);
    let out = s.run(&["--host", &format!("far={}:1", host.url)]).output();
    out.code(0);
    let results = s.results();
    assert_eq!(results.len(), 1, "{results:#?}\n{}", out.stderr);
    let line = &results[0];
    assert_eq!(line["outcome"], "resolved", "{line:#}\n{}", out.stderr);
    assert_eq!(line["host"], "far", "{line}");
    let graded_here = support::docker::containers_labelled(
        "agent-runner.task",
        &format!("eval-grade-eval-{case}-scripted-1"),
    );
    assert_eq!(graded_here, Vec::<String>::new());
    assert_eq!(
        support::docker::containers_labelled_on(
            &["-H", &host.url],
            "agent-runner.task",
            &format!("eval-grade-eval-{case}-scripted-1"),
        ),
        Vec::<String>::new(),
        "the grading sandbox is left on the host"
    );
    nothing_left(&s.task_ids(&[case]));
}

#[test]
fn a_config_naming_an_image_nobody_has_is_refused_before_any_run() {
    let s = EvalSuite::new("eval-no-image", &["fixed", "wrong"]);
    let suite = std::fs::read_to_string(&s.suite).unwrap();
    let worker = format!("docker_image: \"{}\"", support::docker::TEST_IMAGE);
    assert!(suite.contains(&worker), "{suite}");
    let missing = format!("agent-runner-test-none:{}", support::short_id());
    std::fs::write(
        &s.suite,
        suite.replace(&worker, &format!("docker_image: \"{missing}\"")),
    )
    .unwrap();
    let out = s.run(&[]).output();
    out.code(1)
        .stderr_has("cannot run as it is; nothing was run")
        .stderr_has(&format!(
            "error: config scripted: configs[0].runner.worker.docker_image: docker image {missing} is not available"
        ));
    // No eval directory, no task: nothing was planned, let alone run.
    for workspace in std::fs::read_dir(s.home.join("workspaces"))
        .unwrap()
        .flatten()
    {
        for made in ["evals", "tasks"] {
            let dir = workspace.path().join(made);
            let entries = std::fs::read_dir(&dir).map_or(0, |d| d.count());
            assert_eq!(entries, 0, "{} has {entries} entries", dir.display());
        }
    }
    nothing_left(&s.task_ids(&[s.case("fixed", 1), s.case("wrong", 2)]));
}

#[test]
fn an_infra_error_on_a_host_is_retried_once_on_another_host() {
    use support::remote_hosts::{Has, OwnHost};
    // A host without the worker image: a run placed there is an infra_error that
    // the orchestrator does not re-queue by itself (the host answers).
    let bare = OwnHost::start(Has::Nothing);
    let host = &bare.0;
    let s = EvalSuite::in_dir(host.shared.as_ref().unwrap(), "eval-retry", &["fixed"], 60);
    let case = s.case("fixed", 1);
    // `bare` is named first: on a tie it gets the attempt.
    let out = s
        .run(&[
            "--host",
            &format!("bare={}:1", host.url),
            "--host",
            "here=unix:///var/run/docker.sock:1",
        ])
        .output();
    out.code(0);
    let results = s.results();
    assert_eq!(results.len(), 2, "{results:#?}\n{}", out.stderr);
    let (first, retry) = (&results[0], &results[1]);
    assert_eq!(
        (&first["outcome"], &first["host"]),
        (&"infra_error".into(), &"bare".into()),
        "{first:#}"
    );
    assert!(
        first["reason"]
            .as_str()
            .unwrap()
            .contains("is not available"),
        "{first:#}"
    );
    assert_eq!(
        (&retry["outcome"], &retry["host"]),
        (&"resolved".into(), &"here".into()),
        "{retry:#}\n{}",
        out.stderr
    );
    let config = &s.summary()["configs"][0];
    assert_eq!(
        (
            config["resolved"].as_u64(),
            config["total"].as_u64(),
            config["infra_retried"].as_u64()
        ),
        (Some(1), Some(1), Some(1)),
        "{config}"
    );
    nothing_left(&s.task_ids(&[case]));
}

/// `--config` picks the configs that run, `--tries` makes pass@k; a case's repository
/// may be a git bundle; the grading sandbox has no network (the fixed case's grader
/// passes only where the sole interface is loopback); every result line carries
/// the run's figures; `--rerun all` runs everything again and the summary comes
/// out the same apart from times.
#[test]
fn tries_give_pass_at_k_and_a_second_evaluation_the_same_summary() {
    let s = EvalSuite::new("eval-tries", &["fixed", "wrong"]);
    let (fixed, wrong) = (s.case("fixed", 1), s.case("wrong", 2));
    let mut suite = std::fs::read_to_string(&s.suite).unwrap();
    // The calc project (the fixed case's) as a bundle.
    let bundle = s.scratch.join("projects/calc.bundle");
    git(
        &s.scratch.join("projects/calc"),
        &["bundle", "create", bundle.to_str().unwrap(), "--all"],
    );
    assert!(suite.contains("repo: projects/calc\n"), "{suite}");
    suite = suite.replace("repo: projects/calc\n", "repo: projects/calc.bundle\n");
    // A second config, never run here.
    let scripted = suite
        .split_once("configs:\n")
        .map(|(_, configs)| configs.to_string())
        .unwrap();
    suite.push_str(&scripted.replace("name: scripted", "name: other"));
    // The wrong case's grader sleeps once its check fails: past its timeout, unresolved.
    let timeout = format!("graders/{wrong}, command: sh grade.sh, timeout_sec: 30");
    assert!(suite.contains(&timeout), "{suite}");
    suite = suite.replace(
        &timeout,
        &timeout.replace("timeout_sec: 30", "timeout_sec: 3"),
    );
    let grader = format!("graders/{wrong}/grade.sh");
    let check = std::fs::read_to_string(s.scratch.join(&grader)).unwrap();
    s.scratch.file(
        &grader,
        format!(
            "{{ {}; }} || sleep 600\n",
            check.trim_end().replace('\n', "\n  ")
        ),
    );
    std::fs::write(&s.suite, &suite).unwrap();
    let grader = format!("graders/{fixed}/grade.sh");
    let check = std::fs::read_to_string(s.scratch.join(&grader)).unwrap();
    s.scratch.file(
        &grader,
        format!("[ \"$(ls /sys/class/net)\" = lo ] || {{ echo \"network: $(ls /sys/class/net)\"; exit 1; }}\n{check}"),
    );
    let out = s
        .run(&["--config", "scripted", "--tries", "2", "--jobs", "2"])
        .output();
    out.code(0)
        .stderr_has("4 run(s) to do")
        .stdout_has("PASS@2")
        .stdout_has("scripted  2/4       50.0%   15-85%  50.0%")
        .stdout_has("other     0/0       n/a     n/a     n/a");
    let results = s.results();
    assert_eq!(results.len(), 4, "{results:#?}\n{}", out.stderr);
    for line in &results {
        let (case, k) = (
            line["case"].as_str().unwrap(),
            line["try"].as_u64().unwrap(),
        );
        if case == fixed {
            assert_eq!(line["outcome"], "resolved", "{line:#}");
        } else {
            assert_eq!(line["outcome"], "unresolved", "{line:#}");
            assert_eq!(line["reason"], "the grader timed out after 3 s", "{line:#}");
            assert_eq!(line["grade"]["timed_out"], true, "{line:#}");
        }
        assert_eq!(line["config"], "scripted", "{line:#}");
        assert_eq!(
            line["branch"],
            format!("agent-runner/eval-{case}-scripted-{k}"),
            "{line:#}"
        );
        assert_eq!(line["loops"], 1, "{line:#}");
        assert!(line["tokens"].as_u64().unwrap() > 0, "{line:#}");
        assert!(line["wall_ms"].as_u64().unwrap() > 0, "{line:#}");
        // No price for the fake model: the cost is unknown, not 0.
        assert_eq!(line["cost_usd"], serde_json::Value::Null, "{line:#}");
    }
    let tries: std::collections::BTreeSet<(String, u64)> = results
        .iter()
        .map(|l| {
            (
                l["case"].as_str().unwrap().to_string(),
                l["try"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(tries.len(), 4, "each case's two tries: {tries:?}");
    // The suite as it ran is kept beside the results, for reproducing it.
    assert_eq!(
        std::fs::read_to_string(s.dir().join("suite.yaml")).unwrap(),
        suite
    );
    let summary = s.summary();
    assert_eq!(summary["tries"], 2);
    assert_eq!(summary["agent_runner"], env!("CARGO_PKG_VERSION"));
    let config = &summary["configs"][0];
    assert_eq!(config["name"], "scripted");
    assert_eq!(
        (config["resolved"].as_u64(), config["total"].as_u64()),
        (Some(2), Some(4)),
        "{config:#}"
    );
    // fixed: 2 of 2 tries, wrong: 0 of 2. pass@1 = (1 + 0) / 2, pass@2 = (1 + 0) / 2.
    assert_eq!(config["pass_at_1"], 0.5, "{config:#}");
    assert_eq!(config["pass_at_k"]["2"], 0.5, "{config:#}");
    // Wilson at 95 % for 2 of 4: 0.5 ± 1.96·sqrt(0.0625 + 0.0601)/1.9604 = 0.150..0.850.
    let interval = config["interval_95"].as_array().unwrap();
    assert!(
        (interval[0].as_f64().unwrap() - 0.1500).abs() < 1e-3,
        "{config:#}"
    );
    assert!(
        (interval[1].as_f64().unwrap() - 0.8500).abs() < 1e-3,
        "{config:#}"
    );
    assert!(
        config["agents"]["worker_pinned_version"].is_string(),
        "{config:#}"
    );
    assert_eq!(config["agents"]["meta_kind"], "scripted", "{config:#}");
    let other = &summary["configs"][1];
    assert_eq!(
        (other["pending"].as_u64(), other["total"].as_u64()),
        (Some(4), Some(0)),
        "{other:#}"
    );
    assert_eq!(other["pass_at_1"], serde_json::Value::Null, "{other:#}");
    // Nothing of the config not asked for ran.
    let tasks = std::fs::read_dir(s.home.join("workspaces"))
        .unwrap()
        .flatten()
        .flat_map(|w| std::fs::read_dir(w.path().join("tasks")).unwrap().flatten())
        .map(|t| t.file_name().to_string_lossy().to_string())
        .collect::<Vec<_>>();
    assert!(!tasks.iter().any(|t| t.contains("-other-")), "{tasks:?}");
    // No infra_error to run again.
    s.run(&[
        "--config",
        "scripted",
        "--tries",
        "2",
        "--rerun",
        "infra_error",
    ])
    .output()
    .code(0)
    .stderr_has("0 run(s) to do");
    // Every run again: new attempts, new lines, the same summary apart from times.
    let again = s
        .run(&[
            "--config", "scripted", "--tries", "2", "--jobs", "2", "--rerun", "all",
        ])
        .output();
    again.code(0).stderr_has("4 run(s) to do");
    let results = s.results();
    assert_eq!(results.len(), 8, "{results:#?}");
    let first: std::collections::BTreeSet<&str> = results[..4]
        .iter()
        .map(|l| l["attempt_id"].as_str().unwrap())
        .collect();
    assert!(
        results[4..]
            .iter()
            .all(|l| !first.contains(l["attempt_id"].as_str().unwrap())),
        "every run was attempted again: {results:#?}"
    );
    assert_eq!(without_times(s.summary()), without_times(summary));
    let mut all = Vec::new();
    for case in [&fixed, &wrong] {
        for k in 1..=2 {
            all.push(format!("eval-{case}-scripted-{k}"));
        }
    }
    nothing_left(&all);
}

/// A grading that cannot run (the graders' image has no shell: the engine cannot
/// start its sandbox) is an infra_error, retried once and no more; when every run
/// is one, the rate is n/a, not 0 %.
#[test]
fn every_run_an_infra_error_is_retried_once_and_gives_no_rate() {
    let s = EvalSuite::new("eval-all-infra", &["fixed", "wrong"]);
    // An image with one file and no shell, made here (no registry).
    let image = format!("agent-runner-test-noshell:{}", support::short_id());
    s.scratch.file("noshell/empty.txt", "");
    let tar = s.scratch.join("noshell.tar");
    support::Run::program(
        "tar",
        &[
            "-cf",
            tar.to_str().unwrap(),
            "-C",
            s.scratch.join("noshell").to_str().unwrap(),
            "empty.txt",
        ],
    )
    .output()
    .code(0);
    support::docker::docker_ok(&["import", tar.to_str().unwrap(), &image]);
    let suite = std::fs::read_to_string(&s.suite).unwrap();
    let top = format!("\nimage: {}\n", support::docker::TEST_IMAGE);
    assert!(suite.contains(&top), "{suite}");
    std::fs::write(
        &s.suite,
        suite.replace(&top, &format!("\nimage: {image}\n")),
    )
    .unwrap();
    let out = s.run(&["--jobs", "2"]).output();
    let first = s.results().len();
    // `--rerun infra_error` runs them again (their retry spent: once each).
    let rerun = s.run(&["--jobs", "2", "--rerun", "infra_error"]).output();
    let _ = support::docker::docker(&["rmi", "-f", &image]);
    rerun.code(0).stderr_has("2 run(s) to do");
    assert_eq!(s.results().len(), 6, "{:#?}\n{}", s.results(), rerun.stderr);
    out.code(0)
        .stderr_has("2 run(s) ended in infra_error: each retried once")
        .stdout_has("scripted  0/0       n/a     n/a     0             2 (+2 retried)");
    let results = s.results();
    // Each run: its first grading and the one retry, both infra_error; then the
    // rerun's.
    assert_eq!(first, 4, "{results:#?}\n{}", out.stderr);
    for line in &results {
        assert_eq!(line["outcome"], "infra_error", "{line:#}");
        assert!(
            line["reason"]
                .as_str()
                .unwrap()
                .starts_with("grading: cannot start the grader's sandbox"),
            "{line:#}"
        );
    }
    let config = &s.summary()["configs"][0];
    assert_eq!(
        (
            config["total"].as_u64(),
            config["pending"].as_u64(),
            config["infra_retried"].as_u64(),
            config["outcomes"]["infra_error"].as_u64()
        ),
        (Some(0), Some(0), Some(4), Some(2)),
        "{config:#}"
    );
    for figure in ["pass_at_1", "interval_95", "tokens", "median_ms"] {
        assert_eq!(
            config[figure],
            serde_json::Value::Null,
            "{figure}: {config:#}"
        );
    }
    nothing_left(&s.task_ids(&[s.case("fixed", 1), s.case("wrong", 2)]));
}

/// A config's `best_of: N` makes each of its runs a best of N (SPEC §23): N tries
/// in clones of their own, judged into the one attempt that is graded; its tokens
/// are all the tries'.
#[test]
fn a_config_with_best_of_grades_the_judged_attempt_of_its_tries() {
    let s = EvalSuite::new("eval-best-of", &["fixed"]);
    let fixed = s.case("fixed", 1);
    let mut suite = std::fs::read_to_string(&s.suite).unwrap();
    let scripted = suite.split_once("configs:\n").unwrap().1.to_string();
    suite.push_str(&scripted.replace("name: scripted", "name: best2\n    best_of: 2"));
    std::fs::write(&s.suite, suite).unwrap();
    let out = s.run(&["--jobs", "3"]).output();
    out.code(0).stderr_has("2 run(s) to do");
    let results = s.results();
    assert_eq!(results.len(), 2, "{results:#?}\n{}", out.stderr);
    let line = |config: &str| {
        results
            .iter()
            .find(|l| l["config"] == config)
            .unwrap_or_else(|| panic!("no line of {config}: {results:#?}"))
            .clone()
    };
    let (single, best) = (line("scripted"), line("best2"));
    assert_eq!(single["outcome"], "resolved", "{single:#}");
    assert_eq!(best["outcome"], "resolved", "{best:#}");
    let task = format!("eval-{fixed}-best2-1");
    assert_eq!(best["branch"], format!("agent-runner/{task}"), "{best:#}");
    // The winner's branch is the run's; the other try's stays beside it.
    let tries = git(
        &s.root,
        &["branch", "--list", &format!("agent-runner/{task}-try-*")],
    );
    assert_eq!(tries.lines().count(), 1, "{tries}");
    let tokens = |l: &serde_json::Value| l["tokens"].as_u64().unwrap();
    assert!(
        tokens(&best) >= 2 * tokens(&single),
        "two tries' tokens: {best:#}\n{single:#}"
    );
    let summary = s.summary();
    let of = |name: &str| {
        summary["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(of("best2")["agents"]["best_of"], 2, "{summary:#}");
    assert_eq!(of("scripted")["agents"]["best_of"], 1, "{summary:#}");
    assert_eq!(
        (
            of("best2")["resolved"].as_u64(),
            of("best2")["total"].as_u64()
        ),
        (Some(1), Some(1)),
        "{summary:#}"
    );
    assert_eq!(of("best2")["infra_retried"], 0, "{summary:#}");
    nothing_left(&[format!("eval-{fixed}-scripted-1"), task]);
}

/// An imported SWE-bench instance grades as SWE-bench does: pytest on FAIL_TO_PASS
/// and PASS_TO_PASS over the test patch's files fails on the base and passes with
/// the instance's reference patch (`eval validate`, in an image with `python`).
#[test]
#[ignore = "needs sandbox-image"]
fn an_imported_swebench_instance_fails_on_its_base_and_passes_with_its_patch() {
    support::prerequisite::needs!(SandboxImage);
    let python = support::docker::image_with_python();
    // SWE-bench's environments call it `python`; Debian's is `python3`.
    let image = format!("{python}-python");
    if !support::docker::docker(&["image", "inspect", &image]).0 {
        let context = support::Scratch::new("eval-python-image");
        context.file(
            "Dockerfile",
            format!("FROM {python}\nRUN ln -s /usr/bin/python3 /usr/local/bin/python\n"),
        );
        support::Run::program("docker", &["build", "-q", "-t", &image])
            .arg(context.path.to_str().unwrap())
            .env("DOCKER_BUILDKIT", "0")
            .output()
            .code(0);
    }
    let dir = support::Scratch::new("eval-import-graded");
    let repo = dir.join("repos/acme__calc");
    support::git_repo(&repo, "calc.py", "def add(a, b):\n    return a - b\n");
    dir.file(
        "repos/acme__calc/tests/test_calc.py",
        "from calc import add\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
    );
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "tests"]);
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let test_patch = "--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n@@ -4,2 +4,6 @@ from calc import add\n def test_zero():\n     assert add(0, 0) == 0\n+\n+\n+def test_add():\n+    assert add(2, 3) == 5\n";
    let fix = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n";
    let instance = serde_json::json!({
        "instance_id": "acme__calc-1", "repo": "acme/calc", "base_commit": base,
        "problem_statement": "add() subtracts.", "test_patch": test_patch, "patch": fix,
        "FAIL_TO_PASS": "[\"tests/test_calc.py::test_add\"]",
        "PASS_TO_PASS": "[\"tests/test_calc.py::test_zero\"]"
    });
    dir.file("instances.jsonl", format!("{instance}\n"));
    support::Run::new(&[
        "eval",
        "import",
        "swebench",
        "instances.jsonl",
        "--repos",
        "repos",
        "-o",
        "suite",
        "--image",
        &image,
    ])
    .cwd(&dir.path)
    .output()
    .code(0)
    .stdout_has("1 case(s) imported, 0 skipped");
    // The reference patch as the case's solution.
    dir.file("suite/solution.patch", fix);
    let path = dir.join("suite/suite.yaml");
    let mut suite: serde_json::Value =
        serde_norway::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    suite["cases"][0]["solution"] = "solution.patch".into();
    std::fs::write(&path, serde_norway::to_string(&suite).unwrap()).unwrap();
    let out = support::Run::new(&["eval", "validate", path.to_str().unwrap()])
        .env("AGENT_RUNNER_HOME", dir.join("home"))
        .deadline(Duration::from_secs(400))
        .output();
    out.code(0);
    assert_eq!(
        out.stdout, "case acme__calc-1: ok (fails on the base, passes with the solution)\n",
        "{}",
        out.stderr
    );
    nothing_left(&["validate-acme__calc-1".to_string()]);
}
