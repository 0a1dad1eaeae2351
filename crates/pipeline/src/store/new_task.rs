//! A task made from a person's prompt: what `task new` and the web view's chat box
//! create. The prompt is kept verbatim as `raw_prompt` (SPEC §11); the title is the
//! one given, or the prompt's first non-empty line.
//!
//! Every title that enters the TaskStore (here, and from plans) passes `title`: the
//! runner's own title rule, so that no task is accepted that its run would refuse.

use super::field_error::FieldError;
use super::id;
use super::pinned_test::PinnedTest;
use super::task_file::TaskRecord;
use super::task_store::TaskStore;
use crate::{PipelineError, Workspace};
use agent_runner_core::text::{cut_chars, escape_controls, one_line};

/// Longest title taken from a prompt, in characters.
const TITLE_FROM_PROMPT: usize = 120;

/// Creates a task in `ws` from `prompt`, with the id (`--id`) and title (`--title`)
/// given or chosen, and the test the user pinned (`--test`); returns its record.
pub fn create(
    ws: &Workspace,
    id: Option<String>,
    title: Option<String>,
    prompt: String,
    test: Option<PinnedTest>,
) -> Result<TaskRecord, PipelineError> {
    if prompt.trim().is_empty() {
        return Err(PipelineError::Invalid(
            "PROMPT: empty; say what the task is".into(),
        ));
    }
    let id = match id {
        Some(id) if !id::is_valid(&id) => {
            return Err(PipelineError::Invalid(id::invalid("--id", &id)));
        }
        Some(id) => id,
        None => id::new_task_id(),
    };
    let title = match title {
        Some(t) => self::title(&t, "--title").map_err(|e| PipelineError::Invalid(e.to_string()))?,
        None => title_of(&prompt),
    };
    if let Some(test) = &test {
        test.check("test")
            .map_err(|e| PipelineError::Invalid(e.to_string()))?;
    }
    let mut record = TaskRecord::new(id, ws.id.clone(), title, prompt);
    record.plan.test = test;
    TaskStore::new(ws).create(&record)?;
    Ok(record)
}

/// A title given as `field` (by a person or an LLM), with its runs of whitespace
/// (line breaks, tabs) made one space; an error unless the result is a non-empty
/// title the runner accepts (`agent_runner_settings::task::is_one_line`: no control characters).
pub(crate) fn title(given: &str, field: &str) -> Result<String, FieldError> {
    let title = one_line(given);
    if title.is_empty() {
        return Err(FieldError::new(field, "empty; give a title"));
    }
    if !agent_runner_settings::task::is_one_line(&title) {
        return Err(FieldError::new(
            field,
            format!(
                "{:?} is not one line of text: it holds control characters (a title is shown in terminals, notes and pages)",
                cut_chars(&title, 60)
            ),
        ));
    }
    Ok(title)
}

/// The title a prompt gives: its first non-empty line, on one line, control
/// characters shown as escapes (the prompt itself is kept as written), cut.
pub(crate) fn title_of(prompt: &str) -> String {
    let first = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    cut_chars(&escape_controls(&one_line(first)), TITLE_FROM_PROMPT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_title_is_the_first_line_of_the_prompt() {
        assert_eq!(
            title_of("\n  \nTODO アプリを作成して\nmore"),
            "TODO アプリを作成して"
        );
        assert_eq!(
            title_of(&"x".repeat(500)).chars().count(),
            TITLE_FROM_PROMPT + 1,
            "and an ellipsis"
        );
        assert_eq!(
            title_of("red \u{1b}[31mtitle\u{7}"),
            "red \\e[31mtitle\\x07"
        );
    }

    #[test]
    fn titles_follow_the_runners_rule() {
        assert_eq!(title(" two\n lines\t", "t"), Ok("two lines".into()));
        assert_eq!(title("TODO アプリ", "t"), Ok("TODO アプリ".into()));
        for bad in [
            "\u{1b}[2J",
            "bell\u{7}",
            "a\u{0}b",
            "c1\u{9b}x",
            "del\u{7f}",
        ] {
            let e = title(bad, "--title").unwrap_err().to_string();
            assert!(
                e.starts_with("--title: ") && e.contains("control characters"),
                "{e}"
            );
        }
        assert!(
            title(" \n ", "--title")
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
    }

    quickcheck::quickcheck! {
        fn every_title_kept_or_made_passes_the_runners_rule(text: String) -> bool {
            let made = title_of(&text);
            agent_runner_settings::task::is_one_line(&made)
                && title(&text, "t").is_ok_and(|t| agent_runner_settings::task::is_one_line(&t))
                    == (agent_runner_settings::task::is_one_line(&one_line(&text)) && !one_line(&text).is_empty())
        }
    }
}
