//! The lines of a task file, `tasks/<task-id>.jsonl` (SPEC §11), and their fold into
//! the current task. Each line has a `"type"`: `task` (the first line), `update`,
//! `deleted`, `attempt`. Lines of other types are skipped, so newer writers can add
//! some; a line that does not parse is skipped with a warning (a torn last line after
//! a crash, or a bad write by another program). Lines written by a plan edit carry a
//! stamp and count only once that edit committed (`commits`).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::commits::{Commits, Stamp};
use super::pinned_test::TestSource;
use super::plan_fields::PlanFields;
use agent_runner_core::usage::{Account, ModelUsage};

/// The `task` line: the seed's record plus optional plan fields (SPEC §13).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: String,
    pub(crate) workspace_id: String,
    pub title: String,
    pub raw_prompt: String,
    pub created_at: String,
    #[serde(flatten)]
    pub plan: PlanFields,
    /// A run of an evaluation (SPEC §26): where its clone starts and its settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval: Option<super::eval_task::EvalTask>,
}

/// The fields an `update` line may change; absent means unchanged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskChanges {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) raw_prompt: Option<String>,
    #[serde(flatten)]
    pub(crate) plan: PlanFields,
}

/// An `update` line (a plan_patch update).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Update {
    pub(crate) at: String,
    #[serde(flatten)]
    pub(crate) changes: TaskChanges,
}

/// A `deleted` line (soft delete).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deleted {
    pub at: String,
    #[serde(default)]
    pub reason: String,
}

/// An `attempt` line (TaskAttempt): one run of a job, whatever its outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    pub attempt_id: String,
    pub job_id: String,
    pub(crate) task_id: String,
    pub status: AttemptStatus,
    pub started_at: String,
    pub(crate) finished_at: String,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The runner's result JSON (SPEC §8) as it printed it, when it printed one.
    /// Kept unparsed: listing many tasks must not build every result's tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Box<RawValue>>,
    /// Path of the TaskConfig YAML (absent when the builder failed before writing it).
    pub(crate) task_config: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    pub(crate) log_dir: String,
    /// The job whose attempt this one continued (SPEC §19 resume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) resumed_from: Option<String>,
    /// The job whose clone this attempt ran in, when not its own (a resumed
    /// attempt continues in the clone of the first one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) clone_job: Option<String>,
    /// Where the test command came from (SPEC §16); absent when the attempt failed
    /// before it was chosen, or in lines written before the key existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_source: Option<TestSource>,
    /// The result's `verified`: COMPLETE and the last test passed (SPEC §16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) verified: Option<bool>,
    /// What the run's paid calls used: the result's `usage` (SPEC §15). Read
    /// leniently: a line another program wrote with a `usage` of another shape is
    /// still an attempt.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub usage: Option<Account>,
    /// The run's limits: the result's `budget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<serde_json::Value>,
    /// The Task Builder's paid call, priced with the workspace's prices.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub builder_usage: Option<ModelUsage>,
    /// Its delivery (SPEC §23): the first on this line, the latest of a
    /// `delivery` line once retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<super::delivery::Delivery>,
    /// This attempt is one try of a best of N run (SPEC §23).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub try_of: Option<super::tries::TryOf>,
    /// This attempt is the judged end of a best of N run: its tries compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tries: Option<super::tries::Comparison>,
    /// The user's message this attempt went on with (SPEC §23): a follow-up, or
    /// why the plan before was rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The Docker host it ran on (SPEC §22), when the orchestrator had hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// `T` if the value is one, else None (never an error).
fn lenient<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}

/// How an attempt ended, as recorded (the runner's status, unless bringing the
/// branch back or an interrupt failed it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttemptStatus {
    Succeeded,
    Failed,
    /// The job was removed from the queue before it ran (`task stop`, SPEC §19).
    Cancelled,
    /// Planned, waiting for `task approve` or `task reject` (`runner.meta.approve_plan`,
    /// SPEC §23): no sandbox was started.
    #[serde(rename = "awaiting_approval")]
    AwaitingApproval,
}

impl AttemptStatus {
    /// The name in the task file and the result file.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptStatus::Succeeded => "succeeded",
            AttemptStatus::Failed => "failed",
            AttemptStatus::Cancelled => "cancelled",
            AttemptStatus::AwaitingApproval => "awaiting_approval",
        }
    }
}

impl Attempt {
    /// The line of an attempt of job `job_id` of task `task_id` that ended just now
    /// with `status`, `duration_ms` after `started_at`: a new attempt id, its files
    /// in `log_dir` (its TaskConfig as `task-config.yaml` there), and nothing yet of
    /// what a runner, a job or a delivery adds, which its caller sets.
    pub(crate) fn ended(
        job_id: &str,
        task_id: &str,
        status: AttemptStatus,
        started_at: String,
        duration_ms: u64,
        log_dir: &std::path::Path,
    ) -> Attempt {
        Attempt {
            attempt_id: super::id::new_attempt_id(),
            job_id: job_id.to_string(),
            task_id: task_id.to_string(),
            status,
            started_at,
            finished_at: agent_runner_core::timestamp::Timestamp::now().to_string(),
            duration_ms,
            error: None,
            result: None,
            task_config: log_dir.join("task-config.yaml").display().to_string(),
            branch: None,
            log_dir: log_dir.display().to_string(),
            resumed_from: None,
            clone_job: None,
            test_source: None,
            verified: None,
            usage: None,
            budget: None,
            builder_usage: None,
            delivery: None,
            try_of: None,
            tries: None,
            message: None,
            host: None,
        }
    }

    /// The job whose runner did this attempt's work: its own, or for the judged
    /// line of a best of N run (SPEC §23) the winning try's, whose log directory
    /// holds the note, the TaskConfig and the runner's state. None when a judged
    /// line has no winner, or the job named is no valid id.
    pub fn work_job(&self) -> Option<&str> {
        // A line anyone could forge: its job id is a path's part only when it is an id.
        let Some(tries) = &self.tries else {
            return Some(self.job_id.as_str()).filter(|job| super::id::is_valid(job));
        };
        let winner = tries.winner?;
        tries
            .rows
            .iter()
            .find(|row| row.k == winner)
            .map(|row| row.job_id.as_str())
            .filter(|job| super::id::is_valid(job))
    }

    /// The result JSON, parsed (None if absent or not JSON).
    pub fn result_value(&self) -> Option<serde_json::Value> {
        serde_json::from_str(self.result.as_ref()?.get()).ok()
    }

    /// Whether the attempt succeeded with its test passing (SPEC §16). A line
    /// written before `verified` existed is judged by its result: COMPLETE with the
    /// last test passed is what `verified` means.
    pub fn is_verified(&self) -> bool {
        if self.status != AttemptStatus::Succeeded {
            return false;
        }
        self.verified.unwrap_or_else(|| {
            self.result_value()
                .is_some_and(|r| r["state"] == "COMPLETE" && r["validation"]["overall"] == "passed")
        })
    }

    /// Tokens of the run and of the Task Builder together; None when neither
    /// recorded any usage.
    pub fn total_tokens(&self) -> Option<u64> {
        let run = self.usage.as_ref().map(|u| u.total_tokens);
        let builder = self.builder_usage.as_ref().map(|b| b.total_tokens());
        match (run, builder) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        }
    }

    /// The cost of the run and of the Task Builder together; None when either's
    /// is not known (or the runner recorded no usage).
    pub fn cost_usd(&self) -> Option<f64> {
        let run = self.usage.as_ref()?.cost_usd?;
        match &self.builder_usage {
            None => Some(run),
            Some(builder) => Some(agent_runner_core::usage::account::round(
                run + builder.cost_usd?,
            )),
        }
    }
}

/// One line of a task file.
#[derive(Debug, Clone)]
pub(crate) enum Line {
    Task(TaskRecord),
    Update(Update),
    Deleted(Deleted),
    /// Boxed: an attempt (its result, its usage) is several times the other lines.
    Attempt(Box<Attempt>),
    /// `task deliver` retried an attempt's delivery.
    Delivery(super::delivery::Delivery),
    /// A type this version does not know; skipped.
    Other(String),
}

#[derive(Serialize)]
struct Typed<'a, T> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    body: &'a T,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    stamp: Option<&'a Stamp>,
}

#[derive(Deserialize)]
struct Kind {
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// What our own writer puts first on an attempt line: the fast path when reading.
const ATTEMPT_PREFIX: &[u8] = br#"{"type":"attempt","#;

/// What an attempt line says about spending (SPEC §15), read without the rest of
/// the line (its result is skipped, not built).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct AttemptSpend {
    pub(crate) started_at: String,
    #[serde(default, deserialize_with = "lenient")]
    pub(crate) usage: Option<Account>,
    #[serde(default, deserialize_with = "lenient")]
    pub(crate) builder_usage: Option<ModelUsage>,
}

impl AttemptSpend {
    /// The spending of `line` if it is an attempt line (None for other lines and
    /// lines that do not parse).
    pub(crate) fn of(line: &[u8]) -> Option<AttemptSpend> {
        if !line.starts_with(ATTEMPT_PREFIX) {
            // Another writer's attempt line: the type may come anywhere.
            let kind: Kind = serde_json::from_slice(line).ok()?;
            if kind.kind.as_deref() != Some("attempt") {
                return None;
            }
        }
        serde_json::from_slice(line).ok()
    }
}

impl Line {
    /// The line as JSON, `"type"` first, without a newline.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        self.to_json_stamped(None)
    }

    /// The line as JSON with a plan edit's stamp (`commits`).
    pub(crate) fn to_json_stamped(&self, stamp: Option<&Stamp>) -> Vec<u8> {
        fn typed<T: Serialize>(kind: &'static str, body: &T, stamp: Option<&Stamp>) -> Vec<u8> {
            serde_json::to_vec(&Typed { kind, body, stamp }).unwrap_or_default()
        }
        match self {
            Line::Task(r) => typed("task", r, stamp),
            Line::Update(u) => typed("update", u, stamp),
            Line::Deleted(d) => typed("deleted", d, stamp),
            Line::Attempt(a) => typed("attempt", a, stamp),
            Line::Delivery(d) => typed("delivery", d, stamp),
            Line::Other(kind) => {
                format!("{{\"type\":{}}}", serde_json::Value::from(kind.as_str())).into_bytes()
            }
        }
    }

    /// Parses one line; the error says what is wrong.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Line, LineError> {
        if bytes.starts_with(ATTEMPT_PREFIX) {
            return Ok(Line::Attempt(serde_json::from_slice(bytes)?));
        }
        let kind: Kind = serde_json::from_slice(bytes)?;
        let error = LineError::Json;
        match kind.kind.as_deref() {
            Some("task") => serde_json::from_slice(bytes).map(Line::Task).map_err(error),
            Some("update") => serde_json::from_slice(bytes)
                .map(Line::Update)
                .map_err(error),
            Some("deleted") => serde_json::from_slice(bytes)
                .map(Line::Deleted)
                .map_err(error),
            Some("attempt") => serde_json::from_slice(bytes)
                .map(|attempt| Line::Attempt(Box::new(attempt)))
                .map_err(error),
            Some("delivery") => serde_json::from_slice(bytes)
                .map(Line::Delivery)
                .map_err(error),
            Some(other) => Ok(Line::Other(other.to_string())),
            None => Err(LineError::NoType),
        }
    }
}

/// What is wrong with a line of a task file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LineError {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("no \"type\"")]
    NoType,
}

/// A task as its lines say now.
#[derive(Debug, Clone)]
pub struct TaskView {
    pub record: TaskRecord,
    pub deleted: Option<Deleted>,
    /// In the order they were recorded (with `Depth::Latest`, only the latest,
    /// without its result).
    pub attempts: Vec<Attempt>,
    /// How many attempts the file records.
    pub(crate) attempt_count: usize,
}

impl TaskView {
    /// The latest attempt that ran, if any: a cancelled job never ran, and leaves
    /// the task as it was.
    pub fn latest(&self) -> Option<&Attempt> {
        self.attempts
            .iter()
            .rev()
            .find(|a| a.status != AttemptStatus::Cancelled && a.try_of.is_none())
    }
}

/// How much of a task file a reader needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Depth {
    /// Every attempt, with its result.
    Full,
    /// The record and the latest attempt that ran, without its result: what a list
    /// shows.
    /// Earlier attempt lines are counted, not parsed.
    Latest,
}

/// An attempt line not parsed yet (`Depth::Latest`), or parsed.
enum Pending<'a> {
    Raw {
        number: usize,
        line: &'a [u8],
        last: bool,
    },
    Parsed(Box<Attempt>),
}

/// Folds the lines of a task file (`name` in warnings) into the current task, with
/// the plan lines `commits` says count; None when there is no valid `task` line
/// first (or it belongs to a plan edit that did not commit).
pub(crate) fn fold(name: &str, bytes: &[u8], depth: Depth, commits: &Commits) -> Option<TaskView> {
    let mut view: Option<TaskView> = None;
    let mut pending: Vec<Pending> = Vec::new();
    let mut deliveries: Vec<super::delivery::Delivery> = Vec::new();
    for (number, line, last) in agent_runner_core::fs::jsonl::lines(bytes) {
        if depth == Depth::Latest && view.is_some() && line.starts_with(ATTEMPT_PREFIX) {
            pending.push(Pending::Raw { number, line, last });
            continue;
        }
        let parsed = match Line::parse(line) {
            Ok(parsed) => parsed,
            Err(e) => {
                warn_invalid(name, number, last, &e);
                continue;
            }
        };
        if !matches!(parsed, Line::Attempt(_) | Line::Delivery(_))
            && !commits.counts(&Commits::stamp_of(line))
        {
            if view.is_none() {
                log::debug!("{name}: written by a plan edit that did not commit; no task");
                return None;
            }
            continue;
        }
        match (&mut view, parsed) {
            (None, Line::Task(record)) => {
                view = Some(TaskView {
                    record,
                    deleted: None,
                    attempts: Vec::new(),
                    attempt_count: 0,
                })
            }
            (None, _) => {
                log::warn!("{name}:{number}: the first record is not a `task` line; file ignored");
                return None;
            }
            (Some(_), Line::Task(_)) => {
                log::warn!("{name}:{number}: a second `task` line ignored");
            }
            (Some(v), Line::Update(update)) => apply(&mut v.record, update.changes),
            (Some(v), Line::Deleted(deleted)) => v.deleted = Some(deleted),
            (Some(v), Line::Attempt(attempt)) => match depth {
                Depth::Full => v.attempts.push(*attempt),
                Depth::Latest => pending.push(Pending::Parsed(attempt)),
            },
            (Some(_), Line::Delivery(delivery)) => deliveries.push(delivery),
            (Some(_), Line::Other(_)) => {}
        }
    }
    let mut view = view?;
    if depth == Depth::Latest {
        view.attempt_count = pending.len();
        while let Some(candidate) = pending.pop() {
            let attempt = match candidate {
                Pending::Parsed(attempt) => *attempt,
                Pending::Raw { number, line, last } => match Line::parse(line) {
                    Ok(Line::Attempt(attempt)) => *attempt,
                    Ok(_) => continue,
                    Err(e) => {
                        warn_invalid(name, number, last, &e);
                        view.attempt_count -= 1;
                        continue;
                    }
                },
            };
            if attempt.status == AttemptStatus::Cancelled {
                continue;
            }
            // A list drops the result; what it says about verification stays.
            let verified = Some(attempt.is_verified());
            view.attempts.push(Attempt {
                result: None,
                verified,
                ..attempt
            });
            break;
        }
    } else {
        view.attempt_count = view.attempts.len();
    }
    // A retried delivery is the attempt's latest.
    for delivery in deliveries {
        if let Some(a) = view
            .attempts
            .iter_mut()
            .find(|a| a.attempt_id == delivery.attempt_id)
        {
            a.delivery = Some(delivery);
        }
    }
    Some(view)
}

fn warn_invalid(name: &str, number: usize, last: bool, error: &LineError) {
    let what = if last {
        "torn or invalid last line"
    } else {
        "invalid line"
    };
    log::warn!("{name}:{number}: {what} ignored ({error})");
}

impl TaskRecord {
    /// A task as a chat prompt makes it: no plan fields.
    pub(crate) fn new(
        id: String,
        workspace_id: String,
        title: String,
        raw_prompt: String,
    ) -> TaskRecord {
        TaskRecord {
            id,
            workspace_id,
            title,
            raw_prompt,
            created_at: agent_runner_core::timestamp::Timestamp::now().to_string(),
            plan: PlanFields::default(),
            eval: None,
        }
    }

    /// The record with an `update` line's changes applied.
    pub(crate) fn apply(&mut self, changes: TaskChanges) {
        apply(self, changes)
    }
}

fn apply(record: &mut TaskRecord, changes: TaskChanges) {
    fn set<T>(field: &mut T, value: Option<T>) {
        if let Some(v) = value {
            *field = v;
        }
    }
    set(&mut record.title, changes.title);
    set(&mut record.raw_prompt, changes.raw_prompt);
    record.plan.apply(changes.plan);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn record(id: &str) -> TaskRecord {
        TaskRecord {
            created_at: "2025-12-07T08:00:00.000Z".into(),
            ..TaskRecord::new(
                id.into(),
                "abcd1234ef56".into(),
                "TODO アプリを作成して".into(),
                "TODO アプリを作成して".into(),
            )
        }
    }

    pub(crate) fn attempt(job: &str, status: AttemptStatus) -> Attempt {
        Attempt {
            attempt_id: format!("a-{job}"),
            job_id: job.into(),
            task_id: "t-1".into(),
            status,
            started_at: "2025-12-07T08:00:00.000Z".into(),
            finished_at: "2025-12-07T08:00:01.500Z".into(),
            duration_ms: 1500,
            error: (status == AttemptStatus::Failed).then(|| "boom".into()),
            result: Some(
                RawValue::from_string(r#"{"task_id":"t-1","summary":"done"}"#.into()).unwrap(),
            ),
            task_config: "/m/logs/j/task-config.yaml".into(),
            branch: None,
            log_dir: "/m/logs/j".into(),
            resumed_from: None,
            clone_job: None,
            test_source: None,
            verified: None,
            usage: None,
            budget: None,
            builder_usage: None,
            delivery: None,
            try_of: None,
            tries: None,
            message: None,
            host: None,
        }
    }

    fn file(lines: &[Line]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for line in lines {
            bytes.extend(line.to_json());
            bytes.push(b'\n');
        }
        bytes
    }

    #[test]
    fn lines_are_written_with_the_type_first_and_read_back() {
        let json = String::from_utf8(Line::Task(record("t-1")).to_json()).unwrap();
        assert_eq!(
            json,
            r#"{"type":"task","id":"t-1","workspace_id":"abcd1234ef56","title":"TODO アプリを作成して","raw_prompt":"TODO アプリを作成して","created_at":"2025-12-07T08:00:00.000Z"}"#
        );
        let json = Line::Attempt(Box::new(attempt("j-1", AttemptStatus::Failed))).to_json();
        assert!(json.starts_with(ATTEMPT_PREFIX));
        let Line::Attempt(back) = Line::parse(&json).unwrap() else {
            panic!()
        };
        assert_eq!(back.error.as_deref(), Some("boom"));
        assert_eq!(back.result_value().unwrap()["summary"], "done");
        // Another writer's key order takes the slow path to the same record.
        let other = br#"{"job_id":"j","attempt_id":"a","task_id":"t","status":"succeeded","type":"attempt","started_at":"s","finished_at":"f","duration_ms":3,"task_config":"c","log_dir":"l"}"#;
        let Line::Attempt(a) = Line::parse(other).unwrap() else {
            panic!()
        };
        assert_eq!((a.status, a.duration_ms), (AttemptStatus::Succeeded, 3));
        assert!(
            matches!(Line::parse(br#"{"type":"wbs_moved"}"#), Ok(Line::Other(k)) if k == "wbs_moved")
        );
        assert!(Line::parse(br#"{"id":"x"}"#).is_err());
    }

    #[test]
    fn spending_of_another_shape_is_dropped_not_the_attempt() {
        let line = br#"{"type":"attempt","attempt_id":"a","job_id":"j","task_id":"t","status":"failed","started_at":"2026-01-02T00:00:00.000Z","finished_at":"f","duration_ms":3,"task_config":"c","log_dir":"l","usage":{"meta":{"calls":"many"}},"builder_usage":[1],"budget":"none"}"#;
        let Line::Attempt(a) = Line::parse(line).unwrap() else {
            panic!()
        };
        assert!(a.usage.is_none() && a.builder_usage.is_none());
        assert_eq!(a.total_tokens(), None);
        let spend = AttemptSpend::of(line).unwrap();
        assert_eq!(spend.started_at, "2026-01-02T00:00:00.000Z");
        assert!(spend.usage.is_none() && spend.builder_usage.is_none());
        // Forged counts saturate instead of wrapping.
        let huge = br#"{"type":"attempt","attempt_id":"a","job_id":"j","task_id":"t","status":"failed","started_at":"s","finished_at":"f","duration_ms":3,"task_config":"c","log_dir":"l","usage":{"total_tokens":18446744073709551615,"cost_usd":1.0},"builder_usage":{"model":"m","input_tokens":18446744073709551615,"cost_usd":1.0}}"#;
        let Line::Attempt(a) = Line::parse(huge).unwrap() else {
            panic!()
        };
        assert_eq!(a.total_tokens(), Some(u64::MAX));
        assert_eq!(a.cost_usd(), Some(2.0));
        assert!(AttemptSpend::of(br#"{"type":"task","id":"t"}"#).is_none());
    }

    #[test]
    fn the_fold_applies_updates_deletes_and_attempts_in_order() {
        let mut bytes = file(&[
            Line::Task(record("t-1")),
            Line::Attempt(Box::new(attempt("j-1", AttemptStatus::Failed))),
            Line::Update(Update {
                at: "x".into(),
                changes: TaskChanges {
                    title: Some("New title".into()),
                    plan: PlanFields {
                        depends_on: Some(vec!["t-0".into()]),
                        ..PlanFields::default()
                    },
                    ..TaskChanges::default()
                },
            }),
            Line::Other("future".into()),
            Line::Attempt(Box::new(attempt("j-2", AttemptStatus::Succeeded))),
        ]);
        let view = fold("t-1.jsonl", &bytes, Depth::Full, &Commits::none()).unwrap();
        assert_eq!(view.record.title, "New title");
        assert_eq!(view.record.raw_prompt, "TODO アプリを作成して");
        assert_eq!(view.record.plan.depends_on, Some(vec!["t-0".to_string()]));
        assert_eq!(view.attempts.len(), 2);
        assert_eq!(view.latest().unwrap().job_id, "j-2");
        assert!(view.deleted.is_none());
        // A torn last line is ignored; the rest stands.
        bytes.extend_from_slice(br#"{"type":"deleted","at":"#);
        let view = fold("t-1.jsonl", &bytes, Depth::Full, &Commits::none()).unwrap();
        assert!(view.deleted.is_none() && view.attempts.len() == 2);
        bytes.extend_from_slice(b"\n");
        bytes.extend(
            Line::Deleted(Deleted {
                at: "y".into(),
                reason: "dup".into(),
            })
            .to_json(),
        );
        let view = fold("t-1.jsonl", &bytes, Depth::Full, &Commits::none()).unwrap();
        assert_eq!(view.deleted.unwrap().reason, "dup");
        // A list reads the same file to the same task, latest attempt only.
        let brief = fold("t-1.jsonl", &bytes, Depth::Latest, &Commits::none()).unwrap();
        assert_eq!(brief.record, view.record);
        assert_eq!((brief.attempt_count, brief.attempts.len()), (2, 1));
        assert_eq!(brief.latest().unwrap().job_id, "j-2");
        assert!(brief.latest().unwrap().result.is_none());
    }

    #[test]
    fn the_latest_valid_attempt_is_found_behind_a_torn_one() {
        let mut bytes = file(&[
            Line::Task(record("t-1")),
            Line::Attempt(Box::new(attempt("j-1", AttemptStatus::Failed))),
            Line::Attempt(Box::new(attempt("j-2", AttemptStatus::Succeeded))),
        ]);
        bytes.extend_from_slice(br#"{"type":"attempt","attempt_id":"a-3","job"#);
        let brief = fold("t", &bytes, Depth::Latest, &Commits::none()).unwrap();
        assert_eq!(brief.latest().unwrap().job_id, "j-2");
        assert_eq!(brief.attempt_count, 2);
        let full = fold("t", &bytes, Depth::Full, &Commits::none()).unwrap();
        assert_eq!(full.attempt_count, 2);
    }

    #[test]
    fn plan_lines_count_only_once_their_edit_committed() {
        let stamp = |patch: &str, revision| Stamp {
            plan_patch: patch.into(),
            plan_revision: revision,
        };
        let mut bytes = file(&[Line::Task(record("t-1"))]);
        let update = |title: &str| {
            Line::Update(Update {
                at: "x".into(),
                changes: TaskChanges {
                    title: Some(title.into()),
                    ..TaskChanges::default()
                },
            })
        };
        for (line, s) in [
            (update("committed"), stamp("p-1", 1)),
            (update("aborted"), stamp("p-2", 2)),
            (update("pending"), stamp("p-3", 3)),
        ] {
            bytes.extend(line.to_json_stamped(Some(&s)));
            bytes.push(b'\n');
        }
        let commits = |revision, aborted: &[&str]| Commits {
            revision,
            aborted: aborted.iter().map(|a| a.to_string()).collect(),
            unknown: false,
        };
        let title = |c: &Commits| fold("t", &bytes, Depth::Latest, c).unwrap().record.title;
        assert_eq!(title(&commits(0, &[])), "TODO アプリを作成して");
        assert_eq!(title(&commits(1, &[])), "committed");
        assert_eq!(title(&commits(2, &["p-2"])), "committed");
        assert_eq!(title(&commits(3, &["p-2"])), "pending");
        // A task created by an edit that never committed is no task.
        let created = Line::Task(record("t-2")).to_json_stamped(Some(&stamp("p-9", 4)));
        assert!(String::from_utf8_lossy(&created).starts_with(r#"{"type":"task","id":"t-2""#));
        assert!(
            String::from_utf8_lossy(&created)
                .ends_with(r#","plan_patch":"p-9","plan_revision":4}"#)
        );
        assert!(fold("t", &created, Depth::Full, &commits(3, &[])).is_none());
        assert!(fold("t", &created, Depth::Full, &commits(4, &[])).is_some());
        assert!(fold("t", &created, Depth::Full, &commits(5, &["p-9"])).is_none());
    }

    quickcheck::quickcheck! {
        // A list (Depth::Latest) skips parsing earlier attempt lines; whatever the
        // file holds, it must still name the attempt a full read ends with.
        fn a_list_and_a_full_read_agree_on_the_latest_attempt(ops: Vec<u8>) -> bool {
            let mut bytes = file(&[Line::Task(record("t-1"))]);
            for (n, op) in ops.iter().enumerate() {
                let job = format!("j-{n}");
                // Cancelled jobs (which never ran) too: neither read takes one.
                let status = if op / 6 % 2 == 0 {
                    AttemptStatus::Succeeded
                } else {
                    AttemptStatus::Cancelled
                };
                let line = Line::Attempt(Box::new(attempt(&job, status))).to_json();
                match op % 6 {
                    0 => bytes.extend(&line),
                    // Torn mid-write; the next append starts a fresh line.
                    1 => bytes.extend(&line[..usize::from(*op) % line.len()]),
                    // Another writer's spacing: not the fast path.
                    2 => {
                        bytes.push(b' ');
                        bytes.extend(&line);
                    }
                    3 => bytes.extend(br#"{"type":"attempt","attempt_id":1}"#),
                    4 => {
                        let deleted = Deleted { at: job, reason: String::new() };
                        bytes.extend(&Line::Deleted(deleted).to_json());
                    }
                    _ => bytes.extend(&ops[..n]),
                }
                bytes.push(b'\n');
            }
            let full = fold("t", &bytes, Depth::Full, &Commits::none());
            let brief = fold("t", &bytes, Depth::Latest, &Commits::none());
            let (Some(full), Some(brief)) = (full, brief) else {
                return false;
            };
            let job = |v: &TaskView| v.latest().map(|a| a.job_id.clone());
            job(&full) == job(&brief)
                && brief.latest().is_none_or(|a| a.result.is_none())
                && brief.record == full.record
                && brief.attempt_count >= full.attempt_count
        }
    }

    #[test]
    fn a_file_without_a_task_line_first_is_no_task() {
        let bytes = file(&[Line::Attempt(Box::new(attempt(
            "j-1",
            AttemptStatus::Failed,
        )))]);
        assert!(fold("x", &bytes, Depth::Full, &Commits::none()).is_none());
        assert!(fold("x", b"", Depth::Latest, &Commits::none()).is_none());
    }
}
