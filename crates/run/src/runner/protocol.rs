//! The runner's Meta protocol (SPEC §5.3), over `TaskContext`: the request YAML for
//! each of its three message types, the system prompt stating the exact reply
//! schema, and reply validation. Lenient about wrapping (one ``` fence, YAML or
//! JSON), strict about content.

use serde::{Deserialize, Serialize};
use serde_norway::Value;

use crate::context::{Assessment, Criterion, TaskContext};
use agent_runner_core::text::{cut, tail};
use agent_runner_meta::reply::Reask;
use agent_runner_meta::reply::{Reply, decode};

/// The three Meta messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MessageType {
    PlanTask,
    NextAction,
    CompletionAssessment,
}

impl MessageType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MessageType::PlanTask => "plan_task",
            MessageType::NextAction => "next_action",
            MessageType::CompletionAssessment => "completion_assessment",
        }
    }
}

/// Request size bounds: whatever the worker printed, a request after planning stays
/// under 32 KiB (tails may double when YAML escapes them).
pub(crate) const MAX_TAIL: usize = 4 * 1024;
pub(crate) const MAX_PRD_SUMMARY: usize = 1024;
const MAX_SUMMARY: usize = 1024;
/// The most of AGENTS.md (or CLAUDE.md) a plan_task request carries.
const MAX_PROJECT_INSTRUCTIONS: usize = 16 * 1024;
const MAX_CRITERIA_IN_REQUEST: usize = 20;
const MAX_CRITERION_TEXT: usize = 200;
const MAX_COMMANDS_IN_REQUEST: usize = 10;
const MAX_COMMAND_TEXT: usize = 160;
const MAX_CHANGED_FILES: usize = 20;
/// Loops of a resumed task's history in a request (the latest).
const MAX_HISTORY_IN_REQUEST: usize = 5;
/// Plans with more criteria than this are rejected (and re-asked).
pub(crate) const MAX_CRITERIA: usize = 50;

/// The base of the default system prompt (SPEC §5.4).
pub(crate) const DEFAULT_SYSTEM_PROMPT: &str = "You are the tech lead and orchestrator of a software task. \
From the given task context, decide what to do next. Always answer with exactly one YAML document. \
No code fences, no prose.";

/// The system prompt: the base text (default or `runner.meta.system_prompt`) and the
/// exact reply schema for `kind`.
pub(crate) fn system_prompt(base: Option<&str>, kind: MessageType) -> String {
    system_prompt_offering(base, kind, None)
}

/// `system_prompt`, with `replan` offered in the next_action schema when `replans_left`
/// is given (SPEC §16).
pub(crate) fn system_prompt_offering(
    base: Option<&str>,
    kind: MessageType,
    replans_left: Option<u32>,
) -> String {
    let next_action;
    let schema = match kind {
        MessageType::PlanTask => {
            "Plan the task: turn the PRD into acceptance criteria that can be checked.\n\
             Reply schema:\n\
             type: plan_task\n\
             acceptance_criteria:\n\
             \x20 - id: AC-1\n\
             \x20   description: <one checkable requirement>\n"
        }
        MessageType::NextAction => {
            next_action = format!(
                "Decide the next step. The worker is a coding agent (the task's worker CLI), working \
                 in the repository at /workspace/project; each worker_call.prompt must be complete on its own. After each \
                 worker run agent-runner runs the task's test command and asks you to assess completion.\n\
                 Reply schema:\n\
                 type: next_action\n\
                 decision:\n\
                 {}\
                 \x20 reason: <why>\n\
                 worker_call:           # required when action is run_worker\n\
                 \x20 worker_type: codex-cli\n\
                 \x20 mode: exec\n\
                 \x20 prompt: |\n\
                 \x20   <instructions for the worker>\n",
                action_line(replans_left)
            );
            &next_action
        }
        MessageType::CompletionAssessment => {
            "Assess the task now, from the last worker result and the last test result. List in \
             passed_criteria the ids of the criteria that are met now.\n\
             Reply schema:\n\
             type: completion_assessment\n\
             summary: <what was done and where it stands>\n\
             details:\n\
             \x20 passed_criteria: [AC-1]\n\
             \x20 remaining_risks: [<risk>]\n\
             all_criteria_satisfied: false\n"
        }
    };
    format!(
        "{}\n\n{schema}",
        base.unwrap_or(DEFAULT_SYSTEM_PROMPT).trim_end()
    )
}

/// The next_action schema's line for `decision.action`, with `replan` when offered
/// (`runner::replan`).
fn action_line(replans_left: Option<u32>) -> String {
    match replans_left {
        None => "\x20 action: run_worker   # or mark_complete when every criterion is met\n".into(),
        Some(left) => format!(
            "\x20 action: run_worker   # or mark_complete when every criterion is met, or replan when \
             the acceptance criteria themselves are wrong: plan_task is asked again with what each \
             loop did and its criteria replace these (it costs a loop; {left} replan(s) left; no \
             worker_call)\n"
        ),
    }
}

/// A `plan_task` request; a replan's adds to it (`runner::replan`).
#[derive(Serialize)]
pub(crate) struct PlanRequest<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    task: PlanTaskInfo<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    project_instructions: Option<ProjectInstructions>,
}

/// The repository's instructions for agents (SPEC §20): its `AGENTS.md`, else its
/// `CLAUDE.md`, at most `MAX_PROJECT_INSTRUCTIONS` bytes of it.
#[derive(Serialize)]
struct ProjectInstructions {
    file: &'static str,
    text: String,
}

#[derive(Serialize)]
struct PlanTaskInfo<'a> {
    id: &'a str,
    title: &'a str,
    prd: &'a str,
    test_command: Option<&'a str>,
}

#[derive(Serialize)]
struct StepRequest<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    task: StepTaskInfo<'a>,
    acceptance_criteria: Vec<CriterionInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    criteria_not_shown: Option<usize>,
    #[serde(rename = "loop")]
    loop_: LoopInfo,
    /// next_action, when `replan` is offered: how many are left.
    #[serde(skip_serializing_if = "Option::is_none")]
    replans_left: Option<u32>,
    state: &'static str,
    last_worker_result: WorkerInfo,
    last_test_result: TestInfo,
    /// A resumed task (SPEC §19): what the runs before did.
    #[serde(skip_serializing_if = "Option::is_none")]
    resumed: Option<ResumedInfo<'a>>,
}

#[derive(Serialize)]
struct ResumedInfo<'a> {
    previous_run: &'a str,
    /// The user's follow-up message (SPEC §23).
    #[serde(skip_serializing_if = "Option::is_none")]
    message_from_user: Option<&'a str>,
    history: &'a [crate::loop_record::LoopRecord],
}

#[derive(Serialize)]
struct StepTaskInfo<'a> {
    id: &'a str,
    title: &'a str,
    prd_summary: String,
    test_command: Option<&'a str>,
}

/// A criterion as a request shows it (cut).
#[derive(Serialize)]
pub(crate) struct CriterionInfo {
    id: String,
    description: String,
    passed: bool,
}

/// The criteria as a request shows them: at most `MAX_CRITERIA_IN_REQUEST`, each
/// cut, and how many were left out.
pub(crate) fn criteria_info(criteria: &[Criterion]) -> (Vec<CriterionInfo>, Option<usize>) {
    let shown = criteria
        .iter()
        .take(MAX_CRITERIA_IN_REQUEST)
        .map(|c| CriterionInfo {
            id: cut(&c.id, 40),
            description: clean(&cut(&c.description, MAX_CRITERION_TEXT)),
            passed: c.passed,
        })
        .collect();
    let not_shown = criteria
        .len()
        .checked_sub(MAX_CRITERIA_IN_REQUEST)
        .filter(|&n| n > 0);
    (shown, not_shown)
}

#[derive(Serialize)]
struct LoopInfo {
    current: u32,
    max: u32,
}

#[derive(Serialize, Default)]
struct WorkerInfo {
    exists: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timed_out: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    commands: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    changed_files: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stdout_tail: Option<String>,
}

#[derive(Serialize, Default)]
struct TestInfo {
    exists: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timed_out: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tail: Option<String>,
}

/// The request YAML for `kind` (the user message).
pub(crate) fn request(kind: MessageType, ctx: &TaskContext) -> String {
    request_offering(kind, ctx, None)
}

/// The `plan_task` request's content.
pub(crate) fn plan_request(ctx: &TaskContext) -> PlanRequest<'_> {
    let task = &ctx.task;
    PlanRequest {
        kind: MessageType::PlanTask.as_str(),
        task: PlanTaskInfo {
            id: &task.id,
            title: &task.title,
            prd: &task.prd.text,
            test_command: task.test.as_ref().map(|t| t.command.as_str()),
        },
        project_instructions: project_instructions(&task.repo),
    }
}

/// `AGENTS.md`, else `CLAUDE.md`, from the repository's root, cut to
/// `MAX_PROJECT_INSTRUCTIONS` bytes. The worker may have written either: read
/// through the safe-file module (a regular file only, never through a symlink,
/// never blocking on a FIFO, bounded), and masked with the request.
fn project_instructions(repo: &std::path::Path) -> Option<ProjectInstructions> {
    ["AGENTS.md", "CLAUDE.md"].into_iter().find_map(|file| {
        let max = MAX_PROJECT_INSTRUCTIONS as u64 + 4;
        let bytes = agent_runner_core::fs::read::head(&repo.join(file), max)?;
        let text = String::from_utf8_lossy(&bytes);
        let text = cut(&text, MAX_PROJECT_INSTRUCTIONS);
        (!text.trim().is_empty()).then_some(ProjectInstructions { file, text })
    })
}

/// `request`; a next_action request says how many replans are left when
/// `replans_left` is given (SPEC §16).
pub(crate) fn request_offering(
    kind: MessageType,
    ctx: &TaskContext,
    replans_left: Option<u32>,
) -> String {
    let task = &ctx.task;
    let test_command = task.test.as_ref().map(|t| t.command.as_str());
    let (acceptance_criteria, criteria_not_shown) = criteria_info(&ctx.criteria);
    let yaml = match kind {
        MessageType::PlanTask => serde_norway::to_string(&plan_request(ctx)),
        _ => serde_norway::to_string(&StepRequest {
            kind: kind.as_str(),
            task: StepTaskInfo {
                id: &task.id,
                title: &task.title,
                prd_summary: cut(&task.prd.text, MAX_PRD_SUMMARY),
                test_command,
            },
            acceptance_criteria,
            criteria_not_shown,
            // next_action is asked before its loop starts; the assessment after it ran.
            loop_: LoopInfo {
                current: match kind {
                    MessageType::NextAction => (ctx.loops + 1).min(task.meta.max_loops),
                    _ => ctx.loops,
                },
                max: task.meta.max_loops,
            },
            replans_left: match kind {
                MessageType::NextAction => replans_left,
                _ => None,
            },
            state: ctx.state.as_str(),
            last_worker_result: worker_info(ctx),
            last_test_result: test_info(ctx),
            resumed: ctx.resumed.as_ref().map(|r| ResumedInfo {
                previous_run: &r.previous,
                message_from_user: r.message.as_deref(),
                // The latest loops; each one's texts are bounded already.
                history: &r.history[r.history.len().saturating_sub(MAX_HISTORY_IN_REQUEST)..],
            }),
        }),
    };
    encoded(kind, yaml)
}

/// A request's YAML, or a request that says it could not be encoded.
pub(crate) fn encoded(kind: MessageType, yaml: Result<String, serde_norway::Error>) -> String {
    yaml.unwrap_or_else(|e| {
        format!(
            "type: {}\nerror: cannot encode the request: {e}\n",
            kind.as_str()
        )
    })
}

fn worker_info(ctx: &TaskContext) -> WorkerInfo {
    let Some(run) = ctx.last_worker_run() else {
        return WorkerInfo::default();
    };
    let changed_files = run.changes.lines(&run.transcript.file_changes);
    WorkerInfo {
        exists: true,
        run: Some(run.number),
        outcome: Some(run.outcome.as_str()),
        exit_code: run.exit_code,
        timed_out: Some(matches!(
            run.outcome,
            agent_runner_settings::agent::RunOutcome::TimedOut
                | agent_runner_settings::agent::RunOutcome::Stalled
        )),
        summary: Some(clean(&cut(&run.summary, MAX_SUMMARY))),
        commands: run
            .transcript
            .commands
            .iter()
            .rev()
            .take(MAX_COMMANDS_IN_REQUEST)
            .rev()
            .map(|c| {
                let code = c
                    .exit_code
                    .map_or("running".to_string(), |e| format!("exit {e}"));
                format!("{} ({code})", clean(&cut(&c.command, MAX_COMMAND_TEXT)))
            })
            .collect(),
        changed_files: changed_files
            .into_iter()
            .take(MAX_CHANGED_FILES)
            .map(|f| clean(&cut(&f, 200)))
            .collect(),
        stdout_tail: Some(clean(&tail(&run.output_tail, MAX_TAIL))),
    }
}

fn test_info(ctx: &TaskContext) -> TestInfo {
    let Some(run) = ctx.last_test_run() else {
        return TestInfo::default();
    };
    TestInfo {
        exists: true,
        command: Some(clean(&cut(&run.command, 500))),
        exit_code: run.exit_code,
        timed_out: Some(run.timed_out),
        output_tail: Some(clean(&tail(&run.output_tail, MAX_TAIL))),
    }
}

/// Removes control characters (ANSI colour codes and the like) that would only be
/// escaped into noise; keeps newlines and tabs.
pub(crate) fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... final byte: an ANSI escape sequence.
            if chars.peek() == Some(&'[') {
                chars.next();
                for n in chars.by_ref() {
                    if ('@'..='~').contains(&n) {
                        break;
                    }
                }
            }
        } else if c == '\n' || c == '\t' || !c.is_control() {
            out.push(c);
        }
    }
    out
}

/// `plan_task` reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub criteria: Vec<Criterion>,
}

/// `next_action` reply.
#[derive(Debug, Clone, PartialEq)]
pub struct NextAction {
    pub action: Action,
    pub reason: String,
}

/// What `next_action` decided (`decision.action`).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Run the worker with `prompt` (never empty: `worker_call.prompt`).
    RunWorker { prompt: String },
    /// Meta claims the task is complete: a claim the tests and an assessment check.
    MarkComplete,
    /// New acceptance criteria (SPEC §16), valid only when offered (`replan`).
    Replan,
    /// An action this version does not know: it fails the task.
    Unknown(String),
}

impl Action {
    /// The action's name, as the reply spells it.
    pub fn name(&self) -> &str {
        match self {
            Action::RunWorker { .. } => "run_worker",
            Action::MarkComplete => "mark_complete",
            Action::Replan => "replan",
            Action::Unknown(name) => name,
        }
    }
}

#[derive(Deserialize)]
struct RawPlan {
    acceptance_criteria: Vec<RawCriterion>,
}

#[derive(Deserialize)]
struct RawCriterion {
    id: Option<String>,
    description: String,
}

#[derive(Deserialize)]
struct RawNextAction {
    decision: RawDecision,
    worker_call: Option<RawWorkerCall>,
}

#[derive(Deserialize)]
struct RawDecision {
    action: String,
    reason: String,
}

#[derive(Deserialize)]
struct RawWorkerCall {
    prompt: Option<String>,
}

#[derive(Deserialize)]
struct RawAssessment {
    summary: String,
    #[serde(default)]
    details: RawDetails,
    all_criteria_satisfied: Option<bool>,
}

#[derive(Deserialize, Default)]
struct RawDetails {
    #[serde(default)]
    passed_criteria: Vec<String>,
    #[serde(default)]
    remaining_risks: Vec<String>,
}

impl Reply for Plan {
    const KIND: &'static str = "plan_task";

    fn schema() -> serde_json::Value {
        agent_runner_meta::messages::plan_task()
    }

    fn from_value(value: Value) -> Result<Self, Reask> {
        let raw: RawPlan = decode(value)?;
        if raw.acceptance_criteria.is_empty() {
            return Err("acceptance_criteria is empty; give at least one".into());
        }
        if raw.acceptance_criteria.len() > MAX_CRITERIA {
            return Err(format!(
                "{} acceptance criteria; give at most {MAX_CRITERIA}",
                raw.acceptance_criteria.len()
            ));
        }
        let mut criteria: Vec<Criterion> = Vec::new();
        for (n, c) in raw.acceptance_criteria.into_iter().enumerate() {
            let id =
                c.id.filter(|i| !i.trim().is_empty())
                    .unwrap_or_else(|| format!("AC-{}", n + 1));
            if c.description.trim().is_empty() {
                return Err(format!("acceptance_criteria[{n}].description is empty"));
            }
            if criteria.iter().any(|existing| existing.id == id) {
                return Err(format!("acceptance_criteria[{n}].id {id:?} is used twice"));
            }
            criteria.push(Criterion {
                id,
                description: c.description.trim().to_string(),
                passed: false,
            });
        }
        Ok(Plan { criteria })
    }
}

impl Reply for NextAction {
    const KIND: &'static str = "next_action";

    fn schema() -> serde_json::Value {
        agent_runner_meta::messages::next_action()
    }

    fn from_value(value: Value) -> Result<Self, Reask> {
        let raw: RawNextAction = decode(value)?;
        let prompt = raw
            .worker_call
            .and_then(|w| w.prompt)
            .filter(|p| !p.trim().is_empty());
        let action = match (raw.decision.action.as_str(), prompt) {
            ("run_worker", Some(prompt)) => Action::RunWorker { prompt },
            ("run_worker", None) => {
                return Err(
                    "decision.action is run_worker but worker_call.prompt is missing or empty"
                        .into(),
                );
            }
            ("mark_complete", _) => Action::MarkComplete,
            ("replan", _) => Action::Replan,
            _ => Action::Unknown(raw.decision.action),
        };
        Ok(NextAction {
            action,
            reason: raw.decision.reason,
        })
    }
}

impl Reply for Assessment {
    const KIND: &'static str = "completion_assessment";

    fn schema() -> serde_json::Value {
        agent_runner_meta::messages::completion_assessment()
    }

    fn from_value(value: Value) -> Result<Self, Reask> {
        let raw: RawAssessment = decode(value)?;
        Ok(Assessment {
            summary: raw.summary.trim().to_string(),
            passed_criteria: raw.details.passed_criteria,
            remaining_risks: raw.details.remaining_risks,
            all_criteria_satisfied: raw.all_criteria_satisfied,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_core::fs::testing::{scratch, within};
    use agent_runner_meta::reply::parse_reply;

    /// The plan_task request of a task whose repository is `repo`.
    fn plan_yaml(repo: &std::path::Path) -> serde_norway::Value {
        let mut task = agent_runner_settings::task::test_task("");
        task.repo = repo.to_path_buf();
        let ctx = TaskContext::new(task);
        serde_norway::from_str(&request(MessageType::PlanTask, &ctx)).unwrap()
    }

    #[test]
    fn plan_task_carries_agents_md_else_claude_md_bounded_and_only_a_regular_file() {
        let repo = scratch("instructions");
        assert!(plan_yaml(&repo).get("project_instructions").is_none());
        std::fs::write(repo.join("CLAUDE.md"), "Use pnpm.\n").unwrap();
        let carried = &plan_yaml(&repo)["project_instructions"];
        assert_eq!(
            (carried["file"].as_str(), carried["text"].as_str()),
            (Some("CLAUDE.md"), Some("Use pnpm.\n"))
        );
        std::fs::write(repo.join("AGENTS.md"), "é".repeat(20_000)).unwrap();
        let carried = &plan_yaml(&repo)["project_instructions"];
        assert_eq!(carried["file"], "AGENTS.md");
        let text = carried["text"].as_str().unwrap();
        assert!(
            text.starts_with("éé") && text.len() <= MAX_PROJECT_INSTRUCTIONS + 3,
            "{}",
            text.len()
        );
        // The worker could leave a link to a host file, or a FIFO to hang the runner.
        std::fs::remove_file(repo.join("AGENTS.md")).unwrap();
        std::fs::write(repo.join("secret"), "host secret").unwrap();
        std::os::unix::fs::symlink(repo.join("secret"), repo.join("AGENTS.md")).unwrap();
        assert_eq!(
            plan_yaml(&repo)["project_instructions"]["file"],
            "CLAUDE.md"
        );
        std::fs::remove_file(repo.join("AGENTS.md")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(repo.join("AGENTS.md"))
            .status();
        assert!(made.unwrap().success(), "mkfifo");
        let r = repo.clone();
        let carried = within(move || plan_yaml(&r)["project_instructions"]["file"].clone());
        assert_eq!(carried, "CLAUDE.md");
        std::fs::remove_dir_all(&repo).unwrap();
    }

    #[test]
    fn plan_gets_generated_ids_and_is_strict() {
        let plan: Plan = parse_reply("type: plan_task\nacceptance_criteria:\n  - description: a\n  - id: X\n    description: b\n  - description: c\n").unwrap();
        let ids: Vec<&str> = plan.criteria.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["AC-1", "X", "AC-3"]);
        assert!(plan.criteria.iter().all(|c| !c.passed));
        assert_eq!(
            parse_reply::<Plan>("type: plan_task\nacceptance_criteria: []\n").unwrap_err(),
            "acceptance_criteria is empty; give at least one"
        );
        assert!(
            parse_reply::<Plan>("type: plan_task\n")
                .unwrap_err()
                .contains("missing field `acceptance_criteria`")
        );
        assert!(parse_reply::<Plan>("type: plan_task\nacceptance_criteria: [{id: A, description: x}, {id: A, description: y}]").unwrap_err().contains("used twice"));
    }

    #[test]
    fn json_is_accepted() {
        let next: NextAction = parse_reply(
            r#"{"type":"next_action","decision":{"action":"mark_complete","reason":"done"}}"#,
        )
        .unwrap();
        assert_eq!(
            next,
            NextAction {
                action: Action::MarkComplete,
                reason: "done".into(),
            }
        );
    }

    #[test]
    fn wrong_type_and_missing_prompt_are_errors() {
        assert_eq!(
            parse_reply::<NextAction>("type: plan_task\n").unwrap_err(),
            "`type` is \"plan_task\", expected \"next_action\""
        );
        assert_eq!(
            parse_reply::<NextAction>("decision: {}\n").unwrap_err(),
            "`type: next_action` is missing"
        );
        let e = parse_reply::<NextAction>(
            "type: next_action\ndecision: {action: run_worker, reason: r}\n",
        )
        .unwrap_err();
        assert!(e.contains("worker_call.prompt is missing"), "{e}");
        assert!(
            parse_reply::<NextAction>("- a\n")
                .unwrap_err()
                .contains("one YAML mapping")
        );
        assert!(
            parse_reply::<NextAction>("type: [")
                .unwrap_err()
                .starts_with("not valid YAML")
        );
    }

    #[test]
    fn unknown_actions_pass_parsing_for_the_state_machine_to_reject() {
        let next: NextAction =
            parse_reply("type: next_action\ndecision: {action: dance, reason: why not}\n").unwrap();
        assert_eq!(next.action, Action::Unknown("dance".into()));
    }

    #[test]
    fn assessment_defaults() {
        let a: Assessment = parse_reply("type: completion_assessment\nsummary: ok\n").unwrap();
        assert_eq!(
            a,
            Assessment {
                summary: "ok".into(),
                passed_criteria: vec![],
                remaining_risks: vec![],
                all_criteria_satisfied: None
            }
        );
    }

    #[test]
    fn clean_drops_escape_sequences_and_controls() {
        assert_eq!(
            clean("\u{1b}[31mred\u{1b}[0m ok\r\n\tx\u{7}"),
            "red ok\n\tx"
        );
    }

    use crate::context::TaskContext;
    use agent_runner_core::timestamp::Timestamp;
    use agent_runner_sandbox::worker::{TestRun, WorkerRun};
    use agent_runner_settings::agent::{CommandRecord, FileChange, RunOutcome, Transcript};
    use quickcheck::quickcheck;

    /// A context whose last worker run and test printed `output`, with plenty of
    /// everything else that goes into a request.
    fn loaded_context(output: &str, summary: &str) -> TaskContext {
        let mut ctx = TaskContext::new(agent_runner_settings::task::test_task(
            "  test:\n    command: make test\n",
        ));
        ctx.criteria = (0..MAX_CRITERIA)
            .map(|n| Criterion {
                id: format!("AC-{n}"),
                description: "\"quoted\" \\ ".repeat(300),
                passed: n % 2 == 0,
            })
            .collect();
        let mut transcript = Transcript::default();
        for n in 0..300 {
            let command = "x\\\"".repeat(400);
            transcript.command(CommandRecord::new(
                n.to_string(),
                &command,
                Some(1),
                "failed",
                "",
            ));
            transcript.file_changed(FileChange {
                path: format!("/p/{command}{n}"),
                kind: "add".into(),
            });
        }
        ctx.worker_runs.push(WorkerRun {
            number: 1,
            started: Timestamp::now(),
            finished: Timestamp::now(),
            duration: std::time::Duration::from_secs(1),
            exit_code: Some(1),
            outcome: RunOutcome::Failed,
            summary: summary.to_string(),
            transcript,
            log_path: "/tmp/x.log".into(),
            output_bytes: 1 << 20,
            output_tail: output.to_string(),
            changes: agent_runner_sandbox::worker::git::RepoChanges::Unknown,
            leftovers: None,
            privileges: vec![],
            usage: Default::default(),
        });
        ctx.test_runs.push(TestRun {
            number: 1,
            command: "make test".into(),
            cwd: String::new(),
            started: Timestamp::now(),
            duration: std::time::Duration::from_secs(1),
            exit_code: Some(2),
            timed_out: false,
            interrupted: false,
            output_tail: output.to_string(),
            log_path: "/tmp/t.log".into(),
            leftovers: None,
            privileges: vec![],
        });
        ctx
    }

    #[test]
    fn requests_stay_under_32_kib_whatever_the_worker_printed() {
        // The worst case for YAML: every character needs escaping.
        let output = "\"\\\u{1b}[31m\u{7}é".repeat(100_000);
        let ctx = loaded_context(&output, &"\"".repeat(50_000));
        for kind in [MessageType::NextAction, MessageType::CompletionAssessment] {
            let size = request(kind, &ctx).len();
            assert!(
                size <= 32 * 1024,
                "{} request is {size} bytes",
                kind.as_str()
            );
        }
        let request: serde_norway::Value =
            serde_norway::from_str(&request(MessageType::NextAction, &ctx)).unwrap();
        assert_eq!(request["last_worker_result"]["exists"], true);
        assert_eq!(request["last_test_result"]["exit_code"], 2);
        assert_eq!(
            request["criteria_not_shown"],
            (MAX_CRITERIA - MAX_CRITERIA_IN_REQUEST) as u64
        );
    }

    quickcheck! {
        fn any_output_keeps_requests_bounded(output: String, summary: String) -> bool {
            let ctx = loaded_context(&output.repeat(50), &summary);
            request(MessageType::NextAction, &ctx).len() <= 32 * 1024
        }
    }

    #[test]
    fn system_prompt_has_base_and_schema() {
        let p = system_prompt(None, MessageType::NextAction);
        assert!(p.starts_with(DEFAULT_SYSTEM_PROMPT));
        assert!(p.contains("type: next_action\ndecision:\n  action: run_worker"));
        let p = system_prompt(Some("Be terse."), MessageType::PlanTask);
        assert!(p.starts_with("Be terse.\n\n") && p.contains("type: plan_task"));
    }
}
