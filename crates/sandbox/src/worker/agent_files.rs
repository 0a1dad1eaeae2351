//! The agent every worker run executes is the one the container started with (SPEC
//! §21 `agent_from`, issue 28): a worker that replaced `/usr/local/bin/codex` in its
//! long-lived container with a wrapper reporting 0 tokens spent 275,000 tokens
//! against a `max_tokens` of 100,000 that never fired.
//!
//! When the container starts, before anything of the worker's runs in it (beside
//! the first Meta calls), the agent is looked up on PATH once (`command -v`, as the
//! runs would), and from then on executed by that absolute path: a `codex` the
//! worker puts earlier on PATH, or in the repository, is never the agent (a PATH
//! that finds the agent in the repository at the start is refused). The files that
//! decide what runs are pinned by their SHA-256, taken from outside the worker's
//! reach: `docker cp -L` streams them from the daemon, not through any process in
//! the container. They are
//! - the agent (its path followed to the file);
//! - its interpreter when it is a script (`#!/usr/bin/env node` is resolved on PATH
//!   then, and the script run with that interpreter by path);
//! - `/bin/sh`, when it starts every run (the envelope), that is when the tools
//!   volume has no shell (`ContainerSpec::shell`);
//! - for each of these that is dynamically linked, its loader (the ELF interpreter)
//!   and what the loader says it loads (`<loader> --list <file>`: the libraries as
//!   the loader finds them now, and anything `/etc/ld.so.preload` adds);
//! - the configuration the agent reads outside its home (`Kind::config_files`:
//!   codex's `/etc/codex/config.toml`, which it reads even with
//!   `--ignore-user-config`), there or not.
//!
//! Found from a fresh container of an image, all this holds for every fresh
//! container of that image ID: it is kept on this machine (`agent_cache`), and a
//! start then costs no docker call where the container was started from the ID
//! looked up beside the tools volume (`ContainerSpec::image_id`), one otherwise.
//!
//! Each run is checked beside it (SPEC §27), not before it: once the envelope says
//! the agent is starting (nothing else runs then), one `docker diff` (the container
//! against its image, from outside the worker's reach) must name none of the paths
//! visited to reach the files and the configuration (each directory on the way,
//! each link and where it leads, found at the start; a configuration file the
//! worker creates shows as its directory changed); see `check_beside` for why a
//! diff taken after the agent started vouches for what it started from. The run's
//! results are taken only once the check has passed: a changed agent fails the
//! task (`the agent … changed during the task`) and nothing of that run is kept,
//! its output, usage or work. Where the diff cannot vouch for the files (a path on
//! a mount, one already changed at the start or by setup), they are hashed before
//! each run instead, as the loaders' answers are taken again (`check`).
//!
//! Where the agent comes from is `runner.worker.agent_from` (SPEC §21): `image`, the
//! image's own as above; `tools`, agent-runner's tools volume (`backend::tools`),
//! mounted read-only at `/agent-runner-tools`, whose agent needs no hash (nothing in
//! the container can write there, nor move it aside), only the agent's loader when
//! it has one (claude's, from the image) is pinned, and its configuration watched;
//! `auto` (the default), the image's own when it has one on PATH, else the volume's.
//!
//! What is not covered (docs/security-model.md): processes of the run itself (the
//! commands the agent runs) run beside the agent as the same user and can end it
//! before it reports, or write into its output; and what the agent reads under its
//! home or in the repository besides its configuration file (codex's is
//! agent-runner's, written before every run: `agent::codex`).

use std::collections::HashSet;
use std::time::Duration;

use super::PROJECT_DIR;
use super::SandboxError;
use super::container::{ContainerSpec, IMAGE_SHELL as SHELL};
use crate::backend::outside::{Copied, Outside};
use crate::backend::pulled::{Pulled, StreamReader};
use crate::backend::tools::{self, READY};
use crate::backend::untar::{self, Kind};
use agent_runner_settings::task::{AgentFrom, EnvValue};

/// Time allowed for one copy out of the container (an agent of a few hundred MB).
const COPY_TIMEOUT: Duration = Duration::from_secs(300);
/// Time allowed for a lookup in the container.
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes kept from the start of each file: enough for a script's `#!` line and an
/// ELF file's program headers and interpreter.
const HEAD: usize = 64 * 1024;

/// The agent's files as the container started with them; see the module
/// documentation.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct AgentFiles {
    /// The kind's program (`codex`).
    program: String,
    /// What runs it: the agent's absolute path, after its interpreter when the
    /// script names it through `env`. Empty: not on PATH at the start.
    prefix: Vec<String>,
    files: Vec<Pinned>,
    /// The agent's configuration outside its home, there or not: copied at every
    /// check, whatever the diff says.
    configs: Vec<Pinned>,
    listings: Vec<Listing>,
    /// Every path visited to reach the files (each directory on the way, each link
    /// and where it leads): a change to any of them shows in `docker diff`.
    visited: HashSet<String>,
    /// The diff cannot tell (a path on a mount, one already changed at the start, a
    /// shell without `readlink`): the files are hashed at every check, before the
    /// run.
    always_hash: bool,
    /// The names the loaders look the libraries up by: a file of that name appearing
    /// anywhere may be loaded instead (the per-run check's rule).
    sonames: HashSet<String>,
}

/// A file and what it was.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Pinned {
    path: String,
    /// Its part, for messages ("the agent", "its loader", …).
    what: String,
    content: Content,
}

/// What a loader said it loads for a file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Listing {
    loader: String,
    file: String,
    /// Its exit status and output, load addresses left out.
    answer: (bool, String),
}

/// What may have changed of the agent's files: the first difference found (the
/// detail of `SandboxError::AgentChanged`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum Change {
    #[error("{path} ({what}) was not there when the container started")]
    Appeared { path: String, what: String },
    #[error("{path} ({what}) is not the file it was when the container started")]
    Replaced { path: String, what: String },
    #[error("{path} ({what}) is gone")]
    Gone { path: String, what: String },
    #[error("{0} (what the loader reads) is not what it was when the container started")]
    LoaderFile(String),
    /// A directory or link on the way, named by the diff.
    #[error("{0}, on the way to the agent's files, was changed")]
    OnTheWay(String),
    /// A directory on the way named with nothing below it: perhaps a link now.
    #[error("{0}, on the way to the agent's files, was replaced")]
    WayReplaced(String),
    #[error("{0} has the name of a library the agent's files load")]
    Namesake(String),
    #[error(
        "what {loader} loads for {file} is not what it loaded when the container started \
         (a library or /etc/ld.so.preload changed)"
    )]
    Loads { loader: String, file: String },
}

/// Why the tar stream of a copy out of the container gave no content.
#[derive(Debug, thiserror::Error)]
enum TarStreamError {
    #[error("the copy's tar stream: {0}")]
    Read(std::io::Error),
    #[error("the reader of the copy's tar stream failed")]
    ReaderFailed,
}

/// What `docker cp -L` gave for a path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Content {
    /// A file: the SHA-256 of its bytes.
    File([u8; 32]),
    /// Something else (a directory), by its tar type.
    Other(u8),
    /// Nothing there.
    Missing,
}

impl AgentFiles {
    /// Finds the agent of `spec`'s kind in the just-started `container` and pins
    /// its files, or takes what a pinning in a container of the same image found
    /// (`agent_cache`); run before anything else runs in the container.
    pub(crate) fn pin(container: &str, spec: &ContainerSpec) -> Result<AgentFiles, SandboxError> {
        let exec = Exec::new(container, spec);
        // Started from the ID looked up before, or asked now.
        let id = spec.image_id.clone().or_else(|| exec.image_id());
        let key = id.map(|id| super::agent_cache::key(&id, spec));
        if let Some(found) = key.as_deref().and_then(super::agent_cache::load) {
            log::debug!("agent files: the pinning of this image, kept on this machine");
            // The agent runs by the path found then; a PATH that reaches into the
            // repository is still told (the repository is not the image's).
            let path_in_repo = spec.worker.env.iter().any(|e| {
                e.name == "PATH"
                    && matches!(&e.value, EnvValue::Literal(v) if v.contains(PROJECT_DIR))
            });
            if path_in_repo {
                let program = spec.worker.kind.program();
                if let Some(agent) = exec.look(Some(program), &[])?.found {
                    in_repository(&agent, program, spec)?;
                }
            }
            return Ok(found);
        }
        let pinned = AgentFiles::pin_now(&exec, spec)?;
        if let Some(key) = &key
            && !pinned.always_hash
        {
            super::agent_cache::store(key, &pinned);
        }
        Ok(pinned)
    }

    /// `pin`, in the container itself.
    fn pin_now(exec: &Exec<'_>, spec: &ContainerSpec) -> Result<AgentFiles, SandboxError> {
        let program = spec.worker.kind.program().to_string();
        let mut pinning = Pinning {
            exec,
            files: Vec::new(),
            listings: Vec::new(),
            heads: Default::default(),
        };
        // The tools volume's shell (`ContainerSpec::shell`) needs no pinning:
        // nothing can change it.
        let image_shell = spec.shell() == SHELL;
        let shell: Vec<(String, String)> = image_shell
            .then(|| (SHELL.to_string(), "the shell that starts it".to_string()))
            .into_iter()
            .collect();
        let Start {
            looked:
                Looked {
                    found: agent,
                    mut visited,
                    mut unknown,
                },
            diff_at_start,
            mut heads,
            configs,
            tools_seen,
        } = pinning.start(spec, &program, &shell)?;
        let mut executed = shell.clone();
        let (prefix, known_loaders) =
            pinning.place_agent(spec, &program, agent, tools_seen, &mut heads, &mut executed)?;
        pinning.follow_loaders(&executed, &heads, known_loaders)?;
        let Pinning {
            files, listings, ..
        } = pinning;
        // What decides which libraries the loaders load, there or not, is watched
        // like the files.
        let dynamic = !listings.is_empty();
        let rest: Vec<&str> = files
            .iter()
            .map(|f| f.path.as_str())
            .chain(LOADER_FILES.into_iter().filter(|_| dynamic))
            .filter(|path| !visited.contains(*path))
            .collect();
        if !rest.is_empty() {
            let more = exec.look(None, &rest)?;
            visited.extend(more.visited);
            unknown |= more.unknown;
        }
        let sonames = listings
            .iter()
            .flat_map(|l| sonames(&l.loader, &l.answer.1))
            .collect();
        let mut pinned = AgentFiles {
            program,
            prefix,
            files,
            configs,
            listings,
            visited,
            always_hash: false,
            sonames,
        };
        pinned.always_hash = pinned.unvouched(spec, unknown, diff_at_start.as_ref());
        Ok(pinned)
    }

    /// Whether the daemon's diff cannot vouch for the files, so that they are hashed
    /// at every check: a link not read (`unknown`), a path visited the diff cannot
    /// see, or one that differs from the image already (`diff_at_start`).
    fn unvouched(
        &self,
        spec: &ContainerSpec,
        unknown: bool,
        diff_at_start: Option<&HashSet<String>>,
    ) -> bool {
        let on_mount = self
            .visited
            .iter()
            .find(|path| {
                on_a_mount(path) || spec.caches.iter().any(|cache| below(path, &cache.target))
            })
            .cloned();
        // What the daemon's diff names at the start by the engine's own doing (the
        // mount points of `--init` and of our mounts: `/usr/sbin/docker-init`, with
        // `/usr` changed above it) passes the same rules as a run's changes.
        let changed_at_start = match diff_at_start {
            Some(named) => self.verdict(named).err().map(|change| change.to_string()),
            None => Some("the diff could not say".to_string()),
        };
        let always_hash = unknown || on_mount.is_some() || changed_at_start.is_some();
        if always_hash {
            log::debug!(
                "agent files: hashed before every run (a link not read: {unknown}; on a mount: \
                 {on_mount:?}; at the start: {changed_at_start:?})"
            );
        }
        always_hash
    }

    /// `command` (the kind's, program first) as it runs: the program replaced by
    /// the agent's absolute path, after its interpreter for an `env` script.
    pub(crate) fn command(
        &self,
        command: &[String],
        image: &str,
    ) -> Result<Vec<String>, SandboxError> {
        if self.prefix.is_empty() {
            return Err(SandboxError::ImageUnusable {
                image: image.to_string(),
                detail: format!(
                    "it has no `{}` on PATH (runner.worker.agent_from: image; `auto` or `tools` \
                     runs the one in agent-runner's tools volume)",
                    self.program
                ),
            });
        }
        let mut line = self.prefix.clone();
        line.extend(command.iter().skip(1).cloned());
        Ok(line)
    }

    /// The agent's path, for messages.
    pub(crate) fn agent(&self) -> &str {
        self.prefix
            .last()
            .map_or(self.program.as_str(), String::as_str)
    }

    /// Whether the runs are checked before they start (`check`), the diff not
    /// being able to vouch for the files; else beside them (`check_beside`).
    pub(crate) fn checked_before(&self) -> bool {
        self.always_hash
    }

    /// Whether nothing of the image decides what runs (the agent and the shell
    /// from the tools volume, no configuration to watch): no check at all.
    pub(crate) fn nothing_to_check(&self) -> bool {
        self.visited.is_empty() && self.listings.is_empty()
    }

    /// Once setup has run (the user's command, before any run of the worker's):
    /// the daemon's diff then names what setup changed; where that touches the
    /// agent's files they are pinned again as they now are, and checked before
    /// each run from then on.
    pub(crate) fn after_setup(
        &mut self,
        container: &str,
        spec: &ContainerSpec,
    ) -> Result<(), SandboxError> {
        if self.always_hash || self.nothing_to_check() {
            return Ok(());
        }
        let exec = Exec::new(container, spec);
        let clean = exec
            .named()
            .is_some_and(|named| self.verdict(&named).is_ok());
        if !clean {
            log::info!("agent files: setup changed the way to them; pinned again");
            *self = AgentFiles::pin_now(&exec, spec)?;
            self.always_hash = true;
        }
        Ok(())
    }

    /// The check of one run, beside it (SPEC §27): once `started` says the agent
    /// is starting (nothing else runs then), one `docker diff`. The daemon's diff
    /// only grows (a file changed in the container stays in its layer, a removed
    /// one as a whiteout), so a diff taken at any time after the agent started
    /// that names none of the agent's files, links and configuration (each as the
    /// image has it) says they were the image's when it started. A directory on
    /// the way named with something below it named too is still a directory (the
    /// agent's own path below it would be named if it changed); one named alone may
    /// have been replaced by a link. For a dynamically linked file, a file named as
    /// a library it loads, anywhere, or the loader's own files, fail it too. No
    /// `started` (the agent never started): nothing to check.
    pub(crate) fn check_beside(
        &self,
        container: &str,
        spec: &ContainerSpec,
        started: std::sync::mpsc::Receiver<()>,
    ) -> Result<(), SandboxError> {
        if started.recv().is_err() {
            return Ok(());
        }
        let exec = Exec::new(container, spec);
        let Some(named) = exec.named() else {
            return Err(exec.0.diff_failed().into());
        };
        self.verdict(&named)
            .map_err(|change| SandboxError::AgentChanged {
                agent: self.agent().to_string(),
                detail: change.to_string(),
            })
    }

    /// What `named` (the paths of the daemon's diff) says of the agent's files:
    /// the first that may have changed, said.
    fn verdict(&self, named: &HashSet<String>) -> Result<(), Change> {
        let mut visited: Vec<&String> = self.visited.iter().collect();
        visited.sort();
        for path in visited.into_iter().filter(|p| named.contains(*p)) {
            let on_the_way = self.visited.iter().any(|other| strictly_below(other, path));
            if !on_the_way {
                return Err(self.describe(path));
            }
            if !named.iter().any(|n| strictly_below(n, path)) {
                return Err(Change::WayReplaced(path.clone()));
            }
        }
        let mut named: Vec<&String> = named.iter().collect();
        named.sort();
        for path in named {
            let name = path.rsplit('/').next().unwrap_or_default();
            if self.sonames.contains(name) && !self.visited.contains(path) {
                return Err(Change::Namesake(path.clone()));
            }
        }
        Ok(())
    }

    /// `path` (one the diff names) as a difference.
    fn describe(&self, path: &str) -> Change {
        let pinned = self
            .configs
            .iter()
            .chain(&self.files)
            .find(|f| f.path == path);
        let path = path.to_string();
        match pinned {
            Some(file) if file.content == Content::Missing => Change::Appeared {
                path,
                what: file.what.clone(),
            },
            Some(file) => Change::Replaced {
                path,
                what: file.what.clone(),
            },
            None if LOADER_FILES.contains(&path.as_str()) => Change::LoaderFile(path),
            None => Change::OnTheWay(path),
        }
    }

    /// Takes the loaders' answers again and the files' hashes (one docker call
    /// each, at once), before a run, where the diff cannot vouch for them. An
    /// error naming the first difference, or docker's own failure.
    pub(crate) fn check(&self, container: &str, spec: &ContainerSpec) -> Result<(), SandboxError> {
        let exec = Exec::new(container, spec);
        let changed = |change: Change| SandboxError::AgentChanged {
            agent: self.agent().to_string(),
            detail: change.to_string(),
        };
        let answers = std::thread::scope(|scope| {
            let lists: Vec<_> = self
                .listings
                .iter()
                .map(|l| scope.spawn(|| exec.list(&l.loader, &l.file)))
                .collect();
            lists.into_iter().map(joined).collect::<Vec<_>>()
        });
        for (listing, now) in self.listings.iter().zip(answers) {
            if now? != listing.answer {
                return Err(changed(Change::Loads {
                    loader: listing.loader.clone(),
                    file: listing.file.clone(),
                }));
            }
        }
        let contents = std::thread::scope(|scope| {
            let copies: Vec<_> = self
                .configs
                .iter()
                .chain(&self.files)
                .map(|file| scope.spawn(|| exec.copy(&file.path).map(|(c, _)| c)))
                .collect();
            copies.into_iter().map(joined).collect::<Vec<_>>()
        });
        let contents = contents.into_iter().collect::<Result<Vec<_>, _>>()?;
        let (configs, files) = contents.split_at(self.configs.len());
        compare(&self.configs, configs).map_err(changed)?;
        compare(&self.files, files).map_err(changed)
    }
}

/// Refuses an `agent` (found on PATH) in the repository.
fn in_repository(agent: &str, program: &str, spec: &ContainerSpec) -> Result<(), SandboxError> {
    if agent == PROJECT_DIR || agent.starts_with(&format!("{PROJECT_DIR}/")) {
        return Err(SandboxError::ImageUnusable {
            image: spec.worker.docker_image.clone(),
            detail: format!(
                "the `{program}` found on PATH is in the repository ({agent}); the agent must come from the image"
            ),
        });
    }
    Ok(())
}

/// Each of `pinned` against what it is `now`: the first difference, said.
fn compare(pinned: &[Pinned], now: &[Content]) -> Result<(), Change> {
    for (file, now) in pinned.iter().zip(now) {
        let (path, what) = (file.path.clone(), file.what.clone());
        match (&file.content, now) {
            (was, now) if was == now => {}
            (_, Content::Missing) => return Err(Change::Gone { path, what }),
            (Content::Missing, _) => return Err(Change::Appeared { path, what }),
            _ => return Err(Change::Replaced { path, what }),
        }
    }
    Ok(())
}

/// Where the container has mounts (ours, and Docker's own files and file systems):
/// what lies below is not in the daemon's diff of the container.
const MOUNTED: [&str; 8] = [
    PROJECT_DIR,
    "/run/agent-runner",
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
    "/dev",
    "/proc",
    "/sys",
];

/// The agent of `program` in the tools volume, for this image: the volume mounted
/// and complete, and a build of the agent the image can load (claude's binary needs
/// glibc, or musl for its musl build).
fn tools_agent(
    spec: &ContainerSpec,
    program: &str,
    existing: Option<Vec<String>>,
) -> Result<tools::Agent, SandboxError> {
    let image = &spec.worker.docker_image;
    let unusable = |detail: String| SandboxError::ImageUnusable {
        image: image.clone(),
        detail,
    };
    let why_not_on_path = match spec.worker.agent_from {
        AgentFrom::Auto => format!("it has no `{program}` on PATH, and "),
        _ => String::new(),
    };
    let (Some(volume), Some(existing)) = (&spec.tools, existing) else {
        return Err(unusable(format!(
            "{why_not_on_path}agent-runner's tools volume is not there ({}); `agent-runner tools install` fills it",
            spec.tools_error.as_deref().unwrap_or("not mounted")
        )));
    };
    let present: Vec<&str> = existing.iter().map(String::as_str).collect();
    if !present.contains(&READY) {
        return Err(unusable(format!(
            "agent-runner's tools volume {volume} is incomplete (its fill was interrupted); \
             `agent-runner tools install` fills it again"
        )));
    }
    match tools::agent(program, &present) {
        Ok(Some(agent)) => Ok(agent),
        Ok(None) => Err(unusable(format!(
            "{why_not_on_path}agent-runner's tools volume has no `{program}`"
        ))),
        Err(why) => Err(unusable(format!(
            "{why_not_on_path}{why} (refused: `{program}` from agent-runner's tools volume cannot run in this image)"
        ))),
    }
}

/// Prints each of its arguments that exists.
const EXISTING_SCRIPT: &str = r#"for f; do [ -e "$f" ] && printf '%s\n' "$f"; done; exit 0"#;

fn on_a_mount(path: &str) -> bool {
    MOUNTED.iter().any(|m| below(path, m))
}

/// `path` lies below `dir` (not `dir` itself).
fn strictly_below(path: &str, dir: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

/// What decides which libraries a loader loads, besides the libraries themselves.
const LOADER_FILES: [&str; 4] = [
    "/etc/ld.so.preload",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
];

/// The names a loader's `--list` answer looks libraries up by (`libc.so.6 =>
/// …`), and the loader's own.
fn sonames(loader: &str, answer: &str) -> Vec<String> {
    let mut names: Vec<String> = answer
        .lines()
        .filter_map(|line| {
            let left = line.split("=>").next()?.split_whitespace().next()?;
            Some(left.rsplit('/').next().unwrap_or(left).to_string())
        })
        .filter(|name| !name.is_empty() && name.contains(".so"))
        .collect();
    names.extend(loader.rsplit('/').next().map(str::to_string));
    names
}

/// `path` is `dir` or below it.
fn below(path: &str, dir: &str) -> bool {
    path == dir || path.starts_with(&format!("{}/", dir.trim_end_matches('/')))
}

/// A check thread's result.
fn joined<T>(
    handle: std::thread::ScopedJoinHandle<'_, Result<T, SandboxError>>,
) -> Result<T, SandboxError> {
    handle
        .join()
        .unwrap_or_else(|_| Err(SandboxError::Io("a check thread failed".into())))
}

/// Files being pinned.
struct Pinning<'a> {
    exec: &'a Exec<'a>,
    files: Vec<Pinned>,
    listings: Vec<Listing>,
    /// The first bytes of each file pinned, by path.
    heads: std::collections::HashMap<String, Vec<u8>>,
}

/// A loader known already, and the file it loads.
type Loader = (String, String);

/// What the start of a pinning finds at once.
struct Start {
    /// The agent on PATH, with the paths visited to reach it, the shell and the
    /// configuration.
    looked: Looked,
    /// What the daemon's diff names already; None: it could not say.
    diff_at_start: Option<HashSet<String>>,
    /// The first bytes of the shell, where it is pinned.
    heads: Vec<Vec<u8>>,
    /// The agent's configuration outside its home, there or not.
    configs: Vec<Pinned>,
    /// Which of the tools volume's files exist, where the agent may come from it.
    tools_seen: Option<Vec<String>>,
}

impl Pinning<'_> {
    /// At once: the agent looked up (with the paths to it and to the `shell`), the
    /// `shell` copied, and what the daemon's diff names already.
    fn start(
        &mut self,
        spec: &ContainerSpec,
        program: &str,
        shell: &[(String, String)],
    ) -> Result<Start, SandboxError> {
        let exec = self.exec;
        let config_paths = spec.worker.kind.config_files();
        // With the tools volume mounted (and the agent not only the image's), what it
        // needs is looked at in the same go: whether it is complete, and which C
        // library the image has. The volume cannot be moved aside (`backend::tools`).
        let may_use_tools = spec.worker.agent_from != AgentFrom::Image && spec.tools.is_some();
        let mut probed: Vec<&str> = vec![READY];
        probed.extend(tools::loaders());
        // The configuration's paths are visited too: the daemon's diff then vouches
        // for them as for the agent's files.
        let mut looked_at: Vec<&str> = shell.iter().map(|(path, _)| path.as_str()).collect();
        looked_at.extend(config_paths);
        let (looked, diff_at_start, shell_head, configs, tools_seen) =
            std::thread::scope(|scope| {
                let diff = scope.spawn(|| exec.diff_paths());
                let look = scope.spawn(|| exec.look(Some(program), &looked_at));
                let configs = scope.spawn(|| exec.copy_all(config_paths));
                let tools_seen = may_use_tools.then(|| scope.spawn(|| exec.existing(&probed)));
                let heads = self.pin_batch(shell);
                (
                    joined(look),
                    diff.join().ok().flatten(),
                    heads,
                    joined(configs),
                    tools_seen.map(joined),
                )
            });
        let configs = config_paths
            .iter()
            .zip(configs?)
            .map(|(path, content)| Pinned {
                path: (*path).to_string(),
                what: "its configuration".to_string(),
                content,
            })
            .collect();
        Ok(Start {
            looked: looked?,
            diff_at_start,
            heads: shell_head?,
            configs,
            tools_seen: tools_seen.transpose()?,
        })
    }

    /// Where the agent is (`agent`, the image's on PATH; else the tools volume's)
    /// and what runs it: its interpreter pinned beside it (`heads`, `executed`
    /// grow). The command's prefix, and the loaders known already.
    fn place_agent(
        &mut self,
        spec: &ContainerSpec,
        program: &str,
        agent: Option<String>,
        tools_seen: Option<Vec<String>>,
        heads: &mut Vec<Vec<u8>>,
        executed: &mut Vec<(String, String)>,
    ) -> Result<(Vec<String>, Vec<Loader>), SandboxError> {
        let unusable = |detail: String| SandboxError::ImageUnusable {
            image: spec.worker.docker_image.clone(),
            detail,
        };
        let mut prefix = Vec::new();
        let mut known_loaders = Vec::new();
        let from_tools = match (spec.worker.agent_from, &agent) {
            (AgentFrom::Image, _) | (AgentFrom::Auto, Some(_)) => false,
            (AgentFrom::Tools, _) | (AgentFrom::Auto, None) => true,
        };
        let agent = if from_tools {
            let tool = tools_agent(spec, program, tools_seen)?;
            if let Some(loader) = tool.loader {
                known_loaders.push((loader.to_string(), tool.path.clone()));
            }
            prefix.push(tool.path);
            None
        } else {
            agent
        };
        if let Some(agent) = agent {
            in_repository(&agent, program, spec)?;
            let batch = [(agent.clone(), "the agent".to_string())];
            let at = heads.len();
            heads.extend(self.pin_batch(&batch)?);
            executed.extend(batch);
            let interpreter = match shebang(&heads[at]) {
                Some(Shebang::Env(name)) => {
                    let found = self.exec.look(Some(&name), &[])?.found.ok_or_else(|| {
                        unusable(format!("{agent} needs `{name}`, which is not on PATH"))
                    })?;
                    prefix.push(found.clone());
                    Some(found)
                }
                Some(Shebang::Path(interpreter)) => Some(interpreter),
                None => None,
            };
            if let Some(interpreter) = interpreter {
                let batch = [(interpreter, "its interpreter".to_string())];
                heads.extend(self.pin_batch(&batch)?);
                executed.extend(batch);
            }
            prefix.push(agent);
        }
        Ok((prefix, known_loaders))
    }

    /// Pins each (path, what) of `batch` (once; copied at once); their first bytes.
    fn pin_batch(&mut self, batch: &[(String, String)]) -> Result<Vec<Vec<u8>>, SandboxError> {
        let exec = self.exec;
        let pinned = &self.heads;
        let copies = std::thread::scope(|scope| {
            let handles: Vec<_> = batch
                .iter()
                .map(|(path, _)| {
                    scope.spawn(move || match pinned.contains_key(path) {
                        true => Ok(None),
                        false => exec.copy(path).map(Some),
                    })
                })
                .collect();
            handles.into_iter().map(joined).collect::<Vec<_>>()
        });
        let mut heads = Vec::new();
        for ((path, what), copy) in batch.iter().zip(copies) {
            let Some((content, head)) = copy? else {
                heads.push(self.heads.get(path).cloned().unwrap_or_default());
                continue;
            };
            if content == Content::Missing {
                return Err(SandboxError::Docker {
                    command: format!("docker cp -L {}:{path} -", exec.0.container),
                    detail: format!("{path} ({what}) is not in the container"),
                });
            }
            self.files.push(Pinned {
                path: path.clone(),
                what: what.clone(),
                content,
            });
            self.heads.insert(path.clone(), head.clone());
            heads.push(head);
        }
        Ok(heads)
    }

    /// For each of the `executed` files (with their first bytes) that is
    /// dynamically linked: pins its loader and what the loader says it loads.
    fn follow_loaders(
        &mut self,
        executed: &[(String, String)],
        heads: &[Vec<u8>],
        known: Vec<(String, String)>,
    ) -> Result<(), SandboxError> {
        let exec = self.exec;
        // (loader, file): `known` are those of files not copied (the tools volume's).
        let mut dynamic = known;
        for ((path, _), head) in executed.iter().zip(heads) {
            let loader =
                crate::backend::elf::interpreter(head).map_err(|e| SandboxError::Docker {
                    command: format!("docker cp -L {}:{path} -", exec.0.container),
                    detail: format!("{path}: {e}"),
                })?;
            if let Some(loader) = loader
                && !dynamic.iter().any(|(_, p): &(String, String)| p == path)
            {
                dynamic.push((loader, path.clone()));
            }
        }
        let loaders: Vec<(String, String)> = dynamic
            .iter()
            .map(|(loader, path)| (loader.clone(), format!("the loader of {path}")))
            .collect();
        let answers = std::thread::scope(|scope| {
            let lists: Vec<_> = dynamic
                .iter()
                .map(|(loader, path)| scope.spawn(move || exec.list(loader, path)))
                .collect();
            let loaded = self.pin_batch(&loaders);
            (loaded, lists.into_iter().map(joined).collect::<Vec<_>>())
        });
        answers.0?;
        let mut libraries_of = Vec::new();
        for ((loader, path), answer) in dynamic.into_iter().zip(answers.1) {
            let answer = answer?;
            for library in libraries(&answer.1) {
                libraries_of.push((library, format!("a library of {path}")));
            }
            self.listings.push(Listing {
                loader,
                file: path,
                answer,
            });
        }
        self.pin_batch(&libraries_of)?;
        Ok(())
    }
}

/// The container read from outside (`backend::outside`), for the pinning.
struct Exec<'a>(Outside<'a>);

impl<'a> Exec<'a> {
    fn new(container: &'a str, spec: &'a ContainerSpec) -> Self {
        Exec(Outside {
            container,
            env: spec.worker.literal_env(),
            interrupt: spec.interrupt,
        })
    }

    /// `command` run as root at `/` in the container.
    fn exec(&self, command: &[&str]) -> Result<(bool, String, String), SandboxError> {
        Ok(self.0.exec(command, EXEC_TIMEOUT)?)
    }

    /// Which of `paths` exist.
    fn existing(&self, paths: &[&str]) -> Result<Vec<String>, SandboxError> {
        let mut command = vec![SHELL, "-c", EXISTING_SCRIPT, "agent-runner-exists"];
        command.extend(paths);
        let (ok, stdout, stderr) = self.exec(&command)?;
        if !ok {
            return Err(self.0.exec_failed(SHELL, &stderr, false).into());
        }
        Ok(stdout.lines().map(str::to_string).collect())
    }

    /// What `command -v` finds for `name` (an absolute path, or None), and every
    /// path the kernel visits to resolve it and each of `paths`.
    fn look(&self, name: Option<&str>, paths: &[&str]) -> Result<Looked, SandboxError> {
        let mut command = vec![
            SHELL,
            "-c",
            LOOK_SCRIPT,
            "agent-runner-look",
            name.unwrap_or(""),
        ];
        command.extend(paths);
        let (ok, stdout, stderr) = self.exec(&command)?;
        if !ok {
            return Err(self.0.exec_failed(SHELL, &stderr, true).into());
        }
        let mut lines = stdout.lines();
        let found = lines
            .next()
            .filter(|f| f.starts_with('/'))
            .map(str::to_string);
        let visited: HashSet<String> = lines.map(str::to_string).collect();
        Ok(Looked {
            found,
            unknown: visited.contains("?"),
            visited,
        })
    }

    /// The paths the daemon's diff of the container against its image names (at
    /// the start, when they are few); None when it could not say.
    fn diff_paths(&self) -> Option<HashSet<String>> {
        let mut paths = HashSet::new();
        let complete = self.each_diff_path(&mut |path| {
            if paths.len() < MAX_DIFF_AT_START {
                paths.insert(path.to_string());
            }
        });
        (complete && paths.len() < MAX_DIFF_AT_START).then_some(paths)
    }

    /// Every path the daemon's diff of the container against its image names;
    /// None when it could not say.
    fn named(&self) -> Option<HashSet<String>> {
        let mut paths = HashSet::new();
        let complete = self.each_diff_path(&mut |path| {
            paths.insert(path.to_string());
        });
        complete.then_some(paths)
    }

    /// The ID of the container's image; None when the engine could not say.
    fn image_id(&self) -> Option<String> {
        self.0.image_id(EXEC_TIMEOUT)
    }

    /// Each path the engine's diff of the container names, to `on_path`; whether
    /// the diff was complete.
    fn each_diff_path(&self, on_path: &mut dyn FnMut(&str)) -> bool {
        self.0.each_diff_path(EXEC_TIMEOUT, on_path)
    }

    /// What `loader --list file` answers: its status and output, load addresses
    /// (different each time) left out.
    fn list(&self, loader: &str, file: &str) -> Result<(bool, String), SandboxError> {
        let (ok, stdout, _) = self.exec(&[loader, "--list", file])?;
        let lines: Vec<String> = stdout
            .lines()
            .map(|line| match line.rfind(" (0x") {
                Some(at) if line.ends_with(')') => line[..at].trim().to_string(),
                _ => line.trim().to_string(),
            })
            .collect();
        Ok((ok, lines.join("\n")))
    }

    /// The content of each of `paths` (copied at once), there or not.
    fn copy_all(&self, paths: &[&str]) -> Result<Vec<Content>, SandboxError> {
        std::thread::scope(|scope| {
            let copies: Vec<_> = paths
                .iter()
                .map(|path| scope.spawn(move || self.copy(path).map(|(c, _)| c)))
                .collect();
            copies.into_iter().map(joined).collect()
        })
    }

    /// `path`'s content (the link followed) as the engine streams it, and its first
    /// bytes.
    fn copy(&self, path: &str) -> Result<(Content, Vec<u8>), SandboxError> {
        match self
            .0
            .copy(path, COPY_TIMEOUT, || Pulled::new(first_entry))?
        {
            Copied::Missing => Ok((Content::Missing, Vec::new())),
            Copied::Read(reader, command) => digested(reader).map_err(|e| SandboxError::Docker {
                command,
                detail: e.to_string(),
            }),
        }
    }
}

/// What `Exec::look` found.
struct Looked {
    found: Option<String>,
    visited: HashSet<String>,
    /// A link could not be read.
    unknown: bool,
}

/// Most entries of the container's diff taken at the start (it has a handful).
const MAX_DIFF_AT_START: usize = 10_000;

/// Arguments: a name (or nothing) and absolute paths. Prints what `command -v`
/// finds for the name (or an empty line), then every path visited in resolving it
/// and each path, as the kernel walks it: each directory on the way, each link, and
/// on through where the link leads; `?` when a link cannot be read.
const LOOK_SCRIPT: &str = r#"
visit() {
  rest=${1#/} cur= hops=0
  while [ -n "$rest" ]; do
    comp=${rest%%/*}
    case $rest in */*) rest=${rest#*/} ;; *) rest= ;; esac
    case $comp in ''|.) continue ;; ..) cur=${cur%/*}; continue ;; esac
    cur=$cur/$comp
    printf '%s
' "$cur"
    if [ -L "$cur" ]; then
      hops=$((hops + 1))
      [ $hops -le 40 ] || { echo '?'; return; }
      target=$(readlink "$cur") || { echo '?'; return; }
      case $target in /*) ;; *) target=${cur%/*}/$target ;; esac
      rest=${target#/}${rest:+/$rest}
      cur=
    fi
  done
}
found=
if [ -n "$1" ]; then found=$(command -v -- "$1") || found=; fi
printf '%s\n' "$found"
shift
case $found in /*) visit "$found" ;; esac
for path; do visit "$path"; done
"#;

/// How a script names its interpreter.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Shebang {
    /// `#!/usr/bin/env NAME`: NAME, found on PATH.
    Env(String),
    /// `#!/path/to/interpreter [arg]`.
    Path(String),
}

/// The interpreter a file's `#!` line names, if it has one.
fn shebang(head: &[u8]) -> Option<Shebang> {
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let interpreter = words.next()?.to_string();
    let rest: Vec<&str> = words.collect();
    match rest.as_slice() {
        [name] if interpreter.rsplit('/').next() == Some("env") && !name.starts_with('-') => {
            Some(Shebang::Env((*name).to_string()))
        }
        _ => Some(Shebang::Path(interpreter)),
    }
}

/// The files a loader's `--list` answer names (absolute paths).
fn libraries(answer: &str) -> Vec<String> {
    answer
        .lines()
        .filter_map(|line| {
            let path = match line.split_once("=> ") {
                Some((_, right)) => right,
                None => line,
            };
            let path = path.split_whitespace().next()?;
            path.starts_with('/').then(|| path.to_string())
        })
        .collect()
}

/// Reads the tar stream of `docker cp -L <c>:<path> -` (on a thread of its own,
/// through the `tar` crate, `first_entry`): the SHA-256 of its first entry's
/// content and that content's first bytes; the rest is not read.
type TarDigest = Pulled<Result<(Content, Vec<u8>), TarStreamError>>;

/// What a `TarDigest` found, once the stream has ended.
fn digested(reader: TarDigest) -> Result<(Content, Vec<u8>), TarStreamError> {
    reader.result().unwrap_or(Err(TarStreamError::ReaderFailed))
}

/// Why the reading stops: the first entry was read (or the stream is bad).
enum FirstEntry {
    Read(Content, Vec<u8>),
    Bad(std::io::Error),
}

/// The first entry of `stream`: a file's digest and first bytes, another entry's
/// tar type, `Missing` for an archive without entries.
fn first_entry(stream: StreamReader) -> Result<(Content, Vec<u8>), TarStreamError> {
    let read = untar::read_entries(stream, FirstEntry::Bad, &mut |entry, content| {
        let Kind::File = entry.kind else {
            return Err(FirstEntry::Read(
                Content::Other(entry.kind.type_byte()),
                Vec::new(),
            ));
        };
        let mut digest = Digesting {
            hasher: ring::digest::Context::new(&ring::digest::SHA256),
            head: Vec::new(),
        };
        if let Err(e) = content.copy_to(&mut digest) {
            return Err(FirstEntry::Bad(e));
        }
        let mut sha = [0u8; 32];
        sha.copy_from_slice(digest.hasher.finish().as_ref());
        Err(FirstEntry::Read(Content::File(sha), digest.head))
    });
    match read {
        Ok(()) => Ok((Content::Missing, Vec::new())),
        Err(FirstEntry::Read(content, head)) => Ok((content, head)),
        Err(FirstEntry::Bad(e)) => Err(TarStreamError::Read(e)),
    }
}

/// A file's content as it streams by: hashed, its first `HEAD` bytes kept.
struct Digesting {
    hasher: ring::digest::Context,
    head: Vec<u8>,
}

impl std::io::Write for Digesting {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(bytes);
        let room = HEAD.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_runner_core::process::StreamFilter;

    const BLOCK: usize = 512;

    /// The agent of the real image, as a pinning finds it: a link to the binary,
    /// and codex's configuration, not there.
    fn pinned_codex(sonames: &[&str]) -> AgentFiles {
        let file = |path: &str, what: &str, content| Pinned {
            path: path.into(),
            what: what.into(),
            content,
        };
        AgentFiles {
            program: "codex".into(),
            prefix: vec!["/usr/local/bin/codex".into()],
            files: vec![file(
                "/usr/local/bin/codex",
                "the agent",
                Content::File([7; 32]),
            )],
            configs: vec![file(
                "/etc/codex/config.toml",
                "its configuration",
                Content::Missing,
            )],
            listings: Vec::new(),
            visited: [
                "/usr",
                "/usr/local",
                "/usr/local/bin",
                "/usr/local/bin/codex",
                "/usr/local/lib",
                "/usr/local/lib/codex",
                "/usr/local/lib/codex/codex",
                "/etc",
                "/etc/codex",
                "/etc/codex/config.toml",
            ]
            .map(String::from)
            .into(),
            always_hash: false,
            sonames: sonames.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn named(paths: &[&str]) -> HashSet<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn what_a_run_may_change_beside_the_agent_passes_its_check() {
        let agent = pinned_codex(&["libc.so.6"]);
        for benign in [
            &[][..],
            // pip installing a script beside the agent: its directories, below.
            &["/usr", "/usr/local", "/usr/local/bin", "/usr/local/bin/pip"],
            // apt-get: /etc and a library of another name.
            &[
                "/etc",
                "/etc/apt",
                "/usr",
                "/usr/lib",
                "/usr/lib/libfoo.so.1",
            ],
        ] {
            assert_eq!(agent.verdict(&named(benign)), Ok(()), "{benign:?}");
        }
    }

    #[test]
    fn a_changed_file_a_replaced_directory_or_a_library_s_namesake_fails_the_check() {
        let agent = pinned_codex(&["libc.so.6"]);
        let cases: [(&[&str], &str); 5] = [
            (
                &[
                    "/usr",
                    "/usr/local",
                    "/usr/local/bin",
                    "/usr/local/bin/codex",
                ],
                "/usr/local/bin/codex (the agent) is not the file it was",
            ),
            (
                &["/etc", "/etc/codex", "/etc/codex/config.toml"],
                "/etc/codex/config.toml (its configuration) was not there",
            ),
            // A directory on the way made a link: nothing below it is named.
            (
                &["/usr", "/usr/local", "/usr/local/lib", "/tmp", "/tmp/evil"],
                "/usr/local/lib, on the way to the agent's files, was replaced",
            ),
            (
                &["/usr/local/lib/codex/codex"],
                "/usr/local/lib/codex/codex, on the way to the agent's files, was changed",
            ),
            (
                &["/tmp", "/tmp/libc.so.6"],
                "/tmp/libc.so.6 has the name of a library",
            ),
        ];
        for (paths, said) in cases {
            let verdict = agent.verdict(&named(paths)).unwrap_err().to_string();
            assert!(verdict.starts_with(said), "{paths:?}: {verdict}");
        }
    }

    #[test]
    fn a_pinning_survives_the_cache_s_round_trip() {
        let agent = pinned_codex(&["libc.so.6"]);
        let json = serde_json::to_vec(&agent).unwrap();
        let back: AgentFiles = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.visited, agent.visited);
        assert_eq!(back.files[0].content, agent.files[0].content);
        assert_eq!(back.sonames, agent.sonames);
        assert_eq!(
            sonames(
                "/lib64/ld-linux-x86-64.so.2",
                "linux-vdso.so.1\nlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6\n/lib64/ld-linux-x86-64.so.2"
            ),
            [
                "linux-vdso.so.1",
                "libc.so.6",
                "ld-linux-x86-64.so.2",
                "ld-linux-x86-64.so.2"
            ]
        );
    }

    #[test]
    fn a_path_below_a_mount_is_told_from_a_neighbour() {
        assert!(below("/root/.cache/pip/x", "/root/.cache/pip/"));
        assert!(below("/root/.cache/pip", "/root/.cache/pip"));
        assert!(!below("/root/.cache/pipx", "/root/.cache/pip"));
        assert!(on_a_mount("/workspace/project/node_modules/.bin/codex"));
        assert!(!on_a_mount("/usr/local/bin/codex"));
    }

    /// A tar stream as `docker cp` writes it: an optional PAX header, then `content`
    /// as a file, then more.
    fn tar(content: &[u8], pax: bool) -> Vec<u8> {
        let header = |name: &str, kind: u8, size: usize| {
            let mut block = vec![0u8; BLOCK];
            block[..name.len()].copy_from_slice(name.as_bytes());
            let size = format!("{size:011o}\0");
            block[124..136].copy_from_slice(size.as_bytes());
            block[156] = kind;
            block[100..108].copy_from_slice(b"0000644\0");
            block[108..116].copy_from_slice(b"0000000\0");
            block[116..124].copy_from_slice(b"0000000\0");
            block[136..148].copy_from_slice(b"00000000000\0");
            block[257..263].copy_from_slice(b"ustar\0");
            block[263..265].copy_from_slice(b"00");
            block[148..156].fill(b' ');
            let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
            block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
            block
        };
        let pad = |bytes: &mut Vec<u8>| {
            let len = bytes.len().div_ceil(BLOCK) * BLOCK;
            bytes.resize(len, 0);
        };
        let mut out = Vec::new();
        if pax {
            let data = b"30 mtime=1700000000.123456789\n";
            out.extend(header("PaxHeaders/x", b'x', data.len()));
            out.extend_from_slice(data);
            pad(&mut out);
        }
        out.extend(header("x", b'0', content.len()));
        out.extend_from_slice(content);
        pad(&mut out);
        out.extend(header("other", b'0', 3));
        out.extend_from_slice(b"abc");
        pad(&mut out);
        out.extend(vec![0u8; 2 * BLOCK]);
        out
    }

    fn sha256(bytes: &[u8]) -> [u8; 32] {
        let mut digest = [0u8; 32];
        digest.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref());
        digest
    }

    #[test]
    fn the_first_file_of_a_tar_is_hashed_in_any_chunking() {
        let content: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for pax in [false, true] {
            let stream = tar(&content, pax);
            for chunk in [1, 7, 512, 4096, stream.len()] {
                let mut reader = Pulled::new(first_entry);
                for piece in stream.chunks(chunk) {
                    assert!(reader.push(piece).is_empty());
                }
                reader.finish();
                let (found, head) = digested(reader).unwrap();
                assert_eq!(found, Content::File(sha256(&content)), "chunk {chunk}");
                assert_eq!(head, content[..HEAD]);
            }
        }
    }

    #[test]
    fn a_cut_stream_or_an_empty_one_is_not_a_file() {
        let stream = tar(b"hello", false);
        let mut reader = Pulled::new(first_entry);
        reader.push(&stream[..BLOCK + 2]);
        assert!(digested(reader).is_err());
        let mut reader = Pulled::new(first_entry);
        reader.push(&[0u8; 2 * BLOCK]);
        assert_eq!(digested(reader).unwrap().0, Content::Missing);
    }

    #[test]
    fn shebang_lines() {
        assert_eq!(
            shebang(b"#!/usr/bin/env node\nrequire()"),
            Some(Shebang::Env("node".into()))
        );
        assert_eq!(
            shebang(b"#!/bin/sh\n"),
            Some(Shebang::Path("/bin/sh".into()))
        );
        assert_eq!(
            shebang(b"#! /usr/bin/python3 -u\n"),
            Some(Shebang::Path("/usr/bin/python3".into()))
        );
        // env with options is run as written: env is pinned, not what it finds.
        assert_eq!(
            shebang(b"#!/usr/bin/env -S node --x\n"),
            Some(Shebang::Path("/usr/bin/env".into()))
        );
        assert_eq!(shebang(b"\x7fELF"), None);
    }

    #[test]
    fn the_loader_of_this_test_binary_is_found() {
        let head: Vec<u8> = std::fs::read(std::env::current_exe().unwrap())
            .unwrap()
            .into_iter()
            .take(HEAD)
            .collect();
        let loader = crate::backend::elf::interpreter(&head)
            .unwrap()
            .expect("dynamically linked");
        assert!(
            loader.starts_with('/') && loader.contains("ld-"),
            "{loader}"
        );
        assert_eq!(crate::backend::elf::interpreter(b"#!/bin/sh\n"), Ok(None));
        assert!(crate::backend::elf::interpreter(b"\x7fELF\x02\x01").is_err());
    }

    #[test]
    fn the_paths_visited_through_links_are_all_listed() {
        let root = std::env::temp_dir().join(format!(
            "agent-runner-visit-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(root.join("usr/bin")).unwrap();
        std::fs::create_dir_all(root.join("opt/lib")).unwrap();
        std::fs::write(root.join("usr/bin/dash"), "").unwrap();
        std::fs::write(root.join("opt/lib/tool"), "").unwrap();
        let link =
            |target: &str, at: &str| std::os::unix::fs::symlink(target, root.join(at)).unwrap();
        link("usr/bin", "bin");
        link("dash", "usr/bin/sh");
        link(
            &root.join("opt/lib/./tool").display().to_string(),
            "usr/bin/abs",
        );
        link("../../opt/lib/tool", "usr/bin/rel");
        let r = root.display().to_string();
        let out = std::process::Command::new("sh")
            .args(["-c", LOOK_SCRIPT, "look", ""])
            .args([
                format!("{r}/bin/sh"),
                format!("{r}/usr/bin/abs"),
                format!("{r}/usr/bin/rel"),
            ])
            .output()
            .unwrap();
        let got: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix(&r).map(str::to_string))
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(
            got,
            [
                // A link restarts the walk from where it leads.
                "/bin",
                "/usr",
                "/usr/bin",
                "/usr/bin/sh",
                "/usr",
                "/usr/bin",
                "/usr/bin/dash",
                "/usr",
                "/usr/bin",
                "/usr/bin/abs",
                "/opt",
                "/opt/lib",
                "/opt/lib/tool",
                "/usr",
                "/usr/bin",
                "/usr/bin/rel",
                "/usr",
                "/usr/bin",
                "/opt",
                "/opt/lib",
                "/opt/lib/tool",
            ]
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn libraries_in_a_loader_s_answer() {
        let answer = "linux-vdso.so.1\nlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6\n\
                      /lib64/ld-linux-x86-64.so.2\n/usr/lib/preloaded.so\nlibgone.so => not found";
        assert_eq!(
            libraries(answer),
            [
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2",
                "/usr/lib/preloaded.so"
            ]
        );
    }
}
