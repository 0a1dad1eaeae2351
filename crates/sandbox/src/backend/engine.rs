//! What an engine provides besides its `Backend`: its kind of target (`Place`) read
//! from the text of `--host NAME=…`/`runner.sandbox.host` (and from its `hosts:`
//! entry, an `EntryPart`), its backend opened on one, its health check, its sweep
//! of a host, its rows of `hosts check|prepare`, where `doctor` cannot check it as a
//! Docker daemon its own checks, an image looked up and pulled there before an
//! evaluation, and whether a worker's session lives there. Each engine implements
//! `Engine` beside its backend (`docker_engine.rs`, `kubernetes/entry.rs`);
//! `ENGINES` (`mod.rs`) lists them, and the code above asks a `Target`
//! (`Target::parse`, `health`, `sweep`, …), never an engine by name.

use std::sync::Arc;
use std::time::Duration;

use super::Backend;
use super::host::{HostError, HostSpec};
use super::host_check::{Ask, Prepare, PrepareError, Row};
use super::sweep::Rule;
use super::target::{Place, Target, TargetError};
use agent_runner_core::interrupt::Interrupt;

/// Whether a place has an image, as an evaluation asks before its runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageAnswer {
    Present,
    Missing,
    /// Its engine cannot tell beforehand (a cluster pulls its images itself): its
    /// sandboxes' start says it.
    CannotTell,
    /// It did not answer, which proves nothing.
    NoAnswer,
}

/// A pull of an image on a place that failed.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// The engine refused it: its words (a pull's stderr).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Call(#[from] agent_runner_core::Error),
}

/// An engine's part of a `hosts:` entry: its field of `HostEntry`, typed as the
/// engine reads it (`host_entry.rs`).
pub trait EntryPart {
    /// The target it names; errors name the field under `at` (`hosts[0].docker`).
    fn target(&self, at: &str) -> Result<Target, HostError>;
}

/// One check `doctor` reports of an engine that checks itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineCheck {
    /// What was checked, in words.
    pub what: String,
    /// What was seen (a server's version).
    pub seen: String,
    /// None: it holds; else what is wrong and the fix.
    pub problem: Option<(String, String)>,
}

/// An engine of sandboxes, as the code above `backend/` reaches it through a
/// `Target` of its kind `Place`.
pub trait Engine: Sync + 'static {
    /// Its kind of target.
    type Place: Place;
    /// The key of its `hosts:` entry (`docker`, `kubernetes`).
    fn key(&self) -> &'static str;
    /// What its `hosts:` entry holds, for the message of an entry that names no engine.
    fn entry_form(&self) -> &'static str;
    /// The prefix of its targets' text (`k8s://`); None: the default engine, whose
    /// are the texts no other engine's prefix claims (and no target at all).
    fn scheme(&self) -> Option<&'static str>;
    /// Its target in `text` (its scheme's, or any text for the default engine).
    fn parse(&self, text: &str) -> Result<Target, TargetError>;
    /// Its backend where no target is set; None: it has no default place.
    fn open_default(&self) -> Option<Arc<dyn Backend>> {
        None
    }
    /// Its backend on `place`.
    fn open(&self, place: &Self::Place) -> Arc<dyn Backend>;
    /// None when `place` answers its health check within 5 s (SPEC §22); else why not.
    fn health(&self, place: &Self::Place, target: &Target) -> Option<String>;
    /// Removes what `rule` takes of the sandboxes on `place`; their names.
    fn sweep(&self, place: &Self::Place, target: &Target, rule: Rule) -> Vec<String>;
    /// `host`'s row of `hosts check` (`row` named, nothing asked yet).
    fn check(&self, place: &Self::Place, host: &HostSpec, ask: &Ask<'_>, row: Row) -> Row;
    /// `hosts prepare` of `host`: what it did.
    fn prepare(
        &self,
        place: &Self::Place,
        host: &HostSpec,
        ask: &Prepare<'_>,
    ) -> Result<String, PrepareError>;
    /// What `doctor` reports of `place` in place of its checks of a Docker daemon;
    /// None: those checks (the default daemon's, as the sandbox reaches it).
    fn doctor(&self, _place: &Self::Place) -> Option<Vec<EngineCheck>> {
        None
    }
    /// Whether `place` has `image`, asked within `deadline`.
    fn has_image(
        &self,
        place: &Self::Place,
        target: &Target,
        image: &str,
        deadline: Duration,
        interrupt: Interrupt,
    ) -> ImageAnswer;
    /// Fetches `image` onto `place` within `deadline`.
    fn pull(
        &self,
        place: &Self::Place,
        target: &Target,
        image: &str,
        deadline: Duration,
        interrupt: Interrupt,
    ) -> Result<(), PullError>;
    /// Whether its places answer `has_image` (false: its sandboxes' start is the
    /// first to know, as a cluster that pulls its images itself).
    fn tells_images(&self) -> bool;
    /// Whether a worker's session kept by the copy transport pins a resumed run to
    /// the place it ran on (a Docker daemon's volume); false: the target alone
    /// finds it again (a cluster's claim, in the namespace its target names).
    fn pins_sessions(&self) -> bool;
}

/// An `Engine` whatever its kind of place: each call None when the target is not
/// of its kind (`engines.rs` asks each in turn).
pub(crate) trait AnyEngine: Sync {
    fn key(&self) -> &'static str;
    fn entry_form(&self) -> &'static str;
    fn scheme(&self) -> Option<&'static str>;
    fn parse(&self, text: &str) -> Result<Target, TargetError>;
    fn open_default(&self) -> Option<Arc<dyn Backend>>;
    fn open(&self, target: &Target) -> Option<Arc<dyn Backend>>;
    fn health(&self, target: &Target) -> Option<Option<String>>;
    fn sweep(&self, target: &Target, rule: Rule) -> Option<Vec<String>>;
    fn check(&self, host: &HostSpec, ask: &Ask<'_>, row: Row) -> Result<Row, Row>;
    fn prepare(&self, host: &HostSpec, ask: &Prepare<'_>) -> Option<Result<String, PrepareError>>;
    fn doctor(&self, target: &Target) -> Option<Option<Vec<EngineCheck>>>;
    fn has_image(
        &self,
        target: &Target,
        image: &str,
        deadline: Duration,
        interrupt: Interrupt,
    ) -> Option<ImageAnswer>;
    fn pull(
        &self,
        target: &Target,
        image: &str,
        deadline: Duration,
        interrupt: Interrupt,
    ) -> Option<Result<(), PullError>>;
    fn tells_images(&self, target: &Target) -> Option<bool>;
    fn pins_sessions(&self, target: &Target) -> Option<bool>;
}

impl<E: Engine> AnyEngine for E {
    fn key(&self) -> &'static str {
        Engine::key(self)
    }
    fn entry_form(&self) -> &'static str {
        Engine::entry_form(self)
    }
    fn scheme(&self) -> Option<&'static str> {
        Engine::scheme(self)
    }
    fn parse(&self, text: &str) -> Result<Target, TargetError> {
        Engine::parse(self, text)
    }
    fn open_default(&self) -> Option<Arc<dyn Backend>> {
        Engine::open_default(self)
    }
    fn open(&self, target: &Target) -> Option<Arc<dyn Backend>> {
        Some(Engine::open(self, target.place::<E::Place>()?))
    }
    fn health(&self, target: &Target) -> Option<Option<String>> {
        Some(Engine::health(self, target.place::<E::Place>()?, target))
    }
    fn sweep(&self, target: &Target, rule: Rule) -> Option<Vec<String>> {
        Some(Engine::sweep(
            self,
            target.place::<E::Place>()?,
            target,
            rule,
        ))
    }
    fn check(&self, host: &HostSpec, ask: &Ask<'_>, row: Row) -> Result<Row, Row> {
        match host.target.place::<E::Place>() {
            Some(place) => Ok(Engine::check(self, place, host, ask, row)),
            None => Err(row),
        }
    }
    fn prepare(&self, host: &HostSpec, ask: &Prepare<'_>) -> Option<Result<String, PrepareError>> {
        Some(Engine::prepare(
            self,
            host.target.place::<E::Place>()?,
            host,
            ask,
        ))
    }
    fn doctor(&self, target: &Target) -> Option<Option<Vec<EngineCheck>>> {
        Some(Engine::doctor(self, target.place::<E::Place>()?))
    }
    fn has_image(
        &self,
        target: &Target,
        image: &str,
        deadline: Duration,
        interrupt: Interrupt,
    ) -> Option<ImageAnswer> {
        let place = target.place::<E::Place>()?;
        Some(Engine::has_image(
            self, place, target, image, deadline, interrupt,
        ))
    }
    fn pull(
        &self,
        target: &Target,
        image: &str,
        deadline: Duration,
        interrupt: Interrupt,
    ) -> Option<Result<(), PullError>> {
        let place = target.place::<E::Place>()?;
        Some(Engine::pull(
            self, place, target, image, deadline, interrupt,
        ))
    }
    fn tells_images(&self, target: &Target) -> Option<bool> {
        target.place::<E::Place>()?;
        Some(Engine::tells_images(self))
    }
    fn pins_sessions(&self, target: &Target) -> Option<bool> {
        target.place::<E::Place>()?;
        Some(Engine::pins_sessions(self))
    }
}
