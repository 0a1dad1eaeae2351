//! Docker helpers for tests. The daemon and the test worker image are real; they are
//! made ready by testdata/setup-docker.sh (run by `make test`).

use std::time::Duration;

use super::Run;

/// The image built by testdata/setup-docker.sh.
pub const TEST_IMAGE: &str = "agent-runner-test-worker:latest";
/// Longest a docker command of a test may take (the daemon answers in well under a
/// second when it is healthy).
const DOCKER_DEADLINE: Duration = Duration::from_secs(120);

/// TEST_IMAGE with this tree's fake codex (testdata/worker-image/codex): TEST_IMAGE
/// itself when it has that fake, else an image made from it with the fake copied
/// in (tagged by the fake's content). Tests that need what the fake learnt lately
/// use it: TEST_IMAGE may have been built from another tree since (trees share one
/// daemon), or before the fake changed.
pub fn image_with_this_fake() -> String {
    static IMAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    IMAGE
        .get_or_init(|| {
            let fake = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../testdata/worker-image/codex");
            let ours = std::fs::read(&fake).unwrap();
            let (ok, theirs, _) = docker(&["run", "--rm", TEST_IMAGE, "cat", "/usr/local/bin/codex"]);
            if ok && theirs.as_bytes() == ours {
                return TEST_IMAGE.to_string();
            }
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            ours.hash(&mut hasher);
            let tag = format!("agent-runner-test-worker:fake-{:016x}", hasher.finish());
            if docker(&["image", "inspect", &tag]).0 {
                return tag;
            }
            let context = super::Scratch::new("fake-image");
            context.file("codex", &ours);
            build(
                &tag,
                &context,
                &format!("FROM {TEST_IMAGE}\nCOPY codex /usr/local/bin/codex\nRUN chmod 755 /usr/local/bin/codex\n"),
            );
            tag
        })
        .clone()
}

/// Runs `docker <args>`; returns (success, stdout, stderr).
pub fn docker(args: &[&str]) -> (bool, String, String) {
    let out = Run::program("docker", args)
        .deadline(DOCKER_DEADLINE)
        .output();
    (out.code == Some(0), out.stdout, out.stderr)
}

/// Runs `docker <args>`, which must succeed: a failing docker fails the test
/// instead of passing for an empty answer. Its stdout.
pub fn docker_ok(args: &[&str]) -> String {
    let (ok, stdout, stderr) = docker(args);
    assert!(ok, "docker {}: {}", args.join(" "), stderr.trim());
    stdout
}

/// The command lines of this machine's processes that contain `text` (a docker
/// client of a container, say), this process's own left out.
pub fn processes_naming(text: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()) && n != me)
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(text))
        .collect()
}

/// Names of containers (running or not) carrying `label=value`.
pub fn containers_labelled(label: &str, value: &str) -> Vec<String> {
    containers_labelled_on(&[], label, value)
}

/// `containers_labelled` with docker's global options `global` (e.g. `--host`).
pub fn containers_labelled_on(global: &[&str], label: &str, value: &str) -> Vec<String> {
    let filter = format!("label={label}={value}");
    let mut args = global.to_vec();
    args.extend(["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"]);
    docker_ok(&args).lines().map(str::to_string).collect()
}

/// A `PATH` whose `docker` is the real one without `--security-opt seccomp=…`, so
/// containers get the daemon's default profile instead of agent-runner's: the
/// sandbox without its first line against set-id files, to test the second (the
/// sweeps). The directory goes with the value.
pub struct WithoutSeccompProfile {
    dir: super::Scratch,
}

impl WithoutSeccompProfile {
    pub fn new() -> Self {
        let dir = super::Scratch::new("no-seccomp");
        let real = super::Run::program("sh", &["-c", "command -v docker"]).output();
        assert_eq!(real.code, Some(0), "docker is not on PATH");
        let script = format!(
            "#!/bin/sh\n# docker without agent-runner's seccomp profile (tests only)\n\
             n=$#\nwhile [ $n -gt 0 ]; do\n  a=$1; shift; n=$((n - 1))\n  \
             if [ \"$a\" = --security-opt ] && [ $n -gt 0 ]; then\n    \
             case $1 in seccomp=*) shift; n=$((n - 1)); continue ;; esac\n  fi\n  \
             set -- \"$@\" \"$a\"\ndone\nexec {} \"$@\"\n",
            real.stdout.trim()
        );
        let path = dir.file("docker", script);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        WithoutSeccompProfile { dir }
    }

    /// The `PATH` to run agent-runner with.
    pub fn path(&self) -> String {
        format!(
            "{}:{}",
            self.dir.path.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
}

/// TEST_IMAGE with a setuid-root file, `/bin/setid-tool` (busybox, mode 4755), as an
/// image may bring one; tagged by TEST_IMAGE's id, built once.
pub fn image_with_setid_file() -> String {
    static IMAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    IMAGE
        .get_or_init(|| {
            test_image_variant("setid", |_| {
                format!(
                    "FROM {TEST_IMAGE}\nRUN cp /bin/busybox /bin/setid-tool && chmod 4755 /bin/setid-tool\n"
                )
            })
        })
        .clone()
}

/// `agent-runner-test-worker:<name>-<TEST_IMAGE's id>`, built once by the Dockerfile
/// `recipe` gives after filling the build's context, unless it is there.
fn test_image_variant(name: &str, recipe: impl FnOnce(&super::Scratch) -> String) -> String {
    let id = docker_ok(&["image", "inspect", "--format", "{{.Id}}", TEST_IMAGE]);
    let id = id.trim().trim_start_matches("sha256:");
    let tag = format!("agent-runner-test-worker:{name}-{}", &id[..12]);
    if docker(&["image", "inspect", &tag]).0 {
        return tag;
    }
    let context = super::Scratch::new(&format!("{name}-image"));
    let dockerfile = recipe(&context);
    build(&tag, &context, &dockerfile);
    tag
}

/// TEST_IMAGE whose fake codex runs under the host's dash (`#!/bin/dash`): a
/// dynamically linked interpreter (libc and the loader come with the image's git),
/// as claude's binary or a Debian shell is; tagged by TEST_IMAGE's id and dash's
/// hash, built once.
pub fn image_with_dynamic_agent() -> String {
    static IMAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    IMAGE
        .get_or_init(|| {
            let dash = std::fs::read("/usr/bin/dash").expect("dash (Debian's /bin/sh) is needed");
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            dash.hash(&mut hasher);
            let id = docker_ok(&["image", "inspect", "--format", "{{.Id}}", TEST_IMAGE]);
            let id = id.trim().trim_start_matches("sha256:");
            let tag = format!(
                "agent-runner-test-worker:dash-{}-{:08x}",
                &id[..12],
                hasher.finish() as u32
            );
            if docker(&["image", "inspect", &tag]).0 {
                return tag;
            }
            let context = super::Scratch::new("dash-image");
            context.file("dash", &dash);
            build(
                &tag,
                &context,
                &format!(
                    "FROM {TEST_IMAGE}\nCOPY dash /bin/dash\n\
                     RUN chmod 755 /bin/dash && sed -i '1s|.*|#!/bin/dash|' /usr/local/bin/codex\n"
                ),
            );
            tag
        })
        .clone()
}

/// TEST_IMAGE whose `/bin/sh` is busybox marked as another machine's (an arm64
/// ELF on x86-64, and the other way round): an image of the wrong architecture,
/// whose shell cannot run here; tagged by TEST_IMAGE's id, built once.
pub fn image_with_foreign_shell() -> String {
    static IMAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    IMAGE
        .get_or_init(|| {
            test_image_variant("foreign-sh", |context| {
                let mut sh =
                    std::fs::read("/bin/busybox").expect("a static busybox (busybox-static)");
                // e_machine, little-endian: EM_X86_64 62 <-> EM_AARCH64 183.
                let foreign: u16 = if cfg!(target_arch = "x86_64") {
                    183
                } else {
                    62
                };
                sh[18..20].copy_from_slice(&foreign.to_le_bytes());
                context.file("sh", &sh);
                // The legacy builder keeps the context's mode (it has no `--chmod`,
                // and no RUN can follow: its shell would be this one).
                std::fs::set_permissions(
                    context.path.join("sh"),
                    std::os::unix::fs::PermissionsExt::from_mode(0o755),
                )
                .unwrap();
                format!("FROM {TEST_IMAGE}\nCOPY sh /bin/sh\n")
            })
        })
        .clone()
}

/// `docker build -t tag` of `dockerfile` in `context` (the legacy builder, which
/// needs no registry); the build must succeed.
fn build(tag: &str, context: &super::Scratch, dockerfile: &str) {
    context.file("Dockerfile", dockerfile);
    let out = Run::program("docker", &["build", "-q", "-t", tag])
        .arg(context.path.to_str().unwrap())
        .env("DOCKER_BUILDKIT", "0")
        .deadline(DOCKER_DEADLINE)
        .output();
    assert_eq!(out.code, Some(0), "docker build of {tag}: {}", out.stderr);
}

/// The Debian base sandbox/build.sh makes with debootstrap where no registry is
/// reachable (shared; only read here).
pub const DEBIAN_BASE: &str = "agent-runner-sandbox-base:bookworm";

/// A project's own image as a team would have it: Debian with python3 and pytest
/// (and pip), no git, and this tree's fake codex as its agent; built once from
/// `DEBIAN_BASE` with apt-get, tagged by its recipe.
pub fn image_with_python() -> String {
    static IMAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    IMAGE
        .get_or_init(|| {
            let fake = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../testdata/worker-image/codex");
            let codex = std::fs::read(&fake).unwrap();
            let dockerfile = format!(
                "FROM {DEBIAN_BASE}\n\
                 RUN apt-get update -q && apt-get install -y -q --no-install-recommends python3 python3-pytest python3-pip \
                 && rm -rf /var/lib/apt/lists/* && ! command -v git\n\
                 COPY codex /usr/local/bin/codex\nRUN chmod 755 /usr/local/bin/codex\n"
            );
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            (&dockerfile, &codex).hash(&mut hasher);
            let tag = format!("agent-runner-test-python:{:016x}", hasher.finish());
            if docker(&["image", "inspect", &tag]).0 {
                return tag;
            }
            assert!(
                docker(&["image", "inspect", DEBIAN_BASE]).0,
                "{DEBIAN_BASE} is missing: `make sandbox-image` (as root, without a registry) makes it"
            );
            let context = super::Scratch::new("python-image");
            context.file("codex", &codex);
            context.file("Dockerfile", &dockerfile);
            // apt-get reaches the Debian mirror from the build: the host's network.
            let out = Run::program("docker", &["build", "-q", "--network", "host", "-t", &tag])
                .arg(context.path.to_str().unwrap())
                .env("DOCKER_BUILDKIT", "0")
                .deadline(Duration::from_secs(600))
                .output();
            assert_eq!(out.code, Some(0), "docker build of {tag}: {}", out.stderr);
            tag
        })
        .clone()
}
