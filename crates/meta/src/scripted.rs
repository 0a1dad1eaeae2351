//! `runner.meta.kind: scripted`: Meta replies read from a YAML file, consumed in
//! order, for offline demos, dry runs and tests. No network. Each reply goes through
//! the same checks (and re-asks) as a real one.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use serde_norway::Value;

use super::{BackendError, ChatBackend, ChatMessage, Completion, MetaError, ReplyFormat};

/// Replies from a script file.
#[derive(Debug)]
pub struct Scripted {
    path: PathBuf,
    replies: VecDeque<String>,
    total: usize,
}

/// Why a script of Meta replies cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: invalid YAML: {error}", path.display())]
    Yaml {
        path: PathBuf,
        error: agent_runner_core::Error,
    },
    #[error("{}: expected a YAML list of Meta replies", .0.display())]
    NotAList(PathBuf),
}

impl Scripted {
    /// Loads a YAML list whose entries are reply documents (mappings) or reply texts
    /// (strings, sent as they are, e.g. to script an invalid reply).
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|error| ScriptError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        let value = agent_runner_core::yaml::parse(&text, agent_runner_core::yaml::Rules::Document)
            .map_err(|error| ScriptError::Yaml {
                path: path.to_path_buf(),
                error,
            })?;
        let Value::Sequence(entries) = value else {
            return Err(ScriptError::NotAList(path.to_path_buf()));
        };
        let replies: VecDeque<String> = entries
            .into_iter()
            .map(|entry| match entry {
                Value::String(text) => text,
                other => serde_norway::to_string(&other).unwrap_or_default(),
            })
            .collect();
        Ok(Scripted {
            path: path.to_path_buf(),
            total: replies.len(),
            replies,
        })
    }

    /// Keeps only the replies for which `keep` holds (e.g. those of one message
    /// type, when one script serves several).
    pub fn retain(mut self, keep: impl Fn(&str) -> bool) -> Self {
        self.replies.retain(|text| keep(text));
        self.total = self.replies.len();
        self
    }
}

impl ChatBackend for Scripted {
    fn complete(
        &mut self,
        _messages: &[ChatMessage],
        _reply: &ReplyFormat,
    ) -> Result<Completion, BackendError> {
        match self.replies.pop_front() {
            Some(text) => Ok(Completion {
                text,
                attempts: 1,
                usage: Some(Default::default()),
                problem: None,
            }),
            None => Err(BackendError {
                error: MetaError::Failed(format!(
                    "the Meta script {} has no reply left (all {} used)",
                    self.path.display(),
                    self.total
                )),
                attempts: 0,
            }),
        }
    }
}
