//! agent-runner's seccomp profile on the test cluster (SPEC §25 "The Pod", §9):
//! before `hosts prepare` the Pods run under `RuntimeDefault` and `hosts check` says
//! so; `hosts prepare` writes the profile on the node, `hosts check` proves it
//! there, and a sandbox's Pod then runs under `Localhost` with it, where a set-id
//! `chmod` is refused as in a Docker sandbox.

use std::time::Duration;

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::owner::Owner;
use agent_runner_core::process::{Capture, Limits, Stop};
use agent_runner_sandbox::backend::kubernetes::seccomp_profile::{SECCOMP_ROOT, localhost_profile};
use agent_runner_sandbox::backend::sweep::{LABEL_TASK, owner_labels};
use agent_runner_sandbox::backend::{Backend, Confinement, Exec, Main, Net, Ready, Spec};

use crate::support;
use crate::support::cluster::{NODE, backend, kubectl, product_tools_image, runner_env};
use crate::support::docker::TEST_IMAGE;
use crate::support::prerequisite::needs;

const READY: &str = "k8s-seccomp-ready ";

/// The profile gone from the node and no verdict kept: the cluster as never
/// prepared.
fn unprepared() {
    let removed = std::process::Command::new("docker")
        .args([
            "exec",
            NODE,
            "rm",
            "-rf",
            &format!("{SECCOMP_ROOT}/agent-runner"),
        ])
        .status()
        .unwrap();
    assert!(removed.success());
    let kept = agent_runner_core::cache_dir::for_kind("clusters").unwrap();
    for entry in std::fs::read_dir(&kept).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with("seccomp-") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// As the test found it, passed or not: unprepared, so no kept verdict says a
/// profile is there that is not.
struct Unprepare;

impl Drop for Unprepare {
    fn drop(&mut self) {
        unprepared();
    }
}

/// A held sandbox of the test image, its Pod's seccomp profile (type and name)
/// and what a set-id and a plain `chmod` answered in it.
fn sandbox_under_profile() -> (String, String) {
    sandbox_started().unwrap()
}

/// `sandbox_under_profile`, or why its start failed.
fn sandbox_started() -> Result<(String, String), String> {
    let name = format!(
        "agent-runner-test-seccomp-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    );
    let mut spec = Spec::new(
        TEST_IMAGE,
        Main::shell(&format!("echo {READY}$$; cat >/dev/null"), []),
    );
    spec.name = Some(name.clone());
    spec.labels = vec![(LABEL_TASK.to_string(), name.clone())];
    spec.labels
        .extend(owner_labels(&Owner::this_process()).map(|(k, v)| (k.to_string(), v)));
    spec.held = true;
    spec.ready = Some(Ready {
        prefix: READY,
        within: Duration::from_secs(120),
        interrupt: Interrupt::never(),
    });
    spec.network = Net::Isolated;
    spec.confinement = Some(Confinement { keep: &[] });
    // A backend of its own: the profile is asked once per backend.
    let _cleanup = Cleanup(name.clone());
    let started = backend().start(&spec).map_err(|e| e.to_string())?;
    let (_, profile, _) = kubectl(&[
        "get",
        "pod",
        &name,
        "-o",
        "jsonpath={.spec.containers[0].securityContext.seccompProfile.type} {.spec.containers[0].securityContext.seccompProfile.localhostProfile}",
    ]);
    let mut capture = Capture::in_memory(64 * 1024);
    started
        .instance
        .exec(
            Exec {
                workdir: Some("/tmp".into()),
                env: Vec::new(),
                command: [
                    "sh",
                    "-c",
                    ": > f; chmod 4755 f 2>/dev/null; echo setid=$?; chmod 0755 f; echo plain=$?",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect(),
                stdin: Vec::new(),
                stdin_file: None,
            },
            &Limits::wall(Duration::from_secs(60), Interrupt::never()),
            &mut capture,
            Stop::Terminate,
        )
        .unwrap();
    started.instance.remove(Duration::from_secs(5));
    Ok((
        profile.trim().to_string(),
        capture.tail().trim().to_string(),
    ))
}

/// Deletes the test's Pod when the test ends, passed or not.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        kubectl(&[
            "delete",
            "pod",
            "--wait=false",
            "--ignore-not-found",
            &self.0,
        ]);
    }
}

fn hosts(command: &str) -> support::Outcome {
    let (env, target) = runner_env();
    let mut run = support::Run::new(&["hosts", command, "--host", &format!("k8s={target}")]);
    for (name, value) in env {
        run = run.env(&name, value);
    }
    run.output()
}

#[test]
#[ignore = "needs the Kubernetes test cluster: make test-cluster"]
fn hosts_prepare_installs_the_seccomp_profile_and_pods_then_run_under_it() {
    needs!(Cluster);
    // Alone: a test beside it would keep the verdict of a profile this one removes.
    let _cluster = support::cluster::alone();
    product_tools_image();
    unprepared();
    let _unprepare = Unprepare;

    let (profile, chmods) = sandbox_under_profile();
    assert_eq!(profile, "RuntimeDefault", "before prepare");
    assert_eq!(
        chmods, "setid=0\nplain=0",
        "the runtime's default allows set-id bits"
    );
    hosts("check")
        .code(0)
        .stdout_has("seccomp: runtime-default");

    let prepared = hosts("prepare");
    prepared
        .code(0)
        .stdout_has(&format!(
            "seccomp profile {} installed on 1 node(s)",
            localhost_profile()
        ))
        .stdout_has("seccomp: localhost");
    hosts("check").code(0).stdout_has("seccomp: localhost");

    let (profile, chmods) = sandbox_under_profile();
    assert_eq!(profile, format!("Localhost {}", localhost_profile()));
    assert_eq!(
        chmods, "setid=1\nplain=0",
        "the set-id chmod is refused, a plain one not"
    );

    // A node without the profile (one added since): the start fails naming the
    // kubelet's error, and the kept verdict goes, so the next start asks again.
    let removed = std::process::Command::new("docker")
        .args([
            "exec",
            NODE,
            "rm",
            "-rf",
            &format!("{SECCOMP_ROOT}/agent-runner"),
        ])
        .status()
        .unwrap();
    assert!(removed.success());
    let e = sandbox_started().unwrap_err();
    assert!(e.contains("the node cannot start its container"), "{e}");
    assert!(e.contains("seccomp"), "{e}");
    let (profile, _) = sandbox_under_profile();
    assert_eq!(profile, "RuntimeDefault", "asked again");
}
