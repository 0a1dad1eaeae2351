//! `agent-runner doctor`: whether this machine can run a task, found out before a paid
//! run fails half-way. Each check is one small function that returns a `Check`:
//! docker, the worker image and what must be in it (each agent CLI the task uses:
//! the worker's, and codex for Meta `codex-cli`, at its pinned version), the egress
//! proxy's bridge, each agent's credentials, the Meta endpoint, and who owns the
//! files the container writes. Containers are started through the sandbox's backend
//! (`backend::open`), the way the sandbox starts them (`--entrypoint /bin/sh`,
//! `--user uid:gid` when not root), and every docker call goes through its one place
//! (`backend::docker_cli`). No check sends a key anywhere: the Meta endpoint gets a
//! bare GET.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{self, Ending};
use agent_runner_core::sys;
use agent_runner_core::text::{cut, one_line};
use agent_runner_sandbox::backend::engine::EngineCheck;
use agent_runner_sandbox::backend::host::Target as SandboxTarget;
use agent_runner_sandbox::backend::tools;
use agent_runner_sandbox::backend::{
    Backend, BackendError, Carrier, Main, Mount, Net, Output, SocketLink, Spec, docker_cli,
};
use agent_runner_sandbox::worker::container::home_links;
use agent_runner_sandbox::worker::{FIND_PROGRAM, FOUND, MISSING, missing_program, test_program};
use agent_runner_settings::agent::McpTransport;
use agent_runner_settings::agent::{self, Kind, Login};
use agent_runner_settings::task::{
    AgentFrom, AllowGap, DEFAULT_BASE_URL, DEFAULT_DOCKER_IMAGE, MetaBackend, Network, Task,
    WorkerEnv, allow_gaps,
};

/// Limit for docker commands that only talk to the daemon.
const CLI_TIMEOUT: Duration = Duration::from_secs(20);
/// Limit for a probe container (the first start of a large image takes a while).
const CONTAINER_TIMEOUT: Duration = Duration::from_secs(120);
/// Limit for the GET of the Meta endpoint.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// Where the probe container mounts the scratch directory, as the sandbox mounts a repo.
const PROBE_DIR: &str = "/workspace/project";
const PROBE_FILE: &str = "agent-runner-doctor-probe";

/// What the checks look at: a task's settings, or the defaults.
#[derive(Debug, Clone)]
pub struct Target {
    pub(crate) image: String,
    pub(crate) network: Network,
    /// The Meta base URL; None when Meta has no endpoint of its own (scripted, or
    /// codex-cli, which runs in the sandbox image).
    pub(crate) meta_url: Option<String>,
    /// Meta is `kind: codex-cli`.
    pub(crate) meta_in_sandbox: bool,
    /// The agent CLIs a run uses: the worker's first, then Meta's codex when it is
    /// another CLI or image.
    pub(crate) agents: Vec<Agent>,
    /// The program the task's test command starts with, when it is a plain word
    /// (SPEC §21), and whether the task has a `task.setup` that may install it.
    pub(crate) test_program: Option<(String, bool)>,
    /// Hosts the agents need that a written allow list lacks (`task::allow_gaps`).
    pub(crate) allow_gaps: Vec<AllowGap>,
    /// `runner.sandbox.runtime` (SPEC §28): the daemon must know it.
    pub(crate) runtime: Option<String>,
    /// The stdio MCP servers' `(name, command)` (SPEC §28): in the image.
    pub(crate) mcp_commands: Vec<(String, String)>,
    /// `runner.sandbox.host` of an engine that checks itself (a cluster, SPEC
    /// §25): its checks instead of the Docker daemon's.
    pub(crate) sandbox_host: Option<SandboxTarget>,
}

/// An agent CLI a run uses, where, and how it logs in.
#[derive(Debug, Clone)]
pub(crate) struct Agent {
    pub(crate) kind: &'static dyn Kind,
    pub(crate) image: String,
    pub(crate) auth: AuthSource,
    /// `runner.worker.agent_from`: the image's agent, or the tools volume's.
    pub(crate) from: AgentFrom,
}

/// Where an agent's credentials would come from in a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AuthSource {
    /// The host's login file, mounted read-only.
    File(PathBuf),
    /// The key variable in agent-runner's environment.
    HostKey,
    /// A login variable (the key, or another the kind accepts) in the task's env:
    /// the setting (`runner.worker.env` or `runner.meta.env`) and the variable.
    TaskEnv(&'static str, &'static str),
    None,
}

impl Target {
    /// The defaults a task without these settings would get (a codex worker logged
    /// in with `login`).
    pub fn defaults(var: &dyn Fn(&str) -> Option<String>, login: &Login) -> Self {
        Target {
            image: DEFAULT_DOCKER_IMAGE.to_string(),
            network: Network::Allowlist,
            meta_url: Some(
                var("OPENAI_BASE_URL")
                    .filter(|url| !url.trim().is_empty())
                    .unwrap_or_else(|| DEFAULT_BASE_URL.to_string()),
            ),
            meta_in_sandbox: false,
            agents: vec![Agent {
                kind: agent::default_kind(),
                image: DEFAULT_DOCKER_IMAGE.to_string(),
                auth: auth_source(login, None),
                from: AgentFrom::default(),
            }],
            test_program: None,
            allow_gaps: Vec::new(),
            runtime: None,
            mcp_commands: Vec::new(),
            sandbox_host: None,
        }
    }

    /// The settings of `task`.
    pub fn of_task(task: &Task) -> Self {
        let worker = &task.worker;
        let mut agents = vec![Agent {
            kind: worker.kind,
            image: worker.docker_image.clone(),
            auth: auth_source(
                &task.login,
                login_in(&worker.env, worker.kind).map(|var| ("runner.worker.env", var)),
            ),
            from: worker.agent_from,
        }];
        if let MetaBackend::CodexCli(codex) = &task.meta.backend {
            let settings = codex.worker_settings(worker, task.meta.timeout);
            let same = agents
                .iter()
                .any(|a| *a.kind == *settings.kind && a.image == settings.docker_image);
            if !same {
                let source = match codex.env {
                    Some(_) => "runner.meta.env",
                    None => "runner.worker.env",
                };
                agents.push(Agent {
                    kind: settings.kind,
                    auth: auth_source(
                        &codex.login,
                        login_in(&settings.env, settings.kind).map(|var| (source, var)),
                    ),
                    image: settings.docker_image,
                    from: settings.agent_from,
                });
            }
        }
        Target {
            image: worker.docker_image.clone(),
            network: worker.network,
            meta_url: match &task.meta.backend {
                MetaBackend::Api(api) => Some(api.base_url.clone()),
                MetaBackend::Scripted { .. } | MetaBackend::CodexCli(_) => None,
            },
            meta_in_sandbox: matches!(task.meta.backend, MetaBackend::CodexCli(_)),
            agents,
            test_program: task
                .test
                .as_ref()
                .and_then(|t| test_program(&t.command))
                .map(|p| (p.to_string(), task.setup.is_some())),
            allow_gaps: allow_gaps(task),
            runtime: worker.runtime.clone(),
            mcp_commands: worker
                .mcp_servers
                .iter()
                .filter_map(|s| match &s.transport {
                    McpTransport::Stdio { command, .. } => Some((s.name.clone(), command.clone())),
                    McpTransport::Remote { .. } => None,
                })
                .collect(),
            sandbox_host: task
                .sandbox_host
                .as_deref()
                .map(SandboxTarget::parse)
                .and_then(Result::ok),
        }
    }
}

/// Whether `env` sets the key variable of `kind`.
/// The variable of `env` that logs `kind` in, if one does.
fn login_in(env: &[WorkerEnv], kind: &dyn Kind) -> Option<&'static str> {
    let rule = kind.login_rule();
    std::iter::once(rule.key_var)
        .chain(rule.env_logins.iter().copied())
        .find(|var| env.iter().any(|e| e.name == *var))
}

/// Where the credentials come from: the host's login, else the task's env
/// (`in_task_env` names the setting and the variable), else nowhere.
fn auth_source(detected: &Login, in_task_env: Option<(&'static str, &'static str)>) -> AuthSource {
    match (detected, in_task_env) {
        (Login::File { path, .. }, _) => AuthSource::File(path.clone()),
        (Login::Key { .. }, _) => AuthSource::HostKey,
        (Login::None, Some((setting, var))) => AuthSource::TaskEnv(setting, var),
        (Login::None, None) => AuthSource::None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Fail,
    /// Runs may fail for this, yet the user may mean it (e.g. an allow list).
    Warn,
    /// Not run because a check it needs failed.
    Skipped,
}

/// The result of one check: one line of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub status: Status,
    /// What was checked, e.g. "docker daemon".
    pub(crate) what: String,
    pub(crate) detail: String,
    /// How to fix it (failures only).
    pub(crate) hint: Option<String>,
}

impl Check {
    fn ok(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Check {
            status: Status::Ok,
            what: what.into(),
            detail: detail.into(),
            hint: None,
        }
    }

    fn fail(what: impl Into<String>, detail: impl ToString, hint: impl Into<String>) -> Self {
        Check {
            status: Status::Fail,
            what: what.into(),
            detail: detail.to_string(),
            hint: Some(hint.into()),
        }
    }

    fn warn(what: impl Into<String>, detail: impl Into<String>, hint: impl Into<String>) -> Self {
        Check {
            status: Status::Warn,
            what: what.into(),
            detail: detail.into(),
            hint: Some(hint.into()),
        }
    }

    fn skipped(what: impl Into<String>, needs: &str) -> Self {
        Check {
            status: Status::Skipped,
            what: what.into(),
            detail: format!("not checked: needs {needs}"),
            hint: None,
        }
    }

    fn passed(&self) -> bool {
        matches!(self.status, Status::Ok | Status::Warn)
    }

    /// `ok    what: detail`, `FAIL  what: detail (fix: hint)` or `skip  what: detail`.
    pub fn line(&self) -> String {
        match (self.status, &self.hint) {
            (Status::Ok, _) => format!("ok    {}: {}", self.what, self.detail),
            (Status::Fail, Some(hint)) => {
                format!("FAIL  {}: {} (fix: {hint})", self.what, self.detail)
            }
            (Status::Fail, None) => format!("FAIL  {}: {}", self.what, self.detail),
            (Status::Warn, Some(hint)) => {
                format!("warn  {}: {} (fix: {hint})", self.what, self.detail)
            }
            (Status::Warn, None) => format!("warn  {}: {}", self.what, self.detail),
            (Status::Skipped, _) => format!("skip  {}: {}", self.what, self.detail),
        }
    }
}

/// Runs every check in order, handing each to `report` as it finishes; returns them
/// all. Checks that need a failed one are skipped. Once `interrupt` is set nothing
/// more runs or is reported.
pub fn run_all(
    target: &Target,
    interrupt: Interrupt,
    report: &mut dyn FnMut(&Check),
) -> Vec<Check> {
    let mut r = Report {
        checks: Vec::new(),
        report,
        interrupt,
    };
    if let Some(checks) = target
        .sandbox_host
        .as_ref()
        .and_then(SandboxTarget::doctor_checks)
    {
        return engine_checks(checks, target, r, interrupt);
    }
    let docker = Docker {
        backend: agent_runner_sandbox::backend::open(),
        interrupt,
    };
    let cli = r.run(|| docker_cli(&docker));
    let mut needs = (!cli).then_some("the docker CLI");
    let daemon = r.run_if(needs, "docker daemon", || docker_daemon(&docker));
    needs = needs.or((!daemon).then_some("a reachable docker daemon"));
    if let Some(runtime) = &target.runtime {
        let known = r.run_if(needs, RUNTIME, || runtime_known(runtime));
        needs = needs.or((!known).then_some("the container runtime"));
    }
    let image = format!("image {}", target.image);
    let present = r.run_if(needs, &image, || image_present(&docker, &target.image));
    needs = needs.or((!present).then_some("the image"));
    let runs = r.run_if(needs, &format!("{image} runs"), || {
        image_runs(&docker, target)
    });
    needs = needs.or((!runs).then_some("a runnable image"));
    if target.network == Network::Allowlist {
        r.run_if(needs, EGRESS, || egress_bridge(&docker, target));
        // Reported only when a written list lacks something: a warning.
        if !target.allow_gaps.is_empty() {
            r.run(|| allow_list(target));
        }
    }
    for agent in &target.agents {
        let what = in_image(agent, target);
        r.run_if(needs, &what, || agent_version(&docker, target, agent));
    }
    if let Some((program, setup)) = &target.test_program {
        r.run_if(needs, TEST_PROGRAM, || {
            program_in_image(&docker, target, program, *setup)
        });
    }
    for (name, command) in &target.mcp_commands {
        r.run_if(needs, &format!("MCP server {name}"), || {
            mcp_command_in_image(&docker, target, name, command)
        });
    }
    r.run_if(needs, GIT_IN_IMAGE, || git_in_image(&docker, target));
    r.run_if(needs, FILE_OWNERSHIP, || file_ownership(&docker, target));
    for agent in &target.agents {
        r.run(|| agent_auth(agent));
    }
    r.run(|| meta_endpoint(target, interrupt));
    r.checks
}

/// The checks of an engine that checks itself (a cluster, SPEC §25: the API
/// server, the namespace, the rights the backend needs there, the tools image,
/// egress enforcement), `Target::doctor_checks`; then the agents' logins and Meta
/// as for Docker.
fn engine_checks(
    checks: Vec<EngineCheck>,
    target: &Target,
    mut r: Report,
    interrupt: Interrupt,
) -> Vec<Check> {
    for check in checks {
        r.run(|| match check.problem {
            None => Check::ok(check.what, check.seen),
            Some((problem, fix)) => Check::fail(check.what, problem, fix),
        });
    }
    for agent in &target.agents {
        r.run(|| agent_auth(agent));
    }
    r.run(|| meta_endpoint(target, interrupt));
    r.checks
}

/// `codex in the image`, or `codex in image X` for Meta's own image.
fn in_image(agent: &Agent, target: &Target) -> String {
    if agent.image == target.image {
        format!("{} in the image", agent.kind.program())
    } else {
        format!("{} in image {}", agent.kind.program(), agent.image)
    }
}

const EGRESS: &str = "egress proxy";
const RUNTIME: &str = "container runtime";
const GIT_IN_IMAGE: &str = "git in the image";
const TEST_PROGRAM: &str = "test command's program";
const FILE_OWNERSHIP: &str = "file ownership";

/// The checks so far, and where each is reported.
struct Report<'a> {
    checks: Vec<Check>,
    report: &'a mut dyn FnMut(&Check),
    interrupt: Interrupt,
}

impl Report<'_> {
    /// Runs `check` and reports it, unless a stop was asked for; true if it passed.
    fn run(&mut self, check: impl FnOnce() -> Check) -> bool {
        if self.interrupt.is_set() {
            return false;
        }
        let check = check();
        // A check cut short by the interrupt says nothing about the machine.
        if self.interrupt.is_set() {
            return false;
        }
        (self.report)(&check);
        let passed = check.passed();
        self.checks.push(check);
        passed
    }

    /// Runs `check`, or reports `what` as skipped when it `needs` something that failed.
    fn run_if(&mut self, needs: Option<&str>, what: &str, check: impl FnOnce() -> Check) -> bool {
        match needs {
            None => self.run(check),
            Some(needs) => self.run(|| Check::skipped(what, needs)),
        }
    }
}

/// A written allow list holds the hosts the agents need (SPEC §24).
fn allow_list(target: &Target) -> Check {
    let lacks: Vec<String> = target
        .allow_gaps
        .iter()
        .map(|g| format!("{} ({})", g.entry, g.why))
        .collect();
    Check::warn(
        ALLOW_LIST,
        format!("runner.worker.allow lacks {}", lacks.join(", ")),
        "add them to runner.worker.allow, or remove `allow` for the defaults",
    )
}

const ALLOW_LIST: &str = "allow list";

/// The docker CLI itself (no daemon needed).
fn docker_cli(docker: &Docker) -> Check {
    match docker.run(&["--version"], CLI_TIMEOUT) {
        Ok(out) if out.ok => Check::ok("docker CLI", first_line(&out.stdout)),
        Ok(out) => Check::fail(
            "docker CLI",
            format!("`docker --version` failed: {}", last_line(&out.stderr)),
            "reinstall the Docker CLI",
        ),
        Err(reason) => Check::fail(
            "docker CLI",
            reason,
            "install the Docker CLI and put `docker` on PATH",
        ),
    }
}

/// The daemon answers (DOCKER_HOST and friends are the docker CLI's business).
fn docker_daemon(docker: &Docker) -> Check {
    match docker.run(&["version", "--format", "{{.Server.Version}}"], CLI_TIMEOUT) {
        Ok(out) if out.ok => Check::ok(
            "docker daemon",
            format!("reachable (server {})", first_line(&out.stdout)),
        ),
        Ok(out) => Check::fail(
            "docker daemon",
            last_line(&out.stderr),
            "start Docker (e.g. `sudo systemctl start docker`), point DOCKER_HOST at a running \
             daemon, or join the group that may use its socket",
        ),
        Err(reason) => Check::fail("docker daemon", reason, "install the Docker CLI"),
    }
}

fn image_present(docker: &Docker, image: &str) -> Check {
    let what = format!("image {image}");
    match docker.run(
        &["image", "inspect", "--format", "{{.Id}}", image],
        CLI_TIMEOUT,
    ) {
        Ok(out) if out.ok => Check::ok(what, format!("present ({})", cut(out.stdout.trim(), 19))),
        Ok(out) => Check::fail(
            what,
            format!("not present: {}", last_line(&out.stderr)),
            "build it with `make sandbox-image`, or set runner.worker.docker_image to an image \
             with /bin/sh, codex and git",
        ),
        Err(reason) => Check::fail(what, reason, "install the Docker CLI"),
    }
}

/// The image starts a container the way the sandbox does, with its network.
fn image_runs(docker: &Docker, target: &Target) -> Check {
    let what = format!("image {} runs", target.image);
    match docker.probe(target, None, "echo agent-runner-doctor") {
        Ok(out) if out.ok && out.stdout.contains("agent-runner-doctor") => Check::ok(
            what,
            format!(
                "/bin/sh as {}, network {}",
                user_description(),
                target.network.as_str()
            ),
        ),
        Ok(out) if docker_cli::missing_part(&out.stderr).is_some() => Check::fail(
            what,
            format!("`docker run --init` failed: {}", last_line(&out.stderr)),
            docker_cli::missing_part(&out.stderr).unwrap_or_default(),
        ),
        Ok(out) => Check::fail(
            what,
            format!("`docker run` failed: {}", last_line(&out.stderr)),
            "the image needs /bin/sh, runner.worker.network must be a network docker knows, \
             and the daemon must take a seccomp profile (--security-opt seccomp=FILE)",
        ),
        Err(reason) => Check::fail(what, reason, "install the Docker CLI"),
    }
}

/// With `network: allowlist`: the egress bridge starts in the image as the sandbox
/// starts it (mounted from the proxy's directory, as the entrypoint), and listens.
fn egress_bridge(docker: &Docker, target: &Target) -> Check {
    let fix = "if the file system of TMPDIR (default /tmp) is mounted noexec, point TMPDIR at one \
               that is not; the image must be for this machine's architecture";
    // The carrier's directory with its socket; no proxy needs to serve it for the
    // bridge to start.
    let link = match SocketLink::open(true, true) {
        Ok((link, _listener)) => link,
        Err(e) => return Check::fail(EGRESS, format!("cannot start the proxy: {e}"), fix),
    };
    let kind = target
        .agents
        .first()
        .map_or(agent::default_kind(), |a| a.kind);
    let links: Vec<(String, String)> = home_links(kind)
        .into_iter()
        .map(|(file, link)| (file.to_string(), link.to_string()))
        .collect();
    let mut spec = Spec::new(&target.image, link.main(&links));
    spec.network = Net::Isolated;
    spec.as_user = true;
    spec.mounts = link.mounts();
    let out = docker.start(&spec);
    Box::new(link).close();
    match out {
        Ok(out) if out.ok && out.stdout.contains("agent-runner-ready") => Check::ok(
            EGRESS,
            format!(
                "the bridge runs in the image and listens on 127.0.0.1:{}",
                agent_runner_settings::allow::PORT
            ),
        ),
        Ok(out) => Check::fail(
            EGRESS,
            format!("the bridge did not start: {}", last_line(&out.stderr)),
            fix,
        ),
        Err(reason) => Check::fail(EGRESS, reason, "install the Docker CLI"),
    }
}

/// `<program> --version` in the agent's image matches the version pinned for it.
fn agent_version(docker: &Docker, target: &Target, agent: &Agent) -> Check {
    let what = in_image(agent, target);
    let program = agent.kind.program();
    let pinned = agent.kind.pinned().version;
    let rebuild = "rebuild the image with `make sandbox-image`";
    let image = Target {
        image: agent.image.clone(),
        ..target.clone()
    };
    if agent.from == AgentFrom::Tools {
        return from_tools(docker, &image, agent, what);
    }
    match docker.probe(&image, None, &format!("{program} --version")) {
        Ok(out) if out.ok => match version_of(&out.stdout) {
            Some(version) if version == pinned => Check::ok(what, first_line(&out.stdout)),
            Some(version) => Check::fail(
                what,
                format!("{program} {version}, but agent-runner was checked against {pinned}"),
                format!("{rebuild} (it installs {program} {pinned})"),
            ),
            None => Check::fail(
                what,
                format!(
                    "`{program} --version` printed no version: {}",
                    first_line(&out.stdout)
                ),
                rebuild,
            ),
        },
        Ok(out) if out.code == Some(127) && agent.from == AgentFrom::Auto => {
            from_tools(docker, &image, agent, what)
        }
        Ok(out) if out.code == Some(127) => Check::fail(
            what,
            format!("no `{program}` on the image's PATH (runner.worker.agent_from: image)"),
            format!(
                "{rebuild}, use an image with {program} {pinned}, or `agent_from: auto` for agent-runner's tools volume"
            ),
        ),
        Ok(out) => Check::fail(
            what,
            format!("`{program} --version` failed: {}", last_line(&out.stderr)),
            rebuild,
        ),
        Err(reason) => Check::fail(what, reason, "install the Docker CLI"),
    }
}

/// The agent from agent-runner's tools volume (SPEC §21): a build of it the image
/// can load (claude needs glibc or musl), and the volume on this host, or not yet.
fn from_tools(docker: &Docker, image: &Target, agent: &Agent, what: String) -> Check {
    let program = agent.kind.program();
    let loaders = tools::loaders();
    let script = format!(
        "for f in {}; do [ -e \"$f\" ] && echo \"$f\"; done; true",
        loaders.join(" ")
    );
    let present = match docker.probe(image, None, &script) {
        Ok(out) if out.ok => out.stdout,
        Ok(out) => {
            return Check::fail(
                what,
                format!("the image's /bin/sh failed: {}", last_line(&out.stderr)),
                "use an image with /bin/sh",
            );
        }
        Err(reason) => return Check::fail(what, reason, "install the Docker CLI"),
    };
    let present: Vec<&str> = present.lines().map(str::trim).collect();
    let tool = match tools::agent(program, &present) {
        Ok(Some(tool)) => tool,
        Ok(None) => {
            return Check::fail(
                what,
                format!(
                    "no `{program}` on image {}'s PATH, nor in agent-runner's tools volume",
                    image.image
                ),
                format!("use an image with {program} on PATH"),
            );
        }
        Err(why) => {
            return Check::fail(
                what,
                format!("refused in image {}: {why}", image.image),
                format!("use an image with glibc or musl, or with {program} on PATH"),
            );
        }
    };
    let volume = tools::volume_name();
    match tools::present(Interrupt::never()) {
        Ok(true) => Check::ok(
            what,
            format!("from agent-runner's tools volume {volume}: {}", tool.path),
        ),
        Ok(false) => Check::ok(
            what,
            "from agent-runner's tools volume, not on this Docker host yet: the first task fills it (or `agent-runner tools install`)",
        ),
        Err(e) => Check::fail(what, e.to_string(), "check the Docker daemon"),
    }
}

/// Git in the image is optional (SPEC §21): without it, agent-runner's helper
/// lists the files a run changed, and the copy transport commits the work on this
/// machine; only the orchestrator's `isolation: clone` bundles its branch with the
/// image's git.
fn git_in_image(docker: &Docker, target: &Target) -> Check {
    let what = GIT_IN_IMAGE;
    match docker.probe(target, None, "git --version") {
        Ok(out) if out.ok => Check::ok(what, first_line(&out.stdout)),
        Ok(out) => Check::warn(
            what,
            match out.code {
                Some(127) => "no `git` on the image's PATH: runs list their changed files with \
                              agent-runner's helper, and the copy transport commits the work \
                              on this machine"
                    .to_string(),
                _ => format!("`git --version` failed: {}", last_line(&out.stderr)),
            },
            "only the orchestrator's `isolation: clone` needs git in the image (its branch is \
             bundled there): add git to the image for it",
        ),
        Err(reason) => Check::fail(what, reason, "install the Docker CLI"),
    }
}

/// The test command's program on the image's PATH, as the preflight of a run looks
/// for it (SPEC §21); with a `task.setup`, setup may still install it.
fn program_in_image(docker: &Docker, target: &Target, program: &str, setup: bool) -> Check {
    let what = TEST_PROGRAM;
    let mut spec = Spec::new(
        &target.image,
        Main::shell(FIND_PROGRAM, ["sh".to_string(), program.to_string()]),
    );
    spec.network = Net::from(target.network);
    spec.as_user = true;
    match docker.start(&spec) {
        Ok(out) if out.stdout.contains(FOUND) => {
            Check::ok(what, format!("`{program}` is on the image's PATH"))
        }
        Ok(out) if out.stdout.contains(MISSING) && setup => Check::ok(
            what,
            format!(
                "`{program}` is not in image {}; task.setup must install it (checked before the first paid call)",
                target.image
            ),
        ),
        Ok(out) if out.stdout.contains(MISSING) => Check::fail(
            what,
            missing_program(program, &target.image),
            "install it in the image (your own docker_image) or in task.setup",
        ),
        Ok(out) => Check::fail(
            what,
            format!(
                "the image could not look for `{program}`: {}",
                last_line(&out.stderr)
            ),
            "the image needs /bin/sh",
        ),
        Err(reason) => Check::fail(what, reason, "install the Docker CLI"),
    }
}

/// The daemon knows `runner.sandbox.runtime` (SPEC §28).
fn runtime_known(runtime: &str) -> Check {
    match agent_runner_sandbox::backend::runtime::check(runtime, CLI_TIMEOUT) {
        Ok(detail) => Check::ok(RUNTIME, detail),
        Err(why) => Check::fail(
            RUNTIME,
            why,
            "gVisor: apt-get install runsc, then add {\"runtimes\": {\"runsc\": {\"path\": \"/usr/bin/runsc\"}}} to /etc/docker/daemon.json and reload dockerd (kill -HUP)",
        ),
    }
}

/// A stdio MCP server's command is on the image's PATH (or the absolute path of a
/// program in it), as the preflight will check before the first paid call.
fn mcp_command_in_image(docker: &Docker, target: &Target, name: &str, command: &str) -> Check {
    let what = format!("MCP server {name}");
    let mut spec = Spec::new(
        &target.image,
        Main::shell(FIND_PROGRAM, ["sh".to_string(), command.to_string()]),
    );
    spec.network = Net::from(target.network);
    spec.as_user = true;
    spec.runtime = target.runtime.clone();
    match docker.start(&spec) {
        Ok(out) if out.stdout.contains(FOUND) => {
            Check::ok(what, format!("`{command}` is in image {}", target.image))
        }
        Ok(out) if out.stdout.contains(MISSING) => Check::fail(
            what,
            agent_runner_sandbox::worker::missing_mcp(name, command, &target.image),
            "install it in the image (your own docker_image) or in task.setup",
        ),
        Ok(out) => Check::fail(
            what,
            format!(
                "the image could not look for `{command}`: {}",
                last_line(&out.stderr)
            ),
            "the image needs /bin/sh",
        ),
        Err(reason) => Check::fail(what, reason, "install the Docker CLI"),
    }
}

/// A file the container writes in a bind-mounted directory belongs to the invoking
/// user, as the worker's files in the repository must.
fn file_ownership(docker: &Docker, target: &Target) -> Check {
    let what = FILE_OWNERSHIP;
    let dir = std::env::temp_dir().join(format!("agent-runner-doctor-{}", uuid::Uuid::new_v4()));
    if let Err(e) = std::fs::create_dir(&dir) {
        return Check::fail(
            what,
            format!("cannot create {}: {e}", dir.display()),
            "make TMPDIR a writable directory",
        );
    }
    let check = ownership_in(docker, target, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    check
}

fn ownership_in(docker: &Docker, target: &Target, dir: &Path) -> Check {
    let what = FILE_OWNERSHIP;
    let (uid, gid) = sys::user_and_group();
    let script = format!("echo probe > {PROBE_FILE}");
    let out = match docker.probe(target, Some(dir), &script) {
        Ok(out) => out,
        Err(reason) => return Check::fail(what, reason, "install the Docker CLI"),
    };
    if !out.ok {
        return Check::fail(
            what,
            format!(
                "the container could not write to a bind mount as {}: {}",
                user_description(),
                last_line(&out.stderr)
            ),
            "the daemon must be able to bind-mount local directories (SELinux, rootless \
             Docker or a remote DOCKER_HOST can prevent it)",
        );
    }
    match std::fs::metadata(dir.join(PROBE_FILE)) {
        Ok(meta) if (meta.uid(), meta.gid()) == (uid, gid) => Check::ok(
            what,
            format!("files the container writes belong to {uid}:{gid} (you)"),
        ),
        Ok(meta) => Check::fail(
            what,
            format!(
                "a file the container wrote belongs to {}:{}, not to you ({uid}:{gid})",
                meta.uid(),
                meta.gid()
            ),
            "user-namespace remapping (userns-remap) or rootless Docker shifts owners; run \
             agent-runner where the daemon keeps uids as they are",
        ),
        Err(_) => Check::fail(
            what,
            format!("the file the container wrote is not in {}", dir.display()),
            "the daemon runs on another machine (DOCKER_HOST): the repository must be on the \
             daemon's machine",
        ),
    }
}

fn agent_auth(agent: &Agent) -> Check {
    let program = agent.kind.program();
    let what = format!("{program} auth");
    let rule = agent.kind.login_rule();
    match &agent.auth {
        AuthSource::File(path) => Check::ok(
            what,
            format!("{} (mounted read-only into the container)", path.display()),
        ),
        AuthSource::HostKey => Check::ok(
            what,
            format!("{} is set (passed to {program} by name)", rule.key_var),
        ),
        AuthSource::TaskEnv(setting, var) => Check::ok(what, format!("{setting} sets {var}")),
        AuthSource::None => Check::fail(
            what,
            format!("no ~/{} and no {}", rule.file, rule.key_var),
            rule.how,
        ),
    }
}

/// A bare GET of the base URL: any HTTP answer means reachable. No key is sent.
fn meta_endpoint(target: &Target, interrupt: Interrupt) -> Check {
    let what = "Meta endpoint";
    let Some(url) = target.meta_url.as_deref() else {
        return Check::ok(
            what,
            if target.meta_in_sandbox {
                "Meta runs codex in the sandbox image (runner.meta.kind: codex-cli; checked above)"
            } else {
                "scripted Meta (runner.meta.kind: scripted) needs none"
            },
        );
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(HTTP_TIMEOUT))
        .http_status_as_error(false)
        .user_agent(concat!(
            "agent-runner/",
            env!("CARGO_PKG_VERSION"),
            " doctor"
        ))
        .build()
        .into();
    // On its own thread, so an interrupt need not wait for the answer.
    let (sender, receiver) = mpsc::channel();
    let target = url.to_string();
    std::thread::spawn(move || {
        let answer = agent
            .get(&target)
            .call()
            .map(|response| response.status().as_u16())
            .map_err(|e| e.to_string());
        let _ = sender.send(answer);
    });
    let answer = loop {
        match receiver.recv_timeout(process::TICK) {
            Ok(answer) => break answer,
            Err(mpsc::RecvTimeoutError::Timeout) if interrupt.is_set() => {
                break Err("interrupted".to_string());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err("the request thread died".to_string());
            }
        }
    };
    match answer {
        Ok(status) => Check::ok(what, format!("{url} answers (HTTP {status}; no key sent)")),
        Err(e) => Check::fail(
            what,
            format!("{url}: {e}"),
            "check runner.meta.base_url (or OPENAI_BASE_URL), the network, and HTTPS_PROXY",
        ),
    }
}

/// `uid:gid` or `root`, as the sandbox would run.
fn user_description() -> String {
    match sys::user_and_group() {
        (0, _) => "root".to_string(),
        (uid, gid) => format!("{uid}:{gid}"),
    }
}

/// The version in `codex-cli 0.169.0` (or the first version-looking word).
fn version_of(output: &str) -> Option<&str> {
    output.split_whitespace().find(|word| {
        word.split('.').count() >= 2
            && word
                .split('.')
                .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
    })
}

fn first_line(text: &str) -> String {
    one_line(&cut(
        text.lines().find(|l| !l.trim().is_empty()).unwrap_or(""),
        200,
    ))
}

fn last_line(text: &str) -> String {
    let line = text.lines().rev().find(|l| !l.trim().is_empty());
    line.map_or("(no error output)".to_string(), |l| {
        one_line(&cut(l.trim(), 300))
    })
}

/// What a docker command did.
struct DockerOutput {
    ok: bool,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl DockerOutput {
    /// `out` of a call limited to `wall`, its ending told in `stderr`.
    fn of(out: Output, wall: Duration) -> DockerOutput {
        let stderr = match out.ending {
            Ending::TimedOut => format!("no answer within {} s", wall.as_secs()),
            Ending::Interrupted => "interrupted".to_string(),
            _ => out.stderr,
        };
        DockerOutput {
            ok: out.ok,
            code: out.code,
            stdout: out.stdout,
            stderr,
        }
    }
}

/// Why a docker call of a check could not run at all (its output is the check's
/// subject otherwise).
#[derive(Debug, thiserror::Error)]
enum Unrun {
    #[error(transparent)]
    Cli(#[from] agent_runner_core::Error),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// Docker CLI calls through the sandbox's backend, each with a wall-clock limit.
struct Docker {
    backend: std::sync::Arc<dyn Backend>,
    interrupt: Interrupt,
}

impl Docker {
    /// `docker <args>`; Err when docker cannot be started at all.
    fn run(&self, args: &[&str], wall: Duration) -> Result<DockerOutput, Unrun> {
        Ok(docker_cli::run(args, wall, self.interrupt).map(|out| DockerOutput::of(out, wall))?)
    }

    /// `script` in a throw-away container of the target image, started like the
    /// sandbox's (`/bin/sh` entrypoint, the task's network, its seccomp profile,
    /// `--user uid:gid` with a writable HOME when not root), with `dir` mounted as
    /// the working directory.
    fn probe(
        &self,
        target: &Target,
        dir: Option<&Path>,
        script: &str,
    ) -> Result<DockerOutput, Unrun> {
        let mut spec = Spec::new(&target.image, Main::shell(script, []));
        spec.network = Net::from(target.network);
        spec.as_user = true;
        if let Some(dir) = dir {
            spec.mounts = vec![Mount::new(dir, PROBE_DIR, false)];
            spec.workdir = Some(PROBE_DIR.into());
        }
        self.start(&spec)
    }

    /// Runs `spec` to its end within `CONTAINER_TIMEOUT`.
    fn start(&self, spec: &Spec) -> Result<DockerOutput, Unrun> {
        Ok(self
            .backend
            .run_once(spec, CONTAINER_TIMEOUT, self.interrupt)
            .map(|out| DockerOutput::of(out, CONTAINER_TIMEOUT))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_found_in_codex_output() {
        assert_eq!(version_of("codex-cli 0.169.0\n"), Some("0.169.0"));
        assert_eq!(
            version_of("codex-cli 0.169.0 (agent-runner test fake)"),
            Some("0.169.0")
        );
        assert_eq!(version_of("codex 1.2"), Some("1.2"));
        assert_eq!(version_of("codex-cli dev"), None);
        assert_eq!(version_of("v0.1.x 1."), None);
    }

    #[test]
    fn the_pinned_versions_are_the_ones_the_image_installs() {
        let build = include_str!("../../../sandbox/build.sh");
        for kind in agent::KINDS {
            let pinned = kind.pinned();
            assert!(
                build.contains(&format!("\n{}={}\n", pinned.build_var, pinned.version)),
                "sandbox/build.sh pins another {} version than doctor checks for",
                kind.program()
            );
        }
    }

    #[test]
    fn lines_show_status_what_detail_and_hint() {
        assert_eq!(
            Check::ok("docker CLI", "Docker version 28").line(),
            "ok    docker CLI: Docker version 28"
        );
        assert_eq!(
            Check::fail("codex auth", "none", "run `codex login`").line(),
            "FAIL  codex auth: none (fix: run `codex login`)"
        );
        assert_eq!(
            Check::skipped("git in the image", "the image").line(),
            "skip  git in the image: not checked: needs the image"
        );
    }

    #[test]
    fn a_key_in_the_task_env_counts_as_auth_only_without_a_better_one() {
        let file = Login::File {
            path: PathBuf::from("/h/.codex/auth.json"),
            secrets: vec![],
            modes: vec![],
        };
        let env = Some(("runner.worker.env", "CODEX_API_KEY"));
        assert_eq!(
            auth_source(&file, env),
            AuthSource::File(PathBuf::from("/h/.codex/auth.json"))
        );
        assert_eq!(
            auth_source(&Login::None, env),
            AuthSource::TaskEnv("runner.worker.env", "CODEX_API_KEY")
        );
        assert_eq!(auth_source(&Login::None, None), AuthSource::None);
    }

    #[test]
    fn a_claude_login_token_in_the_task_env_is_a_login() {
        let task = agent_runner_settings::task::test_task(
            "runner:\n  worker:\n    kind: claude-code-cli\n    env: {CLAUDE_CODE_OAUTH_TOKEN: tok}\n",
        );
        let target = Target::of_task(&task);
        assert_eq!(
            target.agents[0].auth,
            AuthSource::TaskEnv("runner.worker.env", "CLAUDE_CODE_OAUTH_TOKEN")
        );
        assert_eq!(
            agent_auth(&target.agents[0]).detail,
            "runner.worker.env sets CLAUDE_CODE_OAUTH_TOKEN"
        );
        let task =
            agent_runner_settings::task::test_task("runner:\n  worker: {kind: claude-code-cli}\n");
        assert_eq!(Target::of_task(&task).agents[0].auth, AuthSource::None);
    }

    #[test]
    fn defaults_follow_openai_base_url() {
        let target = Target::defaults(
            &|name| (name == "OPENAI_BASE_URL").then(|| "http://proxy.local/v1".to_string()),
            &Login::None,
        );
        assert_eq!(target.meta_url.as_deref(), Some("http://proxy.local/v1"));
        assert_eq!(target.image, DEFAULT_DOCKER_IMAGE);
        assert_eq!(target.network, Network::Allowlist);
        assert_eq!(
            Target::defaults(&|_| None, &Login::None)
                .meta_url
                .as_deref(),
            Some(DEFAULT_BASE_URL)
        );
    }

    #[test]
    fn each_agent_a_task_uses_is_checked_once() {
        let task = agent_runner_settings::task::test_task(
            "runner:\n  meta: {kind: codex-cli}\n  worker: {kind: claude-code-cli}\n",
        );
        let target = Target::of_task(&task);
        let programs: Vec<&str> = target.agents.iter().map(|a| a.kind.program()).collect();
        assert_eq!(programs, ["claude", "codex"]);
        assert_eq!(target.meta_url, None);
        let task = agent_runner_settings::task::test_task("runner:\n  meta: {kind: codex-cli}\n");
        assert_eq!(Target::of_task(&task).agents.len(), 1, "the worker's codex");
        let task = agent_runner_settings::task::test_task(
            "runner:\n  meta: {kind: codex-cli, docker_image: 'meta:1'}\n",
        );
        let target = Target::of_task(&task);
        assert_eq!(
            in_image(&target.agents[1], &target),
            "codex in image meta:1"
        );
    }
}
