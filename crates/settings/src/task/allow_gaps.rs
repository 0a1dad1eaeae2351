//! A written `runner.worker.allow` replaces the defaults (SPEC §17), so a list that
//! forgets the agents' own model or login host makes every run fail at its first
//! request. `validate` and `doctor` name each such host (SPEC §24); the run itself
//! goes ahead, as the user may mean it.

use super::{Network, Task};
use crate::allow::{Origin, Rule};

/// A host the task's agents need that its written allow list lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowGap {
    /// The allow entry that would let it through.
    pub entry: String,
    /// Why it is needed, e.g. "codex with a ChatGPT login".
    pub why: String,
}

impl std::fmt::Display for AllowGap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "runner.worker.allow lacks {} ({}): the worker cannot reach it; add it to the list, \
             or remove `allow` for the defaults",
            self.entry, self.why
        )
    }
}

/// What a written allow list of `task` lacks; nothing for the defaults or another
/// network.
pub fn allow_gaps(task: &Task) -> Vec<AllowGap> {
    let worker = &task.worker;
    if worker.network != Network::Allowlist || worker.allow.origin != Origin::Task {
        return Vec::new();
    }
    super::default_allow::needed(worker, &task.login, Some(&task.meta.backend))
        .into_iter()
        .filter(|(entry, _)| Rule::parse(entry).is_ok_and(|needed| !worker.allow.covers(&needed)))
        .map(|(entry, why)| AllowGap { entry, why })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::test_task;

    fn gaps(runner: &str) -> Vec<String> {
        allow_gaps(&test_task(runner))
            .iter()
            .map(|g| g.entry.clone())
            .collect()
    }

    #[test]
    fn a_written_list_is_checked_against_the_hosts_the_agents_need() {
        let codex = "runner:\n  worker:\n    allow: [pypi.org]\n";
        assert_eq!(gaps(codex), ["api.openai.com"]);
        let covered = "runner:\n  worker:\n    allow: [pypi.org, '*.openai.com']\n";
        assert_eq!(gaps(covered), Vec::<String>::new());
        let gateway = "runner:\n  worker:\n    base_url: http://127.0.0.2:4000/v1\n    allow: [api.openai.com]\n";
        assert_eq!(gaps(gateway), ["127.0.0.2:4000"]);
        let wrong_port = "runner:\n  worker:\n    base_url: http://127.0.0.2:4000/v1\n    allow: ['127.0.0.2:4001']\n";
        assert_eq!(gaps(wrong_port), ["127.0.0.2:4000"]);
        let claude = "runner:\n  worker:\n    kind: claude-code-cli\n    allow: [pypi.org]\n";
        assert_eq!(gaps(claude), ["api.anthropic.com"]);
    }

    #[test]
    fn a_chatgpt_login_needs_its_login_hosts_in_a_written_list() {
        let mut task = test_task("runner:\n  worker:\n    allow: [api.openai.com]\n");
        task.login = crate::agent::Login::File {
            path: "/nonexistent/auth.json".into(),
            secrets: Vec::new(),
            modes: vec!["chatgpt"],
        };
        let gaps = allow_gaps(&task);
        let entries: Vec<&str> = gaps.iter().map(|g| g.entry.as_str()).collect();
        assert_eq!(entries, ["chatgpt.com", "auth.openai.com"]);
        assert!(
            gaps[0].to_string().contains("codex with a ChatGPT login"),
            "{}",
            gaps[0]
        );
    }

    #[test]
    fn the_defaults_and_other_networks_are_not_checked() {
        assert_eq!(gaps("runner:\n  worker: {}\n"), Vec::<String>::new());
        assert_eq!(
            gaps("runner:\n  worker:\n    network: host\n"),
            Vec::<String>::new()
        );
    }
}
