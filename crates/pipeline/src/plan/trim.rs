//! What of the plan goes into a request, chosen deterministically
//! (meta-protocol.md §10.2), so a large workspace still makes a small request and
//! the same plan always makes the same one: at most 200 tasks, by status priority
//! (RUNNING > BLOCKED > QUEUED > PENDING > FAILED > SUCCEEDED) then id; at most 200
//! tree nodes, breadth-first from the root; the last 10 messages, each cut to 300
//! characters. Deleted tasks are left out. `request` may keep fewer still, to stay
//! within its size budget, always dropping from the end of these orders.

use super::chat::ChatMessage;
use super::model::{PlanState, PlannedTask};
use crate::queue::status::TaskStatus;
use agent_runner_core::text::cut_chars;

/// Most tasks in a request.
pub(crate) const MAX_TASKS: usize = 200;
/// Most tree nodes in a request.
pub(crate) const MAX_NODES: usize = 200;
/// Most conversation messages in a request.
pub(crate) const MAX_MESSAGES: usize = 10;
/// Longest message text in a request, in characters.
pub(crate) const MAX_MESSAGE_CHARS: usize = 300;

/// A status's place in the keep order: lower is kept first.
pub(crate) fn rank(status: TaskStatus) -> u8 {
    match status {
        TaskStatus::Running => 0,
        TaskStatus::Blocked => 1,
        TaskStatus::Queued => 2,
        TaskStatus::Pending => 3,
        TaskStatus::Failed => 4,
        TaskStatus::AwaitingApproval => 5,
        TaskStatus::Succeeded => 6,
        TaskStatus::Deleted => 7,
    }
}

/// The live tasks in keep order (all of them; the caller takes the first ones).
pub(crate) fn tasks(state: &PlanState) -> Vec<&PlannedTask> {
    let mut tasks: Vec<&PlannedTask> = state.tasks.values().filter(|t| !t.deleted).collect();
    tasks.sort_by(|a, b| (rank(a.status), &a.record.id).cmp(&(rank(b.status), &b.record.id)));
    tasks
}

/// The tree's node ids in keep order.
pub(crate) fn nodes(state: &PlanState) -> Vec<&str> {
    state.wbs.breadth_first()
}

/// The conversation as sent: the last `MAX_MESSAGES`, each cut to
/// `MAX_MESSAGE_CHARS` characters (the mark of the cut included).
pub(crate) fn conversation(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let skip = messages.len().saturating_sub(MAX_MESSAGES);
    messages[skip..]
        .iter()
        .map(|m| ChatMessage {
            text: cut_text(&m.text, MAX_MESSAGE_CHARS),
            ..m.clone()
        })
        .collect()
}

/// `text` in at most `max` characters, a cut marked with `…` (which counts).
pub(crate) fn cut_text(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        cut_chars(text, max.saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::chat::Role;
    use crate::plan::model::tests::state;

    #[test]
    fn tasks_go_by_status_priority_then_id_without_deleted_ones() {
        let mut s = state(
            &[("b", &[]), ("a", &[]), ("c", &[]), ("d", &[]), ("e", &[])],
            5,
        );
        let set =
            |s: &mut PlanState, id: &str, status| s.tasks.get_mut(id).unwrap().status = status;
        set(&mut s, "a", TaskStatus::Succeeded);
        set(&mut s, "b", TaskStatus::Pending);
        set(&mut s, "c", TaskStatus::Running);
        set(&mut s, "d", TaskStatus::Pending);
        s.delete("e", false).unwrap();
        let ids: Vec<&str> = tasks(&s).iter().map(|t| t.record.id.as_str()).collect();
        assert_eq!(ids, ["c", "b", "d", "a"]);
    }

    #[test]
    fn the_conversation_is_the_last_ten_cut_to_300_characters() {
        let messages: Vec<ChatMessage> = (0..12)
            .map(|n| ChatMessage {
                at: format!("t{n}"),
                role: Role::User,
                text: format!("{n}:{}", "あ".repeat(400)),
                potential_conflicts: Vec::new(),
            })
            .collect();
        let sent = conversation(&messages);
        assert_eq!(sent.len(), 10);
        assert_eq!(sent[0].at, "t2");
        assert!(
            sent.iter()
                .all(|m| m.text.chars().count() == MAX_MESSAGE_CHARS)
        );
        assert_eq!(cut_text("abc", 3), "abc");
        assert_eq!(cut_text("abcd", 3), "ab…");
        assert!(sent[9].text.starts_with("11:あ") && sent[9].text.ends_with('…'));
    }
}
