//! A throw-away workspace for pipeline tests: a project directory (optionally a git
//! repository with one commit), its own AGENT_RUNNER_HOME, scripted Task Builder and
//! Meta replies, and the test worker image.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::docker::TEST_IMAGE;
use super::{Run, Scratch};

/// A builder reply that leaves everything to the orchestrator's invariants.
pub const BUILDER_REPLY: &str = "- type: build_task_config\n  task:\n    id: chosen-by-the-llm\n    title: A title the LLM made up\n    instructions: |\n      Implement what the user asked; technology and checks are up to you.\n    project:\n      root_dir: /somewhere/else\n  runner:\n    meta:\n      model: gpt-4.1\n      temperature: 0.2\n    worker:\n      type: docker_codex_cli\n";

/// Runner Meta replies: plan, one worker run doing `directives`, assessment passed.
/// Runner Meta replies that complete without a worker run (no container): fast.
pub const QUICK_META: &str = "- type: plan_task\n  acceptance_criteria: [{id: AC-1, description: nothing to do}]\n- type: next_action\n  decision: {action: mark_complete, reason: nothing to do}\n- type: completion_assessment\n  summary: Nothing needed doing.\n  details: {passed_criteria: [AC-1]}\n";

/// Host git in `dir` (as root, on repositories of any owner): whether it succeeded
/// and its stdout.
pub fn try_git(dir: &Path, args: &[&str]) -> (bool, String) {
    let mut all = vec!["-c", "safe.directory=*", "-C", dir.to_str().unwrap()];
    all.extend(args);
    let out = Run::program("git", &all).output();
    (out.code == Some(0), out.stdout)
}

/// Commits what is staged in `dir`, as a test user.
pub fn commit(dir: &Path, message: &str) {
    git(
        dir,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@localhost",
            "commit",
            "-qm",
            message,
        ],
    );
}

/// Host git in `dir` that must succeed; its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let (ok, out) = try_git(dir, args);
    assert!(ok, "git {args:?} in {} failed", dir.display());
    out
}

pub fn meta_script(directives: &str) -> String {
    let prompt: String = directives.lines().map(|l| format!("      {l}\n")).collect();
    format!(
        "- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: the work is done\n- type: next_action\n  decision: {{action: run_worker, reason: start}}\n  worker_call:\n    worker_type: codex-cli\n    mode: exec\n    prompt: |\n      Do the work.\n{prompt}- type: completion_assessment\n  summary: The work is done and checked.\n  details: {{passed_criteria: [AC-1]}}\n"
    )
}

pub struct Pipeline {
    pub scratch: Scratch,
    /// The project directory (canonical).
    pub root: PathBuf,
    pub home: PathBuf,
}

impl Pipeline {
    /// A workspace whose root is a git repository with one commit (`git`), or a
    /// plain directory.
    pub fn new(name: &str, git: bool) -> Self {
        Pipeline::new_in(&std::env::temp_dir(), name, git)
    }

    /// `new`, under `dir` (a remote host's shared directory).
    pub fn new_in(dir: &Path, name: &str, git: bool) -> Self {
        let scratch = Scratch::new_in(dir, name);
        let root = scratch.path.join("project");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(
            root.join("README.md"),
            "# Project\n\nA project for tests.\n",
        )
        .unwrap();
        if git {
            self::git(&root, &["init", "-q"]);
            self::git(&root, &["add", "README.md"]);
            commit(&root, "init");
        }
        let home = scratch.path.join("home");
        Pipeline {
            root,
            home,
            scratch,
        }
    }

    /// Writes the builder and Meta scripts and `extra` defaults, then `workspace init
    /// --defaults`. Attempts need no test (`require_test: false`) unless `extra` says.
    pub fn init(&self, builder: &str, meta: &str, extra: &str) -> &Self {
        self.scratch.file("builder.yaml", builder);
        self.scratch.file("meta.yaml", meta);
        let require = if extra.contains("require_test") {
            ""
        } else {
            "require_test: false\n"
        };
        let defaults = format!(
            "{require}builder: {{kind: scripted, script: builder.yaml}}\nrunner:\n  meta: {{kind: scripted, script: meta.yaml}}\n  worker: {{docker_image: \"{TEST_IMAGE}\", network: none}}\n{extra}"
        );
        self.init_with("defaults.yaml", &defaults)
    }

    /// Writes `defaults` into the scratch file `name`, then `workspace init --defaults`.
    pub fn init_with(&self, name: &str, defaults: &str) -> &Self {
        let file = self.scratch.file(name, defaults);
        self.cmd(&[
            "workspace",
            "init",
            self.root.to_str().unwrap(),
            "--defaults",
            file.to_str().unwrap(),
        ])
        .output()
        .code(0);
        self
    }

    /// The binary with this workspace's home.
    pub fn cmd(&self, args: &[&str]) -> Run {
        Run::new(args).env("AGENT_RUNNER_HOME", &self.home)
    }

    /// `args` with `-w <root>` after the subcommand words given in `words`.
    pub fn in_ws(&self, words: &[&str], rest: &[&str]) -> Run {
        let mut args: Vec<&str> = words.to_vec();
        args.extend(["-w", self.root.to_str().unwrap()]);
        args.extend(rest);
        self.cmd(&args)
    }

    /// The workspace metadata directory.
    pub fn ws(&self) -> PathBuf {
        let dir = self.home.join("workspaces");
        let entry = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .next()
            .expect("a workspace");
        entry.path()
    }

    pub fn new_task(&self, id: &str, prompt: &str) -> String {
        let out = self.in_ws(&["task", "new"], &["--id", id, prompt]).output();
        out.code(0);
        out.stdout.trim().to_string()
    }

    /// Creates task `id` depending on `deps`: `task new`, then an `update` line, as a
    /// plan writes one.
    pub fn new_task_after(&self, id: &str, deps: &[&str]) {
        self.new_task(id, &format!("Task {id}"));
        if deps.is_empty() {
            return;
        }
        let update = serde_json::json!(
            {"type": "update", "at": "2026-01-01T00:00:00.000Z", "depends_on": deps}
        );
        let file = self.ws().join(format!("tasks/{id}.jsonl"));
        std::fs::write(&file, format!("{}{update}\n", read(&file))).unwrap();
    }

    /// Enqueues `ids`; the job ids.
    pub fn run_tasks(&self, ids: &[&str]) -> Vec<String> {
        let out = self.in_ws(&["task", "run"], ids).output();
        out.code(0);
        out.stdout.lines().map(str::to_string).collect()
    }

    /// `orchestrate --once` and `extra`.
    pub fn orchestrate_once(&self, extra: &[&str]) -> Run {
        let mut rest = vec!["--once"];
        rest.extend(extra);
        self.in_ws(&["orchestrate"], &rest)
    }

    /// The attempt lines of task `id`.
    pub fn attempts(&self, id: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.ws().join(format!("tasks/{id}.jsonl"))).unwrap();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["type"] == "attempt")
            .collect()
    }

    /// `ipc/results/<job>.json`.
    pub fn result(&self, job: &str) -> Value {
        let path = self.ws().join(format!("ipc/results/{job}.json"));
        serde_json::from_slice(
            &std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        )
        .unwrap()
    }

    /// `task show --json`.
    pub fn show(&self, id: &str) -> Value {
        let out = self.in_ws(&["task", "show"], &[id, "--json"]).output();
        out.code(0);
        serde_json::from_str(&out.stdout).unwrap()
    }

    /// Names in an IPC directory (`queue`, `running`, `results`, `failed`).
    pub fn ipc(&self, dir: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.ws().join("ipc").join(dir))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

/// A unique task id for container-leak checks.
pub fn task_id(name: &str) -> String {
    format!("{name}-{}", super::short_id())
}

/// Waits until `ready` holds, at most `limit`.
pub fn wait_for(limit: Duration, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < until, "timed out waiting");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Pids of the children of `parent` (from /proc).
pub fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(parent) && fields[0] != "Z" {
            out.push(pid);
        }
    }
    out
}

/// True while process `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .is_some_and(|i| !s[i + 1..].trim_start().starts_with('Z'))
    })
}

/// Text of a file, or empty.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
