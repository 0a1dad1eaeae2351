//! The Docker sandbox against a real daemon and the test worker image.

use crate::support;

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;
use agent_runner_core::secret::{Redactor, Secret};
use agent_runner_sandbox::backend::sweep::owner_labels;
use agent_runner_sandbox::backend::sweep_orphans;
use agent_runner_sandbox::worker::sandbox::{ContainerSandbox, SandboxConfig};
use agent_runner_sandbox::worker::{Sandbox, SandboxError};
use agent_runner_settings::agent::RunOutcome;
use agent_runner_settings::task::{
    EnvValue, Login, Network, TestSpec, WorkerEnv, WorkerLimits, WorkerSettings,
};
use support::Scratch;
use support::docker::{TEST_IMAGE, containers_labelled, docker, docker_ok};

fn settings() -> WorkerSettings {
    WorkerSettings {
        keep_untracked: false,
        transport: None,
        kind: agent_runner_settings::agent::default_kind(),
        docker_image: TEST_IMAGE.into(),
        agent_from: Default::default(),
        max_run_time: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(60),
        model: None,
        extra_args: vec![],
        base_url: None,
        network: Network::None,
        allow: Default::default(),
        env: vec![],
        limits: WorkerLimits::default(),
        caches: vec![],
        mcp_servers: vec![],
        runtime: None,
    }
}

fn config(repo: &Scratch, task_id: &str, worker: WorkerSettings) -> SandboxConfig {
    let secrets: Vec<Secret> = worker
        .env
        .iter()
        .filter_map(|e| match &e.value {
            EnvValue::FromHost { value, .. } => Some(value.clone()),
            EnvValue::Literal(_) => None,
        })
        .collect();
    let private = agent_runner_core::private_dir::open(&repo.path).unwrap();
    let logs = private.subdir("logs").unwrap().subdir(task_id).unwrap();
    SandboxConfig {
        task_id: task_id.into(),
        repo: repo.path.clone(),
        private_dir: private.path().to_path_buf(),
        logs,
        worker,
        login: Login::None,
        redactor: Redactor::new(&secrets),
        interrupt: Interrupt::never(),
        events: agent_runner_settings::events::Events::none(),
        session_dir: None,
        resumed: false,
        deadline: agent_runner_core::deadline::Deadline::none(),
    }
}

fn task_id(name: &str) -> String {
    format!("sandbox-{name}-{}", support::short_id())
}

#[test]
fn worker_creates_files_in_the_repo_owned_by_the_caller() {
    let repo = Scratch::new("sandbox-files");
    let id = task_id("files");
    let mut sandbox = ContainerSandbox::new(config(&repo, &id, settings()));
    let run = sandbox
        .run_worker(1, "Create hello.txt.\n@run: echo hello > hello.txt && mkdir -p sub && touch sub/x\n@say: Created hello.txt\n")
        .unwrap();
    assert_eq!(run.outcome, RunOutcome::Completed, "{run:?}");
    assert_eq!(run.summary, "Created hello.txt");
    assert_eq!(run.exit_code, Some(0));
    assert_eq!(run.transcript.commands.len(), 1);
    assert_eq!(run.transcript.commands[0].exit_code, Some(0));
    assert_eq!(
        std::fs::read_to_string(repo.join("hello.txt")).unwrap(),
        "hello\n"
    );
    let me = std::fs::metadata(&repo.path).unwrap();
    for path in ["hello.txt", "sub", "sub/x"] {
        let meta = std::fs::metadata(repo.join(path)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (me.uid(), me.gid()), "{path}");
    }
    let log = std::fs::read_to_string(&run.log_path).unwrap();
    assert!(log.contains("\"type\":\"turn.completed\""), "{log}");
    assert_eq!(run.output_bytes as usize, log.len());
    assert_eq!(containers_labelled("agent-runner.task", &id).len(), 1);
    assert!(sandbox.shutdown().removed_in.is_some());
    assert!(containers_labelled("agent-runner.task", &id).is_empty());
}

#[test]
fn fake_codex_reproduces_every_outcome_in_a_container() {
    let repo = Scratch::new("sandbox-classes");
    let id = task_id("classes");
    let mut worker = settings();
    worker.max_run_time = Duration::from_secs(3);
    worker.idle_timeout = Duration::from_secs(2);
    let mut sandbox = ContainerSandbox::new(config(&repo, &id, worker));
    let cases: &[(&str, RunOutcome, &str)] = &[
        (
            "@run: true\n@say: all good\n",
            RunOutcome::Completed,
            "all good",
        ),
        (
            "@run: echo bad >&2; exit 3\n@say: The command failed with exit code 3\n",
            RunOutcome::Completed,
            "The command failed with exit code 3",
        ),
        (
            "@error: Reconnecting... 1/5\n@fail: Quota exceeded.\n",
            RunOutcome::Failed,
            "Quota exceeded.",
        ),
        (
            "@startup-error: Error loading config.toml: bad\n",
            RunOutcome::Failed,
            "Error loading config.toml: bad",
        ),
        (
            "@say: half way\n@crash\n",
            RunOutcome::Crashed,
            "codex exited 0 before finishing its turn.",
        ),
        (
            "@say: started\n@sleep: 30\n",
            RunOutcome::Stalled,
            "Stalled: no output for 2 s (idle_timeout_sec); the worker was stopped. Last agent message: started",
        ),
    ];
    for (n, (prompt, outcome, summary)) in cases.iter().enumerate() {
        let run = sandbox.run_worker(n as u32 + 1, prompt).unwrap();
        assert_eq!(
            (run.outcome, run.summary.as_str()),
            (*outcome, *summary),
            "prompt {prompt:?}"
        );
    }
    // Wall clock: output keeps coming, so only max_run_time can end it.
    let started = Instant::now();
    let run = sandbox.run_worker(9, "@run: true\n@sleep: 1\n@run: true\n@sleep: 1\n@run: true\n@sleep: 1\n@run: true\n@sleep: 1\n@run: true\n@sleep: 30\n").unwrap();
    assert_eq!(run.outcome, RunOutcome::TimedOut, "{}", run.summary);
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        run.leftovers.map(|l| l.left),
        Some(0),
        "{:?}",
        run.leftovers
    );
    let name = sandbox.container_name().unwrap().to_string();
    let ps = docker_ok(&["exec", &name, "ps", "-o", "pid,args"]);
    assert!(
        !ps.contains("codex exec") && !ps.contains("sleep 30"),
        "worker still running:\n{ps}"
    );
    sandbox.shutdown();
}

#[test]
fn a_process_ignoring_sigterm_is_killed_inside_the_container() {
    let repo = Scratch::new("sandbox-kill");
    let id = task_id("kill");
    let mut worker = settings();
    worker.idle_timeout = Duration::from_secs(1);
    let mut sandbox = ContainerSandbox::new(config(&repo, &id, worker));
    let started = Instant::now();
    let run = sandbox
        .run_worker(1, "@run: trap '' TERM; sleep 60 & sleep 60\n")
        .unwrap();
    assert_eq!(run.outcome, RunOutcome::Stalled);
    assert_eq!(
        run.leftovers.map(|l| l.left),
        Some(0),
        "{:?}",
        run.leftovers
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let ps = docker_ok(&[
        "exec",
        sandbox.container_name().unwrap(),
        "ps",
        "-o",
        "args",
    ]);
    assert!(!ps.contains("sleep 60"), "{ps}");
    // The sandbox still works after a stopped run.
    let test = TestSpec {
        command: "echo ok".into(),
        cwd: String::new(),
        timeout: Duration::from_secs(10),
    };
    assert!(sandbox.run_test(1, &test).unwrap().passed());
}

#[test]
fn secrets_reach_the_worker_by_name_only() {
    let repo = Scratch::new("sandbox-secrets");
    let id = task_id("secrets");
    let sentinel = format!("sentinel-{}-value", support::short_id());
    let mut worker = settings();
    worker.env = vec![
        WorkerEnv {
            name: "MY_SECRET".into(),
            value: EnvValue::FromHost {
                var: "HOST_VAR".into(),
                value: Secret::new(sentinel.clone()),
            },
        },
        WorkerEnv {
            name: "PLAIN".into(),
            value: EnvValue::Literal("plain-value".into()),
        },
    ];
    let mut sandbox = ContainerSandbox::new(config(&repo, &id, worker));
    let handle = std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            sandbox
                .run_worker(1, "@run: test \"$MY_SECRET\" = \"$(cat /workspace/project/expected)\" && test \"$PLAIN\" = plain-value && echo same\n@run: echo \"$MY_SECRET\"\n@sleep: 3\n@say: done\n")
                .unwrap()
        });
        std::fs::write(repo.join("expected"), &sentinel).unwrap();
        // While the worker runs, no process on this host shows the value in its argv.
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            for entry in std::fs::read_dir("/proc").unwrap().flatten() {
                if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
                    assert!(
                        !String::from_utf8_lossy(&cmdline).contains(&sentinel),
                        "secret in argv of pid {:?}",
                        entry.file_name()
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        worker.join().unwrap()
    });
    let run = handle;
    assert_eq!(run.outcome, RunOutcome::Completed, "{run:?}");
    assert_eq!(
        run.transcript.commands[0].exit_code,
        Some(0),
        "the worker saw the value: {run:?}"
    );
    let name = sandbox.container_name().unwrap().to_string();
    let (ok, inspect, _) = docker(&["inspect", &name]);
    assert!(ok);
    assert!(!inspect.contains(&sentinel), "secret in docker inspect");
    let log = std::fs::read_to_string(&run.log_path).unwrap();
    assert!(
        !log.contains(&sentinel) && log.contains("***"),
        "secret masked in the log:\n{log}"
    );
    assert!(!run.output_tail.contains(&sentinel));
}

#[test]
fn auth_json_is_linked_read_only_into_codex_home() {
    let repo = Scratch::new("sandbox-auth");
    let home = Scratch::new("sandbox-auth-home");
    let auth = home.file(".codex/auth.json", "{\"token\": \"t\"}");
    let id = task_id("auth");
    let mut cfg = config(&repo, &id, settings());
    cfg.login = Login::File {
        path: auth,
        secrets: vec![],
        modes: vec![],
    };
    let mut sandbox = ContainerSandbox::new(cfg);
    let run = sandbox
        .run_worker(1, "@run: cat \"$HOME/.codex/auth.json\"\n@run: echo x >> \"$HOME/.codex/auth.json\"\n@run: touch \"$HOME/.codex/writable\"\n@say: checked\n")
        .unwrap();
    let codes: Vec<Option<i32>> = run
        .transcript
        .commands
        .iter()
        .map(|c| c.exit_code)
        .collect();
    assert_eq!(codes, [Some(0), Some(1), Some(0)], "{run:?}");
    assert!(
        run.transcript.commands[1].output_tail.contains("Read-only"),
        "{:?}",
        run.transcript.commands[1]
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".codex/auth.json")).unwrap(),
        "{\"token\": \"t\"}"
    );
}

#[test]
fn missing_image_is_a_clear_error_and_leaves_no_container() {
    let repo = Scratch::new("sandbox-noimage");
    let id = task_id("noimage");
    let mut worker = settings();
    worker.docker_image = "agent-runner-no-such-image:latest".into();
    let mut sandbox = ContainerSandbox::new(config(&repo, &id, worker));
    match sandbox.run_worker(1, "@say: x\n") {
        Err(SandboxError::ImageMissing { image, detail, .. }) => {
            assert_eq!(image, "agent-runner-no-such-image:latest");
            assert!(detail.contains("make sandbox-image"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    assert!(containers_labelled("agent-runner.task", &id).is_empty());
    assert_eq!(sandbox.shutdown().removed_in, None);
}

#[test]
fn tests_run_in_their_directory_with_a_time_limit() {
    let repo = Scratch::new("sandbox-test");
    repo.file("sub/marker", "");
    let id = task_id("test");
    let mut sandbox = ContainerSandbox::new(config(&repo, &id, settings()));
    let spec = TestSpec {
        command: "ls marker && echo fine && exit 4".into(),
        cwd: "sub".into(),
        timeout: Duration::from_secs(10),
    };
    let run = sandbox.run_test(1, &spec).unwrap();
    assert_eq!(
        (run.exit_code, run.timed_out, run.passed()),
        (Some(4), false, false)
    );
    assert!(
        run.output_tail.contains("marker\nfine\n"),
        "{}",
        run.output_tail
    );
    assert_eq!(
        std::fs::read_to_string(&run.log_path).unwrap(),
        run.output_tail
    );
    let spec = TestSpec {
        command: "sleep 30".into(),
        cwd: String::new(),
        timeout: Duration::from_secs(1),
    };
    let started = Instant::now();
    let run = sandbox.run_test(2, &spec).unwrap();
    assert!(run.timed_out && !run.passed());
    assert!(started.elapsed() < Duration::from_secs(8));
}

#[test]
fn huge_output_streams_to_the_log_in_full() {
    let repo = Scratch::new("sandbox-huge");
    let id = task_id("huge");
    let mut sandbox = ContainerSandbox::new(config(&repo, &id, settings()));
    let bytes: u64 = 200 << 20;
    let run = sandbox
        .run_worker(1, &format!("@spew: {bytes}\n@say: spewed\n"))
        .unwrap();
    assert_eq!(run.outcome, RunOutcome::Completed);
    let size = std::fs::metadata(&run.log_path).unwrap().len();
    assert!(
        size > bytes && size == run.output_bytes,
        "log {size} bytes, received {}",
        run.output_bytes
    );
    assert!(run.output_tail.len() <= 64 * 1024 + 4);
    assert!(
        run.transcript.raw_lines > 1_000_000,
        "spew lines are kept as raw text: {}",
        run.transcript.raw_lines
    );
}

#[test]
fn sweep_removes_containers_of_provably_dead_owners_only() {
    // A pid above pid_max is never alive, and cannot be reused while the test runs.
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let me = Owner::this_process();
    let dead = Owner {
        pid: pid_max + 1,
        ..me.clone()
    };
    let id = task_id("sweep");
    let _cleanup = RemoveOnDrop(id.clone());
    let start_labelled = |suffix: &str, owner: Option<&Owner>, extra: &str| {
        let name = format!("agent-runner-{id}-{suffix}");
        let mut args: Vec<String> = ["run", "-d", "--init", "--network", "none", "--name"]
            .map(String::from)
            .into();
        args.push(name.clone());
        args.extend(["--label".into(), format!("agent-runner.task={id}")]);
        if !extra.is_empty() {
            args.extend(["--label".into(), extra.to_string()]);
        }
        for (label, value) in owner.map(owner_labels).into_iter().flatten() {
            args.extend(["--label".into(), format!("{label}={value}")]);
        }
        args.extend([TEST_IMAGE.to_string(), "sleep".into(), "300".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, _, err) = docker(&args);
        // Other tests' sandboxes sweep concurrently: an orphan may be removed
        // between `docker run`'s create and start, which is the sweep working.
        let swept_early = owner.is_some_and(Owner::is_gone) && err.contains("No such container");
        assert!(ok || swept_early, "{err}");
        name
    };
    let start = |suffix: &str, owner: Option<&Owner>| start_labelled(suffix, owner, "");
    let removed = [
        start("dead", Some(&dead)),
        start(
            "reused-pid",
            Some(&Owner {
                start_time: "1".into(),
                ..me.clone()
            }),
        ),
    ];
    let mut kept = vec![
        start("alive", Some(&me)),
        start(
            "other-host",
            Some(&Owner {
                host: "elsewhere".into(),
                ..dead.clone()
            }),
        ),
        start(
            "other-boot",
            Some(&Owner {
                boot_id: "another-boot".into(),
                ..dead.clone()
            }),
        ),
        start(
            "other-pidns",
            Some(&Owner {
                pid_namespace: "pid:[4026532999]".into(),
                ..dead.clone()
            }),
        ),
        start("unlabelled", None),
        // Docker lists labels joined by commas: a value with one must not read as
        // an expiry this live container does not have (an image's label could say
        // it).
        start_labelled("comma", Some(&me), "note=a,agent-runner.expires=1"),
    ];
    let swept = sweep_orphans();
    // A concurrent test's sweep may be removing the same orphans: wait for them to go.
    let deadline = Instant::now() + Duration::from_secs(10);
    while removed
        .iter()
        .any(|r| containers_labelled("agent-runner.task", &id).contains(r))
    {
        assert!(Instant::now() < deadline, "an orphan was not removed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut left = containers_labelled("agent-runner.task", &id);
    left.sort();
    kept.sort();
    assert_eq!(left, kept);
    assert!(swept.iter().all(|name| !kept.contains(name)), "{swept:?}");
}

/// Removes the containers labelled with this task id, even when the test fails.
struct RemoveOnDrop(String);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for name in containers_labelled("agent-runner.task", &self.0) {
            docker(&["rm", "-f", &name]);
        }
    }
}

/// A container of the test's own (`--init`, its keep-alive `sleep`, labelled with
/// `id`, half a core at most: what runs in it must not starve the suite's other
/// tests) and the keep-alive's PID.
fn kept_alive(id: &str, image: &str) -> (String, String) {
    let name = format!("agent-runner-{id}");
    let label = format!("agent-runner.task={id}");
    docker_ok(&[
        "run",
        "-d",
        "--init",
        "--network",
        "none",
        "--cpus",
        "0.5",
        "--name",
        &name,
        "--label",
        &label,
        image,
        "sh",
        "-c",
        "echo $$ > /tmp/keep; exec sleep 300",
    ]);
    let keep = docker_ok(&["exec", &name, "cat", "/tmp/keep"])
        .trim()
        .to_string();
    (name, keep)
}

/// The real envelope in container `name` by `shell`, with `env` in its environment
/// as a task's would be, and `args` (its mode, the keep-alive's PID, ...); its nonce
/// is "n0nce". It must exit 0.
fn envelope(name: &str, shell: &str, env: &[&str], args: &[&str]) -> support::Outcome {
    let script = include_str!("../../../sandbox/src/worker/envelope.sh");
    let mut exec = vec!["exec", "-i"];
    for pair in env {
        exec.extend(["-e", pair]);
    }
    exec.extend([name, shell, "-c", script, "agent-runner-envelope"]);
    exec.extend(args);
    let out = support::Run::program("docker", &exec)
        .stdin("n0nce\n")
        .output();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    out
}

/// The real envelope's stop of everything else in container `name` by `shell`, with
/// `env` in its environment as a task's would be: its record "<found> <left>" and
/// its stderr. Checked from outside (`docker top`: an exec would be a process of
/// its own), now and a moment later: PID 1 and the keep-alive only.
fn envelope_stop(name: &str, keep: &str, shell: &str, env: &[&str]) -> (String, String) {
    let out = envelope(name, shell, env, &["stop", keep]);
    let counts = out
        .stdout
        .split_once("\u{1e}n0nce stopped\n")
        .and_then(|(_, rest)| rest.lines().next())
        .unwrap_or_else(|| panic!("no stop record: {:?}", out.stdout))
        .to_string();
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(300));
        let top = docker_ok(&["top", name, "-o", "pid,comm"]);
        let processes: Vec<&str> = top.lines().skip(1).collect();
        assert_eq!(processes.len(), 2, "the stop said {counts}, yet:\n{top}");
    }
    (counts, out.stderr)
}

/// The envelope's stop of leftovers is the only one where the keep-alive is the
/// image's shell (`keepalive.sh`: a remote daemon or the copy transport without
/// the tools volume); elsewhere PID 1's quiet follows it, which is why no task test
/// sees this one alone. Chains of processes that each start a successor and end,
/// ignoring SIGTERM, were gone from every PID the sweep listed by the time it read
/// it, so the sweep said none was left while the chains went on; and a single
/// SIGKILL pass misses a successor born after it listed its parent. The stop
/// believes a sweep only when no process was born during it, and the STOP-then-KILL
/// passes end the chains. (Three chains in half a core: the old stop missed them
/// as it missed six in two cores.)
#[test]
fn the_envelopes_stop_ends_fork_chains_that_outrun_its_sweep() {
    let id = task_id("chains");
    let _cleanup = RemoveOnDrop(id.clone());
    let (name, keep) = kept_alive(&id, TEST_IMAGE);
    docker_ok(&[
        "exec",
        &name,
        "sh",
        "-c",
        "printf 'trap \"\" TERM\\nsh \"$0\" </dev/null >/dev/null 2>&1 &\\n' > /tmp/c.sh; \
         for i in 1 2 3; do sh /tmp/c.sh; done; sleep 0.5",
    ]);
    let (counts, _) = envelope_stop(&name, &keep, "sh", &[]);
    assert!(counts != "0 0", "the chains ran: {counts}");
    assert!(
        counts.ends_with(" 0"),
        "the stop says the chains outran it: {counts}"
    );
}

/// A task's variables reach the envelope's shell, and bash takes its options from
/// SHELLOPTS: with `noglob` the stop's look at `/proc/[0-9]*` saw nothing and
/// stopped nothing ("0 0"), with `xtrace` the nonce went to stderr. The envelope
/// turns such options off before anything.
#[test]
fn a_tasks_shellopts_neither_blind_the_stop_nor_show_the_nonce() {
    let id = task_id("shellopts");
    let _cleanup = RemoveOnDrop(id.clone());
    let (name, keep) = kept_alive(&id, &support::docker::image_with_python());
    for options in ["noglob", "xtrace", "noglob:xtrace:nounset:errexit"] {
        docker_ok(&[
            "exec",
            &name,
            "sh",
            "-c",
            "sleep 1000 </dev/null >/dev/null 2>&1 &",
        ]);
        let shellopts = format!("SHELLOPTS={options}");
        let (counts, stderr) = envelope_stop(&name, &keep, "bash", &[&shellopts]);
        assert_eq!(counts, "1 0", "{options}: {stderr}");
        assert!(
            !stderr.contains("n0nce"),
            "{options}: the nonce in a trace: {stderr}"
        );
    }
}

/// The snapshot's watchdog says nothing on the exec's stderr: bash (the image's
/// shell on Fedora, RHEL, Arch) reports a killed background job, which the
/// watchdog's own sleep is after every quick snapshot, and that line went into the
/// test run's output, which Meta reads.
#[test]
fn the_snapshots_watchdog_leaves_no_line_in_the_output_under_bash() {
    let id = task_id("watchdog-bash");
    let _cleanup = RemoveOnDrop(id.clone());
    let (name, keep) = kept_alive(&id, &support::docker::image_with_python());
    for _ in 0..10 {
        let out = envelope(&name, "bash", &[], &["test-before", &keep, "true"]);
        assert!(
            out.stdout.contains("\u{1e}n0nce stopped-before\n0 0\n"),
            "the snapshot's stop found nothing of the watchdog: {:?}",
            out.stdout
        );
        assert!(!out.stdout.contains("no-before"), "{:?}", out.stdout);
        assert_eq!(out.stderr, "", "the exec's stderr");
    }
}
