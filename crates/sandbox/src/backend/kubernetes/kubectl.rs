//! The one place a `kubectl` call is made for the Kubernetes backend. Every call
//! has a deadline; every call names the cluster's context and namespace; values
//! that may be secret travel on stdin, never in an argv (which every local user
//! can read) nor in the Pod object.

use std::time::Duration;

use super::super::BackendError;
use super::super::docker_cli::{Output, last_lines};
use super::cluster::Cluster;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Ending, Invocation, Limits, Stop};

/// Names the kubectl to run (the test cluster's own 1.20 client, say).
pub const PROGRAM_VAR: &str = "AGENT_RUNNER_KUBECTL";

/// kubectl aimed at one cluster.
#[derive(Debug, Clone)]
pub struct Kubectl {
    pub cluster: Cluster,
    program: String,
}

impl Kubectl {
    pub fn new(cluster: Cluster) -> Kubectl {
        let program = std::env::var(PROGRAM_VAR)
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "kubectl".into());
        Kubectl { cluster, program }
    }

    /// The same cluster through another kubectl program (a test's fake).
    #[cfg(test)]
    pub(crate) fn with_program(mut self, program: &str) -> Kubectl {
        self.program = program.to_string();
        self
    }

    /// `kubectl --context C --namespace N <args>`, ready for more.
    pub fn command<S: AsRef<str>>(&self, args: &[S]) -> Invocation {
        let mut invocation = Invocation::new(&self.program)
            .arg("--context")
            .arg(self.cluster.context.clone())
            .arg("--namespace")
            .arg(self.cluster.namespace.clone());
        if let Some(config) = &self.cluster.kubeconfig {
            invocation = invocation.env("KUBECONFIG", &config.display().to_string());
        }
        invocation.args(args.iter().map(|a| a.as_ref().to_string()))
    }

    /// `kubectl <args>` with `stdin`, within `deadline`: what it printed. A kubectl
    /// that cannot start, and an interrupt, are errors.
    pub fn call<S: AsRef<str>>(
        &self,
        args: &[S],
        stdin: &[u8],
        deadline: Duration,
        interrupt: Interrupt,
    ) -> Result<Output, BackendError> {
        let mut invocation = self.command(args);
        if !stdin.is_empty() {
            invocation = invocation.stdin(stdin.to_vec());
        }
        let out = run(&invocation, deadline, interrupt)?;
        if out.ending == Ending::Interrupted {
            return Err(BackendError::Interrupted);
        }
        Ok(out)
    }

    /// `call`, an error unless it succeeded: the command and stderr's tail.
    pub fn checked<S: AsRef<str>>(
        &self,
        args: &[S],
        stdin: &[u8],
        deadline: Duration,
    ) -> Result<Output, BackendError> {
        let out = self.call(args, stdin, deadline, Interrupt::never())?;
        if out.ok {
            return Ok(out);
        }
        Err(self.failed(args, &out, deadline))
    }

    /// The error of a call that did not succeed.
    pub fn failed<S: AsRef<str>>(
        &self,
        args: &[S],
        out: &Output,
        deadline: Duration,
    ) -> BackendError {
        let words: Vec<&str> = args.iter().map(AsRef::as_ref).take(3).collect();
        let detail = if out.ending == Ending::TimedOut {
            format!("no answer within {} s", deadline.as_secs())
        } else {
            last_lines(&out.stderr, 3)
        };
        if out.ending == Ending::TimedOut || unreachable(&out.stderr) {
            // The API server does not answer: the cluster is lost to this run
            // (SPEC §25), which the orchestrator re-queues elsewhere.
            return BackendError::Io(format!("host lost: {}: {detail}", self.cluster));
        }
        BackendError::Failed {
            command: format!("kubectl {} ({})", words.join(" "), self.cluster),
            detail,
        }
    }
}

/// Whether kubectl's `stderr` says the API server could not be reached.
pub fn unreachable(stderr: &str) -> bool {
    [
        "Unable to connect to the server",
        "The connection to the server",
        "connection refused",
        "i/o timeout",
        "no route to host",
        "TLS handshake timeout",
    ]
    .iter()
    .any(|words| stderr.contains(words))
}

/// Runs `invocation` for at most `deadline`.
fn run(
    invocation: &Invocation,
    deadline: Duration,
    interrupt: Interrupt,
) -> Result<Output, BackendError> {
    let mut stdout = String::new();
    let mut on_line = |line: &[u8]| {
        if stdout.len() < (1 << 20) {
            stdout.push_str(&String::from_utf8_lossy(line));
            stdout.push('\n');
        }
    };
    let mut capture = Capture::in_memory(16 * 1024).with_lines(64 * 1024, &mut on_line);
    let finished = process::run(
        invocation,
        &Limits::wall(deadline, interrupt),
        &mut capture,
        Stop::Terminate,
    )
    .map_err(|e| missing(&e))?;
    let stderr = capture.stderr();
    drop(capture);
    Ok(Output {
        ok: finished.success(),
        code: finished.code(),
        ending: finished.ending,
        stdout,
        stderr,
    })
}

/// An exec's script: the working directory as its first argument, then the
/// variables as `NAME=value` lines on stdin up to an empty line, then the command
/// (its own stdin is what follows).
pub const EXEC_SCRIPT: &str = r#"dir=$1; shift
while IFS= read -r line && [ -n "$line" ]; do export "$line"; done
if [ -n "$dir" ]; then cd "$dir" || exit 127; fi
exec "$@""#;

/// The head of an exec's stdin: its variables, one `NAME=value` a line, ended by an
/// empty line. A value with a newline cannot go this way.
pub fn variables_head<'a>(
    vars: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Vec<u8>, BackendError> {
    let mut head = Vec::new();
    for (name, value) in vars {
        let name_ok = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !name_ok {
            return Err(BackendError::Io(format!(
                "variable {name:?}: not a name a shell can export"
            )));
        }
        if value.contains(['\n', '\0']) {
            return Err(BackendError::Io(format!(
                "variable {name}: its value has a newline, which an exec on a cluster cannot carry"
            )));
        }
        head.extend_from_slice(format!("{name}={value}\n").as_bytes());
    }
    head.push(b'\n');
    Ok(head)
}

/// A kubectl that could not be run, in words naming it (the Docker engine's
/// `CliMissing` names the docker CLI).
pub(crate) fn missing(e: &dyn std::fmt::Display) -> BackendError {
    BackendError::Io(format!(
        "kubectl could not be run: {e}; install kubectl, or name it in {PROGRAM_VAR}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_go_as_lines_ended_by_an_empty_one() {
        let head = variables_head([("A", "1"), ("KEY", "s3 cret=x")]).unwrap();
        assert_eq!(head, b"A=1\nKEY=s3 cret=x\n\n");
        assert_eq!(variables_head([]).unwrap(), b"\n");
    }

    #[test]
    fn values_that_cannot_travel_are_refused() {
        let e = variables_head([("A", "1\n2")]).unwrap_err().to_string();
        assert!(e.contains("variable A") && e.contains("newline"), "{e}");
        let e = variables_head([("A-B", "1")]).unwrap_err().to_string();
        assert!(e.contains("\"A-B\""), "{e}");
    }

    #[test]
    fn an_api_server_that_does_not_answer_is_a_lost_host() {
        let kubectl = Kubectl::new(Cluster::new("ctx", "ns", None).unwrap());
        let out = |stderr: &str, ending| Output {
            ok: false,
            code: Some(1),
            ending,
            stdout: String::new(),
            stderr: stderr.into(),
        };
        let refused = "The connection to the server 10.0.0.1:6443 was refused - did you specify the right host or port?";
        let e = kubectl.failed(
            &["get", "pod"],
            &out(refused, Ending::Exited),
            Duration::from_secs(5),
        );
        assert_eq!(e.to_string(), format!("host lost: k8s://ctx/ns: {refused}"));
        let e = kubectl.failed(
            &["get", "pod"],
            &out("", Ending::TimedOut),
            Duration::from_secs(5),
        );
        assert_eq!(
            e.to_string(),
            "host lost: k8s://ctx/ns: no answer within 5 s"
        );
        let e = kubectl.failed(
            &["create"],
            &out("Error from server (Forbidden): nope", Ending::Exited),
            Duration::from_secs(5),
        );
        assert_eq!(
            e.to_string(),
            "`kubectl create (k8s://ctx/ns)` failed: Error from server (Forbidden): nope"
        );
    }

    #[test]
    fn every_call_names_context_and_namespace_and_no_secret() {
        let kubectl = Kubectl::new(Cluster::new("ctx", "ns", None).unwrap());
        let shown = kubectl.command(&["get", "pods"]).display();
        assert!(
            shown.contains("--context ctx --namespace ns get pods"),
            "{shown}"
        );
    }

    #[test]
    fn the_exec_script_exports_the_head_and_runs_the_command_in_its_directory() {
        let dir = std::env::temp_dir();
        let mut stdin = variables_head([("GREETING", "hello world"), ("B", "x=y")]).unwrap();
        stdin.extend_from_slice(b"rest of stdin\n");
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", EXEC_SCRIPT, "sh", &dir.display().to_string()])
            .args(["/bin/sh", "-c", "echo \"$GREETING|$B|$(pwd)\"; cat"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(&stdin)?;
                child.wait_with_output()
            })
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let pwd = dir.canonicalize().unwrap();
        assert_eq!(
            text,
            format!("hello world|x=y|{}\nrest of stdin\n", pwd.display())
        );
    }
}
