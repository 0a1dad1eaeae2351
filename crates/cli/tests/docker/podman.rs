//! podman as the docker CLI (SPEC §24): agent-runner with a `docker` on PATH that is
//! podman (`support::podman`), the test worker image in podman's store. A task with
//! the egress proxy, the start-up sweep of an orphan podman holds, a sweep that
//! cannot list, `--init` without catatonit (doctor names the fix; a run needs none), and the
//! pipeline with its bundler.

use crate::support;

use support::pipeline::{BUILDER_REPLY, Pipeline, git, meta_script};
use support::podman::Podman;
use support::prerequisite::needs;
use support::task::task_id;
use support::task_yaml::{TaskYaml, one_run};
use support::{Run, Scratch, docker::TEST_IMAGE};

/// The hello task: scripted Meta, one worker run writing hello.txt, the default
/// network (the egress proxy and its bridge).
fn hello_task(dir: &Scratch, id: &str) -> TaskYaml {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let script = one_run(
        dir,
        "codex-cli",
        "Write hello.txt.\n@run: echo hello > hello.txt\n@say: wrote hello.txt",
        &["AC-1"],
    );
    TaskYaml::hello(id, &repo)
        .scripted(script, 1)
        .image(TEST_IMAGE)
}

fn run_under(podman: &Podman, yaml: &TaskYaml, home: &Scratch) -> support::Outcome {
    Run::new(&["run"])
        .env("PATH", podman.path())
        .env("HOME", &home.path)
        .stdin(yaml.to_string())
        .output()
}

#[test]
#[ignore = "needs podman"]
fn a_task_completes_under_podman_and_the_sweep_removes_its_orphan() {
    needs!(Podman);
    let podman = Podman::new();
    let dir = Scratch::new("podman-task");
    let id = task_id("podman");
    // An orphan: labelled by an agent-runner that is gone (a PID that has exited).
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = gone.id();
    gone.wait().unwrap();
    let me = agent_runner_core::owner::Owner::this_process();
    let dead = agent_runner_core::owner::Owner {
        pid: dead_pid,
        ..me
    };
    let orphan_task = format!("{id}-orphan");
    let mut args: Vec<String> = ["run", "-d", "--init", "--network", "none", "--label"]
        .map(String::from)
        .into();
    args.push(format!("agent-runner.task={orphan_task}"));
    for (label, value) in agent_runner_sandbox::backend::sweep::owner_labels(&dead) {
        args.extend(["--label".into(), format!("{label}={value}")]);
    }
    args.extend([TEST_IMAGE.to_string(), "sleep".into(), "300".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, _, err) = podman.docker(&args);
    assert!(ok, "{err}");
    assert_eq!(
        podman
            .containers_labelled("agent-runner.task", &orphan_task)
            .len(),
        1
    );

    let out = run_under(&podman, &hello_task(&dir, &id), &dir);
    out.code(0)
        .stdout_has("COMPLETE")
        .stderr_has("worker run 1/1: completed")
        .stderr_has("its agent-runner is gone");
    assert!(!out.stderr.contains("sweep"), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.join("repo/hello.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        podman.containers_labelled("agent-runner.task", &orphan_task),
        Vec::<String>::new(),
        "the orphan was swept"
    );
    assert_eq!(
        podman.containers_labelled("agent-runner.task", &id),
        Vec::<String>::new(),
        "the task's container is gone"
    );
}

#[test]
#[ignore = "needs podman"]
fn a_sweep_that_cannot_list_is_an_error_in_the_log() {
    needs!(Podman);
    // podman whose `ps` fails as it did on the Docker-only `{{.Label "…"}}`.
    let podman = Podman::with(
        "[containers]\ndefault_ulimits = [\"nofile=16384:16384\", \"nproc=20000:20000\"]\n",
        "if [ \"$1\" = ps ]; then echo 'Error: template: ps:1: function \"Label\" not defined' >&2; exit 125; fi\n",
    );
    let dir = Scratch::new("podman-nosweep");
    let id = task_id("nosweep");
    let out = run_under(&podman, &hello_task(&dir, &id), &dir);
    out.code(0).stdout_has("COMPLETE").stderr_has(
        "start-up sweep of orphaned containers and volumes did not run: `docker ps -a` failed: Error: template: ps:1: function \"Label\" not defined",
    );
}

#[test]
#[ignore = "needs podman"]
fn without_catatonit_doctor_names_the_fix_and_a_run_needs_none() {
    needs!(Podman);
    let podman = Podman::without_catatonit();
    let dir = Scratch::new("podman-init");
    let id = task_id("noinit");
    let yaml = hello_task(&dir, &id);
    let doctor = Run::new(&["doctor"])
        .env("PATH", podman.path())
        .env("HOME", &dir.path)
        .stdin(yaml.to_string())
        .output();
    doctor.code(1);
    let line = doctor
        .stdout
        .lines()
        .find(|l| l.starts_with("FAIL  image "))
        .unwrap_or_else(|| panic!("no FAIL line for the image: {}", doctor.stdout));
    assert!(
        line.contains("--init") && line.contains("apt-get install catatonit"),
        "{line}"
    );
    // `run` on this machine needs no init of podman's: agent-runner's bridge is the
    // sandbox's PID 1 and proves locality as it starts (no probe container).
    let out = run_under(&podman, &yaml, &dir);
    out.code(0).stdout_has("COMPLETE");
    assert!(!out.stderr.contains("catatonit"), "{}", out.stderr);
    assert_eq!(
        podman.containers_labelled("agent-runner.task", &id),
        Vec::<String>::new()
    );
}

#[test]
#[ignore = "needs podman"]
fn the_pipeline_brings_two_branches_back_under_podman() {
    needs!(Podman);
    let podman = Podman::new();
    let p = Pipeline::new("podman-pipeline", true);
    p.init(
        BUILDER_REPLY,
        &meta_script("@run: cat /proc/sys/kernel/random/uuid > shared.txt\n@say: wrote shared.txt"),
        "",
    );
    let ids: Vec<String> = (1..=2).map(|n| task_id(&format!("podman{n}"))).collect();
    for id in &ids {
        p.new_task(id, "Write shared.txt");
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    p.run_tasks(&refs);
    let out = p
        .orchestrate_once(&["--jobs", "2"])
        .env("PATH", podman.path())
        .output();
    out.code(0);
    for id in &ids {
        let attempt = &p.attempts(id)[0];
        assert_eq!(attempt["status"], "succeeded", "{attempt}\n{}", out.stderr);
        let content = git(&p.root, &["show", &format!("agent-runner/{id}:shared.txt")]);
        assert_eq!(content.trim().len(), 36, "a uuid: {content}");
        assert_eq!(
            podman.containers_labelled("agent-runner.task", id),
            Vec::<String>::new()
        );
    }
    assert!(!p.root.join("shared.txt").exists(), "the root is untouched");
}

/// Issue 41 under podman, where catatonit was PID 1: the worker can neither trace
/// nor write PID 1 and the carrier (the egress bridge here), nor make them run its
/// program, nor leave a process that outlives its run.
#[test]
#[ignore = "needs podman"]
fn pid_1_and_the_carrier_cannot_be_taken_over_under_podman() {
    use crate::docker::boundary::{TAKEOVER, leftover_check, leftover_checks, log_of, pid1_repo};
    needs!(Podman);
    let podman = Podman::new();
    let dir = Scratch::new("podman-pid1");
    let repo = pid1_repo(&dir);
    let id = task_id("pid1");
    let script = one_run(
        &dir,
        "codex-cli",
        &format!(
            "Attack.\n@run: for t in 1 carrier; do ./pid1-probe ptrace $t; ./pid1-probe mem $t; done\n\
             @run: {TAKEOVER}\n@run: ./pid1-probe linger /workspace/project/linger.log; sleep 1\n@say: tried"
        ),
        &["AC-1"],
    );
    let yaml = TaskYaml::new(&id, &repo, "Attack PID 1.")
        .test(leftover_check("leftover.log linger.log").as_str())
        .scripted(script, 1)
        .image(TEST_IMAGE);
    let out = run_under(&podman, &yaml, &dir);
    out.code(0);
    let run = log_of(&repo, &id, "run-1.log");
    for what in ["ptrace", "mem", "hijack"] {
        for target in ["1", "carrier"] {
            let line = format!("pid1-probe {what} {target}: refused");
            assert!(run.contains(&line), "{line}:\n{run}");
        }
    }
    let test = log_of(&repo, &id, "test-1.log");
    let checks = leftover_checks(&test);
    assert_eq!(checks.len(), 1, "{test}");
    assert_eq!(checks[0].0, checks[0].1, "alive in the test run:\n{test}");
    assert_eq!(
        podman.containers_labelled("agent-runner.task", &id),
        Vec::<String>::new()
    );
}
