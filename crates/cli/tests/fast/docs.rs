//! The documentation stays true to itself and to the binary (SPEC §24): every
//! relative link in README.md, ARCHITECTURE.md and docs/*.md reaches a file and,
//! with a `#fragment`, a heading in it (GitHub's slugs); every `agent-runner
//! <command>` in a fenced `sh` block is a command of `agent-runner --help`; every
//! page of docs/ is linked from the README; the README stays a front door. A
//! block marked ```` ```sh offline ```` is safe to run here (no network, no
//! daemon, only this directory): each runs with `sh -e` in a directory of its own,
//! `agent-runner` on PATH, and must succeed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// SPEC §24: the README is at most this many lines.
const README_MAX_LINES: usize = 400;

fn top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md, ARCHITECTURE.md and every docs/*.md, relative to the top.
fn pages(top: &Path) -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md"), PathBuf::from("ARCHITECTURE.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(top.join("docs"))
        .expect("docs/ exists")
        .flatten()
        .map(|e| PathBuf::from("docs").join(e.file_name()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(!docs.is_empty(), "docs/ has no .md files");
    pages.extend(docs);
    pages
}

/// A line of a page, and whether it is inside a fenced block (with the block's
/// info string, e.g. `sh`).
struct Line<'a> {
    number: usize,
    text: &'a str,
    fence: Option<&'a str>,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, text) in text.lines().enumerate() {
        let trimmed = text.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(info.trim()),
            };
            continue;
        }
        out.push(Line {
            number: i + 1,
            text,
            fence,
        });
    }
    out
}

/// GitHub's anchor for a heading: the text as rendered (links by their text, no
/// markup), lower case, without what is not a letter, digit, space, `-` or `_`,
/// spaces as `-`.
fn slug(heading: &str) -> String {
    let mut rendered = String::new();
    let mut rest = heading;
    // A link renders as its text.
    while let Some(open) = rest.find("](") {
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        rendered.push_str(&rest[..open]);
        rest = &rest[open + close + 1..];
    }
    rendered.push_str(rest);
    rendered
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings, duplicates numbered as GitHub does.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in lines(text).iter().filter(|l| l.fence.is_none()) {
        let hashes = line.text.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line.text[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line.text[hashes..].trim());
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The line without its inline code spans (a link in code is not a link).
fn without_code(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// Every inline link target of a page outside fenced blocks, with its line.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for line in lines(text).iter().filter(|l| l.fence.is_none()) {
        let prose = without_code(line.text);
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find([')', ' ']).unwrap_or(rest.len());
            out.push((line.number, rest[..end].to_string()));
            rest = &rest[end..];
        }
    }
    out
}

/// What is wrong with link `target` on page `page` (relative to `top`), if anything.
fn broken(top: &Path, page: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, fragment) = match target.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (target, None),
    };
    if path.starts_with('/') {
        return Some("an absolute path does not work on GitHub; make it relative".into());
    }
    let file = if path.is_empty() {
        top.join(page)
    } else {
        top.join(page.parent().unwrap_or(Path::new(""))).join(path)
    };
    if !file.exists() {
        return Some(format!("{} does not exist", file.display()));
    }
    let fragment = fragment?;
    if file.extension().is_none_or(|e| e != "md") {
        return Some(format!(
            "#{fragment} into {}, not a .md file",
            file.display()
        ));
    }
    let text = std::fs::read_to_string(&file).unwrap();
    if anchors(&text).contains(fragment) {
        None
    } else {
        Some(format!("{} has no heading #{fragment}", file.display()))
    }
}

#[test]
fn every_link_reaches_a_file_and_a_heading() {
    let top = top();
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages(&top) {
        let text = std::fs::read_to_string(top.join(&page)).unwrap();
        for (line, target) in links(&text) {
            checked += 1;
            if let Some(problem) = broken(&top, &page, &target) {
                problems.push(format!("{}:{line}: ({target}): {problem}", page.display()));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser blind?"
    );
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_docs_page_is_linked_from_the_readme() {
    let top = top();
    let readme = std::fs::read_to_string(top.join("README.md")).unwrap();
    let linked: BTreeSet<String> = links(&readme)
        .into_iter()
        .map(|(_, t)| t.split('#').next().unwrap_or("").to_string())
        .collect();
    let missing: Vec<String> = pages(&top)
        .iter()
        .map(|p| p.display().to_string())
        .filter(|p| p != "README.md" && !linked.contains(p))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md links none of: {}",
        missing.join(", ")
    );
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = std::fs::read_to_string(top().join("README.md")).unwrap();
    let n = readme.lines().count();
    assert!(
        n <= README_MAX_LINES,
        "README.md has {n} lines, more than {README_MAX_LINES}: move the detail into docs/"
    );
}

/// The commands `agent-runner --help` lists.
fn commands() -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-runner"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "agent-runner --help: {out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    let commands: BTreeSet<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    assert!(
        commands.contains("run") && commands.contains("validate"),
        "no commands found in --help:\n{help}"
    );
    commands
}

/// `agent-runner <word>` in a shell line (comments left out), with the word.
fn invocations(line: &str) -> Vec<String> {
    let code = match line.find(" #") {
        Some(at) => &line[..at],
        None if line.trim_start().starts_with('#') => "",
        None => line,
    };
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("agent-runner") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "agent-runner".len()..];
        rest = after;
        // `agent-runner-codex` or `foo_agent-runner` is another name.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_') {
            continue;
        }
        let Some(args) = after.strip_prefix(' ') else {
            continue;
        };
        let word: String = args
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
            .collect();
        if !word.is_empty() && !word.starts_with('-') {
            out.push(word);
        }
    }
    out
}

#[test]
fn every_command_in_a_shell_block_exists() {
    let top = top();
    let commands = commands();
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages(&top) {
        let text = std::fs::read_to_string(top.join(&page)).unwrap();
        for line in lines(&text) {
            if !line.fence.is_some_and(|f| f == "sh" || f == OFFLINE) {
                continue;
            }
            for word in invocations(line.text) {
                checked += 1;
                if !commands.contains(&word) {
                    problems.push(format!(
                        "{}:{}: `agent-runner {word}` is not a command (agent-runner --help lists {})",
                        page.display(),
                        line.number,
                        commands.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
    }
    assert!(checked > 5, "only {checked} commands found in sh blocks");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_checks_see_what_they_check() {
    // GitHub's slugs, as the headings of these pages need them.
    assert_eq!(
        slug("Shape TaskConfig (IDE pipeline)"),
        "shape-taskconfig-ide-pipeline"
    );
    assert_eq!(slug("The sandbox's mechanism"), "the-sandboxs-mechanism");
    assert_eq!(slug("`codex` in the image"), "codex-in-the-image");
    assert_eq!(slug("See [Egress](docs/egress.md)"), "see-egress");
    let dup = anchors("# A\n## A\n```\n# not a heading\n```\n## A\n");
    assert_eq!(dup, ["a", "a-1", "a-2"].map(String::from).into());
    // Links in code are not links; one per target.
    assert_eq!(
        links("see [x](a.md#b) and `[y](c.md)`\n```\n[z](d.md)\n```\n"),
        [(1, "a.md#b".to_string())]
    );
    assert_eq!(
        invocations("sudo agent-runner task run -w . # then agent-runner nope"),
        ["task"]
    );
    assert!(invocations("docker run agent-runner-codex:latest").is_empty());
}

/// The info string of a shell block that is safe to run offline.
const OFFLINE: &str = "sh offline";

#[test]
fn the_offline_shell_blocks_run() {
    let top = top();
    let binary = Path::new(env!("CARGO_BIN_EXE_agent-runner"));
    let path = format!(
        "{}:{}",
        binary.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for page in pages(&top) {
        let text = std::fs::read_to_string(top.join(&page)).unwrap();
        let mut blocks: BTreeMap<usize, String> = BTreeMap::new();
        let mut last: Option<usize> = None;
        for line in lines(&text) {
            match line.fence {
                Some(OFFLINE) => {
                    // A block starts where the previous line was not in it.
                    let start = match last {
                        Some(n) if n + 1 == line.number => *blocks.keys().last().unwrap(),
                        _ => line.number,
                    };
                    let block = blocks.entry(start).or_default();
                    block.push_str(line.text);
                    block.push('\n');
                    last = Some(line.number);
                }
                _ => last = None,
            }
        }
        for (start, script) in blocks {
            ran += 1;
            let dir = crate::support::Scratch::new("docs-offline");
            let out = crate::support::Run::program("sh", &["-e", "-c", &script])
                .cwd(&dir.path)
                .env("PATH", &path)
                .env("HOME", &dir.path)
                .output();
            assert_eq!(
                out.code,
                Some(0),
                "{}:{start}: the offline block failed:\n{script}\nstdout: {}\nstderr: {}",
                page.display(),
                out.stdout,
                out.stderr
            );
        }
    }
    assert!(ran >= 1, "no ```sh offline block found");
}

/// The subcommands a `--help` text lists under "Commands:".
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Help is for users, who have no SPEC: no "SPEC §22" in any command's `--help`
/// (`hosts --help` showed one).
#[test]
fn no_help_text_names_the_spec() {
    let mut pending: Vec<Vec<String>> = vec![vec![]];
    let mut seen = 0;
    while let Some(words) = pending.pop() {
        let out = Command::new(env!("CARGO_BIN_EXE_agent-runner"))
            .args(&words)
            .arg("--help")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "agent-runner {words:?} --help: {out:?}"
        );
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(
            !help.contains("SPEC"),
            "agent-runner {} --help names the spec:\n{help}",
            words.join(" ")
        );
        seen += 1;
        for sub in subcommands(&help) {
            let mut next = words.clone();
            next.push(sub);
            pending.push(next);
        }
    }
    assert!(seen > 20, "only {seen} help texts found");
}

/// `make sandbox-image` fills the tools volume with the release binary it builds,
/// not with a debug build compiled just for that (`cargo run`).
#[test]
fn make_sandbox_image_uses_the_release_build() {
    let out = Command::new("make")
        .args(["-n", "sandbox-image"])
        .current_dir(top())
        .output()
        .expect("make");
    assert!(out.status.success(), "make -n sandbox-image: {out:?}");
    let recipe = String::from_utf8(out.stdout).unwrap();
    assert!(!recipe.contains("cargo run"), "{recipe}");
    let build = recipe.find("build --release").expect(&recipe);
    let install = recipe
        .find("target/release/agent-runner tools install")
        .expect(&recipe);
    assert!(build < install, "{recipe}");
}

/// The README's first paragraph names every API Meta speaks (it once said "Chat
/// Completions or the Codex CLI" only), and says the default image has node and
/// npm only where that is true: when it was built from a registry's node image.
#[test]
fn the_readme_tells_meta_s_apis_and_the_default_image_s_tools_truly() {
    let readme = std::fs::read_to_string(top().join("README.md")).unwrap();
    let intro: String = readme
        .lines()
        .skip(1)
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    for api in [
        "Responses",
        "Chat Completions",
        "Anthropic Messages",
        "Codex CLI",
    ] {
        assert!(
            intro.contains(api),
            "the intro does not name {api}: {intro}"
        );
    }
    let flat = readme.replace('\n', " ");
    for sentence in flat.split(". ").filter(|s| s.contains("node and npm")) {
        assert!(
            sentence.contains("registry"),
            "node and npm are in the default image only when built from a registry: {sentence}"
        );
    }
}
