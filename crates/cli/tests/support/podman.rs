//! podman as the docker CLI (SPEC §24), as `podman-docker` installs it: a directory
//! whose `docker` execs podman, put first on agent-runner's PATH. podman reads
//! its settings from `containers.conf` beside it: this machine's nested containers
//! refuse podman's default rlimits (nproc 4194304, "error setting rlimit"), so the
//! tests ask for lower ones; a variant names a missing catatonit (`init_path`).

use std::os::unix::fs::PermissionsExt;

use super::{Run, Scratch};

/// A `docker` that is podman, with `conf` as its containers.conf.
pub struct Podman {
    dir: Scratch,
}

/// Lower than this machine's limits; see the module documentation.
const LIMITS: &str =
    "[containers]\ndefault_ulimits = [\"nofile=16384:16384\", \"nproc=20000:20000\"]\n";

impl Podman {
    pub fn new() -> Self {
        Podman::with(LIMITS, "")
    }

    /// podman whose `--init` binary is missing, as without Debian's catatonit.
    pub fn without_catatonit() -> Self {
        Podman::with(
            &format!("{LIMITS}init_path = \"/nonexistent/catatonit\"\n"),
            "",
        )
    }

    /// podman with `before` run by the wrapper first (e.g. to fail one command).
    pub fn with(conf: &str, before: &str) -> Self {
        let dir = Scratch::new("podman");
        let conf = dir.file("containers.conf", conf);
        let script = format!(
            "#!/bin/sh\n# docker as podman-docker makes it (tests only)\n\
             export CONTAINERS_CONF={}\n{before}exec podman \"$@\"\n",
            conf.display()
        );
        let path = dir.file("docker", script);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Podman { dir }
    }

    /// The `PATH` to run agent-runner with.
    pub fn path(&self) -> String {
        format!(
            "{}:{}",
            self.dir.path.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// `docker <args>` through the wrapper: (ok, stdout, stderr).
    pub fn docker(&self, args: &[&str]) -> (bool, String, String) {
        let out = Run::program(self.dir.join("docker").to_str().unwrap(), args).output();
        (out.code == Some(0), out.stdout, out.stderr)
    }

    /// Names of podman's containers labelled `label=value`.
    pub fn containers_labelled(&self, label: &str, value: &str) -> Vec<String> {
        let filter = format!("label={label}={value}");
        let (ok, out, err) =
            self.docker(&["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"]);
        assert!(ok, "podman ps failed: {err}");
        out.lines().map(str::to_string).collect()
    }
}
