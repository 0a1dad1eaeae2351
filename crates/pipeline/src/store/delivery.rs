//! Delivery (SPEC §23): `defaults.deliver` (where a verified attempt's branch is
//! pushed, and the command that opens its pull request) and what one delivery did,
//! as the attempt line and later `delivery` lines of a task file record it.

use super::field_error::FieldError;
use serde::{Deserialize, Serialize};

/// `defaults.deliver`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeliverSettings {
    /// Where the branch is pushed (any URL or path `git push` takes).
    pub(crate) push_url: String,
    /// Run with `sh -c` on the host after the push; its last line is the PR's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pr_command: Option<String>,
}

impl DeliverSettings {
    /// A push URL with a password or token in it would be in workspace.json, the
    /// logs and git's argv: credentials come from the environment instead.
    pub(crate) fn check(&self) -> Result<(), FieldError> {
        let url = self.push_url.trim();
        if url.is_empty() || url.contains(['\n', '\r', '\0']) {
            return Err(FieldError::new(
                "deliver.push_url",
                "expected one line naming a repository",
            ));
        }
        if url.starts_with('-') {
            return Err(FieldError::new(
                "deliver.push_url",
                "must not start with `-`",
            ));
        }
        if let Some((_, rest)) = url.split_once("://")
            && let Some((userinfo, _)) = rest.split('/').next().unwrap_or("").rsplit_once('@')
            && userinfo.contains(':')
        {
            return Err(FieldError::new(
                "deliver.push_url",
                "holds a password or token; give git its credentials in the environment (a credential helper, GIT_ASKPASS, ssh-agent) instead",
            ));
        }
        if let Some(command) = &self.pr_command
            && command.trim().is_empty()
        {
            return Err(FieldError::new("deliver.pr_command", "empty"));
        }
        Ok(())
    }
}

/// What one delivery of an attempt did. `error` set: it failed at the step it
/// names; what came before (the push) still happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// The attempt delivered.
    pub attempt_id: String,
    pub at: String,
    pub branch: String,
    /// The commit pushed, once pushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushed: Option<String>,
    /// The pull request's URL: the PR command's last output line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Delivery {
    /// Pushed, and the PR command (if any) succeeded.
    pub fn is_done(&self) -> bool {
        self.error.is_none() && self.pushed.is_some()
    }

    /// `delivered to <pr>` / `pushed <commit>` / `delivery failed: …` for a line.
    pub fn describe(&self) -> String {
        match (&self.error, &self.pr, &self.pushed) {
            (Some(e), _, _) => format!("delivery failed: {e}"),
            (None, Some(pr), _) => format!("delivered: {pr}"),
            (None, None, Some(commit)) => {
                // A task file is anyone's to edit: never slice inside a character.
                let short: String = commit.chars().take(12).collect();
                format!("pushed {short} as {}", self.branch)
            }
            (None, None, None) => "not delivered".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str) -> DeliverSettings {
        DeliverSettings {
            push_url: url.into(),
            pr_command: None,
        }
    }

    #[test]
    fn a_forged_delivery_line_is_described_without_a_panic() {
        let forged = Delivery {
            attempt_id: "a".into(),
            at: "t".into(),
            branch: "b".into(),
            pushed: Some("ééééééééééééé".into()),
            pr: None,
            error: None,
        };
        assert_eq!(forged.describe(), "pushed éééééééééééé as b");
    }

    #[test]
    fn a_push_url_with_a_secret_or_an_option_is_refused() {
        assert!(settings("https://github.com/o/r.git").check().is_ok());
        assert!(settings("git@github.com:o/r.git").check().is_ok());
        assert!(settings("https://bot@github.com/o/r.git").check().is_ok());
        assert!(settings("/srv/git/r.git").check().is_ok());
        let e = settings("https://bot:ghp_x@github.com/o/r.git")
            .check()
            .unwrap_err()
            .to_string();
        assert!(e.contains("environment"), "{e}");
        assert!(settings("--upload-pack=x").check().is_err());
        assert!(settings(" ").check().is_err());
        assert!(settings("a\nb").check().is_err());
    }
}
