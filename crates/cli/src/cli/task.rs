//! `agent-runner task new|list|show|run|approve|reject|deliver`: the TaskStore from the command line
//! (SPEC §11); `logs` and `stop` are in `watch.rs`. Human output is a table or a short report; `--json` prints one JSON
//! document. Text from tasks and results is shown with control characters escaped.

use std::io::Write;
use std::path::Path;

use clap::Subcommand;

use crate::error::{Error, exit};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::{cut_chars, escape_controls, fit, one_line};
use agent_runner_core::timestamp::human;
use agent_runner_pipeline::queue::approval;
use agent_runner_pipeline::queue::board::Board;
use agent_runner_pipeline::queue::run_request::{self, RunError};
use agent_runner_pipeline::queue::status::{self, JobState, TaskStatus};
use agent_runner_pipeline::queue::task_json::{self, TaskList};
use agent_runner_pipeline::store::attempt_files;
use agent_runner_pipeline::store::new_task;
use agent_runner_pipeline::store::pinned_test::PinnedTest;
use agent_runner_pipeline::store::task_file::{Attempt, AttemptStatus, TaskView};
use agent_runner_pipeline::store::task_store::TaskStore;
use agent_runner_pipeline::{PipelineError, Workspace};

use super::WorkspaceDir;
use super::{report, write_json_stdout, write_stdout};

/// `agent-runner task ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum TaskCommand {
    /// Create a task from a prompt; prints its id.
    New {
        #[command(flatten)]
        workspace: WorkspaceDir,
        /// The task id (default: t-<8 hex>).
        #[arg(long)]
        id: Option<String>,
        /// The title (default: the prompt's first line).
        #[arg(long)]
        title: Option<String>,
        /// The test command that proves the task done (run with `sh -c` in the
        /// sandbox after each worker run); wins over the workspace's and the Task
        /// Builder's.
        #[arg(long, value_name = "CMD")]
        test: Option<String>,
        /// Seconds a run of --test may take (default 600).
        #[arg(long, value_name = "SEC", requires = "test")]
        test_timeout: Option<u64>,
        /// What to do, in your words (the raw prompt).
        #[arg(required = true, value_name = "PROMPT")]
        prompt: Vec<String>,
    },
    /// List tasks: status, id, title, last attempt, duration.
    List {
        #[command(flatten)]
        workspace: WorkspaceDir,
        /// Include deleted tasks.
        #[arg(long)]
        all: bool,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Show a task: record, attempts, latest result, note path.
    Show {
        #[command(flatten)]
        workspace: WorkspaceDir,
        id: String,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Enqueue jobs for tasks; prints the job ids.
    Run {
        #[command(flatten)]
        workspace: WorkspaceDir,
        /// Task ids.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        ids: Vec<String>,
        /// Every task not yet succeeded (and not queued, running or deleted).
        #[arg(long)]
        all: bool,
        /// Continue each task's failed (or stopped) latest attempt where it left
        /// off, in the same directory (its clone), without a new plan.
        #[arg(long, conflicts_with = "all")]
        resume: bool,
        /// Run each task N times at once, each try in its own clone, and keep the
        /// best (default: the workspace's `tries`, else 1).
        #[arg(long, value_name = "N", conflicts_with = "resume")]
        tries: Option<u32>,
        /// Worker kinds the tries cycle over (e.g. codex-cli,claude-code-cli).
        #[arg(
            long,
            value_name = "KIND,...",
            value_delimiter = ',',
            conflicts_with = "resume"
        )]
        kinds: Vec<String>,
        /// With --resume: a follow-up for Meta's next step and the worker (also
        /// after a success: the same criteria plus the message); in the note.
        #[arg(long, value_name = "TEXT", requires = "resume")]
        message: Option<String>,
    },
    /// Approve the plan a task awaits approval of (`runner.meta.approve_plan`): its
    /// attempt goes on with the planned criteria, or with those of --criteria.
    Approve {
        #[command(flatten)]
        workspace: WorkspaceDir,
        id: String,
        /// A YAML file `acceptance_criteria: [...]` whose criteria replace the
        /// planned ones (and become the task's).
        #[arg(long, value_name = "FILE")]
        criteria: Option<std::path::PathBuf>,
    },
    /// Reject the plan a task awaits approval of: Meta plans again with the
    /// message, and the new plan awaits approval in turn.
    Reject {
        #[command(flatten)]
        workspace: WorkspaceDir,
        id: String,
        /// Why, for Meta's new plan.
        #[arg(long, value_name = "TEXT")]
        message: String,
    },
    /// Show the events of a task's current or last attempt, one line each.
    Logs {
        #[command(flatten)]
        workspace: WorkspaceDir,
        /// Follow the attempt until it ends; exit 0 if it succeeded, 1 if not.
        #[arg(short = 'f', long)]
        follow: bool,
        id: String,
    },
    /// Stop a task's job: a queued one is removed (cancelled), a running one's
    /// agent-runner gets SIGTERM, cleans up and writes its note. Waits until the
    /// attempt is recorded.
    Stop {
        #[command(flatten)]
        workspace: WorkspaceDir,
        id: String,
    },
    /// Deliver a task's latest verified attempt again (push its branch, run the PR
    /// command of the workspace's `deliver:`); exit 0 if delivered, 1 if not.
    Deliver {
        #[command(flatten)]
        workspace: WorkspaceDir,
        id: String,
    },
}

/// Runs a `task` subcommand; returns the exit code.
pub(crate) fn run(command: TaskCommand) -> i32 {
    let result = match command {
        TaskCommand::New {
            workspace,
            id,
            title,
            test,
            test_timeout,
            prompt,
        } => new(
            &workspace.dir,
            id,
            title,
            (test, test_timeout),
            prompt.join(" "),
        ),
        TaskCommand::List {
            workspace,
            all,
            json,
        } => list(&workspace.dir, all, json),
        TaskCommand::Show {
            workspace,
            id,
            json,
        } => show(&workspace.dir, &id, json),
        TaskCommand::Run {
            workspace,
            ids,
            all,
            resume,
            tries,
            kinds,
            message,
        } => enqueue(
            &workspace.dir,
            ids,
            all,
            resume,
            (tries, kinds),
            message.as_deref(),
        ),
        TaskCommand::Approve {
            workspace,
            id,
            criteria,
        } => approve(&workspace.dir, &id, criteria.as_deref()),
        TaskCommand::Reject {
            workspace,
            id,
            message,
        } => reject(&workspace.dir, &id, &message),
        TaskCommand::Logs {
            workspace,
            follow,
            id,
        } => super::watch::logs(&workspace.dir, &id, follow, Interrupt::from_signals()),
        TaskCommand::Stop { workspace, id } => {
            super::watch::stop(&workspace.dir, &id, Interrupt::from_signals())
        }
        TaskCommand::Deliver { workspace, id } => deliver(&workspace.dir, &id),
    };
    match result {
        Ok(code) => code,
        Err(e) => report(&e, &Redactor::default()),
    }
}

fn open(dir: &Path) -> Result<Workspace, Error> {
    Ok(Workspace::open(&super::home()?, dir)?)
}

fn new(
    dir: &Path,
    id: Option<String>,
    title: Option<String>,
    (test, test_timeout): (Option<String>, Option<u64>),
    prompt: String,
) -> Result<i32, Error> {
    if prompt.trim().is_empty() {
        return Err(PipelineError::Invalid("PROMPT: empty; say what the task is".into()).into());
    }
    let test = test
        .map(|command| PinnedTest::from_flags(&command, test_timeout, ("--test", "--test-timeout")))
        .transpose()
        .map_err(|e| PipelineError::Invalid(e.to_string()))?;
    let ws = open(dir)?;
    let record = new_task::create(&ws, id, title, prompt, test)?;
    write_stdout(&format!("{}\n", record.id))?;
    Ok(exit::COMPLETE)
}

fn deliver(dir: &Path, task_id: &str) -> Result<i32, Error> {
    let ws = open(dir)?;
    let delivery = agent_runner_pipeline::deliver::again(&ws, task_id, Interrupt::from_signals())?;
    write_stdout(&format!("{}\n", escape_controls(&delivery.describe())))?;
    Ok(if delivery.is_done() {
        exit::COMPLETE
    } else {
        exit::FAILED
    })
}

fn list(dir: &Path, all: bool, json: bool) -> Result<i32, Error> {
    let ws = open(dir)?;
    let board = Board::load(&ws)?;
    let rows = task_json::rows(&board, all);
    if json {
        write_json_stdout(&TaskList::new(&ws, &board, &rows))?;
        return Ok(exit::COMPLETE);
    }
    let mut out = String::with_capacity(rows.len() * 100 + 100);
    // A HOST column once any attempt shown ran on a named host (SPEC §22).
    let hosts = rows
        .iter()
        .any(|(t, _)| t.latest().is_some_and(|a| a.host.is_some()));
    let host_of = |latest: Option<&Attempt>| {
        if !hosts {
            return String::new();
        }
        let host = latest.and_then(|a| a.host.as_deref()).unwrap_or("-");
        format!(" {}", fit(&escape_controls(host), 12))
    };
    out.push_str(&format!(
        "{} {} {} {} {} {:>9} {:>9}{}\n",
        fit("STATUS", STATUS_WIDTH),
        fit("ID", 14),
        fit("TITLE", 40),
        fit("LAST ATTEMPT", 19),
        fit("DURATION", 8),
        "TOKENS",
        "COST",
        if hosts {
            format!(" {}", fit("HOST", 12))
        } else {
            String::new()
        }
    ));
    for (task, status) in &rows {
        let latest = task.latest();
        let (when, took) = match latest {
            Some(a) => (
                short_time(&a.started_at),
                human(std::time::Duration::from_millis(a.duration_ms)),
            ),
            None => ("-".to_string(), "-".to_string()),
        };
        let tokens = latest
            .and_then(Attempt::total_tokens)
            .map_or("-".to_string(), |t| t.to_string());
        let cost = latest
            .and_then(Attempt::cost_usd)
            .map_or("-".to_string(), |c| {
                format!("${}", agent_runner_core::usage::usd(c))
            });
        let id = escape_controls(&task.record.id);
        let id = if id.len() > 14 { id } else { fit(&id, 14) };
        out.push_str(&format!(
            "{} {id} {} {} {} {tokens:>9} {cost:>9}{}\n",
            fit(status::label(*status, task), STATUS_WIDTH),
            fit(&escape_controls(&one_line(&task.record.title)), 40),
            fit(&when, 19),
            fit(&took, 8),
            host_of(latest)
        ));
    }
    if rows.is_empty() {
        out.push_str("(no tasks; create one with `agent-runner task new PROMPT...`)\n");
    }
    write_stdout(&out)?;
    Ok(exit::COMPLETE)
}

/// Wide enough for `SUCCEEDED (unverified)`.
const STATUS_WIDTH: usize = status::SUCCEEDED_UNVERIFIED.len();

/// A stored time, short (`timestamp::short`), safe for a terminal.
fn short_time(rfc3339: &str) -> String {
    escape_controls(&agent_runner_core::timestamp::short(rfc3339))
}

fn show(dir: &Path, task_id: &str, json: bool) -> Result<i32, Error> {
    let ws = open(dir)?;
    let task = TaskStore::existing(&ws, task_id)?;
    let board = Board::around(&ws, &task)?;
    let job = board.jobs.get(task_id).cloned();
    let status = board.status(task_id).unwrap_or(TaskStatus::Pending);
    if json {
        let doc = task_json::detail(&task, status, job.as_ref());
        write_stdout(&format!("{doc}\n"))?;
        return Ok(exit::COMPLETE);
    }
    let mut out = String::new();
    record_lines(&mut out, &task, status, job.as_ref());
    attempt_lines(&mut out, &task);
    if let Some(a) = task.latest() {
        plan_lines(&mut out, &task.record.id, a);
        latest_lines(&mut out, &ws, &task.record.id, a);
    }
    write_stdout(&out)?;
    Ok(exit::COMPLETE)
}

/// `task show`'s first lines: the task's record, status and job.
fn record_lines(
    out: &mut String,
    task: &TaskView,
    status: TaskStatus,
    job: Option<&(JobState, String)>,
) {
    let e = |s: &str| escape_controls(s);
    let r = &task.record;
    out.push_str(&format!("task {}: {}\n", e(&r.id), e(&one_line(&r.title))));
    out.push_str(&format!("  status:      {}\n", status::label(status, task)));
    if let Some(test) = &r.plan.test {
        out.push_str(&format!("  test:        {}\n", e(&one_line(&test.command))));
    }
    out.push_str(&format!("  created:     {}\n", e(&r.created_at)));
    let mut prompt = r.raw_prompt.lines();
    out.push_str(&format!(
        "  prompt:      {}\n",
        e(prompt.next().unwrap_or(""))
    ));
    for line in prompt {
        out.push_str(&format!("               {}\n", e(line)));
    }
    if let Some(deps) = r.plan.depends_on.as_ref().filter(|d| !d.is_empty()) {
        out.push_str(&format!("  depends on:  {}\n", e(&deps.join(", "))));
    }
    if let Some(d) = &task.deleted {
        out.push_str(&format!("  deleted:     {} {}\n", e(&d.at), e(&d.reason)));
    }
    if let Some((state, id)) = job {
        out.push_str(&format!(
            "  job:         {} ({})\n",
            e(id),
            format!("{state:?}").to_lowercase()
        ));
    }
}

/// `task show`'s line per attempt.
fn attempt_lines(out: &mut String, task: &TaskView) {
    let e = |s: &str| escape_controls(s);
    out.push_str(&format!("  attempts:    {}\n", task.attempts.len()));
    for (n, a) in task.attempts.iter().enumerate() {
        let error = a.error.as_deref().map_or(String::new(), |x| {
            format!(": {}", e(&cut_chars(&one_line(x), 160)))
        });
        let source = a
            .test_source
            .map_or(String::new(), |s| format!(", test: {}", s.as_str()));
        let source = match &a.host {
            Some(host) => format!(", host {}{source}", e(host)),
            None => source,
        };
        out.push_str(&format!(
            "    {}. {} {} {} in {}{} (job {}{source}){error}\n",
            n + 1,
            short_time(&a.started_at),
            e(&a.attempt_id),
            a.status.as_str(),
            human(std::time::Duration::from_millis(a.duration_ms)),
            spend(a),
            e(&a.job_id),
        ));
        if let Some(t) = &a.try_of {
            out.push_str(&format!(
                "       try {} of {} (tries {})\n",
                t.k,
                t.n,
                e(&t.group)
            ));
        }
        if let Some(delivery) = &a.delivery {
            out.push_str(&format!(
                "       {}\n",
                e(&cut_chars(&one_line(&delivery.describe()), 300))
            ));
        }
        if let Some(comparison) = &a.tries {
            for line in comparison.lines() {
                out.push_str(&format!(
                    "       {}\n",
                    e(&cut_chars(&one_line(&line), 400))
                ));
            }
        }
    }
}

/// The plan an attempt awaits approval of (SPEC §23): its criteria, and what to do.
fn plan_lines(out: &mut String, task_id: &str, a: &Attempt) {
    if a.status != AttemptStatus::AwaitingApproval {
        return;
    }
    let e = |s: &str| escape_controls(s);
    out.push_str("  plan awaiting approval:\n");
    let plan = a.result_value().map(|r| r["plan"].clone());
    for criterion in plan
        .as_ref()
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
    {
        let text = |key: &str| e(&one_line(criterion[key].as_str().unwrap_or("")));
        out.push_str(&format!("    {}: {}\n", text("id"), text("description")));
    }
    out.push_str(&format!(
        "  approve:     agent-runner task approve {id} [--criteria FILE]\n  reject:      agent-runner task reject {id} --message TEXT\n",
        id = e(task_id)
    ));
}

/// `task show`'s lines of the latest attempt `a` of task `task_id`: its result,
/// usage and files.
fn latest_lines(out: &mut String, ws: &Workspace, task_id: &str, a: &Attempt) {
    let e = |s: &str| escape_controls(s);
    out.push_str(&format!("latest attempt ({}):\n", e(&a.attempt_id)));
    match a.result_value() {
        Some(result) => result_lines(out, ws, task_id, a, &result),
        None => out.push_str("  result:      (agent-runner printed none)\n"),
    }
    usage_breakdown(out, a);
    if let Some(branch) = &a.branch {
        out.push_str(&format!("  branch:      {}\n", e(branch)));
    }
    let shown = |path: Option<std::path::PathBuf>| {
        path.map_or("(not shown: the job id is not valid)".into(), |p| {
            e(&p.display().to_string())
        })
    };
    let logs = attempt_files::log_dir(ws, a);
    let work = attempt_files::work_log_dir(ws, a);
    out.push_str(&format!(
        "  task config: {}\n",
        shown(work.as_ref().map(|l| l.join("task-config.yaml")))
    ));
    out.push_str(&format!("  logs:        {}\n", shown(logs)));
    out.push_str(&format!(
        "  result file: {}\n",
        shown(attempt_files::result_file(ws, a))
    ));
}

/// The lines of attempt `a`'s result: summary, validation and note.
fn result_lines(
    out: &mut String,
    ws: &Workspace,
    task_id: &str,
    a: &Attempt,
    result: &serde_json::Value,
) {
    let e = |s: &str| escape_controls(s);
    let text = |k: &str| result[k].as_str().map(str::to_string);
    out.push_str(&format!(
        "  summary:     {}\n",
        e(&one_line(&text("summary").unwrap_or_default()))
    ));
    let v = &result["validation"];
    out.push_str(&format!(
        "  validation:  {}\n",
        e(v["overall"].as_str().unwrap_or("unknown"))
    ));
    out.push_str(&format!(
        "  verified:    {}\n",
        if a.is_verified() { "yes" } else { "no" }
    ));
    for c in v["commands"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "    `{}`: exit {}, {}\n",
            e(c["command"].as_str().unwrap_or("?")),
            c["exit_code"]
                .as_i64()
                .map_or("-".into(), |x| x.to_string()),
            human(std::time::Duration::from_millis(
                c["duration_ms"].as_u64().unwrap_or(0)
            ))
        ));
    }
    // Paths only as the workspace's own directories have them: a forged attempt
    // line or result could name any file.
    let note = match (text("note_path"), attempt_files::note_path(ws, task_id, a)) {
        (_, Some(path)) => e(&path.display().to_string()),
        (None, None) => "(none)".into(),
        (Some(_), None) => "(not in this workspace's directories: not shown)".into(),
    };
    out.push_str(&format!("  note:        {note}\n"));
}

/// `, 1234 tokens, $0.05` for an attempt's line; nothing when not recorded.
fn spend(a: &Attempt) -> String {
    let tokens = a
        .total_tokens()
        .map_or(String::new(), |t| format!(", {t} tokens"));
    let cost = match (a.total_tokens(), a.cost_usd()) {
        (None, _) => String::new(),
        (Some(_), Some(c)) => format!(", ${}", agent_runner_core::usage::usd(c)),
        (Some(_), None) => ", cost unknown".into(),
    };
    format!("{tokens}{cost}")
}

/// The latest attempt's usage (SPEC §15): Meta, worker, Task Builder, totals, cost
/// and the budget.
fn usage_breakdown(out: &mut String, a: &Attempt) {
    let cost = |c: Option<f64>| {
        c.map_or("unknown".to_string(), |c| {
            format!("${}", agent_runner_core::usage::usd(c))
        })
    };
    let tokens = |t: &agent_runner_core::usage::Tokens| {
        format!(
            "{} in ({} cached), {} out",
            t.input_tokens, t.cached_input_tokens, t.output_tokens
        )
    };
    if let Some(u) = &a.usage {
        out.push_str(&format!(
            "  meta:        {} call(s), {}\n",
            u.meta.calls,
            tokens(&u.meta.tokens)
        ));
        out.push_str(&format!(
            "  worker:      {} run(s), {}\n",
            u.worker.runs,
            tokens(&u.worker.tokens)
        ));
    }
    if let Some(b) = &a.builder_usage {
        out.push_str(&format!(
            "  builder:     {} call(s), {}, {}\n",
            b.calls,
            tokens(&b.tokens),
            cost(b.cost_usd)
        ));
    }
    match a.total_tokens() {
        Some(total) => out.push_str(&format!(
            "  usage:       {total} tokens, cost {}\n",
            cost(a.cost_usd())
        )),
        None => out.push_str("  usage:       (not recorded)\n"),
    }
    if let Some(budget) = a.budget.as_ref().filter(|b| b.is_object()) {
        let limit = |key: &str| match &budget[key] {
            serde_json::Value::Null => "none".to_string(),
            v => escape_controls(&v.to_string()),
        };
        let exhausted = match budget["exhausted"].as_str() {
            Some(limit) => format!("; exhausted: {}", escape_controls(limit)),
            None => String::new(),
        };
        out.push_str(&format!(
            "  budget:      max_tokens {}, max_cost_usd {}, max_duration_sec {}{exhausted}\n",
            limit("max_tokens"),
            limit("max_cost_usd"),
            limit("max_duration_sec")
        ));
    }
}

/// `task approve`: prints the job that goes on.
fn approve(dir: &Path, id: &str, criteria: Option<&Path>) -> Result<i32, Error> {
    let criteria = criteria.map(approval::read_criteria).transpose()?;
    let ws = open(dir)?;
    enqueued(approval::approve(&ws, id, criteria))
}

/// `task reject`: prints the job that plans again.
fn reject(dir: &Path, id: &str, message: &str) -> Result<i32, Error> {
    let ws = open(dir)?;
    enqueued(approval::reject(&ws, id, message))
}

/// The job id printed, or why there is none (exit 1 when refused).
fn enqueued(job: Result<String, RunError>) -> Result<i32, Error> {
    match job {
        Ok(job) => {
            write_stdout(&format!("{job}\n"))?;
            Ok(exit::COMPLETE)
        }
        Err(RunError::Refused(why)) => {
            let _ = writeln!(
                std::io::stderr(),
                "error: {}",
                escape_controls(&why.to_string())
            );
            Ok(exit::FAILED)
        }
        Err(RunError::Failed(e)) => Err(e.into()),
    }
}

fn enqueue(
    dir: &Path,
    ids: Vec<String>,
    all: bool,
    resume: bool,
    (tries, kinds): (Option<u32>, Vec<String>),
    message: Option<&str>,
) -> Result<i32, Error> {
    let ws = open(dir)?;
    let tries = tries.or(ws.defaults.tries()).unwrap_or(1);
    if !resume {
        agent_runner_pipeline::store::tries::check_count(tries, "--tries")
            .map_err(|e| PipelineError::Invalid(e.to_string()))?;
    }
    let mut code = exit::COMPLETE;
    let mut refuse = |why: String| {
        let _ = writeln!(std::io::stderr(), "error: {}", escape_controls(&why));
        code = exit::FAILED;
    };
    let chosen = if all {
        run_request::not_yet_run(&ws)?
    } else {
        ids
    };
    // One task's problem (refused, or its file unreadable) is said and the others
    // are enqueued all the same.
    let mut out = String::new();
    for id in chosen {
        let enqueued = if let Some(message) = message {
            run_request::enqueue_follow_up(&ws, &id, message).map(|job| vec![job])
        } else if resume {
            run_request::enqueue_resume(&ws, &id).map(|job| vec![job])
        } else {
            run_request::enqueue_tries(&ws, &id, tries, &kinds)
        };
        match enqueued {
            Ok(jobs) => jobs
                .iter()
                .for_each(|job| out.push_str(&format!("{job}\n"))),
            Err(RunError::Refused(why)) => refuse(why.to_string()),
            Err(RunError::Failed(e)) => refuse(format!("task {id}: {e}")),
        }
    }
    write_stdout(&out)?;
    Ok(code)
}
