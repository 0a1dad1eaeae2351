//! Leftovers swept beyond the start (SPEC §22): a host's expired containers and
//! volumes of dead owners removed while the orchestrator runs (at a health
//! re-check), a live owner's never; and the container a killed tools-volume fill
//! left, removed by the next fill. The killed fill is the suite's one fill from the
//! npm registry (the emulated hosts get this machine's volume by `hosts prepare`).

use crate::support;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_runner_core::owner::Owner;
use agent_runner_sandbox::backend::{sweep, tools};
use support::docker::TEST_IMAGE;
use support::pipeline::{BUILDER_REPLY, Pipeline, meta_script, wait_for};
use support::remote_hosts::{Has, OwnHost, RemoteHost};

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// An owner that has ended: a child of this process, waited for.
fn dead_owner() -> Owner {
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = Owner::child(gone.id());
    gone.wait().unwrap();
    dead
}

/// A container and a volume named `name` on `host`, labelled as a sandbox of
/// `owner` that expires at `expires`.
fn leftover(host: &RemoteHost, name: &str, owner: &Owner, expires: u64) {
    let mut labels = vec![
        format!("--label=agent-runner.task={name}"),
        format!("--label={}={expires}", sweep::LABEL_EXPIRES),
    ];
    for (label, value) in sweep::owner_labels(owner) {
        labels.push(format!("--label={label}={value}"));
    }
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    let mut create = vec!["create", "--name", name];
    create.extend(&labels);
    create.extend([TEST_IMAGE, "true"]);
    host.docker_ok(&create);
    let mut volume = vec!["volume", "create"];
    volume.extend(&labels);
    volume.push(name);
    host.docker_ok(&volume);
}

/// Whether `host` has a container and a volume named `name`: (container, volume).
fn present(host: &RemoteHost, name: &str) -> (bool, bool) {
    (
        host.docker(&["container", "inspect", name]).0,
        host.docker(&["volume", "inspect", name]).0,
    )
}

#[test]
fn while_the_orchestrator_runs_a_hosts_expired_leftovers_of_dead_owners_go_and_a_live_ones_stay() {
    let own = OwnHost::start(Has::Image);
    let host = &own.0;
    let p = Pipeline::new_in(host.shared.as_ref().unwrap(), "sweep-running", true);
    p.init(BUILDER_REPLY, &meta_script("@say: hi"), "");
    let mut orchestrator = p
        .in_ws(&["orchestrate"], &["--host", &format!("own={}", host.url)])
        .env("RUST_LOG", "info")
        .start();
    // Past its start (and the start's sweep): it has announced itself.
    let marker = p.ws().join("ipc/orchestrators");
    wait_for(Duration::from_secs(60), || {
        std::fs::read_dir(&marker).is_ok_and(|mut d| d.next().is_some())
    });
    let tag = support::short_id();
    let me = Owner::this_process();
    let dead = dead_owner();
    let (past, later) = (now_secs() - 10, now_secs() + 3600);
    let gone = format!("agent-runner-sweep-gone-{tag}");
    let live = format!("agent-runner-sweep-live-{tag}");
    let early = format!("agent-runner-sweep-early-{tag}");
    leftover(host, &gone, &dead, past);
    // Expired, but its owner (this test) runs: the start's sweep would take it,
    // one while the orchestrator runs never.
    leftover(host, &live, &me, past);
    // Its owner is dead, its expiry not passed: left for the next start.
    leftover(host, &early, &dead, later);
    let began = Instant::now();
    while present(host, &gone) != (false, false) {
        assert!(
            began.elapsed() < Duration::from_secs(90),
            "{gone} still on the host 90 s on (health re-checks every 30 s)"
        );
        assert!(
            orchestrator.child().try_wait().unwrap().is_none(),
            "the orchestrator ended"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "swept while running after {:.1} s",
        began.elapsed().as_secs_f64()
    );
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(orchestrator.id() as i32, libc::SIGTERM) };
    let out = orchestrator.finish();
    out.stderr_has(&format!(
        "host own: removed 2 leftover(s): {gone}, volume {gone}"
    ));
    assert_eq!(present(host, &live), (true, true), "{}", out.stderr);
    assert_eq!(present(host, &early), (true, true), "{}", out.stderr);
}

/// A fill killed once its container was created leaves it (and an incomplete
/// volume); the next `tools install` there removes it and fills the volume, from
/// the npm registry, complete.
#[test]
fn a_killed_fill_leaves_its_container_and_the_next_fill_removes_it() {
    let own = OwnHost::start(Has::Nothing);
    let host = &own.0;
    let install = || {
        support::Run::new(&["tools", "install"])
            .env("DOCKER_HOST", &host.url)
            .env("RUST_LOG", "info")
            .deadline(Duration::from_secs(900))
    };
    let filter = format!("label={}={}", tools::LABEL, tools::FILL);
    let format = format!(
        "{{{{.Names}}}} {{{{.Label \"{}\"}}}} {{{{.Label \"{}\"}}}}",
        "agent-runner.owner-pid",
        sweep::LABEL_EXPIRES
    );
    let fills = || host.docker_ok(&["ps", "-a", "--filter", &filter, "--format", &format]);
    let scratches = || -> std::collections::BTreeSet<std::ffi::OsString> {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| {
                let n = n.to_string_lossy();
                n.starts_with("agent-runner-tools-") && n.len() == "agent-runner-tools-".len() + 32
            })
            .collect()
    };
    let before = scratches();
    let mut first = install().start();
    let pid = first.id();
    let began = Instant::now();
    let mut seen = String::new();
    while seen.trim().is_empty() {
        assert!(
            first.child().try_wait().unwrap().is_none(),
            "the fill ended before its container was seen"
        );
        assert!(
            began.elapsed() < Duration::from_secs(600),
            "no fill container within 600 s"
        );
        std::thread::sleep(Duration::from_millis(50));
        seen = fills();
    }
    first.kill();
    eprintln!(
        "fill killed {:.1} s after its start",
        began.elapsed().as_secs_f64()
    );
    // What the killed fill left: its container, labelled with its owner and an
    // expiry, holding the volume (without its ready file).
    std::thread::sleep(Duration::from_secs(1));
    let left = fills();
    let fields: Vec<&str> = left.split_whitespace().collect();
    let [name, owner, expires] = fields[..] else {
        panic!("one fill container, labelled: {left:?}");
    };
    assert!(name.starts_with("agent-runner-tools-fill-"), "{left}");
    assert_eq!(owner, pid.to_string());
    assert!(expires.parse::<u64>().unwrap() > now_secs(), "{left}");
    let volume = tools::volume_name();
    host.docker_ok(&["volume", "inspect", &volume]);
    // And its scratch directory here, with the packages it downloaded.
    let killed: Vec<_> = scratches().difference(&before).cloned().collect();
    assert_eq!(
        killed.len(),
        1,
        "the killed fill's scratch directory: {killed:?}"
    );
    let killed = std::env::temp_dir().join(&killed[0]);

    let second = install().output();
    second
        .code(0)
        .stderr_has(&format!(
            "removed {name}, left by a tools-volume fill that was killed"
        ))
        .stdout_has("MB downloaded, sha512-checked");
    assert_eq!(fills().trim(), "", "the fill's own container is gone too");
    assert!(
        !killed.exists(),
        "the killed fill's scratch directory {} is removed",
        killed.display()
    );
    // Complete: the ready file, written last, names the digest.
    let reader = format!("agent-runner-tools-read-{}", support::short_id());
    let mount = format!("type=volume,source={volume},target={}", tools::TOOLS_DIR);
    host.docker_ok(&[
        "create",
        "--name",
        &reader,
        "--mount",
        &mount,
        tools::CARRIER_IMAGE,
        "/none",
    ]);
    let ready = host.docker(&["cp", &format!("{reader}:{}", tools::READY), "-"]);
    host.docker_ok(&["rm", &reader]);
    assert!(ready.1.contains(&tools::digest()), "{ready:?}");
}
