//! `runner.meta.kind: codex-cli` (SPEC §18): each Meta request is one `codex exec
//! --json --output-schema <the reply's schema> --output-last-message <file>` in the
//! sandbox image, in a scratch directory without the repository (`worker::scratch`),
//! logged in as the worker's codex is. A user with only `codex login` (a ChatGPT
//! plan, no OPENAI_API_KEY) can so run tasks, builders and plans.
//!
//! The conversation (system prompt, request, earlier invalid replies and the
//! re-ask) becomes one prompt; codex's last message is the reply, its nulls (strict
//! mode's "left out") dropped, and checked by the reply's parser like any other.
//! Time limits (seed MP §6.3): each call at most `runner.meta.timeout_sec` (default
//! 10 min), a plan request at most 15 min in all (`with_deadline`), and never past
//! the task's deadline (`until`, SPEC §15); a run that reaches its limit is stopped
//! inside the container (SIGTERM, 5 s, SIGKILL). The tokens codex reports for a
//! run (`turn.completed`) are the call's usage, on codex's `-m` model.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{BackendError, ChatBackend, ChatMessage, Completion, Form, MetaError, ReplyFormat};
use agent_runner_core::deadline::Deadline;
use agent_runner_core::fs::Dir;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_core::usage::Tokens;
use agent_runner_settings::agent::RunOutcome;
use agent_runner_settings::scratch::{OpenScratch, ScratchAgent, ScratchConfig, ScratchError};
use agent_runner_settings::task::{MetaBackend, MetaSettings, WorkerSettings};

/// A whole plan request (decompose, plan_patch) takes at most this long.
pub const PLAN_DEADLINE: Duration = Duration::from_secs(15 * 60);
/// Why a request past the task's deadline was not sent.
const DEADLINE_PASSED: &str =
    "the task's deadline (runner.budget.max_duration_sec) has passed; codex was not run";

/// The backend; the container starts with the first request and goes with it.
pub struct CodexCli {
    config: Option<ScratchConfig>,
    open: OpenScratch,
    scratch: Option<Box<dyn ScratchAgent>>,
    per_call: Duration,
    /// The end of a plan request's 15 min.
    deadline: Option<Instant>,
    /// The task's deadline.
    task_deadline: Deadline,
    /// codex's `-m`; None: its own default.
    model: Option<String>,
    interrupt: Interrupt,
}

impl CodexCli {
    /// Meta's codex with `meta` (which must be `kind: codex-cli`: None otherwise)
    /// beside `worker`, its container named after `task_id`, working in `dir`
    /// (removed afterwards when `remove_after`), its run logs in `logs` (default: in
    /// `dir`), in the sandbox `open` makes.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        open: OpenScratch,
        meta: &MetaSettings,
        worker: &WorkerSettings,
        task_id: &str,
        dir: PathBuf,
        remove_after: bool,
        logs: Option<Dir>,
        redactor: Redactor,
        interrupt: Interrupt,
    ) -> Option<CodexCli> {
        let MetaBackend::CodexCli(codex) = &meta.backend else {
            return None;
        };
        let config = ScratchConfig {
            task_id: task_id.to_string(),
            dir,
            remove_after,
            logs,
            worker: codex.worker_settings(worker, meta.timeout),
            login: codex.login.clone(),
            redactor,
            interrupt,
        };
        Some(CodexCli {
            model: config.worker.model.clone(),
            config: Some(config),
            open,
            scratch: None,
            per_call: meta.timeout,
            deadline: None,
            task_deadline: Deadline::none(),
            interrupt,
        })
    }

    /// Gives every request from now on `within` in all (a plan request).
    pub fn with_deadline(mut self, within: Duration) -> Self {
        self.deadline = Some(Instant::now() + within);
        self
    }

    /// Cuts every request to the time the task's `deadline` leaves.
    pub fn until(mut self, deadline: Deadline) -> Self {
        self.task_deadline = deadline;
        self
    }

    fn scratch(&mut self) -> Result<&mut Box<dyn ScratchAgent>, ScratchError> {
        if self.scratch.is_none() {
            let config = self.config.take().ok_or_else(|| {
                ScratchError::Failed("the scratch sandbox could not be prepared".into())
            })?;
            self.scratch = Some((self.open)(config)?);
        }
        self.scratch
            .as_mut()
            .ok_or_else(|| ScratchError::Failed("the scratch sandbox is gone".into()))
    }

    /// codex's answer to `prompt` and the tokens its run reported.
    fn ask(
        &mut self,
        prompt: &str,
        reply: &ReplyFormat,
    ) -> Result<(String, Option<Tokens>), MetaError> {
        if self.task_deadline.passed() {
            return Err(MetaError::Failed(DEADLINE_PASSED.into()));
        }
        let left = self
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return Err(MetaError::Failed(format!(
                "the request took longer than its {} min",
                PLAN_DEADLINE.as_secs() / 60
            )));
        }
        let limit = left.map_or(self.per_call, |left| left.min(self.per_call));
        let cut_by_deadline = limit < self.per_call;
        let (limit, cut_by_task) = self.task_deadline.cut(limit);
        let answer = match self
            .scratch()
            .and_then(|s| s.ask(prompt, &reply.schema, limit))
        {
            Ok(answer) => answer,
            Err(ScratchError::Interrupted) => return Err(MetaError::Interrupted),
            Err(e) => return Err(MetaError::Failed(format!("codex could not run: {e}"))),
        };
        match answer.outcome {
            RunOutcome::Completed => {
                answer
                    .text
                    .map(|text| (text, answer.tokens))
                    .ok_or_else(|| {
                        MetaError::Failed(
                            "codex wrote no last message (--output-last-message)".into(),
                        )
                    })
            }
            RunOutcome::Interrupted => Err(MetaError::Interrupted),
            RunOutcome::TimedOut if cut_by_task => Err(MetaError::Failed(format!(
                "stopped at the task's deadline (runner.budget.max_duration_sec) after {}",
                agent_runner_core::timestamp::human(answer.duration)
            ))),
            RunOutcome::TimedOut if cut_by_deadline => Err(MetaError::Failed(format!(
                "the request took longer than its {} min; codex was stopped",
                PLAN_DEADLINE.as_secs() / 60
            ))),
            outcome => Err(MetaError::Failed(format!(
                "codex {}: {} (its output: {})",
                outcome.as_str(),
                answer.summary,
                answer.log_path.display()
            ))),
        }
    }
}

impl Drop for CodexCli {
    fn drop(&mut self) {
        // Never opened: its directory may still have been made for it.
        if let Some(config) = self.config.take().filter(|c| c.remove_after) {
            let _ = std::fs::remove_dir_all(&config.dir);
        }
    }
}

impl ChatBackend for CodexCli {
    fn complete(
        &mut self,
        messages: &[ChatMessage],
        reply: &ReplyFormat,
    ) -> Result<Completion, BackendError> {
        match self.ask(&prompt(messages, reply.kind), reply) {
            Ok((text, usage)) => Ok(Completion {
                text: super::reply::without_nulls(&text),
                attempts: 1,
                usage,
                problem: None,
            }),
            Err(error) => Err(BackendError { error, attempts: 1 }),
        }
    }

    fn form(&self) -> Form {
        Form::Schema
    }

    fn interrupt(&self) -> Interrupt {
        self.interrupt
    }

    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
}

/// The conversation as one prompt: the system prompt, what codex is to do, the
/// request, and any earlier replies with what was wrong with them.
pub(crate) fn prompt(messages: &[ChatMessage], kind: &str) -> String {
    let mut out = String::new();
    for message in messages {
        match message.role {
            "system" => {
                out.push_str(message.content.trim_end());
                out.push_str(&format!(
                    "\n\nYou answer through the Codex CLI: do not run commands and do not change \
                     files. Your final message is the answer, one JSON object following the \
                     output schema (its `type` is \"{kind}\"), with null for what you leave out.\n"
                ));
            }
            "assistant" => {
                out.push_str("\n--- your earlier reply ---\n");
                out.push_str(message.content.trim_end());
                out.push('\n');
            }
            _ => {
                out.push_str("\n--- request ---\n");
                out.push_str(message.content.trim_end());
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conversation_becomes_one_prompt() {
        let messages = [
            ChatMessage {
                role: "system",
                content: "You plan.\n".into(),
            },
            ChatMessage {
                role: "user",
                content: "type: plan_task\n".into(),
            },
            ChatMessage {
                role: "assistant",
                content: "nonsense".into(),
            },
            ChatMessage {
                role: "user",
                content: "Your reply was invalid: x".into(),
            },
        ];
        let text = prompt(&messages, "plan_task");
        assert!(
            text.starts_with("You plan.\n\nYou answer through the Codex CLI"),
            "{text}"
        );
        assert!(text.contains("(its `type` is \"plan_task\")"), "{text}");
        assert!(text.ends_with(
            "\n--- request ---\ntype: plan_task\n\n--- your earlier reply ---\nnonsense\n\n--- request ---\nYour reply was invalid: x\n"
        ), "{text}");
    }

    #[test]
    fn a_request_past_the_plan_deadline_runs_nothing() {
        let task = agent_runner_settings::task::test_task(
            "runner:\n  meta: {kind: codex-cli}\n  worker: {docker_image: 'no-such-image:0'}\n",
        );
        let dir = std::env::temp_dir().join(format!("ar-codex-cli-{}", uuid::Uuid::new_v4()));
        fn not_opened(_: ScratchConfig) -> Result<Box<dyn ScratchAgent>, ScratchError> {
            Err(ScratchError::Failed("a sandbox was opened".into()))
        }
        let mut chat = CodexCli::new(
            not_opened,
            &task.meta,
            &task.worker,
            &task.id,
            dir.clone(),
            true,
            None,
            Redactor::default(),
            Interrupt::never(),
        )
        .unwrap()
        .with_deadline(Duration::ZERO);
        let format = ReplyFormat {
            kind: "plan_task",
            schema: crate::messages::plan_task(),
        };
        let error = chat.complete(&[], &format).unwrap_err();
        assert_eq!(
            error.error,
            MetaError::Failed("the request took longer than its 15 min".into())
        );
        assert!(chat.scratch.is_none(), "no sandbox was started");
        drop(chat);
        assert!(!dir.exists());
    }
}
