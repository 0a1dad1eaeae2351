//! The state file `.agent-runner/state/<id>.json` (SPEC §19): where a task stands
//! after every step, written atomically through `fs::Dir` like the note, so that
//! `run --resume` can go on from there after a failure, an interrupt or a SIGKILL.
//!
//! `{"version": 1, "task_id", "task_digest", "criteria", "loops", "history",
//! "usage", "elapsed_ms", "replans", "criteria_versions", "worker_session", ...}`:
//! what SPEC §15 and §16 count over the whole task goes on from here. The digest covers the resolved `task:` part
//! (id, repo, PRD, test, given criteria; the PRD as masked): a resume needs the
//! same task, while the runner settings (models, limits, budget) may change between
//! runs. Each part's digest is kept too, so a refusal names what changed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::context::{CriteriaVersion, Criterion, TaskContext, TaskState};
use crate::loop_record::LoopRecord;
use crate::resume::{MAX_LOOPS_KEPT, Resumed, WorkerSession};
use crate::session_host::SessionHost;
use agent_runner_core::fs::Dir;
use agent_runner_core::secret::Redactor;
use agent_runner_core::timestamp::Timestamp;
use agent_runner_core::usage::Account;
use agent_runner_settings::task::Task;

/// The format's version.
pub(crate) const VERSION: u32 = 1;
/// The directory of state files in `.agent-runner/`.
pub const DIR: &str = "state";
/// Largest state file read.
const MAX_STATE: u64 = 4 << 20;
/// Largest earlier note kept by a resumed run.
const MAX_EARLIER_NOTE: u64 = 4 << 20;

/// The state file; see the module documentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub(crate) version: u32,
    pub(crate) task_id: String,
    pub(crate) task_digest: String,
    /// The digest of each part of the task (`id`, `repo`, `prd`, `test`,
    /// `criteria`).
    #[serde(default)]
    pub(crate) task_parts: BTreeMap<String, String>,
    pub criteria: Vec<Criterion>,
    pub loops: u32,
    pub(crate) history: Vec<LoopRecord>,
    /// What the whole task used and cost so far (SPEC §15): a resumed run's
    /// budget counts it.
    #[serde(default)]
    pub(crate) usage: Account,
    /// How long the whole task has run so far: `max_duration_sec` counts it.
    #[serde(default)]
    pub elapsed_ms: u64,
    /// Replans so far (SPEC §16): `max_replans` counts the whole task.
    #[serde(default)]
    pub replans: u32,
    /// Every version of the criteria, the current one last (its criteria are
    /// `criteria`), for the note.
    #[serde(default)]
    pub criteria_versions: Vec<CriteriaVersion>,
    #[serde(default)]
    pub(crate) worker_session: Option<WorkerSession>,
    /// The docker host that keeps the worker's session (the copy transport, SPEC
    /// §22): a resume goes there.
    #[serde(default)]
    pub session_host: Option<SessionHost>,
    /// The task's state when this was written: a live one means its run did not
    /// get to an end (it was killed).
    pub(crate) state: TaskState,
    #[serde(default)]
    pub(crate) failure: Option<String>,
    /// When it last changed.
    #[serde(default)]
    pub(crate) updated_at: String,
}

impl State {
    /// The state of `ctx` now.
    pub fn of(ctx: &TaskContext) -> State {
        let (task_digest, task_parts) = digest(&ctx.task);
        let earlier = ctx.resumed.as_ref();
        let mut history: Vec<LoopRecord> = earlier.map(|r| r.history.clone()).unwrap_or_default();
        // Only the loops kept are made: a state file's count may be any number.
        let kept = ctx.loops.saturating_sub(MAX_LOOPS_KEPT as u32 - 1);
        let first = earlier.map_or(Some(1), |r| r.loops.checked_add(1));
        if let Some(first) = first {
            history.extend((first.max(kept)..=ctx.loops).map(|n| ctx.loop_record(n)));
        }
        if history.len() > MAX_LOOPS_KEPT {
            history.drain(..history.len() - MAX_LOOPS_KEPT);
        }
        let session = ctx
            .worker_runs
            .iter()
            .rev()
            .find_map(|run| run.transcript.session_id.clone())
            .filter(|id| !id.is_empty())
            .map(|id| WorkerSession {
                kind: ctx.task.worker.kind.name().into(),
                id,
            });
        State {
            version: VERSION,
            task_id: ctx.task.id.clone(),
            task_digest,
            task_parts,
            criteria: ctx.criteria.clone(),
            loops: ctx.loops,
            history,
            usage: ctx.task_usage(),
            elapsed_ms: u64::try_from(ctx.task_elapsed().as_millis()).unwrap_or(u64::MAX),
            replans: ctx.replans,
            criteria_versions: ctx.criteria_versions.clone(),
            worker_session: session.or_else(|| earlier.and_then(|r| r.worker_session.clone())),
            session_host: ctx.session_host.clone(),
            state: ctx.state,
            failure: ctx.failure.clone(),
            updated_at: Timestamp::now().to_string(),
        }
    }

    /// Whether it says what `other` says, when each was made aside.
    pub fn same_as(&self, other: &State) -> bool {
        let when = |s: &State| State {
            updated_at: String::new(),
            ..s.clone()
        };
        when(self) == when(other)
    }

    /// Writes it atomically into `.agent-runner/state/` (`private` is `.agent-runner`),
    /// `redactor`'s secrets masked (in their JSON spelling too).
    pub fn write(&self, private: &Dir, redactor: &Redactor) -> std::io::Result<()> {
        let json = serde_json::to_string(self).map_err(std::io::Error::other)?;
        private
            .subdir(DIR)?
            .write_atomic(&file_name(&self.task_id), redactor.redact(&json).as_bytes())
    }

    /// The state file of task `task_id`, if there is one.
    pub fn read(private: &Dir, task_id: &str) -> Result<Option<State>, Error> {
        let name = file_name(task_id);
        let path = || format!("{}/{DIR}/{name}", private.path().display());
        let dir = match private.existing(DIR) {
            Ok(dir) => dir,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(Error::StateDir {
                    path: path(),
                    source,
                });
            }
        };
        let bytes = match dir.read(&name, MAX_STATE + 1) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::StateRead(e)),
        };
        if bytes.len() as u64 > MAX_STATE {
            return Err(Error::StateTooLarge {
                path: path(),
                max: MAX_STATE,
            });
        }
        let mut state: State =
            serde_json::from_slice(&bytes).map_err(|source| Error::NotAStateFile {
                path: path(),
                source,
            })?;
        state.bound();
        if state.version != VERSION {
            return Err(Error::StateVersion {
                path: path(),
                version: state.version,
                reads: VERSION,
            });
        }
        Ok(Some(state))
    }

    /// The history cut as a run cuts it when it writes one: a hand-edited file's
    /// texts would otherwise go whole into every Meta request.
    fn bound(&mut self) {
        let extra = self.history.len().saturating_sub(MAX_LOOPS_KEPT);
        self.history.drain(..extra);
        self.history = std::mem::take(&mut self.history)
            .into_iter()
            .map(LoopRecord::bounded)
            .collect();
    }

    /// Why `task` cannot go on from this state, if it cannot: another task (the
    /// digest names the parts that changed), or one already COMPLETE.
    pub fn refusal(&self, task: &Task) -> Option<String> {
        if let Some(why) = self.changed(task) {
            return Some(why);
        }
        if self.state == TaskState::Complete {
            return Some(
                "its last run ended COMPLETE: there is nothing to resume (a follow-up --message goes on from there)".into(),
            );
        }
        None
    }

    /// Why this state is not `task`'s as it is now (another task, or changed).
    pub fn changed(&self, task: &Task) -> Option<String> {
        let (digest, parts) = digest(task);
        if self.task_id != task.id {
            return Some(format!(
                "the state file is task {}'s, not {}'s",
                self.task_id, task.id
            ));
        }
        if digest != self.task_digest {
            let changed: Vec<&str> = parts
                .iter()
                .filter(|(name, value)| self.task_parts.get(*name) != Some(value))
                .map(|(name, _)| name.as_str())
                .collect();
            let changed = if changed.is_empty() {
                "the task".to_string()
            } else {
                changed
                    .iter()
                    .map(|part| format!("task.{part}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Some(format!(
                "the task changed since its last run: {changed} differ; a resumed run must do the same task (run it without --resume to start over)"
            ));
        }
        None
    }

    /// What a run that resumes from this state carries over, with the note the
    /// runs before left (read from `private`).
    pub fn resumed(&self, private: &Dir, note_name: &str) -> Resumed {
        let previous = match (self.state, &self.failure) {
            (TaskState::Failed, Some(reason)) => format!("FAILED: {reason}"),
            (TaskState::Failed, None) => "FAILED".to_string(),
            (TaskState::Complete, _) => "COMPLETE; the user follows up".to_string(),
            (TaskState::AwaitingApproval, _) => {
                "AWAITING_APPROVAL: its plan is approved by this resume".to_string()
            }
            (state, _) => format!("in {state} without an end (killed?)"),
        };
        let earlier_note = private
            .read(note_name, MAX_EARLIER_NOTE)
            .ok()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
        Resumed {
            at: Timestamp::now(),
            loops: self.loops,
            previous,
            history: self.history.clone(),
            usage: self.usage.clone(),
            elapsed: std::time::Duration::from_millis(self.elapsed_ms),
            worker_session: self.worker_session.clone(),
            earlier_note,
            message: None,
        }
    }
}

/// `<task-id>.json`.
pub fn file_name(task_id: &str) -> String {
    format!("{task_id}.json")
}

/// The directory that keeps a task's worker session across containers, in
/// `.agent-runner/state/` (the container mounts it as the worker's home).
pub fn session_dir_name(task_id: &str) -> String {
    format!("{task_id}.session")
}

/// The digest of the resolved `task:` part, and of each part of it.
pub(crate) fn digest(task: &Task) -> (String, BTreeMap<String, String>) {
    let test = task.test.as_ref().map_or("none".to_string(), |t| {
        format!("{}\n{}\n{}", t.command, t.cwd, t.timeout.as_secs())
    });
    let parts: BTreeMap<String, String> = [
        ("id", task.id.clone()),
        ("repo", task.repo.display().to_string()),
        ("prd", task.prd.text.clone()),
        ("test", test),
        ("criteria", task.acceptance_criteria.join("\n")),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), hash(value.as_bytes())))
    .collect();
    let all: String = parts.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    (hash(all.as_bytes()), parts)
}

/// A stable digest (the name-based UUID of RFC 4122, SHA-1): the same text gives
/// the same value in every version of agent-runner.
fn hash(bytes: &[u8]) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, bytes)
        .simple()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(extra: &str) -> Task {
        agent_runner_settings::task::test_task(extra)
    }

    #[test]
    fn a_state_reads_back_and_refuses_another_task_naming_what_changed() {
        let top = agent_runner_core::fs::testing::scratch("state");
        let private = Dir::open(&top).unwrap();
        let mut ctx = TaskContext::new(task("  test:\n    command: make test\n"));
        ctx.criteria = vec![Criterion {
            id: "AC-1".into(),
            description: "it works".into(),
            passed: true,
        }];
        ctx.loops = 2;
        let state = State::of(&ctx);
        state.write(&private, &Redactor::default()).unwrap();
        let back = State::read(&private, &ctx.task.id).unwrap().unwrap();
        assert_eq!(back.criteria, ctx.criteria);
        assert_eq!((back.loops, back.state.as_str()), (2, "PENDING"));
        assert_eq!(back.history.len(), 2);
        assert_eq!(back.refusal(&ctx.task), None);
        let other = task("  test:\n    command: make check\n");
        let why = back.refusal(&other).unwrap();
        assert!(why.contains("task.test differ"), "{why}");
        assert!(!why.contains("task.prd"), "{why}");
        let mut done = back.clone();
        done.state = TaskState::Complete;
        assert!(
            done.refusal(&ctx.task)
                .unwrap()
                .contains("nothing to resume")
        );
        assert!(State::read(&private, "other-task").unwrap().is_none());
        // A hand-edited history is cut as a run would cut it: it goes to Meta.
        let mut edited: serde_json::Value = serde_json::from_slice(
            &std::fs::read(top.join(format!("state/{}.json", ctx.task.id))).unwrap(),
        )
        .unwrap();
        let huge = "x".repeat(200_000);
        let record = serde_json::json!({"loop": 1, "action": huge, "worker": {"outcome": huge, "summary": huge},
            "test": {"passed": false, "output_tail": huge}});
        edited["history"] = serde_json::Value::Array(vec![record; 3]);
        std::fs::write(top.join("state/edited.json"), edited.to_string()).unwrap();
        let back = State::read(&private, "edited").unwrap().unwrap();
        let text = serde_json::to_string(&back.history).unwrap();
        assert!(text.len() < 3 * 2048, "{}", text.len());
        std::fs::write(top.join("state/bad.json"), "{").unwrap();
        assert!(
            State::read(&private, "bad")
                .unwrap_err()
                .to_string()
                .contains("not a state file")
        );
        std::fs::remove_dir_all(top).unwrap();
    }

    #[test]
    fn secrets_are_masked_in_the_state_file_in_their_json_spelling_too() {
        let top = agent_runner_core::fs::testing::scratch("state-secret");
        let private = Dir::open(&top).unwrap();
        let secret = agent_runner_core::secret::Secret::new("s3cr\"et\\pass".into());
        let redactor = Redactor::new([&secret]);
        let mut ctx = TaskContext::new(task(""));
        ctx.criteria = vec![Criterion {
            id: "AC-1".into(),
            description: "log in with s3cr\"et\\pass".into(),
            passed: false,
        }];
        ctx.failure = Some("rejected s3cr\"et\\pass".into());
        State::of(&ctx).write(&private, &redactor).unwrap();
        let text = std::fs::read_to_string(top.join(DIR).join(file_name(&ctx.task.id))).unwrap();
        assert!(!text.contains("s3cr"), "{text}");
        let back = State::read(&private, &ctx.task.id).unwrap().unwrap();
        assert_eq!(back.criteria[0].description, "log in with ***");
        std::fs::remove_dir_all(top).unwrap();
    }

    #[test]
    fn the_digest_is_stable_and_follows_each_part() {
        let a = digest(&task(""));
        assert_eq!(a, digest(&task("")));
        assert_eq!(a.0.len(), 32);
        let b = digest(&task("  test:\n    command: true\n"));
        assert_ne!(a.0, b.0);
        let differing: Vec<&String> =
            a.1.iter()
                .filter(|(k, v)| b.1.get(*k) != Some(v))
                .map(|(k, _)| k)
                .collect();
        assert_eq!(differing, ["test"]);
    }
}
