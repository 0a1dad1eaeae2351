//! Commands in the sandbox started by its main process, not the engine's exec
//! (`backend/main_exec.rs`, `helper/exec.c`): what such a command gets, and what no
//! longer travels through the engine.

use crate::support;

use std::sync::{Arc, Mutex};

use support::Scratch;
use support::docker::{TEST_IMAGE, docker_ok};
use support::fake_openai::FakeOpenAi;
use support::task::*;

/// What a test command writes about itself and its envelope (found by its
/// command line) into `started.txt` of the repository.
const PROBE: &str = "for c in /proc/[0-9]*/cmdline; do grep -q agent-runner-envelope $c && e=${c%/cmdline}; done; { \
     echo envelope-parent=$(grep PPid $e/status | cut -f2); \
     echo envelope-fds=$(ls $e/fd | sort -n | tr \"\\n\" \" \"); \
     ls -l $e/fd | grep -c socket: | sed s/^/envelope-sockets=/; \
     grep -E \"^Sig(Ign|Blk)\" $e/status | tr -d \"\\t\"; \
     echo umask=$(umask); echo pwd=$(pwd); env | grep -v ^HOSTNAME= | sort | sed s/^/env:/; } > started.txt";

/// What `PROBE` said in a task run with `AGENT_RUNNER_EXEC=exec`, line by line.
fn probed(exec: &str) -> Vec<String> {
    let dir = Scratch::new("main-exec-probe");
    let id = task_id("main-exec-probe");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: nothing to do"),
        assess(&["AC-1"], "done"),
    ]);
    runner(v1_task(&id, &dir.path, &server).test(PROBE))
        .env("AGENT_RUNNER_EXEC", exec)
        .output()
        .code(0);
    assert_no_container(&id);
    let said = std::fs::read_to_string(dir.join("started.txt")).unwrap();
    said.lines().map(str::to_string).collect()
}

/// The envelope of a test run started by the sandbox's main process is its
/// child, holds nothing but its stdio, and starts with what the engine's exec
/// gives it: the same descriptors, signals ignored and blocked, umask, directory
/// and variables (the image's among them), and no socket. Through the engine's exec its parent is
/// outside the sandbox's PID namespace (0).
#[test]
fn a_test_run_is_started_by_the_main_process_with_what_the_engine_would_give_it() {
    let (main, engine) = (probed("main"), probed("engine"));
    let parent = |said: &[String]| {
        said.iter()
            .find(|l| l.starts_with("envelope-parent="))
            .cloned()
    };
    assert_eq!(
        parent(&main).as_deref(),
        Some("envelope-parent=1"),
        "{main:#?}"
    );
    assert_eq!(
        parent(&engine).as_deref(),
        Some("envelope-parent=0"),
        "{engine:#?}"
    );
    let rest = |said: &[String]| -> Vec<String> {
        said.iter()
            .filter(|l| !l.starts_with("envelope-parent="))
            .cloned()
            .collect()
    };
    assert_eq!(rest(&main), rest(&engine));
    assert!(
        main.contains(&"envelope-sockets=0".to_string()),
        "{main:#?}"
    );
    let image_env = docker_ok(&["image", "inspect", "-f", "{{json .Config.Env}}", TEST_IMAGE]);
    let image_env: Vec<String> = serde_json::from_str(image_env.trim()).unwrap();
    for var in image_env {
        assert!(main.contains(&format!("env:{var}")), "{var}: {main:#?}");
    }
}

/// Through the main process, an exec's stdin (the envelope's nonce, the prompt)
/// and its variables never travel through the engine's API: a tap on the
/// daemon's socket overhears no nonce. (`AGENT_RUNNER_EXEC=engine`, the engine's
/// exec as before, shows the tap works.)
#[test]
fn no_nonce_of_an_exec_travels_through_the_engine() {
    for (exec, overheard) in [("main", false), ("engine", true)] {
        let dir = Scratch::new("main-exec-tap");
        let id = task_id("main-exec-tap");
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let into = seen.clone();
        let proxy = support::docker_proxy::DockerProxy::start_tapped(
            &dir.join("docker.sock"),
            Arc::new(move |bytes: &[u8]| {
                into.lock()
                    .unwrap()
                    .extend(super::boundary::nonces_in(bytes));
            }),
        );
        let server = FakeOpenAi::start(vec![
            plan(&["AC-1"]),
            run_worker("@say: nothing to do"),
            assess(&["AC-1"], "done"),
        ]);
        runner(v1_task(&id, &dir.path, &server))
            .env("DOCKER_HOST", format!("unix://{}", proxy.path.display()))
            .env("AGENT_RUNNER_EXEC", exec)
            .output()
            .code(0);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(!seen.is_empty(), overheard, "{exec}: {seen:?}");
        assert_no_container(&id);
    }
}
