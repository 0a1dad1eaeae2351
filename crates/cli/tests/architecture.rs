//! Rules of the source tree that no compiler checks.
//!
//! The runner does not depend on the pipeline: the pipeline drives the runner as a
//! child process, as any other program would, so the runner must stay usable (and
//! testable) without it. Only `lib.rs` (which declares the module), the pipeline
//! commands in `src/cli/` and `error.rs` (the one place errors become exit codes) may
//! name `pipeline`.
//!
//! Untrusted files have one home, `src/fs/`: no other module opens with
//! `O_NOFOLLOW`, calls `open`/`openat` itself, creates with `O_EXCL` or takes an
//! `flock`, so the rule "never follow a symlink, never block on a FIFO, never leave
//! the directory" cannot grow a second, weaker copy.
//!
//! No import circles: modules that name each other round cannot be read, tested or
//! moved one at a time (the pipeline's layers, `meta` below the runner's protocol).

use std::path::{Path, PathBuf};

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

#[test]
fn the_runner_never_imports_the_pipeline() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let allowed = [
        "lib.rs",
        "error.rs",
        "cli/mod.rs",
        "cli/workspace.rs",
        "cli/task.rs",
        "cli/watch.rs",
        "cli/orchestrate.rs",
        "cli/plan.rs",
        "cli/serve.rs",
        "cli/usage.rs",
    ];
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut offenders = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if relative.starts_with("pipeline/") || allowed.contains(&relative.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        if text.contains("pipeline::") || text.contains("mod pipeline") {
            offenders.push(relative);
        }
    }
    assert!(files.len() > 20, "found the sources");
    assert_eq!(
        offenders,
        Vec::<String>::new(),
        "these runner files use the pipeline"
    );
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

/// What only `src/fs/` may write: the system calls and flags that open, create or
/// lock a file by hand.
const SAFE_FILE_CALLS: [&str; 7] = [
    "O_NOFOLLOW",
    "O_EXCL",
    "openat",
    "libc::open(",
    "flock",
    "create_new(true)",
    "AT_SYMLINK_NOFOLLOW",
];

/// The uses of `SAFE_FILE_CALLS` in the code (not comments, strings or tests) of
/// `src/` files outside `src/fs/`, as `file: call`.
fn safe_file_calls_outside_fs(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut found = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if relative.starts_with("fs/") {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for call in SAFE_FILE_CALLS {
            if code.contains(call) {
                found.push(format!("{relative}: {call}"));
            }
        }
    }
    found
}

#[test]
fn only_the_fs_module_opens_untrusted_files_by_hand() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    assert_eq!(
        safe_file_calls_outside_fs(&src),
        Vec::<String>::new(),
        "go through crate::fs (src/fs/mod.rs says which part does what)"
    );
    // The check sees code, and only code: a planted call is found, a comment or a
    // test that names one is not.
    let scratch = std::env::temp_dir().join(format!("ar-arch-{}", std::process::id()));
    std::fs::create_dir_all(scratch.join("fs")).unwrap();
    std::fs::write(
        scratch.join("planted.rs"),
        "// O_NOFOLLOW in a comment\nfn f() { let _ = \"flock\"; libc::flock(0, 0); }\n\
         #[cfg(test)]\nmod tests { fn g() { libc::openat(); } }\n",
    )
    .unwrap();
    std::fs::write(scratch.join("fs/ok.rs"), "fn f() { libc::O_NOFOLLOW; }").unwrap();
    let found = safe_file_calls_outside_fs(&scratch);
    std::fs::remove_dir_all(&scratch).unwrap();
    assert_eq!(found, ["planted.rs: flock"]);
}

/// The paths a `use` tree names, each with the name it binds: `a::{b, c::{d as e,
/// self}}` → `a::b` (b), `a::c::d` (e), `a::c` (c).
fn use_paths(tree: &str) -> Vec<(String, String)> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let (path, alias) = match tree.split_once(" as ") {
            Some((path, alias)) => (path.trim(), Some(alias.trim())),
            None => (tree, None),
        };
        let path = path.trim_end_matches("::self");
        let bound = alias.unwrap_or_else(|| path.rsplit("::").next().unwrap_or(path));
        return vec![(path.to_string(), bound.to_string())];
    };
    let prefix = tree[..open].trim_end_matches("::").trim();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (n, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..n]);
                start = n + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    let mut out = Vec::new();
    for part in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        for (sub, bound) in use_paths(part) {
            out.push(match sub.as_str() {
                "self" => (
                    prefix.to_string(),
                    if bound == "self" {
                        prefix.rsplit("::").next().unwrap_or(prefix).to_string()
                    } else {
                        bound
                    },
                ),
                _ if prefix.is_empty() => (sub, bound),
                _ => (format!("{prefix}::{sub}"), bound),
            });
        }
    }
    out
}

/// Every path the code names, each split at `::`: `use` paths, and paths in the
/// code with the name a `use` bound put back (`jobs::list` after `use
/// crate::pipeline::queue::jobs` is `crate::pipeline::queue::jobs::list`).
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut inline = Vec::new();
    let mut uses = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let before = code[..i].chars().next_back();
        let at_word = before.is_none_or(|c| !ident(c) && c != ':');
        if at_word && code[i..].starts_with("use ") {
            let end = code[i..].find(';').map_or(code.len(), |n| i + n);
            uses.extend(use_paths(&code[i + 4..end]));
            i = end;
            continue;
        }
        if at_word && code[i..].starts_with(|c: char| c.is_alphabetic() || c == '_') {
            let mut end = i;
            loop {
                let word = code[end..]
                    .find(|c: char| !ident(c))
                    .map_or(code.len() - end, |n| n);
                end += word;
                if code[end..].starts_with("::") && code[end + 2..].starts_with(|c: char| ident(c))
                {
                    end += 2;
                } else {
                    break;
                }
            }
            if code[i..end].contains("::") {
                inline.push(code[i..end].to_string());
            }
            i = end;
            continue;
        }
        i += code[i..].chars().next().unwrap().len_utf8();
    }
    let bound: std::collections::HashMap<&str, &str> = uses
        .iter()
        .map(|(path, name)| (name.as_str(), path.as_str()))
        .collect();
    let mut paths: Vec<String> = uses.iter().map(|(path, _)| path.clone()).collect();
    for path in inline {
        let (first, rest) = path.split_once("::").unwrap();
        paths.push(match bound.get(first) {
            Some(full) if !["crate", "super", "self"].contains(&first) => format!("{full}::{rest}"),
            _ => path,
        });
    }
    paths
        .into_iter()
        .map(|p| p.split("::").map(str::to_string).collect())
        .collect()
}

/// The crate's module tree from `src/` and what each module re-exports, and the
/// edges between sibling modules that one module's code names.
struct ModuleGraph {
    /// Module path (`pipeline::plan`) → its file.
    files: std::collections::BTreeMap<Vec<String>, PathBuf>,
    /// (module, name) → the path `pub use` gives that name.
    reexports: std::collections::HashMap<(Vec<String>, String), Vec<String>>,
}

impl ModuleGraph {
    fn load(src: &Path) -> ModuleGraph {
        let mut files = std::collections::BTreeMap::new();
        let mut all = Vec::new();
        rust_files(src, &mut all);
        for file in all {
            let relative = file.strip_prefix(src).unwrap().with_extension("");
            let mut path: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if path.last().is_some_and(|l| l == "mod") || path == ["lib"] {
                path.pop();
            }
            if path == ["main"] {
                continue;
            }
            files.insert(path, file);
        }
        // Files that only tests declare (`#[cfg(test)] mod tests;`) are left out, and
        // so are files no module declares (a build script beside a module's files).
        let declared: Vec<Vec<String>> = files
            .keys()
            .filter(|module| match module.split_last() {
                None => true,
                Some((name, parent)) => files.get(parent).is_some_and(|file| {
                    code_of(&std::fs::read_to_string(file).unwrap())
                        .contains(&format!("mod {name};"))
                }),
            })
            .cloned()
            .collect();
        files.retain(|m, _| declared.contains(m));
        let mut graph = ModuleGraph {
            files,
            reexports: Default::default(),
        };
        for (module, file) in graph.files.clone() {
            let code = code_of(&std::fs::read_to_string(&file).unwrap());
            for statement in code.split(';') {
                let statement = statement.trim();
                let Some(tree) = statement
                    .strip_prefix("pub use ")
                    .or_else(|| statement.strip_prefix("pub(crate) use "))
                else {
                    continue;
                };
                for (path, name) in use_paths(tree) {
                    let segments: Vec<String> = path.split("::").map(str::to_string).collect();
                    if let Some(target) = graph.absolute(&module, &segments) {
                        graph.reexports.insert((module.clone(), name), target);
                    }
                }
            }
        }
        graph
    }

    /// `segments` as named in `module`, from the crate root; None for other crates.
    fn absolute(&self, module: &[String], segments: &[String]) -> Option<Vec<String>> {
        let mut base = module.to_vec();
        let mut rest = segments;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            Some(first) => {
                let mut child = module.to_vec();
                child.push(first.to_string());
                let reexported = self
                    .reexports
                    .contains_key(&(module.to_vec(), first.into()));
                if !self.files.contains_key(&child) && !reexported {
                    return None;
                }
            }
            None => return None,
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module `path` lands in: as deep as it names modules, through re-exports.
    fn resolve(&self, path: &[String]) -> Vec<String> {
        let mut at: Vec<String> = Vec::new();
        let mut rest: std::collections::VecDeque<String> = path.iter().cloned().collect();
        let mut hops = 0;
        while let Some(next) = rest.pop_front() {
            let mut child = at.clone();
            child.push(next.clone());
            if self.files.contains_key(&child) {
                at = child;
            } else if let Some(target) = self.reexports.get(&(at.clone(), next)) {
                hops += 1;
                if hops > 16 {
                    break;
                }
                for s in target.iter().rev() {
                    rest.push_front(s.clone());
                }
                at.clear();
            } else {
                break;
            }
        }
        at
    }

    /// Edges between sibling modules: `a → b` under `parent` when code in `a` (or
    /// below it) names `b` (or something in it).
    fn edges(&self) -> std::collections::BTreeSet<(Vec<String>, String, String)> {
        let mut edges = std::collections::BTreeSet::new();
        for (module, file) in &self.files {
            let code = code_of(&std::fs::read_to_string(file).unwrap());
            for named in named_paths(&code) {
                let Some(target) = self.absolute(module, &named) else {
                    continue;
                };
                let target = self.resolve(&target);
                let common = module
                    .iter()
                    .zip(&target)
                    .take_while(|(a, b)| a == b)
                    .count();
                if common < module.len() && common < target.len() {
                    edges.insert((
                        module[..common].to_vec(),
                        module[common].clone(),
                        target[common].clone(),
                    ));
                }
            }
        }
        edges
    }

    /// The import circles: groups of sibling modules that name each other round,
    /// each as `parent: a → b → … → a`.
    fn circles(&self) -> Vec<String> {
        use std::collections::{BTreeMap, BTreeSet};
        let mut by_parent: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> =
            BTreeMap::new();
        for (parent, from, to) in self.edges() {
            by_parent
                .entry(parent)
                .or_default()
                .entry(from)
                .or_default()
                .insert(to);
        }
        let mut circles = Vec::new();
        for (parent, graph) in by_parent {
            // Each group of mutually reachable modules, shown as one shortest cycle
            // through its first member.
            let reach = |from: &String| {
                let mut seen = BTreeSet::new();
                let mut stack = vec![from.clone()];
                while let Some(n) = stack.pop() {
                    for m in graph.get(&n).into_iter().flatten() {
                        if seen.insert(m.clone()) {
                            stack.push(m.clone());
                        }
                    }
                }
                seen
            };
            let mut done = BTreeSet::new();
            for node in graph.keys() {
                if done.contains(node) || !reach(node).contains(node) {
                    continue;
                }
                let group: BTreeSet<String> = reach(node)
                    .into_iter()
                    .filter(|m| reach(m).contains(node))
                    .collect();
                done.extend(group.iter().cloned());
                // Breadth first from node back to node.
                let mut previous: BTreeMap<String, String> = BTreeMap::new();
                let mut queue = std::collections::VecDeque::from([node.clone()]);
                'search: while let Some(n) = queue.pop_front() {
                    for m in graph.get(&n).into_iter().flatten() {
                        if m == node {
                            previous.insert("<end>".into(), n.clone());
                            break 'search;
                        }
                        if group.contains(m) && !previous.contains_key(m) {
                            previous.insert(m.clone(), n.clone());
                            queue.push_back(m.clone());
                        }
                    }
                }
                let mut between = Vec::new();
                let mut at = previous["<end>"].clone();
                while &at != node {
                    between.push(at.clone());
                    at = previous[&at].clone();
                }
                between.reverse();
                let mut cycle = vec![node.clone()];
                cycle.extend(between);
                cycle.push(node.clone());
                let parent = if parent.is_empty() {
                    "crate".to_string()
                } else {
                    parent.join("::")
                };
                circles.push(format!(
                    "{parent}: {} ({} modules in the circle: {})",
                    cycle.join(" → "),
                    group.len(),
                    group.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        circles
    }
}

/// Modules that import each other round (`a` uses `b` uses `a`) cannot be read,
/// tested or moved one at a time. Counted between siblings at every level of the
/// module tree (the crate's top-level modules, a subsystem's folders, a folder's
/// files), from `use crate::…`/`super::…` paths outside `#[cfg(test)]` code.
#[test]
fn no_import_circles() {
    let graph = ModuleGraph::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(graph.files.len() > 100, "found the modules");
    assert!(
        graph
            .edges()
            .contains(&(vec![], "cli".into(), "runner".into())),
        "found the imports"
    );
    let circles = graph.circles();
    assert_eq!(
        circles,
        Vec::<String>::new(),
        "{} import circles",
        circles.len()
    );
}
