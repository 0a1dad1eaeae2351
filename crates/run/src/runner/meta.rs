//! What the runner asks of Meta (SPEC §5): the three messages of `protocol`, sent
//! through the generic exchange (`meta::conversation`) over a chat backend, and a
//! replan's second `plan_task` (`replan`, SPEC §16). The runner is generic over
//! `Meta`, so its tests script the replies.

use super::protocol::{self, MessageType, NextAction, Plan};
use super::{budget, replan};
use crate::context::{Assessment, TaskContext};
use agent_runner_core::secret::Redactor;
use agent_runner_core::usage::{Account, Usage};
use agent_runner_meta::conversation;
use agent_runner_meta::reply::Reask;
use agent_runner_meta::reply::Reply;
use agent_runner_meta::{ChatBackend, MetaOutcome};

/// What the runner asks of Meta. Each call returns its record along with the reply,
/// so a failed call still shows in the Task Note.
pub trait Meta {
    fn plan_task(&mut self, ctx: &TaskContext) -> MetaOutcome<Plan>;
    /// `plan_task` again, with the criteria so far and the loops' history, because
    /// next_action answered `replan` for `reason`.
    fn replan(&mut self, ctx: &TaskContext, reason: &str) -> MetaOutcome<Plan>;
    /// A `replan` answer is valid only when `replan::offer` allows it.
    fn next_action(&mut self, ctx: &TaskContext) -> MetaOutcome<NextAction>;
    fn completion_assessment(&mut self, ctx: &TaskContext) -> MetaOutcome<Assessment>;
}

/// The runner's Meta protocol over a chat backend.
pub struct MetaAgent<B> {
    backend: B,
    system_prompt: Option<String>,
    redactor: Redactor,
}

impl<B: ChatBackend> MetaAgent<B> {
    /// `system_prompt` replaces the default base text; secrets in `redactor` are
    /// masked in everything sent and recorded.
    pub fn new(backend: B, system_prompt: Option<String>, redactor: Redactor) -> Self {
        MetaAgent {
            backend,
            system_prompt,
            redactor,
        }
    }

    fn call<T: Reply>(&mut self, kind: MessageType, ctx: &TaskContext) -> MetaOutcome<T> {
        let system = protocol::system_prompt(self.system_prompt.as_deref(), kind);
        let request = protocol::request(kind, ctx);
        self.ask(system, &request, ctx, Ok)
    }

    /// One exchange whose re-asks stop once the task's budget is used up.
    fn ask<T: Reply, U>(
        &mut self,
        system: String,
        request: &str,
        ctx: &TaskContext,
        check: impl FnMut(T) -> Result<U, Reask>,
    ) -> MetaOutcome<U> {
        let stop = |call: &Usage| {
            let budget = &ctx.task.bounds.budget;
            if budget.is_unlimited() {
                return None;
            }
            let account = Account::of(
                ctx.meta_calls
                    .iter()
                    .map(|c| &c.usage)
                    .chain(std::iter::once(call)),
                ctx.worker_runs.iter().map(|r| &r.usage),
                &ctx.task.bounds.pricing,
            );
            budget::exhausted(budget, &account, ctx.duration(), false).map(|e| e.reason)
        };
        conversation::ask_within::<T, U>(
            &mut self.backend,
            system,
            request,
            &self.redactor,
            check,
            &stop,
        )
    }
}

impl<B: ChatBackend> Meta for MetaAgent<B> {
    fn plan_task(&mut self, ctx: &TaskContext) -> MetaOutcome<Plan> {
        self.call(MessageType::PlanTask, ctx)
    }

    fn replan(&mut self, ctx: &TaskContext, reason: &str) -> MetaOutcome<Plan> {
        let system = replan::system_prompt(self.system_prompt.as_deref());
        let request = replan::request(ctx, reason);
        self.ask(system, &request, ctx, Ok)
    }

    fn next_action(&mut self, ctx: &TaskContext) -> MetaOutcome<NextAction> {
        let kind = MessageType::NextAction;
        let left = replan::offer(ctx).ok();
        let system = protocol::system_prompt_offering(self.system_prompt.as_deref(), kind, left);
        let request = protocol::request_offering(kind, ctx, left);
        self.ask::<NextAction, _>(system, &request, ctx, |next| {
            replan::check(&next, ctx)
                .map(|()| next)
                .map_err(|e| e.to_string())
        })
    }

    fn completion_assessment(&mut self, ctx: &TaskContext) -> MetaOutcome<Assessment> {
        self.call(MessageType::CompletionAssessment, ctx)
    }
}
