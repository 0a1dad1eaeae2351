//! `agent-runner plan [--patch | --show]` (SPEC §13): a chat message becomes new
//! tasks (Meta decompose) or an edit of the plan (Meta plan_patch); `--show` prints
//! the plan. Human output lists what changed; `--json` prints one JSON document.

use std::io::Write;

use serde_json::{Value, json};

use crate::error::{Error, exit};
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_core::text::{escape_controls, one_line};
use agent_runner_pipeline::Workspace;
use agent_runner_pipeline::plan::command::{self, Mode, Outcome, PlanError};
use agent_runner_pipeline::plan::edit::Step;
use agent_runner_pipeline::plan::model::PlanState;
use agent_runner_pipeline::plan::tree;

use super::{WorkspaceDir, report, write_stdout};

/// `plan` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct PlanArgs {
    #[command(flatten)]
    workspace: WorkspaceDir,
    /// Edit the existing plan (Meta plan_patch) instead of adding tasks to it.
    #[arg(long, conflicts_with = "show")]
    patch: bool,
    /// Show the plan: phases, tasks, statuses and dependencies.
    #[arg(long)]
    show: bool,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
    /// What you want, in your words (with --patch: what to change); `-`: read it
    /// from stdin (then no other process sees it in this one's command line).
    #[arg(
        value_name = "MESSAGE",
        required_unless_present = "show",
        conflicts_with = "show"
    )]
    message: Vec<String>,
}

/// Runs `plan` with `args`; returns the exit code.
pub(crate) fn run(args: PlanArgs, interrupt: Interrupt) -> i32 {
    let ws = match super::home().and_then(|home| Ok(Workspace::open(&home, &args.workspace.dir)?)) {
        Ok(ws) => ws,
        Err(e) => return report(&e, &Redactor::default()),
    };
    if args.show {
        return match show(&ws, args.json) {
            Ok(()) => exit::COMPLETE,
            Err(e) => report(&e, &Redactor::default()),
        };
    }
    let mode = if args.patch {
        Mode::Patch
    } else {
        Mode::Decompose
    };
    let message = if args.message == ["-"] {
        let example = "`echo 'Add a login page' | agent-runner plan -`";
        match super::input::read_text("the message", example, interrupt) {
            Ok(message) => message,
            Err(e) => return report(&e, &Redactor::default()),
        }
    } else {
        args.message.join(" ")
    };
    let var = |name: &str| std::env::var(name).ok();
    match command::run(&ws, mode, &message, &var, interrupt) {
        Ok(outcome) => {
            let text = if args.json {
                format!("{}\n", document(&ws, &outcome))
            } else {
                summary(&outcome)
            };
            match write_stdout(&text) {
                Ok(()) => exit::COMPLETE,
                Err(e) => report(&e, &Redactor::default()),
            }
        }
        Err(PlanError::Pipeline(e)) => report(&e.into(), &Redactor::default()),
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "error: {}",
                escape_controls(&e.to_string())
            );
            match e {
                PlanError::Interrupted => exit::INTERRUPTED,
                _ => exit::FAILED,
            }
        }
    }
}

fn show(ws: &Workspace, json: bool) -> Result<(), Error> {
    let state = PlanState::load(ws)?.state;
    if json {
        let mut doc = tree::json(&state);
        doc["root_dir"] = json!(ws.root_dir);
        write_stdout(&format!("{doc}\n"))
    } else {
        write_stdout(&tree::text(&state))
    }
}

/// `plan --json`.
fn document(ws: &Workspace, outcome: &Outcome) -> Value {
    json!({
        "workspace_id": ws.id,
        "revision": outcome.state.wbs.revision,
        "edit_id": outcome.committed.as_ref().map(|c| &c.edit_id),
        "understanding": outcome.understanding,
        "steps": outcome.steps,
        "potential_conflicts": outcome.potential_conflicts,
        "meta": outcome.backend,
        "log": outcome.log,
        "meta_ms": millis(outcome.meta_time),
        "write_ms": millis(outcome.write_time),
    })
}

/// Milliseconds, to a hundredth.
fn millis(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 100_000.0).round() / 100.0
}

/// What the user reads: Meta's understanding, each step, the warnings.
fn summary(outcome: &Outcome) -> String {
    let e = |s: &str| escape_controls(&one_line(s));
    let state = &outcome.state;
    let title = |id: &str| {
        let title = state
            .tasks
            .get(id)
            .map(|t| t.record.title.as_str())
            .or_else(|| state.wbs.nodes.get(id).map(|n| n.title.as_str()))
            .unwrap_or("");
        e(title)
    };
    let mut out = format!("understanding: {}\n", e(&outcome.understanding));
    match &outcome.committed {
        Some(c) => out.push_str(&format!("plan revision {}:\n", c.revision)),
        None => out.push_str("nothing changed\n"),
    }
    for step in &outcome.steps {
        let line = match step {
            Step::Create {
                task_id, parent_id, ..
            } => {
                let deps = state
                    .tasks
                    .get(task_id)
                    .and_then(|t| t.record.plan.depends_on.as_ref())
                    .filter(|d| !d.is_empty())
                    .map_or(String::new(), |d| format!(", after {}", e(&d.join(", "))));
                format!(
                    "created  {}  {}  (under {}{deps})",
                    e(task_id),
                    title(task_id),
                    title(parent_id)
                )
            }
            Step::Update { task_id, fields } => format!(
                "updated  {}  {}  ({})",
                e(task_id),
                title(task_id),
                fields.join(", ")
            ),
            Step::Move {
                task_id,
                parent_id,
                index,
            } => format!(
                "moved    {}  {}  (under {}, position {index})",
                e(task_id),
                title(task_id),
                title(parent_id)
            ),
            Step::Delete { task_id, with } => {
                let with = if with.is_empty() {
                    String::new()
                } else {
                    format!("  (with {})", e(&with.join(", ")))
                };
                format!("deleted  {}  {}{with}", e(task_id), title(task_id))
            }
        };
        out.push_str(&format!("  {line}\n"));
    }
    if !outcome.potential_conflicts.is_empty() {
        out.push_str("potential conflicts:\n");
        for conflict in &outcome.potential_conflicts {
            out.push_str(&format!("  - {}\n", e(&conflict_text(conflict))));
        }
    }
    out
}

/// A conflict as one line: the seed's `{file, tasks, warning}`, or as given.
fn conflict_text(conflict: &Value) -> String {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    match conflict {
        Value::Object(map) if map.contains_key("warning") || map.contains_key("file") => {
            let mut line = text(&conflict["file"]);
            if let Some(tasks) = conflict["tasks"].as_array().filter(|t| !t.is_empty()) {
                let tasks: Vec<String> = tasks.iter().map(text).collect();
                line.push_str(&format!(" (tasks {})", tasks.join(", ")));
            }
            let warning = text(&conflict["warning"]);
            if !warning.is_empty() {
                if !line.is_empty() {
                    line.push_str(": ");
                }
                line.push_str(&warning);
            }
            line
        }
        other => text(other),
    }
}
