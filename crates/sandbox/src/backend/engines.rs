//! The engines of sandboxes, each an `Engine` beside its backend, listed once in
//! `ENGINES` (`mod.rs`, beside their `mod` lines): a new engine is its file (or
//! folder) and its line there. What the code above asks of a target
//! (`Target::parse`, `open`, `health`, `sweep`, the rows of `hosts
//! check|prepare`, doctor's checks) is sent from here to the
//! engine whose kind of place it is.

use std::sync::Arc;
use std::time::Duration;

use super::Backend;
use super::ENGINES;
use super::engine::{EngineCheck, ImageAnswer, PullError};
use super::host::HostSpec;
use super::host_check::{Ask, Prepare, PrepareError, Row, Unanswered};
use super::sweep::Rule;
use super::target::{Target, TargetError};
use agent_runner_core::interrupt::Interrupt;

/// The default engine's backend (no target set): the first engine's that opens
/// one (Docker's, first in `ENGINES`; the fallback is the same).
pub(crate) fn open_default() -> Arc<dyn Backend> {
    ENGINES
        .iter()
        .find_map(|engine| engine.open_default())
        .unwrap_or_else(|| Arc::new(super::Docker::default()))
}

/// Each engine's entry key and what it holds (`docker (a URL or a docker context)`).
pub(crate) fn entry_forms() -> Vec<String> {
    ENGINES
        .iter()
        .map(|engine| format!("{} ({})", engine.key(), engine.entry_form()))
        .collect()
}

/// Why `target` is of no engine listed here (a place made by hand).
fn unknown(target: &Target) -> String {
    Unanswered::NoEngine(target.clone()).to_string()
}

impl Target {
    /// A target's text (`--host NAME=…`, `runner.sandbox.host`): the engine whose
    /// scheme it starts with, else the default engine's. Errors say what is wrong.
    pub fn parse(text: &str) -> Result<Target, TargetError> {
        if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(TargetError::Space(text.to_string()));
        }
        let engine = ENGINES
            .iter()
            .find(|engine| engine.scheme().is_some_and(|s| text.starts_with(s)))
            .or_else(|| ENGINES.iter().find(|engine| engine.scheme().is_none()));
        match engine {
            Some(engine) => engine.parse(text),
            None => Err(TargetError::NoEngine(text.to_string())),
        }
    }

    /// The backend of its engine on it.
    pub(crate) fn open(&self) -> Arc<dyn Backend> {
        ENGINES
            .iter()
            .find_map(|engine| engine.open(self))
            .unwrap_or_else(open_default)
    }

    /// None when its engine answers its health check within 5 s (SPEC §22); else
    /// why not.
    pub fn health(&self) -> Option<String> {
        ENGINES
            .iter()
            .find_map(|engine| engine.health(self))
            .unwrap_or_else(|| Some(unknown(self)))
    }

    /// Removes what `rule` takes of its sandboxes; their names.
    pub fn sweep(&self, rule: Rule) -> Vec<String> {
        ENGINES
            .iter()
            .find_map(|engine| engine.sweep(self, rule))
            .unwrap_or_default()
    }

    /// What `doctor` reports of it in place of its checks of a Docker daemon; None:
    /// those.
    pub fn doctor_checks(&self) -> Option<Vec<EngineCheck>> {
        ENGINES.iter().find_map(|engine| engine.doctor(self))?
    }

    /// Whether it has `image`, asked within `deadline`.
    pub fn has_image(&self, image: &str, deadline: Duration, interrupt: Interrupt) -> ImageAnswer {
        ENGINES
            .iter()
            .find_map(|engine| engine.has_image(self, image, deadline, interrupt))
            .unwrap_or(ImageAnswer::NoAnswer)
    }

    /// Fetches `image` onto it within `deadline`.
    pub fn pull(
        &self,
        image: &str,
        deadline: Duration,
        interrupt: Interrupt,
    ) -> Result<(), PullError> {
        ENGINES
            .iter()
            .find_map(|engine| engine.pull(self, image, deadline, interrupt))
            .unwrap_or_else(|| Err(PullError::Refused(unknown(self))))
    }

    /// Whether it answers `has_image` (`Engine::tells_images`).
    pub fn tells_images(&self) -> bool {
        ENGINES
            .iter()
            .find_map(|engine| engine.tells_images(self))
            .unwrap_or(false)
    }

    /// Whether a worker's session kept by the copy transport pins a resumed run to
    /// it (`Engine::pins_sessions`).
    pub fn pins_sessions(&self) -> bool {
        ENGINES
            .iter()
            .find_map(|engine| engine.pins_sessions(self))
            .unwrap_or(false)
    }
}

impl HostSpec {
    /// Its row of `hosts check`, by its engine (`row`: named, nothing asked yet).
    pub(crate) fn check_row(&self, ask: &Ask<'_>, mut row: Row) -> Row {
        for engine in ENGINES {
            match engine.check(self, ask, row) {
                Ok(row) => return row,
                Err(unasked) => row = unasked,
            }
        }
        row.version = Err(Unanswered::NoEngine(self.target.clone()));
        row
    }

    /// `hosts prepare` of it, by its engine.
    pub(crate) fn prepare_with(&self, ask: &Prepare<'_>) -> Result<String, PrepareError> {
        ENGINES
            .iter()
            .find_map(|engine| engine.prepare(self, ask))
            .unwrap_or_else(|| {
                Err(PrepareError::Step {
                    what: format!("hosts prepare {}", self.name),
                    detail: unknown(&self.target),
                })
            })
    }
}
