//! A task made from a person's prompt: what `task new` and the web view's chat box
//! create. The prompt is kept verbatim as `raw_prompt` (SPEC §11); the title is the
//! one given, or the prompt's first non-empty line.

use super::record::TaskRecord;
use super::store::TaskStore;
use super::{PipelineError, Workspace, id};
use crate::text::{cut_chars, one_line};

/// Longest title taken from a prompt, in characters.
const TITLE_FROM_PROMPT: usize = 120;

/// Creates a task in `ws` from `prompt`, with the id (`--id`) and title (`--title`)
/// given or chosen; returns its record.
pub fn create(
    ws: &Workspace,
    id: Option<String>,
    title: Option<String>,
    prompt: String,
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
        Some(t) if t.trim().is_empty() => {
            return Err(PipelineError::Invalid("--title: empty".into()));
        }
        Some(t) => one_line(&t),
        None => title_of(&prompt),
    };
    let record = TaskRecord::new(id, ws.id.clone(), title, prompt);
    TaskStore::new(ws).create(&record)?;
    Ok(record)
}

/// The title a prompt gives: its first non-empty line, on one line, cut.
pub fn title_of(prompt: &str) -> String {
    let first = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    cut_chars(&one_line(first), TITLE_FROM_PROMPT)
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
    }
}
