//! The Task YAML exactly as written, in its two shapes. No defaults, no checks beyond
//! types and unknown keys: that is `Task`'s job.
//!
//! Each raw struct is declared once, through `raw_section!`, which also emits a table
//! of its keys (name, kind of value, shape, doc). The structure check walks the
//! document with these tables, and the TaskConfig JSON Schema is generated from them,
//! so the parser, the checks and the schema cannot drift apart.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_norway::Value;

use super::Shape;

/// What a key's value must be.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A string (a plain number or boolean is read as its text, as serde_norway does).
    Text,
    /// A non-negative integer.
    Integer,
    /// A number.
    Number,
    /// true or false.
    Boolean,
    /// A non-negative integer (bytes) or a string such as `512m`.
    Size,
    /// Anything; checked by value later (`version`).
    Any,
    /// A list of strings.
    TextList,
    /// A mapping of strings to strings.
    TextMap,
    /// A mapping with these keys.
    Section(&'static [Key]),
    /// A mapping of names (chosen by the user, e.g. model names) to mappings with
    /// these keys.
    Map(&'static [Key]),
}

/// One key of a section.
#[derive(Debug)]
pub(crate) struct Key {
    /// The Rust field name; `r#type` for `type`.
    field: &'static str,
    pub(crate) kind: Kind,
    /// Set when the key belongs to one shape only: that shape, and the hint given
    /// when the key is used in the other one.
    pub(crate) only: Option<(Shape, &'static str)>,
    /// The field's doc comment.
    pub(crate) doc: &'static str,
}

impl Key {
    /// The key as written in YAML.
    pub(crate) fn name(&self) -> &'static str {
        self.field.trim_start_matches("r#")
    }

    /// Whether the key may be used in `shape`.
    pub(crate) fn allowed_in(&self, shape: Shape) -> bool {
        self.only.is_none_or(|(only, _)| only == shape)
    }
}

/// Declares a raw struct (every field optional, unknown fields denied) and the table
/// of its keys: `field: RustType = Kind [, only Shape "hint"];`.
macro_rules! raw_section {
    (
        $(#[doc = $sdoc:literal])*
        $name:ident, $table:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $ty:ty = $kind:expr $(, only $shape:ident $hint:literal)? ;
            )*
        }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct $name {
            $( $(#[doc = $doc])* pub $field: Option<$ty>, )*
        }

        #[doc = concat!("The keys of [`", stringify!($name), "`].")]
        pub(crate) const $table: &[Key] = &[
            $(
                Key {
                    field: stringify!($field),
                    kind: $kind,
                    only: raw_section!(@only $($shape $hint)?),
                    doc: concat!($($doc, "\n",)*),
                },
            )*
        ];
    };
    (@only) => { None };
    (@only $shape:ident $hint:literal) => { Some((Shape::$shape, $hint)) };
}

raw_section! {
    /// Shape v1 (`version: 1`, SPEC §3.1).
    RawTaskV1, V1 {
        /// Must be 1.
        version: Value = Kind::Any;
        task: RawTaskSection = Kind::Section(TASK_V1);
        runner: RawRunner = Kind::Section(RUNNER);
    }
}

raw_section! {
    /// `task:` of shape v1.
    RawTaskSection, TASK_V1 {
        /// Names the Task Note and the container: [A-Za-z0-9][A-Za-z0-9._-]{0,127}, without `..`, not ending in `.` or `.lock`.
        id: String = Kind::Text;
        /// One line, shown in the note; default: the id.
        title: String = Kind::Text;
        /// The repository; relative to the current directory.
        repo: String = Kind::Text;
        prd: RawPrd = Kind::Section(PRD);
        test: RawTest = Kind::Section(TEST);
        setup: RawSetup = Kind::Section(SETUP);
        /// The acceptance criteria (at most 50), one sentence each; when given, Meta does not plan them.
        acceptance_criteria: Vec<String> = Kind::TextList;
    }
}

raw_section! {
    /// `task.prd`: exactly one of `path` and `text`.
    RawPrd, PRD {
        /// PRD file, relative to the current directory.
        path: String = Kind::Text;
        /// The PRD inline.
        text: String = Kind::Text;
    }
}

raw_section! {
    /// `task.test` (both shapes).
    RawTest, TEST {
        /// Shell command run in the sandbox after each worker run; completion requires exit 0.
        command: String = Kind::Text;
        /// Directory inside the repository, relative to it; default: the repository root.
        cwd: String = Kind::Text;
        /// A test run longer than this many seconds fails; default 600.
        timeout_sec: u64 = Kind::Integer;
    }
}

raw_section! {
    /// `task.setup` (both shapes): run once in each new sandbox before the first paid call.
    RawSetup, SETUP {
        /// Shell command run as the worker's user in the repository (pip install, npm ci, ...); exit 0 required.
        command: String = Kind::Text;
        /// A setup longer than this many seconds fails the task; default 600.
        timeout_sec: u64 = Kind::Integer;
        /// With network allowlist: hosts setup may reach besides runner.worker.allow (the worker may not).
        allow: Vec<String> = Kind::TextList;
        /// Variables only setup sees (env:VAR from the host, or a literal); never the worker's nor the tests'.
        env: BTreeMap<String, String> = Kind::TextMap;
    }
}

raw_section! {
    /// `runner:`, shared by both shapes.
    RawRunner, RUNNER {
        meta: RawMeta = Kind::Section(META);
        worker: RawWorker = Kind::Section(WORKER);
        /// Prices in USD per million tokens, by model: {input, cached_input, output}.
        pricing: BTreeMap<String, RawPrice> = Kind::Map(PRICE);
        budget: RawBudget = Kind::Section(BUDGET);
        /// Loops in a row that leave the repository and the test outcome as they were before the task fails; 0: never; default 3.
        max_stalled_loops: u64 = Kind::Integer;
        sandbox: RawSandbox = Kind::Section(SANDBOX);
    }
}

raw_section! {
    /// `runner.sandbox`: where and how the sandbox runs (SPEC §22).
    RawSandbox, SANDBOX {
        /// The Docker host: a URL (unix://, tcp:// to the loopback, ssh://) or a docker context's name; default: DOCKER_HOST or the current context.
        host: String = Kind::Text;
        /// How the repository gets in and the work out: copy (default when the docker daemon is not this machine's unix socket; the work comes back as the branch agent-runner/<id>) or bind (default locally: the repository mounted in place).
        transport: String = Kind::Text;
        /// The container runtime the daemon runs the sandbox with (docker run --runtime), such as runsc (gVisor); default: the daemon's.
        runtime: String = Kind::Text;
    }
}

raw_section! {
    /// One model's entry in `runner.pricing`, in USD per million tokens.
    RawPrice, PRICE {
        input: f64 = Kind::Number;
        /// Input read from the provider's cache; default: the input price.
        cached_input: f64 = Kind::Number;
        /// Input written to the provider's cache (Anthropic's cache_creation_input_tokens); default: the input price.
        cache_write: f64 = Kind::Number;
        output: f64 = Kind::Number;
    }
}

raw_section! {
    /// `runner.budget`: limits for the whole task, each optional.
    RawBudget, BUDGET {
        /// Input plus output tokens of Meta and the worker together.
        max_tokens: u64 = Kind::Integer;
        /// Needs a price in runner.pricing for every model that runs.
        max_cost_usd: f64 = Kind::Number;
        /// Wall time of the whole task; every step's own limit is cut to the time left.
        max_duration_sec: u64 = Kind::Integer;
    }
}

raw_section! {
    /// `runner.meta`.
    RawMeta, META {
        /// openai-responses (default), openai-chat (default when base_url names another host), anthropic-messages, codex-cli or scripted.
        kind: String = Kind::Text;
        /// The Meta model (codex's -m with kind codex-cli); on openai-responses an effort suffix (-high) is split off as reasoning_effort.
        model: String = Kind::Text;
        /// The API's base URL; default: OPENAI_BASE_URL or https://api.openai.com/v1 (openai-*), ANTHROPIC_BASE_URL or https://api.anthropic.com (anthropic-messages).
        base_url: String = Kind::Text;
        /// env:VAR or the key; default env:OPENAI_API_KEY (openai-*), env:ANTHROPIC_API_KEY (anthropic-messages).
        api_key: String = Kind::Text;
        /// minimal, low, medium, high or xhigh: reasoning.effort (Responses), reasoning_effort (Chat), a thinking budget (Anthropic: low, medium, high).
        reasoning_effort: String = Kind::Text;
        /// More request headers, NAME: env:VAR or a literal (Azure's api-key, a gateway's token); masked like keys.
        headers: BTreeMap<String, String> = Kind::TextMap;
        /// openai-chat: hold replies to their JSON Schema (response_format json_schema) instead of the YAML text protocol.
        structured: bool = Kind::Boolean;
        /// Sampling temperature for Meta, 0 to 2.
        temperature: f64 = Kind::Number;
        system_prompt: String = Kind::Text;
        max_loops: u64 = Kind::Integer;
        /// How often Meta may replace the acceptance criteria during a run (`replan`); default 2, 0 = never.
        max_replans: u64 = Kind::Integer;
        /// Stop after plan_task, awaiting_approval, before any sandbox starts (SPEC §23); default false.
        approve_plan: bool = Kind::Boolean;
        timeout_sec: u64 = Kind::Integer;
        script: String = Kind::Text;
        /// kind codex-cli: the image Meta's codex runs in; default: the worker's.
        docker_image: String = Kind::Text;
        /// kind codex-cli: more `codex exec` arguments; default: the worker's when it is codex.
        extra_args: Vec<String> = Kind::TextList;
        /// kind codex-cli: Meta's codex's variables; default: the worker's when it is codex.
        env: BTreeMap<String, String> = Kind::TextMap;
    }
}

raw_section! {
    /// `runner.worker`; `kind` belongs to shape v1 and `type` to TaskConfig.
    RawWorker, WORKER {
        /// The agent: codex-cli (default) or claude-code-cli.
        kind: String = Kind::Text, only V1 "did you mean `type: docker_codex_cli`? (`kind` belongs to shape v1)";
        /// The worker: docker_codex_cli or docker_claude_code_cli.
        r#type: String = Kind::Text, only TaskConfig "did you mean `kind`? (`type` belongs to the TaskConfig shape)";
        docker_image: String = Kind::Text;
        /// Where the agent comes from: auto (default: the image's own on PATH, else agent-runner's tools volume), tools or image.
        agent_from: String = Kind::Text;
        max_run_time_sec: u64 = Kind::Integer;
        /// The agent's model (codex -m, claude --model); default: the agent's own.
        model: String = Kind::Text;
        extra_args: Vec<String> = Kind::TextList;
        /// The agent's model API base URL (claude: ANTHROPIC_BASE_URL; codex: openai_base_url).
        base_url: String = Kind::Text;
        idle_timeout_sec: u64 = Kind::Integer;
        /// allowlist (default: no network but agent-runner's egress proxy), none, bridge or host.
        network: String = Kind::Text;
        /// With network allowlist: the hosts the worker may reach (host, host:port, *.suffix[:port], host:*); default: what the worker needs for its model.
        allow: Vec<String> = Kind::TextList;
        env: BTreeMap<String, String> = Kind::TextMap;
        limits: RawLimits = Kind::Section(LIMITS);
        /// Absolute paths in the sandbox kept in a Docker volume per repository and path (pip, npm, cargo caches); [] for none.
        caches: Vec<String> = Kind::TextList;
        /// Bring-back keeps untracked build caches (__pycache__/, node_modules/, target/, …) in the branch; default: left out.
        keep_untracked: bool = Kind::Boolean;
        /// MCP servers the agent is given, by name: {command, args, env} (run in the sandbox) or {url, headers} (its host joins the allow list); env and header values env:VAR or literal, masked.
        mcp_servers: BTreeMap<String, RawMcpServer> = Kind::Map(MCP_SERVER);
    }
}

raw_section! {
    /// One entry of `runner.worker.mcp_servers` (SPEC §28): `command` or `url`.
    RawMcpServer, MCP_SERVER {
        /// A program in the image or the tools volume that speaks MCP on stdio; the preflight looks for it.
        command: String = Kind::Text;
        args: Vec<String> = Kind::TextList;
        /// The server's variables: env:VAR from the host (a secret), or a literal.
        env: BTreeMap<String, String> = Kind::TextMap;
        /// A remote server (streamable HTTP): http:// or https://.
        url: String = Kind::Text;
        /// Request headers of a remote server: env:VAR or a literal; masked.
        headers: BTreeMap<String, String> = Kind::TextMap;
    }
}

raw_section! {
    /// `runner.worker.limits`: resources of the container.
    RawLimits, LIMITS {
        /// Bytes, or a number with b, k, m or g.
        memory: Value = Kind::Size;
        cpus: f64 = Kind::Number;
        pids: u64 = Kind::Integer;
    }
}

raw_section! {
    /// Shape "TaskConfig" (the IDE pipeline, SPEC §3.2): no `version` key.
    RawTaskConfig, TASK_CONFIG {
        task: RawTaskConfigSection = Kind::Section(TASK_TASK_CONFIG);
        runner: RawRunner = Kind::Section(RUNNER);
    }
}

raw_section! {
    /// `task:` of the TaskConfig shape.
    RawTaskConfigSection, TASK_TASK_CONFIG {
        /// Names the Task Note and the container: [A-Za-z0-9][A-Za-z0-9._-]{0,127}, without `..`, not ending in `.` or `.lock`.
        id: String = Kind::Text;
        /// One line, shown in the note.
        title: String = Kind::Text;
        /// What to build: the PRD text.
        instructions: String = Kind::Text;
        project: RawProject = Kind::Section(PROJECT);
        test: RawTest = Kind::Section(TEST);
        setup: RawSetup = Kind::Section(SETUP);
        /// The acceptance criteria (at most 50), one sentence each; when given, Meta does not plan them.
        acceptance_criteria: Vec<String> = Kind::TextList;
    }
}

raw_section! {
    /// `task.project` of the TaskConfig shape.
    RawProject, PROJECT {
        /// The repository directory (absolute, or relative to the current directory).
        root_dir: String = Kind::Text;
    }
}

/// The keys of a shape's root.
pub(crate) fn root_keys(shape: Shape) -> &'static [Key] {
    match shape {
        Shape::V1 => V1,
        Shape::TaskConfig => TASK_CONFIG,
    }
}
