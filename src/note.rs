//! The Task Note: `<repo>/.agent-runner/task-<id>.md`, the whole history of a task in
//! Markdown (SPEC §7). Rewritten atomically after every step, so a crash leaves the
//! latest state; long outputs appear as tails with the path of the full log.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use crate::context::{TaskContext, TaskState};
use crate::meta::MetaCall;
use crate::secret::Redactor;
use crate::task::{MetaBackend, PrdSource};
use crate::text::{cut, tail};
use crate::timestamp::human;
use crate::worker::{TestRun, WorkerRun, git};

/// Output shown in the note per worker or test run (the full log is on disk).
const NOTE_TAIL: usize = 8 * 1024;
const PRD_SUMMARY: usize = 1024;

/// Renders the note; every secret in `redactor` is masked.
pub fn render(ctx: &TaskContext, redactor: &Redactor) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_note(&mut out, ctx);
    redactor.redact(&out)
}

/// Writes the note atomically (temp file, then rename); creates `.agent-runner/`
/// with a `.gitignore` that keeps the logs out of git.
pub fn write(ctx: &TaskContext, redactor: &Redactor) -> std::io::Result<()> {
    let path = ctx.task.note_path();
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(&ignore, "logs/\n")?;
    }
    let temp = dir.join(format!(
        ".task-{}.md.{}.tmp",
        ctx.task.id,
        std::process::id()
    ));
    // No fsync: the rename already keeps readers from a half-written note, and the
    // note is rewritten after every step (fsync cost ~10 ms each here).
    std::fs::File::create(&temp)?.write_all(render(ctx, redactor).as_bytes())?;
    std::fs::rename(&temp, &path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

fn write_note(out: &mut String, ctx: &TaskContext) -> std::fmt::Result {
    let task = &ctx.task;
    writeln!(out, "# Task Note - {} - {}\n", task.id, task.title)?;
    writeln!(out, "- Task ID: {}", task.id)?;
    writeln!(out, "- Title: {}", task.title)?;
    writeln!(out, "- Started At: {}", ctx.started)?;
    match ctx.finished {
        Some(f) => writeln!(out, "- Finished At: {f}")?,
        None => writeln!(out, "- Finished At: (running)")?,
    }
    writeln!(out, "- Duration: {}", human(ctx.duration()))?;
    writeln!(
        out,
        "- State: {}{}",
        ctx.state,
        if ctx.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    )?;
    writeln!(out, "- Loops: {} of {}", ctx.loops, task.meta.max_loops)?;
    writeln!(out, "- Repository: {}", task.repo.display())?;
    let meta = match &task.meta.backend {
        MetaBackend::OpenAiChat { base_url, .. } => {
            format!("openai-chat, model {} at {base_url}", task.meta.model)
        }
        MetaBackend::Scripted { script } => format!("scripted ({})", script.display()),
    };
    writeln!(out, "- Meta: {meta}")?;
    writeln!(out, "- Worker: codex-cli in {}", task.worker.docker_image)?;

    writeln!(out, "\n---\n\n## 1. Summary\n")?;
    let summary = match (ctx.state, &ctx.failure, &ctx.assessment) {
        (TaskState::Failed, Some(reason), Some(a)) => {
            format!("**Failed:** {reason}\n\nLast assessment: {}", a.summary)
        }
        (TaskState::Failed, Some(reason), None) => format!("**Failed:** {reason}"),
        (_, _, Some(a)) => a.summary.clone(),
        (state, _, None) => format!("In progress ({state})."),
    };
    writeln!(out, "{summary}")?;

    writeln!(out, "\n---\n\n## 2. PRD\n")?;
    if let PrdSource::File(path) = &task.prd.source {
        writeln!(out, "Source: {}\n", path.display())?;
    }
    writeln!(out, "{}\n", cut(task.prd.text.trim(), PRD_SUMMARY))?;
    writeln!(out, "<details>\n<summary>PRD (full text)</summary>\n")?;
    fence(out, "text", &task.prd.text)?;
    writeln!(out, "</details>")?;

    writeln!(out, "\n---\n\n## 3. Acceptance Criteria\n")?;
    if ctx.criteria.is_empty() {
        writeln!(out, "No criteria were planned.")?;
    }
    for c in &ctx.criteria {
        writeln!(
            out,
            "- [{}] {}: {}",
            if c.passed { "x" } else { " " },
            c.id,
            one_line(&c.description)
        )?;
    }

    writeln!(out, "\n---\n\n## 4. Execution Log\n\n### 4.1 Meta Calls\n")?;
    if ctx.meta_calls.is_empty() {
        writeln!(out, "None.\n")?;
    }
    for (n, call) in ctx.meta_calls.iter().enumerate() {
        meta_call(out, n + 1, call)?;
    }
    writeln!(out, "### 4.2 Worker Runs\n")?;
    if ctx.worker_runs.is_empty() {
        writeln!(out, "None.\n")?;
    }
    for run in &ctx.worker_runs {
        worker_run(out, run)?;
    }
    writeln!(out, "### 4.3 State Transitions\n")?;
    for t in &ctx.transitions {
        let reason = if t.reason.is_empty() {
            String::new()
        } else {
            format!(": {}", one_line(&t.reason))
        };
        writeln!(out, "- {} {} → {}{reason}", t.at, t.from, t.to)?;
    }

    writeln!(out, "\n---\n\n## 5. Test Result\n")?;
    match (ctx.last_test_run(), &task.test) {
        (Some(run), _) => test_run(out, run, ctx.test_runs.len())?,
        (None, Some(test)) => writeln!(
            out,
            "Tests were not run (`{}` is configured; no iteration reached validation).",
            test.command
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
                run.log_path.display()
            )?;
        }
    }

    writeln!(out, "\n---\n\n## 6. Notes / Remaining Risks\n")?;
    let mut notes = Vec::new();
    if let Some(a) = &ctx.assessment {
        notes.extend(a.remaining_risks.iter().map(|r| one_line(r)));
    }
    if let Some(reason) = &ctx.failure {
        notes.push(format!("The task failed: {}", one_line(reason)));
    }
    if let Some(took) = ctx.teardown {
        notes.push(format!(
            "The sandbox container was removed in {}.",
            human(took)
        ));
    }
    if notes.is_empty() {
        notes.push("None.".into());
    }
    for note in notes {
        writeln!(out, "- {note}")?;
    }
    Ok(())
}

fn meta_call(out: &mut String, n: usize, call: &MetaCall) -> std::fmt::Result {
    let plural = if call.attempts == 1 { "" } else { "s" };
    writeln!(
        out,
        "#### {n}. {} at {} ({}, {} attempt{plural})\n",
        call.kind,
        call.started,
        human(call.duration),
        call.attempts
    )?;
    writeln!(out, "<details>\n<summary>Request</summary>\n")?;
    fence(out, "yaml", &call.request)?;
    writeln!(out, "</details>\n")?;
    for (i, reply) in call.replies.iter().enumerate() {
        if call.replies.len() > 1 {
            writeln!(out, "Reply {} of {}:\n", i + 1, call.replies.len())?;
        } else {
            writeln!(out, "Reply:\n")?;
        }
        fence(out, "yaml", reply)?;
    }
    if let Some(e) = &call.error {
        writeln!(out, "**Error:** {}\n", one_line(e))?;
    }
    Ok(())
}

fn worker_run(out: &mut String, run: &WorkerRun) -> std::fmt::Result {
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
    writeln!(out, "- Summary: {}", one_line(&run.summary))?;
    let t = &run.transcript;
    if !t.commands.is_empty() {
        let dropped = if t.commands_dropped > 0 {
            format!(" (first {} not shown)", t.commands_dropped)
        } else {
            String::new()
        };
        writeln!(out, "- Commands{dropped}:")?;
        for c in &t.commands {
            let code = c
                .exit_code
                .map_or("not finished".to_string(), |e| format!("exit {e}"));
            writeln!(
                out,
                "  - `{}` → {code}",
                one_line(&cut(&c.command, 300)).replace('`', "'")
            )?;
        }
    }
    let changes = match (&run.git_before, &run.git_after) {
        (Some(before), Some(after)) => git::changes(before, after),
        _ => t
            .file_changes
            .iter()
            .map(|f| format!("{} {}", f.kind, f.path))
            .collect(),
    };
    if !changes.is_empty() {
        writeln!(out, "- Files changed:")?;
        for change in changes {
            writeln!(out, "  - {}", one_line(&change))?;
        }
    }
    if let (Some(before), Some(after)) = (&run.git_before, &run.git_after) {
        if before.head != after.head {
            writeln!(
                out,
                "- Git HEAD: {} → {}",
                before.head.as_deref().unwrap_or("(none)"),
                after.head.as_deref().unwrap_or("(none)")
            )?;
        }
    }
    if let Some(u) = &t.completed {
        writeln!(
            out,
            "- Tokens: {} in ({} cached), {} out",
            u.input_tokens, u.cached_input_tokens, u.output_tokens
        )?;
    }
    if !t.errors.is_empty() {
        writeln!(
            out,
            "- Last error event: {}",
            one_line(t.errors.last().map_or("", String::as_str))
        )?;
    }
    if let Some(left) = run.leftover_processes {
        writeln!(
            out,
            "- Stopped inside the container; processes left afterwards: {left}"
        )?;
    }
    writeln!(
        out,
        "- Full log: {} ({} bytes)\n",
        run.log_path.display(),
        run.output_bytes
    )?;
    writeln!(
        out,
        "<details>\n<summary>Output (last {} KiB)</summary>\n",
        NOTE_TAIL / 1024
    )?;
    fence(out, "text", &tail(&run.output_tail, NOTE_TAIL))?;
    writeln!(out, "</details>\n")
}

fn test_run(out: &mut String, run: &TestRun, count: usize) -> std::fmt::Result {
    writeln!(
        out,
        "- Command: `{}`{}",
        one_line(&run.command).replace('`', "'"),
        if run.cwd.is_empty() {
            String::new()
        } else {
            format!(" (in {})", run.cwd)
        }
    )?;
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
    writeln!(out, "- Full log: {}\n", run.log_path.display())?;
    if run.output_tail.trim().is_empty() {
        return writeln!(out, "(no output)");
    }
    fence(out, "text", &tail(&run.output_tail, NOTE_TAIL))
}

fn verdict(run: &TestRun) -> &'static str {
    if run.interrupted {
        "interrupted"
    } else if run.timed_out {
        "timed out"
    } else if run.passed() {
        "passed"
    } else {
        "failed"
    }
}

/// A fenced block that `text` cannot break out of: the fence is longer than any run
/// of backticks inside.
fn fence(out: &mut String, lang: &str, text: &str) -> std::fmt::Result {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let ticks = "`".repeat(longest.max(2) + 1);
    let body = text.trim_end_matches('\n');
    writeln!(out, "{ticks}{lang}\n{body}\n{ticks}\n")
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    #[test]
    fn fences_outgrow_backticks_inside() {
        let mut out = String::new();
        fence(&mut out, "text", "a ``` b ```` c").unwrap();
        assert_eq!(out, "`````text\na ``` b ```` c\n`````\n\n");
    }

    #[test]
    fn a_new_task_note_has_every_section_and_no_secret() {
        let ctx = TaskContext::new(crate::task::test_task(""));
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
            "## 5. Test Result",
            "## 6. Notes / Remaining Risks",
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
