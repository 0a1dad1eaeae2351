//! The Task Note: `<repo>/.agent-runner/task-<id>.md`, the whole history of a task in
//! Markdown (SPEC §7). Rewritten atomically after every step, so a crash leaves the
//! latest state; long outputs appear as tails with the path of the full log. All
//! outside text goes through `markdown`, so the note stays valid Markdown whatever
//! the PRD, Meta, the worker or the tests said (SPEC §10).

use std::fmt::Write as _;

use crate::context::{TaskContext, TaskState};
use agent_runner_core::fs::Dir;
use agent_runner_core::markdown::{code_span, fence, inline, quote};
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::{cut, tail};
use agent_runner_core::timestamp::human;
use agent_runner_core::usage::{Pricing, Usage};
use agent_runner_meta::MetaCall;
use agent_runner_sandbox::backend::privileges::Finding;
use agent_runner_sandbox::worker::envelope::Leftovers;
use agent_runner_sandbox::worker::git::RepoChanges;
use agent_runner_sandbox::worker::{SetupRun, TestRun, WorkerRun};
use agent_runner_settings::allow::Origin;
use agent_runner_settings::task::{MetaBackend, Network, PrdSource};

/// Output shown in the note per worker or test run (the full log is on disk).
const NOTE_TAIL: usize = 8 * 1024;
const PRD_SUMMARY: usize = 1024;
/// Changed files listed per run (the rest is counted).
const MAX_FILES_SHOWN: usize = 100;

/// Renders the note; every secret in `redactor` is masked.
pub(crate) fn render(ctx: &TaskContext, redactor: &Redactor) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_note(&mut out, ctx);
    redactor.redact(&out)
}

/// Writes the note atomically into agent-runner's directory `dir` (a new temp file,
/// then rename; never through anything the worker left there).
pub fn write(dir: &Dir, ctx: &TaskContext, redactor: &Redactor) -> std::io::Result<()> {
    // No fsync: the rename already keeps readers from a half-written note, and the
    // note is rewritten after every step (fsync cost ~10 ms each here).
    dir.write_atomic(&ctx.task.note_name(), render(ctx, redactor).as_bytes())
}

fn write_note(out: &mut String, ctx: &TaskContext) -> std::fmt::Result {
    header(out, ctx)?;
    summary(out, ctx)?;
    prd(out, ctx)?;
    criteria(out, ctx)?;
    execution_log(out, ctx)?;
    tests(out, ctx)?;
    egress(out, ctx)?;
    notes(out, ctx)?;
    earlier_runs(out, ctx)
}

/// A resumed task (SPEC §19): the note of the runs before, as it was, kept whole
/// in a fence (valid Markdown whatever it holds).
fn earlier_runs(out: &mut String, ctx: &TaskContext) -> std::fmt::Result {
    let Some(resumed) = &ctx.resumed else {
        return Ok(());
    };
    writeln!(
        out,
        "
---

## 8. Before the Resume
"
    )?;
    writeln!(
        out,
        "This run resumed the task at {} after {} loop(s), with the saved criteria and history (no new plan). The run before ended {}.",
        resumed.at,
        resumed.loops,
        inline(&resumed.previous)
    )?;
    match &resumed.earlier_note {
        Some(note) => {
            writeln!(
                out,
                "
<details>
<summary>The Task Note of the runs before</summary>
"
            )?;
            out.push_str(&fence("markdown", note));
            writeln!(out, "</details>")
        }
        None => writeln!(
            out,
            "
The runs before left no note."
        ),
    }
}

fn header(out: &mut String, ctx: &TaskContext) -> std::fmt::Result {
    let task = &ctx.task;
    let (id, title) = (inline(&task.id), inline(&task.title));
    writeln!(out, "# Task Note - {id} - {title}\n")?;
    writeln!(out, "- Task ID: {id}")?;
    writeln!(out, "- Title: {title}")?;
    writeln!(out, "- Started At: {}", ctx.started)?;
    match ctx.finished {
        Some(f) => writeln!(out, "- Finished At: {f}")?,
        None => writeln!(out, "- Finished At: (running)")?,
    }
    writeln!(out, "- Duration: {}", human(ctx.duration()))?;
    let interrupted = if ctx.interrupted {
        " (interrupted)"
    } else {
        ""
    };
    writeln!(out, "- State: {}{interrupted}", ctx.state)?;
    if let Some(resumed) = &ctx.resumed {
        writeln!(
            out,
            "- Resumed: at {} after {} loop(s) (see 8. Before the Resume)",
            resumed.at, resumed.loops
        )?;
        if let Some(message) = &resumed.message {
            writeln!(out, "- Follow-up message: {}", inline(message))?;
        }
    }
    writeln!(out, "- Loops: {} of {}", ctx.loops, task.meta.max_loops)?;
    if ctx.replans > 0 {
        writeln!(
            out,
            "- Replans: {} of {}",
            ctx.replans, task.meta.max_replans
        )?;
    }
    let usage = ctx.usage();
    writeln!(
        out,
        "- Usage: {} tokens, cost {} (see 4.4)",
        usage.total_tokens,
        cost(usage.cost_usd)
    )?;
    if ctx.resumed.is_some() {
        let whole = ctx.task_usage();
        writeln!(
            out,
            "- Usage of the whole task (the runs before the resume too): {} tokens, cost {}",
            whole.total_tokens,
            cost(whole.cost_usd)
        )?;
    }
    writeln!(
        out,
        "- Repository: {}",
        inline(&task.repo.display().to_string())
    )?;
    let meta = match &task.meta.backend {
        MetaBackend::Api(api) => {
            let effort = match &task.meta.reasoning_effort {
                Some(effort) => format!(", reasoning effort {}", effort.level.as_str()),
                None => String::new(),
            };
            format!(
                "{}, model {}{effort} at {}",
                api.wire.as_str(),
                task.meta.model,
                api.base_url
            )
        }
        MetaBackend::Scripted { script } => format!("scripted ({})", script.display()),
        MetaBackend::CodexCli(_) => {
            format!("codex-cli, model {}, in the sandbox image", task.meta.model)
        }
    };
    writeln!(out, "- Meta: {}", inline(&meta))?;
    writeln!(
        out,
        "- Worker: {} in {}{}",
        task.worker.kind.name(),
        inline(&task.worker.docker_image),
        task.worker
            .runtime
            .as_ref()
            .map_or(String::new(), |r| format!(" (runtime {})", inline(r)))
    )?;
    mcp_servers(out, &task.worker)
}

/// The worker's MCP servers (SPEC §28), without their secrets.
fn mcp_servers(
    out: &mut String,
    worker: &agent_runner_settings::task::WorkerSettings,
) -> std::fmt::Result {
    if worker.mcp_servers.is_empty() {
        return Ok(());
    }
    writeln!(out, "- MCP servers:")?;
    for server in &worker.mcp_servers {
        writeln!(out, "  - {}", inline(&server.describe()))?;
    }
    Ok(())
}

fn summary(out: &mut String, ctx: &TaskContext) -> std::fmt::Result {
    writeln!(out, "\n---\n\n## 1. Summary\n")?;
    match (ctx.state, &ctx.failure, &ctx.assessment) {
        (TaskState::Failed, Some(reason), assessment) => {
            writeln!(out, "**Failed:** {}\n", inline(reason))?;
            if let Some(a) = assessment {
                writeln!(out, "Last assessment:\n\n{}", quote(&a.summary))?;
            }
        }
        (TaskState::AwaitingApproval, _, _) => writeln!(
            out,
            "**Awaiting approval** (`runner.meta.approve_plan`): the acceptance criteria below \
             are Meta's plan; nothing has run. `agent-runner run --resume` with the same task \
             approves them and goes on."
        )?,
        (_, _, Some(a)) => writeln!(out, "{}", quote(&a.summary))?,
        (state, _, None) => writeln!(out, "In progress ({state}).")?,
    }
    Ok(())
}

fn prd(out: &mut String, ctx: &TaskContext) -> std::fmt::Result {
    let task = &ctx.task;
    writeln!(out, "\n---\n\n## 2. PRD\n")?;
    if let PrdSource::File(path) = &task.prd.source {
        writeln!(out, "Source: {}\n", inline(&path.display().to_string()))?;
    }
    out.push_str(&quote(&cut(task.prd.text.trim(), PRD_SUMMARY)));
    writeln!(out, "\n<details>\n<summary>PRD (full text)</summary>\n")?;
    out.push_str(&fence("text", &task.prd.text));
    writeln!(out, "</details>")
}

fn criteria(out: &mut String, ctx: &TaskContext) -> std::fmt::Result {
    writeln!(out, "\n---\n\n## 3. Acceptance Criteria\n")?;
    let versions = &ctx.criteria_versions;
    if versions.len() > 1 {
        // Replans (SPEC §16): the current version first, then every earlier one.
        let current = versions.len();
        writeln!(
            out,
            "Version {current} of {current} ({}):\n",
            version_origin(&versions[current - 1])
        )?;
    }
    if ctx.criteria.is_empty() {
        writeln!(out, "No criteria were planned.")?;
    }
    criteria_list(out, &ctx.criteria)?;
    if versions.len() > 1 {
        writeln!(out, "\nEarlier versions, replaced by a replan:")?;
        for (n, version) in versions.iter().enumerate().take(versions.len() - 1) {
            writeln!(
                out,
                "\n### Version {} ({})\n",
                n + 1,
                version_origin(version)
            )?;
            criteria_list(out, &version.criteria)?;
        }
    }
    Ok(())
}

fn criteria_list(out: &mut String, criteria: &[crate::context::Criterion]) -> std::fmt::Result {
    for c in criteria {
        writeln!(
            out,
            "- [{}] {}: {}",
            if c.passed { "x" } else { " " },
            inline(&c.id),
            inline(&c.description)
        )?;
    }
    Ok(())
}

/// When and why a version of the criteria was made.
fn version_origin(version: &crate::context::CriteriaVersion) -> String {
    if version.at_loop == 0 {
        inline(&version.reason)
    } else {
        format!(
            "re-planned at loop {}: {}",
            version.at_loop,
            inline(&cut(&version.reason, 500))
        )
    }
}

fn execution_log(out: &mut String, ctx: &TaskContext) -> std::fmt::Result {
    writeln!(out, "\n---\n\n## 4. Execution Log\n\n### 4.1 Meta Calls\n")?;
    if ctx.meta_calls.is_empty() {
        writeln!(out, "None.\n")?;
    }
    let pricing = &ctx.task.bounds.pricing;
    for (n, call) in ctx.meta_calls.iter().enumerate() {
        meta_call(out, n + 1, call, pricing)?;
    }
    writeln!(out, "### 4.2 Worker Runs\n")?;
    if ctx.worker_runs.is_empty() {
        writeln!(out, "None.\n")?;
    }
    for run in &ctx.worker_runs {
        worker_run(out, run, pricing)?;
    }
    writeln!(out, "### 4.3 State Transitions\n")?;
    for t in &ctx.transitions {
        let reason = if t.reason.is_empty() {
            String::new()
        } else {
            format!(": {}", inline(&t.reason))
        };
        writeln!(out, "- {} {} → {}{reason}", t.at, t.from, t.to)?;
    }
    usage_and_budget(out, ctx)
}

/// `1200 in (300 cached), 60 out`; the counts only some APIs report (tokens
/// written to the cache, reasoning tokens) when there are any.
fn token_counts(t: &agent_runner_core::usage::Tokens, unit: &str) -> String {
    let written = match t.cache_write_input_tokens {
        0 => String::new(),
        n => format!(", {n} written to the cache"),
    };
    let reasoning = match t.reasoning_tokens {
        0 => String::new(),
        n => format!(" ({n} reasoning)"),
    };
    format!(
        "{}{unit} in ({} cached{written}), {} out{reasoning}",
        t.input_tokens, t.cached_input_tokens, t.output_tokens
    )
}

/// Section 4.4: what the task's paid calls used and cost, and its limits (SPEC §15).
fn usage_and_budget(out: &mut String, ctx: &TaskContext) -> std::fmt::Result {
    writeln!(out, "\n### 4.4 Usage and Budget\n")?;
    let usage = ctx.usage();
    let side = |calls: u32, what: &str, t: &agent_runner_core::usage::Tokens, unreported: u32| {
        let missing = if unreported > 0 {
            format!(" ({unreported} reported no usage and are not counted)")
        } else {
            String::new()
        };
        format!("{calls} {what}: {}{missing}", token_counts(t, " tokens"))
    };
    writeln!(
        out,
        "- Meta: {}",
        side(
            usage.meta.calls,
            "call(s)",
            &usage.meta.tokens,
            usage.meta.unreported
        )
    )?;
    writeln!(
        out,
        "- Worker: {}",
        side(
            usage.worker.runs,
            "run(s)",
            &usage.worker.tokens,
            usage.worker.unreported
        )
    )?;
    writeln!(out, "- Total: {} tokens", usage.total_tokens)?;
    writeln!(out, "- Cost: {}", cost(usage.cost_usd))?;
    if let Some(resumed) = &ctx.resumed {
        // The budget counts the whole task (SPEC §19); this run's calls are above.
        let whole = ctx.task_usage();
        writeln!(
            out,
            "- Whole task, the runs before the resume included: {} tokens, cost {}, {} of run time ({} tokens and {} before)",
            whole.total_tokens,
            cost(whole.cost_usd),
            human(ctx.task_elapsed()),
            resumed.usage.total_tokens,
            human(resumed.elapsed)
        )?;
    }
    for model in &usage.models {
        writeln!(
            out,
            "  - {}: {} call(s), {} tokens, {}",
            inline(model.model.as_deref().unwrap_or("(model not known)")),
            model.calls,
            model.total_tokens(),
            cost(model.cost_usd)
        )?;
    }
    let budget = &ctx.task.bounds.budget;
    let limit = |set: Option<String>| set.unwrap_or_else(|| "none".into());
    writeln!(
        out,
        "- Budget: max_tokens {}, max_cost_usd {}, max_duration_sec {}",
        limit(budget.max_tokens.map(|t| t.to_string())),
        limit(budget.max_cost_usd.map(agent_runner_core::usage::usd)),
        limit(budget.max_duration.map(|d| d.as_secs().to_string()))
    )?;
    if let Some(limit) = ctx.budget_exhausted {
        writeln!(out, "- Exhausted: {limit}")?;
    }
    Ok(())
}

/// A cost for people: `$0.0412`, or why it is not known.
fn cost(usd: Option<f64>) -> String {
    match usd {
        Some(usd) => format!("${}", agent_runner_core::usage::usd(usd)),
        None => "unknown (a model without a price in runner.pricing)".into(),
    }
}

fn tests(out: &mut String, ctx: &TaskContext) -> std::fmt::Result {
    writeln!(out, "\n---\n\n## 5. Test Result\n")?;
    if let Some(run) = &ctx.setup {
        setup_run(out, run)?;
    }
    match (ctx.last_test_run(), &ctx.task.test) {
        (Some(run), _) => test_run(out, run, ctx.test_runs.len())?,
        (None, Some(test)) => writeln!(
            out,
            "Tests were not run ({} is configured; no iteration reached validation).",
            code_span(&test.command)
        )?,
        (None, None) => writeln!(out, "Tests were not run (no `task.test.command`).")?,
    }
    if ctx.test_runs.len() > 1 {
        writeln!(out, "\nAll test runs:\n")?;
        for run in &ctx.test_runs {
            writeln!(
                out,
                "- Test {}: {} in {} ({})",
                run.number,
                verdict(run),
                human(run.duration),
                inline(&run.log_path.display().to_string())
            )?;
        }
    }
    Ok(())
}

/// Section 6: what the worker's network could reach, and what it tried (SPEC §17).
fn egress(out: &mut String, ctx: &TaskContext) -> std::fmt::Result {
    writeln!(out, "\n---\n\n## 6. Egress\n")?;
    let worker = &ctx.task.worker;
    match worker.network {
        Network::Allowlist => {}
        Network::None => return writeln!(out, "No network (`network: none`)."),
        other => {
            return writeln!(
                out,
                "Not controlled (`network: {}`): the worker could reach any host, and nothing was recorded.",
                other.as_str()
            );
        }
    }
    let origin = match &worker.allow.origin {
        Origin::Task => "runner.worker.allow".to_string(),
        Origin::Default(why) => format!("the default for {why}"),
    };
    let entries = worker.allow.entries();
    let listed = if entries.is_empty() {
        "nothing".to_string()
    } else {
        entries
            .iter()
            .map(|e| code_span(e))
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(
        out,
        "The container had no network; agent-runner's proxy let through {listed} ({}).",
        inline(&origin)
    )?;
    for server in &worker.mcp_servers {
        if let agent_runner_settings::agent::McpTransport::Remote { url, .. } = &server.transport
            && let Some(entry) = agent_runner_settings::task::allow_entry_of(url)
        {
            writeln!(
                out,
                "The host of MCP server {} is on it: {}.",
                inline(&server.name),
                code_span(&entry)
            )?;
        }
    }
    let log = ctx
        .task
        .repo
        .join(agent_runner_core::private_dir::DIR_NAME)
        .join("logs")
        .join(&ctx.task.id)
        .join(agent_runner_egress::LOG_FILE);
    writeln!(
        out,
        "Every connection is in {} (after the first {} of a kind to a destination, repeats are summed into one line each).\n",
        inline(&log.display().to_string()),
        agent_runner_egress::DETAIL_LINES
    )?;
    let Some(summary) = ctx.teardown.as_ref().and_then(|t| t.egress.as_ref()) else {
        return writeln!(out, "Counted when the sandbox is gone.");
    };
    let denied = egress_tally(out, summary, worker.kind.name())?;
    egress_wanted(out, ctx, entries, &denied)?;
    if summary.log_truncated {
        writeln!(
            out,
            "\nThe log reached its bound ({}) and stops there; the counts above are complete.",
            agent_runner_core::text::bytes(agent_runner_egress::MAX_LOG_BYTES)
        )?;
    }
    if let Some(e) = &summary.log_error {
        writeln!(
            out,
            "\nThe log could not be written completely: {}",
            inline(e)
        )?;
    }
    Ok(())
}

/// The connections the proxy let through and those it refused, each destination
/// with how to allow it; the refused ones.
fn egress_tally<'a>(
    out: &mut String,
    summary: &'a agent_runner_egress::Summary,
    kind: &str,
) -> Result<Vec<&'a agent_runner_egress::Tally>, std::fmt::Error> {
    let (allowed, denied): (Vec<_>, Vec<_>) = summary.destinations.iter().partition(|t| t.allowed);
    writeln!(out, "Allowed: {} connection(s).", summary.allowed)?;
    for t in &allowed {
        writeln!(
            out,
            "- {}: {} connection(s), {} up, {} down{}",
            code_span(&t.destination),
            t.connections,
            agent_runner_core::text::bytes(t.bytes_up),
            agent_runner_core::text::bytes(t.bytes_down),
            if t.reason.contains("cannot") || t.bytes_up + t.bytes_down == 0 {
                format!(" ({})", inline(&t.reason))
            } else {
                String::new()
            }
        )?;
    }
    writeln!(out, "\nDenied: {} connection(s).", summary.denied)?;
    for t in &denied {
        let list = agent_runner_egress::list_in(&t.reason);
        let how = match &t.allow_entry {
            // Not needed: suggesting it would open a way out for nothing.
            Some(_) if t.background => format!(
                "; {}'s own background request (an update check or feature flags): refusing it fails nothing",
                kind
            ),
            Some(e) => format!("; to allow it, add {} to {}", code_span(e), inline(list)),
            None => String::new(),
        };
        let destination = if t.destination == agent_runner_egress::NO_HOST {
            "(no destination read)".to_string()
        } else {
            code_span(&t.destination)
        };
        writeln!(
            out,
            "- {destination}: {} connection(s): {}{how}",
            t.connections,
            inline(&t.reason)
        )?;
    }
    if summary.untallied > 0 {
        writeln!(
            out,
            "\n{} more connection(s) to other destinations (see the log).",
            summary.untallied
        )?;
    }
    Ok(denied)
}

/// The allow lists that would have let through what the task was refused, for the
/// worker and for its setup.
fn egress_wanted(
    out: &mut String,
    ctx: &TaskContext,
    entries: Vec<String>,
    denied: &[&agent_runner_egress::Tally],
) -> std::fmt::Result {
    // What the task needed, by the list it goes in: not the agent's background
    // requests; setup's denials in setup's list (task.setup.allow).
    let needed = |list: &str| -> Vec<&String> {
        let mut needed: Vec<&String> = Vec::new();
        for t in denied.iter().filter(|t| !t.background) {
            if let Some(entry) = &t.allow_entry
                && agent_runner_egress::list_in(&t.reason) == list
                && !needed.contains(&entry)
            {
                needed.push(entry);
            }
        }
        needed
    };
    let mut wanted = entries;
    for entry in needed("runner.worker.allow") {
        if !wanted.contains(entry) {
            wanted.push(entry.clone());
        }
    }
    if wanted.len() > ctx.task.worker.allow.rules.len() {
        let intro = "To allow what was denied, set in the task's runner.worker";
        allow_snippet(out, intro, &wanted)?;
    }
    let setup_wanted = needed("task.setup.allow");
    if !setup_wanted.is_empty() {
        let mut all: Vec<String> = ctx
            .task
            .setup
            .as_ref()
            .map(|s| s.allow.entries())
            .unwrap_or_default();
        for entry in setup_wanted {
            if !all.contains(entry) {
                all.push(entry.clone());
            }
        }
        let intro = "To allow what setup was denied (setup only, not the worker), set in the task's task.setup";
        allow_snippet(out, intro, &all)?;
    }
    Ok(())
}

fn notes(out: &mut String, ctx: &TaskContext) -> std::fmt::Result {
    writeln!(out, "\n---\n\n## 7. Notes / Remaining Risks\n")?;
    let mut notes = Vec::new();
    if let Some(a) = &ctx.assessment {
        notes.extend(a.remaining_risks.iter().map(|r| inline(r)));
    }
    if let Some(reason) = &ctx.failure {
        notes.push(format!("The task failed: {}", inline(reason)));
    }
    let removed: usize = (ctx.worker_runs.iter().map(|r| r.privileges.len()))
        .chain(ctx.test_runs.iter().map(|r| r.privileges.len()))
        .sum();
    if removed > 0 {
        notes.push(format!(
            "{removed} setuid/setgid file(s) or device node(s) left in the repository were made safe (see the runs above)."
        ));
    }
    if ctx
        .worker_runs
        .iter()
        .any(|r| matches!(r.changes, RepoChanges::Files { .. }))
    {
        notes.push(
            "Changed files are listed by agent-runner's helper (the image has no git), from the tools volume inside the container; files the worker made unreadable count by what could be read."
                .into(),
        );
    } else if ctx
        .worker_runs
        .iter()
        .any(|r| r.changes != RepoChanges::NotARepository && r.changes != RepoChanges::NoGit)
    {
        notes.push(
            "Changed files are reported by git inside the container, where the worker could alter what git says."
                .into(),
        );
    }
    if let Some(teardown) = &ctx.teardown {
        if let Some(work) = &teardown.work {
            notes.push(format!(
                "The repository was copied to where the sandbox ran (the copy transport, nothing of this machine mounted); {}; the working tree was not touched.",
                inline(&work.to_string())
            ));
        }
        notes.extend(teardown.notices.iter().map(|n| inline(n)));
        if let Some(took) = teardown.removed_in {
            notes.push(format!(
                "The sandbox container was removed in {}.",
                human(took)
            ));
        }
        if !teardown.privileges.is_empty() {
            notes.push(format!(
                "After the container was gone, {} privileged file(s) were still found in the repository and made safe:",
                teardown.privileges.len()
            ));
            notes.extend(
                teardown
                    .privileges
                    .iter()
                    .take(MAX_FILES_SHOWN)
                    .map(|f| format!("  {}", inline(&f.to_string()))),
            );
        }
    }
    if notes.is_empty() {
        notes.push("None.".into());
    }
    for note in notes {
        writeln!(out, "- {note}")?;
    }
    Ok(())
}

fn meta_call(out: &mut String, n: usize, call: &MetaCall, pricing: &Pricing) -> std::fmt::Result {
    let plural = if call.attempts == 1 { "" } else { "s" };
    writeln!(
        out,
        "#### {n}. {} at {} ({}, {} attempt{plural})\n",
        call.kind,
        call.started,
        human(call.duration),
        call.attempts
    )?;
    writeln!(out, "{}\n", usage_line(&call.usage, pricing))?;
    writeln!(out, "<details>\n<summary>Request</summary>\n")?;
    out.push_str(&fence("yaml", &call.request));
    writeln!(out, "</details>\n")?;
    for (i, reply) in call.replies.iter().enumerate() {
        if call.replies.len() > 1 {
            writeln!(out, "Reply {} of {}:\n", i + 1, call.replies.len())?;
        } else {
            writeln!(out, "Reply:\n")?;
        }
        out.push_str(&fence("yaml", reply));
    }
    if let Some(e) = &call.error {
        writeln!(out, "**Error:** {}\n", inline(e))?;
    }
    Ok(())
}

/// `Tokens: 1200 in (300 cached), 60 out; model m, cost $0.0012`.
fn usage_line(usage: &Usage, pricing: &Pricing) -> String {
    let model = inline(usage.model_label());
    let priced = usage
        .model
        .as_deref()
        .is_some_and(|m| pricing.price(m).is_some());
    // Without a price of the user's, the cost is what the agent said (claude's
    // total_cost_usd, at its list prices): say whose figure it is.
    let whose = match usage.reported_cost_usd {
        Some(_) if !priced => " (the agent's own figure)",
        _ => "",
    };
    match &usage.tokens {
        Some(t) => format!(
            "Tokens: {}; model {model}, cost {}{whose}",
            token_counts(t, ""),
            cost(pricing.cost(usage))
        ),
        None => format!("Tokens: not reported; model {model}"),
    }
}

fn worker_run(out: &mut String, run: &WorkerRun, pricing: &Pricing) -> std::fmt::Result {
    let exit = run.exit_code.map_or("none".to_string(), |c| c.to_string());
    writeln!(
        out,
        "#### Run {} ({}, ExitCode={exit}) at {} - {} ({})\n",
        run.number,
        run.outcome.as_str(),
        run.started,
        run.finished,
        human(run.duration)
    )?;
    writeln!(out, "- Summary: {}", inline(&run.summary))?;
    let t = &run.transcript;
    if !t.commands.is_empty() {
        list_heading(out, "Commands", t.commands_dropped)?;
        for c in &t.commands {
            let code = c
                .exit_code
                .map_or("not finished".to_string(), |e| format!("exit {e}"));
            writeln!(out, "  - {} → {code}", code_span(&cut(&c.command, 300)))?;
        }
    }
    if !t.mcp_calls.is_empty() {
        list_heading(out, "MCP tool calls", t.mcp_calls_dropped)?;
        for call in &t.mcp_calls {
            writeln!(
                out,
                "  - {} → {}",
                code_span(&cut(&call.text(), 300)),
                call.status
            )?;
        }
    }
    changes(out, run)?;
    writeln!(out, "- {}", usage_line(&run.usage, pricing))?;
    if let Some(error) = t.errors.last() {
        writeln!(out, "- Last error event: {}", inline(error))?;
    }
    leftovers(out, run.leftovers)?;
    privileges(out, &run.privileges)?;
    writeln!(
        out,
        "- Full log: {} ({} bytes)\n",
        inline(&run.log_path.display().to_string()),
        run.output_bytes
    )?;
    writeln!(
        out,
        "<details>\n<summary>Output (last {} KiB)</summary>\n",
        NOTE_TAIL / 1024
    )?;
    out.push_str(&fence("text", &tail(&run.output_tail, NOTE_TAIL)));
    writeln!(out, "</details>\n")
}

/// The heading of a list of the transcript's that keeps only its last items: how
/// many of the first were dropped, when any were.
fn list_heading(out: &mut String, what: &str, dropped: usize) -> std::fmt::Result {
    if dropped > 0 {
        writeln!(out, "- {what} (first {dropped} not shown):")
    } else {
        writeln!(out, "- {what}:")
    }
}

/// `intro`, then the `allow:` line to paste, with `entries` (the written list and
/// what was denied), as YAML.
fn allow_snippet(out: &mut String, intro: &str, entries: &[String]) -> std::fmt::Result {
    let quoted: Vec<String> = entries.iter().map(|e| format!("\"{e}\"")).collect();
    write!(
        out,
        "\n{intro}:\n\n{}",
        fence("yaml", &format!("allow: [{}]\n", quoted.join(", ")))
    )
}

/// What the run changed: git's view when the image has git, codex's otherwise.
fn changes(out: &mut String, run: &WorkerRun) -> std::fmt::Result {
    let lines = run.changes.lines(&run.transcript.file_changes);
    let source = match &run.changes {
        RepoChanges::Seen { .. } => "",
        RepoChanges::Files { .. } => {
            " (the image has no git: agent-runner's helper compared the files before and after)"
        }
        RepoChanges::NoGit => {
            " (as the worker reported them: the image has no git, so no snapshots were taken)"
        }
        RepoChanges::NotARepository => {
            " (as the worker reported them: the repository is not a git work tree)"
        }
        RepoChanges::Unknown => " (as the worker reported them: no snapshot after the run)",
    };
    if !lines.is_empty() {
        writeln!(out, "- Files changed{source}:")?;
        for line in lines.iter().take(MAX_FILES_SHOWN) {
            writeln!(out, "  - {}", inline(line))?;
        }
        if lines.len() > MAX_FILES_SHOWN {
            writeln!(out, "  - … and {} more", lines.len() - MAX_FILES_SHOWN)?;
        }
    } else if !source.is_empty() {
        writeln!(out, "- Files changed{source}: none reported")?;
    }
    if let RepoChanges::Seen {
        before,
        after,
        diff,
    } = &run.changes
    {
        if before.head != after.head {
            writeln!(
                out,
                "- Git HEAD: {} → {}",
                inline(before.head.as_deref().unwrap_or("(none)")),
                inline(after.head.as_deref().unwrap_or("(none)"))
            )?;
        }
        if !diff.is_empty() {
            let count = |f: fn(&agent_runner_sandbox::worker::git::DiffStat) -> Option<u64>| {
                diff.iter().filter_map(f).sum::<u64>()
            };
            writeln!(
                out,
                "- Diff stat: {} file(s), +{} −{}",
                diff.len(),
                count(|d| d.added),
                count(|d| d.deleted)
            )?;
            for d in diff.iter().take(MAX_FILES_SHOWN) {
                let n = |v: Option<u64>| v.map_or("bin".to_string(), |v| v.to_string());
                writeln!(
                    out,
                    "  - +{} −{} {}",
                    n(d.added),
                    n(d.deleted),
                    inline(&d.path)
                )?;
            }
        }
    }
    Ok(())
}

fn leftovers(out: &mut String, leftovers: Option<Leftovers>) -> std::fmt::Result {
    match leftovers {
        Some(Leftovers { found: 0, .. }) | None => Ok(()),
        Some(Leftovers { found, left }) => writeln!(
            out,
            "- Leftover processes stopped in the container afterwards: {found} ({left} still running after SIGKILL)"
        ),
    }
}

fn privileges(out: &mut String, findings: &[Finding]) -> std::fmt::Result {
    if findings.is_empty() {
        return Ok(());
    }
    writeln!(out, "- Privileged files made safe in the repository:")?;
    for finding in findings.iter().take(MAX_FILES_SHOWN) {
        writeln!(out, "  - {}", inline(&finding.to_string()))?;
    }
    if findings.len() > MAX_FILES_SHOWN {
        writeln!(out, "  - … and {} more", findings.len() - MAX_FILES_SHOWN)?;
    }
    Ok(())
}

/// `task.setup` as it ran before the first paid call (SPEC §21).
fn setup_run(out: &mut String, run: &SetupRun) -> std::fmt::Result {
    let verdict = ended_as(run.interrupted, run.timed_out, run.passed());
    writeln!(
        out,
        "Setup (once in this sandbox, before the first paid call):\n"
    )?;
    writeln!(out, "- Command: {}", code_span(&run.command))?;
    writeln!(
        out,
        "- Summary: {verdict} in {} (exit {})",
        human(run.duration),
        run.exit_code.map_or("none".to_string(), |c| c.to_string())
    )?;
    if let Some(egress) = &run.egress {
        let hosts: Vec<String> = egress
            .destinations
            .iter()
            .map(|t| {
                let how = if t.allowed { "allowed" } else { "denied" };
                format!("{} {how} ×{}", t.destination, t.connections)
            })
            .collect();
        writeln!(
            out,
            "- Egress: {} allowed, {} denied{}; setup's own hosts: {}",
            egress.allowed,
            egress.denied,
            if hosts.is_empty() {
                String::new()
            } else {
                format!(" ({})", inline(&hosts.join(", ")))
            },
            if run.allow.is_empty() {
                "none".to_string()
            } else {
                inline(&run.allow.join(", "))
            }
        )?;
    }
    writeln!(
        out,
        "- Full log: {}\n",
        inline(&run.log_path.display().to_string())
    )?;
    if !run.output_tail.trim().is_empty() {
        out.push_str(&fence("text", &tail(&run.output_tail, NOTE_TAIL)));
        out.push('\n');
    }
    Ok(())
}

fn test_run(out: &mut String, run: &TestRun, count: usize) -> std::fmt::Result {
    let cwd = if run.cwd.is_empty() {
        String::new()
    } else {
        format!(" (in {})", inline(&run.cwd))
    };
    writeln!(out, "- Command: {}{cwd}", code_span(&run.command))?;
    writeln!(
        out,
        "- ExitCode: {}",
        run.exit_code.map_or("none".to_string(), |c| c.to_string())
    )?;
    writeln!(
        out,
        "- Summary: {} in {} (test run {} of {count})",
        verdict(run),
        human(run.duration),
        run.number
    )?;
    leftovers(out, run.leftovers)?;
    privileges(out, &run.privileges)?;
    writeln!(
        out,
        "- Full log: {}\n",
        inline(&run.log_path.display().to_string())
    )?;
    if run.output_tail.trim().is_empty() {
        return writeln!(out, "(no output)");
    }
    out.push_str(&fence("text", &tail(&run.output_tail, NOTE_TAIL)));
    Ok(())
}

fn verdict(run: &TestRun) -> &'static str {
    ended_as(run.interrupted, run.timed_out, run.passed())
}

/// How a command of the task's (the set-up, a test) ended, in a word: an
/// interruption or the time limit says more than the exit code it left.
fn ended_as(interrupted: bool, timed_out: bool, passed: bool) -> &'static str {
    if interrupted {
        "interrupted"
    } else if timed_out {
        "timed out"
    } else if passed {
        "passed"
    } else {
        "failed"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_core::secret::Secret;

    #[test]
    fn a_cost_the_agent_reported_is_said_to_be_its_own() {
        let used = Usage {
            model: Some("claude-x".into()),
            tokens: Some(agent_runner_core::usage::Tokens {
                input_tokens: 10,
                cached_input_tokens: 4,
                output_tokens: 3,
                ..Default::default()
            }),
            reported_cost_usd: Some(0.25),
        };
        assert_eq!(
            usage_line(&used, &Pricing::default()),
            "Tokens: 10 in (4 cached), 3 out; model claude-x, cost $0.25 (the agent's own figure)"
        );
        let pricing = Pricing {
            models: [(
                "claude-x".to_string(),
                agent_runner_core::usage::Price {
                    input: 1e6,
                    cached_input: 1e6,
                    cache_write: 1e6,
                    output: 1e6,
                },
            )]
            .into(),
        };
        assert_eq!(
            usage_line(&used, &pricing),
            "Tokens: 10 in (4 cached), 3 out; model claude-x, cost $13",
            "the user's price wins"
        );
    }

    /// The note's block structure as a Markdown reader sees it: `##` headings and
    /// `<details>` open/close lines outside fenced blocks.
    fn structure(note: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut fence: Option<usize> = None;
        for line in note.lines() {
            let ticks = line.len() - line.trim_start_matches('`').len();
            match fence {
                Some(open) if ticks >= open && line.trim_start_matches('`').trim().is_empty() => {
                    fence = None;
                }
                Some(_) => {}
                None if ticks >= 3 => fence = Some(ticks),
                None if line.starts_with("## ") || line == "<details>" || line == "</details>" => {
                    out.push(line.to_string())
                }
                None => {}
            }
        }
        assert_eq!(fence, None, "a fence is left open");
        out
    }

    #[test]
    fn outside_text_cannot_break_the_notes_structure() {
        use agent_runner_settings::agent::{FileChange, RunOutcome, Transcript};
        let mut task = agent_runner_settings::task::test_task("");
        task.title = "two\nlines </details> ```".into();
        task.prd.text = "Intro\n```\nunbalanced fence\n</details>\n## 9. Fake section\n".into();
        let mut ctx = TaskContext::new(task);
        let base = structure(&render(
            &TaskContext::new(agent_runner_settings::task::test_task("")),
            &Redactor::default(),
        ));
        ctx.criteria.push(crate::context::Criterion {
            id: "AC-1\n## 7. Injected".into(),
            description: "</details> and ```".into(),
            passed: false,
        });
        let mut transcript = Transcript::default();
        transcript.file_changed(FileChange {
            path: "<details>".into(),
            kind: "add".into(),
        });
        ctx.worker_runs.push(WorkerRun {
            number: 1,
            started: agent_runner_core::timestamp::Timestamp::now(),
            finished: agent_runner_core::timestamp::Timestamp::now(),
            duration: std::time::Duration::ZERO,
            exit_code: Some(0),
            outcome: RunOutcome::Completed,
            summary: "done ```\n</details>".into(),
            transcript,
            log_path: "/tmp/run-1.log".into(),
            output_bytes: 3,
            output_tail: "````\n<details>\n".into(),
            changes: RepoChanges::NoGit,
            leftovers: None,
            privileges: vec![],
            usage: Default::default(),
        });
        ctx.assessment = Some(crate::context::Assessment {
            summary: "All good\n```\n## 6. Notes / Remaining Risks\n</details>".into(),
            passed_criteria: vec![],
            remaining_risks: vec!["risk\n## 8. more".into()],
            all_criteria_satisfied: None,
        });
        let note = render(&ctx, &Redactor::default());
        let mut with_details = base.clone();
        // The worker run adds one output block.
        with_details.extend(["<details>".to_string(), "</details>".to_string()]);
        let got = structure(&note);
        let headings: Vec<&String> = got.iter().filter(|l| l.starts_with("## ")).collect();
        let expected: Vec<&String> = base.iter().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(headings, expected, "{note}");
        let opened = got.iter().filter(|l| *l == "<details>").count();
        let closed = got.iter().filter(|l| *l == "</details>").count();
        assert_eq!(
            (opened, closed),
            (
                base.iter().filter(|l| *l == "<details>").count() + 1,
                opened
            ),
            "{note}"
        );
        assert!(
            note.starts_with("# Task Note - unit - two lines \\</details\\> \\`\\`\\`\n"),
            "{note}"
        );
        assert!(
            note.contains("\\<details\\>"),
            "the file name is escaped:\n{note}"
        );
        assert!(
            note.contains("- [ ] AC-1 \\#\\# 7. Injected: \\</details\\> and \\`\\`\\`"),
            "{note}"
        );
    }

    #[test]
    fn a_new_task_note_has_every_section_and_no_secret() {
        let ctx = TaskContext::new(agent_runner_settings::task::test_task(""));
        let key = Secret::new("Make it work".into());
        let note = render(&ctx, &Redactor::new([&key]));
        for heading in [
            "# Task Note - unit - unit",
            "## 1. Summary",
            "## 2. PRD",
            "## 3. Acceptance Criteria",
            "## 4. Execution Log",
            "### 4.1 Meta Calls",
            "### 4.2 Worker Runs",
            "### 4.3 State Transitions",
            "### 4.4 Usage and Budget",
            "## 5. Test Result",
            "## 6. Egress",
            "## 7. Notes / Remaining Risks",
        ] {
            assert!(note.contains(heading), "missing {heading}:\n{note}");
        }
        assert!(note.contains("- State: PENDING"));
        assert!(note.contains("Tests were not run (no `task.test.command`)."));
        assert!(
            !note.contains("Make it work") && note.contains("***."),
            "secrets masked:\n{note}"
        );
    }
}
