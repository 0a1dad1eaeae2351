//! Whether the cluster enforces the sandboxes' NetworkPolicy (SPEC §25 "Egress"):
//! a NetworkPolicy is only words unless the cluster's network plugin enforces it,
//! and kubectl cannot tell. A probe Pod (the tools image's shell, labelled as a
//! sandbox so the policy selects it, no network of its own granted) tries to open
//! a connection to the API server's address and to the `kubernetes` Service's;
//! a connection made (any HTTP answer) means egress is not enforced.
//!
//! `hosts check` and `doctor` say the verdict; a task's first sandbox on a
//! cluster asks it beside its own Pod's start and refuses the cluster unless its
//! entry accepts it (`egress_unenforced: accept`). The verdict is kept an hour
//! (`kept_verdict.rs`), so a task pays
//! for the probe once an hour, not every time.

use std::time::Duration;

use super::super::spec::{Main, Net, Spec};
use super::super::sweep::{self, LABEL_TASK};
use super::super::tools::SHELL;
use super::super::{Backend, BackendError};
use super::{Kubernetes, kept_verdict};
use agent_runner_core::interrupt::Interrupt;

/// Each connection's attempt, all at once.
const TRY: u64 = 3;

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Verdict {
    /// The addresses tried (`host:port`).
    pub tried: Vec<String>,
    /// Those a connection was made to.
    pub reached: Vec<String>,
}

impl Verdict {
    pub fn enforced(&self) -> bool {
        self.reached.is_empty()
    }

    /// The refusal of a cluster that does not enforce egress, with the fix.
    pub fn refusal(&self, cluster: &str) -> Option<String> {
        (!self.enforced()).then(|| {
            format!(
                "egress not enforced on {cluster}: its network plugin ignores NetworkPolicy (a probe Pod reached {}); use a cluster whose plugin enforces it (Calico, Cilium, …), or accept it in the host's entry (`egress_unenforced: accept`)",
                self.reached.join(", ")
            )
        })
    }
}

/// The probe's script: one `wget` per address at once; `reached ADDR` for each
/// that answered at all (an HTTP error is an answer; a refused connection, a
/// timeout or no route is not).
const SCRIPT: &str = r#"for a in "$@"; do
  ( if out=$(wget -T "$0" -q -O /dev/null "http://$a/" 2>&1) || printf '%s' "$out" | grep -q 'server returned error'; then echo "reached $a"; fi ) &
done
wait"#;

/// The addresses a probe line names as reached.
pub(crate) fn reached(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|line| line.strip_prefix("reached "))
        .map(|a| a.trim().to_string())
        .collect()
}

impl Kubernetes {
    /// Runs the probe Pod (see the module documentation).
    pub fn probe_egress(&self, interrupt: Interrupt) -> Result<Verdict, BackendError> {
        let Some(tools) = self.tools_image.clone() else {
            return Err(BackendError::Io(
                "the egress probe runs the tools image's shell, and no tools image is set".into(),
            ));
        };
        self.ensure_policy()?;
        let tried = self.addresses();
        let mut args = vec![TRY.to_string()];
        args.extend(tried.iter().cloned());
        let mut spec = Spec::new(
            &tools,
            Main {
                entrypoint: SHELL.into(),
                args: [vec!["-c".to_string(), SCRIPT.to_string()], args].concat(),
                own_init: false,
            },
        );
        spec.name = Some(format!(
            "agent-runner-egress-probe-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..10]
        ));
        spec.network = Net::Isolated;
        let (expiry, at) = sweep::expiry_label(Duration::from_secs(600));
        spec.labels = vec![
            (LABEL_TASK.to_string(), "egress-probe".to_string()),
            (expiry.to_string(), at),
        ];
        spec.labels.extend(
            sweep::owner_labels(&agent_runner_core::owner::Owner::this_process())
                .map(|(k, v)| (k.to_string(), v)),
        );
        let out = self.run_once(&spec, Duration::from_secs(120), interrupt)?;
        Ok(Verdict {
            reached: reached(&out.stdout),
            tried,
        })
    }

    /// The probe's verdict, kept an hour (see the module documentation).
    /// `fresh`: probed now whatever is kept (`hosts check`, `doctor`).
    pub fn egress_verdict(
        &self,
        fresh: bool,
        interrupt: Interrupt,
    ) -> Result<Verdict, BackendError> {
        let cluster = self.kubectl.cluster.to_string();
        kept_verdict::verdict("egress", &cluster, fresh, || self.probe_egress(interrupt))
    }

    /// The API server's `host:port` (from the kubeconfig) and the `kubernetes`
    /// Service's address, as far as they can be read.
    fn addresses(&self) -> Vec<String> {
        let mut addresses = Vec::new();
        let read = |args: &[&str]| {
            self.kubectl
                .call(args, &[], self.short, Interrupt::never())
                .ok()
                .filter(|out| out.ok)
                .map(|out| out.stdout.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        if let Some(server) = read(&[
            "config",
            "view",
            "--minify",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ]) {
            let authority = server
                .split_once("://")
                .map_or(server.as_str(), |(_, rest)| rest)
                .trim_end_matches('/');
            addresses.push(authority.to_string());
        }
        if let Some(ip) = read(&[
            "get",
            "service",
            "kubernetes",
            "--namespace",
            "default",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ]) {
            addresses.push(format!("{ip}:443"));
        }
        addresses
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_answer_counts_as_reached() {
        assert_eq!(
            reached("reached 10.0.0.1:443\nnoise\nreached 127.0.0.60:6443\n"),
            ["10.0.0.1:443", "127.0.0.60:6443"]
        );
        assert!(reached("").is_empty());
        let open = Verdict {
            tried: vec!["a:1".into(), "b:2".into()],
            reached: vec!["b:2".into()],
        };
        let e = open.refusal("k8s://c/n").unwrap();
        assert!(
            e.starts_with("egress not enforced on k8s://c/n: its network plugin ignores NetworkPolicy (a probe Pod reached b:2)"),
            "{e}"
        );
        assert!(e.contains("egress_unenforced: accept"), "{e}");
        let closed = Verdict {
            tried: open.tried.clone(),
            reached: Vec::new(),
        };
        assert!(closed.enforced() && closed.refusal("x").is_none());
    }

    #[test]
    fn the_probe_script_reads_an_http_error_as_an_answer_and_a_refusal_as_none() {
        // The script under the machine's own shell, wget replaced by stand-ins.
        let dir = std::env::temp_dir().join(format!("probe-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let wget = dir.join("wget");
        std::fs::write(
            &wget,
            "#!/bin/sh\ncase \"$6\" in\n  *answers*) echo 'wget: server returned error: HTTP/1.1 400 Bad Request' >&2; exit 1 ;;\n  *ok*) exit 0 ;;\n  *) echo \"wget: can't connect to remote host: Connection refused\" >&2; exit 1 ;;\nesac\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wget, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", SCRIPT, "1", "answers:1", "refuses:2", "ok:3"])
            .env("PATH", format!("{}:/usr/bin:/bin", dir.display()))
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let mut seen = reached(&String::from_utf8_lossy(&out.stdout));
        seen.sort();
        assert_eq!(seen, ["answers:1", "ok:3"]);
    }
}
