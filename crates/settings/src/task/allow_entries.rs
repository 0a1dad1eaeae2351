//! An allow list as the Task YAML writes it (`runner.worker.allow`,
//! `task.setup.allow`): each entry read as a rule, each bad one an error at its
//! index.

use super::input_error::{InputError, InputErrors};
use crate::allow::{AllowList, Origin, Rule};

/// The entries of an allow list written at `field` (`runner.worker.allow`,
/// `task.setup.allow`), each a rule; None when one is not.
pub(crate) fn allow_rules(
    field: &str,
    entries: &[String],
    problems: &mut InputErrors,
) -> Option<AllowList> {
    let mut rules = Vec::new();
    let mut complete = true;
    for (n, entry) in entries.iter().enumerate() {
        match Rule::parse(entry) {
            Ok(rule) => rules.push(rule),
            Err(why) => {
                complete = false;
                problems.push(
                    InputError::new(format!("{field}[{n}]"), why.to_string()).with_hint(
                        "entries are host, host:port, *.suffix, *.suffix:port or host:*",
                    ),
                );
            }
        }
    }
    complete.then_some(AllowList {
        rules,
        origin: Origin::Task,
    })
}
