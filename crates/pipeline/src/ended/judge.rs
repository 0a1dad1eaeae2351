//! Meta's `judge` message (SPEC §23 best of N): when more than one try is left
//! after the verified and criteria rules, Meta is shown each one's summary, diff
//! stat, test tail and criteria, and names the best. It is asked through the
//! workspace's Task Builder settings, as plans are (`plan::backend`: the same model
//! and API, or `judge` replies from `builder.script`). A reply naming a try that was
//! not shown is re-asked, then given up: the judgement goes on to its next rule.

use std::path::Path;

use serde::Serialize;

use crate::Workspace;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::text::{cut, tail};
use agent_runner_meta::conversation;
use agent_runner_meta::reply::Reask;
use agent_runner_meta::reply::Reply;

/// What Meta is told of one try.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Shown {
    #[serde(rename = "try")]
    pub(crate) k: u32,
    pub(crate) kind: String,
    pub(crate) verified: bool,
    pub(crate) criteria: String,
    pub(crate) diff: String,
    pub(crate) summary: String,
    pub(crate) test_tail: String,
}

/// The `judge` request (YAML).
#[derive(Serialize)]
struct Request<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    task: TaskShown<'a>,
    tries: &'a [Shown],
}

#[derive(Serialize)]
struct TaskShown<'a> {
    id: &'a str,
    title: &'a str,
    prompt: String,
}

/// Meta's reply: the winning try and why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) winner: u32,
    pub(crate) why: String,
}

impl Reply for Verdict {
    const KIND: &'static str = "judge";

    fn schema() -> serde_json::Value {
        agent_runner_meta::messages::judge()
    }

    fn from_value(value: serde_norway::Value) -> Result<Self, Reask> {
        let winner = match value.get("winner") {
            Some(serde_norway::Value::Number(n)) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("winner: {n} is not a try's number"))?,
            Some(_) => return Err("winner: expected the number of a try".into()),
            None => return Err("winner: missing".into()),
        };
        let why = match value.get("why") {
            Some(serde_norway::Value::String(why)) if !why.trim().is_empty() => {
                cut(why.trim(), 2000)
            }
            _ => return Err("why: missing; say in a sentence or two why it is the best".into()),
        };
        Ok(Verdict { winner, why })
    }
}

const SYSTEM: &str = "You judge the tries of one software task. Several coding agents worked on the same task, each in its own copy of the repository; each try is shown with its summary, the size of its change (diff stat), the tail of its last test run, and how many acceptance criteria it passed. Pick the try whose change best does what the task asks, with the least risk. Reply with one YAML mapping and nothing else:\ntype: judge\nwinner: <the number of the best try, one of those shown>\nwhy: <one or two sentences>\n";

/// Why Meta named no winner.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JudgeError {
    #[error("Meta could not be asked: {0}")]
    Unasked(crate::plan::backend::PlanBackendError),
    #[error(transparent)]
    Meta(#[from] agent_runner_meta::MetaError),
}

/// Asks Meta which of `shown` is best; the verdict (its winner one of `shown`), or
/// why there is none. The exchange is kept in `dir/judge.log`.
pub(crate) fn ask(
    ws: &Workspace,
    task: &crate::store::task_file::TaskRecord,
    shown: &[Shown],
    dir: &Path,
    interrupt: Interrupt,
) -> (Result<Verdict, JudgeError>, Option<u64>) {
    let var = |name: &str| std::env::var(name).ok();
    let scratch = dir.join("judge-scratch");
    let mut backend =
        match crate::plan::backend::open(&ws.defaults, "judge", &var, interrupt, &scratch) {
            Ok(backend) => backend,
            Err(e) => return (Err(JudgeError::Unasked(e)), None),
        };
    let request = Request {
        kind: "judge",
        task: TaskShown {
            id: &task.id,
            title: &task.title,
            prompt: cut(&task.raw_prompt, 4000),
        },
        tries: shown,
    };
    let request = serde_norway::to_string(&request).unwrap_or_default();
    let numbers: Vec<u32> = shown.iter().map(|s| s.k).collect();
    let outcome = conversation::ask_checked::<Verdict, Verdict>(
        backend.chat.as_mut(),
        SYSTEM.to_string(),
        &request,
        &backend.redactor,
        |verdict| {
            if numbers.contains(&verdict.winner) {
                Ok(verdict)
            } else {
                Err(format!(
                    "winner: {} is not one of the tries shown ({})",
                    verdict.winner,
                    numbers
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        },
    );
    let log = outcome
        .call
        .transcript(&format!("judge ({})", backend.label));
    let _ = agent_runner_core::fs::atomic::write(&dir.join("judge.log"), log.as_bytes());
    let tokens = Some(outcome.call.usage.total_tokens()).filter(|t| *t > 0);
    (outcome.reply.map_err(JudgeError::from), tokens)
}

/// The last part of a test's output, as Meta is shown it.
pub(crate) fn test_tail(text: &str) -> String {
    tail(text.trim_end(), 800)
}
