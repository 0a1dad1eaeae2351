//! Commands the web view starts, as an IDE would: `agent-runner plan` for the chat
//! box's plan toggle, and `agent-runner orchestrate` for the "Start orchestrator"
//! button. Each is this same binary as a child process (through `process::run`, on
//! a thread of its own that waits for it), so it writes the workspace files exactly
//! as on the command line. When the server stops (SIGINT/SIGTERM) the children get
//! SIGTERM and are waited for; if the server is killed outright they get SIGTERM
//! from the kernel (`die_with_parent`).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Capture, Finished, Invocation, Limits, Stop};
use agent_runner_core::text::escape_controls;
use agent_runner_core::timestamp::Timestamp;

/// Most bytes of a plan's stdout kept.
const MAX_PLAN_OUTPUT: usize = 64 * 1024;
/// Plans remembered.
const KEPT_PLANS: usize = 10;
/// Longest a plan may take.
const PLAN_WALL: Duration = Duration::from_secs(30 * 60);
/// Time an orchestrator gets to stop its attempts after SIGTERM (their runners get
/// 60 s to clean up).
const ORCHESTRATOR_GRACE: Duration = Duration::from_secs(75);

/// How a child is doing.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum State {
    Running,
    Succeeded,
    Failed,
}

/// One `plan` started from the chat box.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PlanRun {
    pub(crate) id: u64,
    pub(crate) message: String,
    pub(crate) state: State,
    pub(crate) started_at: String,
    /// "exit status 1" and the like, once ended.
    pub(crate) exit: Option<String>,
    /// What it printed on stdout (control characters shown escaped).
    pub(crate) output: String,
    /// The end of its stderr.
    pub(crate) errors: String,
}

/// The orchestrator started from the page.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OrchestratorRun {
    pub(crate) state: State,
    pub(crate) started_at: String,
    pub(crate) exit: Option<String>,
    /// Where its stderr (progress) goes.
    pub(crate) log: PathBuf,
}

#[derive(Default)]
struct Kept {
    plans: VecDeque<PlanRun>,
    next_plan: u64,
    orchestrator: Option<OrchestratorRun>,
}

/// The children of one server.
pub(crate) struct Children {
    exe: PathBuf,
    root: PathBuf,
    orchestrator_log: PathBuf,
    interrupt: Interrupt,
    kept: Arc<Mutex<Kept>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// Why a child was not started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotStarted {
    /// One of its kind still runs.
    Busy(String),
    /// The thread could not be started.
    Failed(String),
}

impl Children {
    /// Children that run `exe` on the workspace of `root`; an orchestrator's
    /// stderr is appended to `orchestrator_log`.
    pub(crate) fn new(
        exe: PathBuf,
        root: PathBuf,
        orchestrator_log: PathBuf,
        interrupt: Interrupt,
    ) -> Self {
        Children {
            exe,
            root,
            orchestrator_log,
            interrupt,
            kept: Arc::default(),
            threads: Mutex::default(),
        }
    }

    fn kept(&self) -> MutexGuard<'_, Kept> {
        lock(&self.kept)
    }

    /// Starts `plan -w <root> -- <message>`; returns the run's id.
    pub(crate) fn start_plan(&self, message: &str) -> Result<u64, NotStarted> {
        let mut kept = self.kept();
        if let Some(running) = kept.plans.iter().find(|p| p.state == State::Running) {
            return Err(NotStarted::Busy(format!(
                "plan {} is still running; wait for it to finish",
                running.id
            )));
        }
        kept.next_plan += 1;
        let id = kept.next_plan;
        // The message on stdin: in an argv every user of this machine could read it.
        let invocation = Invocation::new(&self.exe.display().to_string())
            .args(["plan", "-w"])
            .arg(self.root.display().to_string())
            .args(["--", "-"])
            .stdin(message)
            .die_with_parent();
        let limits = Limits {
            wall: Some(PLAN_WALL),
            idle: None,
            grace: Duration::from_secs(10),
            interrupt: self.interrupt,
        };
        let shared = self.kept.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("plan {id}"))
            .spawn(move || {
                let mut output = Vec::new();
                let mut on_line = |line: &[u8]| {
                    if output.len() < MAX_PLAN_OUTPUT {
                        output.extend_from_slice(line);
                        output.push(b'\n');
                    }
                };
                let mut capture = Capture::in_memory(16 * 1024).with_lines(8192, &mut on_line);
                let finished = process::run(&invocation, &limits, &mut capture, Stop::Terminate);
                let errors = capture.stderr();
                drop(capture);
                let mut kept = lock(&shared);
                if let Some(run) = kept.plans.iter_mut().find(|p| p.id == id) {
                    (run.state, run.exit) = ended(&finished);
                    run.output = printable(&String::from_utf8_lossy(&output));
                    run.errors = printable(&errors);
                }
            });
        match spawned {
            Ok(handle) => {
                kept.plans.push_back(PlanRun {
                    id,
                    message: message.to_string(),
                    state: State::Running,
                    started_at: Timestamp::now().to_string(),
                    exit: None,
                    output: String::new(),
                    errors: String::new(),
                });
                while kept.plans.len() > KEPT_PLANS {
                    kept.plans.pop_front();
                }
                drop(kept);
                self.keep(handle);
                Ok(id)
            }
            Err(e) => Err(NotStarted::Failed(format!("cannot start a thread: {e}"))),
        }
    }

    /// Plan run `id`, if remembered.
    pub(crate) fn plan(&self, id: u64) -> Option<PlanRun> {
        self.kept().plans.iter().find(|p| p.id == id).cloned()
    }

    /// Starts `orchestrate -w <root>`; the caller has checked that none runs.
    pub(crate) fn start_orchestrator(&self) -> Result<(), NotStarted> {
        let mut kept = self.kept();
        if kept
            .orchestrator
            .as_ref()
            .is_some_and(|o| o.state == State::Running)
        {
            return Err(NotStarted::Busy(
                "the orchestrator started here still runs".into(),
            ));
        }
        let invocation = Invocation::new(&self.exe.display().to_string())
            .args(["orchestrate", "-w"])
            .arg(self.root.display().to_string())
            .stderr_to(&self.orchestrator_log)
            .die_with_parent();
        let limits = Limits {
            wall: None,
            idle: None,
            grace: ORCHESTRATOR_GRACE,
            interrupt: self.interrupt,
        };
        let shared = self.kept.clone();
        let spawned = std::thread::Builder::new()
            .name("orchestrator".into())
            .spawn(move || {
                let mut capture = Capture::in_memory(4096);
                let finished = process::run(&invocation, &limits, &mut capture, Stop::Terminate);
                if let Some(run) = lock(&shared).orchestrator.as_mut() {
                    (run.state, run.exit) = ended(&finished);
                }
            });
        match spawned {
            Ok(handle) => {
                kept.orchestrator = Some(OrchestratorRun {
                    state: State::Running,
                    started_at: Timestamp::now().to_string(),
                    exit: None,
                    log: self.orchestrator_log.clone(),
                });
                drop(kept);
                self.keep(handle);
                Ok(())
            }
            Err(e) => Err(NotStarted::Failed(format!("cannot start a thread: {e}"))),
        }
    }

    /// The orchestrator started here, if any.
    pub(crate) fn orchestrator(&self) -> Option<OrchestratorRun> {
        self.kept().orchestrator.clone()
    }

    /// Waits for every child to end (after the interrupt stopped them).
    pub(crate) fn wait(&self) {
        let handles: Vec<JoinHandle<()>> = std::mem::take(&mut *lock(&self.threads));
        for handle in handles {
            let _ = handle.join();
        }
    }

    fn keep(&self, handle: JoinHandle<()>) {
        let mut threads = lock(&self.threads);
        threads.retain(|h| !h.is_finished());
        threads.push(handle);
    }
}

/// `text` with control characters other than newlines shown escaped (a plan's
/// output may hold terminal escapes).
fn printable(text: &str) -> String {
    text.split('\n')
        .map(escape_controls)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A lock that a panicked holder did not poison for good: the data here stays
/// consistent between statements.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn ended(finished: &Result<Finished, agent_runner_core::Error>) -> (State, Option<String>) {
    match finished {
        Ok(f) if f.success() => (State::Succeeded, Some("exit status 0".into())),
        Ok(f) => (
            State::Failed,
            Some(match (f.ending, f.code()) {
                (process::Ending::Exited, Some(code)) => format!("exit status {code}"),
                (process::Ending::Exited, None) => "killed by a signal".into(),
                (process::Ending::TimedOut, _) => "stopped: it ran too long".into(),
                (process::Ending::Stalled, _) => "stopped: it stalled".into(),
                (process::Ending::Interrupted, _) => "stopped with the server".into(),
            }),
        ),
        Err(e) => (State::Failed, Some(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for agent-runner: prints its arguments and, for `plan`, its
    /// stdin, then sleeps if asked.
    fn stub(dir: &std::path::Path) -> PathBuf {
        let exe = dir.join("agent-runner");
        std::fs::write(
            &exe,
            "#!/bin/sh\nfor a in \"$@\"; do echo \"[$a]\"; done\n[ \"$1\" = plan ] && echo \"stdin: $(cat)\"\necho progress >&2\n[ \"$1\" = orchestrate ] && exec sleep 60\nexit 0\n",
        )
        .unwrap();
        std::process::Command::new("chmod")
            .args(["+x", exe.to_str().unwrap()])
            .status()
            .unwrap();
        exe
    }

    fn wait_until(mut done: impl FnMut() -> bool) {
        let until = std::time::Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(std::time::Instant::now() < until, "timed out");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_plan_message_goes_on_stdin_never_in_an_argument_and_children_stop_with_the_server() {
        let dir =
            std::env::temp_dir().join(format!("ar-children-{}", crate::store::id::random_hex(8)));
        std::fs::create_dir_all(&dir).unwrap();
        let interrupt = Interrupt::manual();
        let children = Children::new(stub(&dir), "/ws root".into(), dir.join("o.log"), interrupt);
        let id = children.start_plan("--patch -w /elsewhere x").unwrap();
        wait_until(|| children.plan(id).unwrap().state != State::Running);
        let run = children.plan(id).unwrap();
        assert_eq!(run.state, State::Succeeded);
        assert_eq!(
            run.output,
            "[plan]\n[-w]\n[/ws root]\n[--]\n[-]\nstdin: --patch -w /elsewhere x\n"
        );
        assert_eq!(run.errors, "progress\n");
        children.start_orchestrator().unwrap();
        assert!(matches!(
            children.start_orchestrator(),
            Err(NotStarted::Busy(_))
        ));
        wait_until(|| std::fs::read_to_string(dir.join("o.log")).is_ok_and(|l| l == "progress\n"));
        interrupt.trigger();
        children.wait();
        let orchestrator = children.orchestrator().unwrap();
        assert_eq!(
            (orchestrator.state, orchestrator.exit.as_deref()),
            (State::Failed, Some("stopped with the server"))
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
