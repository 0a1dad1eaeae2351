//! The Kubernetes test cluster (`testdata/setup-kubernetes.sh`, SPEC §25), found by
//! its cluster.env: the kubeconfig, the context and namespace, its kubectl.

use std::path::PathBuf;
use std::time::Duration;

use agent_runner_sandbox::backend::kubernetes::{Cluster, Kubectl, Kubernetes, kubectl};

/// The test cluster's node (a container of this machine's daemon).
pub const NODE: &str = "agent-runner-test-k8s-node";

/// Where the set-up writes what the tests need of the cluster.
pub const CLUSTER_ENV: &str = "/var/lib/agent-runner-k8s/cluster.env";

/// `NAME=value` of cluster.env (quotes around a value dropped).
fn env() -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(CLUSTER_ENV).map_err(|e| {
        format!(
            "{CLUSTER_ENV}: {e}; `make test-env` (or `make test-cluster`) starts the test cluster"
        )
    })?;
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect())
}

fn value(env: &[(String, String)], name: &str) -> Result<String, String> {
    env.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .ok_or_else(|| format!("{CLUSTER_ENV} has no {name}"))
}

/// The test cluster as a target, with its own kubectl named for the backend
/// (`kubectl::PROGRAM_VAR`, set for this process).
pub fn cluster() -> Cluster {
    super::prerequisite::require(super::prerequisite::Needs::Cluster);
    let env = env().unwrap();
    // SAFETY: the same value every time, set before any kubectl call of the tests.
    unsafe { std::env::set_var(kubectl::PROGRAM_VAR, value(&env, "KUBECTL").unwrap()) };
    Cluster::new(
        &value(&env, "K8S_CONTEXT").unwrap(),
        &value(&env, "K8S_NAMESPACE").unwrap(),
        Some(PathBuf::from(value(&env, "KUBECONFIG").unwrap())),
    )
    .unwrap()
}

/// The backend on the test cluster, with the test tools image (its shell runs the
/// egress probe a sandbox without network starts beside).
pub fn backend() -> Kubernetes {
    Kubernetes::new(cluster()).with_tools_image(tools_image())
}

/// `kubectl <args>` on the test cluster: (ok, stdout, stderr).
pub fn kubectl(args: &[&str]) -> (bool, String, String) {
    let out = Kubectl::new(cluster())
        .call(
            args,
            &[],
            Duration::from_secs(30),
            agent_runner_core::interrupt::Interrupt::never(),
        )
        .unwrap();
    (out.ok, out.stdout, out.stderr)
}

/// Whether the test cluster is up: its cluster.env and its API answering.
pub fn reachable() -> Result<(), String> {
    static UP: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    UP.get_or_init(|| {
        let env = env()?;
        let program = value(&env, "KUBECTL")?;
        let out = std::process::Command::new(&program)
            .env("KUBECONFIG", value(&env, "KUBECONFIG")?)
            .args([
                "--request-timeout=10s",
                "--context",
                &value(&env, "K8S_CONTEXT")?,
            ])
            .args(["get", "namespace", &value(&env, "K8S_NAMESPACE")?])
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "the test cluster does not answer ({}); `make test-cluster` starts it",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    })
    .clone()
}

/// A tools image for the test cluster: this machine's static busybox as the tools'
/// shell at `/agent-runner-tools/bin/sh`, `FROM scratch`, built here and loaded
/// into the node (as the set-up loads the test images). Once per test process.
pub fn tools_image() -> &'static str {
    const IMAGE: &str = "agent-runner-test-k8s-tools:1";
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("k8s-tools-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("agent-runner-tools/bin")).unwrap();
        std::fs::copy("/bin/busybox", dir.join("agent-runner-tools/bin/sh")).unwrap();
        std::fs::write(
            dir.join("Dockerfile"),
            "FROM scratch\nCOPY agent-runner-tools /agent-runner-tools\n",
        )
        .unwrap();
        let built = std::process::Command::new("docker")
            .args(["build", "-q", "-t", IMAGE])
            .arg(&dir)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            built.status.success(),
            "{}",
            String::from_utf8_lossy(&built.stderr)
        );
        load_into_node(IMAGE);
    });
    IMAGE
}

/// Loads this machine's `image` into the test cluster's node (`docker save | docker
/// load`, as the set-up loads the test images).
pub fn load_into_node(image: &str) {
    let loaded = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("docker save {image} | docker exec -i {NODE} docker load"),
        ])
        .output()
        .unwrap();
    assert!(
        loaded.status.success(),
        "{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
}

/// Tests on the cluster run beside each other, but not beside one that freezes it
/// (the node paused): that one takes the cluster alone.
static USE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// The cluster shared with the other tests, for as long as the guard lives.
pub fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    USE.read().unwrap_or_else(|e| e.into_inner())
}

/// The cluster alone, for a test that disturbs it.
pub fn alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    USE.write().unwrap_or_else(|e| e.into_inner())
}

/// The product's own tools image (`agent-runner tools image --without-agents`,
/// named for this build, the name the backend runs), built by the real binary and
/// loaded into the node where it is not there yet. Once per test process.
pub fn product_tools_image() -> String {
    static BUILT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let image = agent_runner_sandbox::backend::tools::image_name();
            let there = std::process::Command::new("docker")
                .args(["exec", NODE, "docker", "image", "inspect", &image])
                .output()
                .unwrap();
            if there.status.success() {
                return image;
            }
            super::Run::new(&["tools", "image", "--without-agents"])
                .output()
                .code(0)
                .stdout_has(&format!("{image} built"));
            load_into_node(&image);
            image
        })
        .clone()
}

/// What a runner on the test cluster needs in its environment (its kubectl and
/// kubeconfig), and the cluster as `runner.sandbox.host` names it.
pub fn runner_env() -> (Vec<(String, String)>, String) {
    let cluster = cluster();
    let env = env().unwrap();
    (
        vec![
            (
                kubectl::PROGRAM_VAR.to_string(),
                value(&env, "KUBECTL").unwrap(),
            ),
            ("KUBECONFIG".into(), value(&env, "KUBECONFIG").unwrap()),
        ],
        format!("k8s://{}/{}", cluster.context, cluster.namespace),
    )
}

/// The node frozen (`docker pause`: API server, kubelet and all), until the guard
/// goes: then unpaused, and waited for until it takes Pods again (its API answers,
/// it is Ready and carries no taint), passed or not.
pub fn pause_node() -> Paused {
    let paused = std::process::Command::new("docker")
        .args(["pause", NODE])
        .status()
        .unwrap();
    assert!(paused.success(), "docker pause {NODE}");
    Paused
}

pub struct Paused;

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["unpause", NODE])
            .status();
        let ready = || {
            let (ok, out, _) = kubectl(&[
                "get",
                "nodes",
                "-o",
                "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status} {.items[0].spec.taints}",
            ]);
            ok && out.trim() == "True"
        };
        // The node controller, frozen too, may taint the node only once it runs
        // again (a heartbeat older than its 40 s grace), within its 5 s period, and
        // lifts the taint once the kubelet's lease is renewed: ready means ready
        // for 12 s on end.
        let until = std::time::Instant::now() + Duration::from_secs(120);
        let mut since = None;
        while std::time::Instant::now() < until {
            match (ready(), since) {
                (true, None) => since = Some(std::time::Instant::now()),
                (true, Some(at)) if at.elapsed() >= Duration::from_secs(12) => break,
                (true, Some(_)) => {}
                (false, _) => since = None,
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// `kubectl <args>` on the test cluster with `stdin` (a manifest): (ok, stderr).
pub fn kubectl_in(args: &[&str], stdin: &str) -> (bool, String) {
    let out = Kubectl::new(cluster())
        .call(
            args,
            stdin.as_bytes(),
            Duration::from_secs(30),
            agent_runner_core::interrupt::Interrupt::never(),
        )
        .unwrap();
    (out.ok, out.stderr)
}

/// A StorageClass for the claims of workers' sessions (SPEC §25 "Resume"), with
/// `volumes` PersistentVolumes to bind: the test cluster has no provisioner, so
/// the class is `kubernetes.io/no-provisioner` and each volume a directory of the
/// node (a `hostPath` of this fixture's own; the product never renders one).
/// Deleted, with the directories, when the guard goes.
pub struct SessionClass {
    pub name: String,
    volumes: Vec<String>,
}

pub fn session_class(volumes: usize) -> SessionClass {
    let name = format!(
        "agent-runner-test-session-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let class = serde_json::json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    });
    let (ok, err) = kubectl_in(&["create", "-f", "-"], &class.to_string());
    assert!(ok, "the StorageClass: {err}");
    let mut made = SessionClass {
        name: name.clone(),
        volumes: Vec::new(),
    };
    for i in 0..volumes {
        let volume = format!("{name}-{i}");
        let pv = serde_json::json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume, "labels": {"agent-runner-test": "session"}},
            "spec": {
                "storageClassName": name,
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": format!("/tmp/{volume}"), "type": "DirectoryOrCreate"},
            },
        });
        let (ok, err) = kubectl_in(&["create", "-f", "-"], &pv.to_string());
        assert!(ok, "the PersistentVolume: {err}");
        made.volumes.push(volume);
    }
    made
}

impl Drop for SessionClass {
    fn drop(&mut self) {
        for volume in &self.volumes {
            kubectl(&["delete", "pv", volume, "--wait=false", "--ignore-not-found"]);
            let _ = std::process::Command::new("docker")
                .args(["exec", NODE, "rm", "-rf", &format!("/tmp/{volume}")])
                .status();
        }
        kubectl(&[
            "delete",
            "storageclass",
            &self.name,
            "--wait=false",
            "--ignore-not-found",
        ]);
    }
}
