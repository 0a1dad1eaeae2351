//! Emulated remote Docker hosts (SPEC §22 "Tests"), one shared set per test binary.
//!
//! Each host is a container of `agent-runner-test-remote-host:2`
//! (testdata/setup-remote-hosts.sh, run by `make test-env`) on `--network host`, so
//! its API is at `tcp://127.0.0.N:2375`: a socat relay there to the unix socket of
//! an inner dockerd that runs in a network namespace of its own (`unshare --net`).
//! Never in the machine's namespace: a dockerd there deletes or programs `docker0`
//! and breaks every container on the machine (`assert_docker0_intact`). Inner
//! daemons run with `--iptables=false --ip-masq=false`, overlay2 on a named volume,
//! `/run` a tmpfs, `--cgroupns=private`, `--cap-add ALL --cap-drop SYS_RESOURCE`
//! (`--privileged` fails here), seccomp unconfined; the entrypoint remounts the
//! cgroup controllers read-write.
//!
//! The hosts start on first use, in parallel, prepared: the test worker image
//! loaded into each (`docker save | docker -H … load`), and this machine's tools
//! volume there without a copy: mounted read-only where the inner dockerd keeps the
//! volume of that name (`/var/lib/docker/volumes/<name>/_data`), which it lists and
//! mounts as its own. Filling or copying 1.2 GB into each host took 30–60 s a host;
//! `hosts prepare`'s real copy is tested on a bare host (`docker::hosts`), and the
//! fill from the npm registry once (`docker::sweeps`, a killed fill and the next).
//! They are removed with their volumes when the test binary ends, however it ends:
//! a reaper process holds a pipe from this process and removes them once it closes.
//! Hosts left by a test binary that was killed before its reaper ran are removed at
//! the next start.

use std::io::Write;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::Run;
use super::docker::{TEST_IMAGE, docker, docker_ok};

/// The image of a host (testdata/setup-remote-hosts.sh).
pub const HOST_IMAGE: &str = "agent-runner-test-remote-host:2";
/// The label on a host's container and volume: the pid of the test binary.
const OWNER_LABEL: &str = "agent-runner-test.remote-host";
/// How many hosts the suite starts; the last one shares a directory of this
/// machine (`RemoteHost::shared`), as a network file system would.
const COUNT: usize = 3;

/// An emulated remote Docker host.
#[derive(Debug)]
pub struct RemoteHost {
    /// Its container on this machine's daemon (pausing it pauses the host).
    pub container: String,
    /// Where its API is: `tcp://127.0.0.N:2375`.
    pub url: String,
    /// A directory of this machine it sees at the same path, if any.
    pub shared: Option<std::path::PathBuf>,
}

impl RemoteHost {
    /// `docker -H <url> <args>`: (success, stdout, stderr).
    pub fn docker(&self, args: &[&str]) -> (bool, String, String) {
        let mut all = vec!["-H", self.url.as_str()];
        all.extend_from_slice(args);
        docker(&all)
    }

    /// `docker`, which must succeed; its stdout.
    pub fn docker_ok(&self, args: &[&str]) -> String {
        let mut all = vec!["-H", self.url.as_str()];
        all.extend_from_slice(args);
        docker_ok(&all)
    }

    /// Names of the host's containers, running or not.
    pub fn containers(&self) -> Vec<String> {
        self.docker_ok(&["ps", "-a", "--format", "{{.Names}}"])
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// Held by tests that use the sharing host while it must answer: one of them
/// stops it for a while. A lock across processes (nextest runs each test in one of
/// its own), released when dropped. A test that takes it belongs to the
/// `sharing-host` test group of .config/nextest.toml (fast::test_groups checks).
pub fn sharing() -> std::fs::File {
    cross_process_lock("sharing")
}

/// An exclusive `flock` on a file of the tests', shared by every test process of
/// this machine; released when the file is dropped.
fn cross_process_lock(name: &str) -> std::fs::File {
    let path = std::env::temp_dir().join(format!("agent-runner-test-{name}.lock"));
    let file = agent_runner_core::fs::lock::open(&path)
        .unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
    agent_runner_core::fs::lock::lock(&file)
        .unwrap_or_else(|e| panic!("locking {}: {e}", path.display()));
    file
}

/// What a host has when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Has {
    /// Nothing: no image, no tools volume.
    Nothing,
    /// The test worker image, no tools volume.
    Image,
    /// The test worker image and this machine's tools volume (read-only).
    Prepared,
}

/// A host of one test's own, removed (with its volume and directory) when dropped,
/// or by its reaper when the test binary ends first.
pub struct OwnHost(pub RemoteHost);

impl OwnHost {
    /// A host with a shared directory of its own, which has `has`.
    pub fn start(has: Has) -> OwnHost {
        hosts();
        let owner = std::process::id().to_string();
        // Another test process may be picking an address too: one at a time, until
        // the host listens on the one it took.
        let _picking = cross_process_lock("addresses");
        let address = free_addresses(1).remove(0);
        let host = RemoteHost {
            container: format!("agent-runner-test-host-{owner}-own-{}", super::short_id()),
            url: format!("tcp://{address}:2375"),
            shared: Some(
                std::env::temp_dir()
                    .join(format!("agent-runner-shared-{owner}-{}", super::short_id())),
            ),
        };
        reap_at_exit(std::slice::from_ref(&host));
        start_host(&host, &address, &owner, has);
        OwnHost(host)
    }
}

impl Drop for OwnHost {
    fn drop(&mut self) {
        docker(&["rm", "-f", &self.0.container]);
        docker(&["volume", "rm", &self.0.container]);
        if let Some(dir) = &self.0.shared {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The host that sees a directory of this machine (`RemoteHost::shared`).
pub fn sharing_host() -> &'static RemoteHost {
    hosts().last().expect("the remote hosts")
}

/// Names the file of the hosts testdata/test.sh started once for the whole run
/// (`up`); without it, a test process starts its own on first use.
pub const HOSTS_FILE: &str = "AGENT_RUNNER_TEST_HOSTS";

/// The shared hosts: the run's (`HOSTS_FILE`), or started on first use.
pub fn hosts() -> &'static [RemoteHost] {
    static HOSTS: OnceLock<Vec<RemoteHost>> = OnceLock::new();
    HOSTS.get_or_init(|| match std::env::var_os(HOSTS_FILE) {
        Some(file) => read_hosts(std::path::Path::new(&file)),
        None => start(),
    })
}

/// The hosts `up` wrote: a line each, `container TAB url TAB shared-directory`.
fn read_hosts(file: &std::path::Path) -> Vec<RemoteHost> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| {
        panic!(
            "{HOSTS_FILE}={}: {e} (testdata/test.sh starts the hosts)",
            file.display()
        )
    });
    let hosts: Vec<RemoteHost> = text
        .lines()
        .map(|line| {
            let mut fields = line.split('\t');
            let (Some(container), Some(url), Some(shared)) =
                (fields.next(), fields.next(), fields.next())
            else {
                panic!("{HOSTS_FILE}={}: a bad line {line:?}", file.display());
            };
            RemoteHost {
                container: container.into(),
                url: url.into(),
                shared: (!shared.is_empty()).then(|| shared.into()),
            }
        })
        .collect();
    assert_eq!(hosts.len(), COUNT, "{HOSTS_FILE}={}", file.display());
    hosts
}

/// Starts the shared hosts for a whole run and writes them to `file`: owned by
/// `owner` (the pid of the process that removes them when the run ends:
/// testdata/test.sh), with no reaper of this process's.
pub fn up(file: &std::path::Path, owner: &str) {
    let hosts = start_as(owner, false);
    let lines: String = hosts
        .iter()
        .map(|h| {
            let shared = h.shared.as_ref().map(|d| d.display().to_string());
            format!(
                "{}\t{}\t{}\n",
                h.container,
                h.url,
                shared.unwrap_or_default()
            )
        })
        .collect();
    std::fs::write(file, lines).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
}

/// Fails the test when the machine's default bridge is gone or down: what a dockerd
/// in the machine's network namespace would have done to it.
pub fn assert_docker0_intact() {
    let out = Run::program("ip", &["-o", "link", "show", "docker0"]).output();
    assert_eq!(
        out.code,
        Some(0),
        "docker0 is gone from this machine: {}",
        out.stderr
    );
    let (ok, _, stderr) = docker(&["run", "--rm", "--network", "bridge", TEST_IMAGE, "true"]);
    assert!(ok, "a container on the default bridge failed: {stderr}");
}

fn start() -> Vec<RemoteHost> {
    start_as(&std::process::id().to_string(), true)
}

/// The shared hosts, owned by `owner`; removed when this process ends if `reap`.
fn start_as(owner: &str, reap: bool) -> Vec<RemoteHost> {
    let began = Instant::now();
    let (present, _, _) = docker(&["image", "inspect", HOST_IMAGE]);
    assert!(
        present,
        "{HOST_IMAGE} is missing: `make test-env` builds it (bash testdata/setup-remote-hosts.sh)"
    );
    remove_leftovers();
    let _picking = cross_process_lock("addresses");
    let addresses = free_addresses(COUNT);
    let hosts: Vec<RemoteHost> = addresses
        .iter()
        .enumerate()
        .map(|(i, address)| RemoteHost {
            container: format!("agent-runner-test-host-{owner}-{i}"),
            url: format!("tcp://{address}:2375"),
            shared: (i + 1 == COUNT)
                .then(|| std::env::temp_dir().join(format!("agent-runner-shared-{owner}"))),
        })
        .collect();
    if reap {
        reap_at_exit(&hosts);
    }
    std::thread::scope(|scope| {
        for (host, address) in hosts.iter().zip(&addresses) {
            scope.spawn(move || start_host(host, address, owner, Has::Prepared));
        }
    });
    eprintln!(
        "remote hosts: {} started with {TEST_IMAGE} loaded and the tools volume in {:.1} s",
        hosts.len(),
        began.elapsed().as_secs_f64()
    );
    hosts
}

fn start_host(host: &RemoteHost, address: &str, owner: &str, has: Has) {
    let label = format!("{OWNER_LABEL}={owner}");
    docker_ok(&["volume", "create", "--label", &label, &host.container]);
    let volume = format!(
        "type=volume,source={},target=/var/lib/docker",
        host.container
    );
    let mut mounts = vec![];
    if let Some(dir) = &host.shared {
        std::fs::create_dir_all(dir).unwrap();
        mounts = vec![
            "--mount".to_string(),
            format!("type=bind,source={0},target={0}", dir.display()),
        ];
    }
    if has == Has::Prepared {
        if let Err(why) = super::prerequisite::tools_volume_filled() {
            panic!("a prepared host gets this machine's tools volume: {why}");
        }
        // Read-only: a `volume rm` there must not empty this machine's volume.
        let volume = agent_runner_sandbox::backend::tools::volume_name();
        mounts.extend([
            "--mount".to_string(),
            format!(
                "type=volume,source={volume},target=/var/lib/docker/volumes/{volume}/_data,readonly"
            ),
        ]);
    }
    let mounts: Vec<&str> = mounts.iter().map(String::as_str).collect();
    docker_ok(
        &[
            &["run", "-d"],
            &mounts[..],
            &[
                "--name",
                &host.container,
                "--label",
                &label,
                "--network",
                "host",
                "--cgroupns=private",
                "--cap-add",
                "ALL",
                "--cap-drop",
                "SYS_RESOURCE",
                "--security-opt",
                "seccomp=unconfined",
                "--security-opt",
                "apparmor=unconfined",
                "--tmpfs",
                "/run",
                "--mount",
                &volume,
                HOST_IMAGE,
                address,
            ],
        ]
        .concat(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while !host
        .docker(&["version", "--format", "{{.Server.Version}}"])
        .0
    {
        if Instant::now() > deadline {
            let logs = Run::program("docker", &["logs", "--tail", "20", &host.container]).output();
            panic!(
                "remote host {} did not answer within 60 s: {}{}",
                host.url, logs.stdout, logs.stderr
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if has == Has::Nothing {
        return;
    }
    let load = format!("docker save {TEST_IMAGE} | docker -H {} load -q", host.url);
    let out = Run::program("sh", &["-c", &load])
        .deadline(Duration::from_secs(120))
        .output();
    assert_eq!(
        out.code,
        Some(0),
        "loading {TEST_IMAGE} into {}: {}",
        host.url,
        out.stderr
    );
}

/// `n` loopback addresses 127.0.0.N whose port 2375 is free, away from the fake
/// internet servers' (127.0.0.2, .3, ...), and never one handed out before in this
/// process: hosts that start at once would otherwise find the same one free.
fn free_addresses(n: usize) -> Vec<String> {
    static TAKEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    let start = 100 + (std::process::id() as usize % 100);
    let found: Vec<String> = (0..150)
        .map(|i| format!("127.0.0.{}", 100 + (start - 100 + i) % 150))
        .filter(|address| !taken.contains(address))
        .filter(|address| TcpListener::bind((address.as_str(), 2375)).is_ok())
        .take(n)
        .collect();
    taken.extend(found.iter().cloned());
    found
}

/// Starts the process that removes `hosts` once this process's end closes its stdin.
fn reap_at_exit(hosts: &[RemoteHost]) {
    let names: Vec<&str> = hosts.iter().map(|h| h.container.as_str()).collect();
    let dirs: Vec<String> = hosts
        .iter()
        .filter_map(|h| h.shared.as_ref().map(|d| d.display().to_string()))
        .collect();
    let script = format!(
        "cat >/dev/null; docker rm -f {0} >/dev/null 2>&1; docker volume rm {0} >/dev/null 2>&1; rm -rf {1}",
        names.join(" "),
        dirs.join(" ")
    );
    use std::os::unix::process::CommandExt;
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group: a ^C to the tests does not stop the cleanup.
        .process_group(0)
        .spawn()
        .expect("starting the remote hosts' reaper");
    // Held open until this process ends; never written.
    let pipe = child.stdin.take().expect("the reaper's stdin");
    let _ = (&pipe).flush();
    std::mem::forget(pipe);
    std::mem::forget(child);
}

/// Hosts and volumes of test binaries that are gone.
fn remove_leftovers() {
    let filter = format!("label={OWNER_LABEL}");
    let dead = |owner: &str| {
        !owner.is_empty()
            && owner.chars().all(|c| c.is_ascii_digit())
            && !std::path::Path::new(&format!("/proc/{owner}")).exists()
    };
    let format = format!("{{{{.Names}}}} {{{{.Label \"{OWNER_LABEL}\"}}}}");
    for line in docker_ok(&["ps", "-a", "--filter", &filter, "--format", &format]).lines() {
        if let Some((name, owner)) = line.split_once(' ')
            && dead(owner)
        {
            docker(&["rm", "-f", name]);
        }
    }
    let format = format!("{{{{.Name}}}} {{{{.Label \"{OWNER_LABEL}\"}}}}");
    for line in docker_ok(&["volume", "ls", "--filter", &filter, "--format", &format]).lines() {
        if let Some((name, owner)) = line.split_once(' ')
            && dead(owner)
        {
            docker(&["volume", "rm", name]);
        }
    }
}
