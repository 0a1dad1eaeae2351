//! The Docker host that keeps a task's worker session (SPEC §22): under the copy
//! transport the session is a volume on the sandbox's host, not a directory here,
//! so the state file records that host and a resumed run goes there. Told nothing
//! (no `runner.sandbox.host`, `DOCKER_HOST` or docker context), it is aimed at that
//! host; told another one, the resume is refused naming both.

use serde::{Deserialize, Serialize};

use agent_runner_sandbox::backend::endpoint::{Endpoint, Source};
use agent_runner_sandbox::backend::host::Target;

/// The daemon a task's worker session is on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionHost {
    /// Its address (`tcp://…`, `ssh://…`).
    pub url: String,
    /// The docker context it was reached by, which carries its TLS material.
    #[serde(default)]
    pub context: Option<String>,
}

impl SessionHost {
    pub fn of(endpoint: &Endpoint) -> SessionHost {
        let context = match &endpoint.source {
            Source::Context(name) => Some(name.clone()),
            _ => None,
        };
        SessionHost {
            url: endpoint.url.clone(),
            context,
        }
    }

    fn target(&self) -> Target {
        match &self.context {
            Some(name) => Target::docker_context(name.clone()),
            None => Target::docker_url(self.url.clone()),
        }
    }
}

impl std::fmt::Display for SessionHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.context {
            Some(name) => write!(f, "{} (docker context {name:?})", self.url),
            None => write!(f, "{}", self.url),
        }
    }
}

/// Why a resumed run cannot go to the docker host of its session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CannotGo {
    /// The environment or the settings chose another daemon.
    #[error(
        "its worker's session is on the docker host {saved}, where the run before ran, and this run is told {now}: resume it on {saved} (runner.sandbox.host, or DOCKER_HOST / DOCKER_CONTEXT as before), or run it without --resume to start afresh there"
    )]
    ToldAnother { saved: SessionHost, now: Endpoint },
    /// This process's docker calls are aimed elsewhere already.
    #[error(
        "its worker's session is on the docker host {saved}, which this run cannot go to: {why}"
    )]
    Unaimable { saved: SessionHost, why: String },
}

/// Makes this run's docker calls go to `saved`, the host of the session of the
/// runs before, given the daemon it would reach (`now`, None: not known): the same
/// one, or aimed there when nothing chose one. Why not, when it was told another.
pub fn go_to(saved: &SessionHost, now: Option<&Endpoint>) -> Result<(), CannotGo> {
    if let Some(now) = now
        && now.url == saved.url
    {
        return Ok(());
    }
    let chosen = now.filter(|now| now.source != Source::Default);
    if let Some(now) = chosen {
        return Err(CannotGo::ToldAnother {
            saved: saved.clone(),
            now: now.clone(),
        });
    }
    agent_runner_sandbox::backend::aim(saved.target()).map_err(|e| CannotGo::Unaimable {
        saved: saved.clone(),
        why: e.to_string(),
    })?;
    log::info!("resuming on the docker host {saved}, where the worker's session is");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(url: &str, source: Source) -> Endpoint {
        Endpoint {
            url: url.into(),
            source,
            tls: false,
        }
    }

    #[test]
    fn a_resume_told_another_host_is_refused_naming_both() {
        let saved = SessionHost {
            url: "tcp://127.0.0.5:2375".into(),
            context: None,
        };
        assert_eq!(
            go_to(
                &saved,
                Some(&at("tcp://127.0.0.5:2375", Source::SandboxHost))
            ),
            Ok(())
        );
        for source in [
            Source::SandboxHost,
            Source::DockerHost,
            Source::Context("b".into()),
        ] {
            let why = go_to(&saved, Some(&at("tcp://127.0.0.6:2375", source)))
                .unwrap_err()
                .to_string();
            assert!(
                why.contains("tcp://127.0.0.5:2375") && why.contains("tcp://127.0.0.6:2375"),
                "{why}"
            );
        }
        let json = serde_json::to_string(&saved).unwrap();
        assert_eq!(serde_json::from_str::<SessionHost>(&json).unwrap(), saved);
    }
}
