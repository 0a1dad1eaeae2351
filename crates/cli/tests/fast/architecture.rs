//! Rules of the source tree that no compiler checks. (The layers are crates: Cargo
//! refuses a dependency the other way round, so the runner cannot import the
//! pipeline, nor meta the runner.)
//!
//! Untrusted files have one home, `crates/core/src/fs/`: no other module opens with
//! `O_NOFOLLOW`, calls `open`/`openat` itself, creates with `O_EXCL` or takes a file
//! lock (`File::lock` and its kin: clippy.toml), so the rule "never follow a symlink, never block on a FIFO, never leave the
//! directory" cannot grow a second, weaker copy.
//!
//! The crates depend on each other in the order the workspace's Cargo.toml draws,
//! and a crate's modules do not import each other round, neither at the top (the
//! pipeline's `store` ← `queue` ← `orchestrator` ← …) nor between the files of one
//! module (`backend::copy`, `backend::carrier`): a circle cannot be read, tested or
//! moved one module at a time.
//!
//! Only `crates/sandbox/src/backend/` calls the docker CLI (`docker_cli`): a new
//! engine is a file there, not an edit in every caller.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace's top directory.
fn top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The crates under `top/crates/`, by directory name, each with its `src/`.
fn crates(top: &Path) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(top.join("crates"))
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.path().join("src"),
            )
        })
        .collect();
    found.sort();
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source with comments, strings and char literals blanked out (so a path in a
/// doc comment or a message is not an import), `#[cfg(test)]` blocks removed.
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(b.len(), |n| i + n);
            i = end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(b.len(), |n| i + n + 2);
            i = end;
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") || rest.starts_with("br\"") {
            let start = rest.find('r').unwrap() + 1;
            let hashes = rest[start..].bytes().take_while(|&c| c == b'#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let body = i + start + hashes + 1;
            let end = text[body..]
                .find(&close)
                .map_or(b.len(), |n| body + n + close.len());
            out.push_str("\"\"");
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i = j + 1;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            let close = if b.get(i + 1) == Some(&b'\\') {
                text[i + 2..].find('\'').map(|n| i + 2 + n)
            } else {
                let c = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + c) == Some(&b'\'')).then_some(i + 1 + c)
            };
            match close {
                Some(end) => {
                    out.push_str("' '");
                    i = end + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    // Drop `#[cfg(test)]` items (test modules and helpers): a test may reach anywhere.
    while let Some(at) = out.find("#[cfg(test)]") {
        let after = at + "#[cfg(test)]".len();
        let item_end = match (out[after..].find('{'), out[after..].find(';')) {
            (Some(brace), semi) if semi.is_none_or(|s| brace < s) => {
                let mut depth = 0;
                let mut end = out.len();
                for (n, c) in out[after + brace..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = after + brace + n + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (_, Some(semi)) => after + semi + 1,
            _ => out.len(),
        };
        out.replace_range(at..item_end, "");
    }
    out
}

/// What only `crates/core/src/fs/` may write: the system calls and flags that open,
/// create or lock a file by hand. (std's `File::lock` family: clippy.toml's
/// disallowed-methods, which knows a file's `lock` from a mutex's.)
const SAFE_FILE_CALLS: [&str; 7] = [
    "O_NOFOLLOW",
    "O_EXCL",
    "openat",
    "libc::open(",
    "flock",
    "create_new(true)",
    "AT_SYMLINK_NOFOLLOW",
];

/// The uses of `SAFE_FILE_CALLS` in the code (not comments, strings or tests) of the
/// crates under `top` outside `crates/core/src/fs/`, as `file: call`.
fn safe_file_calls_outside_fs(top: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (name, relative, code) in product_code(top) {
        if name == "core" && relative.starts_with("fs/") {
            continue;
        }
        for call in SAFE_FILE_CALLS {
            if code.contains(call) {
                found.push(format!("crates/{name}/src/{relative}: {call}"));
            }
        }
    }
    found
}

/// Each Rust file of the crates under `top` as (crate, path below its `src/`, its
/// code as `code_of` leaves it), in the order `crates` and `rust_files` give.
fn product_code(top: &Path) -> Vec<(String, String, String)> {
    let mut all = Vec::new();
    for (name, src) in crates(top) {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in &files {
            let relative = file
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .to_string();
            let code = code_of(&std::fs::read_to_string(file).unwrap());
            all.push((name.clone(), relative, code));
        }
    }
    all
}

#[test]
fn only_the_fs_module_opens_untrusted_files_by_hand() {
    assert_eq!(
        safe_file_calls_outside_fs(&top()),
        Vec::<String>::new(),
        "go through agent_runner_core::fs (its mod.rs says which part does what)"
    );
    // The check sees code, and only code: a planted call is found, a comment or a
    // test that names one is not.
    let scratch = std::env::temp_dir().join(format!("ar-arch-{}", std::process::id()));
    std::fs::create_dir_all(scratch.join("crates/core/src/fs")).unwrap();
    std::fs::create_dir_all(scratch.join("crates/run/src")).unwrap();
    std::fs::write(
        scratch.join("crates/run/src/planted.rs"),
        "// O_NOFOLLOW in a comment\nfn f() { let _ = \"flock\"; libc::flock(0, 0); }\n\
         #[cfg(test)]\nmod tests { fn g() { libc::openat(); } }\n",
    )
    .unwrap();
    std::fs::write(
        scratch.join("crates/core/src/fs/ok.rs"),
        "fn f() { libc::O_NOFOLLOW; }",
    )
    .unwrap();
    let found = safe_file_calls_outside_fs(&scratch);
    std::fs::remove_dir_all(&scratch).unwrap();
    assert_eq!(found, ["crates/run/src/planted.rs: flock"]);
}

/// Each crate's `agent-runner-*` dependencies, from its Cargo.toml.
fn crate_graph(top: &Path) -> BTreeMap<String, Vec<String>> {
    let mut graph = BTreeMap::new();
    for (name, src) in crates(top) {
        let manifest = std::fs::read_to_string(src.join("../Cargo.toml")).unwrap();
        let dependencies = manifest
            .split("\n[")
            .find(|section| section.starts_with("dependencies]"))
            .unwrap_or_default();
        let ours = dependencies
            .lines()
            .filter_map(|line| line.strip_prefix("agent-runner-"))
            .map(|rest| rest.split(['.', ' ', '=']).next().unwrap().to_string())
            .collect();
        graph.insert(name, ours);
    }
    graph
}

/// The layers, as the workspace's Cargo.toml draws them. A new dependency between
/// our crates is a change of the architecture: make it here, knowingly.
#[test]
fn the_crates_depend_on_each_other_in_layers() {
    let expected = [
        (
            "cli",
            &["core", "settings", "sandbox", "meta", "run", "pipeline"][..],
        ),
        ("core", &[]),
        ("egress", &["core", "settings"]),
        ("meta", &["core", "settings"]),
        ("pipeline", &["core", "settings", "sandbox", "meta"]),
        ("run", &["core", "settings", "egress", "sandbox", "meta"]),
        ("sandbox", &["core", "settings", "egress"]),
        ("settings", &["core"]),
    ];
    let expected: BTreeMap<String, Vec<String>> = expected
        .iter()
        .map(|(name, deps)| {
            (
                name.to_string(),
                deps.iter().map(|d| d.to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(crate_graph(&top()), expected);
}

/// The module paths (from the crate's root) that `code`, the file of module
/// `module`, names: `crate::x::y`, `super::super::x`, `self::x`, and each leaf of
/// `super::{x, y::{z}}`. A path may end in an item (`crate::x::Type`).
fn paths_named(code: &str, module: &[String]) -> BTreeSet<Vec<String>> {
    let mut named = BTreeSet::new();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let before = code[..i].chars().next_back();
        let at_word = before.is_none_or(|c| !ident(c) && c != ':' && c != '$');
        let (mut base, mut after) = match () {
            _ if at_word && rest.starts_with("crate::") => (Vec::new(), "crate::".len()),
            _ if at_word && rest.starts_with("self::") => (module.to_vec(), "self::".len()),
            _ if at_word && rest.starts_with("super::") => (module.to_vec(), 0),
            _ => {
                i += rest.chars().next().unwrap().len_utf8();
                continue;
            }
        };
        while rest[after..].starts_with("super::") {
            base.pop();
            after += "super::".len();
        }
        use_tree(&rest[after..], &base, &mut named);
        i += after;
    }
    named
}

/// Reads the use tree at the start of `text` (`a::b`, `{a, b::{c, self}}`) under
/// `prefix` into `out`; returns the bytes it read.
fn use_tree(text: &str, prefix: &[String], out: &mut BTreeSet<Vec<String>>) -> usize {
    let trimmed = text.trim_start();
    let space = text.len() - trimmed.len();
    if let Some(inner) = trimmed.strip_prefix('{') {
        let mut at = 0;
        loop {
            at += use_tree(&inner[at..], prefix, out);
            let rest = &inner[at..];
            let next = rest.trim_start();
            at += rest.len() - next.len();
            match next.chars().next() {
                Some(',') => at += 1,
                Some('}') => return space + 1 + at + 1,
                _ => return space + 1 + at,
            }
        }
    }
    let end = trimmed
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(trimmed.len());
    let mut path = prefix.to_vec();
    match &trimmed[..end] {
        "" | "self" => {}
        name => path.push(name.to_string()),
    }
    if end > 0
        && trimmed[end..].starts_with("::")
        && trimmed[end + 2..].starts_with(|c: char| c == '{' || c.is_alphanumeric() || c == '_')
    {
        return space + end + 2 + use_tree(&trimmed[end + 2..], &path, out);
    }
    if !path.is_empty() {
        out.insert(path);
    }
    space + end
}

/// Each crate's edges between sibling modules at any depth (`queue` → `store`,
/// `backend::copy` → `backend::session_volume`): a file names a module beside it,
/// or inside one beside one of its parents. Edges from a module to its parent or its
/// own children are not circles: a parent declares its children.
type Edges = BTreeMap<String, BTreeSet<String>>;

fn module_edges(top: &Path) -> BTreeMap<String, Edges> {
    let mut all = BTreeMap::new();
    for (name, src) in crates(top) {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let module_of = |file: &Path| -> Vec<String> {
            let relative = file.strip_prefix(&src).unwrap().with_extension("");
            let mut path: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if path
                .last()
                .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
            {
                path.pop();
            }
            path
        };
        let mut modules: BTreeSet<Vec<String>> = BTreeSet::new();
        for file in &files {
            let module = module_of(file);
            for n in 1..=module.len() {
                modules.insert(module[..n].to_vec());
            }
        }
        let mut edges: Edges = BTreeMap::new();
        for file in &files {
            let module = module_of(file);
            let code = code_of(&std::fs::read_to_string(file).unwrap());
            for path in paths_named(&code, &module) {
                let common = module.iter().zip(&path).take_while(|(a, b)| a == b).count();
                if common >= module.len() || common >= path.len() {
                    continue;
                }
                let (from, to) = (&module[..=common], &path[..=common]);
                if modules.contains(from) && modules.contains(to) {
                    edges
                        .entry(from.join("::"))
                        .or_default()
                        .insert(to.join("::"));
                }
            }
        }
        all.insert(name, edges);
    }
    all
}

/// Import circles between sibling modules of each crate, at any depth, as
/// `crate: a → b` edges of each circle's modules.
fn circles(top: &Path) -> Vec<String> {
    let mut circles = Vec::new();
    for (name, edges) in module_edges(top) {
        let reach = |from: &String| {
            let mut seen = BTreeSet::new();
            let mut stack = vec![from.clone()];
            while let Some(n) = stack.pop() {
                for m in edges.get(&n).into_iter().flatten() {
                    if seen.insert(m.clone()) {
                        stack.push(m.clone());
                    }
                }
            }
            seen
        };
        for (from, tos) in &edges {
            for to in tos {
                if reach(to).contains(from) {
                    circles.push(format!("{name}: {from} → {to}"));
                }
            }
        }
    }
    circles
}

#[test]
fn no_import_circles_between_a_crates_modules() {
    let edges = module_edges(&top());
    assert!(
        edges["pipeline"]["queue"].contains("store"),
        "found the imports"
    );
    assert!(
        edges["sandbox"]["worker"].contains("backend"),
        "found the imports"
    );
    assert!(
        edges["sandbox"]["backend::copy"].contains("backend::carrier"),
        "found the imports between files"
    );
    assert_eq!(circles(&top()), Vec::<String>::new());
    // A planted circle is found, through `super::` and braces; a comment is not.
    let scratch = std::env::temp_dir().join(format!("ar-circle-{}", std::process::id()));
    std::fs::create_dir_all(scratch.join("crates/x/src/a")).unwrap();
    std::fs::write(scratch.join("crates/x/src/lib.rs"), "mod a; mod b; mod c;").unwrap();
    std::fs::write(
        scratch.join("crates/x/src/b.rs"),
        "fn f() { crate::a::g(); }",
    )
    .unwrap();
    std::fs::write(scratch.join("crates/x/src/c.rs"), "// crate::a\n").unwrap();
    // Between files deeper down: `a::d` → `a::e` by `super::`, `a::e` → `a::d` by a
    // nested brace; `a::d` → `a` (its parent) is none.
    std::fs::write(scratch.join("crates/x/src/a/mod.rs"), "mod d; mod e;").unwrap();
    std::fs::write(
        scratch.join("crates/x/src/a/e.rs"),
        "use crate::{b, a::{d::X}};",
    )
    .unwrap();
    std::fs::write(
        scratch.join("crates/x/src/a/d.rs"),
        "use super::super::{b, c};\nfn f() { super::e::g(); super::h(); }",
    )
    .unwrap();
    let found = circles(&scratch);
    std::fs::remove_dir_all(&scratch).unwrap();
    assert_eq!(
        found,
        ["x: a → b", "x: a::d → a::e", "x: a::e → a::d", "x: b → a"]
    );
}

/// The files above `crates/sandbox/src/backend/` that still speak to the docker CLI
/// themselves, each with what it needs from the backend first. The list only
/// shrinks: a file taken off it passes, a new one fails.
const DOCKER_CLI_ABOVE_THE_BACKEND: [&str; 1] = [
    // `docker --version`, the daemon's version, `image inspect` and podman's missing
    // part: doctor's checks of the engine itself, in docker's words.
    "crates/run/src/doctor.rs",
];

/// The files of the crates under `top` whose code (not comments, strings or tests)
/// names `docker_cli` outside `crates/sandbox/src/backend/`.
fn docker_cli_outside_the_backend(top: &Path) -> Vec<String> {
    let mut found: Vec<String> = product_code(top)
        .into_iter()
        .filter(|(name, relative, _)| !(name == "sandbox" && relative.starts_with("backend/")))
        .filter(|(_, _, code)| names_word(code, "docker_cli"))
        .map(|(name, relative, _)| format!("crates/{name}/src/{relative}"))
        .collect();
    found.sort();
    found
}

/// Whether `code` has `word` as a whole identifier (`docker_client` is not
/// `docker_cli`).
fn names_word(code: &str, word: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    code.match_indices(word).any(|(at, _)| {
        !ident(code[..at].chars().next_back()) && !ident(code[at + word.len()..].chars().next())
    })
}

#[test]
fn only_the_backend_calls_the_docker_cli() {
    let mut known = DOCKER_CLI_ABOVE_THE_BACKEND.map(String::from).to_vec();
    known.sort();
    assert_eq!(
        docker_cli_outside_the_backend(&top()),
        known,
        "a sandbox's engine is reached through backend::open's Backend and its Instance \
         (crates/sandbox/src/backend/mod.rs), never through docker_cli above it"
    );
    // A planted call above the backend is found; the backend's own, a comment and a
    // test are not.
    let scratch = std::env::temp_dir().join(format!("ar-docker-cli-{}", std::process::id()));
    std::fs::create_dir_all(scratch.join("crates/sandbox/src/backend")).unwrap();
    std::fs::create_dir_all(scratch.join("crates/sandbox/src/worker")).unwrap();
    std::fs::write(
        scratch.join("crates/sandbox/src/worker/planted.rs"),
        "use crate::backend::docker_cli;\nfn f() { docker_cli::run(&[\"ps\"]); }\n",
    )
    .unwrap();
    std::fs::write(
        scratch.join("crates/sandbox/src/worker/quiet.rs"),
        "// docker_cli in a comment\nfn f() { let _ = \"docker_cli\"; docker_client(); }\n\
         #[cfg(test)]\nmod tests { fn g() { docker_cli::run(); } }\n",
    )
    .unwrap();
    std::fs::write(
        scratch.join("crates/sandbox/src/backend/docker.rs"),
        "use super::docker_cli;",
    )
    .unwrap();
    let found = docker_cli_outside_the_backend(&scratch);
    std::fs::remove_dir_all(&scratch).unwrap();
    assert_eq!(found, ["crates/sandbox/src/worker/planted.rs"]);
}

/// The longest a product function may be: past it, a function does several things
/// that want names of their own.
const MAX_FUNCTION_LINES: usize = 120;

/// The product functions let be longer than that, each `file: name`: none (issue
/// 42 split the last six). A new long function fails the test below: split it
/// into functions with names of their own rather than list it here.
const LONG_FUNCTIONS: [&str; 0] = [];

/// The functions of `code` (as `code_of` leaves it) longer than `max` lines, as
/// (name, lines): from the line of `fn` to the brace that closes it at the same
/// indentation.
fn long_functions(code: &str, max: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let after_fn = [
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "fn ",
            "const fn ",
            "pub const fn ",
        ]
        .iter()
        .find_map(|prefix| trimmed.strip_prefix(prefix));
        let Some(after_fn) = after_fn else { continue };
        let name: String = after_fn
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{indent}}}");
        for (end, later) in lines.iter().enumerate().skip(start) {
            // A declaration without a body (a trait's): no function here.
            if end == start || !later.starts_with(&close) {
                if later.trim_end().ends_with(';')
                    && !lines[start..=end].iter().any(|l| l.contains('{'))
                {
                    break;
                }
                continue;
            }
            if later.trim_end() == close {
                let length = end - start + 1;
                if length > max {
                    found.push((name.clone(), length));
                }
                break;
            }
        }
    }
    found
}

/// `file: name (lines)` of every product function over `MAX_FUNCTION_LINES`.
fn long_product_functions(top: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (name, relative, code) in product_code(top) {
        for (function, length) in long_functions(&code, MAX_FUNCTION_LINES) {
            found.push(format!(
                "crates/{name}/src/{relative}: {function} ({length})"
            ));
        }
    }
    found.sort();
    found
}

#[test]
fn no_product_function_is_longer_than_120_lines() {
    let new: Vec<String> = long_product_functions(&top())
        .into_iter()
        .filter(|f| {
            !LONG_FUNCTIONS
                .iter()
                .any(|known| f.starts_with(&format!("{known} (")))
        })
        .collect();
    assert_eq!(new, Vec::<String>::new(), "split these");
    // A planted long function is found; a long test, a comment or a string is not.
    let scratch = std::env::temp_dir().join(format!("ar-long-{}", std::process::id()));
    std::fs::create_dir_all(scratch.join("crates/x/src")).unwrap();
    let body = "    let _ = 1;\n".repeat(MAX_FUNCTION_LINES);
    std::fs::write(
        scratch.join("crates/x/src/lib.rs"),
        format!(
            "pub fn long() {{\n{body}}}\nfn short() {{\n    let _ = \"\n{body}\";\n}}\n\
             trait T {{\n    fn declared(&self);\n}}\n#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{body}    }}\n}}\n"
        ),
    )
    .unwrap();
    let found = long_product_functions(&scratch);
    std::fs::remove_dir_all(&scratch).unwrap();
    assert_eq!(
        found,
        [format!(
            "crates/x/src/lib.rs: long ({})",
            MAX_FUNCTION_LINES + 2
        )]
    );
}
